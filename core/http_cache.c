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

static struct http_cache_entry *entry_of(struct http_lru_node *n)
{
    return (struct http_cache_entry *) ((char *) n -
                                        offsetof(struct http_cache_entry, lru));
}

void http_cache_put_gone(struct http_cache *c, struct http_lru_node **gone)
{
    struct http_lru_node *n;

    while ((n = http_lru_pop(gone)))
        http_cache_put(c, entry_of(n));
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
    http_cache_put(c, entry_of(n));
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
    c->ops->obj_free(o);
}

void http_cache_entry_made(struct http_cache_entry *e,
                           const char *rel,
                           size_t len,
                           const struct http_file_id *id,
                           uint64_t now_ms)
{
    http_ref_init(&e->refs, 1);
    http_stamp_set(&e->checked, now_ms);
    http_stamp_set(&e->used, now_ms);
    http_resource_init(&e->meta, rel, len, id->is_dir, id->size, id->mtime,
                       id->mtime_nsec, id->ino);
}

void http_cache_entry_holds(struct http_cache *c,
                            struct http_cache_entry *e,
                            struct http_cache_obj *o,
                            size_t len,
                            size_t extra)
{
    e->obj = o;
    e->body = o->body;
    e->meta.body_cached = o->body != NULL;
    e->charge = http_cache_entry_charge(len, extra);
    http_cache_acct_charge(&c->acct, e->charge, 0);
}

static struct http_cache_obj **obj_bucket(struct http_cache *c,
                                          const struct http_file_id *id)
{
    return &c->objs[http_file_id_hash(id) & (HTTP_CACHE_OBJ_BUCKETS - 1)];
}

/* Under the lock: the table's object of version id (alive: its last put
 * takes it out under the lock), or NULL. */
static struct http_cache_obj *obj_lookup_locked(struct http_cache *c,
                                                const struct http_file_id *id)
{
    struct http_cache_obj *o = *obj_bucket(c, id);

    while (o && !http_file_id_same(&o->id, id))
        o = o->next;
    return o;
}

/* The table's object of version id, referenced, or NULL. */
static struct http_cache_obj *http_cache_obj_find(struct http_cache *c,
                                                  const struct http_file_id *id)
{
    struct http_cache_obj *o;

    c->ops->lock();
    o = obj_lookup_locked(c, id);
    if (o)
        http_ref_get(&o->refs);
    c->ops->unlock();
    return o;
}

struct http_cache_obj *http_cache_obj_add(struct http_cache *c,
                                          struct http_cache_obj *o)
{
    struct http_cache_obj **b = obj_bucket(c, &o->id), *won;

    c->ops->lock();
    /* a concurrent load may have published this version meanwhile */
    won = obj_lookup_locked(c, &o->id);
    if (won) {
        http_ref_get(&won->refs);
    } else {
        o->next = *b;
        *b = o;
    }
    c->ops->unlock();
    return won;
}

/* Drop one reference to o: true when it was the last, o then out of the
 * table. The last goes under the lock, with the removal: a lookup never
 * finds a dead object. */
static bool http_cache_obj_unref(struct http_cache *c, struct http_cache_obj *o)
{
    struct http_cache_obj **p;

    if (http_ref_put_not_last(&o->refs))
        return false;
    c->ops->lock();
    if (!http_ref_put(&o->refs)) {
        c->ops->unlock();
        return false;
    }
    for (p = obj_bucket(c, &o->id); *p && *p != o; p = &(*p)->next)
        ;
    if (*p)
        *p = o->next;
    c->ops->unlock();
    return true;
}

void http_cache_obj_put(struct http_cache *c, struct http_cache_obj *o)
{
    if (!http_cache_obj_unref(c, o))
        return;
    http_cache_acct_release(&c->acct, (size_t) http_counter_read(&o->charge), 0,
                            1);
    c->ops->obj_free(o);
}

void http_cache_obj_free(const struct http_cache *c, struct http_cache_obj *o)
{
    c->ops->free(http_ptr_load(&o->gz));
    c->ops->free(http_ptr_load(&o->names));
    c->ops->free(o->body);
}

void http_cache_put(struct http_cache *c, struct http_cache_entry *e)
{
    if (!http_ref_put(&e->refs))
        return;
    /* No one can take a reference any more: the object and the charge go
     * now, the memory after the lookups that may still read it. */
    http_cache_acct_release(&c->acct, e->charge, e->held, 0);
    http_cache_obj_put(c, e->obj);
    c->ops->entry_free(e);
}

/* The whole file f into a new buffer, or NULL (the send path reports
 * what cannot be read). */
static char *read_whole(const struct http_cache *c, struct http_cache_file *f)
{
    size_t size = (size_t) f->id.size;
    char *buf = c->ops->alloc(size ? size : 1);

    if (buf && c->ops->read(f, buf, size) < 0) {
        c->ops->free(buf);
        buf = NULL;
    }
    return buf;
}

