/* http_plan.c — the response planner (see http_plan.h). */
#include "http_plan.h"
#include "http_buf.h"
#include "http_encoding.h"
#include "http_listing.h"
#include "http_range.h"

enum {
    STAGE_TARGET, /* the normalised path was looked up */
    STAGE_INDEX,  /* dir/index.html was looked up */
    STAGE_GZIP,   /* waiting for the gzip copy */
    STAGE_DONE,
};

int http_errno_status(int err)
{
    switch (err) {
    case -HTTP_ENOENT:
    case -HTTP_ENOTDIR:
    case -HTTP_ENAMETOOLONG:
        return 404;
    case -HTTP_EXDEV: /* a symlink (or "..") leads out of the root */
    case -HTTP_ELOOP:
    case -HTTP_EACCES:
    case -HTTP_EPERM:
        return 403;
    default:
        return 500;
    }
}

void http_resource_init(struct http_resource *r,
                        const char *path,
                        size_t path_len,
                        bool is_dir,
                        uint64_t size,
                        int64_t mtime)
{
    memset(r, 0, sizeof(*r));
    r->is_dir = is_dir;
    r->size = size;
    r->mtime = mtime;
    r->mime = http_mime_for_path(path, path_len);
    http_etag_format(size, mtime, r->etag);
}

bool http_resource_keep_body(const struct http_resource *r,
                             uint64_t cache_bytes)
{
    return !r->is_dir && r->size > 0 && r->size <= HTTP_SERVER_SMALL_FILE_MAX &&
           r->size <= cache_bytes / 4;
}

/* The field's bytes, or NULL when the request did not carry it. */
static const char *field(const struct http_plan *p,
                         unsigned int seen,
                         struct http_slice s)
{
    return (p->req->seen & seen) ? p->buf + s.off : NULL;
}

static void head_init(struct http_plan *p, int status)
{
    const char *date = p->head.date;
    int64_t now = p->head.now_seconds;

    memset(&p->head, 0, sizeof(p->head));
    p->head.status = status;
    p->head.version = 11;
    p->head.date = date;
    p->head.now_seconds = now;
    p->head.content_length = -1;
    p->head.keep_alive = p->keep_alive;
    p->status = status;
    p->body = HTTP_PLAN_BODY_NONE;
    p->body_off = p->body_len = 0;
    p->stage = STAGE_DONE;
}

void http_plan_error(struct http_plan *p, int status)
{
    struct http_buf b;

    head_init(p, status);
    http_buf_init(&b, p->text, sizeof(p->text));
    http_buf_append_u64(&b, (uint64_t) status);
    http_buf_append_char(&b, ' ');
    http_buf_append_str(&b, http_status_reason(status));
    http_buf_append_char(&b, '\n');
    p->head.content_type = "text/plain; charset=utf-8";
    p->head.content_length = (int64_t) b.len;
    if (status == 405)
        p->head.allow = "GET, HEAD";
    p->body = HTTP_PLAN_BODY_TEXT;
    p->body_len = b.len;
    /* a close after an error reply lingers, so the reply is not lost */
    p->linger = true;
}

void http_plan_engine_body(struct http_plan *p,
                           const char *content_type,
                           uint64_t len)
{
    head_init(p, 200);
    p->head.content_type = content_type;
    p->head.content_length = (int64_t) len;
    p->body = HTTP_PLAN_BODY_ENGINE;
    p->body_len = len;
}

void http_plan_fail(struct http_plan *p, int err)
{
    http_plan_error(p, http_errno_status(err));
}

void http_plan_no_request(struct http_plan *p,
                          const struct http_plan_input *in,
                          int status)
{
    memset(p, 0, sizeof(*p));
    p->head.date = in->date;
    p->head.now_seconds = in->now;
    p->keep_alive = false;
    http_plan_error(p, status);
}

/* Disposition of the connection, decided before the answer. */
static void plan_connection(struct http_plan *p,
                            const struct http_plan_input *in)
{
    const struct http_request *req = in->req;
    uint64_t after = in->head_len;
    bool has_body = req->body_framing != HTTP_BODY_NONE &&
                    !(req->body_framing == HTTP_BODY_CONTENT_LENGTH &&
                      req->content_length == 0);

    p->keep_alive = req->keep_alive && !in->stopping;
    /* With Expect: 100-continue the client waits before sending its body;
     * we never need a body, so we answer at once and close instead of
     * reading one (if it sends the body anyway, closing is the only
     * framing-safe end). An expectation we do not know: 417 and close. */
    if ((has_body && req->expect_continue) || req->expect_unknown)
        p->keep_alive = false;
    p->drain_body = has_body && p->keep_alive;
    /* Another whole request head already buffered behind this one (and its
     * body)? Then the response may wait in the socket for the next one's;
     * otherwise it must leave now. Chunked bodies: their end is unknown,
     * assume not. */
    if (req->body_framing == HTTP_BODY_CONTENT_LENGTH)
        after += req->content_length;
    p->more = p->keep_alive && req->body_framing != HTTP_BODY_CHUNKED &&
              in->buffered > after &&
              http_head_buffered(in->buf + after, in->buffered - after);
    /* Closing with request bytes unread would send an RST that can
     * overtake the response: drop them first. */
    p->linger = has_body || in->buffered > after;
}

