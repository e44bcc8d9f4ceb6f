/* http_plan.c — the response planner (see http_plan.h).
 *
 * Over 500 lines on purpose: every decision about a response is here, as
 * steps of one state machine (the STAGE_* below) over one struct
 * http_plan, so that each decision has one place and the engines none;
 * the pieces it decides with (ranges, validators, encodings, listings,
 * heads) are their own files already. */
#include "http_plan.h"
#include "http_buf.h"
#include "http_encoding.h"
#include "http_internal.h"
#include "http_listing.h"
#include "http_range.h"

enum {
    STAGE_TARGET,      /* the normalised path was looked up */
    STAGE_INDEX,       /* dir/NAME (an index name) was looked up */
    STAGE_GZIP,        /* waiting for the gzip copy */
    STAGE_GZ_STATIC,   /* file.gz was looked up (gzip_static) */
    STAGE_GZ_FALLBACK, /* no usable file.gz: file was looked up again */
    STAGE_ERROR_PAGE,  /* an error's custom page was looked up */
    STAGE_FALLBACK,    /* the SPA fallback file was looked up */
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
    case -HTTP_EAGAIN:
        return 503;
    default:
        return 500;
    }
}

void http_resource_init(struct http_resource *r,
                        const char *path,
                        size_t path_len,
                        bool is_dir,
                        uint64_t size,
                        int64_t mtime,
                        uint32_t mtime_nsec,
                        uint64_t ino)
{
    memset(r, 0, sizeof(*r));
    r->is_dir = is_dir;
    r->size = size;
    r->mtime = mtime;
    r->mime = http_mime_for_path(path, path_len);
    r->etag_len =
        (uint8_t) http_etag_format(size, mtime, mtime_nsec, ino, r->etag);
    http_date_format(mtime, r->last_modified);
}

