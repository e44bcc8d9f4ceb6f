/* rt-core.c — what every model shares: listeners, the stop protocol, the
 * monotonic clock, the per-thread worker pointer, counters. Admission is
 * rt-admit.c, the threads model rt-threads.c, the coroutine models
 * rt-sched.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ktcp-net.h"
#include "rt-internal.h"

struct rt_global rt_g = {.stop_fd = -1};
/* counters of the threads that are not coroutine workers (rt.h) */
static _Atomic uint64_t counters_shared[RT_NCOUNTERS];

/* The worker of the calling thread. noinline and never cached by callers
 * across a wait: in the mn model the thread can change (rt.h). */
static __thread struct rt_worker *tls_worker;

__attribute__((noinline)) void rt_worker_set_self(struct rt_worker *w)
{
    tls_worker = w;
}

__attribute__((noinline)) struct rt_worker *rt_worker_self_full(void)
{
    return tls_worker;
}

__attribute__((noinline)) void *rt_worker_data(void)
{
    return tls_worker->data;
}

__attribute__((noinline)) bool rt_worker_ticks(void)
{
    return tls_worker->id >= 0;
}

int rt_worker_data_init(struct rt_worker *w)
{
    size_t n = rt_g.cfg->worker_data_size;
    w->data = NULL;
    if (!n)
        return 0;
    w->data = calloc(1, n);
    return w->data ? 0 : -ENOMEM;
}

void rt_worker_flush(struct rt_worker *w)
{
    if (w->data && rt_g.cfg->worker_flush)
        rt_g.cfg->worker_flush(w->data);
}

void rt_worker_data_exit(struct rt_worker *w)
{
    if (!w->data)
        return;
    rt_worker_flush(w);
    if (rt_g.cfg->worker_exit)
        rt_g.cfg->worker_exit(w->data);
    free(w->data);
    w->data = NULL;
}

const char *rt_name(void)
{
    return rt_g.cfg && rt_g.cfg->name ? rt_g.cfg->name : "ktcp";
}

uint64_t rt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define RT_IDLE_NEVER_MS (24ULL * 3600 * 1000)

uint64_t rt_idle_deadline(uint64_t now_ms)
{
    int ms = rt_g.cfg->idle_timeout_ms;
    return now_ms + (ms > 0 ? (uint64_t) ms : RT_IDLE_NEVER_MS);
}

bool rt_stopping(void)
{
    return atomic_load_explicit(&rt_g.stopping, memory_order_relaxed);
}

