/* httpd-listing.c — a directory listing, sorted by name, streamed: the
 * directory's listed names (core decides which: no dotfiles unless
 * allowed) are read into core's name table, bounded by
 * HTTP_SERVER_LISTING_MAX_ENTRIES names and HTTP_SERVER_LISTING_MAX_NAME_BYTES
 * bytes (past them a last row says the listing is truncated), and sorted
 * by core; then core renders the rows, each name's metadata looked up
 * beneath the root, into a buffer of HTTP_SERVER_LISTING_BUF bytes, and
 * each full buffer leaves as one chunk (HTTP/1.1) or as raw bytes before a
 * close (HTTP/1.0, which has no chunked coding; the plan says which). */
#include <dirent.h>
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

struct listing {
    struct httpd_req *r;
    bool chunked;
    char *mem; /* [chunk header room][data ... ][CRLF room] */
    struct http_buf b;
};

static bool flush(struct listing *l)
{
    if (!l->b.len)
        return true;
    struct iovec iov;
    if (l->chunked) {
        char hdr[HTTP_CHUNK_HEADER_MAX];
        size_t hl = http_chunk_header(hdr, l->b.len);
        char *start = l->b.data - hl;
        memcpy(start, hdr, hl);
        memcpy(l->b.data + l->b.len, HTTP_CHUNK_END, 2);
        iov.iov_base = start;
        iov.iov_len = hl + l->b.len + 2;
    } else {
        iov.iov_base = l->b.data;
        iov.iov_len = l->b.len;
    }
    ssize_t n = rt_sendv(l->r->c, &iov, 1, true, httpd_cfg.idle_timeout_ms);
    if (n < 0)
        return false;
    l->r->sent += (uint64_t) n;
    l->b.len = 0;
    return true;
}

/* Run a render step; when the buffer is full, send it and retry once. */
#define RENDER(l, call)                    \
    ({                                     \
        bool _ok = true;                   \
        if ((call) < 0) {                  \
            _ok = flush(l) && (call) >= 0; \
        }                                  \
        _ok;                               \
    })

/* Room for one more name of need bytes within core's bounds: 0, -1 when
 * the listing holds no more (or memory ran out: the listing ends there
 * too, and says so). */
static int names_grow(struct http_names *n, size_t need)
{
    if (n->count >= n->max) {
        size_t max = n->max * 2;
        if (max > HTTP_SERVER_LISTING_MAX_ENTRIES)
            max = HTTP_SERVER_LISTING_MAX_ENTRIES;
        uint32_t *off =
            max > n->max ? realloc(n->off, max * sizeof(*off)) : NULL;
        if (!off)
            return -1;
        n->off = off;
        n->max = max;
    }
    if (need > n->cap - n->len) {
        size_t cap = n->cap * 2 > n->len + need ? n->cap * 2 : n->len + need;
        if (cap > HTTP_SERVER_LISTING_MAX_NAME_BYTES)
            cap = HTTP_SERVER_LISTING_MAX_NAME_BYTES;
        char *buf = cap >= n->len + need ? realloc(n->buf, cap) : NULL;
        if (!buf)
            return -1;
        n->buf = buf;
        n->cap = cap;
    }
    return 0;
}

/* The directory's listed names, sorted; false if out of memory at the
 * start. *truncated: the directory has more than the table holds. */
static bool collect(DIR *d,
                    const struct http_plan *p,
                    struct http_names *n,
                    bool *truncated)
{
    n->buf = malloc(NAMES_START);
    n->cap = NAMES_START;
    n->off = malloc(OFFS_START * sizeof(*n->off));
    n->max = OFFS_START;
    if (!n->buf || !n->off)
        return false;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (!http_listing_visible(p->path, p->path_len, de->d_name, len,
                                  httpd_cfg.dotfiles))
            continue;
        if (http_names_add(n, de->d_name, len) < 0 &&
            (names_grow(n, len + 1) < 0 ||
             http_names_add(n, de->d_name, len) < 0)) {
            *truncated = true;
            break;
        }
    }
    http_names_sort(n);
    return true;
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

bool httpd_listing_send(struct httpd_req *r, const struct http_plan *p, DIR *d)
{
    struct listing l = {.r = r, .chunked = p->head.chunked};
    struct http_names names = {0};
    bool truncated = false;
    char *rel = malloc(REL_MAX);
    l.mem = malloc(HTTP_CHUNK_HEADER_MAX + HTTP_SERVER_LISTING_BUF + 2);
    bool ok = rel && l.mem && collect(d, p, &names, &truncated);
    if (!ok)
        goto out;
    http_buf_init(&l.b, l.mem + HTTP_CHUNK_HEADER_MAX, HTTP_SERVER_LISTING_BUF);

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
    while (ok && http_listing_begin_part(&l.b, p->path, p->path_len, &cur) < 0)
        ok = flush(&l);
    for (size_t i = 0; ok && i < names.count; i++) {
        const char *name = http_names_at(&names, i);
        struct stat st;
        if (!stat_row(dirfd(d), rel, dir_len, name, &st))
            continue;
        bool is_dir = S_ISDIR(st.st_mode);
        ok = RENDER(&l, http_listing_entry(&l.b, name, strlen(name), is_dir,
                                           (uint64_t) st.st_size,
                                           (int64_t) st.st_mtime));
    }
    if (ok && truncated)
        ok = RENDER(&l, http_listing_truncated(&l.b, names.count));
    ok = ok && RENDER(&l, http_listing_end(&l.b)) && flush(&l);
    if (ok && l.chunked) {
        struct iovec iov = {.iov_base = HTTP_LAST_CHUNK,
                            .iov_len = sizeof(HTTP_LAST_CHUNK) - 1};
        ok = rt_sendv(r->c, &iov, 1, p->more, httpd_cfg.idle_timeout_ms) > 0;
    }
out:
    free(names.buf);
    free(names.off);
    free(rel);
    free(l.mem);
    closedir(d);
    return ok;
}
