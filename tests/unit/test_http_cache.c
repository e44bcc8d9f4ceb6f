/* Unit tests of the content cache's policy (http_cache.c). */
#include <stdlib.h>

#include "http_internal.h"
#include "http_limits.h"
#include "unit.h"

static void test_file_id(void)
{
    struct http_file_id a = {8, 1234, 100, 1700000000, 5, false}, b = a;

    CHECK(http_file_id_same(&a, &b));
    CHECK_INT(http_file_id_hash(&a), http_file_id_hash(&b));
    b.mtime_nsec = 6; /* a rewrite within the same second */
    CHECK(!http_file_id_same(&a, &b));
    b = a;
    b.size = 101;
    CHECK(!http_file_id_same(&a, &b));
    b = a;
    b.ino = 1235; /* replaced by rename */
    CHECK(!http_file_id_same(&a, &b));
    CHECK(http_file_id_hash(&a) != http_file_id_hash(&b));
    b = a;
    b.dev = 9;
    CHECK(!http_file_id_same(&a, &b));
    CHECK(http_file_id_hash(&a) != http_file_id_hash(&b));
    b = a;
    b.is_dir = true;
    CHECK(!http_file_id_same(&a, &b));
    b = a;
    b.mtime++;
    CHECK(!http_file_id_same(&a, &b));
    /* the version is not in the hash: a new version lands in its bucket */
    CHECK_INT(http_file_id_hash(&a), http_file_id_hash(&b));
    /* the low bits (a table's bucket) depend on the inode's high bits */
    b = a;
    b.ino = a.ino | (1ULL << 40);
    CHECK((http_file_id_hash(&a) & 1023) != (http_file_id_hash(&b) & 1023));
}

static void test_due(void)
{
    CHECK(!http_cache_due(1000, 1000, HTTP_SERVER_REVALIDATE_MS));
    CHECK(!http_cache_due(1999, 1000, HTTP_SERVER_REVALIDATE_MS));
    CHECK(http_cache_due(2000, 1000, HTTP_SERVER_REVALIDATE_MS));
    CHECK(http_cache_due(2001, 1000, HTTP_SERVER_REVALIDATE_MS));
    /* a clock that trails the stamp is never due */
    CHECK(!http_cache_due(999, 1000, HTTP_SERVER_REVALIDATE_MS));
    CHECK(!http_cache_due(0, 5000, HTTP_SERVER_LRU_TOUCH_MS));
    CHECK(!http_cache_due(1099, 1000, HTTP_SERVER_LRU_TOUCH_MS));
    CHECK(http_cache_due(1100, 1000, HTTP_SERVER_LRU_TOUCH_MS));
}

/* The stamp's claim: due, then one claimer per period. */
static void test_claim(void)
{
    http_stamp s;

    http_stamp_set(&s, 1000);
    CHECK(!http_cache_claim(&s, 1999, HTTP_SERVER_REVALIDATE_MS));
    CHECK_INT(http_stamp_read(&s), 1000); /* not due: untouched */
    CHECK(http_cache_claim(&s, 2000, HTTP_SERVER_REVALIDATE_MS));
    CHECK_INT(http_stamp_read(&s), 2000); /* moved to now */
    /* a second thread at the same moment finds it claimed */
    CHECK(!http_cache_claim(&s, 2000, HTTP_SERVER_REVALIDATE_MS));
    /* a trailing clock (another thread's) never claims it back */
    CHECK(!http_cache_claim(&s, 1500, HTTP_SERVER_REVALIDATE_MS));
    CHECK_INT(http_stamp_read(&s), 2000);
    CHECK(http_cache_claim(&s, 2100, HTTP_SERVER_LRU_TOUCH_MS));
    CHECK(!http_cache_claim(&s, 2199, HTTP_SERVER_LRU_TOUCH_MS));
    /* the move itself: from the value read, else refused */
    CHECK(!http_stamp_move(&s, 2000, 3000));
    CHECK_INT(http_stamp_read(&s), 2100);
    CHECK(http_stamp_move(&s, 2100, 3000));
    CHECK_INT(http_stamp_read(&s), 3000);
}

