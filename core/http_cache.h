/* http_cache.h — the content cache's policy, the same in both engines:
 * which version of a file an object is, when an entry is checked against
 * the file system again or moved to the front of the LRU list, what an
 * entry and an object cost, whether one fits at all, and how far an
 * eviction goes; the LRU list itself, the eviction walk, an entry's entry
 * into the list, a stale entry's removal and the puts after the lock (the
 * cold paths, over the engine's primitives: struct http_cache_ops); the
 * part of an entry and of an object both engines share (struct
 * http_cache_entry, struct http_cache_obj) and what is done with it: the
 * lookup-or-load of a path (its freshness check, its load, the object of
 * its version shared or made, its publication), the puts of entries and
 * objects, a gzip copy's decisions and build. Functions over the caller's
 * memory, atomics from compat.h: the engines keep the tables and their
 * lookups, the locks, RCU, the allocator and the file system calls
 * (kernel/khttpd/cache.c, user/httpd/httpd-cache.c). */
#ifndef KTCP_CORE_HTTP_CACHE_H
#define KTCP_CORE_HTTP_CACHE_H

#include "compat.h"
#include "http_limits.h"
#include "http_plan.h"

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
 * core's object table (struct http_cache) by id, shared by every path
 * naming the file. Immutable once published but for the reference count,
 * the charge, the copies set once (gz, names) and its chain in the table
 * (under the engine's lock). */
struct http_cache_obj {
    struct http_file_id id;      /* the file and its version */
    struct http_cache_obj *next; /* in its bucket of the object table */
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
    char *body;                /* its object's */
    struct http_resource meta; /* what the planner reads */
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

/* A path's key in the engine's path table: the tree it is beneath (the
 * engine's: khttpd's site, ktcp-httpd's root), the path and its hash, the
 * engine's context for its lookup (ktcp-httpd's worker) and the MIME
 * table a new entry takes its type from (NULL: core's). */
struct http_cache_key {
    const void *tree;
    const char *rel;
    size_t len;
    unsigned long hash;
    void *ctx;
    const struct http_mime_table *mime;
};

/* A file the engine's stat found beneath a tree, held until its close:
 * its version and type, and the engine's handle on it (khttpd: a path's
 * two pointers; ktcp-httpd: a descriptor, -1 once an object took it). */
struct http_cache_file {
    struct http_file_id id;
    bool regular;
    union {
        void *p[2];
        int fd;
    } h;
};

/* The engine's primitives core's cache runs on: its tables, lock, RCU,
 * allocator and file system. Function pointers: none is on the hit path
 * (a hit's lookup is the engine's direct call, its freshness check and
 * touch core's inline claims, the lock and the file system only when a
 * claim is won). */
struct http_cache_ops {
    /* The engine's lock of the path table, its LRU list and in_table. */
    void (*lock)(void);
    void (*unlock)(void);
    /* Under the lock: e, in the table (its in_table flag), out of the
     * engine's table (http_cache_unpublish_locked does the rest). */
    void (*remove)(struct http_cache_entry *e);
    /* Under the lock: e into the engine's table, the entry of the same
     * key it replaces out of it (out of the engine's table, then
     * http_cache_left_locked onto *gone). */
    void (*insert)(struct http_cache_entry *e, struct http_lru_node **gone);
    /* A new entry of k's key, zeroed but for it; NULL: memory is short. */
    struct http_cache_entry *(*entry_new)(const struct http_cache_key *k);
    /* Free e after a grace period (its last put; or never published). */
    void (*entry_free)(struct http_cache_entry *e);
    /* An entry evicted (the engine's counter). */
    void (*evicted)(void);
    /* A new zeroed object for f's file (body: its body is kept), which
     * may take f's handle; NULL: memory is short. */
    struct http_cache_obj *(*obj_new)(struct http_cache_file *f, bool body);
    /* Free o after a grace period (http_cache_obj_free its copies). */
    void (*obj_free)(struct http_cache_obj *o);
    /* rel beneath tree, as the server's user may open it: its version
     * and type into *f, held until close; 0 or -errno. */
    int (*stat)(const void *tree, const char *rel, struct http_cache_file *f);
    /* The whole file (len bytes) into buf: 0 or -errno. */
    int (*read)(struct http_cache_file *f, char *buf, size_t len);
    void (*close)(struct http_cache_file *f);
    /* The engine's memory for bodies and copies (free takes NULL). */
    void *(*alloc)(size_t size);
    void (*free)(void *p);
    /* Bytes an entry keeps beside its path (charged from its load). */
    size_t entry_extra;
};

/* The object table's buckets: a power of two. */
#define HTTP_CACHE_OBJ_BUCKETS 4096

/* A content cache's shared state: its LRU list, its counters, the
 * engine's primitives and the object table: each version's live object
 * (one a load made, until its last put), chained through next in the
 * bucket of its id's hash (http_file_id_hash), read and changed under the
 * engine's lock only (ops->lock: a load's lookup and add, an object's
 * last put; never with an entry's work in the same hold). An object's
 * last reference is dropped under the lock, with its removal, so the
 * table never holds a dead one. */
struct http_cache {
    struct http_lru lru;
    struct http_cache_acct acct;
    const struct http_cache_ops *ops;
    struct http_cache_obj *objs[HTTP_CACHE_OBJ_BUCKETS];
};

#define HTTP_CACHE_INIT(name, o)                              \
    {                                                         \
        HTTP_LRU_INIT((name).lru), HTTP_CACHE_ACCT_INIT, (o), \
        {                                                     \
            NULL                                              \
        }                                                     \
    }

/* Put the entries on *gone (after the lock is dropped), leaving it empty. */
void http_cache_put_gone(struct http_cache *c, struct http_lru_node **gone);
/* Under the lock: e, which was in the engine's table and is out of it
 * now, off the LRU list onto *gone, its bytes held. */
void http_cache_left_locked(struct http_cache *c,
                            struct http_cache_entry *e,
                            struct http_lru_node **gone);
/* Under the lock: e out of the table if it is still there (the engine's
 * remove), off the LRU list onto *gone, its bytes held. */
void http_cache_unpublish_locked(struct http_cache *c,
                                 struct http_cache_entry *e,
                                 struct http_lru_node **gone);
/* The entry of k, referenced: found, the engine's lookup of k (NULL, or
 * referenced), when it is still what the file system has (checked at most
 * once per HTTP_SERVER_REVALIDATE_MS, http_cache_claim), moved to the LRU
 * front now and then: 1 (a hit); else loaded (its object shared with the
 * other paths of its file's version, its body read when kept) and
 * published within budget, or kept out of the table, too big, for one
 * use: 0 (a miss); or a miss's -errno. now_ms: the caller's clock. */
int http_cache_get(struct http_cache *c,
                   const struct http_cache_key *k,
                   struct http_cache_entry *found,
                   uint64_t now_ms,
                   size_t budget,
                   struct http_cache_entry **out);
/* Drop a reference to e: the last returns its charge, puts its object
 * and frees it (the engine's entry_free, after a grace period). */
void http_cache_put(struct http_cache *c, struct http_cache_entry *e);
/* Drop a reference to o: the last takes it out of the object table,
 * returns its charge and frees it (after a grace period). */
void http_cache_obj_put(struct http_cache *c, struct http_cache_obj *o);
/* Free o's body and copies (the engine frees o, after a grace period). */
void http_cache_obj_free(const struct http_cache *c, struct http_cache_obj *o);

/* Publish t as o's name table (a directory's) and charge it: false (t
 * not taken) when o has one. */
bool http_cache_names_publish(struct http_cache *c,
                              struct http_cache_obj *o,
                              struct http_name_table *t,
                              size_t bytes,
                              size_t budget);
/* The engine's gzip primitives, for a copy's build. */
struct http_cache_gz_ops {
    /* Compress len bytes in memory now; NULL when memory is short. */
    struct http_gz *(*gzip)(const char *src, size_t len);
    /* Queue a build of e's object's copy, the build holding a reference
     * on the object; false when the queue is full or memory is short. */
    bool (*queue)(struct http_cache_entry *e);
    /* A queued build's compression: NULL when memory is short or the
     * builds give up. */
    struct http_gz *(*build)(const char *src, size_t len);
    /* Do the builds give up (the engine stopping; NULL: never)? */
    bool (*stopping)(void);
};

/* A queued build of o's copy, holding a reference on o (put here): the
 * body in memory, or the file of rel beneath tree read again when it is
 * still o's version, compressed (gz->build) and published; a file that
 * changed or cannot be read gets the worthless marker (identity for this
 * version, no build again). */
void http_cache_gz_build(struct http_cache *c,
                         struct http_cache_obj *o,
                         const void *tree,
                         const char *rel,
                         const struct http_cache_gz_ops *gz,
                         size_t budget);

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
