/*
 * One event loop per worker thread, each with its own SO_REUSEPORT listener.
 * Edge-triggered epoll done right: every event is drained to EAGAIN, and a
 * connection whose client stops reading keeps its unsent bytes and stops
 * reading until EPOLLOUT says the client can take more (backpressure: nothing
 * is dropped, nothing blocks). Idle connections sit on a per-worker list kept
 * in order of last activity, so expiring them is O(1) per connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "echo.h"
#include "ktcp-net.h"

#define ECHO_BUF_SIZE 16384
/* Receives per event before other connections get their turn. */
#define ECHO_BUDGET 16
#define ECHO_MAX_EVENTS 256

struct echo_conn {
    int fd;
    bool peer_closed;
    bool on_ready_list;
    uint32_t out_off, out_len;
    uint64_t last_active_ms;
    int unacked; /* SIOCOUTQ when last looked at: a moving one is activity */
    struct echo_conn *idle_prev, *idle_next; /* oldest first */
    struct echo_conn *ready_next;
    uint8_t buf[ECHO_BUF_SIZE];
};

struct echo_loop {
    struct echo_worker *worker;
    struct echo_conn *idle_head, *idle_tail;
    struct echo_conn *ready_head, *ready_tail;
    uint64_t accept_resume_ms; /* 0: accepting; else paused until then */
};

/* How long accepting pauses when the process is out of descriptors. */
#define ECHO_ACCEPT_PAUSE_MS 100

atomic_uint echo_active_conns;
static const struct echo_options *echo_opt;

void echo_worker_set_options(const struct echo_options *opt)
{
    echo_opt = opt;
}

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define count(w, field, n) \
    atomic_fetch_add_explicit(&(w)->counters.field, (n), memory_order_relaxed)

static void idle_unlink(struct echo_loop *loop, struct echo_conn *c)
{
    if (c->idle_prev)
        c->idle_prev->idle_next = c->idle_next;
    else
        loop->idle_head = c->idle_next;
    if (c->idle_next)
        c->idle_next->idle_prev = c->idle_prev;
    else
        loop->idle_tail = c->idle_prev;
    c->idle_prev = c->idle_next = NULL;
}

static void idle_append(struct echo_loop *loop, struct echo_conn *c)
{
    c->idle_prev = loop->idle_tail;
    c->idle_next = NULL;
    if (loop->idle_tail)
        loop->idle_tail->idle_next = c;
    else
        loop->idle_head = c;
    loop->idle_tail = c;
}

static void touch(struct echo_loop *loop, struct echo_conn *c)
{
    c->last_active_ms = now_ms();
    if (loop->idle_tail != c) {
        idle_unlink(loop, c);
        idle_append(loop, c);
    }
}

static void conn_close(struct echo_loop *loop, struct echo_conn *c)
{
    struct echo_conn **pp;

    if (c->on_ready_list) { /* rare: closed while waiting for a turn */
        struct echo_conn *prev = NULL;

        for (pp = &loop->ready_head; *pp != c; pp = &(*pp)->ready_next)
            prev = *pp;
        *pp = c->ready_next;
        if (loop->ready_tail == c)
            loop->ready_tail = prev;
    }
    idle_unlink(loop, c);
    close(c->fd); /* also removes it from the epoll set */
    free(c);
    atomic_fetch_sub(&echo_active_conns, 1);
}

static void ready_push(struct echo_loop *loop, struct echo_conn *c)
{
    if (c->on_ready_list)
        return;
    c->on_ready_list = true;
    c->ready_next = NULL;
    if (loop->ready_tail)
        loop->ready_tail->ready_next = c;
    else
        loop->ready_head = c;
    loop->ready_tail = c;
}

/* Returns 0 when all pending bytes went, -EAGAIN, or -errno. */
static int conn_flush(struct echo_loop *loop, struct echo_conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->buf + c->out_off, c->out_len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        c->out_off += n;
        touch(loop, c); /* a slow reader is not idle */
        count(loop->worker, bytes_out, n);
    }
    c->out_off = c->out_len = 0;
    return 0;
}

/* Runs a connection until it would block; false when it was closed. */
static bool conn_run(struct echo_loop *loop, struct echo_conn *c)
{
    int err;

    for (int budget = ECHO_BUDGET; budget > 0; budget--) {
        ssize_t n;

        err = conn_flush(loop, c);
        if (err == -EAGAIN)
            return true; /* EPOLLOUT brings us back */
        if (err < 0)
            goto error;
        if (c->peer_closed)
            goto close; /* everything the client sent went back */

        n = recv(c->fd, c->buf, sizeof(c->buf), MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return true;
            err = -errno;
            goto error;
        }
        touch(loop, c);
        if (n == 0) {
            c->peer_closed = true;
            continue;
        }
        c->out_len = n;
        count(loop->worker, messages, 1);
        count(loop->worker, bytes_in, n);
    }
    ready_push(loop, c); /* still busy: continue after the others */
    return true;

error:
    if (err != -ECONNRESET && err != -EPIPE)
        count(loop->worker, errors, 1);
close:
    conn_close(loop, c);
    return false;
}