/* Whether, and where, a gzip copy is made. */
static void test_gz_make(void)
{
    /* an entry out of the table: never (every request would compress) */
    CHECK_INT(http_cache_gz_make(false, true, 100), HTTP_CACHE_GZ_NONE);
    CHECK_INT(http_cache_gz_make(false, false, 1 << 20), HTTP_CACHE_GZ_NONE);
    /* a small body in memory: on the spot */
    CHECK_INT(http_cache_gz_make(true, true, 100), HTTP_CACHE_GZ_INLINE);
    CHECK_INT(http_cache_gz_make(true, true, HTTP_SERVER_GZIP_INLINE_MAX),
              HTTP_CACHE_GZ_INLINE);
    /* a bigger body, or one read from the file: off the request path */
    CHECK_INT(http_cache_gz_make(true, true, HTTP_SERVER_GZIP_INLINE_MAX + 1),
              HTTP_CACHE_GZ_QUEUE);
    CHECK_INT(http_cache_gz_make(true, false, 100), HTTP_CACHE_GZ_QUEUE);
}

static void test_charges(void)
{
    CHECK_INT(http_cache_entry_charge(11, 0), HTTP_SERVER_ENTRY_OVERHEAD + 11);
    CHECK_INT(http_cache_entry_charge(11, 64), HTTP_SERVER_ENTRY_OVERHEAD + 75);
    CHECK_INT(http_cache_obj_charge(0), HTTP_SERVER_ENTRY_OVERHEAD);
    CHECK_INT(http_cache_obj_charge(4096), HTTP_SERVER_ENTRY_OVERHEAD + 4096);
    CHECK_INT(http_cache_gz_charge(16, 300, false), 316);
    CHECK_INT(http_cache_gz_charge(16, 300, true), 16);
    CHECK_INT(http_cache_leaving(300, 5000, true), 5300);
    CHECK_INT(http_cache_leaving(300, 5000, false), 300);
}

static void test_budget(void)
{
    /* an entry and its object that fill the budget exactly are kept */
    CHECK(http_cache_keeps(300, 700, 1000));
    CHECK(!http_cache_keeps(300, 701, 1000));
    CHECK(!http_cache_over(1000, 1000));
    CHECK(http_cache_over(1001, 1000));
    /* eviction goes down to 90% of the budget */
    CHECK(http_cache_evict_more(1001, 1000));
    CHECK(http_cache_evict_more(901, 1000));
    CHECK(!http_cache_evict_more(900, 1000));
    /* tenths of the budget: 1009 / 10 * 9 = 900 */
    CHECK(!http_cache_evict_more(900, 1009));
    CHECK(http_cache_evict_more(901, 1009));
}

static void test_published(void)
{
    CHECK_INT(http_cache_published(1000, 300), 700);
    CHECK_INT(http_cache_published(300, 300), 0);
    /* the counters read apart: held may pass the total for a moment */
    CHECK_INT(http_cache_published(300, 301), 0);
}

/* The counters through an entry's life: charged, held when it leaves the
 * table, released at its last put; an object's apart. */
static void test_acct(void)
{
    struct http_cache_acct a = HTTP_CACHE_ACCT_INIT;
    size_t bytes, objs, held;

    http_cache_acct_usage(&a, &bytes, &objs);
    CHECK_INT(bytes, 0);
    CHECK_INT(objs, 0);
    http_cache_acct_charge(&a, 5000, 1); /* an object */
    http_cache_acct_charge(&a, 300, 0);  /* its entry */
    http_cache_acct_usage(&a, &bytes, &objs);
    CHECK_INT(bytes, 5300);
    CHECK_INT(objs, 1);
    CHECK_INT(http_cache_acct_published(&a), 5300);
    CHECK(http_cache_acct_over(&a, 5299));
    CHECK(!http_cache_acct_over(&a, 5300));
    http_cache_acct_charge(&a, 700, 0); /* a gzip copy of the object */
    CHECK_INT(http_cache_acct_published(&a), 6000);
    /* the entry leaves the table, its object's only holder: all held */
    held = http_cache_acct_hold(&a, 300, 5700, true);
    CHECK_INT(held, 6000);
    CHECK_INT(http_cache_acct_published(&a), 0);
    CHECK(!http_cache_acct_over(&a, 0));
    http_cache_acct_usage(&a, &bytes, &objs);
    CHECK_INT(bytes, 6000); /* still charged until the last put */
    /* a second entry of the same object leaves: its own bytes only */
    http_cache_acct_charge(&a, 200, 0);
    CHECK_INT(http_cache_acct_published(&a), 200);
    CHECK_INT(http_cache_acct_hold(&a, 200, 5700, false), 200);
    CHECK_INT(http_cache_acct_published(&a), 0);
    /* the last puts: the entries, then the object */
    http_cache_acct_release(&a, 200, 200, 0);
    http_cache_acct_release(&a, 300, held, 0);
    http_cache_acct_usage(&a, &bytes, &objs);
    CHECK_INT(bytes, 5700);
    CHECK_INT(objs, 1);
    /* the object's bytes counted held by its entry are held no more */
    CHECK_INT(http_cache_acct_published(&a), 5700);
    http_cache_acct_release(&a, 5700, 0, 1);
    http_cache_acct_usage(&a, &bytes, &objs);
    CHECK_INT(bytes, 0);
    CHECK_INT(objs, 0);
    CHECK_INT(http_cache_acct_published(&a), 0);
    /* read apart, a release may show before its charge: never below 0 */
    http_cache_acct_release(&a, 100, 0, 1);
    http_cache_acct_usage(&a, &bytes, &objs);
    CHECK_INT(bytes, 0);
    CHECK_INT(objs, 0);
    CHECK_INT(http_cache_acct_published(&a), 0);
}

