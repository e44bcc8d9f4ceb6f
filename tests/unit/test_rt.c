/* test_rt.c — unit test of the runtime's pieces that need no server: the
 * timer heap (order, removal by index, heap_idx bookkeeping), the
 * coroutine switch (resume, park, finish, ABI stack alignment), the
 * stacks' layout (a guard of one page, whatever the page size), and the mn
 * scheduler (rt-sched.c, compiled in here with the rest of the runtime
 * stubbed): its per-worker run queues (a wake queues on the waker, a thief
 * takes the older half, a locked queue is not waited on), two mn worker
 * threads on socketpairs (an idle worker steals what a worker stuck in a
 * long coroutine had queued; many wakes racing parks across workers lose
 * none), and an mn worker's dead coroutines coming back for its next
 * connections after their grace period instead of being allocated anew. */
#include "rt-sched.c"

#include "unit.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <time.h>


#define N 2000

static void test_heap(void)
{
    static struct rt_coro cos[N];
    struct rt_timer_heap h = {0};
    bool removed[N] = {false};

    srand(42);
    for (int i = 0; i < N; i++)
        CHECK(rt_timer_push(&h, (uint64_t) (rand() % 5000), &cos[i]) == 0);
    for (size_t i = 0; i < h.len; i++)
        CHECK(h.v[i].co->heap_idx == i);
    /* remove a third of them by index, as a closing connection does */
    for (int i = 0; i < N; i += 3) {
        rt_timer_remove(&h, cos[i].heap_idx);
        removed[i] = true;
        for (size_t j = 0; j < h.len; j++)
            if (h.v[j].co->heap_idx != j) {
                CHECK(h.v[j].co->heap_idx == j);
                break;
            }
    }
    uint64_t last = 0;
    size_t popped = 0;
    while (rt_timer_top(&h)) {
        struct rt_timer_entry e = rt_timer_pop(&h);
        CHECK(e.deadline >= last);
        CHECK(!removed[e.co - cos]);
        last = e.deadline;
        popped++;
    }
    CHECK(popped == (size_t) (N - (N + 2) / 3));
    free(h.v);
}

static struct rt_worker worker;
static int steps;

static void park(struct rt_coro *co)
{
    co->op = RT_OP_PARK;
    rt_coro_switch(&co->sp, co->worker->sched_sp);
}

static enum rt_verdict handler(struct rt_conn *c)
{
    /* after the trampoline's call, the frame must be 16-byte aligned */
    CHECK(((uintptr_t) __builtin_frame_address(0) & 15) == 0);
    volatile char big[20000]; /* touches several stack pages */
    memset((char *) big, 1, sizeof(big));
    for (int i = 0; i < 3; i++) {
        steps++;
        park(c->coro);
    }
    steps += big[100];
    return c->fd == 7 ? RT_IDLE : RT_CLOSE;
}

static void run_once(struct rt_coro *co)
{
    co->worker = &worker;
    rt_coro_switch(&worker.sched_sp, co->sp);
}

/* The stacks as on a system whose pages are four times this one's (16 KiB
 * pages of aarch64 on x86-64's 4 KiB): the guard below a stack is then one
 * such page and the stack a whole number of them, as /proc/self/maps shows. */
static void test_stack_layout(void)
{
    size_t page = (size_t) sysconf(_SC_PAGESIZE) * 4;
    rt_coro_stack_layout(page);
    struct rt_coro *co = rt_coro_new(-1);
    CHECK(co && rt_coro_start(co) == 0);
    if (!co || !co->stack)
        return;
    uintptr_t base = (uintptr_t) co->stack, guard_end = 0, stack_end = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    while (f && fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3)
            continue;
        if (lo <= base && base < hi) {
            CHECK(strcmp(perms, "---p") == 0);
            guard_end = hi;
        } else if (guard_end && lo == guard_end) {
            CHECK(strncmp(perms, "rw", 2) == 0);
            stack_end = hi;
        }
    }
    if (f)
        fclose(f);
    CHECK(guard_end == base + page);
    /* 128 KiB rounded up to whole pages above the guard (an adjacent
     * mapping of the same kind may extend the region further) */
    size_t want = (128 * 1024 + page - 1) / page * page;
    CHECK(stack_end >= guard_end + want);
    CHECK((uintptr_t) co->sp > guard_end &&
          (uintptr_t) co->sp < guard_end + want);
    rt_coro_cache_stack(co->stack); /* its frame never ran: not kept */
    free(co);
}

