/* rt-coro.c — coroutines: a six-register x86-64 context switch and stacks
 * from mmap with a guard page below them.
 *
 * Why not ucontext: swapcontext saves and restores the signal mask with a
 * sigprocmask system call on every switch; this switch is a dozen
 * instructions and never enters the kernel. Only the callee-saved registers
 * of the SysV ABI need saving, since the switch is an ordinary call.
 * (The x87 control word and MXCSR are not saved: nothing here changes them.)
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt-internal.h"

/* 128 KiB of address space per connection; only the pages a handler
 * touches become resident (see docs/httpd.md for measured RSS). */
#define RT_STACK_SIZE (128 * 1024)
#define RT_GUARD_SIZE 4096
#define RT_STACK_CACHE_MAX 1024

/* rt_coro_switch(void **save_sp, void *next_sp) */
__asm__(
    ".text\n"
    ".globl rt_coro_switch\n"
    ".type rt_coro_switch,@function\n"
    "rt_coro_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size rt_coro_switch,.-rt_coro_switch\n"
    /* First resume of a coroutine lands here with the coroutine in r12 and
     * its entry function in r13; rsp is 16-byte aligned. */
    ".globl rt_coro_trampoline\n"
    ".type rt_coro_trampoline,@function\n"
    "rt_coro_trampoline:\n"
    "    movq %r12, %rdi\n"
    "    callq *%r13\n"
    "    ud2\n"
    ".size rt_coro_trampoline,.-rt_coro_trampoline\n");

void rt_coro_trampoline(void);

static rt_handler_fn coro_handler; /* set once before workers start */

static void __attribute__((noreturn)) coro_main(struct rt_coro *co)
{
    coro_handler(&co->conn);
    co->op = RT_OP_EXIT;
    rt_coro_switch(&co->sp, co->worker->sched_sp);
    abort(); /* a dead coroutine is never resumed */
}

/* Stacks whose grace period has passed, ready for reuse. Shared by all
 * workers and the call_rcu thread, hence the lock. */
static struct {
    pthread_mutex_t lock;
    struct rt_coro *head;
    int count;
} stack_cache_locked = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

static struct rt_coro *stack_alloc(void)
{
    struct rt_coro *co = NULL;
    pthread_mutex_lock(&stack_cache_locked.lock);
    if (stack_cache_locked.head) {
        co = stack_cache_locked.head;
        stack_cache_locked.head = co->next;
        stack_cache_locked.count--;
    }
    pthread_mutex_unlock(&stack_cache_locked.lock);
    if (co)
        return co;

    size_t len = RT_STACK_SIZE + RT_GUARD_SIZE;
    char *map = mmap(NULL, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED)
        return NULL;
    if (mprotect(map, RT_GUARD_SIZE, PROT_NONE) < 0) {
        munmap(map, len);
        return NULL;
    }
    /* The coroutine header sits at the top of its own stack mapping. */
    co = (struct rt_coro *) (map + len - sizeof(struct rt_coro));
    co = (struct rt_coro *) ((uintptr_t) co & ~(uintptr_t) 63);
    co->map_len = len;
    return co;
}

static void *coro_map_base(struct rt_coro *co)
{
    uintptr_t top = ((uintptr_t) co + sizeof(*co) + 4095) & ~(uintptr_t) 4095;
    return (void *) (top - co->map_len);
}

static void coro_free_rcu(struct rcu_head *head)
{
    struct rt_coro *co = caa_container_of(head, struct rt_coro, rcu);
    pthread_mutex_lock(&stack_cache_locked.lock);
    if (stack_cache_locked.count < RT_STACK_CACHE_MAX) {
        co->next = stack_cache_locked.head;
        stack_cache_locked.head = co;
        stack_cache_locked.count++;
        co = NULL;
    }
    pthread_mutex_unlock(&stack_cache_locked.lock);
    if (co)
        munmap(coro_map_base(co), co->map_len);
}

struct rt_coro *rt_coro_new(int fd, rt_handler_fn fn)
{
    struct rt_coro *co = stack_alloc();
    if (!co)
        return NULL;
    size_t map_len = co->map_len;
    memset(co, 0, sizeof(*co));
    co->map_len = map_len;
    coro_handler = fn;
    co->conn.fd = fd;
    co->conn.coro = co;
    co->epfd = -1;
    atomic_init(&co->refs, 1);
    atomic_init(&co->wstate, RT_ST_RUNNING);

    /* Initial frame popped by rt_coro_switch: r15 r14 r13 r12 rbx rbp, then
     * the return address (the trampoline). After that ret, rsp must be
     * 16-byte aligned so the trampoline's call leaves the ABI's alignment. */
    uintptr_t top = (uintptr_t) co & ~(uintptr_t) 15;
    uint64_t *sp = (uint64_t *) (top - 16); /* rsp after ret */
    *--sp = (uint64_t) (uintptr_t) rt_coro_trampoline;
    *--sp = 0;                                /* rbp */
    *--sp = 0;                                /* rbx */
    *--sp = (uint64_t) (uintptr_t) co;        /* r12 */
    *--sp = (uint64_t) (uintptr_t) coro_main; /* r13 */
    *--sp = 0;                                /* r14 */
    *--sp = 0;                                /* r15 */
    co->sp = sp;
    return co;
}

void rt_coro_get(struct rt_coro *co)
{
    atomic_fetch_add_explicit(&co->refs, 1, memory_order_relaxed);
}

void rt_coro_put(struct rt_coro *co)
{
    if (atomic_fetch_sub_explicit(&co->refs, 1, memory_order_acq_rel) == 1)
        urcu_memb_call_rcu(&co->rcu, coro_free_rcu);
}
