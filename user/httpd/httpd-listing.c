/* httpd-listing.c — a directory listing, sorted by name, streamed from a
 * name table every listing of that directory version shares.
 *
 * The table: the directory's listed names (core decides which: no
 * dotfiles unless allowed) are read into core's name table, bounded by
 * HTTP_SERVER_LISTING_MAX_ENTRIES names and HTTP_SERVER_LISTING_MAX_NAME_BYTES
 * bytes (past them a last row says the listing is truncated), sorted by
 * core and packed into one immutable struct http_name_table. It is published
 * (compare-and-swap) on the directory's cache object — one version of the
 * directory: device, inode, size, mtime — charged against --cache-size and
 * freed with the object after a grace period; each listing holds the
 * directory's cache entry, so the table lives while a reader needs it. A
 * directory that changed since the cache looked (its open descriptor's
 * fstat differs from the object) gets a table of its own for that request;
 * two first listings of one version may both build, one publishes.
 *
 * Then core renders the rows, each name's metadata looked up beneath the
 * root, into the listing's buffer of HTTP_SERVER_LISTING_BUF bytes, and
 * each full buffer leaves as one chunk (HTTP/1.1) or as raw bytes before a
 * close (HTTP/1.0, which has no chunked coding; the plan says which).
 *
 * Budget: the table is found or built before the head is sent, and a
 * listing holds its buffers until its last byte is out, however slowly
 * the client reads. At most --listing-max listings are in flight, and
 * their buffers and the tables being built (or held by one listing) take
 * at most --listing-bytes (each charged as it grows); a listing beyond
 * either is refused before its head (httpd-respond.c answers 503 with
 * Retry-After). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "httpd.h"

#define MEM_SIZE (HTTP_CHUNK_HEADER_MAX + HTTP_SERVER_LISTING_BUF + 2)
_Static_assert(HTTP_SERVER_LISTING_BUF >= HTTP_LISTING_ENTRY_MAX,
               "a row fits an empty buffer");

/* Listings in flight and the bytes charged against --listing-bytes. */
static _Atomic long listings_now;
static _Atomic size_t listing_total;

struct httpd_listing {
    DIR *d;
    struct httpd_file *ref;              /* the directory's: keeps its table */
    const struct http_name_table *names; /* ref's object's, or own */
    struct http_name_table *own;         /* a table only this listing reads */
    size_t charge;                       /* counted against --listing-bytes */
    char *mem; /* [chunk header room][data ... ][CRLF room] */
    size_t rel_cap;
    char rel[]; /* "dir/" + a name: the row's path beneath the root */
};

struct out {
    struct httpd_req *r;
    bool chunked;
    char *mem;
    struct http_buf b;
};

/* Charge n more bytes: false (nothing charged) past the budget. */
static bool charge(size_t n)
{
    size_t total = atomic_fetch_add(&listing_total, n) + n;
    if (httpd_cfg.listing_bytes && total > httpd_cfg.listing_bytes) {
        atomic_fetch_sub(&listing_total, n);
        return false;
    }
    return true;
}

static void uncharge(size_t n)
{
    atomic_fetch_sub(&listing_total, n);
}

size_t httpd_listing_bytes(void)
{
    return atomic_load(&listing_total);
}

void httpd_listing_free(struct httpd_listing *l)
{
    if (l->d)
        closedir(l->d);
    if (l->ref)
        httpd_cache_put(l->ref);
    free(l->own);
    free(l->mem);
    uncharge(l->charge);
    free(l);
    atomic_fetch_sub(&listings_now, 1);
}

static bool flush(struct out *o)
{
    if (!o->b.len)
        return true;
    struct iovec iov;
    if (o->chunked) {
        char hdr[HTTP_CHUNK_HEADER_MAX];
        size_t hl = http_chunk_header(hdr, o->b.len);
        char *start = o->b.data - hl;
        memcpy(start, hdr, hl);
        memcpy(o->b.data + o->b.len, HTTP_CHUNK_END, 2);
        iov.iov_base = start;
        iov.iov_len = hl + o->b.len + 2;
    } else {
        iov.iov_base = o->b.data;
        iov.iov_len = o->b.len;
    }
    ssize_t n = rt_sendv(o->r->c, &iov, 1, true, httpd_cfg.idle_timeout_ms);
    if (n < 0)
        return false;
    o->r->sent += (uint64_t) n;
    o->b.len = 0;
    return true;
}

