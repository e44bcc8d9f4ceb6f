/* rt-internal.h — what the runtime's own files share: coroutines, workers,
 * run queues and the timer heap. Nothing here is for the applications. */
#ifndef KTCP_RT_INTERNAL_H
#define KTCP_RT_INTERNAL_H

#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <urcu/urcu-memb.h>

#include "rt-switch.h"
#include "rt.h"

/* ---- system calls (rt-io.c, rt-sched.c) ---- */

/* The calls of every request and wake-up (recvfrom, sendmsg, epoll_pwait,
 * poll), made without libc: glibc's recv, sendmsg and epoll_wait are
 * cancellation points (two calls into its bookkeeping each), and its
 * syscall() is a call that moves every argument down one register and
 * stores a failure in errno, which the caller then reads back. The
 * runtime never cancels a thread and wants the error as a value. Returns
 * the result, or -errno. On x86-64 it is the syscall instruction itself:
 * number in rax, arguments in rdi, rsi, rdx, r10, r8, r9, and the kernel
 * clobbers rcx and r11 (the x86-64 psABI, appendix A.2); elsewhere it is
 * libc's syscall(). No errno is left to read after a switch (rt.h). */
#if defined(__x86_64__)
static inline long
rt_sys6(long nr, long a, long b, long c, long d, long e, long f)
{
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long ret;

    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8),
                       "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#else
#include <errno.h>
#include <unistd.h>
static inline long
rt_sys6(long nr, long a, long b, long c, long d, long e, long f)
{
    long ret = syscall(nr, a, b, c, d, e, f);
    return ret < 0 ? -errno : ret;
}
#endif

/* ---- coroutines (rt-coro.c) ---- */

/* Wait state of a coroutine, one atomic word: generation << 2 | state.
 * The generation grows at every park, so a timer that read the word for
 * one wait can never wake a later one (its CAS fails). */
enum {
    RT_ST_RUNNING = 0,  /* running or queued to run */
    RT_ST_WAITING = 1,  /* parked until an event, a timeout or a stop */
    RT_ST_NOTIFIED = 2, /* running, and an event came meanwhile */
    RT_ST_DEAD = 3,     /* handler returned; events are ignored */
};
#define RT_ST(w) ((w) &3u)
#define RT_GEN(w) ((w) & ~(uint64_t) 3u)

enum rt_wake { RT_WAKE_IO = 0, RT_WAKE_TIMEOUT, RT_WAKE_STOP };
enum rt_op { RT_OP_PARK, RT_OP_EXIT, RT_OP_IDLE };

/* A connection in a coroutine model. The header lives as long as the
 * connection (and a grace period more); the stack only while the handler
 * runs or waits mid-request: an idle keep-alive connection has none. */
struct rt_coro {
    void *sp;    /* saved stack pointer while switched out */
    void *stack; /* base of the stack mapping, NULL while idle */
    struct rt_conn conn;
    struct rt_worker *worker; /* thread running it now; set before resume */
    int epfd;                 /* epoll set the fd is registered in */
    bool registered;          /* in epfd: added at its first wait */
    bool armed_out;           /* EPOLLOUT added to the registration */
    _Atomic bool again;       /* waited after its first: a poll's aim */
    enum rt_op op;            /* what it asked of the scheduler */
    int wake_reason;          /* written by the waker that won the CAS */
    _Atomic uint64_t wstate;
    _Atomic uint64_t deadline; /* of the current wait, 0: none */
    _Atomic bool idle;         /* current wait may be cut by a stop */
    _Atomic int in_heap;       /* some worker's timer heap holds it */
    /* the worker whose heap holds it, and where; both only meaningful to
     * that worker (set and cleared by it alone) */
    struct rt_worker *_Atomic heap_owner;
    size_t heap_idx;
    _Atomic int refs;     /* alive + timer entries + transient */
    struct rt_coro *next; /* run queue link */
    /* link in the heap owner's rekey inbox (mn): a wait whose deadline is
     * earlier than the entry another worker's heap holds */
    struct rt_coro *rekey_next;
    _Atomic bool rekey_queued;
    struct rcu_head rcu;       /* freed after a grace period */
    struct rt_coro *dead_next; /* chain freed after one grace period */
} __attribute__((aligned(64)));

