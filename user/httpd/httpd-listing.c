/* httpd-listing.c — a directory listing streamed as it is read: core
 * renders rows into a 16 KiB buffer, each full buffer leaves as one chunk
 * (HTTP/1.1) or as raw bytes before a close (HTTP/1.0, which has no
 * chunked coding). Memory stays flat however large the directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "httpd.h"

#define LISTING_BUF 16384

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
    struct iovec iov[2];
    int cnt = 1;
    if (l->chunked) {
        char hdr[HTTP_CHUNK_HEADER_MAX];
        size_t hl = http_chunk_header(hdr, l->b.len);
        char *start = l->b.data - hl;
        memcpy(start, hdr, hl);
        memcpy(l->b.data + l->b.len, HTTP_CHUNK_END, 2);
        iov[0].iov_base = start;
        iov[0].iov_len = hl + l->b.len + 2;
    } else {
        iov[0].iov_base = l->b.data;
        iov[0].iov_len = l->b.len;
    }
    ssize_t n = rt_sendv(l->r->c, iov, cnt, true, httpd_cfg.idle_timeout_ms);
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

bool httpd_listing_serve(struct httpd_req *r, const char *rel, size_t rel_len)
{
    int dfd = httpd_open_beneath(rel, O_RDONLY | O_DIRECTORY);
    if (dfd < 0)
        return httpd_send_error(r, dfd == -ENOENT ? 404 : 403);
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return httpd_send_error(r, 500);
    }

    struct listing l = {.r = r, .chunked = r->req->version >= HTTP_VERSION_1_1};
    struct http_response_head h;
    if (!l.chunked)
        r->keep_alive = false; /* the close ends the body */
    httpd_head_init(r, &h, 200);
    h.content_type = "text/html; charset=utf-8";
    h.chunked = l.chunked;
    r->cork = !r->head;
    bool ok = httpd_send_head(r, &h, NULL, 0);
    r->cork = false;
    if (!ok || r->head)
        goto out;

    l.mem = malloc(HTTP_CHUNK_HEADER_MAX + LISTING_BUF + 2);
    if (!l.mem) {
        ok = false;
        goto out;
    }
    http_buf_init(&l.b, l.mem + HTTP_CHUNK_HEADER_MAX, LISTING_BUF);

    ok = RENDER(&l, http_listing_begin(&l.b, rel, rel_len));
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
        ok = rt_sendv(r->c, &iov, 1, r->more_pending,
                      httpd_cfg.idle_timeout_ms) > 0;
    }
    free(l.mem);
out:
    closedir(d);
    return ok;
}
