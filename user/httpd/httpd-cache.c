/* httpd-cache.c — the content cache: one entry per path (metadata, body of
 * small files, gzip copy), in a lock-free RCU hash table (liburcu's
 * rculfhash, urcu-memb flavour).
 *
 * Lifetime: the table holds one reference on each entry it contains; a
 * reader takes its own reference under rcu_read_lock (increment-if-not-
 * zero) and drops it when done, so nothing is used after rcu_read_unlock
 * without a reference. Whoever removes an entry from the table (a stale
 * revalidation or the evictor; cds_lfht_del picks one winner) drops the
 * table's reference; the last reference frees the entry after a grace
 * period (call_rcu), as a concurrent lookup may still be reading it.
 *
 * Freshness: an entry is re-checked with fstat at most every
 * HTTPD_REVALIDATE_MS; a changed size, mtime or inode replaces it.
 * Size: bodies and gzip copies are charged against --cache-size; when the
 * total goes over, the least recently used entries are evicted.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "httpd.h"

#define ENTRY_OVERHEAD 256 /* charged per entry besides path and body */
#define EVICT_BATCH 64

/* the lock-free hash table every worker reads under RCU */
static struct cds_lfht *table_rcu;
static _Atomic size_t cache_bytes_shared;
static _Atomic size_t cache_entries_shared; /* entries in the table */
static pthread_mutex_t evict_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned long path_hash(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char) s[i];
        h *= 1099511628211ULL;
    }
    return (unsigned long) h;
}

struct key {
    const char *path;
    size_t len;
};

static int match(struct cds_lfht_node *node, const void *k)
{
    const struct httpd_file *f =
        caa_container_of(node, struct httpd_file, node);
    const struct key *key = k;
    return f->path_len == key->len && !memcmp(f->path, key->path, key->len);
}

int httpd_cache_init(void)
{
    table_rcu = cds_lfht_new_flavor(1024, 1024, 0,
                                    CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING,
                                    &urcu_memb_flavor, NULL);
    return table_rcu ? 0 : -ENOMEM;
}

static void file_free_rcu(struct rcu_head *head)
{
    struct httpd_file *f = caa_container_of(head, struct httpd_file, rcu);
    free(atomic_load(&f->gz));
    free(f->body);
    free(f);
}

void httpd_cache_put(struct httpd_file *f)
{
    if (atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1)
        urcu_memb_call_rcu(&f->rcu, file_free_rcu);
}

static bool get_unless_zero(struct httpd_file *f)
{
    int r = atomic_load(&f->refs);
    while (r > 0)
        if (atomic_compare_exchange_weak(&f->refs, &r, r + 1))
            return true;
    return false;
}

/* Take f out of the table, if it is still there; caller holds the RCU
 * read lock. The winner drops the table's reference. */
static bool unpublish(struct httpd_file *f)
{
    if (cds_lfht_del(table_rcu, &f->node) == 0) {
        atomic_store(&f->in_table, false);
        atomic_fetch_sub(&cache_bytes_shared, atomic_load(&f->charge));
        atomic_fetch_sub(&cache_entries_shared, 1);
        httpd_cache_put(f);
        return true;
    }
    return false;
}

/* Evict least recently used entries until the total is below 90% of the
 * limit. One evictor at a time; others just go on. */
