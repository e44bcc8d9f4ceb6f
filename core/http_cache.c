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

static struct http_cache_entry *entry_of(struct http_lru_node *n)
{
    return (struct http_cache_entry *) ((char *) n -
                                        offsetof(struct http_cache_entry, lru));
}

void http_cache_unpublish_locked(struct http_cache *c,
                                 struct http_cache_entry *e,
                                 struct http_lru_node **gone)
{
    if (!http_flag_read(&e->in_table))
        return;
    c->ops->remove(e);
    http_cache_left_locked(c, e, gone);
}

void http_cache_evict_locked(struct http_cache *c,
                             size_t budget,
                             struct http_lru_node **gone)
{
    struct http_lru_node *n;

    while ((n = http_lru_victim(&c->lru, http_cache_acct_published(&c->acct),
                                budget))) {
        http_cache_unpublish_locked(c, entry_of(n), gone);
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
    http_cache_unpublish_locked(c, entry_of(n), &gone);
    c->ops->unlock();
    http_cache_put_gone(c, &gone);
    c->ops->put(n);
}

void http_cache_hold(struct http_cache *c, struct http_cache_entry *e)
{
    e->held = http_cache_acct_hold(&c->acct, e->charge,
                                   (size_t) http_counter_read(&e->obj->charge),
                                   http_ref_read(&e->obj->refs) == 1);
}

void http_cache_left_locked(struct http_cache *c,
                            struct http_cache_entry *e,
                            struct http_lru_node **gone)
{
    http_flag_set(&e->in_table, false);
    http_lru_leave(&e->lru, gone);
    http_cache_hold(c, e);
}

bool http_cache_publish(struct http_cache *c,
                        struct http_cache_entry *e,
                        size_t budget)
{
    struct http_lru_node *gone = NULL;

    if (!http_cache_keeps(
            e->charge, (size_t) http_counter_read(&e->obj->charge), budget)) {
        http_cache_hold(c, e);
        return false;
    }
    http_ref_get(&e->refs); /* the table's */
    c->ops->lock();
    c->ops->insert(e, &gone);
    http_flag_set(&e->in_table, true);
    http_cache_enter_locked(c, &e->lru, budget, &gone);
    c->ops->unlock();
    http_cache_put_gone(c, &gone);
    return true;
}

void http_cache_touch_locked(struct http_cache *c, struct http_cache_entry *e)
{
    c->ops->lock();
    if (http_flag_read(&e->in_table))
        http_lru_touch(&c->lru, &e->lru);
    c->ops->unlock();
}

/* More bytes of o's (a copy it gains) charged; an eviction when over. The
 * charge is in place before the copy can be seen, so before anyone can
 * drop o's last reference for it. */
static void obj_charge_more(struct http_cache *c,
                            struct http_cache_obj *o,
                            size_t bytes)
{
    http_counter_add(&o->charge, (long) bytes);
    http_cache_acct_charge(&c->acct, bytes, 0);
}

bool http_cache_names_publish(struct http_cache *c,
                              struct http_cache_obj *o,
                              struct http_name_table *t,
                              size_t bytes,
                              size_t budget)
{
    /* the caller's reference keeps o alive until the charge is in */
    if (!http_ptr_claim(&o->names, t))
        return false;
    obj_charge_more(c, o, bytes);
    http_cache_evict_if_over(c, budget);
    return true;
}

void http_cache_gz_built(struct http_cache *c,
                         struct http_cache_obj *o,
                         struct http_gz *gz,
                         size_t budget)
{
    if (!gz) {
        http_flag_set(&o->building, false); /* a later request tries */
        return;
    }
    obj_charge_more(c, o,
                    http_cache_gz_charge(sizeof(*gz), gz->len, gz->worthless));
    http_ptr_store(&o->gz, gz); /* one build per object: the only store */
    http_cache_evict_if_over(c, budget);
}

const struct http_gz *http_cache_gz_start(
    struct http_cache *c,
    struct http_cache_entry *e,
    const struct http_cache_gz_ops *gz_ops,
    size_t budget)
{
    struct http_cache_obj *o = e->obj;
    enum http_cache_gz_make make = http_cache_gz_make(
        http_flag_read(&e->in_table), o->body != NULL, o->id.size);
    struct http_gz *gz;

    /* being built (the flag taken): identity until it is there */
    if (make == HTTP_CACHE_GZ_NONE || http_flag_take(&o->building))
        return NULL;
    if (make == HTTP_CACHE_GZ_QUEUE) {
        if (!gz_ops->queue(e))
            http_flag_set(&o->building, false); /* a later request tries */
        return NULL;
    }
    gz = gz_ops->gzip(o->body, o->id.size);
    http_cache_gz_built(c, o, gz, budget);
    return gz;
}

void http_cache_obj_made(struct http_cache *c,
                         struct http_cache_obj *o,
                         const struct http_file_id *id,
                         char *body)
{
    size_t charge = http_cache_obj_charge(body ? id->size : 0);

    http_ref_init(&o->refs, 1);
    o->id = *id;
    o->body = body;
    http_counter_add(&o->charge, (long) charge);
    http_cache_acct_charge(&c->acct, charge, 1);
}

void http_cache_obj_lost(struct http_cache *c, struct http_cache_obj *o)
{
    http_cache_acct_release(&c->acct, (size_t) http_counter_read(&o->charge), 0,
                            1);
}

void http_cache_entry_made(struct http_cache_entry *e,
                           struct http_resource *meta,
                           const char *rel,
                           size_t len,
                           const struct http_file_id *id,
                           uint64_t now_ms)
{
    http_ref_init(&e->refs, 1);
    http_stamp_set(&e->checked, now_ms);
    http_stamp_set(&e->used, now_ms);
    http_resource_init(meta, rel, len, id->is_dir, id->size, id->mtime,
                       id->mtime_nsec, id->ino);
}

void http_cache_entry_holds(struct http_cache *c,
                            struct http_cache_entry *e,
                            struct http_resource *meta,
                            struct http_cache_obj *o,
                            size_t len,
                            size_t extra)
{
    e->obj = o;
    meta->body_cached = o->body != NULL;
    e->charge = http_cache_entry_charge(len, extra);
    http_cache_acct_charge(&c->acct, e->charge, 0);
}
