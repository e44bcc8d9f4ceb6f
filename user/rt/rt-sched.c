/* rt-sched.c — the two coroutine models.
 *
 * Over 500 lines on purpose: the run queues, the per-worker timer heaps
 * with their inboxes, the park/wake protocol and the worker loop are one
 * scheduler whose invariants (below) hold across all of them, and the
 * per-event path (wake, queue, run) stays in one translation unit where
 * the compiler inlines it; accepting and start-up are the rest.
 *
 * epoll: worker i owns listener i (SO_REUSEPORT), epoll set i, a local run
 *        queue and timer heap; its coroutines never leave it, so nothing in
 *        the hot path is shared. A coroutine an event wakes, or a connection
 *        just accepted, runs at once; the run queue holds the rest (timed
 *        out, requeued).
 * mn:    worker i owns listener i and epoll set i too, as in epoll (a
 *        connection is registered in the set of the worker that accepted
 *        it), but a coroutine may run on any worker. A worker queues what
 *        it wakes (the events its epoll_wait returned, the connections it
 *        accepted, its timers, requeues) on its own run queue and runs it
 *        there, while the coroutine's stack is warm in its core's cache;
 *        only a worker whose queue is empty steals the older half of a
 *        peer's (try-lock), so the queues' locks are contended only by
 *        thieves. A worker left with more than RT_KICK_QUEUE coroutines
 *        queued after its epoll_wait kicks an eventfd to wake an idle peer,
 *        which then steals. A coroutine queued on a worker is run by it or
 *        stolen: the owner never sleeps with its queue non-empty, and only
 *        the owner adds to it.
 *
 * Parking (see the state machine in rt-internal.h): the coroutine switches
 * to its worker's scheduler stack first, and only then is it published as
 * WAITING, so no other worker can resume a coroutine whose stack is still
 * in use. An event that arrives while it runs turns RUNNING into NOTIFIED
 * and the park becomes a requeue: no wakeup is lost.
 */
#define _LGPL_SOURCE /* liburcu's read-side lock inline (httpd-cache.c) */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rt-internal.h"

/* The steps every message takes (wake, run, park, the loop's sleep) are
 * inlined into the worker loop, whatever the compiler's estimate: their calls'
 * prologues and spills were about 50 instructions of a 13-byte keep-alive
 * request (make bench-cost). */
#define INLINE_HOT inline __attribute__((always_inline))

#define RT_EVENTS 256
#define RT_BATCH 64  /* coroutines run between two epoll_waits (mn) */
#define RT_QS_MS 100 /* mn: loop time between two quiescent states */
/* mn: queued coroutines past which an idle peer is woken to steal. Fewer
 * run sooner here than a peer's wake-up, steal and the run on another
 * core (where the connection's socket was not made) would take: kicking
 * at two cost 0.12 eventfd writes, reads and wake-ups a connection (a
 * connection per request, 100 at once, 2 workers), 0.02 at four. */
#define RT_KICK_QUEUE 4
/* busy polling (wait_events): the first limit after a short sleep */
#define RT_POLL_GROW_START_NS 10000

static struct rt_worker *workers;
static int nworkers;
static bool model_mn;

/* mn: the eventfd that wakes one idle worker: in every worker's set,
 * edge-triggered and EPOLLEXCLUSIVE, so a write wakes one epoll_wait
 * that sleeps; the run queues are per worker (w->rq). */
static int shared_kick_fd = -1;
static _Atomic int shared_idle_workers;

/* rounds of rt_flush_workers(); each worker acknowledges in flush_done */
static _Atomic uint64_t flush_round;

/* epoll data values that are not coroutines: numbers below any address a
 * coroutine can have, so one compare tells the two apart */
enum { TAG_LISTEN = 1, TAG_LISTEN2, TAG_STOP, TAG_KICK, TAG_END };

static void runq_push(struct rt_worker *w, struct rt_coro *co)
{
    if (model_mn) {
        rt_runq_push(&w->rq, co);
        return;
    }
    co->next = NULL;
    if (w->rq_tail)
        w->rq_tail->next = co;
    else
        w->rq_head = co;
    w->rq_tail = co;
}

static INLINE_HOT struct rt_coro *runq_pop(struct rt_worker *w, const bool mn)
{
    struct rt_coro *co;
    if (mn)
        return rt_runq_pop(&w->rq);
    co = w->rq_head;
    if (co) {
        w->rq_head = co->next;
        if (!w->rq_head)
            w->rq_tail = NULL;
    }
    return co;
}

static INLINE_HOT bool runq_empty(struct rt_worker *w, const bool mn)
{
    if (mn)
        return rt_runq_len(&w->rq) == 0;
    return w->rq_head == NULL;
}

/* mn, w's queue empty: steal from the peers, starting with the next one.
 * *busy is set when a peer had work but its lock was held (then w does
 * not sleep: it looks again after an epoll_wait(0)). */