static void evict(void)
{
    if (pthread_mutex_trylock(&evict_lock) != 0)
        return;
    size_t target = httpd_cfg.cache_size / 10 * 9;
    for (int pass = 0; pass < 16 && atomic_load(&cache_bytes_shared) > target;
         pass++) {
        struct httpd_file *cand[EVICT_BATCH];
        int n = 0;
        struct cds_lfht_iter it;
        struct httpd_file *f;
        urcu_memb_read_lock();
        cds_lfht_for_each_entry(table_rcu, &it, f, node)
        {
            uint64_t u = atomic_load(&f->used_ms);
            int i;
            if (n < EVICT_BATCH) {
                i = n++;
            } else {
                if (atomic_load(&cand[n - 1]->used_ms) <= u)
                    continue;
                i = n - 1; /* drop the youngest candidate */
            }
            /* keep candidates sorted, oldest first */
            while (i > 0 && atomic_load(&cand[i - 1]->used_ms) > u) {
                cand[i] = cand[i - 1];
                i--;
            }
            cand[i] = f;
        }
        for (int i = 0; i < n && atomic_load(&cache_bytes_shared) > target; i++)
            if (unpublish(cand[i]))
                rt_count(RT_C_CACHE_EVICTIONS, 1);
        urcu_memb_read_unlock();
        if (!n)
            break;
    }
    pthread_mutex_unlock(&evict_lock);
}

static void charge(struct httpd_file *f, size_t bytes)
{
    atomic_fetch_add(&f->charge, bytes);
    if (atomic_load(&f->in_table) &&
        atomic_fetch_add(&cache_bytes_shared, bytes) + bytes >
            httpd_cfg.cache_size)
        evict();
}

static int read_all(int fd, char *buf, size_t len)
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

static bool same_file(const struct httpd_file *f, const struct stat *st)
{
    return f->meta.size == (uint64_t) st->st_size &&
           f->meta.mtime == st->st_mtim.tv_sec &&
           f->mtime_nsec == st->st_mtim.tv_nsec && f->ino == st->st_ino &&
           f->dev == st->st_dev && f->meta.is_dir == !!S_ISDIR(st->st_mode);
}

/* Build an entry from the file system; refs = 1 (the caller's). */
static int load(const char *rel,
                size_t len,
                unsigned long hash,
                struct httpd_file **out)
{
    int fd = httpd_open_beneath(rel, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return fd;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        close(fd);
        return -EACCES; /* fifos, devices, sockets: never served */
    }
    struct httpd_file *f = calloc(1, sizeof(*f) + len + 1);
    if (!f) {
        close(fd);
        return -ENOMEM;
    }
    atomic_init(&f->refs, 1);
    f->hash = hash;
    http_resource_init(&f->meta, rel, len, S_ISDIR(st.st_mode),
                       (uint64_t) st.st_size, st.st_mtim.tv_sec);
    f->mtime_nsec = st.st_mtim.tv_nsec;
    f->ino = st.st_ino;
    f->dev = st.st_dev;
    f->path_len = len;
    memcpy(f->path, rel, len);
    atomic_init(&f->checked_ms, rt_now_ms());
    atomic_init(&f->used_ms, rt_now_ms());
    atomic_init(&f->charge, ENTRY_OVERHEAD + len);
    if (http_resource_keep_body(&f->meta, httpd_cfg.cache_size)) {
        f->body = malloc(f->meta.size);
        if (f->body && read_all(fd, f->body, f->meta.size) < 0) {
            free(f->body);
            f->body = NULL; /* sendfile will report the problem */
        }
        if (f->body)
            atomic_fetch_add(&f->charge, f->meta.size);
        f->meta.body_cached = f->body != NULL;
    }
    close(fd);
    *out = f;
    return 0;
}

/* Is f still what the file system has? Checked at most every
 * HTTPD_REVALIDATE_MS per entry; one checker wins the timestamp. */
