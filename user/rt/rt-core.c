/* rt-core.c — the runtime's lowest layer, what every model shares: the
 * process-wide state (rt_g), the per-thread worker pointer and its data,
 * the monotonic clock, counters, a connection's peer and tuning, opening a
 * listener. It calls into no other file of the runtime; the order above it
 * is rt-coro, rt-timer, rt-admit, rt-sched (the coroutine models), rt-io,
 * rt-threads (the threads model), rt-start (start, stop, finish). */
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
/* its own counters, or NULL (own_counters) */
static __thread _Atomic uint64_t *tls_counters;

__attribute__((noinline)) void rt_worker_set_self(struct rt_worker *w)
{
    tls_worker = w;
    tls_counters = w && w->id >= 0 ? w->counters : NULL;
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
    return rt_mono_ns() / 1000000u;
}

__attribute__((noinline)) uint64_t rt_loop_now_ms(void)
{
    const struct rt_worker *w = tls_worker;
    return w ? w->loop_now_ms : rt_now_ms();
}

__attribute__((noinline)) void rt_loop_clock_tick(void)
{
    struct rt_worker *w = tls_worker;
    if (w && w->id < 0)
        w->loop_now_ms = rt_now_ms();
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

/* The calling worker's own counters (only its thread writes them, so no
 * locked instruction), or NULL: a thread without a worker counts in the
 * shared array. */
static inline _Atomic uint64_t *own_counters(void)
{
    return tls_counters;
}

static inline void count_in(_Atomic uint64_t *own, int which, uint64_t n)
{
    if (own) {
        atomic_store_explicit(
            &own[which],
            atomic_load_explicit(&own[which], memory_order_relaxed) + n,
            memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&counters_shared[which], n, memory_order_relaxed);
}

/* noinline, as every reader of the thread's own data: the calling
 * coroutine may run on another thread after its next wait (rt.h) */
__attribute__((noinline)) void rt_count2(int a, int b)
{
    _Atomic uint64_t *own = own_counters();
    count_in(own, a, 1);
    count_in(own, b, 1);
}

__attribute__((noinline)) void rt_count(int which, uint64_t n)
{
    count_in(own_counters(), which, n);
}

void rt_counters_add_shared(uint64_t out[RT_NCOUNTERS])
{
    for (int i = 0; i < RT_NCOUNTERS; i++)
        out[i] +=
            atomic_load_explicit(&counters_shared[i], memory_order_relaxed);
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

int rt_open_listener(const struct rt_config *cfg, int port, bool reuseport)
{
    int fd = ktcp_listen_tcp(cfg->bind, port,
                             cfg->backlog > 0 ? cfg->backlog : 1024, reuseport);
    if (fd == -EINVAL) {
        fprintf(stderr, "%s: --bind %s: not a numeric IP address\n", rt_name(),
                cfg->bind ? cfg->bind : "(any)");
        return fd;
    }
    if (fd < 0) {
        fprintf(stderr, "%s: --bind %s --port %d: %s\n", rt_name(),
                cfg->bind ? cfg->bind : "(any)", port, strerror(-fd));
        return fd;
    }
    if (cfg->defer_accept_s > 0)
        ktcp_defer_accept(fd, cfg->defer_accept_s);
    /* the threads model blocks in accept(2) */
    if (cfg->model == RT_MODEL_THREADS &&
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}