/* The runtime closes a connection: a transport the handler left set
 * (an idle one's, rt_io.release) is freed first. */
static inline void rt_conn_io_release(struct rt_conn *c)
{
    if (c->io && c->io->release)
        c->io->release(c);
    c->io = NULL;
    c->io_data = NULL;
}

struct rt_coro *rt_coro_new(int fd);
/* How many coroutines rt_coro_new has allocated (not taken from a pool). */
unsigned long rt_coro_allocs(void);
/* The stack of the last handler this thread saw return, kept with its
 * frame (rt-coro.c's coro_main, switched out after the handler returned)
 * as the start of the thread's next connection: serving an idle
 * connection's next message then resumes that frame instead of building
 * one on another stack. Only the thread that kept it resumes it, and the
 * frame learns whom it serves from next, set just before. */
struct rt_serve_slot {
    void *stack, *sp;
    struct rt_coro *next;
};
extern __thread struct rt_serve_slot rt_serve;

/* A fresh frame on a stack from the cache (or a new mapping); -ENOMEM. */
int rt_coro_start_fresh(struct rt_coro *co);
/* Into the cache: a free stack. */
void rt_coro_cache_stack(void *base);

/* Give co a stack whose frame starts the handler: the kept frame, or a
 * fresh one; -ENOMEM. The caller switches to co->sp next, on this thread. */
static inline int rt_coro_start(struct rt_coro *co)
{
    if (!rt_serve.stack)
        return rt_coro_start_fresh(co);
    co->stack = rt_serve.stack;
    co->sp = rt_serve.sp;
    rt_serve.stack = NULL;
    rt_serve.next = co;
    return 0;
}
/* Called once, before any worker starts. */
void rt_coro_set_handler(rt_handler_fn fn);
/* Take co's stack back once its handler has returned (co->op is RT_OP_IDLE
 * or RT_OP_EXIT): kept for this thread's next rt_coro_start, or cached. */
static inline void rt_coro_release_stack(struct rt_coro *co)
{
    void *base = co->stack;
    if (!base)
        return;
    co->stack = NULL;
    if (rt_serve.stack) {
        rt_coro_cache_stack(base);
        return;
    }
    rt_serve.stack = base;
    rt_serve.sp = co->sp;
}
void rt_coro_get(struct rt_coro *co);
/* Drop a reference; the last one frees the stack after a grace period, as
 * an epoll event naming it may still be in another worker's hands. */
void rt_coro_put(struct rt_coro *co);
/* How the calling thread frees the coroutines whose last reference it
 * drops (and, going back to ALONE at a worker's end, hands the stacks it
 * kept to the shared cache): each after its own grace period (ALONE: threads
 * that are not workers), gathered and freed at the next rt_coro_reap (PRIVATE:
 * an epoll worker, the only one that can hold events naming its coroutines), or
 * gathered and handed to call_rcu in batches (SHARED: mn workers). A change
 * first frees or hands over what the thread holds. */
enum rt_dead_mode { RT_DEAD_ALONE, RT_DEAD_PRIVATE, RT_DEAD_SHARED };
void rt_coro_thread_dead_mode(enum rt_dead_mode mode);
/* Free (PRIVATE) or hand over (SHARED, once they have waited long enough)
 * the gathered coroutines; called by a worker after handling a batch of
 * events, outside its read-side section. */
void rt_coro_reap(uint64_t now_ms);
/* The stacks' layout for a page size: a guard of one page below a stack
 * rounded up to whole pages. Set at load from sysconf(_SC_PAGESIZE); a
 * test may set another multiple of the page size before any stack exists. */
void rt_coro_stack_layout(size_t page);

/* ---- timers (rt-timer.c): a binary min-heap per worker ---- */

struct rt_timer_entry {
    uint64_t deadline;
    struct rt_coro *co;
};
struct rt_timer_heap {
    struct rt_timer_entry *v;
    size_t len, cap;
};
int rt_timer_push(struct rt_timer_heap *h,
                  uint64_t deadline,
                  struct rt_coro *co);