static bool still_fresh(struct httpd_file *f, const char *rel, uint64_t now)
{
    uint64_t checked = atomic_load(&f->checked_ms);
    if (now - checked < HTTPD_REVALIDATE_MS)
        return true;
    if (!atomic_compare_exchange_strong(&f->checked_ms, &checked, now))
        return true; /* another thread is checking right now */
    /* opened for reading, as load() does: an entry the server's user may
     * no longer read is stale */
    int fd = httpd_open_beneath(rel, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return false;
    struct stat st;
    bool same = fstat(fd, &st) == 0 && same_file(f, &st);
    close(fd);
    return same;
}

int httpd_cache_get(const char *rel, size_t len, struct httpd_file **out)
{
    unsigned long hash = path_hash(rel, len);
    struct key key = {rel, len};
    struct cds_lfht_iter it;
    struct httpd_file *f = NULL;
    uint64_t now = rt_now_ms();

    urcu_memb_read_lock();
    cds_lfht_lookup(table_rcu, hash, match, &key, &it);
    struct cds_lfht_node *node = cds_lfht_iter_get_node(&it);
    if (node) {
        f = caa_container_of(node, struct httpd_file, node);
        if (!get_unless_zero(f))
            f = NULL;
    }
    urcu_memb_read_unlock();

    if (f) {
        if (still_fresh(f, rel, now)) {
            /* LRU clock: a coarse stamp, written rarely, so hot entries do
             * not bounce their cache line between workers on every hit */
            if (now - atomic_load_explicit(&f->used_ms, memory_order_relaxed) >
                100)
                atomic_store_explicit(&f->used_ms, now, memory_order_relaxed);
            rt_count(RT_C_CACHE_HITS, 1);
            *out = f;
            return 0;
        }
        urcu_memb_read_lock();
        unpublish(f);
        urcu_memb_read_unlock();
        httpd_cache_put(f);
    }

    rt_count(RT_C_CACHE_MISSES, 1);
    int err = load(rel, len, hash, &f);
    if (err < 0)
        return err;
    size_t ch = atomic_load(&f->charge);
    if (ch > httpd_cfg.cache_size) {
        *out = f; /* too big to cache: used once, freed by the put */
        return 0;
    }
    atomic_fetch_add(&f->refs, 1); /* the table's */
    atomic_store(&f->in_table, true);
    /* counted before it can be found, so an eviction racing with us never
     * takes the count below zero */
    atomic_fetch_add(&cache_entries_shared, 1);
    urcu_memb_read_lock();
    node = cds_lfht_add_replace(table_rcu, hash, match, &key, &f->node);
    if (node) {
        /* a concurrent load of the same path lost the race to us */
        struct httpd_file *old =
            caa_container_of(node, struct httpd_file, node);
        atomic_store(&old->in_table, false);
        atomic_fetch_sub(&cache_bytes_shared, atomic_load(&old->charge));
        atomic_fetch_sub(&cache_entries_shared, 1); /* f took its place */
        httpd_cache_put(old);
    }
    urcu_memb_read_unlock();
    if (atomic_fetch_add(&cache_bytes_shared, ch) + ch > httpd_cfg.cache_size)
        evict();
    *out = f;
    return 0;
}

void httpd_cache_usage(size_t *bytes, size_t *entries)
{
    *bytes = atomic_load_explicit(&cache_bytes_shared, memory_order_relaxed);
    *entries =
        atomic_load_explicit(&cache_entries_shared, memory_order_relaxed);
}

const struct httpd_gz *httpd_cache_gzip(struct httpd_file *f)
{
    struct httpd_gz *gz = atomic_load(&f->gz);
    if (gz)
        return gz;
    /* An entry the cache could not keep would be compressed again by every
     * request: send identity instead (never recompress per request). */
    if (!atomic_load(&f->in_table))
        return NULL;
    char *src = f->body;
    char *tmp = NULL;
    if (!src) {
        int fd = httpd_open_beneath(f->path, O_RDONLY | O_NONBLOCK);
        if (fd < 0)
            return NULL;
        tmp = malloc(f->meta.size);
        if (!tmp || read_all(fd, tmp, f->meta.size) < 0) {
            free(tmp);
            close(fd);
            return NULL;
        }
        close(fd);
        src = tmp;
    }
    gz = httpd_gzip(src, f->meta.size);
    free(tmp);
    if (!gz)
        return NULL;
    struct httpd_gz *expected = NULL;
    if (!atomic_compare_exchange_strong(&f->gz, &expected, gz)) {
        free(gz); /* someone else compressed it first */
        return expected;
    }
    charge(f, gz->worthless ? sizeof(*gz) : sizeof(*gz) + gz->len);
    return gz;
}