void http_resource_use_table(struct http_resource *r,
                             const struct http_mime_table *t,
                             const char *path,
                             size_t path_len)
{
    r->mime_table = t;
    r->table_mime = t ? http_mime_table_for_path(t, path, path_len) : NULL;
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

/* A zeroed head (but for its Date) made a plain one of status. */
static void head_fill(struct http_plan *p, int status)
{
    p->head.status = status;
    p->head.version = 11;
    p->head.content_length = -1;
    /* the types the planner names are literals or a MIME table's (whose
     * parser splits at CR and LF); an engine's is scanned */
    p->head.content_type_safe = true;
    p->head.keep_alive = p->keep_alive;
    p->head.add = p->add;
    p->head.add_mask = p->add_mask;
    p->memo_kind = HTTP_HEAD_MEMO_NONE;
    p->status = status;
    p->body = HTTP_PLAN_BODY_NONE;
    p->body_off = p->body_len = 0;
    p->stage = STAGE_DONE;
}

/* A fresh head of status. Until a first head_init the head is as
 * http_plan_start left it (zeroed, its Date and head_fill's fields), so
 * only a head written since needs zeroing again. */
static void head_init(struct http_plan *p, int status)
{
    if (p->head_written) {
        const char *date = p->head.date;
        uint8_t date_len = p->head.date_len;
        int64_t now = p->head.now_seconds;

        memset(&p->head, 0, sizeof(p->head));
        p->head.date = date;
        p->head.date_len = date_len;
        p->head.now_seconds = now;
    }
    p->head_written = true;
    head_fill(p, status);
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
    if (status == 503)
        p->head.retry_after = HTTP_RETRY_AFTER_S;
    p->body = HTTP_PLAN_BODY_TEXT;
    p->body_len = b.len;
    /* a close after an error reply lingers, so the reply is not lost */
    p->linger = true;
}

void http_plan_busy(struct http_plan *p, uint32_t retry_after)
{
    http_plan_error(p, 503);
    p->head.retry_after = retry_after ? retry_after : 1;
}

void http_plan_engine_body(struct http_plan *p,
                           const char *content_type,
                           uint64_t len)
{
    head_init(p, 200);
    p->head.content_type = content_type;
    p->head.content_type_safe = false; /* the engine's: scanned */
    p->head.content_length = (int64_t) len;
    p->body = HTTP_PLAN_BODY_ENGINE;
    p->body_len = len;
}

void http_plan_fail(struct http_plan *p, int err)
{
    if (p->error_page) {
        /* the page could not be opened: the original status's text */
        p->error_page = false;
        http_plan_error(p, p->status);
        return;
    }
    http_plan_error(p, http_errno_status(err));
}

void http_plan_head_failed(struct http_plan *p)
{
    p->error_page = false;
    p->keep_alive = false;
    p->drain_body = false;
    p->more = true; /* closing */
    http_plan_error(p, 500);
}

/* The custom page configured for status, or NULL. */
static const struct http_error_page *error_page_for(const struct http_plan *p,
                                                    int status)
{
    size_t i;

    for (i = 0; i < p->site->error_pages_n; i++)
        if (p->site->error_pages[i].status == status)
            return &p->site->error_pages[i];
    return NULL;
}

/* An error while planning: its custom page is looked up (once per
 * request, so an error about the page itself never loops), else the
 * built-in text is the answer. */
static enum http_plan_step plan_error(struct http_plan *p, int status)
{
    const struct http_error_page *pg = error_page_for(p, status);

    http_plan_error(p, status);
    if (!pg || p->page_tried || !p->work)
        return HTTP_PLAN_RESPOND;
    p->page_tried = true;
    p->error_page = true;
    memcpy(p->work->path, pg->path, pg->path_len + 1);
    p->path = p->work->path;
    p->path_len = pg->path_len;
    p->stage = STAGE_ERROR_PAGE;
    return HTTP_PLAN_LOOKUP;
}

enum http_plan_step http_plan_limited(struct http_plan *p, uint32_t retry_after)
{
    enum http_plan_step step = plan_error(p, 429);

    p->head.retry_after = retry_after ? retry_after : 1;
    return step;
}

/* The page was found: its bytes with the original status; no
 * validators, ranges or conditionals apply to an error (as nginx). */
static void plan_error_page(struct http_plan *p,
                            const struct http_resource *res)
{
    int status = p->status;
    uint32_t retry_after = p->head.retry_after; /* a 429's, a 503's */
    const struct http_mime_type *m =
        http_mime_table_for_path(p->site->mime, p->path, p->path_len);

    head_init(p, status);
    p->head.retry_after = retry_after;
    p->res = *res;
    p->head.content_type = m->content_type;
    p->head.content_length = (int64_t) res->size;
    p->body_len = res->size;
    if (res->size)
        p->body =
            res->body_cached ? HTTP_PLAN_BODY_CACHED : HTTP_PLAN_BODY_FILE;
    if (status == 405)
        p->head.allow = "GET, HEAD";
    p->linger = true; /* as for the text: a closing error lingers */
}

/* A request without site settings: everything off. */
static const struct http_site_settings no_site;

void http_plan_no_request(struct http_plan *p,
                          const struct http_plan_input *in,
                          int status)
{
    memset(p, 0, sizeof(*p));
    p->head.date = in->date;
    p->head.date_len = in->date ? HTTP_DATE_LEN : 0;
    p->head.now_seconds = in->now;
    /* no path: the fields of every response */
    p->site = in->site ? in->site : &no_site;
    p->add = p->site->headers;
    p->add_mask = p->add ? p->add->every : 0;
    p->keep_alive = false;
    p->more = true; /* the close follows: the FIN pushes the end */
    http_plan_error(p, status);
}

enum http_plan_step http_plan_no_request_page(struct http_plan *p,
                                              const struct http_plan_input *in,
                                              struct http_plan_work *w,
                                              int status)
{
    http_plan_no_request(p, in, status);
    p->work = w;
    return plan_error(p, status);
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
    /* The end of the response may wait in the socket when something is
     * sure to push it: the connection's close (the engine shuts the write
     * side at once, and the kernel puts the FIN on the waiting segment),
     * or the next response, when another whole request head is buffered
     * behind this one (and its body). Otherwise it must leave now.
     * Chunked bodies: their end is unknown, assume no next head. */
    if (req->body_framing == HTTP_BODY_CONTENT_LENGTH)
        after += req->content_length;
    p->more = !p->keep_alive ||
              (req->body_framing != HTTP_BODY_CHUNKED && in->buffered > after &&
               http_head_buffered(in->buf + after, in->buffered - after));
    /* Closing with request bytes unread would send an RST that can
     * overtake the response: drop them first. */
    p->linger = has_body || in->buffered > after;
}

/* Is s[0..len) a list of field names ("content-type, x-token"), short
 * enough to echo? */
static bool field_names(const char *s, size_t len)
{
    size_t i;

    if (!len || len > HTTP_CORS_ALLOW_HEADERS_MAX)
        return false;
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char) s[i];

        if (!http_is_tchar(c) && c != ',' && c != ' ' && c != '\t')
            return false;
    }
    return true;
}

/* A CORS preflight: 204 with the methods the server takes, the fields the
 * browser asked to send (any: the server reads none of them) and how
 * long the answer holds; Access-Control-Allow-Origin comes with the
 * table's line. */
