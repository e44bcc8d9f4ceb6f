/* test-rt.c — unit test of the runtime's pieces that need no sockets: the
 * timer heap (order, removal by index, heap_idx bookkeeping) and the
 * coroutine switch (resume, park, finish, ABI stack alignment). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt-internal.h"

static int failures;
#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, \
                    #cond);                                                  \
            failures++;                                                      \
        }                                                                    \
    } while (0)

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

static void test_coro(void)
{
    rt_coro_set_handler(handler);
    for (int fd = 6; fd <= 7; fd++) {
        struct rt_coro *co = rt_coro_new(fd);
        CHECK(co && co->conn.coro == co && co->conn.fd == fd);
        CHECK(rt_coro_start(co) == 0);
        steps = 0;
        for (int i = 0; i < 3; i++) {
            run_once(co);
            CHECK(co->op == RT_OP_PARK);
            CHECK(steps == i + 1);
        }
        run_once(co);
        CHECK(steps == 4);
        CHECK(co->op == (fd == 7 ? RT_OP_IDLE : RT_OP_EXIT));
        rt_coro_release_stack(co);
        CHECK(co->stack == NULL);
        free(co); /* never shared: no grace period needed here */
    }
}

int main(void)
{
    test_heap();
    test_coro();
    if (failures) {
        fprintf(stderr, "test-rt: %d failure(s)\n", failures);
        return 1;
    }
    printf("test-rt: ok\n");
    return 0;
}