/* Entries of 100 bytes each on an LRU list: the order, the touch, the
 * eviction walk and the gone list the engines put after their lock. */
struct ent {
    struct http_lru_node lru;
    size_t bytes;
    bool in_table;
};

static struct ent *ent_of(struct http_lru_node *n)
{
    return (struct ent *) ((char *) n - offsetof(struct ent, lru));
}

static void test_lru(void)
{
    static struct http_lru l = HTTP_LRU_INIT(l);
    struct ent e[5];
    struct http_lru_node *gone = NULL, *n;
    size_t total = 0;

    CHECK(!http_lru_victim(&l, 10000, 100)); /* empty: nothing to take */
    for (int i = 0; i < 5; i++) {
        e[i] = (struct ent){.bytes = 100, .in_table = true};
        http_lru_add(&l, &e[i].lru);
        total += 100;
    }
    /* 4 is the front, 0 the tail; a hit on 0 moves it to the front */
    CHECK(l.head.next == &e[4].lru && l.head.prev == &e[0].lru);
    http_lru_touch(&l, &e[0].lru);
    CHECK(l.head.next == &e[0].lru && l.head.prev == &e[1].lru);
    CHECK(!http_lru_victim(&l, total, 600)); /* 500 <= 9/10 of 600 */
    /* a budget of 250: down to 9/10 of it (225), from the tail: 1, 2, 3 */
    int taken = 0;
    while ((n = http_lru_victim(&l, total, 250))) {
        ent_of(n)->in_table = false;
        total -= ent_of(n)->bytes;
        http_lru_leave(n, &gone);
        taken++;
    }
    CHECK_INT(taken, 3);
    CHECK_INT(total, 200);
    CHECK(!e[1].in_table && !e[2].in_table && !e[3].in_table);
    CHECK(e[0].in_table && e[4].in_table);
    CHECK(l.head.next == &e[0].lru && l.head.prev == &e[4].lru);
    CHECK(e[0].lru.next == &e[4].lru && e[4].lru.prev == &e[0].lru);
    /* the gone list holds them, the last taken first */
    CHECK(http_lru_pop(&gone) == &e[3].lru);
    CHECK(http_lru_pop(&gone) == &e[2].lru);
    CHECK(http_lru_pop(&gone) == &e[1].lru);
    CHECK(!http_lru_pop(&gone));
    CHECK(!gone); /* emptied: a second put of the same list puts nothing */
    /* bytes that cannot drop (held elsewhere) still end with the list */
    taken = 0;
    while ((n = http_lru_victim(&l, 10000, 350))) {
        http_lru_leave(n, &gone);
        taken++;
    }
    CHECK_INT(taken, 2);
    CHECK(l.head.next == &l.head && l.head.prev == &l.head);
    CHECK(http_lru_pop(&gone) == &e[0].lru);
    CHECK(http_lru_pop(&gone) == &e[4].lru);
}

/* A fake engine for the table's cold paths: entries (core's struct
 * http_cache_entry, 100 bytes each, on one shared object that another
 * holder keeps, so an entry leaving holds its own bytes only) with a
 * reference count, and a lock that must be held (and never taken twice)
 * around every removal and insert. */
static struct {
    bool locked;
    int locks, evictions, frees, obj_frees, removes, inserts, bad;
    struct http_cache_entry *replaced; /* what the next insert replaces */
} eng;
static struct http_cache fake;
static struct http_cache_obj fobj;
static struct http_cache_entry fents[8];

static void f_lock(void)
{
    eng.bad += eng.locked;
    eng.locked = true;
    eng.locks++;
}

static void f_unlock(void)
{
    eng.bad += !eng.locked;
    eng.locked = false;
}

static void f_remove(struct http_cache_entry *e)
{
    eng.bad += !eng.locked || !http_flag_read(&e->in_table);
    eng.removes++;
}