static void test_coro(void)
{
    void *kept = NULL, *kept_sp = NULL;
    rt_coro_set_handler(handler);
    for (int fd = 6; fd <= 7; fd++) {
        struct rt_coro *co = rt_coro_new(fd);
        CHECK(co && co->conn.coro == co && co->conn.fd == fd);
        CHECK(rt_coro_start(co) == 0);
        /* the second resumes the frame the first one's handler returned
         * to (the stack alone would come back from the cache too) */
        CHECK(fd == 6 || (co->stack == kept && co->sp == kept_sp));
        kept = co->stack;
        steps = 0;
        for (int i = 0; i < 3; i++) {
            run_once(co);
            CHECK(co->op == RT_OP_PARK);
            CHECK(steps == i + 1);
        }
        run_once(co);
        CHECK(steps == 4);
        CHECK(co->op == (fd == 7 ? RT_OP_IDLE : RT_OP_EXIT));
        kept_sp = co->sp;
        rt_coro_release_stack(co);
        CHECK(co->stack == NULL);
        free(co); /* never shared: no grace period needed here */
    }
}


/* ---- the mn scheduler: what rt-sched.c needs from the rest ---- */

struct rt_global rt_g;
void rt_count(int which, uint64_t n)
{
    (void) which;
    (void) n;
}
bool rt_stopping(void)
{
    return atomic_load(&rt_g.stopping);
}
uint64_t rt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}
uint64_t rt_loop_now_ms(void)
{
    return rt_now_ms();
}
uint64_t rt_idle_deadline(uint64_t now_ms)
{
    return now_ms + 86400000;
}
const char *rt_name(void)
{
    return "test-rt";
}
bool rt_conn_admit(const struct rt_conn *c)
{
    (void) c;
    return true;
}
void rt_conn_release(const struct rt_conn *c)
{
    (void) c;
}
bool rt_conn_still_sending(struct rt_conn *c)
{
    (void) c;
    return false;
}
void rt_conn_set_peer(struct rt_conn *c, const struct sockaddr *sa)
{
    (void) c;
    (void) sa;
}
void rt_worker_set_self(struct rt_worker *w)
{
    (void) w;
}
int rt_worker_data_init(struct rt_worker *w)
{
    (void) w;
    return 0;
}
void rt_worker_flush(struct rt_worker *w)
{
    (void) w;
}
void rt_worker_data_exit(struct rt_worker *w)
{
    (void) w;
}
bool rt_steer_start(void)
{
    return false;
}
bool rt_steer_due(uint64_t now_ms)
{
    (void) now_ms;
    return false;
}
void rt_steer_judge(uint64_t now_ms, const uint64_t *accepted, int n)
{
    (void) now_ms;
    (void) accepted;
    (void) n;
}
void rt_steer_sample(int fd, uint64_t accepted)
{
    (void) fd;
    (void) accepted;
}

/* Two mn workers' queues driven by hand, no threads: a wake queues on the
 * waker; a worker runs its own first; an empty one steals the older half;
 * a locked queue is skipped, and says so (no sleep); a park that finds
 * NOTIFIED requeues on the parking worker. */
