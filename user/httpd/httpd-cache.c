/* httpd-cache.c — the content cache: a path index (one entry per path:
 * core's struct http_resource) over file objects keyed by (device, inode)
 * and version (the body of small files, the gzip copy): a lock-free RCU
 * hash table of paths (liburcu's rculfhash, urcu-memb flavour) and core's
 * table of objects (struct http_cache, under cache_lock, looked up by a
 * load only). Aliases of a file (a symlinked directory) have their own
 * path entries and share one object, so the body and its gzip copy are
 * stored once.
 *
 * Lifetime: the path index holds one reference on each entry in it; an
 * entry holds one on its object; a gzip build holds one on the object it
 * compresses. A reader takes its own reference under rcu_read_lock
 * (increment-if-not-zero) and drops it when done, so nothing is used
 * after rcu_read_unlock without a reference. The last reference of an
 * object, dropped under cache_lock, takes it out of core's table,
 * uncharges it and frees it after a grace period (call_rcu); an entry the
 * same way, as a concurrent lookup may still be reading it. So what slow
 * readers still hold stays counted.
 *
 * Writers of the path index and of the LRU list (core's struct
 * http_cache, khttpd's too) hold cache_lock, as does core's object table
 * (every use): an insertion puts the entry at the front of the list, a
 * hit moves it there (at most once per HTTP_SERVER_LRU_TOUCH_MS), core's
 * eviction takes entries off the tail through cache_ops: O(1) per entry.
 * An entry out of the index (evicted, replaced, too big to keep) moves its
 * bytes, and its object's when it is the only holder, into the held bytes
 * of core's counters (struct http_cache_acct, atomics outside the lock)
 * until its last put; eviction aims at the total less held, as khttpd's
 * does.
 *
 * Freshness: an entry is re-checked with fstat at most every
 * HTTP_SERVER_REVALIDATE_MS; a changed size, mtime (nanoseconds), inode or
 * device replaces it.
 *
 * Open files: the object of a regular file whose body is not kept keeps
 * the descriptor its load opened (nginx's open_file_cache), while fewer
 * than --open-files are held by all objects (one count for every
 * thread); its requests send from it with explicit offsets, so it is
 * shared, and it is closed when the object is freed (after a grace
 * period, once no reader holds the object). When all are held, a new
 * object takes the place of the least recently used entry that keeps one
 * (open_file_give_up); an object that finds none among the least recent
 * keeps no descriptor, and each of its requests opens the file, as with
 * --open-files 0.
 *
 * The lookup-or-load, the puts and a queued build are core's (http_cache.h);
 * here: the primitives they run on (cache_ops) and a hit's lookup.
 *
 * gzip copies: httpd-cache-gz.c, above this file. */
/* liburcu's read-side lock inline (its LGPL-compatible static API): two
 * loads and a store per lookup instead of two calls into the library and
 * a TLS lookup through __tls_get_addr. */
#define _LGPL_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "httpd.h"

/* the lock-free table every worker reads under RCU: path -> entry */
static struct cds_lfht *table_rcu;
static const struct http_cache_ops cache_ops;
/* Core's LRU list, counters and object table, and the primitives its
 * cold paths use. */
struct http_cache httpd_cache_core =
    HTTP_CACHE_INIT(httpd_cache_core, &cache_ops);
/* descriptors objects hold, at most httpd_cfg.open_files */
static _Atomic size_t open_files;
/* Bumped under cache_lock after every entry leaves table_rcu (before its
 * reference is dropped, so before the RCU callback that frees it). A
 * thread's lookup memo holds an entry found at some generation: while the
 * generation is the same the entry is still in the table, so still alive
 * for a reader inside an RCU read-side section. */
static _Atomic uint64_t table_gen;
/* Writers of table_rcu, of in_table and of the LRU list. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* A table's hash: eight bytes at a time, each word xored in and
 * multiplied, the tail of a key of eight bytes or more read as the last
 * word (its bytes already mixed are shifted out), then a finishing mix so
 * that the low bits rculfhash splits its buckets by depend on every byte.
 * Keys are paths that exist (and file identities), so a client cannot fill
 * a bucket with keys of its own choosing. */