struct rt_timer_entry rt_timer_pop(struct rt_timer_heap *h);
void rt_timer_remove(struct rt_timer_heap *h, size_t idx);
/* Move entry idx to a new deadline, earlier or later. */
void rt_timer_update(struct rt_timer_heap *h, size_t idx, uint64_t deadline);
static inline const struct rt_timer_entry *rt_timer_top(
    const struct rt_timer_heap *h)
{
    return h->len ? &h->v[0] : NULL;
}

/* ---- run queues (rt-sched.c; inline here for the unit test) ---- */

/* An mn worker's run queue. Only its owner pushes (what it wakes: its
 * epoll events, accepts, timers, requeues, what it stole); the owner pops
 * from the head, and a peer whose own queue is empty steals the older half
 * from the head too. The lock is the owner's alone but for thieves, who
 * only try it: the owner never waits on a peer's queue, and a thief that
 * finds a queue locked tries another or comes back. len is read unlocked
 * as a hint (an empty queue is skipped without touching the lock).
 *
 * The lock is a spin lock: it is held for a few stores (a push, a pop) or
 * for one walk of half a queue (a steal), so the owner, the only one that
 * ever waits for it, spins; should the holder have lost its CPU, the
 * owner yields its own after RT_RUNQ_SPINS tries. (A mutex costs the owner
 * about 50 instructions more per push and pop uncontended.) */
#define RT_RUNQ_SPINS 128
struct rt_runq {
    pthread_spinlock_t lock;
    struct rt_coro *head, *tail;
    _Atomic size_t len;
} __attribute__((aligned(64)));

static inline void rt_runq_init(struct rt_runq *q)
{
    pthread_spin_init(&q->lock, PTHREAD_PROCESS_PRIVATE);
    q->head = q->tail = NULL;
    atomic_store_explicit(&q->len, 0, memory_order_relaxed);
}

/* The owner's lock of its own queue. */
static inline void rt_runq_lock(struct rt_runq *q)
{
    for (int spins = 0; pthread_spin_trylock(&q->lock) != 0; spins++) {
        if (spins >= RT_RUNQ_SPINS) {
            sched_yield();
            spins = 0;
        }
    }
}

static inline size_t rt_runq_len(const struct rt_runq *q)
{
    return atomic_load_explicit(&q->len, memory_order_relaxed);
}

/* Append the chain first..last (n coroutines, linked through next). */
static inline void rt_runq_push_chain(struct rt_runq *q,
                                      struct rt_coro *first,
                                      struct rt_coro *last,
                                      size_t n)
{
    last->next = NULL;
    rt_runq_lock(q);
    if (q->tail)
        q->tail->next = first;
    else
        q->head = first;
    q->tail = last;
    atomic_store_explicit(&q->len, rt_runq_len(q) + n, memory_order_relaxed);
    pthread_spin_unlock(&q->lock);
}

static inline void rt_runq_push(struct rt_runq *q, struct rt_coro *co)
{
    rt_runq_push_chain(q, co, co, 1);
}

/* Take the first k (at most) of q, locked by the caller: the chain's head,
 * its length in *n. */
static inline struct rt_coro *rt_runq_take_locked(struct rt_runq *q,
                                                  size_t k,
                                                  size_t *n,
                                                  struct rt_coro **last)
{
    struct rt_coro *first = q->head, *co = first;
    size_t len = rt_runq_len(q), i = 1;
    if (!first || !k) {
        *n = 0;
        return NULL;
    }
    while (i < k && co->next) {
        co = co->next;
        i++;
    }
    q->head = co->next;
    if (!q->head)
        q->tail = NULL;
    co->next = NULL;
    atomic_store_explicit(&q->len, len - i, memory_order_relaxed);
    *n = i;
    *last = co;
    return first;
}