static void accept_all(struct echo_loop *loop)
{
    struct echo_worker *w = loop->worker;

    for (;;) {
        int fd = accept4(w->listen_fd, NULL, NULL, SOCK_NONBLOCK);
        struct echo_conn *c;
        struct epoll_event ev;
        int one = 1;

        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN)
                return;
            count(w, errors, 1);
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                errno == ENOMEM) {
                /*
                 * The listener is level-triggered: left armed it would wake
                 * us at once, forever, while nothing can be accepted. Mute it
                 * for a moment; connections closing meanwhile free room.
                 */
                struct epoll_event ev = {.events = 0,
                                         .data.ptr = &w->listen_fd};

                epoll_ctl(w->epoll_fd, EPOLL_CTL_MOD, w->listen_fd, &ev);
                loop->accept_resume_ms = now_ms() + ECHO_ACCEPT_PAUSE_MS;
            }
            return;
        }
        if (atomic_fetch_add(&echo_active_conns, 1) >= echo_opt->max_conns) {
            atomic_fetch_sub(&echo_active_conns, 1);
            count(w, refused, 1);
            close(fd);
            continue;
        }
        c = calloc(1, sizeof(*c));
        if (!c) {
            atomic_fetch_sub(&echo_active_conns, 1);
            count(w, errors, 1);
            close(fd);
            continue;
        }
        c->fd = fd;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
        ev.data.ptr = c;
        if (epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            atomic_fetch_sub(&echo_active_conns, 1);
            count(w, errors, 1);
            close(fd);
            free(c);
            continue;
        }
        c->last_active_ms = now_ms();
        idle_append(loop, c);
        count(w, accepted, 1);
        /* The first EPOLLIN edge will come; nothing to do until then. */
    }
}

static int expire_idle(struct echo_loop *loop)
{
    uint64_t timeout = echo_opt->idle_timeout_ms, now;

    if (!timeout)
        return -1;
    now = now_ms();
    while (loop->idle_head) {
        struct echo_conn *c = loop->idle_head;
        uint64_t deadline = c->last_active_ms + timeout;
        int unacked;

        if (deadline > now)
            return (int) (deadline - now);
        /* Bytes the client acknowledged since: it reads, slowly. */
        if (ioctl(c->fd, SIOCOUTQ, &unacked) == 0 && unacked != c->unacked) {
            c->unacked = unacked;
            touch(loop, c);
            continue;
        }
        count(loop->worker, timeouts, 1);
        conn_close(loop, c);
    }
    return -1;
}

void *echo_worker_run(void *arg)
{
    struct echo_loop loop = {.worker = arg};
    struct echo_worker *w = arg;
    struct epoll_event events[ECHO_MAX_EVENTS];
    bool stopping = false;

    while (!stopping) {
        int wait_ms = expire_idle(&loop);
        int n;

        if (loop.accept_resume_ms) {
            uint64_t now = now_ms();

            if (now >= loop.accept_resume_ms) {
                struct epoll_event ev = {.events = EPOLLIN,
                                         .data.ptr = &w->listen_fd};

                epoll_ctl(w->epoll_fd, EPOLL_CTL_MOD, w->listen_fd, &ev);
                loop.accept_resume_ms = 0;
            } else if (wait_ms < 0 ||
                       (uint64_t) wait_ms > loop.accept_resume_ms - now) {
                wait_ms = (int) (loop.accept_resume_ms - now);
            }
        }
        if (loop.ready_head)
            wait_ms = 0;
        else if (wait_ms < 0 || wait_ms > 1000)
            wait_ms = 1000;
        n = epoll_wait(w->epoll_fd, events, ECHO_MAX_EVENTS, wait_ms);
        if (n < 0 && errno != EINTR) {
            perror("ktcp-echo: epoll_wait");
            break;
        }
        for (int i = 0; i < n; i++) {
            void *p = events[i].data.ptr;

            if (p == &w->listen_fd)
                accept_all(&loop);
            else if (p == &w->wake_fd)
                stopping = true;
            else
                conn_run(&loop, p);
        }
        /* Connections that used their budget get one more turn each. */
        struct echo_conn *ready = loop.ready_head;

        loop.ready_head = loop.ready_tail = NULL;
        while (ready) {
            struct echo_conn *c = ready;

            ready = c->ready_next;
            c->on_ready_list = false;
            conn_run(&loop, c);
        }
    }
    while (loop.idle_head)
        conn_close(&loop, loop.idle_head);
    return NULL;
}

int echo_listen(const struct echo_options *opt)
{
    return ktcp_listen_tcp(opt->bind_addr, opt->port, opt->backlog, true);
}