static void test_mn_queues(void)
{
    static struct rt_coro fake[8];
    model_mn = true;
    nworkers = 2;
    workers =
        aligned_alloc(_Alignof(struct rt_worker), 2 * sizeof(struct rt_worker));
    memset(workers, 0, 2 * sizeof(struct rt_worker));
    struct rt_worker *a = &workers[0], *b = &workers[1];
    for (int i = 0; i < 2; i++) {
        workers[i].id = i;
        rt_runq_init(&workers[i].rq);
    }
    for (int i = 0; i < 8; i++) {
        atomic_init(&fake[i].wstate, RT_ST_WAITING);
        atomic_init(&fake[i].refs, 2);
    }
    bool busy = false;

    for (int i = 0; i < 5; i++)
        CHECK(coro_wake(a, &fake[i], RT_WAKE_IO));
    CHECK(rt_runq_len(&a->rq) == 5 && rt_runq_len(&b->rq) == 0);
    /* an event for a queued (RUNNING) one marks it, queues nothing */
    CHECK(!coro_wake(b, &fake[0], RT_WAKE_IO));
    CHECK(RT_ST(atomic_load(&fake[0].wstate)) == RT_ST_NOTIFIED);
    CHECK(rt_runq_len(&a->rq) == 5 && rt_runq_len(&b->rq) == 0);

    /* b has its own: it runs that, steals nothing */
    CHECK(coro_wake(b, &fake[5], RT_WAKE_IO));
    CHECK(runq_next(b, &busy, model_mn) == &fake[5]);
    CHECK(b->stolen == 0 && rt_runq_len(&a->rq) == 5);
    /* b empty: takes a's older half (3 of 5), the oldest to run now */
    CHECK(runq_next(b, &busy, model_mn) == &fake[0]);
    CHECK(b->stolen == 1 && !busy);
    CHECK(rt_runq_len(&a->rq) == 2 && rt_runq_len(&b->rq) == 2);
    CHECK(runq_next(a, &busy, model_mn) == &fake[3]);
    CHECK(runq_next(a, &busy, model_mn) == &fake[4]);
    /* a empty: steals b's older half, one of two */
    CHECK(runq_next(a, &busy, model_mn) == &fake[1]);
    CHECK(a->stolen == 1 && rt_runq_len(&b->rq) == 1);
    CHECK(runq_next(b, &busy, model_mn) == &fake[2]);
    CHECK(runq_next(b, &busy, model_mn) == NULL && !busy);

    /* a's queue locked (a thief inside): b does not wait, says busy */
    CHECK(coro_wake(a, &fake[6], RT_WAKE_IO));
    pthread_spin_lock(&a->rq.lock);
    CHECK(runq_next(b, &busy, model_mn) == NULL && busy);
    pthread_spin_unlock(&a->rq.lock);
    busy = false;
    CHECK(runq_next(b, &busy, model_mn) == &fake[6] && !busy);

    /* fake[0] was NOTIFIED while queued: its park requeues it on b */
    coro_park(b, &fake[0]);
    CHECK(RT_ST(atomic_load(&fake[0].wstate)) == RT_ST_RUNNING);
    CHECK(rt_runq_len(&b->rq) == 1 &&
          runq_next(b, &busy, model_mn) == &fake[0]);
    /* no event meanwhile: it waits, queued nowhere */
    coro_park(b, &fake[0]);
    CHECK(RT_ST(atomic_load(&fake[0].wstate)) == RT_ST_WAITING);
    CHECK(rt_runq_len(&a->rq) == 0 && rt_runq_len(&b->rq) == 0);
    CHECK(atomic_load(&fake[0].refs) == 2);

    free(workers);
    workers = NULL;
}

/* Two mn worker threads over socketpairs. Roles by the first byte:
 * 'x' parks until woken by 'L'; 'L' wakes every 'x' (so they queue on its
 * worker) and then spins without yielding until they all ran: only a
 * steal by the other worker can run them. 'p' waits for tokens, 'w' adds
 * tokens and wakes every 'p' ITER times, yielding between rounds: a lost
 * wake-up leaves a 'p' parked until its 3 s deadline. */
#define NX 6
#define NP 4
#define NW 4
#define ITER 3000

static struct rt_coro *xco[NX], *pco[NP];
static _Atomic int x_done, x_ran_on[NX], l_worker = -1, l_saw_all;
static _Atomic uint64_t tokens[NP];
static _Atomic int p_started, p_done, p_lost, w_done, next_x, next_p;
static _Atomic unsigned ran_on_mask; /* workers that ran a 'p' or 'w' */

