/* rt-switch.h — the coroutine context switch (rt-switch.c), apart from the
 * rest of the runtime so that it builds and is tested on its own (it needs
 * only libc): hand-written for x86-64 and aarch64, ucontext elsewhere when
 * asked for (make RT_CORO=ucontext). */
#ifndef KTCP_RT_SWITCH_H
#define KTCP_RT_SWITCH_H

#include <stddef.h>

/* Save the current context in *save_sp and resume the one at next_sp (a
 * value an earlier switch stored, or rt_coro_frame's). An ordinary call:
 * it returns when something switches back to *save_sp. */
void rt_coro_switch(void **save_sp, void *next_sp);

/* A first frame on the stack [lo, lo + size): the first switch to the
 * returned value calls entry(arg) on that stack. entry must never return.
 * lo + size need not be aligned; size must leave room for the frame (the
 * ucontext fallback puts a ucontext_t, about 1 KiB, at the top). */
void *rt_coro_frame(void *lo, size_t size, void (*entry)(void *), void *arg);

/* Which switch this build has: "x86-64", "aarch64" or "ucontext". */
extern const char rt_coro_switch_kind[];

#endif
