/* rt-coro.c — coroutines: stacks from mmap with a guard page below them,
 * the frame every connection's handler runs in, and the freeing of dead
 * coroutines. The context switch itself is rt-switch.c's.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt-internal.h"

/* 128 KiB of address space per connection (rounded up to whole pages);
 * only the pages a handler touches become resident (see docs/httpd.md for
 * measured RSS). */
#define RT_STACK_SIZE (128 * 1024)
#define RT_STACK_CACHE_MAX 256

/* The guard below each stack is one page of the running system
 * (sysconf(_SC_PAGESIZE): 4 KiB on x86-64, 4, 16 or 64 KiB on aarch64),
 * and the mapping a whole number of pages. Set once at load. */
static size_t guard_size, stack_map_len;

void rt_coro_stack_layout(size_t page)
{
    guard_size = page;
    stack_map_len = (RT_STACK_SIZE + page - 1) / page * page + page;
}

static void __attribute__((constructor)) stack_layout_init(void)
{
    long page = sysconf(_SC_PAGESIZE);
    rt_coro_stack_layout(page > 0 ? (size_t) page : 4096);
}

static rt_handler_fn coro_handler; /* set before any coroutine starts */

/* The kept frame (rt-internal.h, rt_coro_start). */
__thread struct rt_serve_slot rt_serve;

/* Read in a call of its own: a frame that began on one thread may go on
 * on another (mn), so no thread-local's address may be kept across a
 * switch, whatever the compiler's TLS model. */
static __attribute__((noinline)) struct rt_coro *serve_take(void)
{
    return rt_serve.next;
}

static void __attribute__((noreturn)) coro_main(void *arg)
{
    struct rt_coro *co = arg;
    for (;;) {
        enum rt_verdict v = coro_handler(&co->conn);
        co->op = v == RT_IDLE ? RT_OP_IDLE : RT_OP_EXIT;
        rt_coro_switch(&co->sp, co->worker->sched_sp);
        co = serve_take(); /* resumed as the start of another connection */
    }
}

/* Stacks not in use, most recently used first (their pages are warm).
 * Shared by all workers, hence the lock; a stack is never touched by
 * anyone but the coroutine running on it, so it is reusable at once. */
static struct {
    pthread_mutex_t lock;
    void *head; /* each free stack stores the next one in its first word */
    int count;
} stack_cache_locked = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

/* In front of the shared cache, each thread keeps a few stacks of its own,
 * without a lock: a handler that returns RT_IDLE after every message (an
 * echo) gives its stack back and takes one again for the next message, and
 * that round trip then costs a few instructions, not two lock/unlock pairs.
 * A stack is not tied to a thread (mn moves coroutines), only to the
 * coroutine running on it, so any thread may keep any free stack. */
#define RT_STACK_LOCAL_MAX 4
static __thread void *stack_local[RT_STACK_LOCAL_MAX];
static __thread int stack_local_count;