static enum rt_verdict mn_handler(struct rt_conn *c)
{
    struct rt_coro *co = c->coro;
    char b;
    if (read(c->fd, &b, 1) != 1)
        return RT_CLOSE;
    if (b == 'x') {
        int i = atomic_fetch_add(&next_x, 1);
        rt_wait_coro(co, POLLIN, 0, false);
        atomic_store(&x_ran_on[i], co->worker->id);
        atomic_fetch_add(&x_done, 1);
    } else if (b == 'L') {
        atomic_store(&l_worker, co->worker->id);
        for (int i = 0; i < NX; i++)
            coro_wake(co->worker, xco[i], RT_WAKE_IO);
        uint64_t end = rt_now_ms() + 5000;
        while (atomic_load(&x_done) < NX && rt_now_ms() < end) {
        }
        atomic_store(&l_saw_all, atomic_load(&x_done) == NX);
    } else if (b == 'p') {
        int i = atomic_fetch_add(&next_p, 1);
        uint64_t seen = 0, target = (uint64_t) NW * ITER;
        atomic_fetch_add(&p_started, 1);
        for (;;) {
            atomic_fetch_or(&ran_on_mask, 1u << co->worker->id);
            uint64_t t = atomic_load(&tokens[i]);
            if (t >= target)
                break;
            if (t == seen && rt_wait_coro(co, POLLIN, rt_now_ms() + 3000,
                                          false) == -ETIMEDOUT) {
                atomic_fetch_add(&p_lost, 1);
                break;
            }
            seen = t;
        }
        /* the wakers hold pointers to it until they are done */
        uint64_t end = rt_now_ms() + 10000;
        while (atomic_load(&w_done) < NW && rt_now_ms() < end)
            rt_yield_coro(co);
        atomic_fetch_add(&p_done, 1);
    } else if (b == 'w') {
        for (int r = 0; r < ITER; r++) {
            for (int i = 0; i < NP; i++) {
                atomic_fetch_add(&tokens[i], 1);
                coro_wake(co->worker, pco[i], RT_WAKE_IO);
            }
            atomic_fetch_or(&ran_on_mask, 1u << co->worker->id);
            rt_yield_coro(co);
        }
        atomic_fetch_add(&w_done, 1);
    }
    return RT_CLOSE;
}

/* A connection to an idle coroutine in worker 0's set: the byte written
 * on *peer starts its handler. */
static struct rt_coro *mn_conn(int *peer)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return NULL;
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    struct rt_coro *co = rt_coro_new(sv[0]);
    co->epfd = workers[0].epfd;
    atomic_store(&co->wstate, RT_ST_WAITING);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET,
                             .data.ptr = co};
    CHECK(epoll_ctl(co->epfd, EPOLL_CTL_ADD, sv[0], &ev) == 0);
    co->registered = true; /* as an idle connection is (coro_idle) */
    *peer = sv[1];
    return co;
}

static bool wait_until(_Atomic int *v, int want, int ms)
{
    uint64_t end = rt_now_ms() + (uint64_t) ms;
    while (atomic_load(v) < want && rt_now_ms() < end)
        usleep(1000);
    return atomic_load(v) >= want;
}

