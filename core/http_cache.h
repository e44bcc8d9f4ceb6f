/* http_cache.h — the content cache's policy, the same in both engines:
 * which version of a file an object is, when an entry is checked against
 * the file system again or moved to the front of the LRU list, what an
 * entry and an object cost, whether one fits at all, and how far an
 * eviction goes; the LRU list itself, the eviction walk, an entry's entry
 * into the list, a stale entry's removal and the puts after the lock (the
 * cold paths, over the engine's primitives: struct http_cache_ops); the
 * part of an entry and of an object both engines share (struct
 * http_cache_entry, struct http_cache_obj) with a load's, a publication's
 * and a gzip copy's sequences over it. Functions over the caller's
 * memory, atomics from compat.h: the engines keep the tables, the locks,
 * RCU, the allocator, the file system calls and the hit path's lookup
 * and freshness check (kernel/khttpd/cache.c, user/httpd/httpd-cache.c). */
#ifndef KTCP_CORE_HTTP_CACHE_H
#define KTCP_CORE_HTTP_CACHE_H

#include "compat.h"
#include "http_limits.h"

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

/* Does this thread do the job a stamp times (HTTP_SERVER_REVALIDATE_MS:
 * the entry's check against the file system; HTTP_SERVER_LRU_TOUCH_MS: its
 * move to the LRU front)? When it is due (http_cache_due) and this thread
 * moves the stamp to now_ms first: of the threads that find it due at
 * once, one does it and the others go on without. Inline: a hit asks
 * twice. */
static inline bool http_cache_claim(http_stamp *stamp,
                                    uint64_t now_ms,
                                    uint32_t period_ms)
{
    uint64_t last = http_stamp_read(stamp);

    return http_cache_due(now_ms, last, period_ms) &&
           http_stamp_move(stamp, last, now_ms);
}



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

void http_cache_acct_release(struct http_cache_acct *a,
                             size_t bytes,
                             size_t held,
                             int objs);
/* Bytes charged and objects alive, for a status page. */
void http_cache_acct_usage(const struct http_cache_acct *a,
                           size_t *bytes,
                           size_t *objs);

/* What a request for the gzip copy of an object that has none yet does. */
enum http_cache_gz_make {
    HTTP_CACHE_GZ_NONE,   /* send identity, build nothing */
    HTTP_CACHE_GZ_INLINE, /* compress the body in memory now, publish it */
    HTTP_CACHE_GZ_QUEUE,  /* queue a build (identity until it is there) */
};

/* For an entry in the table or not (one the cache could not keep would be
 * compressed again by every request: none), its object's body in memory
 * or not, and the file's size: a small body in memory is compressed on
 * the spot (HTTP_SERVER_GZIP_INLINE_MAX), anything else off the request
 * path. The engine then takes the object's building flag (one build per
 * object; identity when another has it). */
enum http_cache_gz_make http_cache_gz_make(bool in_table,
                                           bool body,
                                           uint64_t size);

/* A gzip copy of a body (or, worthless, the marker that it is not
 * smaller, or that its file could not be read: send identity). */
struct http_gz {
    size_t len;
    bool worthless;
    char data[];
};

struct http_name_table;

/* One version of one file, the part both engines' objects share: found in
 * the engine's object table by id, shared by every path naming the file.
 * Immutable once published but for the reference count, the charge and
 * the copies set once (gz, names). */
struct http_cache_obj {
    struct http_file_id id; /* the file and its version */
    http_ref refs;
    http_counter charge;         /* bytes counted against the budget */
    char *body;                  /* whole file, or NULL */
    http_ptr(struct http_gz) gz; /* set once, by the build */
    http_ptr(struct http_name_table) names; /* a directory's: set once */
    http_flag building; /* a gzip build is on (one per object) */
};

/* The part of one path's entry both engines share. */
struct http_lru_node {
    struct http_lru_node *prev, *next;
};

struct http_cache_entry {
    struct http_lru_node lru; /* core's LRU list; the engine's lock */
    http_ref refs;
    http_flag in_table; /* set and cleared under the engine's lock */
    http_stamp checked; /* ms of the last check against the file system */
    http_stamp used;    /* ms of the last move to the LRU front */
    size_t charge;      /* bytes counted against the budget */
    size_t held;        /* out of the table, still referenced: held bytes */
    struct http_cache_obj *obj;
};

/* The LRU list of the entries in the table, most recently used first: an
 * intrusive circular list, a node in each entry. Every call is made under
 * the engine's lock of the table. A node out of the list is free: the
 * entries that left, chained through their next pointers on a gone list,
 * are put after the lock is dropped. */
struct http_lru {
    struct http_lru_node head;
};

#define HTTP_LRU_INIT(name)            \
    {                                  \
        {                              \
            &(name).head, &(name).head \
        }                              \
    }

/* The table's cold paths, written once over the engine's primitives: an
 * eviction, a stale entry's removal, a new entry's publication. Function
 * pointers: none is on the hit path (a hit's lookup and freshness check
 * are the engine's own direct calls; its touch is core's inline claim,
 * the lock only when the claim is won). */
struct http_cache_ops {
    /* The engine's lock of the table, its LRU list and in_table flags. */
    void (*lock)(void);
    void (*unlock)(void);
    /* Under the lock: e, in the table (its in_table flag), out of the
     * engine's table (http_cache_unpublish_locked does the rest). */
    void (*remove)(struct http_cache_entry *e);
    /* Drop one reference to n's entry (the last frees it). */
    void (*put)(struct http_lru_node *n);
    /* An entry evicted (the engine's counter). */
    void (*evicted)(void);
    /* Under the lock: e into the engine's table, the entry of the same
     * key it replaces out of it (out of the engine's table, then
     * http_cache_left_locked onto *gone). */
    void (*insert)(struct http_cache_entry *e, struct http_lru_node **gone);
};