/* Run a render step; when the buffer is full, send it and retry once. */
#define RENDER(o, call)                    \
    ({                                     \
        bool _ok = true;                   \
        if ((call) < 0) {                  \
            _ok = flush(o) && (call) >= 0; \
        }                                  \
        _ok;                               \
    })

/* ---- building a table ---- */

/* The memory of a name list (core's struct http_names_mem): charged. */
static const struct http_names_mem names_mem = {charge, uncharge, malloc, free};

/* Read d's listed names, sort them and pack them into one table of
 * exactly their size, charged against --listing-bytes: 0, -EBUSY past the
 * budget, -ENOMEM. */
static int build(DIR *d,
                 const struct http_plan *p,
                 bool root,
                 struct http_name_table **out)
{
    struct http_names n;
    bool truncated = false;
    int err = http_names_start(&n, &names_mem);
    struct dirent *de;
    while (!err && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (!http_listing_visible(p->path, p->path_len, de->d_name, len,
                                  httpd_cfg.dotfiles))
            continue;
        if (http_names_add(&n, de->d_name, len) == 0)
            continue;
        err = http_names_grow(&n, len + 1, &names_mem);
        if (err == -ENOSPC || (!err && http_names_add(&n, de->d_name, len))) {
            truncated = true;
            err = 0;
            break;
        }
    }
    if (!err) {
        http_names_sort(&n);
        *out = http_names_get(&names_mem, http_names_table_size(&n), &err);
    }
    if (!err)
        http_names_pack(&n, *out, truncated, root, httpd_cfg.dotfiles);
    http_names_free(&n, &names_mem);
    return err;
}

static bool fits(const struct http_name_table *t, bool root)
{
    return http_names_table_fits(t, root, httpd_cfg.dotfiles);
}

/* The table for l: the one published on the directory's object when it
 * is this version's, else built and published; built for l alone when
 * the directory is not what the cache knows. */
static int find_table(struct httpd_listing *l,
                      const struct http_plan *p,
                      const struct httpd_root *tree,
                      bool root)
{
    struct stat st;
    if (fstat(dirfd(l->d), &st) < 0)
        return -errno;
    if (httpd_cache_get(NULL, tree, p->path, p->path_len, &l->ref) < 0)
        l->ref = NULL;
    struct http_cache_obj *o =
        l->ref && httpd_obj_is(l->ref->c.obj, &st) ? l->ref->c.obj : NULL;
    if (o) {
        l->names = http_ptr_load(&o->names);
        if (fits(l->names, root))
            return 0;
    }
    struct http_name_table *t = NULL; /* build sets it when it succeeds */
    int err = build(l->d, p, root, &t);
    if (err < 0)
        return err;
    if (o && http_cache_names_publish(&httpd_cache_core, o, t, t->bytes,
                                      httpd_cfg.cache_size)) {
        /* the cache holds it now, and counts it */
        uncharge(t->bytes);
        l->names = t;
        return 0;
    }
    const struct http_name_table *expected =
        o ? http_ptr_load(&o->names) : NULL;
    if (o && fits(expected, root)) { /* another listing published first */
        uncharge(t->bytes);
        free(t);
        l->names = expected;
        return 0;
    }
    l->own = t; /* stays charged while it lives */
    l->names = t;
    l->charge += t->bytes;
    return 0;
}