static enum http_plan_step plan_preflight(struct http_plan *p)
{
    const struct http_request *req = p->req;

    head_init(p, 204);
    p->head.cors_preflight = true;
    if ((req->seen & HTTP_SEEN_ACR_HEADERS) &&
        field_names(p->buf + req->acr_headers.off, req->acr_headers.len)) {
        p->head.cors_allow_headers = p->buf + req->acr_headers.off;
        p->head.cors_allow_headers_len = (uint16_t) req->acr_headers.len;
    }
    return HTTP_PLAN_RESPOND;
}

enum http_plan_step http_plan_start(struct http_plan *p,
                                    const struct http_plan_input *in,
                                    struct http_plan_work *w)
{
    const struct http_request *req = in->req;
    int pr;

    memset(p, 0, offsetof(struct http_plan, req));
    p->req = req;
    p->buf = in->buf;
    p->work = w;
    p->site = in->site ? in->site : &no_site;
    p->random = in->random;
    p->add = p->site->headers && (p->site->headers->n || p->site->headers->cors)
                 ? p->site->headers
                 : NULL;
    p->add_mask = p->add ? p->add->every : 0;
    p->head.date = in->date;
    p->head.date_len = in->date ? HTTP_DATE_LEN : 0;
    p->head.now_seconds = in->now;
    p->head_only = req->method == HTTP_METHOD_HEAD;
    plan_connection(p, in);
    head_fill(p, 200); /* the head is zeroed with the plan */
    p->stage = STAGE_TARGET;

    pr = w ? http_path_normalize(in->buf + req->path.off, req->path.len,
                                 w->path, HTTP_SERVER_PATH_MAX, &p->info)
           : HTTP_PATH_ERR_TOO_LONG;
    /* the fields of the path's prefixes, whatever the answer */
    if (p->add && pr == HTTP_PATH_OK) {
        p->add_mask =
            http_headers_match(p->add, w->path, p->info.len, p->info.is_root,
                               p->info.trailing_slash);
        p->head.add_mask = p->add_mask;
    }
    if (req->expect_unknown)
        return plan_error(p, 417);
    if (req->method == HTTP_METHOD_OPTIONS && p->add && p->add->cors &&
        (req->seen & HTTP_SEEN_ORIGIN) && (req->seen & HTTP_SEEN_ACR_METHOD))
        return plan_preflight(p);
    if (req->method == HTTP_METHOD_OTHER)
        return plan_error(p, 501);
    if (req->method != HTTP_METHOD_GET && req->method != HTTP_METHOD_HEAD)
        return plan_error(p, 405);
    if (!w) {
        http_plan_error(p, 500); /* the engine had no memory for paths */
        return HTTP_PLAN_RESPOND;
    }
    if (pr != HTTP_PATH_OK)
        return plan_error(p, http_path_error_status(pr));
    /* ".env", ".git/config": never looked up, so neither their existence
     * nor their permissions show */
    if (!p->site->dotfiles && !p->info.plain &&
        http_path_hidden(w->path, p->info.len))
        return plan_error(p, 404);
    p->path = w->path;
    p->path_len = p->info.len;
    return HTTP_PLAN_LOOKUP;
}

/* 301 to the same path with a slash, the query kept; 414 when that
 * Location would not fit HTTP_PLAN_LOCATION_MAX. */
static enum http_plan_step plan_redirect(struct http_plan *p)
{
    const struct http_request *req = p->req;
    struct http_buf b;

    http_buf_init(&b, p->work->location, sizeof(p->work->location));
    http_buf_append_char(&b, '/');
    /* all or nothing: on overflow it keeps nothing and clears the flag */
    if (http_url_encode(&b, p->path, p->path_len, true) < 0)
        return plan_error(p, 414);
    http_buf_append_char(&b, '/');
    /* the query as sent: the parser has vetted its bytes, and the head
     * builder refuses CR/LF in values */
    if (p->info.has_query) {
        http_buf_append_char(&b, '?');
        http_buf_append(&b, p->buf + req->path.off + p->info.query_off,
                        p->info.query_len);
    }
    http_buf_append_char(&b, '\0');
    if (b.overflow)
        return plan_error(p, 414);
    head_init(p, 301);
    p->head.location = p->work->location;
    p->head.content_type = "text/plain; charset=utf-8";
    p->head.content_length = 0;
    return HTTP_PLAN_RESPOND;
}

