/* httpd-listing.c — a directory listing, sorted by name, streamed: the
 * directory's listed names (core decides which: no dotfiles unless
 * allowed) are read into core's name table, bounded by
 * HTTP_SERVER_LISTING_MAX_ENTRIES names and HTTP_SERVER_LISTING_MAX_NAME_BYTES
 * bytes (past them a last row says the listing is truncated), and sorted
 * by core; then core renders the rows, each name's metadata looked up
 * beneath the root, into a buffer of HTTP_SERVER_LISTING_BUF bytes, and
 * each full buffer leaves as one chunk (HTTP/1.1) or as raw bytes before a
 * close (HTTP/1.0, which has no chunked coding; the plan says which).
 *
 * Budget: the names are read before the head is sent, and a listing
 * holds its table and buffers until its last byte is out, however slowly
 * the client reads. At most --listing-max listings are in flight, and
 * their tables and buffers take at most --listing-bytes (each charged as
 * it grows); a listing beyond either is refused before its head
 * (httpd-respond.c answers 503 with Retry-After). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "httpd.h"

/* The name table starts this small and doubles up to core's bounds. */
#define NAMES_START 4096
#define OFFS_START 256
#define REL_MAX (HTTP_SERVER_PATH_MAX + NAME_MAX + 2)
#define MEM_SIZE (HTTP_CHUNK_HEADER_MAX + HTTP_SERVER_LISTING_BUF + 2)

/* Listings in flight and the bytes charged against --listing-bytes. */
static _Atomic long listings_now;
static _Atomic size_t listing_total;

struct httpd_listing {
    DIR *d;
    struct http_names names;
    bool truncated; /* more names than a listing holds */
    size_t charge;  /* bytes counted against --listing-bytes */
    char *rel;      /* "dir/" + a name: the row's path beneath the root */
    char *mem;      /* [chunk header room][data ... ][CRLF room] */
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
    free(l->names.buf);
    free(l->names.off);
    free(l->rel);
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

/* Room for one more name of need bytes within core's bounds and the
 * budget: 0; -ENOSPC when the listing holds no more (or memory ran out:
 * the listing ends there too, and says so); -EBUSY past the budget. */
static int names_grow(struct httpd_listing *l, size_t need)
{
    struct http_names *n = &l->names;
    if (n->count >= n->max) {
        size_t max = n->max * 2;
        if (max > HTTP_SERVER_LISTING_MAX_ENTRIES)
            max = HTTP_SERVER_LISTING_MAX_ENTRIES;
        if (max <= n->max)
            return -ENOSPC;
        size_t more = (max - n->max) * sizeof(*n->off);
        if (!charge(more))
            return -EBUSY;
        uint32_t *off = realloc(n->off, max * sizeof(*off));
        if (!off) {
            uncharge(more);
            return -ENOSPC;
        }
        l->charge += more;
        n->off = off;
        n->max = max;
    }
    if (need > n->cap - n->len) {
        size_t cap = n->cap * 2 > n->len + need ? n->cap * 2 : n->len + need;
        if (cap > HTTP_SERVER_LISTING_MAX_NAME_BYTES)
            cap = HTTP_SERVER_LISTING_MAX_NAME_BYTES;
        if (cap < n->len + need)
            return -ENOSPC;
        if (!charge(cap - n->cap))
            return -EBUSY;
        char *buf = realloc(n->buf, cap);
        if (!buf) {
            uncharge(cap - n->cap);
            return -ENOSPC;
        }
        l->charge += cap - n->cap;
        n->buf = buf;
        n->cap = cap;
    }
    return 0;
}

/* The directory's listed names, sorted: 0, or -EBUSY past the budget. */
static int collect(struct httpd_listing *l, const struct http_plan *p)
{
    struct http_names *n = &l->names;
    struct dirent *de;
    while ((de = readdir(l->d))) {
        size_t len = strlen(de->d_name);
        if (!http_listing_visible(p->path, p->path_len, de->d_name, len,
                                  httpd_cfg.dotfiles))
            continue;
        if (http_names_add(n, de->d_name, len) == 0)
            continue;
        int err = names_grow(l, len + 1);
        if (err == -EBUSY)
            return err;
        if (err < 0 || http_names_add(n, de->d_name, len) < 0) {
            l->truncated = true;
            break;
        }
    }
    http_names_sort(n);
    return 0;
}

int httpd_listing_open(const struct http_plan *p,
                       DIR *d,
                       struct httpd_listing **out)
{
    long max = (long) httpd_cfg.listing_max;
    if (atomic_fetch_add(&listings_now, 1) >= max && max) {
        atomic_fetch_sub(&listings_now, 1);
        closedir(d);
        return -EBUSY;
    }
    size_t fixed = sizeof(struct httpd_listing) + REL_MAX + MEM_SIZE +
                   NAMES_START + OFFS_START * sizeof(uint32_t);
    struct httpd_listing *l = calloc(1, sizeof(*l));
    if (!l || !charge(fixed)) {
        atomic_fetch_sub(&listings_now, 1);
        closedir(d);
        int err = l ? -EBUSY : -ENOMEM;
        free(l);
        return err;
    }
    /* from here on httpd_listing_free undoes everything */
    l->d = d;
    l->charge = fixed;
    l->rel = malloc(REL_MAX);
    l->mem = malloc(MEM_SIZE);
    l->names.buf = malloc(NAMES_START);
    l->names.cap = NAMES_START;
    l->names.off = malloc(OFFS_START * sizeof(*l->names.off));
    l->names.max = OFFS_START;
    int err = l->rel && l->mem && l->names.buf && l->names.off ? 0 : -ENOMEM;
    if (!err)
        err = collect(l, p);
    if (err < 0) {
        httpd_listing_free(l);
        return err;
    }
    *out = l;
    return 0;
}

/* A row's metadata, beneath the root as the server's user: what a
 * symlink points to when that stays beneath the root, else (dangling, or
 * leading out) the link itself. */
static bool stat_row(int dfd,
                     char *rel,
                     size_t dir_len,
                     const char *name,
                     struct stat *st)
{
    size_t len = strlen(name);
    if (dir_len + len + 1 > REL_MAX)
        return false;
    memcpy(rel + dir_len, name, len + 1);
    int fd = httpd_open_beneath(rel, O_PATH);
    if (fd >= 0) {
        bool ok = fstat(fd, st) == 0;
        close(fd);
        if (ok)
            return true;
    }
    return fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) == 0;
}

bool httpd_listing_send(struct httpd_req *r,
                        const struct http_plan *p,
                        struct httpd_listing *l)
{
    struct out o = {.r = r, .chunked = p->head.chunked, .mem = l->mem};
    const struct http_names *names = &l->names;
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
        const char *name = http_names_at(names, i);
        struct stat st;
        if (!stat_row(dirfd(l->d), rel, dir_len, name, &st))
            continue;
        bool is_dir = S_ISDIR(st.st_mode);
        ok = RENDER(&o, http_listing_entry(&o.b, name, strlen(name), is_dir,
                                           (uint64_t) st.st_size,
                                           (int64_t) st.st_mtime));
    }
    if (ok && l->truncated)
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
