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
 * stderr.
 *
 * The hash hides where SYNs come from, so while it decides, every
 * STEER_SAMPLE_EVERY-th accepted connection is asked which CPU made it
 * (SO_INCOMING_CPU: the one that ran the softirq of the segment the
 * kernel made the socket from), and when over a second at least
 * STEER_MIN_SAMPLES of them came in and no CPU had STEER_BACK_PCT % or
 * more, the program steers by CPU again and the server says so: a burst
 * from one client thread, or a while on one NIC queue, does not cost the
 * rest of the server's life. The two thresholds are apart so that SYNs
 * spread near the line do not switch the program every second. */
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
#define STEER_SAMPLE_EVERY 4
#define STEER_MIN_SAMPLES (STEER_MIN_ACCEPTS / STEER_SAMPLE_EVERY)
#define STEER_BACK_PCT 75

/* never started (a --accept-steer hash, one listener, systemd's socket,
 * workers not one per CPU), steering, or handed to the hash by a skew */
enum { STEER_NEVER, STEER_ON, STEER_OFF };

static atomic_int state;
static _Atomic uint64_t window_start_ms;
static pthread_mutex_t judge_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seen[256]; /* under judge_lock */
/* STEER_OFF: sampled connections by the CPU that made them, this window */
static _Atomic uint64_t incoming[256];

/* The program on every group of listeners: by CPU or by the hash. On a
 * failure the groups already switched go back. */
static int steer_all(unsigned n, bool by_cpu)
{
    int err = ktcp_reuseport_steer(rt_g.listen_fds[0], n, by_cpu);

    if (!err && rt_g.nlisten2) {
        err = ktcp_reuseport_steer(rt_g.listen_fds2[0], n, by_cpu);
        if (err)
            ktcp_reuseport_steer(rt_g.listen_fds[0], n, !by_cpu);
    }
    return err;
}

bool rt_steer_start(void)
{
    int n = rt_g.nlisten;

    if (rt_g.inherited || n < 2 || !rt_g.cfg->accept_steer ||
        !ktcp_one_per_cpu(n))
        return false;
    /* listeners join their group in the order they listen: index i is
     * worker i's */
    if (steer_all((unsigned) n, true) < 0)
        return false;
    atomic_store(&window_start_ms, rt_now_ms());
    atomic_store(&state, STEER_ON);
    return true;
}

bool rt_steer_due(uint64_t now_ms)
{
    return atomic_load_explicit(&state, memory_order_relaxed) != STEER_NEVER &&
           now_ms - atomic_load_explicit(&window_start_ms,
                                         memory_order_relaxed) >=
               STEER_WINDOW_MS;
}

void rt_steer_sample(int fd, uint64_t accepted)
{
    int cpu;
    socklen_t len = sizeof(cpu);

    if (atomic_load_explicit(&state, memory_order_relaxed) != STEER_OFF ||
        accepted % STEER_SAMPLE_EVERY)
        return;
    if (!getsockopt(fd, SOL_SOCKET, SO_INCOMING_CPU, &cpu, &len) && cpu >= 0 &&
        cpu < rt_g.nlisten)
        atomic_fetch_add_explicit(&incoming[cpu], 1, memory_order_relaxed);
}

/* STEER_OFF: this window's samples; back to steering when they are
 * spread. Under judge_lock. */
static void judge_samples(int n)
{
    uint64_t total = 0, most = 0;
    int cpus = 0;

    for (int i = 0; i < n; i++) {
        uint64_t v =
            atomic_exchange_explicit(&incoming[i], 0, memory_order_relaxed);

        total += v;
        cpus += v > 0;
        if (v > most)
            most = v;
    }
    if (total < STEER_MIN_SAMPLES || most * 100 >= total * STEER_BACK_PCT ||
        steer_all((unsigned) n, true))
        return;
    atomic_store(&state, STEER_ON);
    fprintf(stderr,
            "%s: accept steering by CPU back on: new connections came in on "
            "%d CPUs, the busiest %llu of %llu sampled\n",
            rt_name(), cpus, (unsigned long long) most,
            (unsigned long long) total);
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
    if (atomic_load(&state) == STEER_OFF) {
        judge_samples(n);
    } else if (total >= STEER_MIN_ACCEPTS &&
               most * 100 >= total * STEER_SKEW_PCT) {
        if (!steer_all((unsigned) n, false)) {
            atomic_store(&state, STEER_OFF);
            fprintf(stderr,
                    "%s: accept steering by CPU off: worker %d took %llu "
                    "of %llu connections (new SYNs reach one CPU); the "
                    "kernel's hash spreads them until they come in on "
                    "several CPUs again\n",
                    rt_name(), who, (unsigned long long) most,
                    (unsigned long long) total);
        }
    }
    pthread_mutex_unlock(&judge_lock);
}