static void plan_listing(struct http_plan *p)
{
    /* back from dir/NAME to dir (the root's index name took the place of
     * its ".") */
    if (p->info.is_root)
        p->work->path[0] = '.';
    p->path_len = p->dir_len;
    p->work->path[p->dir_len] = '\0';
    /* HTTP/1.0 has no chunked coding: the close ends the body */
    if (p->req->version < HTTP_VERSION_1_1) {
        p->keep_alive = false;
        p->drain_body = false;
        p->more = true; /* the close ends the body and pushes it */
    }
    head_init(p, 200);
    p->head.content_type = "text/html; charset=utf-8";
    p->head.chunked = p->req->version >= HTTP_VERSION_1_1;
    p->body = HTTP_PLAN_BODY_LISTING;
}

/* A part's delimiter and head (i < n), or the closing delimiter. */
#define PART_DASH "\r\n--"
#define PART_TYPE "\r\nContent-Type: "
#define PART_RANGE "\r\nContent-Range: bytes "
#define PART_END "\r\n\r\n"
#define PARTS_CLOSE "--\r\n"
#define LIT_LEN(s) (sizeof(s) - 1)

static size_t digits(uint64_t v)
{
    char tmp[20];

    return http_format_u64(v, tmp);
}

/* What http_plan_part writes for part i, without writing it. */
static uint64_t part_len(const struct http_plan *p, unsigned int i)
{
    uint64_t n = LIT_LEN(PART_DASH) + HTTP_PLAN_BOUNDARY_LEN;

    if (i == p->ranges.n)
        return n + LIT_LEN(PARTS_CLOSE);
    return n + LIT_LEN(PART_TYPE) + strlen(p->part_type) + LIT_LEN(PART_RANGE) +
           digits(p->ranges.first[i]) + 1 + digits(p->ranges.last[i]) + 1 +
           digits(p->res.size) + LIT_LEN(PART_END);
}

int http_plan_part(const struct http_plan *p,
                   unsigned int i,
                   char *buf,
                   size_t cap,
                   uint64_t *off,
                   uint64_t *len)
{
    /* the boundary is the tail of the multipart type */
    const char *boundary =
        p->multipart_type + LIT_LEN("multipart/byteranges; boundary=");
    struct http_buf b;

    *off = *len = 0;
    if (p->body != HTTP_PLAN_BODY_PARTS || i > p->ranges.n)
        return -1;
    http_buf_init(&b, buf, cap);
    http_buf_append(&b, PART_DASH, LIT_LEN(PART_DASH));
    http_buf_append(&b, boundary, HTTP_PLAN_BOUNDARY_LEN);
    if (i == p->ranges.n) {
        http_buf_append(&b, PARTS_CLOSE, LIT_LEN(PARTS_CLOSE));
        return b.overflow ? -1 : (int) b.len;
    }
    http_buf_append(&b, PART_TYPE, LIT_LEN(PART_TYPE));
    http_buf_append_str(&b, p->part_type);
    http_buf_append(&b, PART_RANGE, LIT_LEN(PART_RANGE));
    http_buf_append_u64(&b, p->ranges.first[i]);
    http_buf_append_char(&b, '-');
    http_buf_append_u64(&b, p->ranges.last[i]);
    http_buf_append_char(&b, '/');
    http_buf_append_u64(&b, p->res.size);
    http_buf_append(&b, PART_END, LIT_LEN(PART_END));
    if (b.overflow)
        return -1;
    *off = p->ranges.first[i];
    *len = p->ranges.last[i] - p->ranges.first[i] + 1;
    return (int) b.len;
}

/* Several ranges: 206 multipart/byteranges, each part of the file's type,
 * the boundary random (from the engine's bits). */
static void plan_parts(struct http_plan *p)
{
    static const char hex[] = "0123456789abcdef";
    const struct http_resource *r = &p->res;
    char *t = p->multipart_type;
    uint64_t rnd = p->random, len = 0;
    size_t k = LIT_LEN("multipart/byteranges; boundary=");
    unsigned int i;

    memcpy(t, "multipart/byteranges; boundary=", k);
    for (i = 0; i < HTTP_PLAN_BOUNDARY_LEN; i++, rnd >>= 4)
        t[k + i] = hex[rnd & 15];
    t[k + HTTP_PLAN_BOUNDARY_LEN] = '\0';
    p->part_type = p->head.content_type;
    p->body = HTTP_PLAN_BODY_PARTS;
    for (i = 0; i <= p->ranges.n; i++)
        len += part_len(p, i);
    for (i = 0; i < p->ranges.n; i++)
        len += p->ranges.last[i] - p->ranges.first[i] + 1;
    p->status = p->head.status = 206;
    p->head.content_type = t;
    p->head.content_length = (int64_t) len;
    p->body_off = 0;
    p->body_len = len;
    p->parts_cached = r->body_cached;
}