/* A content cache's shared state: its LRU list, its counters and the
 * engine's primitives. */
struct http_cache {
    struct http_lru lru;
    struct http_cache_acct acct;
    const struct http_cache_ops *ops;
};

#define HTTP_CACHE_INIT(name, o)                             \
    {                                                        \
        HTTP_LRU_INIT((name).lru), HTTP_CACHE_ACCT_INIT, (o) \
    }

/* Put the entries on *gone (after the lock is dropped), leaving it empty. */
void http_cache_put_gone(const struct http_cache *c,
                         struct http_lru_node **gone);
/* A stale entry (found, referenced, and no longer what the file system
 * has): out of the table (the lock taken and dropped), the table's
 * reference put, and the finder's. */
void http_cache_drop(struct http_cache *c, struct http_lru_node *n);

/* Under the lock: e, which was in the engine's table and is out of it
 * now, off the LRU list onto *gone, its bytes held. */
void http_cache_left_locked(struct http_cache *c,
                            struct http_cache_entry *e,
                            struct http_lru_node **gone);
struct http_resource;
/* A load's new object of version id with body (the whole file, or NULL:
 * none kept): its shared part set (one reference, its loader's) and
 * charged, before it can be seen in the engine's table. */
void http_cache_obj_made(struct http_cache *c,
                         struct http_cache_obj *o,
                         const struct http_file_id *id,
                         char *body);
/* An object http_cache_obj_made charged that never entered the table
 * (another load published its version first): its charge returned. */
void http_cache_obj_lost(struct http_cache *c, struct http_cache_obj *o);
/* A load's new entry, of path rel (len bytes) and the file's version id,
 * at now_ms: its shared part (one reference, its loader's; both stamps)
 * and the planner's resource meta. */
void http_cache_entry_made(struct http_cache_entry *e,
                           struct http_resource *meta,
                           const char *rel,
                           size_t len,
                           const struct http_file_id *id,
                           uint64_t now_ms);
/* e's object o (the loader's reference, now e's): its body in meta, e
 * charged (http_cache_entry_charge of len path bytes and extra). */
void http_cache_entry_holds(struct http_cache *c,
                            struct http_cache_entry *e,
                            struct http_resource *meta,
                            struct http_cache_obj *o,
                            size_t len,
                            size_t extra);
/* Under the lock: e out of the table if it is still there (the engine's
 * remove), off the LRU list onto *gone, its bytes held. */
void http_cache_unpublish_locked(struct http_cache *c,
                                 struct http_cache_entry *e,
                                 struct http_lru_node **gone);
/* A new entry e (referenced by its loader) into the table, replacing the
 * entry of its key, and to the LRU front; false when it cannot be kept
 * within budget (served once, its bytes held until its last put). */
bool http_cache_publish(struct http_cache *c,
                        struct http_cache_entry *e,
                        size_t budget);

void http_cache_touch_locked(struct http_cache *c, struct http_cache_entry *e);
/* A hit: to the LRU front, unless it went there a moment ago (the lock
 * only then). Inline: every hit asks. */
static inline void http_cache_touch(struct http_cache *c,
                                    struct http_cache_entry *e,
                                    uint64_t now_ms)
{
    if (http_cache_claim(&e->used, now_ms, HTTP_SERVER_LRU_TOUCH_MS))
        http_cache_touch_locked(c, e);
}

/* Publish t as o's name table (a directory's) and charge it: false (t
 * not taken) when o has one. */
bool http_cache_names_publish(struct http_cache *c,
                              struct http_cache_obj *o,
                              struct http_name_table *t,
                              size_t bytes,
                              size_t budget);
/* A build of o's copy is over: gz published and charged, or (NULL: out
 * of memory) the building flag down for a later try. */
void http_cache_gz_built(struct http_cache *c,
                         struct http_cache_obj *o,
                         struct http_gz *gz,
                         size_t budget);
/* The engine's gzip primitives, for a copy's build. */
struct http_cache_gz_ops {
    /* Compress len bytes in memory now; NULL when memory is short. */
    struct http_gz *(*gzip)(const char *src, size_t len);
    /* Queue a build of e's object's copy, the build holding a reference
     * on the object; false when the queue is full or memory is short. */
    bool (*queue)(struct http_cache_entry *e);
};

const struct http_gz *http_cache_gz_start(struct http_cache *c,
                                          struct http_cache_entry *e,
                                          const struct http_cache_gz_ops *gz,
                                          size_t budget);
/* The gzip copy of e's object if it is built, else NULL (send identity):
 * a small body in memory is compressed on the spot, a bigger one queued
 * (ops->queue) once per object, none for an entry out of the table
 * (http_cache_gz_make). Inline: a built copy is a load. */
static inline const struct http_gz *http_cache_gz(
    struct http_cache *c,
    struct http_cache_entry *e,
    const struct http_cache_gz_ops *ops,
    size_t budget)
{
    const struct http_gz *gz = http_ptr_load(&e->obj->gz);

    return gz ? gz : http_cache_gz_start(c, e, ops, budget);
}

#endif /* KTCP_CORE_HTTP_CACHE_H */
