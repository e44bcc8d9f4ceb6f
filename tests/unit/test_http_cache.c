/* Unit tests of the content cache's policy (http_cache.c). */
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

/* A fake engine for the table's cold paths: entries with a reference
 * count, the table's charge of each, and a lock that must be held (and
 * never taken twice) around every unpublish. */
static struct {
    bool locked;
    int locks, evictions, puts, bad;
} eng;
static struct http_cache fake;
static struct ent fents[6];
static int frefs[6];

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

static void f_unpublish(struct http_lru_node *n, struct http_lru_node **gone)
{
    struct ent *e = ent_of(n);

    eng.bad += !eng.locked;
    if (!e->in_table)
        return;
    e->in_table = false;
    http_lru_leave(n, gone);
    /* out of the table: its bytes no longer what an eviction can free */
    http_cache_acct_hold(&fake.acct, e->bytes, 0, false);
}

static void f_put(struct http_lru_node *n)
{
    struct ent *e = ent_of(n);

    eng.bad += eng.locked; /* puts come after the lock is dropped */
    eng.puts++;
    if (--frefs[e - fents] == 0)
        http_cache_acct_release(&fake.acct, e->bytes, e->bytes, 0);
}

static void f_evicted(void)
{
    eng.evictions++;
}

static const struct http_cache_ops fops = {.lock = f_lock,
                                           .unlock = f_unlock,
                                           .unpublish = f_unpublish,
                                           .put = f_put,
                                           .evicted = f_evicted};

/* Core's flow over the fake: an entry enters at the front, an insert over
 * budget evicts from the tail (the entries put after the lock), a charge
 * elsewhere evicts only when over, a stale entry leaves with both of its
 * references. */
static void test_cache_flow(void)
{
    struct http_lru_node *gone = NULL;

    fake = (struct http_cache) HTTP_CACHE_INIT(fake, &fops);
    for (int i = 0; i < 5; i++) {
        fents[i] = (struct ent){.bytes = 100, .in_table = true};
        frefs[i] = 1; /* the table's */
        http_cache_acct_charge(&fake.acct, 100, 0);
        f_lock();
        http_cache_enter_locked(&fake, &fents[i].lru, 1000, &gone);
        f_unlock();
        CHECK(!gone); /* 500 of 1000: nothing evicted */
    }
    CHECK(fake.lru.head.next == &fents[4].lru);
    CHECK(fake.lru.head.prev == &fents[0].lru);
    /* under budget: no lock taken */
    eng.locks = 0;
    http_cache_evict_if_over(&fake, 1000);
    CHECK_INT(eng.locks, 0);
    /* a sixth entry past a budget of 550: down to 495, the tail first */
    fents[5] = (struct ent){.bytes = 100, .in_table = true};
    frefs[5] = 1;
    http_cache_acct_charge(&fake.acct, 100, 0);
    f_lock();
    http_cache_enter_locked(&fake, &fents[5].lru, 550, &gone);
    f_unlock();
    CHECK_INT(eng.evictions, 2);
    CHECK(!fents[0].in_table && !fents[1].in_table && fents[2].in_table);
    CHECK(fake.lru.head.next == &fents[5].lru);
    http_cache_put_gone(&fake, &gone);
    CHECK(!gone);
    CHECK_INT(eng.puts, 2);
    CHECK_INT(frefs[0] + frefs[1], 0);
    size_t bytes, objs;
    http_cache_acct_usage(&fake.acct, &bytes, &objs);
    CHECK_INT(bytes, 400);
    /* a charge that passes a smaller budget: the lock, an eviction, the
     * puts after it */
    eng.locks = 0;
    http_cache_evict_if_over(&fake, 300);
    CHECK_INT(eng.locks, 1);
    CHECK_INT(eng.evictions, 4);
    CHECK(!fents[2].in_table && !fents[3].in_table && fents[4].in_table);
    CHECK_INT(eng.puts, 4);
    /* a stale entry found by a reader (its reference taken): out of the
     * table, both references put */
    frefs[4]++;
    http_cache_drop(&fake, &fents[4].lru);
    CHECK(!fents[4].in_table);
    CHECK_INT(frefs[4], 0);
    CHECK_INT(eng.puts, 6);
    /* stale but gone from the table already (evicted meanwhile): only the
     * finder's reference */
    frefs[5]++;
    f_lock();
    f_unpublish(&fents[5].lru, &gone);
    f_unlock();
    http_cache_put_gone(&fake, &gone);
    http_cache_drop(&fake, &fents[5].lru);
    CHECK_INT(frefs[5], 0);
    CHECK(fake.lru.head.next == &fake.lru.head);
    http_cache_acct_usage(&fake.acct, &bytes, &objs);
    CHECK_INT(bytes, 0);
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
    UNIT_DONE();
}
