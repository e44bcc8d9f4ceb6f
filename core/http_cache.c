/* http_cache.c — the content cache's policy (see http_cache.h). */
#include "http_internal.h"
#include "http_limits.h"

uint64_t http_file_id_hash(const struct http_file_id *id)
{
    uint64_t h = (id->dev + 0x9e3779b97f4a7c15ULL) * 0xbf58476d1ce4e5b9ULL;

    h ^= id->ino;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    return h ^ (h >> 31);
}

size_t http_cache_entry_charge(size_t path_len, size_t extra)
{
    return HTTP_SERVER_ENTRY_OVERHEAD + path_len + extra;
}

size_t http_cache_obj_charge(size_t body)
{
    return HTTP_SERVER_ENTRY_OVERHEAD + body;
}

size_t http_cache_gz_charge(size_t head, size_t len, bool worthless)
{
    return worthless ? head : head + len;
}

size_t http_cache_leaving(size_t entry_charge, size_t obj_charge, bool sole)
{
    return entry_charge + (sole ? obj_charge : 0);
}

bool http_cache_keeps(size_t entry_charge, size_t obj_charge, size_t budget)
{
    return entry_charge + obj_charge <= budget;
}

bool http_cache_over(size_t bytes, size_t budget)
{
    return bytes > budget;
}

enum http_cache_gz_make http_cache_gz_make(bool in_table,
                                           bool body,
                                           uint64_t size)
{
    if (!in_table)
        return HTTP_CACHE_GZ_NONE;
    if (body && size <= HTTP_SERVER_GZIP_INLINE_MAX)
        return HTTP_CACHE_GZ_INLINE;
    return HTTP_CACHE_GZ_QUEUE;
}

static size_t counter_size(const http_counter *c)
{
    long v = http_counter_read(c);

    return v > 0 ? (size_t) v : 0;
}

void http_cache_acct_charge(struct http_cache_acct *a, size_t bytes, int objs)
{
    http_counter_add(&a->total, (long) bytes);
    if (objs)
        http_counter_add(&a->objs, objs);
}

void http_cache_acct_release(struct http_cache_acct *a,
                             size_t bytes,
                             size_t held,
                             int objs)
{
    http_counter_add(&a->total, -(long) bytes);
    if (held)
        http_counter_add(&a->held, -(long) held);
    if (objs)
        http_counter_add(&a->objs, -objs);
}

size_t http_cache_acct_hold(struct http_cache_acct *a,
                            size_t entry_charge,
                            size_t obj_charge,
                            bool sole)
{
    size_t held = http_cache_leaving(entry_charge, obj_charge, sole);

    http_counter_add(&a->held, (long) held);
    return held;
}

size_t http_cache_acct_published(const struct http_cache_acct *a)
{
    return http_cache_published(counter_size(&a->total),
                                counter_size(&a->held));
}

bool http_cache_acct_over(const struct http_cache_acct *a, size_t budget)
{
    return http_cache_over(http_cache_acct_published(a), budget);
}

void http_cache_acct_usage(const struct http_cache_acct *a,
                           size_t *bytes,
                           size_t *objs)
{
    *bytes = counter_size(&a->total);
    *objs = counter_size(&a->objs);
}

bool http_cache_evict_more(size_t bytes, size_t budget)
{
    return bytes > budget / 10 * HTTP_SERVER_CACHE_LOW_TENTHS;
}

void http_lru_add(struct http_lru *l, struct http_lru_node *n)
{
    n->prev = &l->head;
    n->next = l->head.next;
    l->head.next->prev = n;
    l->head.next = n;
}

static void lru_unlink(struct http_lru_node *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
}

void http_lru_touch(struct http_lru *l, struct http_lru_node *n)
{
    lru_unlink(n);
    http_lru_add(l, n);
}

void http_lru_leave(struct http_lru_node *n, struct http_lru_node **gone)
{
    lru_unlink(n);
    n->prev = NULL;
    n->next = *gone;
    *gone = n;
}

struct http_lru_node *http_lru_pop(struct http_lru_node **gone)
{
    struct http_lru_node *n = *gone;

    if (n)
        *gone = n->next;
    return n;
}

struct http_lru_node *http_lru_victim(const struct http_lru *l,
                                      size_t bytes,
                                      size_t budget)
{
    struct http_lru_node *tail = l->head.prev;

    if (tail == &l->head || !http_cache_evict_more(bytes, budget))
        return NULL;
    return tail;
}

void http_cache_put_gone(const struct http_cache *c,
                         struct http_lru_node **gone)
{
    struct http_lru_node *n;

    while ((n = http_lru_pop(gone)))
        c->ops->put(n);
}

void http_cache_evict_locked(struct http_cache *c,
                             size_t budget,
                             struct http_lru_node **gone)
{
    struct http_lru_node *n;

    while ((n = http_lru_victim(&c->lru, http_cache_acct_published(&c->acct),
                                budget))) {
        c->ops->unpublish(n, gone);
        c->ops->evicted();
    }
}

void http_cache_evict_if_over(struct http_cache *c, size_t budget)
{
    struct http_lru_node *gone = NULL;

    if (!http_cache_acct_over(&c->acct, budget))
        return;
    c->ops->lock();
    http_cache_evict_locked(c, budget, &gone);
    c->ops->unlock();
    http_cache_put_gone(c, &gone);
}

void http_cache_enter_locked(struct http_cache *c,
                             struct http_lru_node *n,
                             size_t budget,
                             struct http_lru_node **gone)
{
    http_lru_add(&c->lru, n);
    if (http_cache_acct_over(&c->acct, budget))
        http_cache_evict_locked(c, budget, gone);
}

void http_cache_drop(struct http_cache *c, struct http_lru_node *n)
{
    struct http_lru_node *gone = NULL;

    c->ops->lock();
    c->ops->unpublish(n, &gone);
    c->ops->unlock();
    http_cache_put_gone(c, &gone);
    c->ops->put(n);
}