/* The object of f's version: the table's if it has one, else a new one
 * with its body read when keep; referenced. A concurrent load may publish
 * the version first: its object is shared, the new one freed. */
static struct http_cache_obj *http_cache_obj_get(struct http_cache *c,
                                                 struct http_cache_file *f,
                                                 bool keep)
{
    struct http_cache_obj *o = http_cache_obj_find(c, &f->id), *won;
    char *body;

    if (o)
        return o;
    body = keep ? read_whole(c, f) : NULL;
    o = c->ops->obj_new(f, body != NULL);
    if (!o) {
        c->ops->free(body);
        return NULL;
    }
    http_cache_obj_made(c, o, &f->id, body);
    won = http_cache_obj_add(c, o);
    if (!won)
        return o;
    http_cache_obj_lost(c, o);
    return won;
}

/* A new entry of k from the file system: referenced (refs 1, the
 * caller's), not yet published; 0 or -errno. */
static int http_cache_load(struct http_cache *c,
                           const struct http_cache_key *k,
                           uint64_t now_ms,
                           size_t budget,
                           struct http_cache_entry **out)
{
    const struct http_cache_ops *ops = c->ops;
    struct http_cache_file f;
    struct http_cache_entry *e;
    struct http_cache_obj *o;
    int err = ops->stat(k->tree, k->rel, &f);

    if (err < 0)
        return err;
    err = -HTTP_EACCES; /* fifos, devices, sockets: never served */
    if (!f.regular && !f.id.is_dir)
        goto out;
    err = -HTTP_ENOMEM;
    e = ops->entry_new(k);
    if (!e)
        goto out;
    http_cache_entry_made(e, k->rel, k->len, &f.id, now_ms);
    http_resource_use_table(&e->meta, k->mime, k->rel, k->len);
    o = http_cache_obj_get(c, &f, http_resource_keep_body(&e->meta, budget));
    if (!o) {
        ops->entry_free(e); /* never published */
        goto out;
    }
    http_cache_entry_holds(c, e, o, k->len, ops->entry_extra);
    *out = e;
    err = 0;
out:
    ops->close(&f);
    return err;
}

/* Is e (k's) still what the file system has? Checked at most once per
 * HTTP_SERVER_REVALIDATE_MS per entry; one checker wins the stamp, the
 * others trust the entry. Looked up as a load does: an entry the server's
 * user may no longer read (or enter) is stale. */
static bool http_cache_fresh(struct http_cache *c,
                             struct http_cache_entry *e,
                             const struct http_cache_key *k,
                             uint64_t now_ms)
{
    struct http_cache_file f;
    bool same;

    if (!http_cache_claim(&e->checked, now_ms, HTTP_SERVER_REVALIDATE_MS))
        return true;
    if (c->ops->stat(k->tree, k->rel, &f) < 0)
        return false;
    same = http_file_id_same(&e->obj->id, &f.id);
    c->ops->close(&f);
    return same;
}

int http_cache_get(struct http_cache *c,
                   const struct http_cache_key *k,
                   struct http_cache_entry *found,
                   uint64_t now_ms,
                   size_t budget,
                   struct http_cache_entry **out)
{
    struct http_cache_entry *e;
    int err;

    if (found) {
        if (http_cache_fresh(c, found, k, now_ms)) {
            http_cache_touch(c, found, now_ms);
            *out = found;
            return 1;
        }
        http_cache_drop(c, &found->lru);
    }
    err = http_cache_load(c, k, now_ms, budget, &e);
    if (err < 0)
        return err;
    /* into the table; or too big to keep: used once, freed by the put */
    http_cache_publish(c, e, budget);
    *out = e;
    return 0;
}

/* The file of rel beneath tree into a new buffer when it is still o's
 * version, else NULL. */
static char *read_same(const struct http_cache *c,
                       const struct http_cache_obj *o,
                       const void *tree,
                       const char *rel)
{
    struct http_cache_file f;
    char *buf = NULL;

    if (c->ops->stat(tree, rel, &f) < 0)
        return NULL;
    if (http_file_id_same(&o->id, &f.id))
        buf = read_whole(c, &f);
    c->ops->close(&f);
    return buf;
}

void http_cache_gz_build(struct http_cache *c,
                         struct http_cache_obj *o,
                         const void *tree,
                         const char *rel,
                         const struct http_cache_gz_ops *gz,
                         size_t budget)
{
    struct http_gz *z = NULL;
    char *tmp = NULL;
    const char *src = o->body;

    if (!gz->stopping || !gz->stopping()) {
        if (!src)
            src = tmp = read_same(c, o, tree, rel);
        z = src ? gz->build(src, (size_t) o->id.size)
                : c->ops->alloc(sizeof(*z));
        if (z && !src) { /* changed or unreadable: identity, no build again */
            memset(z, 0, sizeof(*z));
            z->worthless = true;
        }
        c->ops->free(tmp);
    }
    http_cache_gz_built(c, o, z, budget);
    http_cache_obj_put(c, o);
}