static void test_mn_workers(void)
{
    struct rt_config cfg = {
        .name = "test-rt",
        .model = RT_MODEL_MN,
        .workers = 2,
        .handler = mn_handler,
    };
    int xpeer[NX], ppeer[NP], wpeer[NW], lpeer;
    rt_g.cfg = &cfg;
    /* a listener per worker, as rt_start opens them; any port, never used */
    for (int i = 0; i < 2; i++) {
        rt_g.listen_fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        CHECK(rt_g.listen_fds[i] >= 0);
        CHECK(listen(rt_g.listen_fds[i], 8) == 0);
    }
    rt_g.nlisten = 2;
    rt_g.stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    CHECK(rt_g.stop_fd >= 0);
    CHECK(rt_run_coro(&cfg) == 0);

    /* a worker stuck in a long coroutine holds up none of its queue */
    for (int i = 0; i < NX; i++) {
        xco[i] = mn_conn(&xpeer[i]);
        CHECK(write(xpeer[i], "x", 1) == 1);
    }
    CHECK(wait_until(&next_x, NX, 5000)); /* each started, then parks */
    for (int i = 0; i < NX; i++) {
        uint64_t end = rt_now_ms() + 5000;
        while (RT_ST(atomic_load(&xco[i]->wstate)) != RT_ST_WAITING &&
               rt_now_ms() < end)
            usleep(1000);
        CHECK(RT_ST(atomic_load(&xco[i]->wstate)) == RT_ST_WAITING);
        CHECK(xco[i]->stack != NULL); /* parked mid-handler, not idle */
    }
    uint64_t stolen0 = workers[0].stolen + workers[1].stolen;
    mn_conn(&lpeer);
    CHECK(write(lpeer, "L", 1) == 1);
    CHECK(wait_until(&x_done, NX, 8000));
    CHECK(wait_until(&l_saw_all, 1, 8000));
    int l = atomic_load(&l_worker);
    CHECK(l == 0 || l == 1);
    for (int i = 0; i < NX; i++)
        CHECK(atomic_load(&x_ran_on[i]) == 1 - l);
    CHECK(workers[1 - l].stolen > stolen0);

    /* many wakes racing parks across the two workers: none lost */
    for (int i = 0; i < NP; i++) {
        pco[i] = mn_conn(&ppeer[i]);
        CHECK(write(ppeer[i], "p", 1) == 1);
    }
    CHECK(wait_until(&p_started, NP, 5000));
    for (int i = 0; i < NW; i++) {
        mn_conn(&wpeer[i]);
        CHECK(write(wpeer[i], "w", 1) == 1);
    }
    /* the workers' loop runs inside a read-side section, left at most
     * every RT_QS_MS of loop time: a grace period still ends, with the
     * workers busy and with them idle (each wakes every 100 ms at most) */
    uint64_t t0 = rt_now_ms();
    urcu_memb_synchronize_rcu();
    uint64_t busy_gp = rt_now_ms() - t0;
    CHECK(busy_gp < 2000);
    CHECK(wait_until(&w_done, NW, 30000));
    CHECK(wait_until(&p_done, NP, 30000));
    usleep(300 * 1000);
    t0 = rt_now_ms();
    urcu_memb_synchronize_rcu();
    uint64_t idle_gp = rt_now_ms() - t0;
    CHECK(idle_gp < 2000);
    printf("test-rt: grace periods %llu ms busy, %llu ms idle\n",
           (unsigned long long) busy_gp, (unsigned long long) idle_gp);
    CHECK(atomic_load(&p_lost) == 0);
    for (int i = 0; i < NP; i++)
        CHECK(atomic_load(&tokens[i]) == (uint64_t) NW * ITER);
    printf(
        "test-rt: mn stress: %d wake-ups each to %d parkers, run on "
        "workers %#x, stolen %llu+%llu, ran %llu+%llu\n",
        NW * ITER, NP, atomic_load(&ran_on_mask),
        (unsigned long long) workers[0].stolen,
        (unsigned long long) workers[1].stolen,
        (unsigned long long) workers[0].ran,
        (unsigned long long) workers[1].ran);

    atomic_store(&rt_g.stopping, true);
    atomic_store(&rt_g.exiting, true);
    uint64_t one = 1;
    CHECK(write(rt_g.stop_fd, &one, sizeof(one)) == sizeof(one));
    rt_wake_all();
    rt_join_coro();
}

/* An mn worker's dead wait for a grace period (call_rcu), then come back
 * through the shared recycled list: the next connections allocate none. */
static void test_coro_recycled(void)
{
    enum { K = 40 };
    struct rt_coro *dead[K], *again[K];
    urcu_memb_register_thread();
    rt_coro_thread_dead_mode(RT_DEAD_SHARED);
    for (int i = 0; i < K; i++) {
        dead[i] = rt_coro_new(-1);
        CHECK(dead[i] != NULL);
    }
    for (int i = 0; i < K; i++)
        rt_coro_put(dead[i]);
    rt_coro_thread_dead_mode(RT_DEAD_SHARED); /* hands the chain over */
    urcu_memb_barrier();                      /* its callback has run */
    unsigned long before = rt_coro_allocs();
    for (int i = 0; i < K; i++) {
        struct rt_coro *co = rt_coro_new(i);
        bool known = false;
        for (int j = 0; j < K; j++)
            known |= co == dead[j];
        CHECK(known && co->conn.fd == i && co->conn.coro == co);
        again[i] = co;
    }
    CHECK(rt_coro_allocs() == before);
    for (int i = 0; i < K; i++)
        rt_coro_put(again[i]);
    rt_coro_thread_dead_mode(RT_DEAD_ALONE); /* pool and chain let go */
    urcu_memb_barrier();
    urcu_memb_unregister_thread();
}

int main(void)
{
    test_heap();
    test_stack_layout();
    test_coro();
    test_coro_recycled();
    test_mn_queues();
    test_mn_workers();
    UNIT_DONE();
}
