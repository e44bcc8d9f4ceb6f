/* rt-steer.c — which worker accepts a connection (epoll and mn).
 *
 * Each worker has its own SO_REUSEPORT listener, and by default the kernel
 * picks one by a hash of the addresses: a connection whose SYN was taken
 * on CPU 0 is as likely to land on the worker running on CPU 1, and its
 * accept, reads, writes and close then pull the socket's cache lines and
 * wake-ups across CPUs. With one worker per CPU, a classic BPF program on
 * the group (SO_ATTACH_REUSEPORT_CBPF: no privilege needed) picks the
 * listener of the worker numbered as the CPU that runs the SYN's softirq
 * (SKF_AD_CPU), and the scheduler keeps that worker there, so a
 * connection's work stays on one CPU (docs/httpd.md, BENCHMARKS.md).
 *
 * That spreads connections only as far as the network spreads SYNs over
 * the CPUs (several NIC queues, RPS, or clients on loopback on every CPU).
 * With all SYNs on one CPU (a NIC with one queue and no RPS, one client
 * thread on loopback) one worker would take every connection, so the
 * program is replaced by one that asks the kernel's hash again when, over
 * a second with at least STEER_MIN_ACCEPTS connections, one worker
 * accepted STEER_SKEW_PCT % or more of them; the server says so on
 * stderr, and steering stays off until it is restarted. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "ktcp-net.h"
#include "rt-internal.h"

#define STEER_MIN_ACCEPTS 256
#define STEER_SKEW_PCT 90
#define STEER_WINDOW_MS 1000

static atomic_bool steering;
static _Atomic uint64_t window_start_ms;
static pthread_mutex_t judge_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seen[256]; /* under judge_lock */

bool rt_steer_start(void)
{
    int n = rt_g.nlisten;

    if (rt_g.inherited || n < 2 || !rt_g.cfg->accept_steer ||
        !ktcp_one_per_cpu(n))
        return false;
    /* listeners join their group in the order they listen: index i is
     * worker i's */
    if (ktcp_reuseport_steer(rt_g.listen_fds[0], (unsigned) n, true) < 0 ||
        (rt_g.nlisten2 &&
         ktcp_reuseport_steer(rt_g.listen_fds2[0], (unsigned) n, true) < 0))
        return false;
    atomic_store(&window_start_ms, rt_now_ms());
    atomic_store(&steering, true);
    return true;
}

static bool rt_steer_on(void)
{
    return atomic_load_explicit(&steering, memory_order_relaxed);
}

bool rt_steer_due(uint64_t now_ms)
{
    return rt_steer_on() &&
           now_ms - atomic_load_explicit(&window_start_ms,
                                         memory_order_relaxed) >=
               STEER_WINDOW_MS;
}

void rt_steer_judge(uint64_t now_ms, const uint64_t *accepted, int n)
{
    if (n > (int) (sizeof(seen) / sizeof(seen[0])) ||
        pthread_mutex_trylock(&judge_lock))
        return;
    uint64_t total = 0, most = 0;
    int who = 0;

    for (int i = 0; i < n; i++) {
        uint64_t d = accepted[i] - seen[i];

        seen[i] = accepted[i];
        total += d;
        if (d > most) {
            most = d;
            who = i;
        }
    }
    atomic_store(&window_start_ms, now_ms);
    if (rt_steer_on() && total >= STEER_MIN_ACCEPTS &&
        most * 100 >= total * STEER_SKEW_PCT) {
        int err = ktcp_reuseport_steer(rt_g.listen_fds[0], (unsigned) n, false);

        if (!err && rt_g.nlisten2)
            err =
                ktcp_reuseport_steer(rt_g.listen_fds2[0], (unsigned) n, false);
        if (!err) {
            atomic_store(&steering, false);
            fprintf(stderr,
                    "%s: accept steering by CPU off: worker %d took %llu "
                    "of %llu connections (new SYNs reach one CPU); the "
                    "kernel's hash spreads them from now on\n",
                    rt_name(), who, (unsigned long long) most,
                    (unsigned long long) total);
        }
    }
    pthread_mutex_unlock(&judge_lock);
}
