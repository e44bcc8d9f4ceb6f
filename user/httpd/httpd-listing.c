/* httpd-listing.c — a directory listing streamed as it is read: core
 * renders rows into a buffer of HTTP_SERVER_LISTING_BUF bytes, each full
 * buffer leaves as one chunk (HTTP/1.1) or as raw bytes before a close
 * (HTTP/1.0, which has no chunked coding; the plan says which). Memory
 * stays flat however large the directory. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "httpd.h"

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

bool httpd_listing_send(struct httpd_req *r, const struct http_plan *p, DIR *d)
{
    int dfd = dirfd(d);
    struct listing l = {.r = r, .chunked = p->head.chunked};
    l.mem = malloc(HTTP_CHUNK_HEADER_MAX + HTTP_SERVER_LISTING_BUF + 2);
    if (!l.mem) {
        closedir(d);
        return false;
    }
    http_buf_init(&l.b, l.mem + HTTP_CHUNK_HEADER_MAX, HTTP_SERVER_LISTING_BUF);

    bool ok = RENDER(&l, http_listing_begin(&l.b, p->path, p->path_len));
    struct dirent *de;
    while (ok && (de = readdir(d))) {
        const char *name = de->d_name;
        if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
            continue;
        struct stat st;
        if (fstatat(dfd, name, &st, 0) < 0 &&
            fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        bool is_dir = S_ISDIR(st.st_mode);
        ok = RENDER(&l, http_listing_entry(&l.b, name, strlen(name), is_dir,
                                           (uint64_t) st.st_size,
                                           (int64_t) st.st_mtime));
    }
    ok = ok && RENDER(&l, http_listing_end(&l.b)) && flush(&l);
    if (ok && l.chunked) {
        struct iovec iov = {.iov_base = HTTP_LAST_CHUNK,
                            .iov_len = sizeof(HTTP_LAST_CHUNK) - 1};
        ok = rt_sendv(r->c, &iov, 1, p->more, httpd_cfg.idle_timeout_ms) > 0;
    }
    free(l.mem);
    closedir(d);
    return ok;
}