/* The identity representation, whole, one range of it or several. */
static void plan_identity(struct http_plan *p)
{
    const struct http_request *req = p->req;
    const struct http_resource *r = &p->res;
    uint64_t first = 0, last = r->size ? r->size - 1 : 0, len = r->size;

    p->head.accept_ranges = true;
    if (p->want_range) {
        int rr = http_ranges_parse(p->buf + req->range.off, req->range.len,
                                   r->size, &p->ranges);
        const char *ir = field(p, HTTP_SEEN_IF_RANGE, req->if_range);

        /* If-Range: the range only holds for the validator it names */
        if (rr != HTTP_RANGE_IGNORE && ir &&
            !http_if_range_holds(ir, req->if_range.len, r->etag, r->etag_len,
                                 r->mtime))
            rr = HTTP_RANGE_IGNORE;
        if (rr == HTTP_RANGE_UNSATISFIABLE) {
            p->status = p->head.status = 416;
            p->head.content_range_unsatisfied = true;
            p->head.range_size = r->size;
            p->head.content_type = NULL;
            p->head.content_length = 0;
            p->head.has_max_age = false; /* not on a 416 (as nginx) */
            return;
        }
        if (rr == HTTP_RANGE_SATISFIABLE && p->ranges.n > 1) {
            plan_parts(p);
            return;
        }
        if (rr == HTTP_RANGE_SATISFIABLE) {
            first = p->ranges.first[0];
            last = p->ranges.last[0];
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

/* Cache-Control: max-age and Expires on a file's 200, 206 and 304. */
static void plan_expires(struct http_plan *p)
{
    uint32_t s = p->site->expires;

    if (!s)
        return;
    if (s > HTTP_SERVER_EXPIRES_MAX)
        s = HTTP_SERVER_EXPIRES_MAX;
    p->head.has_max_age = true;
    p->head.max_age = s;
    p->head.expires = p->head.now_seconds + (int64_t) s;
}

/* A file's head of a kind an engine may keep (http_head_memo_kind): not
 * when its Expires moves with the clock or it has no Date of the format
 * kept heads patch. */
static enum http_plan_step plan_memo(struct http_plan *p, int kind)
{
    /* a head with the operator's fields is built every time: they may be
     * longer than a kept head, and a reload replaces them */
    if (!p->head.has_max_age && p->head.date &&
        p->head.date_len == HTTP_DATE_LEN && !p->add)
        p->memo_kind = (int8_t) kind;
    return HTTP_PLAN_RESPOND;
}

/* Validators, conditionals and the body, once the representation is
 * chosen (gz_len: the gzip copy's length, or -1 for identity; with
 * gz_static, p->res is the file.gz beside the file and its bytes are the
 * body, validators and ranges included, as nginx's gzip_static). */
static enum http_plan_step plan_regular(struct http_plan *p,
                                        int64_t gz_len,
                                        bool gz_static)
{
    const struct http_request *req = p->req;
    const struct http_resource *r = &p->res;
    const char *inm = field(p, HTTP_SEEN_IF_NONE_MATCH, req->if_none_match);
    const char *ims =
        field(p, HTTP_SEEN_IF_MODIFIED_SINCE, req->if_modified_since);
    const char *content_type = r->mime->content_type;
    const char *etag = r->etag; /* p->res: the plan's own copy */
    size_t etag_len = r->etag_len;

    if (gz_len >= 0) {
        etag_len = http_etag_variant(r->etag, "gz", p->etag);
        etag = p->etag;
    }
    head_init(p, 200);
    p->head.content_type = content_type;
    p->head.has_last_modified = true;
    p->head.last_modified = r->mtime;
    p->head.last_modified_text = r->last_modified;
    p->head.etag = etag;
    p->head.etag_len = (uint8_t) etag_len;
    p->head.vary_accept_encoding = p->compressible || p->site->gzip_static;
    plan_expires(p);
    if (http_conditional_status(inm, req->if_none_match.len, ims,
                                req->if_modified_since.len, etag, etag_len,
                                r->mtime) == 304) {
        p->status = p->head.status = 304;
        p->head.content_type = NULL;
        return plan_memo(p, HTTP_HEAD_MEMO_304);
    }
    if (gz_len >= 0) {
        p->head.content_encoding = "gzip";
        p->head.content_length = gz_len;
        p->body = HTTP_PLAN_BODY_GZIP;
        p->body_len = (uint64_t) gz_len;
        return plan_memo(p, HTTP_HEAD_MEMO_GZIP);
    }
    plan_identity(p);
    if (gz_static && p->status != 416)
        p->head.content_encoding = "gzip";
    if (p->status == 200 && p->body != HTTP_PLAN_BODY_NONE && !gz_static)
        return plan_memo(p, HTTP_HEAD_MEMO_200);
    return HTTP_PLAN_RESPOND;
}

static bool accepts_gzip(const struct http_plan *p)
{
    const struct http_request *req = p->req;

    return http_accept_encoding_negotiate(
               field(p, HTTP_SEEN_ACCEPT_ENCODING, req->accept_encoding),
               req->accept_encoding.len, true) == HTTP_ENCODING_GZIP;
}

/* A regular file found: a static .gz beside it, a gzip copy, or identity?
 * A gzip copy is never ranged (as nginx), so a Range request gets
 * identity; a static .gz is a file and takes ranges. may_static: look
 * for file.gz (not when it was just found missing). */
static enum http_plan_step plan_file(struct http_plan *p,
                                     const struct http_resource *res,
                                     bool may_static)
{
    const struct http_request *req = p->req;

    p->res = *res;
    /* the operator's table (mime.types) first, core's as the fallback */
    if (p->site->mime)
        p->res.mime =
            res->mime_table == p->site->mime
                ? res->table_mime
                : http_mime_table_for_path(p->site->mime, p->path, p->path_len);
    p->want_range =
        (req->seen & HTTP_SEEN_RANGE) && !(req->repeated & HTTP_SEEN_RANGE);
    if (may_static && p->site->gzip_static && accepts_gzip(p)) {
        /* gzip_static: file.gz, if there is one beside the file (the
         * scratch has room for ".gz" after any path) */
        memcpy(p->work->path + p->path_len, ".gz", sizeof(".gz"));
        p->path = p->work->path;
        p->path_len += sizeof(".gz") - 1;
        p->stage = STAGE_GZ_STATIC;
        return HTTP_PLAN_LOOKUP;
    }
    p->compressible = p->site->gzip && p->res.mime->compressible &&
                      res->size <= HTTP_SERVER_GZIP_MAX && res->size > 0;
    if (p->compressible && !p->want_range && accepts_gzip(p)) {
        p->stage = STAGE_GZIP;
        return HTTP_PLAN_GZIP;
    }
    return plan_regular(p, -1, false);
}

/* The file.gz lookup: usable when it is a regular file not older than
 * the file; its size, mtime and ETag are the response's, the type stays
 * the file's. Else the file itself is looked up again (the engine keeps
 * one entry: the last one looked up). */
static enum http_plan_step plan_gz_static(struct http_plan *p,
                                          int err,
                                          const struct http_resource *gz)
{
    if (err == 0 && !gz->is_dir && gz->mtime >= p->res.mtime) {
        const struct http_mime_type *mime = p->res.mime;

        p->res = *gz;
        p->res.mime = mime;
        return plan_regular(p, -1, true);
    }
    p->path_len -= sizeof(".gz") - 1;
    p->work->path[p->path_len] = '\0';
    p->stage = STAGE_GZ_FALLBACK;
    return HTTP_PLAN_LOOKUP;
}

enum http_plan_step http_plan_gzip(struct http_plan *p, bool have, uint64_t len)
{
    if (p->stage != STAGE_GZIP)
        return HTTP_PLAN_RESPOND;
    return plan_regular(p, have ? (int64_t) len : -1, false);
}

static const struct http_index_files default_index = {
    .n = 1,
    .name = {"index.html"},
    .len = {sizeof("index.html") - 1},
};

/* The next index name of the directory at path[0..dir_len). */
static enum http_plan_step plan_index_next(struct http_plan *p)
{
    const struct http_index_files *ix =
        p->site->index ? p->site->index : &default_index;
    size_t n = p->info.is_root ? 0 : p->dir_len, k = p->index_next++;
    char *path = p->work->path;

    if (n)
        path[n++] = '/';
    memcpy(path + n, ix->name[k], ix->len[k]);
    path[n + ix->len[k]] = '\0';
    p->path_len = n + ix->len[k];
    p->stage = STAGE_INDEX;
    return HTTP_PLAN_LOOKUP;
}

/* dir/ (or the root): its index files in order, else a listing. */
static enum http_plan_step plan_index(struct http_plan *p)
{
    p->dir_len = p->path_len;
    p->index_next = 0;
    return plan_index_next(p);
}

/* Another index name to look up after a miss? */
static bool index_left(const struct http_plan *p)
{
    return p->index_next < (p->site->index ? p->site->index->n : 1);
}

/* Is the request's path /.well-known or beneath it (RFC 8615)? */
static bool well_known(const struct http_plan *p)
{
    static const char wk[] = ".well-known";
    size_t n = sizeof(wk) - 1;

    return p->path_len >= n && memcmp(p->path, wk, n) == 0 &&
           (p->path_len == n || p->path[n] == '/');
}

/* A missing path of a single-page application: its fallback file. */
static enum http_plan_step plan_fallback(struct http_plan *p)
{
    memcpy(p->work->path, p->site->fallback, p->site->fallback_len);
    p->work->path[p->site->fallback_len] = '\0';
    p->path = p->work->path;
    p->path_len = p->site->fallback_len;
    p->stage = STAGE_FALLBACK;
    return HTTP_PLAN_LOOKUP;
}

enum http_plan_step http_plan_resource(struct http_plan *p,
                                       int err,
                                       const struct http_resource *res)
{
    switch (p->stage) {
    case STAGE_INDEX:
        if (err == 0 && !res->is_dir)
            return plan_file(p, res, true);
        if (index_left(p))
            return plan_index_next(p);
        if (p->site->no_listings)
            return plan_error(p, 403);
        plan_listing(p);
        return HTTP_PLAN_RESPOND;
    case STAGE_GZ_STATIC:
        return plan_gz_static(p, err, res);
    case STAGE_GZ_FALLBACK:
        if (err < 0)
            return plan_error(p, http_errno_status(err));
        if (res->is_dir) /* replaced by a directory in between */
            return plan_error(p, 404);
        return plan_file(p, res, false);
    case STAGE_ERROR_PAGE:
        /* a page that is missing or not a file: the built-in text */
        p->stage = STAGE_DONE;
        if (err < 0 || res->is_dir) {
            p->error_page = false;
            http_plan_error(p, p->status);
            return HTTP_PLAN_RESPOND;
        }
        plan_error_page(p, res);
        return HTTP_PLAN_RESPOND;
    case STAGE_FALLBACK:
        if (err < 0 || res->is_dir)
            return plan_error(p, 404); /* the request's path is missing */
        return plan_file(p, res, true);
    case STAGE_TARGET:
        break;
    default:
        return HTTP_PLAN_RESPOND;
    }
    if (err < 0 && http_errno_status(err) == 404 && p->site->fallback &&
        !http_path_hidden(p->path, p->path_len) && !well_known(p))
        return plan_fallback(p);
    if (err < 0)
        return plan_error(p, http_errno_status(err));
    if (!res->is_dir) {
        if (p->info.trailing_slash && !p->info.is_root)
            return plan_error(p, 404); /* "file/" names no file */
        return plan_file(p, res, true);
    }
    if (!p->info.trailing_slash && !p->info.is_root)
        return plan_redirect(p);
    return plan_index(p);
}

int http_plan_head(const struct http_plan *p, char *buf, size_t cap)
{
    struct http_buf b;

    http_buf_init(&b, buf, cap);
    return http_response_build(&b, &p->head);
}

bool http_head_memo_make(const struct http_plan *p, struct http_head_memo *m)
{
    char buf[HTTP_HEAD_MEMO_MAX];
    int kind = http_head_memo_kind(p);
    const char *date;
    int n;

    if (kind == HTTP_HEAD_MEMO_NONE)
        return false;
    n = http_plan_head(p, buf, sizeof(buf));
    if (n <= 0)
        return false;
    /* the Date value follows the status line (http_response_build) */
    date = memchr(buf, '\n', (size_t) n);
    if (!date || (size_t) (buf + n - date) < 7 + HTTP_DATE_LEN ||
        memcmp(date + 1, "Date: ", 6) != 0 ||
        memcmp(date + 7, p->head.date, HTTP_DATE_LEN) != 0)
        return false;
    memcpy(m->head, buf, (size_t) n);
    m->len = (uint16_t) n;
    m->date_off = (uint16_t) (date + 7 - buf);
    m->content_type = p->head.content_type;
    m->content_length = p->head.content_length;
    m->keep_alive = p->head.keep_alive;
    m->vary = p->head.vary_accept_encoding;
    m->kind = (int8_t) kind;
    return true;
}

int http_plan_head_memo(const struct http_plan *p,
                        int kind,
                        const struct http_head_memo *m,
                        char *buf,
                        size_t cap)
{
    if (!m->len || m->len > cap || m->keep_alive != p->head.keep_alive ||
        m->vary != p->head.vary_accept_encoding ||
        m->content_type != p->head.content_type ||
        m->content_length != p->head.content_length ||
        kind == HTTP_HEAD_MEMO_NONE || m->kind != kind)
        return 0;
    memcpy(buf, m->head, m->len);
    memcpy(buf + m->date_off, p->head.date, HTTP_DATE_LEN);
    return m->len;
}

static bool spec_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The next comma-separated entry of spec from *pos: [*a, *b) with the
 * blanks around it trimmed (empty when a == b); *pos moves past its comma. */
static void spec_next(const char *spec,
                      size_t len,
                      size_t *pos,
                      size_t *a,
                      size_t *b)
{
    size_t p = *pos, s = p, e;

    while (p < len && spec[p] != ',')
        p++;
    e = p;
    if (p < len)
        p++;
    while (s < e && spec_blank(spec[s]))
        s++;
    while (e > s && spec_blank(spec[e - 1]))
        e--;
    *pos = p;
    *a = s;
    *b = e;
}

/* One "CODE=/path" into pages. */
static int error_page_one(const char *s,
                          size_t len,
                          struct http_error_page *pages,
                          size_t max,
                          size_t *n,
                          const char **why)
{
    struct http_error_page *pg = NULL;
    struct http_path_info info;
    int status = 0;
    size_t i = 0, k;

    while (i < len && http_is_digit((unsigned char) s[i]) && i < 3)
        status = status * 10 + (s[i++] - '0');
    if (i != 3 || i >= len || s[i] != '=' || status < 400 || status > 599) {
        *why = "expected CODE=/path with CODE in 400..599";
        return -1;
    }
    i++;
    for (k = 0; k < *n; k++)
        if (pages[k].status == status)
            pg = &pages[k]; /* given again: the later page wins */
    if (!pg) {
        if (*n >= max) {
            *why = "too many error pages";
            return -1;
        }
        pg = &pages[*n];
    }
    if (http_path_normalize(s + i, len - i, pg->path, sizeof(pg->path),
                            &info) != HTTP_PATH_OK ||
        info.is_root || info.trailing_slash || info.has_query) {
        *why = "expected a file's path beneath the root, starting with '/'";
        return -1;
    }
    pg->path_len = info.len;
    pg->status = status;
    if (pg == &pages[*n])
        (*n)++;
    return 0;
}

int http_error_pages_parse(const char *spec,
                           size_t len,
                           struct http_error_page *pages,
                           size_t max,
                           size_t *n,
                           const char **why)
{
    size_t pos = 0;

    while (pos < len) {
        size_t a, b;

        spec_next(spec, len, &pos, &a, &b);
        if (a == b) {
            *why = "empty entry";
            return -1;
        }
        if (error_page_one(spec + a, b - a, pages, max, n, why) < 0)
            return -1;
    }
    return 0;
}

/* One index name, s[0..len), into ix. */
static int index_one(const char *s,
                     size_t len,
                     struct http_index_files *ix,
                     const char **why)
{
    size_t i;

    if (ix->n >= HTTP_INDEX_FILES_MAX) {
        *why = "too many index files (at most 8)";
        return -1;
    }
    if (len >= HTTP_INDEX_NAME_MAX) {
        *why = "an index file name is at most 63 bytes";
        return -1;
    }
    if (s[0] == '.') {
        *why = "an index file name may not start with '.'";
        return -1;
    }
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char) s[i];

        if (c == '/' || c < 0x20 || c == 0x7f) {
            *why =
                "an index file name is one path segment, without '/' "
                "or control bytes";
            return -1;
        }
    }
    memcpy(ix->name[ix->n], s, len);
    ix->name[ix->n][len] = '\0';
    ix->len[ix->n] = (uint8_t) len;
    ix->n++;
    return 0;
}

int http_index_files_parse(const char *spec,
                           size_t len,
                           struct http_index_files *ix,
                           const char **why)
{
    size_t pos = 0;

    memset(ix, 0, sizeof(*ix));
    while (pos < len) {
        size_t a, b;

        spec_next(spec, len, &pos, &a, &b);
        if (a == b) {
            *why = "empty index file name";
            return -1;
        }
        if (index_one(spec + a, b - a, ix, why) < 0)
            return -1;
    }
    if (!ix->n) {
        *why = "expected at least one index file name";
        return -1;
    }
    return 0;
}

int http_fallback_parse(const char *spec,
                        size_t len,
                        char *path,
                        size_t *path_len,
                        const char **why)
{
    struct http_path_info info;

    if (len == 0 || spec[0] != '/' ||
        http_path_normalize(spec, len, path, HTTP_ERROR_PAGE_PATH_MAX, &info) !=
            HTTP_PATH_OK ||
        info.is_root || info.trailing_slash || info.has_query) {
        *why = "expected a file's path beneath the root, starting with '/'";
        return -1;
    }
    if (http_path_hidden(path, info.len)) {
        *why = "a hidden path (a segment starting with '.') is never served";
        return -1;
    }
    *path_len = info.len;
    return 0;
}