static void f_entry_free(struct http_cache_entry *e)
{
    eng.bad += eng.locked || http_ref_read(&e->refs); /* last put, unlocked */
    eng.frees++;
}

static void f_obj_free(struct http_cache_obj *o)
{
    (void) o;
    eng.obj_frees++;
}

static void f_evicted(void)
{
    eng.evictions++;
}

static void f_insert(struct http_cache_entry *e, struct http_lru_node **gone)
{
    eng.bad += !eng.locked || http_flag_read(&e->in_table);
    eng.inserts++;
    if (eng.replaced) {
        http_cache_unpublish_locked(&fake, eng.replaced, gone);
        eng.replaced = NULL;
    }
}

static const struct http_cache_ops fops = {.lock = f_lock,
                                           .unlock = f_unlock,
                                           .remove = f_remove,
                                           .insert = f_insert,
                                           .entry_free = f_entry_free,
                                           .evicted = f_evicted,
                                           .obj_free = f_obj_free};

static void fent_init(int i)
{
    fents[i] = (struct http_cache_entry){.charge = 100, .obj = &fobj};
    http_ref_init(&fents[i].refs, 1); /* the loader's */
    http_cache_acct_charge(&fake.acct, 100, 0);
}

static size_t fake_bytes(void)
{
    size_t bytes, objs;

    http_cache_acct_usage(&fake.acct, &bytes, &objs);
    return bytes;
}

/* Core's flow over the fake: an entry enters at the front, an insert over
 * budget evicts from the tail (the entries put after the lock), a charge
 * elsewhere evicts only when over, a stale entry leaves with both of its
 * references. */
static void test_cache_flow(void)
{
    fake = (struct http_cache) HTTP_CACHE_INIT(fake, &fops);
    http_ref_init(&fobj.refs, 100); /* never the entries' alone */
    for (int i = 0; i < 5; i++) {
        fent_init(i);
        CHECK(http_cache_publish(&fake, &fents[i], 1000));
        http_cache_put(&fake, &fents[i]); /* the loader's: the table's left */
        CHECK(http_flag_read(&fents[i].in_table));
    }
    CHECK_INT(eng.inserts, 5);
    CHECK_INT(eng.evictions, 0); /* 500 of 1000 */
    CHECK(fake.lru.head.next == &fents[4].lru);
    CHECK(fake.lru.head.prev == &fents[0].lru);
    /* under budget: no lock taken */
    eng.locks = 0;
    http_cache_evict_if_over(&fake, 1000);
    CHECK_INT(eng.locks, 0);
    /* a sixth entry past a budget of 550: down to 495, the tail first,
     * the evicted put after the lock */
    fent_init(5);
    CHECK(http_cache_publish(&fake, &fents[5], 550));
    http_cache_put(&fake, &fents[5]);
    CHECK_INT(eng.evictions, 2);
    CHECK_INT(eng.removes, 2);
    CHECK(!http_flag_read(&fents[0].in_table));
    CHECK(!http_flag_read(&fents[1].in_table));
    CHECK(http_flag_read(&fents[2].in_table));
    CHECK(fake.lru.head.next == &fents[5].lru);
    CHECK_INT(eng.frees, 2);
    CHECK_INT(http_ref_read(&fobj.refs), 98); /* each freed entry's */
    CHECK_INT(http_ref_read(&fents[0].refs) + http_ref_read(&fents[1].refs), 0);
    CHECK_INT(fake_bytes(), 400);
    /* a charge that passes a smaller budget: the lock, an eviction, the
     * puts after it */
    eng.locks = 0;
    http_cache_evict_if_over(&fake, 300);
    CHECK_INT(eng.locks, 1);
    CHECK_INT(eng.evictions, 4);
    CHECK(!http_flag_read(&fents[2].in_table));
    CHECK(!http_flag_read(&fents[3].in_table));
    CHECK(http_flag_read(&fents[4].in_table));
    CHECK_INT(eng.frees, 4);
    /* a stale entry found by a reader (its reference taken): out of the
     * table, both references put */
    http_ref_get(&fents[4].refs);
    http_cache_drop(&fake, &fents[4].lru);
    CHECK(!http_flag_read(&fents[4].in_table));
    CHECK_INT(http_ref_read(&fents[4].refs), 0);
    CHECK_INT(eng.frees, 5);
    /* a reader holds 5 when a load of its path replaces it (the engine's
     * insert finds it): out of the table, the table's reference put */
    http_ref_get(&fents[5].refs);
    fent_init(6);
    eng.replaced = &fents[5];
    CHECK(http_cache_publish(&fake, &fents[6], 1000));
    CHECK(!http_flag_read(&fents[5].in_table));
    CHECK_INT(http_ref_read(&fents[5].refs), 1); /* the reader's */
    CHECK(fake.lru.head.next == &fents[6].lru);
    CHECK(fake.lru.head.prev == &fents[6].lru);
    /* the reader finds it stale, gone from the table already: only its
     * reference, no second removal */
    int removes = eng.removes;
    http_cache_drop(&fake, &fents[5].lru);
    CHECK_INT(eng.removes, removes);
    CHECK_INT(http_ref_read(&fents[5].refs), 0);
    /* too big to keep: not in the table, its bytes held until its put */
    fent_init(7);
    fents[7].charge = 2000;
    http_cache_acct_charge(&fake.acct, 1900, 0);
    CHECK(!http_cache_publish(&fake, &fents[7], 1000));
    CHECK(!http_flag_read(&fents[7].in_table));
    CHECK_INT(fents[7].held, 2000);
    CHECK_INT(http_ref_read(&fents[7].refs), 1);
    CHECK_INT(http_cache_acct_published(&fake.acct), 100); /* 6 alone */
    http_cache_put(&fake, &fents[7]);
    CHECK_INT(fake_bytes(), 100);
    /* 6 stale: the table's reference and its loader's */
    http_cache_drop(&fake, &fents[6].lru);
    CHECK(fake.lru.head.next == &fake.lru.head);
    CHECK_INT(fake_bytes(), 0);
    CHECK_INT(eng.frees, 8);
    CHECK_INT(eng.obj_frees, 0);
    CHECK_INT(eng.bad, 0);
}