enum http_plan_step http_plan_start(struct http_plan *p,
                                    const struct http_plan_input *in,
                                    struct http_plan_work *w)
{
    const struct http_request *req = in->req;
    int pr;

    memset(p, 0, sizeof(*p));
    p->req = req;
    p->buf = in->buf;
    p->work = w;
    p->gzip = in->gzip;
    p->head.date = in->date;
    p->head.now_seconds = in->now;
    p->head_only = req->method == HTTP_METHOD_HEAD;
    plan_connection(p, in);
    head_init(p, 200);
    p->stage = STAGE_TARGET;

    if (req->expect_unknown) {
        http_plan_error(p, 417);
        return HTTP_PLAN_RESPOND;
    }
    if (req->method == HTTP_METHOD_OTHER) {
        http_plan_error(p, 501);
        return HTTP_PLAN_RESPOND;
    }
    if (req->method != HTTP_METHOD_GET && req->method != HTTP_METHOD_HEAD) {
        http_plan_error(p, 405);
        return HTTP_PLAN_RESPOND;
    }
    if (!w) {
        http_plan_error(p, 500); /* the engine had no memory for paths */
        return HTTP_PLAN_RESPOND;
    }
    pr = http_path_normalize(in->buf + req->path.off, req->path.len, w->path,
                             HTTP_SERVER_PATH_MAX, &p->info);
    if (pr != HTTP_PATH_OK) {
        http_plan_error(p, http_path_error_status(pr));
        return HTTP_PLAN_RESPOND;
    }
    /* ".env", ".git/config": never looked up, so neither their existence
     * nor their permissions show */
    if (!in->dotfiles && http_path_hidden(w->path, p->info.len)) {
        http_plan_error(p, 404);
        return HTTP_PLAN_RESPOND;
    }
    p->path = w->path;
    p->path_len = p->info.len;
    return HTTP_PLAN_LOOKUP;
}

/* 301 to the same path with a slash, the query kept. */
static void plan_redirect(struct http_plan *p)
{
    const struct http_request *req = p->req;
    struct http_buf b;

    http_buf_init(&b, p->work->location, sizeof(p->work->location));
    http_buf_append_char(&b, '/');
    http_url_encode(&b, p->path, p->path_len, true);
    http_buf_append_char(&b, '/');
    /* the query as sent: the parser has vetted its bytes, and the head
     * builder refuses CR/LF in values */
    if (p->info.has_query) {
        http_buf_append_char(&b, '?');
        http_buf_append(&b, p->buf + req->path.off + p->info.query_off,
                        p->info.query_len);
    }
    http_buf_append_char(&b, '\0');
    if (b.overflow) {
        http_plan_error(p, 414);
        return;
    }
    head_init(p, 301);
    p->head.location = p->work->location;
    p->head.content_type = "text/plain; charset=utf-8";
    p->head.content_length = 0;
}

static void plan_listing(struct http_plan *p)
{
    /* back from dir/index.html to dir (the root's "index.html" took the
     * place of its ".") */
    if (p->info.is_root)
        p->work->path[0] = '.';
    p->path_len = p->dir_len;
    p->work->path[p->dir_len] = '\0';
    /* HTTP/1.0 has no chunked coding: the close ends the body */
    if (p->req->version < HTTP_VERSION_1_1) {
        p->keep_alive = false;
        p->drain_body = false;
        p->more = false;
    }
    head_init(p, 200);
    p->head.content_type = "text/html; charset=utf-8";
    p->head.chunked = p->req->version >= HTTP_VERSION_1_1;
    p->body = HTTP_PLAN_BODY_LISTING;
}

/* The identity representation, whole or one range of it. */
static void plan_identity(struct http_plan *p)
{
    const struct http_request *req = p->req;
    const struct http_resource *r = &p->res;
    uint64_t first = 0, last = r->size ? r->size - 1 : 0, len = r->size;

    p->head.accept_ranges = true;
    if (p->want_range) {
        int rr = http_range_parse(p->buf + req->range.off, req->range.len,
                                  r->size, &first, &last);
        const char *ir = field(p, HTTP_SEEN_IF_RANGE, req->if_range);

        /* If-Range: the range only holds for the validator it names */
        if (rr != HTTP_RANGE_IGNORE && ir &&
            !http_if_range_holds(ir, req->if_range.len, r->etag,
                                 strlen(r->etag), r->mtime))
            rr = HTTP_RANGE_IGNORE;
        if (rr == HTTP_RANGE_UNSATISFIABLE) {
            p->status = p->head.status = 416;
            p->head.content_range_unsatisfied = true;
            p->head.range_size = r->size;
            p->head.content_type = NULL;
            p->head.content_length = 0;
            return;
        }
        if (rr == HTTP_RANGE_SATISFIABLE) {
            p->status = p->head.status = 206;
            p->head.has_content_range = true;
            p->head.range_first = first;
            p->head.range_last = last;
            p->head.range_size = r->size;
            len = last - first + 1;
        } else {
            first = 0;
        }
    }
    p->head.content_length = (int64_t) len;
    p->body_off = first;
    p->body_len = len;
    if (len)
        p->body = r->body_cached ? HTTP_PLAN_BODY_CACHED : HTTP_PLAN_BODY_FILE;
}

