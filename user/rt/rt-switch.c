/* rt-switch.c — the coroutine context switch, one per architecture.
 *
 * Why not ucontext by default: glibc's swapcontext saves and restores the
 * signal mask with a sigprocmask system call on every switch, and saves
 * the whole register file; the hand-written switches are a dozen or two
 * instructions and never enter the kernel. Since a switch is an ordinary
 * call, only the registers the ABI makes callee-saved need saving; they are
 * pushed on the stack being left, whose top is then the saved context.
 *
 *   x86-64 (SysV psABI): rbx, rbp, r12-r15 and rsp. The x87 control word
 *     and MXCSR are not saved: nothing in the runtime changes them.
 *   aarch64 (AAPCS64): x19-x28, the frame pointer x29, the link register
 *     x30, sp, and the low 64 bits of v8-v15 (d8-d15). FPCR is not saved,
 *     for the same reason as MXCSR.
 *   RT_CORO_UCONTEXT (make RT_CORO=ucontext): getcontext / makecontext /
 *     swapcontext, for any architecture glibc (or another libc with them)
 *     supports. The context lives in the switch's own frame on the stack
 *     being left, so the saved "stack pointer" is a ucontext_t *. A
 *     coroutine resumed on another thread (the mn model) takes the signal
 *     mask it was saved with; every worker has the same one.
 *
 * Any other architecture fails to build unless the fallback is asked for:
 * a silent fallback would cost a system call per switch without saying so.
 */
#if !defined(RT_CORO_UCONTEXT) && !defined(__x86_64__) && !defined(__aarch64__)
#error \
    "rt-switch.c: no hand-written context switch for this architecture \
(there are x86-64 and aarch64); build with make RT_CORO=ucontext for the \
portable ucontext one (README.md, Platforms)"
#endif

#include <stdint.h>
#include <stdlib.h>

#include "rt-switch.h"

#if defined(RT_CORO_UCONTEXT)

#include <ucontext.h>

const char rt_coro_switch_kind[] = "ucontext";

/* At the top of a fresh stack: the first context and what it calls. */
struct uframe {
    ucontext_t uc;
    void (*entry)(void *);
    void *arg;
};

/* makecontext passes int arguments only: the frame's address in halves. */
static void uframe_entry(unsigned hi, unsigned lo)
{
    struct uframe *f =
        (struct uframe *) (uintptr_t) (((uint64_t) hi << 32) | lo);
    f->entry(f->arg);
    abort(); /* entry never returns */
}

void rt_coro_switch(void **save_sp, void *next_sp)
{
    ucontext_t here;
    *save_sp = &here;
    if (swapcontext(&here, (ucontext_t *) next_sp) < 0)
        abort();
}

void *rt_coro_frame(void *lo, size_t size, void (*entry)(void *), void *arg)
{
    uintptr_t top = (uintptr_t) lo + size;
    struct uframe *f = (struct uframe *) ((top - sizeof(*f)) & ~(uintptr_t) 63);
    if (getcontext(&f->uc) < 0)
        abort();
    f->entry = entry;
    f->arg = arg;
    f->uc.uc_link = NULL;
    f->uc.uc_stack.ss_sp = lo;
    f->uc.uc_stack.ss_size = (size_t) ((uintptr_t) f - (uintptr_t) lo);
    f->uc.uc_stack.ss_flags = 0;
    uint64_t p = (uint64_t) (uintptr_t) f;
    makecontext(&f->uc, (void (*)(void)) uframe_entry, 2, (unsigned) (p >> 32),
                (unsigned) p);
    return &f->uc;
}

#elif defined(__x86_64__)

const char rt_coro_switch_kind[] = "x86-64";

/* rt_coro_switch(void **save_sp [rdi], void *next_sp [rsi]) */
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
    /* First resume of a coroutine lands here with its argument in r12 and
     * its entry function in r13; rsp is 16-byte aligned. */
    ".globl rt_coro_trampoline\n"
    ".type rt_coro_trampoline,@function\n"
    "rt_coro_trampoline:\n"
    "    movq %r12, %rdi\n"
    "    callq *%r13\n"
    "    ud2\n"
    ".size rt_coro_trampoline,.-rt_coro_trampoline\n");

void rt_coro_trampoline(void);