#define HASH_MUL 0x9e3779b97f4a7c15ULL
static unsigned long hash_bytes(const void *p, size_t len)
{
    const unsigned char *s = p;
    uint64_t h = HASH_MUL ^ (uint64_t) len, w = 0;
    size_t i = 0;

    for (; i + 8 <= len; i += 8) {
        memcpy(&w, s + i, sizeof(w));
        h = (h ^ w) * HASH_MUL;
    }
    if (i < len) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (len >= 8) {
            memcpy(&w, s + len - 8, sizeof(w));
            w >>= 8 * (8 - (len - i));
        } else
#endif
        {
            w = 0;
            for (size_t k = i; k < len; k++)
                w |= (uint64_t) s[k] << (8 * (k - i));
        }
        h = (h ^ w) * HASH_MUL;
    }
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ULL;
    h ^= h >> 32;
    return (unsigned long) h;
}

static unsigned long path_hash(const char *s, size_t len)
{
    return hash_bytes(s, len);
}

static int match(struct cds_lfht_node *node, const void *k)
{
    const struct httpd_file *f =
        caa_container_of(node, struct httpd_file, node);
    const struct http_cache_key *key = k;
    const struct httpd_root *root = key->tree;
    return f->path_len == key->len && f->root.ino == root->ino &&
           f->root.dev == root->dev && !memcmp(f->path, key->rel, key->len);
}

/* An object's identity: the file and its version. */
static struct http_file_id file_id(const struct stat *st)
{
    return (struct http_file_id){
        .dev = (uint64_t) st->st_dev,
        .ino = (uint64_t) st->st_ino,
        .size = (uint64_t) st->st_size,
        .mtime = st->st_mtim.tv_sec,
        .mtime_nsec = (uint32_t) st->st_mtim.tv_nsec,
        .is_dir = S_ISDIR(st->st_mode),
    };
}

bool httpd_obj_is(const struct http_cache_obj *o, const struct stat *st)
{
    struct http_file_id id = file_id(st);
    return http_file_id_same(&o->id, &id);
}

int httpd_cache_init(void)
{
    table_rcu = cds_lfht_new_flavor(1024, 1024, 0,
                                    CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING,
                                    &urcu_memb_flavor, NULL);
    if (!table_rcu)
        return -ENOMEM;
    return httpd_gzip_start();
}

/* Entries looked at, from the least recently used, for one whose object
 * keeps a descriptor (open_file_give_up). */
#define OPEN_FILES_SCAN 64

/* Every one of --open-files is kept: the least recently used entry whose
 * object keeps a descriptor leaves the index, as nginx's open_file_cache
 * drops its least recently used element, and the descriptor is closed
 * once the last reader of the object is done (a grace period after its
 * last put). False when none of the OPEN_FILES_SCAN least recent entries
 * keeps one. */