/* Validators, conditionals and the body, once the representation is
 * chosen (gz_len: the gzip copy's length, or -1 for identity). */
static enum http_plan_step plan_regular(struct http_plan *p, int64_t gz_len)
{
    const struct http_request *req = p->req;
    const struct http_resource *r = &p->res;
    const char *inm = field(p, HTTP_SEEN_IF_NONE_MATCH, req->if_none_match);
    const char *ims =
        field(p, HTTP_SEEN_IF_MODIFIED_SINCE, req->if_modified_since);
    size_t etag_len;

    if (gz_len >= 0) {
        etag_len = http_etag_variant(r->etag, "gz", p->etag);
    } else {
        etag_len = strlen(r->etag);
        memcpy(p->etag, r->etag, etag_len + 1);
    }
    head_init(p, 200);
    p->head.content_type = r->mime->content_type;
    p->head.has_last_modified = true;
    p->head.last_modified = r->mtime;
    p->head.etag = p->etag;
    p->head.vary_accept_encoding = p->compressible;
    if (http_conditional_status(inm, req->if_none_match.len, ims,
                                req->if_modified_since.len, p->etag, etag_len,
                                r->mtime) == 304) {
        p->status = p->head.status = 304;
        p->head.content_type = NULL;
        return HTTP_PLAN_RESPOND;
    }
    if (gz_len >= 0) {
        p->head.content_encoding = "gzip";
        p->head.content_length = gz_len;
        p->body = HTTP_PLAN_BODY_GZIP;
        p->body_len = (uint64_t) gz_len;
        return HTTP_PLAN_RESPOND;
    }
    plan_identity(p);
    return HTTP_PLAN_RESPOND;
}

/* A regular file found: gzip or identity? Range applies to identity only
 * (as nginx does), so a Range request gets identity. */
static enum http_plan_step plan_file(struct http_plan *p,
                                     const struct http_resource *res)
{
    const struct http_request *req = p->req;

    p->res = *res;
    p->want_range =
        (req->seen & HTTP_SEEN_RANGE) && !(req->repeated & HTTP_SEEN_RANGE);
    p->compressible = p->gzip && res->mime->compressible &&
                      res->size <= HTTP_SERVER_GZIP_MAX && res->size > 0;
    if (p->compressible && !p->want_range &&
        http_accept_encoding_negotiate(
            field(p, HTTP_SEEN_ACCEPT_ENCODING, req->accept_encoding),
            req->accept_encoding.len, true) == HTTP_ENCODING_GZIP) {
        p->stage = STAGE_GZIP;
        return HTTP_PLAN_GZIP;
    }
    return plan_regular(p, -1);
}

enum http_plan_step http_plan_gzip(struct http_plan *p, bool have, uint64_t len)
{
    if (p->stage != STAGE_GZIP)
        return HTTP_PLAN_RESPOND;
    return plan_regular(p, have ? (int64_t) len : -1);
}

/* dir/ (or the root): dir/index.html, else a listing. */
static enum http_plan_step plan_index(struct http_plan *p)
{
    size_t n = p->info.is_root ? 0 : p->path_len;
    char *path = p->work->path;

    p->dir_len = p->path_len;
    if (n)
        path[n++] = '/';
    memcpy(path + n, "index.html", sizeof("index.html"));
    p->path_len = n + sizeof("index.html") - 1;
    p->stage = STAGE_INDEX;
    return HTTP_PLAN_LOOKUP;
}

enum http_plan_step http_plan_resource(struct http_plan *p,
                                       int err,
                                       const struct http_resource *res)
{
    if (p->stage == STAGE_INDEX) {
        if (err == 0 && !res->is_dir)
            return plan_file(p, res);
        plan_listing(p);
        return HTTP_PLAN_RESPOND;
    }
    if (p->stage != STAGE_TARGET)
        return HTTP_PLAN_RESPOND;
    if (err < 0) {
        http_plan_fail(p, err);
        return HTTP_PLAN_RESPOND;
    }
    if (!res->is_dir) {
        if (p->info.trailing_slash && !p->info.is_root) {
            http_plan_error(p, 404); /* "file/" names no file */
            return HTTP_PLAN_RESPOND;
        }
        return plan_file(p, res);
    }
    if (!p->info.trailing_slash && !p->info.is_root) {
        plan_redirect(p);
        return HTTP_PLAN_RESPOND;
    }
    return plan_index(p);
}

int http_plan_head(const struct http_plan *p, char *buf, size_t cap)
{
    struct http_buf b;

    http_buf_init(&b, buf, cap);
    return http_response_build(&b, &p->head);
}