static void *stack_get(void)
{
    void *base = NULL;
    if (stack_local_count > 0)
        return stack_local[--stack_local_count];
    pthread_mutex_lock(&stack_cache_locked.lock);
    if (stack_cache_locked.head) {
        base = stack_cache_locked.head;
        stack_cache_locked.head = *(void **) ((char *) base + guard_size);
        stack_cache_locked.count--;
    }
    pthread_mutex_unlock(&stack_cache_locked.lock);
    if (base)
        return base;
    base = mmap(NULL, stack_map_len, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    /* the guard page below the stack turns an overflow into a SIGSEGV */
    if (mprotect(base, guard_size, PROT_NONE) < 0) {
        munmap(base, stack_map_len);
        return NULL;
    }
    return base;
}

static void stack_put_shared(void *base)
{
    pthread_mutex_lock(&stack_cache_locked.lock);
    if (stack_cache_locked.count < RT_STACK_CACHE_MAX) {
        *(void **) ((char *) base + guard_size) = stack_cache_locked.head;
        stack_cache_locked.head = base;
        stack_cache_locked.count++;
        base = NULL;
    }
    pthread_mutex_unlock(&stack_cache_locked.lock);
    if (base)
        munmap(base, stack_map_len);
}

void rt_coro_cache_stack(void *base)
{
    if (stack_local_count < RT_STACK_LOCAL_MAX) {
        stack_local[stack_local_count++] = base;
        return;
    }
    stack_put_shared(base);
}

/* A worker keeps the coroutines it freed for its next connections (up to
 * RT_CORO_POOL_MAX): a connection per request then costs no malloc and
 * free of its coroutine, nor the allocator's periodic consolidation of what
 * they leave behind. An epoll worker pools its dead at once; an mn worker's
 * dead wait for an RCU grace period, after which the call_rcu thread puts
 * them on a shared list (up to RT_CORO_RECYCLED_MAX), and a worker whose
 * pool is empty takes a batch from it under one lock. */
#define RT_CORO_POOL_MAX 256
#define RT_CORO_RECYCLED_MAX 1024
static __thread struct rt_coro *coro_pool;
static __thread unsigned coro_pool_count;
static __thread enum rt_dead_mode dead_mode;

static struct {
    pthread_mutex_t lock;
    struct rt_coro *head;
    unsigned count;
} coro_recycled = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

static unsigned long coro_allocs;

static void free_chain(struct rt_coro *co);

/* Moves coroutines of the chain co onto the list *head until *count is max;
 * returns what is left of the chain. */
static struct rt_coro *push_chain(struct rt_coro **head,
                                  unsigned *count,
                                  unsigned max,
                                  struct rt_coro *co)
{
    while (co && *count < max) {
        struct rt_coro *next = co->dead_next;
        co->dead_next = *head;
        *head = co;
        (*count)++;
        co = next;
    }
    return co;
}

/* The call_rcu thread: the chain's grace period is over. */
static void recycle_chain(struct rt_coro *co)
{
    pthread_mutex_lock(&coro_recycled.lock);
    co = push_chain(&coro_recycled.head, &coro_recycled.count,
                    RT_CORO_RECYCLED_MAX, co);
    pthread_mutex_unlock(&coro_recycled.lock);
    free_chain(co);
}

/* An empty pool takes up to RT_CORO_POOL_MAX of the recycled. */
static void pool_refill(void)
{
    pthread_mutex_lock(&coro_recycled.lock);
    unsigned had = coro_pool_count;
    coro_recycled.head = push_chain(&coro_pool, &coro_pool_count,
                                    RT_CORO_POOL_MAX, coro_recycled.head);
    coro_recycled.count -= coro_pool_count - had;
    pthread_mutex_unlock(&coro_recycled.lock);
}

struct rt_coro *rt_coro_new(int fd)
{
    if (!coro_pool && dead_mode == RT_DEAD_SHARED)
        pool_refill();
    struct rt_coro *co = coro_pool;
    if (co) {
        coro_pool = co->dead_next;
        coro_pool_count--;
    } else {
        co = aligned_alloc(64, sizeof(*co));
        if (!co)
            return NULL;
        __atomic_fetch_add(&coro_allocs, 1, __ATOMIC_RELAXED);
    }
    memset(co, 0, sizeof(*co));
    co->conn.fd = fd;
    co->conn.coro = co;
    co->epfd = -1;
    atomic_init(&co->refs, 1);
    atomic_init(&co->wstate, RT_ST_RUNNING);
    return co;
}

unsigned long rt_coro_allocs(void)
{
    return __atomic_load_n(&coro_allocs, __ATOMIC_RELAXED);
}

void rt_coro_set_handler(rt_handler_fn fn)
{
    coro_handler = fn;
}

int rt_coro_start_fresh(struct rt_coro *co)
{
    co->stack = stack_get();
    if (!co->stack)
        return -ENOMEM;

    co->sp = rt_coro_frame((char *) co->stack + guard_size,
                           stack_map_len - guard_size, coro_main, co);
    return 0;
}

/* A dead coroutine may still be named by an epoll event that a worker has
 * taken but not yet handled. In the epoll model only its own worker can
 * hold such an event, so the worker frees its dead when the batch of events
 * is handled (rt_coro_reap). In the mn model any worker can, so the memory
 * waits for an RCU grace period; handing each coroutine to call_rcu alone
 * costs the call_rcu thread one synchronize_rcu per connection (about
 * 5,000 instructions when connections arrive one at a time, and as many as
 * the arrivals' timing makes), so a worker gathers its dead in a chain and
 * hands the chain over as one, when it holds RT_DEAD_BATCH of them or has
 * held them for RT_DEAD_HOLD_MS (counted from the first reap that saw
 * them). Handing over later than the death is safe: the grace period starts
 * at the hand-over, after every reader that could have seen the coroutine. */
#define RT_DEAD_BATCH 64
#define RT_DEAD_HOLD_MS 1000

static __thread struct rt_coro *dead_head;
static __thread unsigned dead_count;
static __thread uint64_t dead_since_ms;

static void free_chain(struct rt_coro *co)
{
    while (co) {
        struct rt_coro *next = co->dead_next;
        free(co);
        co = next;
    }
}

/* The PRIVATE mode's free: into this thread's pool while it has room. */
static void pool_chain(struct rt_coro *co)
{
    free_chain(push_chain(&coro_pool, &coro_pool_count, RT_CORO_POOL_MAX, co));
}

static void coro_free_rcu(struct rcu_head *head)
{
    recycle_chain(caa_container_of(head, struct rt_coro, rcu));
}

static void dead_hand_over(void)
{
    if (!dead_head)
        return;
    if (dead_mode == RT_DEAD_PRIVATE)
        pool_chain(dead_head);
    else
        urcu_memb_call_rcu(&dead_head->rcu, coro_free_rcu);
    dead_head = NULL;
    dead_count = 0;
}

void rt_coro_thread_dead_mode(enum rt_dead_mode mode)
{
    dead_hand_over();
    dead_mode = mode;
    if (mode == RT_DEAD_ALONE && rt_serve.stack) {
        stack_put_shared(rt_serve.stack);
        rt_serve.stack = NULL;
    }
    while (mode == RT_DEAD_ALONE && stack_local_count > 0)
        stack_put_shared(stack_local[--stack_local_count]);
    if (mode == RT_DEAD_ALONE) {
        free_chain(coro_pool);
        coro_pool = NULL;
        coro_pool_count = 0;
    }
}

void rt_coro_reap(uint64_t now_ms)
{
    if (!dead_head)
        return;
    if (dead_mode == RT_DEAD_PRIVATE)
        dead_hand_over();
    else if (!dead_since_ms)
        dead_since_ms = now_ms;
    else if (now_ms - dead_since_ms >= RT_DEAD_HOLD_MS)
        dead_hand_over();
}

void rt_coro_get(struct rt_coro *co)
{
    atomic_fetch_add_explicit(&co->refs, 1, memory_order_relaxed);
}

void rt_coro_put(struct rt_coro *co)
{
    if (atomic_fetch_sub_explicit(&co->refs, 1, memory_order_acq_rel) != 1)
        return;
    co->dead_next = NULL;
    if (dead_mode == RT_DEAD_ALONE) {
        urcu_memb_call_rcu(&co->rcu, coro_free_rcu);
        return;
    }
    if (!dead_head)
        dead_since_ms = 0; /* the next reap starts the clock */
    co->dead_next = dead_head;
    dead_head = co;
    if (++dead_count >= RT_DEAD_BATCH && dead_mode == RT_DEAD_SHARED)
        dead_hand_over();
}