static struct rt_coro *runq_steal(struct rt_worker *w, bool *busy)
{
    for (int i = 1; i < nworkers; i++) {
        struct rt_worker *v = &workers[(w->id + i) % nworkers];
        struct rt_coro *co;
        switch (rt_runq_steal(&w->rq, &v->rq, &co)) {
        case RT_STEAL_TOOK:
            w->stolen++;
            return co;
        case RT_STEAL_BUSY:
            *busy = true;
            break;
        default:
            break;
        }
    }
    return NULL;
}

/* Take a WAITING coroutine for running (the caller runs or queues it), or
 * mark a running one NOTIFIED. Returns true if it was taken. Any worker
 * may call it. */
static INLINE_HOT bool coro_claim(struct rt_coro *co, int reason)
{
    uint64_t s = atomic_load(&co->wstate);
    for (;;) {
        switch (RT_ST(s)) {
        case RT_ST_WAITING:
            if (atomic_compare_exchange_weak(&co->wstate, &s,
                                             RT_GEN(s) | RT_ST_RUNNING)) {
                co->wake_reason = reason;
                return true;
            }
            break;
        case RT_ST_RUNNING:
            if (reason != RT_WAKE_IO)
                return false;
            if (atomic_compare_exchange_weak(&co->wstate, &s,
                                             RT_GEN(s) | RT_ST_NOTIFIED))
                return false;
            break;
        default: /* NOTIFIED or DEAD */
            return false;
        }
    }
}

/* Make a WAITING coroutine runnable on w's queue, or mark a running one
 * NOTIFIED. Returns true if it was queued. */
static bool coro_wake(struct rt_worker *w, struct rt_coro *co, int reason)
{
    if (!coro_claim(co, reason))
        return false;
    runq_push(w, co);
    return true;
}

/* co's entry is in w's heap (w its owner): make it say dl if that is
 * earlier than what it says. */
static INLINE_HOT void timer_move_earlier(struct rt_worker *w,
                                          struct rt_coro *co,
                                          uint64_t dl)
{
    if (dl < w->timers.v[co->heap_idx].deadline)
        rt_timer_update(&w->timers, co->heap_idx, dl);
}

/* The same, for an entry w may have popped since (the rekey inbox). */
static void timer_rekey_owned(struct rt_worker *w,
                              struct rt_coro *co,
                              uint64_t dl)
{
    if (dl && atomic_load(&co->heap_owner) == w)
        timer_move_earlier(w, co, dl);
}

/* Arm a timer for co in w's heap. If some heap already holds it, a later
 * deadline is found when that entry pops; an earlier one moves the entry:
 * here if w owns it, else through the owner's rekey inbox (mn), drained on
 * the owner's next loop (its epoll_wait sleeps at most a second). The
 * caller passes a reference the heap keeps (or which is dropped here). */
static void timer_arm(struct rt_worker *w, struct rt_coro *co, uint64_t dl)
{
    if (atomic_exchange(&co->in_heap, 1) == 0) {
        if (rt_timer_push(&w->timers, dl, co) == 0) {
            atomic_store(&co->heap_owner, w);
            return;
        }
        atomic_store(&co->in_heap, 0);
        rt_coro_put(co);
        return;
    }
    struct rt_worker *owner = atomic_load(&co->heap_owner);
    if (owner == w) {
        timer_move_earlier(w, co, dl);
    } else if (owner && !atomic_exchange(&co->rekey_queued, true)) {
        /* an owner it had a moment ago: if it popped the entry since, the
         * drain finds it no longer owns co and does nothing */
        pthread_mutex_lock(&owner->cancel_lock);
        co->rekey_next = owner->rekey_inbox_locked;
        owner->rekey_inbox_locked = co;
        pthread_mutex_unlock(&owner->cancel_lock);
        return; /* the inbox keeps the reference */
    }
    rt_coro_put(co);
}