void *rt_coro_frame(void *lo, size_t size, void (*entry)(void *), void *arg)
{
    /* Popped by rt_coro_switch: r15 r14 r13 r12 rbx rbp, then the return
     * address (the trampoline). After that ret, rsp must be 16-byte
     * aligned so the trampoline's call keeps the ABI's alignment. */
    uintptr_t top = ((uintptr_t) lo + size) & ~(uintptr_t) 15;
    uint64_t *sp = (uint64_t *) (top - 16); /* rsp after ret */
    *--sp = (uint64_t) (uintptr_t) rt_coro_trampoline;
    *--sp = 0;                            /* rbp */
    *--sp = 0;                            /* rbx */
    *--sp = (uint64_t) (uintptr_t) arg;   /* r12 */
    *--sp = (uint64_t) (uintptr_t) entry; /* r13 */
    *--sp = 0;                            /* r14 */
    *--sp = 0;                            /* r15 */
    return sp;
}

#elif defined(__aarch64__)

const char rt_coro_switch_kind[] = "aarch64";

/* rt_coro_switch(void **save_sp [x0], void *next_sp [x1]). The saved
 * context, 160 bytes from the saved sp up (sp stays 16-byte aligned, as
 * AAPCS64 wants at every access):
 *   0 x19 x20, 16 x21 x22, 32 x23 x24, 48 x25 x26, 64 x27 x28,
 *   80 x29 x30, 96 d8 d9, 112 d10 d11, 128 d12 d13, 144 d14 d15 */
__asm__(
    ".text\n"
    ".globl rt_coro_switch\n"
    ".type rt_coro_switch,%function\n"
    ".balign 16\n"
    "rt_coro_switch:\n"
    "    sub sp, sp, #160\n"
    "    stp x19, x20, [sp, #0]\n"
    "    stp x21, x22, [sp, #16]\n"
    "    stp x23, x24, [sp, #32]\n"
    "    stp x25, x26, [sp, #48]\n"
    "    stp x27, x28, [sp, #64]\n"
    "    stp x29, x30, [sp, #80]\n"
    "    stp d8, d9, [sp, #96]\n"
    "    stp d10, d11, [sp, #112]\n"
    "    stp d12, d13, [sp, #128]\n"
    "    stp d14, d15, [sp, #144]\n"
    "    mov x9, sp\n"
    "    str x9, [x0]\n"
    "    mov sp, x1\n"
    "    ldp x19, x20, [sp, #0]\n"
    "    ldp x21, x22, [sp, #16]\n"
    "    ldp x23, x24, [sp, #32]\n"
    "    ldp x25, x26, [sp, #48]\n"
    "    ldp x27, x28, [sp, #64]\n"
    "    ldp x29, x30, [sp, #80]\n"
    "    ldp d8, d9, [sp, #96]\n"
    "    ldp d10, d11, [sp, #112]\n"
    "    ldp d12, d13, [sp, #128]\n"
    "    ldp d14, d15, [sp, #144]\n"
    "    add sp, sp, #160\n"
    "    ret\n"
    ".size rt_coro_switch,.-rt_coro_switch\n"
    /* First resume of a coroutine returns here (x30) with its argument in
     * x19 and its entry function in x20. */
    ".globl rt_coro_trampoline\n"
    ".type rt_coro_trampoline,%function\n"
    ".balign 16\n"
    "rt_coro_trampoline:\n"
    "    mov x0, x19\n"
    "    blr x20\n"
    "    brk #0x3e8\n"
    ".size rt_coro_trampoline,.-rt_coro_trampoline\n");

void rt_coro_trampoline(void);

void *rt_coro_frame(void *lo, size_t size, void (*entry)(void *), void *arg)
{
    uintptr_t top = ((uintptr_t) lo + size) & ~(uintptr_t) 15;
    uint64_t *sp = (uint64_t *) (top - 160);
    for (int i = 0; i < 20; i++)
        sp[i] = 0; /* x21-x28, x29 (the end of the frame chain), d8-d15 */
    sp[0] = (uint64_t) (uintptr_t) arg;                 /* x19 */
    sp[1] = (uint64_t) (uintptr_t) entry;               /* x20 */
    sp[11] = (uint64_t) (uintptr_t) rt_coro_trampoline; /* x30 */
    return sp;
}

#endif