/* A load's object and entry: charged once, the lost object's charge
 * returned, the entry's resource from the file's version. */
static void test_made(void)
{
    struct http_cache c = HTTP_CACHE_INIT(c, &fops);
    struct http_file_id id = {
        .dev = 1, .ino = 2, .size = 5, .mtime = 1700000000, .mtime_nsec = 7};
    struct http_cache_obj o = {0}, lost = {0};
    struct http_cache_entry e = {0};
    char body[5] = "hello";
    size_t bytes, objs;

    http_cache_obj_made(&c, &o, &id, body);
    http_cache_obj_made(&c, &lost, &id, NULL);
    CHECK_INT(http_ref_read(&o.refs), 1);
    CHECK(http_file_id_same(&o.id, &id) && o.body == body);
    CHECK_INT(http_counter_read(&o.charge), http_cache_obj_charge(5));
    CHECK_INT(http_counter_read(&lost.charge), http_cache_obj_charge(0));
    http_cache_obj_lost(&c, &lost);
    CHECK_INT(eng.obj_frees, 1);
    http_cache_acct_usage(&c.acct, &bytes, &objs);
    CHECK_INT(bytes, http_cache_obj_charge(5));
    CHECK_INT(objs, 1);
    http_cache_entry_made(&e, "a.txt", 5, &id, 1234);
    CHECK_INT(http_ref_read(&e.refs), 1);
    CHECK_INT(http_stamp_read(&e.checked), 1234);
    CHECK_INT(http_stamp_read(&e.used), 1234);
    CHECK(!e.meta.is_dir && e.meta.size == 5 && e.meta.mtime == 1700000000);
    http_cache_entry_holds(&c, &e, &o, 5, 10);
    CHECK(e.obj == &o && e.body == body && e.meta.body_cached);
    CHECK_INT(e.charge, http_cache_entry_charge(5, 10));
    http_cache_acct_usage(&c.acct, &bytes, &objs);
    CHECK_INT(bytes, http_cache_obj_charge(5) + http_cache_entry_charge(5, 10));
}

/* The gzip copy: built once, the flag taken by one request; a small body
 * in memory compressed now, a bigger one queued; a failed queue or build
 * lets a later request try; none for an entry out of the table. */
static struct http_gz fgz = {.len = 3};
static int gz_made, gz_queued;
static bool gz_queue_ok;

static struct http_gz *g_gzip(const char *src, size_t len)
{
    (void) src;
    (void) len;
    gz_made++;
    return &fgz;
}

static bool g_queue(struct http_cache_entry *e)
{
    (void) e;
    gz_queued++;
    return gz_queue_ok;
}