static bool open_file_give_up(void)
{
    struct http_lru_node *gone = NULL;
    pthread_mutex_lock(&cache_lock);
    struct http_lru_node *n = httpd_cache_core.lru.head.prev;
    for (int i = 0; i < OPEN_FILES_SCAN && n != &httpd_cache_core.lru.head;
         i++, n = n->prev) {
        struct httpd_file *f = caa_container_of(n, struct httpd_file, c.lru);
        if (httpd_obj_of(f)->fd >= 0) {
            http_cache_unpublish_locked(&httpd_cache_core, &f->c, &gone);
            break;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    if (!gone)
        return false;
    rt_count(HTTPD_C_CACHE_EVICTIONS, 1);
    http_cache_put_gone(&httpd_cache_core, &gone);
    return true;
}

/* One of --open-files for a new object: a free one, else the least
 * recently used entry's (open_file_give_up), whose descriptor stays open
 * beyond the count only while a reader still holds it. */
static bool open_file_take(void)
{
    size_t n = atomic_load(&open_files);
    while (n < httpd_cfg.open_files)
        if (atomic_compare_exchange_weak(&open_files, &n, n + 1))
            return true;
    if (!httpd_cfg.open_files || !open_file_give_up())
        return false;
    atomic_fetch_add(&open_files, 1);
    return true;
}

size_t httpd_cache_open_files(void)
{
    return atomic_load(&open_files);
}

int httpd_cache_file_fd(const struct httpd_file *f, const char *rel, size_t len)
{
    return f && f->path_len == len && !memcmp(f->path, rel, len)
               ? httpd_obj_of(f)->fd
               : -1;
}

static void obj_free_rcu(struct rcu_head *head)
{
    struct httpd_obj *o = caa_container_of(head, struct httpd_obj, rcu);
    if (o->fd >= 0) {
        close(o->fd);
        atomic_fetch_sub(&open_files, 1);
    }
    http_cache_obj_free(&httpd_cache_core, &o->c);
    free(o);
}

static void obj_free(struct http_cache_obj *o)
{
    urcu_memb_call_rcu(&caa_container_of(o, struct httpd_obj, c)->rcu,
                       obj_free_rcu);
}

static void file_free_rcu(struct rcu_head *head)
{
    struct httpd_file *f = caa_container_of(head, struct httpd_file, rcu);
    for (int k = 0; k < HTTP_HEAD_MEMO_KINDS; k++)
        for (int d = 0; d < 2; d++)
            free(atomic_load_explicit(&f->memo[k][d], memory_order_relaxed));
    free(f);
}

static void entry_free(struct http_cache_entry *e)
{
    urcu_memb_call_rcu(&caa_container_of(e, struct httpd_file, c)->rcu,
                       file_free_rcu);
}

void httpd_cache_put(struct httpd_file *f)
{
    http_cache_put(&httpd_cache_core, &f->c);
}

/* Under cache_lock: f, which was in the index, is out of it; off the LRU
 * list onto *gone, whose entries (the index's references) the caller puts
 * after dropping the lock. */
static void leave_locked(struct httpd_file *f, struct http_lru_node **gone)
{
    atomic_fetch_add(&table_gen, 1);
    http_cache_left_locked(&httpd_cache_core, &f->c, gone);
}

/* Under cache_lock: e out of the index (core's http_cache_unpublish_locked
 * does the rest). */
static void remove_node(struct http_cache_entry *e)
{
    urcu_memb_read_lock();
    cds_lfht_del(table_rcu, &caa_container_of(e, struct httpd_file, c)->node);
    urcu_memb_read_unlock();
    atomic_fetch_add(&table_gen, 1);
}

static void lock_table(void)
{
    pthread_mutex_lock(&cache_lock);
}

static void unlock_table(void)
{
    pthread_mutex_unlock(&cache_lock);
}

static void evicted(void)
{
    rt_count(HTTPD_C_CACHE_EVICTIONS, 1);
}

/* len bytes from the start of fd: 0, or -1. */
static int httpd_read_all(int fd, char *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, buf + got, len - got, (off_t) got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t) n;
    }
    return 0;
}

/* A new object, which keeps f's descriptor when its body is not kept, a
 * regular file's (a load serves nothing else but directories), within
 * --open-files. */
static struct http_cache_obj *obj_new(struct http_cache_file *f, bool body)
{
    struct httpd_obj *o = calloc(1, sizeof(*o));
    if (!o)
        return NULL;
    o->fd = !body && !f->id.is_dir && open_file_take() ? f->h.fd : -1;
    if (o->fd >= 0)
        f->h.fd = -1; /* the object's now */
    return &o->c;
}

/* rel beneath the root, opened as a load serves it: an entry the server's
 * user may no longer read (or enter) is stale. */
static int stat_file(const void *tree,
                     const char *rel,
                     struct http_cache_file *f)
{
    const struct httpd_root *root = tree;
    struct stat st;
    f->h.fd = httpd_open_resource(root->fd, rel);
    if (f->h.fd < 0)
        return f->h.fd;
    if (fstat(f->h.fd, &st) < 0) {
        int err = -errno;
        close(f->h.fd);
        return err;
    }
    f->id = file_id(&st);
    f->regular = S_ISREG(st.st_mode);
    return 0;
}

static int read_file(struct http_cache_file *f, char *buf, size_t len)
{
    return httpd_read_all(f->h.fd, buf, len);
}

static void close_file(struct http_cache_file *f)
{
    if (f->h.fd >= 0)
        close(f->h.fd);
}

