/* http_cache.h — the content cache's policy, the same in both engines:
 * which version of a file an object is, when an entry is checked against
 * the file system again or moved to the front of the LRU list, what an
 * entry and an object cost, whether one fits at all, and how far an
 * eviction goes; the LRU list itself and which entry an eviction takes
 * next. Pure functions over the caller's numbers and memory: the engines
 * keep the tables, the locks, RCU, the allocator, the reference counts
 * and the file system calls (kernel/khttpd/cache.c,
 * user/httpd/httpd-cache.c). */
#ifndef KTCP_CORE_HTTP_CACHE_H
#define KTCP_CORE_HTTP_CACHE_H

#include "compat.h"

/* One version of one file: what an object is keyed by. A changed size,
 * mtime (nanoseconds included), inode, device or type is another version:
 * the entry holding the old one is replaced. */
struct http_file_id {
    uint64_t dev;
    uint64_t ino;
    uint64_t size;
    int64_t mtime;
    uint32_t mtime_nsec;
    bool is_dir;
};

static inline bool http_file_id_same(const struct http_file_id *a,
                                     const struct http_file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime == b->mtime && a->mtime_nsec == b->mtime_nsec &&
           a->is_dir == b->is_dir;
}

/* The object table's hash of a file: (device, inode), every bit mixed
 * (an engine may keep the low 32 bits). Files are the server's, so a
 * client cannot choose keys that share a bucket. */
uint64_t http_file_id_hash(const struct http_file_id *id);

/* Is a per-entry stamp last set at last_ms due again at now_ms, period_ms
 * later (HTTP_SERVER_REVALIDATE_MS for the freshness check,
 * HTTP_SERVER_LRU_TOUCH_MS for the move to the LRU front)? A clock that
 * trails the stamp (another thread's) is never due. The caller then wins
 * the stamp with a compare-and-swap, so one checker runs. */
static inline bool http_cache_due(uint64_t now_ms,
                                  uint64_t last_ms,
                                  uint32_t period_ms)
{
    return now_ms > last_ms && now_ms - last_ms >= period_ms;
}

/* What a path entry costs: the fixed overhead, its path and extra bytes
 * the engine keeps with it. */
size_t http_cache_entry_charge(size_t path_len, size_t extra);
/* What an object costs with body bytes of its file kept in memory. */
size_t http_cache_obj_charge(size_t body);
/* A gzip copy of len bytes (its head of head bytes) added to an object;
 * a worthless one (not smaller, or unreadable) costs its head alone. */
size_t http_cache_gz_charge(size_t head, size_t len, bool worthless);

/* Can an entry and its object be kept within budget bytes? One that
 * cannot is served once and freed by its last put. */
bool http_cache_keeps(size_t entry_charge, size_t obj_charge, size_t budget);

/* A cache's counters: every thread updates them with atomic adds,
 * outside the engine's locks, so each is exact once the adds are done and
 * two read together may disagree for a moment. The engine owns one (in
 * its memory, HTTP_CACHE_ACCT_INIT) and calls these at each change:
 * - a new entry, a new object (objs 1) or a copy an object gains: charge;
 * - an entry out of the table (evicted, replaced, stale, too big to keep):
 *   hold, whose bytes (its object's too when it is the only holder) stay
 *   charged, apart, until its last put;
 * - an entry's last put (its charge and what it held), an object's (its
 *   charge, objs 1): release. */
struct http_cache_acct {
    http_counter total; /* bytes charged: entries and objects alive */
    http_counter held;  /* of them, entries out of the table */
    http_counter objs;  /* objects alive */
};

#define HTTP_CACHE_ACCT_INIT                                             \
    {                                                                    \
        HTTP_COUNTER_INIT(0), HTTP_COUNTER_INIT(0), HTTP_COUNTER_INIT(0) \
    }

void http_cache_acct_charge(struct http_cache_acct *a, size_t bytes, int objs);
void http_cache_acct_release(struct http_cache_acct *a,
                             size_t bytes,
                             size_t held,
                             int objs);
/* The bytes an entry leaving the table holds from now on (its held, for
 * its release): its own charge, and its object's when sole (the object's
 * only holder). */
size_t http_cache_acct_hold(struct http_cache_acct *a,
                            size_t entry_charge,
                            size_t obj_charge,
                            bool sole);
/* The bytes an eviction can free now (http_cache_published of the two
 * counters): what http_lru_victim walks down. */
size_t http_cache_acct_published(const struct http_cache_acct *a);
/* Is an insert or a new copy to start an eviction (http_cache_over of the
 * bytes an eviction can free)? */
bool http_cache_acct_over(const struct http_cache_acct *a, size_t budget);
/* Bytes charged and objects alive, for a status page. */
void http_cache_acct_usage(const struct http_cache_acct *a,
                           size_t *bytes,
                           size_t *objs);

/* The LRU list of the entries in the table, most recently used first: an
 * intrusive circular list, a node in each entry. Every call is made under
 * the engine's lock of the table. A node out of the list is free: the
 * entries that left, chained through their next pointers on a gone list,
 * are put after the lock is dropped. */
struct http_lru_node {
    struct http_lru_node *prev, *next;
};

struct http_lru {
    struct http_lru_node head;
};

#define HTTP_LRU_INIT(name)            \
    {                                  \
        {                              \
            &(name).head, &(name).head \
        }                              \
    }

/* An entry into the table: to the front. */
void http_lru_add(struct http_lru *l, struct http_lru_node *n);
/* A hit (at most once per HTTP_SERVER_LRU_TOUCH_MS, http_cache_due): to
 * the front. */
void http_lru_touch(struct http_lru *l, struct http_lru_node *n);
/* An entry out of the table (evicted, stale, replaced): off the list and
 * onto *gone, whose entries the caller puts after dropping its lock. */
void http_lru_leave(struct http_lru_node *n, struct http_lru_node **gone);
/* The next entry of a gone list to put, taken off it; NULL at its end. */
struct http_lru_node *http_lru_pop(struct http_lru_node **gone);
/* The entry an eviction takes next: the list's tail while the bytes in
 * the table are above 90% of the budget (HTTP_SERVER_CACHE_LOW_TENTHS),
 * else NULL. The caller takes it
 * out of its table and the list (http_lru_leave), so that bytes drop or
 * the list shrinks: the walk ends within the list's length. */
struct http_lru_node *http_lru_victim(const struct http_lru *l,
                                      size_t bytes,
                                      size_t budget);

#endif /* KTCP_CORE_HTTP_CACHE_H */