static void test_gz(void)
{
    static const struct http_cache_gz_ops gops = {.gzip = g_gzip,
                                                  .queue = g_queue};
    struct http_cache c = HTTP_CACHE_INIT(c, &fops);
    struct http_cache_obj o = {.id = {.size = 1000}};
    struct http_cache_entry e = {.obj = &o};
    size_t bytes, objs;

    CHECK(!http_cache_gz(&c, &e, &gops, 1 << 20)); /* out of the table */
    CHECK_INT(gz_made + gz_queued, 0);
    http_flag_set(&e.in_table, true);
    /* no body in memory: queued; the queue full, the flag dropped */
    CHECK(!http_cache_gz(&c, &e, &gops, 1 << 20));
    CHECK_INT(gz_queued, 1);
    CHECK(!http_flag_read(&o.building));
    gz_queue_ok = true;
    CHECK(!http_cache_gz(&c, &e, &gops, 1 << 20));
    CHECK_INT(gz_queued, 2);
    CHECK(http_flag_read(&o.building));
    CHECK(!http_cache_gz(&c, &e, &gops, 1 << 20)); /* being built */
    CHECK_INT(gz_queued, 2);
    /* the build out of memory: a later request queues again */
    http_cache_gz_built(&c, &o, NULL, 1 << 20);
    CHECK(!http_flag_read(&o.building));
    CHECK(!http_cache_gz(&c, &e, &gops, 1 << 20));
    CHECK_INT(gz_queued, 3);
    http_cache_gz_built(&c, &o, &fgz, 1 << 20);
    CHECK(http_cache_gz(&c, &e, &gops, 1 << 20) == &fgz);
    CHECK_INT(http_counter_read(&o.charge),
              http_cache_gz_charge(sizeof(fgz), 3, false));
    http_cache_acct_usage(&c.acct, &bytes, &objs);
    CHECK_INT(bytes, http_cache_gz_charge(sizeof(fgz), 3, false));
    /* a small body in memory: compressed on the spot */
    char body[10] = {0};
    struct http_cache_obj small = {.id = {.size = 10}, .body = body};
    struct http_cache_entry se = {.obj = &small};
    http_flag_set(&se.in_table, true);
    CHECK(http_cache_gz(&c, &se, &gops, 1 << 20) == &fgz);
    CHECK_INT(gz_made, 1);
    CHECK_INT(gz_queued, 3);
    /* a name table, once */
    struct http_name_table *t1 = (struct http_name_table *) body;
    struct http_name_table *t2 = (struct http_name_table *) (body + 1);
    CHECK(http_cache_names_publish(&c, &small, t1, 50, 1 << 20));
    CHECK(!http_cache_names_publish(&c, &small, t2, 50, 1 << 20));
    CHECK(http_ptr_load(&small.names) == t1);
}

/* A fake engine for the lookup-or-load path: one file beneath any tree
 * (its version in fs.id; stat fails with fs.err), core's object table
 * (fs.rival: what a concurrent load published first), entries and
 * objects from arrays, libc's memory. */
static struct {
    struct http_file_id id;
    bool regular;
    int err, stats, reads, open, entries, objs, entry_frees, obj_frees;
    struct http_cache_obj *rival;
} fs;
static struct http_cache gc;
static struct http_cache_entry gents[8];
static struct http_cache_obj gobjs[8];

static int g_stat(const void *tree, const char *rel, struct http_cache_file *f)
{
    (void) tree;
    (void) rel;
    fs.stats++;
    if (fs.err)
        return fs.err;
    f->id = fs.id;
    f->regular = fs.regular;
    f->h.fd = 7;
    fs.open++;
    return 0;
}

static int g_read(struct http_cache_file *f, char *buf, size_t len)
{
    fs.reads++;
    memset(buf, 'x', len);
    return f->h.fd == 7 ? 0 : -1;
}

static void g_close(struct http_cache_file *f)
{
    (void) f;
    fs.open--;
}

static struct http_cache_entry *g_entry_new(const struct http_cache_key *k)
{
    (void) k;
    return &gents[fs.entries++];
}

static void g_entry_free(struct http_cache_entry *e)
{
    fs.entry_frees += !http_ref_read(&e->refs);
}

/* A rival set: a concurrent load publishes its object of the version
 * first, between this load's lookup and its add. */
static struct http_cache_obj *g_obj_new(struct http_cache_file *f, bool body)
{
    (void) f;
    (void) body;
    if (fs.rival) {
        CHECK(!http_cache_obj_add(&gc, fs.rival));
        fs.rival = NULL;
    }
    return &gobjs[fs.objs++];
}

static void g_obj_free(struct http_cache_obj *o)
{
    fs.obj_frees++;
    http_cache_obj_free(&gc, o);
}

