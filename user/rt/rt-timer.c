/* rt-timer.c — a binary min-heap of deadlines, one per worker.
 *
 * Entries are not moved when a connection makes progress: it just moves its
 * deadline later, and the worker that pops the stale entry re-reads the
 * coroutine's current deadline and re-arms or drops it (rt-sched.c). A wait
 * with an earlier deadline than its entry (a lingering close after an idle
 * wait) moves the entry up, through the owner (rt_timer_update). That keeps
 * every heap single-threaded even when coroutines migrate (mn). A closed
 * connection's entry is removed at once by its owner (heap_idx).
 */
#include <stdlib.h>

#include "rt-internal.h"

static inline void place(struct rt_timer_heap *h,
                         size_t i,
                         struct rt_timer_entry e)
{
    h->v[i] = e;
    e.co->heap_idx = i;
}

static void sift_up(struct rt_timer_heap *h, size_t i, struct rt_timer_entry e)
{
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->v[parent].deadline <= e.deadline)
            break;
        place(h, i, h->v[parent]);
        i = parent;
    }
    place(h, i, e);
}

static void sift_down(struct rt_timer_heap *h,
                      size_t i,
                      struct rt_timer_entry e)
{
    size_t n = h->len;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && h->v[child + 1].deadline < h->v[child].deadline)
            child++;
        if (e.deadline <= h->v[child].deadline)
            break;
        place(h, i, h->v[child]);
        i = child;
    }
    place(h, i, e);
}

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
    struct rt_timer_entry e = {deadline, co};
    sift_up(h, h->len++, e);
    return 0;
}

void rt_timer_remove(struct rt_timer_heap *h, size_t idx)
{
    struct rt_timer_entry last = h->v[--h->len];
    if (idx == h->len)
        return;
    if (idx > 0 && last.deadline < h->v[(idx - 1) / 2].deadline)
        sift_up(h, idx, last);
    else
        sift_down(h, idx, last);
}

void rt_timer_update(struct rt_timer_heap *h, size_t idx, uint64_t deadline)
{
    struct rt_timer_entry e = h->v[idx];
    e.deadline = deadline;
    if (idx > 0 && deadline < h->v[(idx - 1) / 2].deadline)
        sift_up(h, idx, e);
    else
        sift_down(h, idx, e);
}

struct rt_timer_entry rt_timer_pop(struct rt_timer_heap *h)
{
    struct rt_timer_entry top = h->v[0];
    rt_timer_remove(h, 0);
    return top;
}
