/* rt-threads.c — the threads model: one blocking thread per live
 * connection.
 *
 * A thread serves one connection at a time, but it is not made per
 * connection: when its connection ends it waits, up to THREAD_KEEP_MS, for
 * the next one the acceptor hands over, so a stream of short connections
 * runs on a few threads. The acceptor makes a thread only when none waits. */

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rt-internal.h"

#define THREAD_KEEP_MS 10000

static pthread_t threads_acceptor;
/* An accepted connection on its way to a thread. */
struct handoff {
    struct rt_conn c;
    struct handoff *next;
};
static struct {
    pthread_mutex_t lock;
    pthread_cond_t handed; /* a connection was handed over, or stopping */
    struct handoff *queue; /* handed over, not yet taken */
    struct handoff **tail;
    int idle;   /* threads waiting for a connection */
    int queued; /* connections in the queue */
} pool = {PTHREAD_MUTEX_INITIALIZER,
          PTHREAD_COND_INITIALIZER,
          NULL,
          &pool.queue,
          0,
          0};

/* Give c to a waiting thread; false if none waits for it. */
static bool pool_hand_over(struct handoff *c)
{
    pthread_mutex_lock(&pool.lock);
    bool taken = pool.idle > pool.queued;
    if (taken) {
        c->next = NULL;
        *pool.tail = c;
        pool.tail = &c->next;
        pool.queued++;
        pthread_cond_signal(&pool.handed);
    }
    pthread_mutex_unlock(&pool.lock);
    return taken;
}

/* The next connection for a thread whose connection ended; NULL: exit. */
static struct handoff *pool_wait(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += THREAD_KEEP_MS / 1000;
    pthread_mutex_lock(&pool.lock);
    pool.idle++;
    int r = 0;
    while (!pool.queue && !rt_stopping() && r != ETIMEDOUT)
        r = pthread_cond_timedwait(&pool.handed, &pool.lock, &until);
    pool.idle--;
    struct handoff *c = pool.queue;
    if (c) {
        pool.queue = c->next;
        if (!pool.queue)
            pool.tail = &pool.queue;
        pool.queued--;
    }
    pthread_mutex_unlock(&pool.lock);
    return c;
}

void rt_threads_wake_all(void)
{
    pthread_mutex_lock(&pool.lock);
    pthread_cond_broadcast(&pool.handed);
    pthread_mutex_unlock(&pool.lock);
}

static void serve_conn(struct handoff *h, struct rt_worker *w)
{
    struct rt_conn c = h->c;
    free(h);
    /* between requests the thread sleeps in poll, and the handler starts
     * afresh when bytes arrive: the same contract as the coroutines'; the
     * clock is read once per wake-up, as a loop reads it (rt_loop_now_ms) */
    w->loop_now_ms = rt_now_ms();
    while (rt_g.cfg->handler(&c) == RT_IDLE) {
        /* this thread may now sleep for a whole idle timeout: its log
         * lines go out first (one write per burst of requests) */
        rt_worker_flush(w);
        int r;
        do {
            r = rt_wait(&c, POLLIN, rt_idle_deadline(w->loop_now_ms), true);
            if (r == -ETIMEDOUT) /* a poll that woke sets it, not this */
                w->loop_now_ms = rt_now_ms();
        } while (r == -ETIMEDOUT && rt_conn_still_sending(&c));
        c.idle_unacked = 0;
        if (r == -ETIMEDOUT)
            rt_count(RT_C_TIMEOUTS, 1);
        if (r < 0)
            break;
    }
    rt_conn_io_release(&c);
    close(c.fd);
    rt_worker_flush(w);
    rt_conn_release(&c);
}

static void *conn_thread(void *arg)
{
    struct rt_worker w;
    memset(&w, 0, sizeof(w));
    w.id = -1;
    w.loop_now_ms = rt_now_ms();
    if (rt_worker_data_init(&w) < 0) {
        /* no state for the handler: this thread serves nothing */
        struct handoff *c = arg;
        close(c->c.fd);
        rt_count(RT_C_ERRORS, 1);
        rt_conn_release(&c->c);
        free(c);
        return NULL;
    }
    rt_worker_set_self(&w);
    urcu_memb_register_thread();
    for (struct handoff *c = arg; c; c = pool_wait())
        serve_conn(c, &w);
    urcu_memb_unregister_thread();
    rt_worker_data_exit(&w);
    return NULL;
}

static void *accept_main(void *arg)
{
    (void) arg;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    bool alternate = false;
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int which = 0;
        if (rt_g.inherited || rt_g.nlisten2) {
            /* the socket is systemd's too and is never shut down, or there
             * are two listeners: wait for a client or the stop, not in
             * accept() */
            struct pollfd pf[3] = {
                {rt_g.listen_fds[0], POLLIN, 0},
                {rt_g.stop_fd, POLLIN, 0},
                {rt_g.nlisten2 ? rt_g.listen_fds2[0] : -1, POLLIN, 0}};
            if (poll(pf, 3, -1) < 0 && errno != EINTR)
                break;
            if (rt_stopping())
                break;
            if (pf[2].revents & POLLIN)
                which = !(pf[0].revents & POLLIN) || alternate;
            else if (!(pf[0].revents & POLLIN))
                continue;
            alternate = !alternate; /* both ready: take turns */
        }
        int fd =
            accept4(which ? rt_g.listen_fds2[0] : rt_g.listen_fds[0],
                    (struct sockaddr *) &ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (rt_stopping())
                break;
            rt_count(RT_C_ERRORS, 1);
            if (errno == EMFILE || errno == ENFILE)
                usleep(10000);
            else if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN)
                usleep(100000); /* a listener gone bad: do not spin */
            continue;
        }
        struct handoff *c = calloc(1, sizeof(*c));
        pthread_t t;
        if (!c) {
            rt_count(RT_C_ERRORS, 1);
            close(fd);
            continue;
        }
        c->c.fd = fd;
        c->c.listener = (unsigned char) which;
        rt_conn_set_peer(&c->c, (struct sockaddr *) &ss);
        if (rt_stopping() || !rt_conn_admit(&c->c)) {
            close(fd);
            free(c);
            continue;
        }
        if (pool_hand_over(c))
            continue;
        if (pthread_create(&t, &attr, conn_thread, c) == 0)
            continue;
        rt_count(RT_C_ERRORS, 1);
        close(fd);
        rt_conn_release(&c->c);
        free(c);
    }
    pthread_attr_destroy(&attr);
    return NULL;
}

int rt_run_threads(void)
{
    return -pthread_create(&threads_acceptor, NULL, accept_main, NULL);
}

void rt_join_threads(void)
{
    pthread_join(threads_acceptor, NULL);
}