static void rekey_inbox_drain(struct rt_worker *w)
{
    if (!__atomic_load_n(&w->rekey_inbox_locked, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&w->cancel_lock);
    struct rt_coro *list = w->rekey_inbox_locked;
    w->rekey_inbox_locked = NULL;
    pthread_mutex_unlock(&w->cancel_lock);
    while (list) {
        struct rt_coro *co = list;
        list = co->rekey_next;
        atomic_store(&co->rekey_queued, false);
        if (RT_ST(atomic_load(&co->wstate)) != RT_ST_DEAD)
            timer_rekey_owned(w, co, atomic_load(&co->deadline));
        rt_coro_put(co);
    }
}

/* A closed connection's timer entry goes at once: removed here if this
 * worker's heap holds it, else handed to the owner's inbox (mn), which the
 * owner drains on its next loop. Without this, a closed connection's
 * header would live until its idle deadline. */
static void timer_remove_owned(struct rt_worker *w, struct rt_coro *co)
{
    if (atomic_load(&co->heap_owner) != w)
        return; /* already popped by us */
    atomic_store(&co->heap_owner, NULL);
    rt_timer_remove(&w->timers, co->heap_idx);
    atomic_store(&co->in_heap, 0);
    rt_coro_put(co);
}

static void timer_cancel(struct rt_worker *w, struct rt_coro *co)
{
    struct rt_worker *owner = atomic_load(&co->heap_owner);
    if (!owner)
        return;
    if (owner == w) {
        timer_remove_owned(w, co);
        return;
    }
    rt_coro_get(co); /* the inbox's; co is DEAD, so next is free */
    pthread_mutex_lock(&owner->cancel_lock);
    co->next = owner->cancel_inbox_locked;
    owner->cancel_inbox_locked = co;
    pthread_mutex_unlock(&owner->cancel_lock);
}

static void cancel_inbox_drain(struct rt_worker *w)
{
    if (!__atomic_load_n(&w->cancel_inbox_locked, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&w->cancel_lock);
    struct rt_coro *list = w->cancel_inbox_locked;
    w->cancel_inbox_locked = NULL;
    pthread_mutex_unlock(&w->cancel_lock);
    while (list) {
        struct rt_coro *co = list;
        list = co->next;
        timer_remove_owned(w, co);
        rt_coro_put(co);
    }
}

/* A connection joins its worker's epoll set only when it first waits:
 * one answered at once and closed (a connection per request) never does,
 * which saves the EPOLL_CTL_ADD and the kernel's removal of the entry at
 * close. EPOLL_CTL_ADD reports a readiness that predates it, so nothing
 * that came before the registration is missed. */
static int coro_register(struct rt_coro *co, bool out)
{
    struct epoll_event ev = {
        .events = EPOLLIN | EPOLLRDHUP | EPOLLET | (out ? EPOLLOUT : 0),
        .data.ptr = co,
    };
    if (epoll_ctl(co->epfd, EPOLL_CTL_ADD, co->conn.fd, &ev) < 0) {
        rt_count(RT_C_ERRORS, 1);
        return -errno;
    }
    co->registered = true;
    co->armed_out = out;
    return 0;
}

/* Called on the scheduler stack after co switched out asking to park. */
static INLINE_HOT void coro_park(struct rt_worker *w, struct rt_coro *co)
{
    uint64_t dl = atomic_load(&co->deadline);
    if (dl &&
        atomic_load_explicit(&co->heap_owner, memory_order_relaxed) == w) {
        /* Its entry is in w's heap (an idle connection's, kept across its
         * requests), where only w moves or pops it: settle the deadline
         * while co is still RUNNING, and the entry needs no reference. */
        timer_move_earlier(w, co, dl);
        dl = 0;
    }
    if (dl)
        rt_coro_get(co); /* co may run elsewhere as soon as it is WAITING */
    uint64_t s = atomic_load(&co->wstate);
    for (;;) {
        if (RT_ST(s) == RT_ST_NOTIFIED) {
            if (atomic_compare_exchange_weak(&co->wstate, &s,
                                             RT_GEN(s) | RT_ST_RUNNING)) {
                co->wake_reason = RT_WAKE_IO;
                runq_push(w, co);
                break;
            }
        } else if (atomic_compare_exchange_weak(
                       &co->wstate, &s, (RT_GEN(s) + 4) | RT_ST_WAITING)) {
            break;
        }
    }
    if (dl)
        timer_arm(w, co, dl);
}

static void coro_close(struct rt_worker *w, struct rt_coro *co)
{
    atomic_store(&co->wstate, RT_ST_DEAD);
    rt_coro_release_stack(co);
    timer_cancel(w, co);
    rt_conn_io_release(&co->conn);
    close(co->conn.fd); /* also leaves the epoll set */
    rt_conn_release(&co->conn);
    rt_coro_put(co);
}

/* The handler returned RT_IDLE: keep the connection, not the stack. It
 * parks like a wait whose wakeup starts the handler afresh. */
static INLINE_HOT void coro_idle(struct rt_worker *w, struct rt_coro *co)
{
    rt_coro_release_stack(co);
    if (rt_stopping()) {
        coro_close(w, co);
        return;
    }
    if (co->registered)
        atomic_store_explicit(&co->again, true, memory_order_relaxed);
    else if (coro_register(co, false) < 0) {
        coro_close(w, co);
        return;
    }
    atomic_store(&co->idle, true);
    /* the time read after the last epoll_wait: older by one batch's run at
     * most, and one clock read less per message */
    atomic_store(&co->deadline, rt_idle_deadline(w->loop_now_ms));
    coro_park(w, co);
}

static INLINE_HOT void coro_run(struct rt_worker *w, struct rt_coro *co)
{
    if (!co->stack) {
        /* an idle connection: bytes came, or its time is up */
        atomic_store(&co->deadline, 0);
        if (co->wake_reason == RT_WAKE_TIMEOUT &&
            rt_conn_still_sending(&co->conn)) {
            coro_idle(w, co); /* another idle period */
            return;
        }
        co->conn.idle_unacked = 0;
        if (co->wake_reason == RT_WAKE_TIMEOUT)
            rt_count(RT_C_TIMEOUTS, 1);
        if (co->wake_reason != RT_WAKE_IO || rt_coro_start(co) < 0) {
            coro_close(w, co);
            return;
        }
    }
    co->worker = w;
    rt_coro_switch(&w->sched_sp, co->sp);
    if (co->op == RT_OP_EXIT)
        coro_close(w, co);
    else if (co->op == RT_OP_IDLE)
        coro_idle(w, co);
    else
        coro_park(w, co);
}

int rt_wait_coro(struct rt_coro *co,
                 short events,
                 uint64_t deadline_ms,
                 bool idle)
{
    if (rt_wait_cut(idle))
        return -ESHUTDOWN;
    if (deadline_ms && rt_loop_now_ms() >= deadline_ms)
        return -ETIMEDOUT;
    if (!co->registered) {
        int err = coro_register(co, events & POLLOUT);
        if (err < 0)
            return err;
    } else {
        atomic_store_explicit(&co->again, true, memory_order_relaxed);
        if ((events & POLLOUT) && !co->armed_out) {
            /* Writes rarely wait, so EPOLLOUT joins the registration only
             * now; EPOLL_CTL_MOD re-checks readiness, so an edge is not
             * lost. */
            struct epoll_event ev = {
                .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                .data.ptr = co,
            };
            if (epoll_ctl(co->epfd, EPOLL_CTL_MOD, co->conn.fd, &ev) == 0)
                co->armed_out = true;
        }
    }
    atomic_store(&co->idle, idle);
    atomic_store(&co->deadline, deadline_ms);
    co->wake_reason = RT_WAKE_IO;
    co->op = RT_OP_PARK;
    rt_coro_switch(&co->sp, co->worker->sched_sp);
    /* possibly on another thread from here on */
    atomic_store(&co->deadline, 0);
    switch (co->wake_reason) {
    case RT_WAKE_TIMEOUT:
        return -ETIMEDOUT;
    case RT_WAKE_STOP:
        return -ESHUTDOWN;
    default:
        return 0;
    }
}

/* Park with an event already noted: coro_park requeues it at the tail of
 * the run queue, behind what is ready now. */
void rt_yield_coro(struct rt_coro *co)
{
    uint64_t s = atomic_load(&co->wstate);
    while (RT_ST(s) == RT_ST_RUNNING &&
           !atomic_compare_exchange_weak(&co->wstate, &s,
                                         RT_GEN(s) | RT_ST_NOTIFIED)) {
    }
    atomic_store(&co->idle, false);
    atomic_store(&co->deadline, 0);
    co->wake_reason = RT_WAKE_IO;
    co->op = RT_OP_PARK;
    rt_coro_switch(&co->sp, co->worker->sched_sp);
}

/* Pop expired entries. An entry only says "look at this coroutine": its
 * current deadline decides whether it timed out, moved, or needs none. */
static void timers_expire_due(struct rt_worker *w, uint64_t now)
{
    const struct rt_timer_entry *top;
    while ((top = rt_timer_top(&w->timers)) && top->deadline <= now) {
        struct rt_coro *co = rt_timer_pop(&w->timers).co;
        atomic_store(&co->heap_owner, NULL);
        atomic_store(&co->in_heap, 0);
        uint64_t s = atomic_load(&co->wstate);
        uint64_t dl = atomic_load(&co->deadline);
        bool timed_out = false;
        while (RT_ST(s) == RT_ST_WAITING && dl && dl <= now) {
            if (atomic_compare_exchange_weak(&co->wstate, &s,
                                             RT_GEN(s) | RT_ST_RUNNING)) {
                co->wake_reason = RT_WAKE_TIMEOUT;
                runq_push(w, co);
                timed_out = true;
                break;
            }
            dl = atomic_load(&co->deadline);
        }
        if (!timed_out && RT_ST(s) != RT_ST_DEAD && dl > now)
            timer_arm(w, co, dl); /* moved: keep watching */
        else
            rt_coro_put(co);
    }
}

/* The same, called at every loop: most find nothing due. */
static INLINE_HOT void timers_expire(struct rt_worker *w, uint64_t now)
{
    const struct rt_timer_entry *top = rt_timer_top(&w->timers);
    if (top && top->deadline <= now)
        timers_expire_due(w, now);
}

/* While stopping: wake every idle waiter this worker's heap knows of, and
 * once rt_stop_now cut the in-flight responses every waiter (each wait of
 * a response has a deadline, so it is in a heap). */
static void timers_stop_sweep(struct rt_worker *w)
{
    bool all = atomic_load(&rt_g.cutting);
    for (size_t i = 0; i < w->timers.len; i++) {
        struct rt_coro *co = w->timers.v[i].co;
        if (all || atomic_load(&co->idle))
            coro_wake(w, co, RT_WAKE_STOP);
    }
}

/* How long accepting pauses when the process is out of descriptors. */
#define RT_ACCEPT_RETRY_MS 100

/* The listener's place in the worker's epoll set: the worker's own
 * listener, level-triggered, and each report takes one connection, as
 * nginx does by default: an accept that would fail with EAGAIN is never
 * made, and a queue of several is taken one per loop, between the other
 * events. (mn drained a listener shared by every worker at each edge:
 * under load 1.75 accept4 a connection, the last of each drain failing
 * with EAGAIN, and the two workers' accepts contended for the listener's
 * lock.) systemd's one socket is in every worker's set, EPOLLEXCLUSIVE. */
static uint32_t listen_events(void)
{
    return EPOLLIN | (rt_g.inherited ? EPOLLEXCLUSIVE : 0);
}

static int listen_arm(struct rt_worker *w, bool on)
{
    struct epoll_event ev = {.events = listen_events(), .data.u64 = TAG_LISTEN};
    int r = epoll_ctl(w->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, w->listen_fd,
                      &ev);
    int lfd2 = w->listen_fd2;
    if (lfd2 >= 0) {
        struct epoll_event ev2 = {.events = listen_events(),
                                  .data.u64 = TAG_LISTEN2};
        epoll_ctl(w->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, lfd2, &ev2);
    }
    return r;
}

/* The worker's listener of which (0: the port, 1: the second port). */
static int listener_fd(struct rt_worker *w, int which)
{
    return which ? w->listen_fd2 : w->listen_fd;
}

/* The worker saw the server stop: it accepts no more, and its listener
 * leaves its set, whose level would spin the loop (an error only means it
 * had left already, out of descriptors). Returns true, the new saw_stop. */
static bool stop_seen(struct rt_worker *w, bool saw_stop)
{
    if (!saw_stop)
        listen_arm(w, false);
    return true;
}

/* Accept one connection (listen_events); mn queues it, epoll runs it. */
static int accept_one(struct rt_worker *w, int which)
{
    int lfd = listener_fd(w, which);
    if (lfd < 0)
        return 0;
    int queued = 0;
    for (int taken = 0; taken < 1; taken++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(lfd, (struct sockaddr *) &ss, &sl,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                errno == ENOMEM) {
                rt_count(RT_C_ERRORS, 1);
                static atomic_bool warned;

                if (!atomic_exchange(&warned, true))
                    fprintf(stderr,
                            "%s: accept: %s (retrying every %d ms "
                            "while it lasts)\n",
                            rt_name(), strerror(errno), RT_ACCEPT_RETRY_MS);
                w->accept_retry_ms = rt_now_ms() + RT_ACCEPT_RETRY_MS;
                /* a level-triggered listener would report at once again */
                listen_arm(w, false);
            }
            return queued; /* EAGAIN, or the listener was shut down */
        }
        struct rt_conn peer = {.fd = fd, .listener = (unsigned char) which};
        rt_conn_set_peer(&peer, (struct sockaddr *) &ss);
        if (rt_stopping() || !rt_conn_admit(&peer)) {
            close(fd);
            continue;
        }
        rt_steer_sample(fd, atomic_load_explicit(&w->counters[RT_C_ACCEPTED],
                                                 memory_order_relaxed));
        struct rt_coro *co = rt_coro_new(fd);
        if (!co) {
            rt_count(RT_C_ERRORS, 1);
            close(fd);
            rt_conn_release(&peer);
            continue;
        }
        rt_conn_set_peer(&co->conn, (struct sockaddr *) &ss);
        co->conn.listener = (unsigned char) which;
        /* joins the set at its first wait (coro_register) */
        co->epfd = w->epfd;
        co->wake_reason = RT_WAKE_IO; /* start the handler: data is likely */
        if (model_mn) {
            runq_push(w, co);
            queued++;
        } else {
            coro_run(w, co); /* at once, as an event is (worker_loop) */
        }
    }
    return queued;
}

/* How long the loop may sleep at time now: 0 with work queued or a
 * deadline passed, else until the next deadline, at most max_sleep. */
static INLINE_HOT int sleep_ms(struct rt_worker *w,
                               uint64_t now,
                               int max_sleep,
                               const bool mn)
{
    int timeout = max_sleep;
    if (!runq_empty(w, mn))
        return 0;
    const struct rt_timer_entry *t = rt_timer_top(&w->timers);
    if (t && t->deadline <= now)
        return 0;
    if (t && t->deadline - now < (uint64_t) max_sleep)
        timeout = (int) (t->deadline - now);
    if (w->accept_retry_ms) {
        if (w->accept_retry_ms <= now)
            return 0;
        if (w->accept_retry_ms - now < (uint64_t) timeout)
            timeout = (int) (w->accept_retry_ms - now);
    }
    return timeout;
}

/* The next coroutine w runs: its own oldest, else (mn) a stolen one. */
static INLINE_HOT struct rt_coro *runq_next(struct rt_worker *w,
                                            bool *steal_busy,
                                            const bool mn)
{
    struct rt_coro *co = runq_pop(w, mn);
    if (!co && mn && nworkers > 1)
        co = runq_steal(w, steal_busy);
    return co;
}

/* Whether events bring bytes to a connection past its first wait, such
 * as a kept connection's next request: what a poll is for. A new
 * connection (the listener's event, then its first read's) costs far more
 * than a wake-up (handshake, accept, the close), so a poll that waits for
 * one saves too little to pay for itself: it only turns idle time into
 * the server's CPU time. Nor does a send's room (EPOLLOUT alone): a large
 * body waits for the client to read, on the same cores, and polling for
 * its ACKs took a 1 MiB keep-alive response 0.34 sched_yield and as many
 * more epoll_pwait. The coroutine is safe to read: an mn worker waits
 * inside its read-side section, an epoll worker frees only its own dead. */
static inline bool conn_event(const struct epoll_event *ev, int n)
{
    for (int i = 0; i < n; i++) {
        const struct rt_coro *co = ev[i].data.ptr;
        if (ev[i].data.u64 >= TAG_END && (ev[i].events & ~EPOLLOUT) &&
            atomic_load_explicit(&co->again, memory_order_relaxed))
            return true;
    }
    return false;
}

static inline void poll_shrink(struct rt_worker *w)
{
    if (w->poll_ns) { /* an idle worker's stays 0 at no cost */
        w->poll_ns /= 2;
        if (w->poll_ns < RT_POLL_GROW_START_NS)
            w->poll_ns = 0;
    }
}

/* Wait up to timeout ms for events, as epoll_wait; epoll_pwait with no
 * mask is epoll_wait, without libc (rt_sys6); a failure (EINTR) is no
 * event.
 *
 * Busy polling (--busy-poll-us): before it sleeps, the worker polls its
 * set for up to w->poll_ns, yielding the CPU between two polls to any
 * thread ready to run on it. A worker that sleeps has its CPU go idle, and
 * waking it costs an interrupt on another CPU and the idle state's exit:
 * on a virtual machine both are exits to the hypervisor, the larger part
 * of a round trip on one connection. A poll that finds the next request
 * saves both. The yield keeps the poll from holding a CPU that the client
 * or another worker could use: what the poll costs is what would
 * otherwise be idle time.
 * The limit adapts to the gaps seen, as the kernel's haltpoll cpuidle
 * governor does for a guest's idle CPU: a sleep that ended within the
 * longest poll doubles the limit (a longer poll would have caught it); a
 * longer one halves it, and below RT_POLL_GROW_START_NS it is 0. So a
 * server that goes idle stops polling after a few wake-ups, and one
 * whose client answers within the limit keeps it. */
static INLINE_HOT int wait_events(struct rt_worker *w,
                                  struct epoll_event *ev,
                                  int timeout)
{
    uint64_t max_ns = rt_g.poll_max_ns;
    int n;
    if (!timeout || !max_ns) {
        n = (int) rt_sys6(SYS_epoll_pwait, w->epfd, (long) ev, RT_EVENTS,
                          timeout, 0, 0);
        w->wake_ns = rt_mono_ns();
        return n;
    }
    /* Not polling, it reads no clock before the sleep: the last wake-up
     * stands in for its start, and the sleep measured is longer by what
     * the loop ran since (a few microseconds a request). */
    uint64_t start = w->poll_ns ? rt_mono_ns() : w->wake_ns, t = start;
    while (t - start < w->poll_ns) {
        n = (int) rt_sys6(SYS_epoll_pwait, w->epfd, (long) ev, RT_EVENTS, 0, 0,
                          0);
        if (n > 0) {
            w->wake_ns = t; /* the clock before this poll */
            if (!conn_event(ev, n))
                poll_shrink(w);
            return n;
        }
        sched_yield();
        t = rt_mono_ns();
    }
    n = (int) rt_sys6(SYS_epoll_pwait, w->epfd, (long) ev, RT_EVENTS, timeout,
                      0, 0);
    t = rt_mono_ns();
    w->wake_ns = t;
    if (t - start <= max_ns && conn_event(ev, n)) {
        uint64_t grown = w->poll_ns * 2;
        if (grown < RT_POLL_GROW_START_NS)
            grown = RT_POLL_GROW_START_NS;
        w->poll_ns = grown < max_ns ? grown : max_ns;
    } else {
        poll_shrink(w);
    }
    return n;
}

/* The worker's loop, made twice (worker_main): mn is a constant in each
 * copy, so neither model pays for the other's branches. */
static void steer_judge(uint64_t now)
{
    uint64_t accepted[256];
    int n = nworkers < 256 ? nworkers : 256;

    for (int i = 0; i < n; i++)
        accepted[i] = atomic_load_explicit(&workers[i].counters[RT_C_ACCEPTED],
                                           memory_order_relaxed);
    rt_steer_judge(now, accepted, n);
}

static INLINE_HOT void worker_loop(struct rt_worker *w, const bool mn)
{
    struct epoll_event ev[RT_EVENTS];
    bool saw_stop = false;

    /* mn: the loop runs inside one read-side section, left and entered
     * again at most every RT_QS_MS (below). An event names a coroutine
     * that another worker may close and free (call_rcu) at any moment
     * after the kernel queued the event, so the grace period must cover
     * the whole time from the wait until the event's coroutine is claimed
     * (or found dead). An epoll-model worker needs none: only it holds
     * events naming its coroutines, and it frees its dead only after
     * handling them (rt_coro_reap). */
    if (mn)
        urcu_memb_read_lock();
    for (;;) {
        /* run what is ready */
        struct rt_coro *co;
        int ran = 0;
        bool steal_busy = false;
        while ((!mn || ran < RT_BATCH) &&
               (co = runq_next(w, &steal_busy, mn))) {
            coro_run(w, co);
            ran++;
        }
        w->ran += (uint64_t) ran;

        /* mn workers sleep at most 100 ms: a kick reaches one sleeper,
         * and an idle peer looks for work to steal on its own */
        int max_sleep = mn ? 100 : 1000;
        /* The clock of the wake-up is behind by the work just run; it is
         * read again only when a timer, not max_sleep, bounds the sleep. */
        int timeout =
            steal_busy ? 0 : sleep_ms(w, w->loop_now_ms, max_sleep, mn);
        if (timeout > 0 && timeout < max_sleep)
            timeout = sleep_ms(w, rt_now_ms(), max_sleep, mn);
        if (saw_stop && timeout > 50)
            timeout = 50;
        if (timeout && mn)
            atomic_fetch_add(&shared_idle_workers, 1);
        /* a polling mn worker counts as idle too: the kick reaches it */
        int n = wait_events(w, ev, timeout);
        if (timeout && mn)
            atomic_fetch_sub(&shared_idle_workers, 1);
        /* the clock of this wake-up, for what runs until the next one */
        uint64_t now = w->wake_ns / 1000000u;
        w->loop_now_ms = now;

        int queued = 0;
        struct rt_coro *lone = NULL;
        for (int i = 0; i < n; i++) {
            uint64_t tag = ev[i].data.u64;
            struct rt_coro *p = ev[i].data.ptr;
            if (tag >= TAG_END) {
                if (!mn) {
                    /* epoll: run it now, without a trip through the run
                     * queue; its events come only here, so none is left
                     * behind */
                    if (coro_claim(p, RT_WAKE_IO))
                        coro_run(w, p);
                } else if (n == 1 && runq_empty(w, mn)) {
                    /* mn, a lone event and nothing queued: there is nothing
                     * for a peer to steal, so it runs at once (below) */
                    if (coro_claim(p, RT_WAKE_IO))
                        lone = p;
                } else {
                    queued += coro_wake(w, p, RT_WAKE_IO);
                }
            } else if (tag == TAG_LISTEN || tag == TAG_LISTEN2) {
                if (!saw_stop)
                    queued += accept_one(w, tag == TAG_LISTEN2);
            } else if (tag == TAG_KICK) {
                uint64_t v;
                if (read(shared_kick_fd, &v, sizeof(v)) < 0) {
                    /* nothing to drain: another worker got it */
                }
            } else { /* TAG_STOP */
                saw_stop = stop_seen(w, saw_stop);
                epoll_ctl(w->epfd, EPOLL_CTL_DEL, rt_g.stop_fd, NULL);
            }
        }
        /* claimed (RUNNING), so only this worker can close and free it */
        if (lone)
            coro_run(w, lone);
        /* Every event is claimed or dropped: a quiescent state, reported
         * at most every RT_QS_MS of loop time (a wake-up at most every
         * 100 ms), so a grace period waits for a worker about 200 ms, plus
         * the longest a handler runs between two waits. Reporting it at
         * every wake-up was a tenth of the loop's cost.
         * What runs inside the section (the handlers included) never
         * waits for a grace period, and the handlers' own sections nest in
         * this one, the cheaper kind; a coroutine's wait switches back
         * here first, so no section moves between threads. */
        if (mn && now - w->qs_ms >= RT_QS_MS) {
            urcu_memb_read_unlock();
            urcu_memb_read_lock();
            w->qs_ms = now;
        }
        if (w->accept_retry_ms && w->accept_retry_ms <= rt_now_ms() &&
            !saw_stop) {
            w->accept_retry_ms = 0;
            listen_arm(w, true);
            queued += accept_one(w, 0);
            queued += accept_one(w, 1);
        }
        /* more than this worker should run alone: an idle peer steals */
        if (mn && queued > 0 && rt_runq_len(&w->rq) > RT_KICK_QUEUE &&
            atomic_load(&shared_idle_workers) > 0) {
            uint64_t one = 1;
            if (write(shared_kick_fd, &one, sizeof(one)) < 0) {
                /* counter saturated: peers are awake anyway */
            }
        }

        rt_coro_reap(now);
        if (mn) { /* only mn workers arm timers in a peer's heap */
            cancel_inbox_drain(w);
            rekey_inbox_drain(w);
        }
        timers_expire(w, now);
        if (rt_stopping()) {
            saw_stop = stop_seen(w, saw_stop);
            timers_stop_sweep(w);
        }
        uint64_t round = atomic_load(&flush_round);
        bool asked =
            round != atomic_load_explicit(&w->flush_done, memory_order_relaxed);
        if (rt_steer_due(now))
            steer_judge(now);
        if (asked || now - w->last_flush_ms >= 1000) {
            rt_worker_flush(w);
            w->last_flush_ms = now;
        }
        if (asked)
            atomic_store(&w->flush_done, round);
        if (atomic_load(&rt_g.exiting) && runq_empty(w, mn))
            break;
    }
    if (mn)
        urcu_memb_read_unlock();
}

static void *worker_main(void *arg)
{
    struct rt_worker *w = arg;

    rt_worker_set_self(w);
    urcu_memb_register_thread();
    rt_coro_thread_dead_mode(model_mn ? RT_DEAD_SHARED : RT_DEAD_PRIVATE);
    w->wake_ns = rt_mono_ns();
    w->last_flush_ms = w->loop_now_ms = w->wake_ns / 1000000u;
    w->poll_ns = rt_g.poll_max_ns;
    if (model_mn)
        worker_loop(w, true);
    else
        worker_loop(w, false);
    rt_worker_data_exit(w);
    rt_coro_thread_dead_mode(RT_DEAD_ALONE);
    urcu_memb_unregister_thread();
    return NULL;
}

static int epoll_add_tag(int epfd, int fd, uint64_t tag, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.u64 = tag};
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

int rt_run_coro(const struct rt_config *cfg)
{
    nworkers = cfg->workers;
    model_mn = cfg->model == RT_MODEL_MN;
    rt_coro_set_handler(cfg->handler);
    /* aligned: each run queue has its own cache line (rt_runq) */
    size_t size = (size_t) nworkers * sizeof(*workers);
    workers = aligned_alloc(_Alignof(struct rt_worker), size);
    if (!workers)
        return -ENOMEM;
    memset(workers, 0, size);

    if (model_mn) {
        shared_kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (shared_kick_fd < 0)
            return -errno;
    }
    for (int i = 0; i < nworkers; i++) {
        struct rt_worker *w = &workers[i];
        w->id = i;
        if (rt_worker_data_init(w) < 0)
            return -ENOMEM;
        pthread_mutex_init(&w->cancel_lock, NULL);
        rt_runq_init(&w->rq);
        w->listen_fd2 = -1;
        w->epfd = epoll_create1(EPOLL_CLOEXEC);
        w->listen_fd = rt_g.listen_fds[i];
        if (rt_g.nlisten2)
            w->listen_fd2 = rt_g.listen_fds2[i];
        if (w->epfd < 0 ||
            epoll_add_tag(w->epfd, w->listen_fd, TAG_LISTEN, listen_events()) <
                0 ||
            (w->listen_fd2 >= 0 &&
             epoll_add_tag(w->epfd, w->listen_fd2, TAG_LISTEN2,
                           listen_events()) < 0) ||
            (model_mn &&
             epoll_add_tag(w->epfd, shared_kick_fd, TAG_KICK,
                           EPOLLIN | EPOLLET | EPOLLEXCLUSIVE) < 0) ||
            epoll_add_tag(w->epfd, rt_g.stop_fd, TAG_STOP, EPOLLIN) < 0)
            return -errno;
    }
    rt_steer_start();
    for (int i = 0; i < nworkers; i++) {
        int err =
            pthread_create(&workers[i].tid, NULL, worker_main, &workers[i]);
        if (err)
            return -err;
    }
    return 0;
}

void rt_counters_add_workers(uint64_t out[RT_NCOUNTERS])
{
    if (!workers)
        return;
    for (int i = 0; i < nworkers; i++)
        for (int c = 0; c < RT_NCOUNTERS; c++)
            out[c] += atomic_load_explicit(&workers[i].counters[c],
                                           memory_order_relaxed);
}

void rt_flush_workers(int timeout_ms)
{
    if (!workers)
        return; /* the threads model */
    uint64_t round = atomic_fetch_add(&flush_round, 1) + 1;
    rt_wake_all(); /* mn sleepers; epoll workers wake within 1 s */
    uint64_t deadline = rt_now_ms() + (uint64_t) timeout_ms;
    for (int i = 0; i < nworkers; i++)
        while (atomic_load(&workers[i].flush_done) < round &&
               rt_now_ms() < deadline)
            usleep(1000);
}

void rt_join_coro(void)
{
    for (int i = 0; i < nworkers; i++)
        pthread_join(workers[i].tid, NULL);
}

/* Wake every mn worker now (a flush): kicks reach the sleepers, one per
 * write. Every worker sees the stop eventfd in its own set. */
void rt_wake_all(void)
{
    if (!model_mn || shared_kick_fd < 0)
        return;
    for (int i = 0; i < nworkers; i++) {
        uint64_t one = 1;
        if (write(shared_kick_fd, &one, sizeof(one)) < 0)
            break;
    }
}