/* The owner's pop: the oldest, or NULL. */
static inline struct rt_coro *rt_runq_pop(struct rt_runq *q)
{
    if (!rt_runq_len(q))
        return NULL;
    size_t n;
    struct rt_coro *last;
    rt_runq_lock(q);
    struct rt_coro *co = rt_runq_take_locked(q, 1, &n, &last);
    pthread_spin_unlock(&q->lock);
    return co;
}

enum { RT_STEAL_NONE, RT_STEAL_TOOK, RT_STEAL_BUSY };

/* A thief whose queue `own` is empty takes the older half (rounded up) of
 * victim's queue if it can lock it now: returns RT_STEAL_TOOK and the
 * first in *co, the rest appended to own; RT_STEAL_BUSY when victim had
 * work but its lock was held; RT_STEAL_NONE when it had none. */
static inline int rt_runq_steal(struct rt_runq *own,
                                struct rt_runq *victim,
                                struct rt_coro **co)
{
    if (!rt_runq_len(victim))
        return RT_STEAL_NONE;
    if (pthread_spin_trylock(&victim->lock))
        return RT_STEAL_BUSY;
    size_t n, len = rt_runq_len(victim);
    struct rt_coro *last;
    struct rt_coro *first =
        rt_runq_take_locked(victim, (len + 1) / 2, &n, &last);
    pthread_spin_unlock(&victim->lock);
    if (!first)
        return RT_STEAL_NONE;
    if (n > 1)
        rt_runq_push_chain(own, first->next, last, n - 1);
    first->next = NULL;
    *co = first;
    return RT_STEAL_TOOK;
}

/* ---- workers (rt-sched.c) ---- */

struct rt_worker {
    int id;     /* worker index; -1: a threads-model thread */
    void *data; /* the application's (rt_worker_data), or NULL */
    pthread_t tid;
    int epfd;       /* its own epoll set */
    int listen_fd;  /* its own SO_REUSEPORT listener (or systemd's one) */
    int listen_fd2; /* the same of cfg->second_port, else -1 */
    void *sched_sp;
    struct rt_coro *rq_head, *rq_tail; /* local run queue (epoll model) */
    struct rt_runq rq;                 /* run queue (mn), see above */
    /* mn, this worker's own: coroutines run, of them stolen (test-rt) */
    uint64_t ran, stolen;
    struct rt_timer_heap timers;
    /* closed coroutines whose timer entry is in this worker's heap, handed
     * over by other workers (mn) so the entry goes now, not at its
     * deadline; linked through rt_coro.next */
    pthread_mutex_t cancel_lock;
    struct rt_coro *cancel_inbox_locked;
    struct rt_coro *rekey_inbox_locked;
    uint64_t last_flush_ms;
    uint64_t qs_ms; /* mn: the last quiescent state (rt-sched.c) */
    /* how long the worker polls before it sleeps (wait_events), at most
     * rt_g.poll_max_ns; the clock (CLOCK_MONOTONIC, ns) of the worker's
     * last wake-up */
    uint64_t poll_ns, wake_ns;
    /* rt_now_ms() read after the last epoll_wait (a threads-model thread:
     * after its wake-up); every thread with a worker keeps it */
    uint64_t loop_now_ms;
    _Atomic uint64_t flush_done; /* last rt_flush_workers() round seen */
    /* Out of descriptors, accept stopped at EMFILE; the edge-triggered
     * listener will not fire again for the connections already queued, so
     * retry at this time (0: not waiting). */
    uint64_t accept_retry_ms;
    /* written by this worker's thread only (rt_count) */
    _Atomic uint64_t counters[RT_NCOUNTERS];
};

/* Process-wide runtime state. Every field is either set before the worker
 * threads start and read-only after, or atomic. */
struct rt_global {
    const struct rt_config *cfg;
    int listen_fds[256];
    int nlisten;
    /* cfg->second_port's listeners, as listen_fds (never inherited) */
    int listen_fds2[256];
    int nlisten2;
    /* listen_fds all name one socket passed by systemd (socket activation):
     * never shut down (systemd keeps it for the next start), closed once */
    bool inherited;
    int stop_fd;          /* eventfd, level-triggered, readable once stopping */
    uint64_t poll_max_ns; /* cfg->busy_poll_us, in ns (wait_events) */
    _Atomic bool stopping;
    /* rt_stop_now: waits for a slow reader end too (-ESHUTDOWN) */
    _Atomic bool cutting;
    _Atomic bool exiting;
};
extern struct rt_global rt_g;