static const struct http_cache_ops gops = {.lock = f_lock,
                                           .unlock = f_unlock,
                                           .remove = f_remove,
                                           .insert = f_insert,
                                           .entry_new = g_entry_new,
                                           .entry_free = g_entry_free,
                                           .evicted = f_evicted,
                                           .obj_new = g_obj_new,
                                           .obj_free = g_obj_free,
                                           .stat = g_stat,
                                           .read = g_read,
                                           .close = g_close,
                                           .alloc = malloc,
                                           .free = free};

/* Core's lookup-or-load over the fake: a miss loads and publishes (the
 * body of a small file read), a hit within the revalidation period looks
 * at nothing, a second later the file is checked, another path of the
 * same version shares the object, a changed file is a miss that drops the
 * stale entry, a version a concurrent load published first is shared,
 * what is neither a file nor a directory is refused, and every handle a
 * stat opened is closed. */
static void test_get(void)
{
    struct http_cache_key k = {.rel = "a.txt", .len = 5};
    struct http_cache_key k2 = {.rel = "b.txt", .len = 5};
    struct http_cache_key k3 = {.rel = "c.txt", .len = 5};
    struct http_cache_entry *e, *e2;
    struct http_cache_obj rival = {0};
    size_t bytes, objs;

    gc = (struct http_cache) HTTP_CACHE_INIT(gc, &gops);
    fs.id = (struct http_file_id){.dev = 1, .ino = 2, .size = 5, .mtime = 9};
    fs.regular = true;
    CHECK_INT(http_cache_get(&gc, &k, NULL, 1000, 1 << 20, &e), 0);
    CHECK(e == &gents[0] && http_flag_read(&e->in_table));
    CHECK_INT(http_ref_read(&e->refs), 2); /* the table's, the caller's */
    CHECK(e->body && e->meta.body_cached && e->meta.size == 5);
    CHECK_INT(fs.reads, 1);
    http_cache_put(&gc, e);
    /* a hit (the engine's lookup took a reference): no stat */
    http_ref_get(&e->refs);
    CHECK_INT(http_cache_get(&gc, &k, e, 1500, 1 << 20, &e2), 1);
    CHECK(e2 == e);
    CHECK_INT(fs.stats, 1);
    http_cache_put(&gc, e2);
    http_ref_get(&e->refs);
    CHECK_INT(http_cache_get(&gc, &k, e, 2000, 1 << 20, &e2), 1);
    CHECK(e2 == e);
    CHECK_INT(fs.stats, 2);
    http_cache_put(&gc, e2);
    CHECK_INT(http_cache_get(&gc, &k2, NULL, 2000, 1 << 20, &e2), 0);
    CHECK(e2 == &gents[1] && e2->obj == e->obj);
    CHECK_INT(fs.objs + fs.reads, 2); /* one object, read once */
    CHECK_INT(http_ref_read(&e->obj->refs), 2);
    http_cache_put(&gc, e2);
    fs.id.size = 6;
    http_ref_get(&e->refs);
    CHECK_INT(http_cache_get(&gc, &k, e, 3000, 1 << 20, &e2), 0);
    CHECK(e2 == &gents[2] && e2->obj == &gobjs[1] && e2->meta.size == 6);
    CHECK(!http_flag_read(&e->in_table));
    CHECK_INT(fs.entry_frees, 1); /* the stale one, its references gone */
    CHECK_INT(http_ref_read(&gobjs[0].refs), 1); /* b.txt's still */
    http_cache_put(&gc, e2);
    fs.id.size = 7;
    fs.rival = &rival;
    http_cache_obj_made(&gc, &rival, &fs.id, NULL);
    CHECK_INT(http_cache_get(&gc, &k3, NULL, 3000, 1 << 20, &e2), 0);
    CHECK(e2->obj == &rival && !e2->body);
    CHECK_INT(fs.obj_frees, 1); /* the loser, its body with it */
    CHECK_INT(http_ref_read(&rival.refs), 2);
    http_cache_acct_usage(&gc.acct, &bytes, &objs);
    CHECK_INT(objs, 3);
    http_cache_put(&gc, e2);
    fs.regular = false;
    CHECK_INT(http_cache_get(&gc, &k3, NULL, 3000, 1 << 20, &e2), -HTTP_EACCES);
    fs.err = -2;
    CHECK_INT(http_cache_get(&gc, &k3, NULL, 3000, 1 << 20, &e2), -2);
    CHECK_INT(fs.entries, 4); /* none for either */
    CHECK_INT(fs.open, 0);
    CHECK_INT(eng.bad, 0);
    fs.err = 0;
    fs.regular = true;
}

/* A queued build: the body in memory compressed and published, the
 * build's reference put; without a body the file read again when it is
 * the object's version, else the worthless marker; nothing when the
 * builds give up. */