int httpd_listing_open(const struct http_plan *p,
                       const struct httpd_root *tree,
                       DIR *d,
                       struct httpd_listing **out)
{
    long max = (long) httpd_cfg.listing_max;
    if (atomic_fetch_add(&listings_now, 1) >= max && max) {
        atomic_fetch_sub(&listings_now, 1);
        closedir(d);
        return -EBUSY;
    }
    bool root = p->path_len == 1 && p->path[0] == '.';
    size_t dir_len = root ? 0 : p->path_len + 1;
    size_t size = sizeof(struct httpd_listing) + dir_len + NAME_MAX + 1;
    struct httpd_listing *l = calloc(1, size);
    if (!l || !charge(size + MEM_SIZE)) {
        atomic_fetch_sub(&listings_now, 1);
        closedir(d);
        int err = l ? -EBUSY : -ENOMEM;
        free(l);
        return err;
    }
    /* from here on httpd_listing_free undoes everything */
    l->d = d;
    l->charge = size + MEM_SIZE;
    l->rel_cap = dir_len + NAME_MAX + 1;
    l->mem = malloc(MEM_SIZE);
    int err = l->mem ? find_table(l, p, tree, root) : -ENOMEM;
    if (err < 0) {
        httpd_listing_free(l);
        return err;
    }
    *out = l;
    return 0;
}

/* A row's metadata, beneath the root as the server's user: the entry's
 * own (one fstatat, the directory being beneath the root already), and
 * for a symlink what it points to when that stays beneath the root, else
 * (dangling, or leading out) the link itself. */
static bool stat_row(int tree,
                     int dfd,
                     char *rel,
                     size_t rel_cap,
                     size_t dir_len,
                     const char *name,
                     struct stat *st)
{
    if (fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
        return false;
    if (!S_ISLNK(st->st_mode))
        return true;
    size_t len = strlen(name);
    if (dir_len + len + 1 > rel_cap)
        return true;
    memcpy(rel + dir_len, name, len + 1);
    int fd = httpd_open_beneath(tree, rel, O_PATH);
    if (fd >= 0) {
        struct stat to;
        if (fstat(fd, &to) == 0)
            *st = to;
        close(fd);
    }
    return true;
}

bool httpd_listing_send(struct httpd_req *r,
                        const struct http_plan *p,
                        struct httpd_listing *l)
{
    struct out o = {.r = r, .chunked = p->head.chunked, .mem = l->mem};
    const struct http_name_table *names = l->names;
    char *rel = l->rel;
    bool ok = true;
    http_buf_init(&o.b, o.mem + HTTP_CHUNK_HEADER_MAX, HTTP_SERVER_LISTING_BUF);

    /* rows are looked up as "dir/name" from the root ("name" there) */
    size_t dir_len = 0;
    if (!(p->path_len == 1 && p->path[0] == '.')) {
        memcpy(rel, p->path, p->path_len);
        rel[p->path_len] = '/';
        dir_len = p->path_len + 1;
    }

    /* the opening takes several pieces for a long path; each part fits an
     * empty buffer */
    struct http_listing_cursor cur = {0, 0};
    while (ok && http_listing_begin_part(&o.b, p->path, p->path_len, &cur) < 0)
        ok = flush(&o);
    for (size_t i = 0; ok && i < names->count; i++) {
        const char *name = names->names + names->off[i];
        struct stat st;
        if (!stat_row(r->root.fd, dirfd(l->d), rel, l->rel_cap, dir_len, name,
                      &st))
            continue;
        bool is_dir = S_ISDIR(st.st_mode);
        ok = RENDER(&o, http_listing_entry(&o.b, name, strlen(name), is_dir,
                                           (uint64_t) st.st_size,
                                           (int64_t) st.st_mtime));
    }
    if (ok && names->truncated)
        ok = RENDER(&o, http_listing_truncated(&o.b, names->count));
    ok = ok && RENDER(&o, http_listing_end(&o.b)) && flush(&o);
    if (ok && o.chunked) {
        struct iovec iov = {.iov_base = HTTP_LAST_CHUNK,
                            .iov_len = sizeof(HTTP_LAST_CHUNK) - 1};
        ok = rt_sendv(r->c, &iov, 1, p->more, httpd_cfg.idle_timeout_ms) > 0;
    }
    httpd_listing_free(l);
    return ok;
}