/* CLOCK_MONOTONIC in ns: rt_now_ms's clock, for the loop's wait */
static inline uint64_t rt_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

void rt_worker_set_self(struct rt_worker *w);
/* A threads-model connection thread woke from a wait: its loop clock
 * (rt_loop_now_ms) reads the time now. Nothing on other threads. */
void rt_loop_clock_tick(void);
struct rt_worker *rt_worker_self_full(void);
/* A thread's application data: allocated (zeroed) when it starts, flushed
 * and freed when it ends; -ENOMEM. */
int rt_worker_data_init(struct rt_worker *w);
void rt_worker_flush(struct rt_worker *w);
void rt_worker_data_exit(struct rt_worker *w);

/* Admission (rt-admit.c): the live connections against --max-conns and
 * each client address's against --max-conns-per-ip. c has its fd and its
 * peer (rt_conn_set_peer); false when cfg->admit turns it away, or (and
 * cfg->refuse called) when it must be refused; the caller then closes
 * c->fd. Every admitted connection is
 * released once, with the same peer. */
int rt_admit_init(const struct rt_config *cfg);
bool rt_conn_admit(const struct rt_conn *c);
void rt_conn_release(const struct rt_conn *c);
/* An idle connection whose time is up may still be sending: a response or
 * an echo queued whole in the socket and read slowly by the client. True
 * (for one more idle period) when bytes are queued and the client took
 * some since the last look; false when nothing is queued or nothing was
 * taken: then it has timed out. */
bool rt_conn_still_sending(struct rt_conn *c);
void rt_conn_set_peer(struct rt_conn *c, const struct sockaddr *sa);
int rt_open_listener(const struct rt_config *cfg, int port, bool reuseport);
/* Add the counters of the threads that are not coroutine workers. */
void rt_counters_add_shared(uint64_t out[RT_NCOUNTERS]);
/* Stopping, and this wait must end now: an idle one, or any once
 * rt_stop_now cut the in-flight responses. */
static inline bool rt_wait_cut(bool idle)
{
    return atomic_load_explicit(&rt_g.stopping, memory_order_relaxed) &&
           (idle || atomic_load_explicit(&rt_g.cutting, memory_order_relaxed));
}
/* The program's name for messages (cfg->name). */
const char *rt_name(void);

/* rt-steer.c: a new connection to the worker of its SYN's CPU. Start:
 * after the listeners, before the workers (true when steering); due/judge:
 * from a worker's loop, with every worker's RT_C_ACCEPTED; sample: each
 * admitted connection fd, with its worker's RT_C_ACCEPTED (while the hash
 * decides, some tell the CPU they came in on). */
bool rt_steer_start(void);
bool rt_steer_due(uint64_t now_ms);
void rt_steer_judge(uint64_t now_ms, const uint64_t *accepted, int n);
void rt_steer_sample(int fd, uint64_t accepted);

/* The threads model (rt-threads.c): its acceptor thread, the wakeup of the
 * threads waiting for a connection (at a stop), the acceptor's join. */
int rt_run_threads(void);
void rt_threads_wake_all(void);
void rt_join_threads(void);

int rt_run_coro(const struct rt_config *cfg);
/* Add the coroutine workers' counters to out[]. */
void rt_counters_add_workers(uint64_t out[RT_NCOUNTERS]);
void rt_join_coro(void);
void rt_wake_all(void);
void rt_yield_coro(struct rt_coro *co);
/* The deadline of an idle connection (cfg->idle_timeout_ms, 0: never). A
 * "never" is a day: an idle connection's timer entry is also how a stop
 * finds it. */
uint64_t rt_idle_deadline(uint64_t now_ms);
int rt_wait_coro(struct rt_coro *co,
                 short events,
                 uint64_t deadline_ms,
                 bool idle);

#endif /* KTCP_RT_INTERNAL_H */