static struct http_cache_entry *entry_new(const struct http_cache_key *k)
{
    struct httpd_file *f = calloc(1, sizeof(*f) + k->len + 1);
    if (!f)
        return NULL;
    f->hash = k->hash;
    f->root = *(const struct httpd_root *) k->tree;
    f->path_len = k->len;
    memcpy(f->path, k->rel, k->len);
    return &f->c;
}

/* The table's entry for key: the thread's memo of it when the table has
 * not lost an entry since the memo was made, else the table's lookup
 * (remembered). Inside an RCU read-side section. */
static struct httpd_file *lookup(struct httpd_worker *w,
                                 const struct http_cache_key *key,
                                 unsigned long hash)
{
    uint64_t gen = atomic_load(&table_gen);
    struct httpd_lookup_memo *m = w ? &w->memo[hash % HTTPD_LOOKUP_MEMO] : NULL;
    if (m && m->f && m->gen == gen && m->hash == hash &&
        match(&m->f->node, key))
        return m->f;

    struct cds_lfht_iter it;
    cds_lfht_lookup(table_rcu, hash, match, key, &it);
    struct cds_lfht_node *node = cds_lfht_iter_get_node(&it);
    if (!node)
        return NULL;
    struct httpd_file *f = caa_container_of(node, struct httpd_file, node);
    if (m) {
        m->gen = gen; /* read before the lookup: a later removal shows */
        m->hash = hash;
        m->f = f;
    }
    return f;
}

/* The index's entry of k, referenced, or NULL. */
static struct http_cache_entry *find(const struct http_cache_key *k)
{
    urcu_memb_read_lock();
    struct httpd_file *f = lookup(k->ctx, k, k->hash);
    if (f && !http_ref_get_unless_zero(&f->c.refs))
        f = NULL;
    urcu_memb_read_unlock();
    return f ? &f->c : NULL;
}

int httpd_cache_get(struct httpd_worker *w,
                    const struct httpd_root *root,
                    const char *rel,
                    size_t len,
                    struct httpd_file **out)
{
    /* the root's identity in the hash: a path of another root is another
     * key */
    struct http_cache_key k = {
        root,
        rel,
        len,
        path_hash(rel, len) ^ (unsigned long) ((root->ino ^ (root->dev << 32)) *
                                               0x9e3779b97f4a7c15ULL),
        w,
        httpd_cfg.mime};
    struct http_cache_entry *e;
    /* the loop's clock, which may trail another thread's */
    int r = http_cache_get(&httpd_cache_core, &k, find(&k), rt_loop_now_ms(),
                           httpd_cfg.cache_size, &e);
    rt_count(r > 0 ? HTTPD_C_CACHE_HITS : HTTPD_C_CACHE_MISSES, 1);
    if (r < 0)
        return r;
    *out = caa_container_of(e, struct httpd_file, c);
    return 0;
}

void httpd_cache_usage(size_t *bytes, size_t *entries)
{
    http_cache_acct_usage(&httpd_cache_core.acct, bytes, entries);
}

/* Under cache_lock: f into the index, replacing the entry of its path a
 * concurrent load may have put there first. */
static void insert(struct http_cache_entry *e, struct http_lru_node **gone)
{
    struct httpd_file *f = caa_container_of(e, struct httpd_file, c);
    struct http_cache_key key = {&f->root, f->path, f->path_len, 0, 0, 0};
    urcu_memb_read_lock();
    struct cds_lfht_node *node =
        cds_lfht_add_replace(table_rcu, f->hash, match, &key, &f->node);
    urcu_memb_read_unlock();
    if (node)
        leave_locked(caa_container_of(node, struct httpd_file, node), gone);
}

static const struct http_cache_ops cache_ops = {
    .lock = lock_table,
    .unlock = unlock_table,
    .remove = remove_node,
    .insert = insert,
    .entry_new = entry_new,
    .entry_free = entry_free,
    .evicted = evicted,
    .obj_new = obj_new,
    .obj_free = obj_free,
    .stat = stat_file,
    .read = read_file,
    .close = close_file,
    .alloc = malloc,
    .free = free,
    /* every kept head it may come to hold, counted from the start */
    .entry_extra = HTTP_HEAD_MEMO_KINDS * 2 * sizeof(struct http_head_memo)};
