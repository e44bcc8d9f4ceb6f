/* httpd-file.c — a static file or directory for one request: metadata from
 * the cache, validators and ranges decided by core/, the head gathered
 * with the body (small files, gzip copies) or sent with MSG_MORE ahead of
 * sendfile (large files). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "httpd.h"

int httpd_open_beneath(const char *rel, int flags)
{
    struct open_how how = {
        .flags = (uint64_t) (flags | O_CLOEXEC | O_NOCTTY),
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    /* noinline-safe: errno is read right after the syscall, no wait */
    long fd = syscall(SYS_openat2, httpd_cfg.root_fd, rel, &how, sizeof(how));
    return fd < 0 ? -errno : (int) fd;
}

static int errno_status(int err)
{
    switch (err) {
    case -ENOENT:
    case -ENOTDIR:
    case -ENAMETOOLONG:
        return 404;
    case -EXDEV: /* a symlink (or "..") leads out of the root */
    case -ELOOP:
    case -EACCES:
    case -EPERM:
        return 403;
    default:
        return 500;
    }
}

/* 301 to the same path with a slash, query kept. */
static bool redirect_slash(struct httpd_req *r,
                           const char *rel,
                           size_t len,
                           const struct http_path_info *info)
{
    const struct http_request *req = r->req;
    size_t cap = 3 * len + 3 * req->path.len + 16;
    char *loc = malloc(cap);
    if (!loc)
        return false;
    struct http_buf b;
    http_buf_init(&b, loc, cap);
    http_buf_append_char(&b, '/');
    http_url_encode(&b, rel, len, true);
    http_buf_append_char(&b, '/');
    /* the query, as sent (the parser has vetted its bytes, and the head
     * builder refuses CR/LF in values) */
    if (info->has_query) {
        http_buf_append_char(&b, '?');
        http_buf_append(&b, r->rb + req->path.off + info->query_off,
                        info->query_len);
    }
    http_buf_append_char(&b, '\0');

    struct http_response_head h;
    httpd_head_init(r, &h, 301);
    h.location = loc;
    h.content_type = "text/plain; charset=utf-8";
    h.content_length = 0;
    bool ok = !b.overflow && httpd_send_head(r, &h, NULL, 0);
    if (b.overflow)
        ok = httpd_send_error(r, 414);
    free(loc);
    return ok;
}

static bool send_regular(struct httpd_req *r,
                         const char *rel,
                         struct httpd_file *f)
{
    const struct http_request *req = r->req;
    const char *rb = r->rb;
    struct http_response_head h;

    bool compressible = httpd_cfg.gzip && f->mime->compressible &&
                        f->size <= HTTPD_GZIP_MAX && f->size > 0;
    const char *inm = req->seen & HTTP_SEEN_IF_NONE_MATCH
                          ? rb + req->if_none_match.off
                          : NULL;
    const char *ims = req->seen & HTTP_SEEN_IF_MODIFIED_SINCE
                          ? rb + req->if_modified_since.off
                          : NULL;

    /* Representation: gzip when accepted and worth it; Range applies to
     * identity only (as nginx does), so a Range request gets identity. */
    const struct httpd_gz *gz = NULL;
    bool want_range =
        (req->seen & HTTP_SEEN_RANGE) && !(req->repeated & HTTP_SEEN_RANGE);
    if (compressible && !want_range) {
        const char *ae = req->seen & HTTP_SEEN_ACCEPT_ENCODING
                             ? rb + req->accept_encoding.off
                             : NULL;
        if (http_accept_encoding_negotiate(ae, req->accept_encoding.len,
                                           true) == HTTP_ENCODING_GZIP) {
            gz = httpd_cache_gzip(f);
            if (gz && gz->worthless)
                gz = NULL;
        }
    }
    const char *etag = gz ? gz->etag : f->etag;