void rt_count(int which, uint64_t n)
{
    struct rt_worker *w = rt_worker_self_full();
    if (w && w->id >= 0) {
        /* only this thread writes its array: no locked instruction */
        _Atomic uint64_t *v = &w->counters[which];
        atomic_store_explicit(v,
                              atomic_load_explicit(v, memory_order_relaxed) + n,
                              memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&counters_shared[which], n, memory_order_relaxed);
}

void rt_counters_sum(uint64_t out[RT_NCOUNTERS])
{
    for (int i = 0; i < RT_NCOUNTERS; i++)
        out[i] =
            atomic_load_explicit(&counters_shared[i], memory_order_relaxed);
    if (rt_g.cfg && rt_g.cfg->model != RT_MODEL_THREADS)
        rt_counters_add_workers(out);
}

bool rt_conn_still_sending(struct rt_conn *c)
{
    int unacked;
    if (ioctl(c->fd, SIOCOUTQ, &unacked) < 0 || unacked <= 0)
        return false;
    if (c->idle_unacked && unacked >= c->idle_unacked)
        return false;
    c->idle_unacked = unacked;
    return true;
}

const char *rt_conn_peer(struct rt_conn *c)
{
    if (!c->peer[0] && c->peer_family &&
        !inet_ntop(c->peer_family, c->peer_addr, c->peer, sizeof(c->peer)))
        c->peer[0] = '\0';
    return c->peer[0] ? c->peer : "-";
}

void rt_tune_accepted(int fd)
{
    /* Heads leave with MSG_MORE and bodies with sendfile, so Nagle would
     * only delay the last segment of each response. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int rt_open_listener(const struct rt_config *cfg, bool reuseport)
{
    int fd = ktcp_listen_tcp(cfg->bind, cfg->port,
                             cfg->backlog > 0 ? cfg->backlog : 1024, reuseport);
    if (fd == -EINVAL) {
        fprintf(stderr, "%s: --bind %s: not a numeric IP address\n", rt_name(),
                cfg->bind ? cfg->bind : "(any)");
        return fd;
    }
    if (fd < 0) {
        fprintf(stderr, "%s: --bind %s --port %d: %s\n", rt_name(),
                cfg->bind ? cfg->bind : "(any)", cfg->port, strerror(-fd));
        return fd;
    }
    /* the threads model blocks in accept(2) */
    if (cfg->model == RT_MODEL_THREADS &&
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

/* systemd's socket activation (the sd_listen_fds(3) protocol, read without
 * libsystemd): when LISTEN_PID is this process, descriptor 3 is a socket
 * already bound and listening, and it is served instead of --bind/--port.
 * -ENOENT when there is none; more than one: the first is served. */
static int inherited_listener(const struct rt_config *cfg)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    if (!pid || !fds || strtol(pid, NULL, 10) != (long) getpid())
        return -ENOENT;
    long n = strtol(fds, NULL, 10);
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    if (n < 1)
        return -ENOENT;
    if (n > 1)
        fprintf(stderr,
                "%s: %ld sockets passed by systemd; serving the "
                "first\n",
                rt_name(), n);
    int fd = 3, type = 0, listening = 0;
    socklen_t l = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 ||
        type != SOCK_STREAM ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening,
                   &(socklen_t){sizeof(listening)}) < 0 ||
        !listening) {
        fprintf(stderr,
                "%s: the socket passed by systemd is not a "
                "listening stream socket\n",
                rt_name());
        return -EINVAL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (cfg->model == RT_MODEL_THREADS)
        fl &= ~O_NONBLOCK;
    else
        fl |= O_NONBLOCK;
    if (fl < 0 || fcntl(fd, F_SETFL, fl) < 0 ||
        fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return -errno;
    return fd;
}

bool rt_socket_activated(void)
{
    return rt_g.inherited;
}

/* ---- start, stop, finish ---- */

int rt_start(const struct rt_config *cfg)
{
    rt_g.cfg = cfg;
    int err = rt_admit_init(cfg);
    if (err < 0)
        return err;
    rt_g.stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (rt_g.stop_fd < 0)
        return -errno;
    int n = cfg->model == RT_MODEL_EPOLL ? cfg->workers : 1;
    if (n > (int) (sizeof(rt_g.listen_fds) / sizeof(rt_g.listen_fds[0])))
        n = sizeof(rt_g.listen_fds) / sizeof(rt_g.listen_fds[0]);
    int inherited = inherited_listener(cfg);
    if (inherited == -EINVAL)
        return inherited;
    if (inherited >= 0) {
        /* one socket: every epoll worker waits on it (EPOLLEXCLUSIVE) */
        rt_g.inherited = true;
        for (int i = 0; i < n; i++)
            rt_g.listen_fds[rt_g.nlisten++] = inherited;
    }
    for (int i = 0; i < n && !rt_g.inherited; i++) {
        int fd = rt_open_listener(cfg, cfg->model == RT_MODEL_EPOLL);
        if (fd < 0)
            return fd;
        rt_g.listen_fds[rt_g.nlisten++] = fd;
    }
    if (cfg->listening) {
        err = cfg->listening();
        if (err)
            return err < 0 ? err : -EPERM;
    }
    if (cfg->model == RT_MODEL_THREADS) {
        return rt_run_threads();
    }
    return rt_run_coro(cfg);
}

void rt_stop(void)
{
    if (atomic_exchange(&rt_g.stopping, true))
        return;
    uint64_t one = 1;
    if (write(rt_g.stop_fd, &one, sizeof(one)) < 0) {
        /* cannot fail for a fresh eventfd; stopping is polled anyway */
    }
    /* shutdown, not close: a worker may still hold the fd number, and a
     * closed number could be reused by an accept. Blocked accepts return. */
    for (int i = 0; i < rt_g.nlisten && !rt_g.inherited; i++)
        shutdown(rt_g.listen_fds[i], SHUT_RDWR);
    if (rt_g.cfg->model == RT_MODEL_THREADS)
        rt_threads_wake_all(); /* threads waiting for a connection exit */
    if (rt_g.cfg->model != RT_MODEL_THREADS)
        rt_wake_all();
}

void rt_finish(void)
{
    /* in-flight responses finish; each wait is bounded by the timeouts */
    while (rt_live_conns() > 0)
        usleep(10000);
    atomic_store(&rt_g.exiting, true);
    if (rt_g.cfg->model == RT_MODEL_THREADS) {
        rt_join_threads();
    } else {
        rt_wake_all();
        rt_join_coro();
    }
    for (int i = 0; i < (rt_g.inherited ? 1 : rt_g.nlisten); i++)
        close(rt_g.listen_fds[i]);
    urcu_memb_barrier(); /* run pending call_rcu callbacks */
}
