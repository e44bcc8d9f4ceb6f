/* rt-timer.c — a binary min-heap of deadlines, one per worker.
 *
 * Entries are never removed early: a connection that makes progress just
 * moves its deadline, and the worker that pops the stale entry re-reads the
 * coroutine's current deadline and re-arms or drops it (rt-sched.c). That
 * keeps every heap single-threaded even when coroutines migrate (mn).
 */
#include <stdlib.h>

#include "rt-internal.h"

int rt_timer_push(struct rt_timer_heap *h,
                  uint64_t deadline,
                  struct rt_coro *co)
{
    if (h->len == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 256;
        struct rt_timer_entry *v = realloc(h->v, cap * sizeof(*v));
        if (!v)
            return -1;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->v[parent].deadline <= deadline)
            break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i].deadline = deadline;
    h->v[i].co = co;
    return 0;
}

struct rt_timer_entry rt_timer_pop(struct rt_timer_heap *h)
{
    struct rt_timer_entry top = h->v[0];
    struct rt_timer_entry last = h->v[--h->len];
    size_t i = 0, n = h->len;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && h->v[child + 1].deadline < h->v[child].deadline)
            child++;
        if (last.deadline <= h->v[child].deadline)
            break;
        h->v[i] = h->v[child];
        i = child;
    }
    if (n)
        h->v[i] = last;
    return top;
}
