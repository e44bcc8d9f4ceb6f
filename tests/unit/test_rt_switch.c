/* test_rt_switch.c — the context switch alone (rt-switch.c), with nothing
 * but libc, so that it also runs where the rest of the runtime's libraries
 * are not installed: under qemu-aarch64 for the aarch64 switch, and for
 * the ucontext one (make check-portable, tests/test_build.py).
 *
 * Three coroutines and the main context pass a token around a ring many
 * times; each keeps integer and floating-point values live across every
 * switch (the compiler holds them in callee-saved registers: x19-x28 and
 * d8-d15 on aarch64, rbx, rbp and r12-r15 on x86-64) and checks them
 * against a recomputation; each formats a double with snprintf on its own
 * stack (which needs the ABI's stack alignment); a coroutine's first entry
 * gets its argument. Exits non-zero on the first failure. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "rt-switch.h"

#define NCORO 3
#define ROUNDS 2000
#define STACK_SIZE (64 * 1024)

static void *main_sp;
static void *sp[NCORO];
static long token;


/* Next in the ring: coroutine i hands over to i + 1, the last to main. */
static void pass(int i)
{
    token = token * 31 + i + 1;
    if (i + 1 < NCORO)
        rt_coro_switch(&sp[i], sp[i + 1]);
    else
        rt_coro_switch(&sp[i], main_sp);
}

static __attribute__((noinline)) int fmt_check(double v)
{
    char buf[64];
    snprintf(buf, sizeof(buf), "%.3f", v);
    return strtod(buf, NULL) == v;
}

static void __attribute__((noreturn)) coro(void *arg)
{
    int i = (int) (intptr_t) arg;
    /* values live across every switch */
    long a = i + 1, b = 7 * (i + 1), c = 3, d = 5, e = 11, f = 13, g = 17;
    double x = 0.5 * (i + 1), y = 1.25, z = 2.5, w = 4.0;
    CHECK(fmt_check(x));
    for (int r = 0; r < ROUNDS; r++) {
        pass(i);
        a += 1;
        b += a;
        c ^= b;
        d += c & 0xff;
        e = e * 3 + d;
        f -= e;
        g += f ^ a;
        x += 1.0;
        y *= 1.0;
        z += 0.5;
        w -= 0.25;
    }
    long ea = i + 1, eb = 7 * (i + 1), ec = 3, ed = 5, ee = 11, ef = 13,
         eg = 17;
    for (int r = 0; r < ROUNDS; r++) {
        ea += 1;
        eb += ea;
        ec ^= eb;
        ed += ec & 0xff;
        ee = ee * 3 + ed;
        ef -= ee;
        eg += ef ^ ea;
    }
    CHECK(a == ea && b == eb && c == ec && d == ed && e == ee && f == ef &&
          g == eg);
    CHECK(x == 0.5 * (i + 1) + ROUNDS && y == 1.25 && z == 2.5 + 0.5 * ROUNDS &&
          w == 4.0 - 0.25 * ROUNDS);
    CHECK(fmt_check(x));
    for (;;)
        pass(i); /* done: only hand the token on */
}

int main(void)
{
    static char stacks[NCORO][STACK_SIZE] __attribute__((aligned(64)));
    for (int i = 0; i < NCORO; i++)
        /* an unaligned top: the frame aligns it itself */
        sp[i] = rt_coro_frame(stacks[i], STACK_SIZE - 8 * i, coro,
                              (void *) (intptr_t) i);

    long want = 0;
    double m = 0.75;
    for (int r = 0; r <= ROUNDS; r++) {
        rt_coro_switch(&main_sp, sp[0]);
        for (int i = 0; i < NCORO; i++)
            want = want * 31 + i + 1;
        m += 0.5;
        CHECK(token == want);
        if (unit_failed)
            break;
    }
    CHECK(m == 0.75 + 0.5 * (ROUNDS + 1));
    printf("test-rt-switch: %s: %d coroutines x %d rounds\n",
           rt_coro_switch_kind, NCORO, ROUNDS);
    UNIT_DONE();
}
