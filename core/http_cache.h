/* http_cache.h — the content cache's policy, the same in both engines:
 * which version of a file an object is, when an entry is checked against
 * the file system again or moved to the front of the LRU list, what an
 * entry and an object cost, whether one fits at all, and how far an
 * eviction goes. Pure functions over the caller's numbers: the engines
 * keep the tables, the locks, RCU, the allocator and the file system
 * calls (kernel/khttpd/cache.c, user/httpd/httpd-cache.c). */
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
/* What leaves with an entry's last put: its own charge, and its object's
 * when the entry is the object's only holder. */
size_t http_cache_leaving(size_t entry_charge, size_t obj_charge, bool sole);

/* Can an entry and its object be kept within budget bytes? One that
 * cannot is served once and freed by its last put. */
bool http_cache_keeps(size_t entry_charge, size_t obj_charge, size_t budget);
/* Is an insert or a new gzip copy to start an eviction: bytes (in the
 * table) past the budget? */
bool http_cache_over(size_t bytes, size_t budget);
/* Does an eviction take the next entry from the LRU tail? Until the bytes
 * in the table, less pending (what the entries already taken will free at
 * their puts), are at most 90% of the budget. */
bool http_cache_evict_more(size_t bytes, size_t pending, size_t budget);

#endif /* KTCP_CORE_HTTP_CACHE_H */