static bool g_stop;

static bool g_stopping(void)
{
    return g_stop;
}

static struct http_gz *g_build(const char *src, size_t len)
{
    struct http_gz *gz = calloc(1, sizeof(*gz) + 1);

    gz->len = 1;
    gz->data[0] = src[len - 1];
    return gz;
}

static void test_gz_build(void)
{
    static const struct http_cache_gz_ops bops = {.build = g_build,
                                                  .stopping = g_stopping};
    struct http_cache_obj o = {.id = fs.id};
    struct http_cache_obj *p = &o;
    int reads = fs.reads;

    gc = (struct http_cache) HTTP_CACHE_INIT(gc, &gops);
    http_ref_init(&o.refs, 3); /* an entry's, and two builds' */
    http_cache_gz_build(&gc, p, NULL, "c.txt", &bops, 1 << 20);
    CHECK(http_ptr_load(&o.gz) && !http_ptr_load(&o.gz)->worthless);
    CHECK_INT(fs.reads, reads + 1);
    CHECK_INT(http_ref_read(&o.refs), 2);
    gc.ops->free(http_ptr_load(&o.gz));
    http_ptr_store(&o.gz, NULL);
    fs.id.size = 8; /* changed since */
    http_cache_gz_build(&gc, p, NULL, "c.txt", &bops, 1 << 20);
    CHECK(http_ptr_load(&o.gz) && http_ptr_load(&o.gz)->worthless);
    CHECK_INT(fs.reads, reads + 1);
    gc.ops->free(http_ptr_load(&o.gz));
    http_ptr_store(&o.gz, NULL);
    http_flag_set(&o.building, true);
    g_stop = true;
    http_cache_gz_build(&gc, p, NULL, "c.txt", &bops, 1 << 20);
    CHECK(!http_ptr_load(&o.gz) && !http_flag_read(&o.building));
    CHECK_INT(http_ref_read(&o.refs), 0);
    CHECK_INT(fs.open, 0);
}

/* Core's object table: one object per version, the versions of one file
 * chained in one bucket; a second object of a published version stays out
 * and gets the first, referenced; the last put takes an object out (from
 * the middle of its chain too), and its version can enter again. */
static void test_obj_table(void)
{
    struct http_cache_obj o[3] = {0}, dup = {0}, again = {0};
    struct http_file_id id[3];
    int frees = fs.obj_frees, empty = 0;

    gc = (struct http_cache) HTTP_CACHE_INIT(gc, &gops);
    for (int i = 0; i < 3; i++) {
        id[i] = (struct http_file_id){.dev = 1, .ino = 2, .size = 1 + i};
        http_cache_obj_made(&gc, &o[i], &id[i], NULL);
        CHECK(!http_cache_obj_add(&gc, &o[i]));
    }
    http_cache_obj_made(&gc, &dup, &id[1], NULL);
    CHECK(http_cache_obj_add(&gc, &dup) == &o[1]);
    CHECK_INT(http_ref_read(&o[1].refs), 2);
    http_cache_obj_lost(&gc, &dup);
    http_cache_obj_put(&gc, &o[1]);
    CHECK_INT(fs.obj_frees, frees + 1); /* the lost one only */
    http_cache_obj_put(&gc, &o[1]);
    CHECK_INT(fs.obj_frees, frees + 2);
    http_cache_obj_made(&gc, &again, &id[1], NULL);
    CHECK(!http_cache_obj_add(&gc, &again));
    http_cache_obj_made(&gc, &dup, &id[2], NULL);
    CHECK(http_cache_obj_add(&gc, &dup) == &o[2]);
    http_cache_obj_lost(&gc, &dup);
    http_cache_obj_put(&gc, &o[2]);
    http_cache_obj_put(&gc, &o[2]);
    http_cache_obj_put(&gc, &o[0]);
    http_cache_obj_put(&gc, &again);
    CHECK_INT(fs.obj_frees, frees + 6);
    for (size_t b = 0; b < HTTP_CACHE_OBJ_BUCKETS; b++)
        empty += !gc.objs[b];
    CHECK_INT(empty, HTTP_CACHE_OBJ_BUCKETS);
    CHECK(!eng.locked);
    CHECK_INT(eng.bad, 0);
}

int main(void)
{
    test_file_id();
    test_due();
    test_claim();
    test_gz_make();
    test_charges();
    test_budget();
    test_published();
    test_acct();
    test_lru();
    test_cache_flow();
    test_made();
    test_gz();
    test_get();
    test_gz_build();
    test_obj_table();
    UNIT_DONE();
}