    int cond = http_conditional_status(inm, req->if_none_match.len, ims,
                                       req->if_modified_since.len, etag,
                                       strlen(etag), f->mtime);
    httpd_head_init(r, &h, 200);
    h.content_type = f->mime->content_type;
    h.has_last_modified = true;
    h.last_modified = f->mtime;
    h.etag = etag;
    h.vary_accept_encoding = compressible;
    if (cond == 304) {
        h.status = r->status = 304;
        h.content_type = NULL;
        return httpd_send_head(r, &h, NULL, 0);
    }
    if (gz) {
        h.content_encoding = "gzip";
        h.content_length = (int64_t) gz->len;
        return httpd_send_head(r, &h, gz->data, gz->len);
    }

    uint64_t first = 0, last = f->size ? f->size - 1 : 0, len = f->size;
    h.accept_ranges = true;
    if (want_range) {
        int rr = http_range_parse(rb + req->range.off, req->range.len, f->size,
                                  &first, &last);
        /* If-Range: the range only holds for the validator it names.
         * WORKAROUND (core has no If-Range helper yet): exact strong ETag
         * or exact Last-Modified date, as RFC 9110 13.1.5 asks. */
        if (rr != HTTP_RANGE_IGNORE && (req->seen & HTTP_SEEN_IF_RANGE)) {
            const char *ir = rb + req->if_range.off;
            size_t irl = req->if_range.len;
            bool same = (irl == strlen(f->etag) && !memcmp(ir, f->etag, irl));
            int64_t t;
            if (!same && http_date_parse(ir, irl, &t))
                same = t == f->mtime;
            if (!same)
                rr = HTTP_RANGE_IGNORE;
        }
        if (rr == HTTP_RANGE_UNSATISFIABLE) {
            h.status = r->status = 416;
            h.content_range_unsatisfied = true;
            h.range_size = f->size;
            h.content_type = NULL;
            h.content_length = 0;
            return httpd_send_head(r, &h, NULL, 0);
        }
        if (rr == HTTP_RANGE_SATISFIABLE) {
            h.status = r->status = 206;
            h.has_content_range = true;
            h.range_first = first;
            h.range_last = last;
            h.range_size = f->size;
            len = last - first + 1;
        } else {
            first = 0;
        }
    }
    h.content_length = (int64_t) len;
    if (f->body || len == 0)
        return httpd_send_head(r, &h, f->body ? f->body + first : NULL, len);

    /* large file: head with MSG_MORE, then the body by sendfile */
    int fd = httpd_open_beneath(rel, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return httpd_send_error(r, errno_status(fd));
    r->cork = !r->head;
    bool ok = httpd_send_head(r, &h, NULL, 0);
    r->cork = false;
    if (ok && !r->head) {
        ssize_t n = rt_sendfile(r->c, fd, (off_t) first, len,
                                httpd_cfg.idle_timeout_ms);
        if (n > 0)
            r->sent += (uint64_t) n;
        ok = n == (ssize_t) len;
    }
    close(fd);
    return ok;
}

bool httpd_file_serve(struct httpd_req *r,
                      const char *rel,
                      const struct http_path_info *info)
{
    struct httpd_file *f;
    size_t len = info->len;
    int err = httpd_cache_get(rel, len, &f);
    if (err < 0)
        return httpd_send_error(r, errno_status(err));
    if (!f->is_dir) {
        bool ok = info->trailing_slash && !info->is_root
                      ? httpd_send_error(r, 404) /* "file/" names no file */
                      : send_regular(r, rel, f);
        httpd_cache_put(f);
        return ok;
    }
    httpd_cache_put(f);
    if (!info->trailing_slash && !info->is_root)
        return redirect_slash(r, rel, len, info);

    /* index.html, else a listing */
    char idx[4096 + 16];
    size_t n = info->is_root ? 0 : len;
    if (n + sizeof("/index.html") > sizeof(idx))
        return httpd_send_error(r, 414);
    memcpy(idx, rel, n);
    if (n)
        idx[n++] = '/';
    memcpy(idx + n, "index.html", sizeof("index.html"));
    n += sizeof("index.html") - 1;
    err = httpd_cache_get(idx, n, &f);
    if (err == 0 && !f->is_dir) {
        bool ok = send_regular(r, idx, f);
        httpd_cache_put(f);
        return ok;
    }
    if (err == 0)
        httpd_cache_put(f);
    return httpd_listing_serve(r, rel, len);
}
