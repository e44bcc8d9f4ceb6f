/* http_plan.h — the response planner: every decision a static-file server
 * makes about one request, taken once for both engines.
 *
 * An engine parses a head, then asks the planner what to do. The planner
 * answers in steps: look this path up (the engine fetches metadata from its
 * cache and reports it, or the lookup's errno), fetch the gzip copy (the
 * engine makes or finds it), and finally respond — a complete plan: status,
 * the head fields (core builds the head), the body's source and byte range,
 * and what becomes of the connection. The engine only moves bytes: it opens
 * what the plan names, sends the head and the body, and keeps, drains,
 * lingers on or closes the connection as planned.
 *
 *     step = http_plan_start(&plan, &in, &work);
 *     while (step == HTTP_PLAN_LOOKUP)
 *         step = http_plan_resource(&plan, err_or_0, &meta);
 *     if (step == HTTP_PLAN_GZIP)
 *         step = http_plan_gzip(&plan, have_copy, copy_len);
 *     ... open plan.path if the body needs it (http_plan_fail on error) ...
 *     len = http_plan_head(&plan, buf, cap);
 *
 * No allocation, no I/O: all state is in struct http_plan and the caller's
 * struct http_plan_work. */
#ifndef KTCP_CORE_HTTP_PLAN_H
#define KTCP_CORE_HTTP_PLAN_H

#include "compat.h"
#include "http_conditional.h"
#include "http_date.h"
#include "http_headers.h"
#include "http_limits.h"
#include "http_mime.h"
#include "http_parser.h"
#include "http_path.h"
#include "http_range.h"
#include "http_response.h"

/* ---- lookups and their errors ---- */

/* The errno values a lookup reports (negated), as Linux numbers them: the
 * same in the kernel and in user space (asm-generic/errno-base.h, errno.h).
 * core/ has no errno.h; the engines check these against their own. */
#define HTTP_EPERM 1
#define HTTP_ENOENT 2
#define HTTP_EAGAIN 11 /* EWOULDBLOCK: a non-blocking open met a lease */
#define HTTP_ENOMEM 12
#define HTTP_EACCES 13
#define HTTP_EBUSY 16 /* a budget is spent (a listing's bytes) */
#define HTTP_EXDEV 18
#define HTTP_ENOTDIR 20
#define HTTP_ENOSPC 28 /* a listing holds no more names */
#define HTTP_ENAMETOOLONG 36
#define HTTP_ELOOP 40

/* What the planner needs to know about a file or directory. Engines keep
 * one in each cache entry, filled by http_cache_entry_made from the file's
 * status (mtime in seconds and its nanoseconds, inode: the ETag's parts). */
struct http_resource {
    bool is_dir;
    bool body_cached; /* the whole body is in memory (set by the engine) */
    uint64_t size;
    int64_t mtime;
    const struct http_mime_type *mime;
    char etag[HTTP_ETAG_MAX + 1];
    uint8_t etag_len;
    char last_modified[HTTP_DATE_LEN + 1]; /* mtime as an HTTP-date */
    /* the type an operator's table (mime.types) gives this path, looked up
     * once by http_resource_use_table, and that table */
    const struct http_mime_table *mime_table;
    const struct http_mime_type *table_mime;
};


/* ---- custom error pages ---- */

/* A status answered with a file beneath the root instead of the built-in
 * text: the file's bytes, its Content-Type, the original status. */
struct http_error_page {
    int status;
    char path[HTTP_ERROR_PAGE_PATH_MAX]; /* normalised, relative */
    size_t path_len;
};

/* Parse "404=/404.html,403=/e/403.html" (one pair or several, comma
 * separated, blanks allowed around them) into pages[*n..max), *n
 * advanced; a status given twice keeps the later page. The status must
 * be 400..599, the path absolute in the served tree ("/..." normalised
 * as a request path; "..", NUL bytes and overlong paths are refused).
 * 0, or -1 with *why naming the problem. */
int http_error_pages_parse(const char *spec,
                           size_t len,
                           struct http_error_page *pages,
                           size_t max,
                           size_t *n,
                           const char **why);

/* ---- index files ---- */

/* The names a directory's index is looked for under, in order (nginx's
 * "index"): at most HTTP_INDEX_FILES_MAX names, each a single path
 * segment of at most HTTP_INDEX_NAME_MAX - 1 bytes. */
#define HTTP_INDEX_FILES_MAX 8
#define HTTP_INDEX_NAME_MAX 64
struct http_index_files {
    size_t n;
    char name[HTTP_INDEX_FILES_MAX][HTTP_INDEX_NAME_MAX];
    uint8_t len[HTTP_INDEX_FILES_MAX];
};

/* Parse "index.html,index.htm" (comma separated, blanks allowed around
 * the names) into *ix. A name is a file name: not empty, no '/', not
 * starting with '.', no control bytes, shorter than HTTP_INDEX_NAME_MAX.
 * 0, or -1 with *why naming the problem (ix then unusable). */
int http_index_files_parse(const char *spec,
                           size_t len,
                           struct http_index_files *ix,
                           const char **why);

/* ---- SPA fallback ---- */

/* A missing path answered with a file of the tree and status 200 (nginx's
 * "try_files $uri $uri/ /index.html"): parse "/index.html" (absolute in
 * the served tree, normalised as a request path; "..", a directory's
 * slash, a query or a hidden segment refused) into path (at least
 * HTTP_ERROR_PAGE_PATH_MAX bytes), NUL-terminated, relative; 0, or -1
 * with *why. */
int http_fallback_parse(const char *spec,
                        size_t len,
                        char *path,
                        size_t *path_len,
                        const char **why);

/* ---- the plan ---- */

enum http_plan_step {
    HTTP_PLAN_RESPOND, /* the plan is complete: carry it out */
    HTTP_PLAN_LOOKUP,  /* look plan.path up, report with http_plan_resource */
    HTTP_PLAN_GZIP,    /* fetch the gzip copy, report with http_plan_gzip */
};

/* Where the body comes from. With head_only the head says what the body
 * would be and nothing follows it. */
enum http_plan_body {
    HTTP_PLAN_BODY_NONE,    /* no body: 301, 304, 416, empty files */
    HTTP_PLAN_BODY_TEXT,    /* plan.text[0..body_len): an error body */
    HTTP_PLAN_BODY_CACHED,  /* the cached identity body, [body_off, +len) */
    HTTP_PLAN_BODY_GZIP,    /* the cached gzip copy, body_len bytes */
    HTTP_PLAN_BODY_FILE,    /* plan.path opened, [body_off, +body_len) */
    HTTP_PLAN_BODY_LISTING, /* a listing of the directory plan.path,
                               chunked when head.chunked, else ended by
                               the close */
    HTTP_PLAN_BODY_ENGINE,  /* body_len bytes the engine makes itself (a
                               status page) */
    HTTP_PLAN_BODY_PARTS,   /* multipart/byteranges, body_len bytes in
                               all: for i in 0..ranges.n, the bytes
                               http_plan_part writes, then (i < n) the
                               part's bytes from the cached body
                               (parts_cached) or plan.path opened */
};

/* The operator's settings of one site: built once when the settings
 * change, never written after, and read by the planner by reference
 * (http_plan_input.site, then the plan's steps). All off when zero. */
struct http_site_settings {
    bool gzip;        /* gzip copies enabled */
    bool dotfiles;    /* serve paths with a segment starting with '.'
                         (else 404; /.well-known/ always) */
    uint32_t expires; /* > 0: files get Cache-Control: max-age and
                         Expires this many seconds ahead (nginx's
                         "expires"); at most HTTP_SERVER_EXPIRES_MAX */
    bool gzip_static; /* serve file.gz beside file (nginx's gzip_static) */
    bool no_listings; /* a directory without an index answers 403
                         instead of its listing (nginx's autoindex off) */
    const struct http_index_files *index; /* NULL: index.html */
    /* a missing path (not hidden, not under /.well-known/) is answered
     * with this file, 200 and its validators; NULL: 404 */
    const char *fallback;
    size_t fallback_len;
    const struct http_error_page *error_pages; /* error_page */
    size_t error_pages_n;
    const struct http_mime_table *mime; /* read from mime.types, or NULL */
    /* fields added to responses, and CORS (a preflight, OPTIONS with
     * Origin and Access-Control-Request-Method, is answered 204 when the
     * table has CORS on), or NULL */
    const struct http_headers *headers;
};

/* What the engine tells the planner about the request. */
struct http_plan_input {
    const struct http_request *req; /* NULL: no request could be parsed */
    const char *buf;                /* the head's first byte: slices point
                                       here */
    size_t buffered;                /* bytes at buf: head, body and any
                                       pipelined requests */
    size_t head_len;
    bool stopping;    /* the server is going away: close */
    const char *date; /* Date made by http_date_format, or NULL */
    int64_t now;      /* seconds: the time of date (also for Expires) */
    /* the site's settings, by reference: they must stay unchanged and
     * alive until the plan's last step (the body's end); NULL: all off */
    const struct http_site_settings *site;
    uint64_t random; /* random bits for a multipart boundary: the engine
                        fills them for a request with a Range field */
};

/* Scratch the plan writes paths into; the caller's (stack, or allocated
 * per request where stacks are small). Only path must outlive the plan's
 * steps: it is plan.path until the body is open. */
#define HTTP_PLAN_LOCATION_MAX 1024
struct http_plan_work {
    char path[HTTP_SERVER_PATH_MAX + 1 + HTTP_INDEX_NAME_MAX + sizeof(".gz")];
    char location[HTTP_PLAN_LOCATION_MAX];
};

#define HTTP_PLAN_TEXT_MAX 64
#define HTTP_PLAN_BOUNDARY_LEN 16
/* The longest part head http_plan_part writes (its delimiter, type and
 * Content-Range); every engine's head buffer holds one. */
#define HTTP_PLAN_PART_HEAD_MAX                                              \
    (sizeof("\r\n--\r\nContent-Type: \r\nContent-Range: bytes -/\r\n\r\n") + \
     HTTP_PLAN_BOUNDARY_LEN + HTTP_MIME_TYPE_LEN_MAX +                       \
     sizeof("; charset=utf-8") + 3 * 20)

struct http_plan {
    /* ---- the outcome, read by the engine ---- */
    int status;
    enum http_plan_body body;
    uint64_t body_off, body_len;
    bool head_only;   /* HEAD: the head alone */
    bool keep_alive;  /* false: close once the response is out */
    bool linger;      /* closing: shut the write side first and drop what
                         the client still sends (HTTP_SERVER_LINGER_*) */
    bool more;        /* the end of this response may wait in the socket
                         (MSG_MORE): a whole next request head is buffered,
                         or the connection closes after it. Closing, the
                         engine shuts the write side at once: the FIN then
                         leaves on the response's last segment */
    bool drain_body;  /* keeping the connection after a request body: read
                         and drop it (core's framing) before the next head */
    bool error_page;  /* the lookup or body is a custom error page */
    const char *path; /* LOOKUP, FILE, LISTING: NUL-terminated, relative */
    size_t path_len;
    struct http_response_head head; /* built by http_plan_head */

    /* ---- state between steps ---- */
    struct http_path_info info;
    size_t dir_len;    /* looking for an index: the directory's path length */
    size_t index_next; /* the next index name to look up */
    int stage;
    bool want_range;
    bool compressible;
    bool page_tried;   /* an error page was looked up: never another */
    bool head_written; /* the head holds more than http_plan_start's */
    int8_t memo_kind;  /* http_head_memo_kind */

    /* ---- http_plan_start zeroes the plan only up to here: what follows
     * is the input it copies at once, then scratch written before it is
     * read ---- */
    const struct http_request *req;
    const char *buf;
    struct http_plan_work *work;
    const struct http_site_settings *site; /* in->site, never NULL */
    const struct http_headers *add;        /* site->headers */
    uint32_t add_mask;             /* which of its fields this path gets */
    char etag[HTTP_ETAG_MAX + 4];  /* the representation's validator */
    char text[HTTP_PLAN_TEXT_MAX]; /* BODY_TEXT */
    struct http_resource res;      /* the regular file being planned */
    uint64_t random;
    /* BODY_PARTS: the ranges, where their bytes are, each part's type and
     * the boundary (HTTP_PLAN_BOUNDARY_LEN hex digits) */
    struct http_range_set ranges;
    bool parts_cached;
    const char *part_type;
    char multipart_type[sizeof("multipart/byteranges; boundary=") +
                        HTTP_PLAN_BOUNDARY_LEN];
};

/* Dispatch a parsed request (in->req): method, expectations, connection
 * disposition, path. Returns HTTP_PLAN_LOOKUP (plan.path) or
 * HTTP_PLAN_RESPOND (a CORS preflight's 204; an error: 417, 501, 405,
 * 400/403/414 for the path,
 * 404 for a hidden path (http_path_hidden) unless in->site->dotfiles, 500 when
 * w is NULL: the engine could not allocate it). An error with a custom
 * page is a HTTP_PLAN_LOOKUP of the page too (plan.error_page). */
enum http_plan_step http_plan_start(struct http_plan *p,
                                    const struct http_plan_input *in,
                                    struct http_plan_work *w);

/* A request that could not be parsed, timed out (408), or is refused at
 * accept (503): an error response, then close. */
void http_plan_no_request(struct http_plan *p,
                          const struct http_plan_input *in,
                          int status);
/* The same, with the custom page of in->site->error_pages when there is one:
 * HTTP_PLAN_LOOKUP of the page (w: the path's scratch, or NULL for the
 * text), else HTTP_PLAN_RESPOND. */
enum http_plan_step http_plan_no_request_page(struct http_plan *p,
                                              const struct http_plan_input *in,
                                              struct http_plan_work *w,
                                              int status);

/* The lookup of plan.path: err = 0 and res, or err = -errno (res unused).
 * Steps: the path, then dir/NAME for a directory (each index name in
 * turn, index.html without site->index), then file.gz with
 * gzip_static (and the file again when there is no usable .gz), or an
 * error's custom page. */
enum http_plan_step http_plan_resource(struct http_plan *p,
                                       int err,
                                       const struct http_resource *res);

/* The gzip copy: have = false when it could not be made or is not smaller
 * than the file (identity is sent then). */
enum http_plan_step http_plan_gzip(struct http_plan *p,
                                   bool have,
                                   uint64_t len);

/* A resource the engine answers itself instead of a lookup (after
 * http_plan_start returned HTTP_PLAN_LOOKUP): 200 with content_type and
 * len bytes of its own, never cached by clients (no validators). */
void http_plan_engine_body(struct http_plan *p,
                           const char *content_type,
                           uint64_t len);

/* Replace the plan by an error response (keeping the connection plan). */
void http_plan_error(struct http_plan *p, int status);
/* The engine has no room for the body now (a listing beyond its budget):
 * 503 with Retry-After: retry_after seconds (at least 1), keeping the
 * connection plan. */
void http_plan_busy(struct http_plan *p, uint32_t retry_after);
/* The client's address is past its request rate (http_rate_take, after
 * http_plan_start returned HTTP_PLAN_LOOKUP): 429 with Retry-After:
 * retry_after seconds (at least 1), keeping the connection plan. Returns
 * HTTP_PLAN_LOOKUP of the custom page for 429 when there is one (its
 * answer keeps the Retry-After), else HTTP_PLAN_RESPOND. */
enum http_plan_step http_plan_limited(struct http_plan *p,
                                      uint32_t retry_after);
/* The engine could not open or allocate what the plan needs (-errno);
 * for a custom error page: the built-in text of the original status. */
void http_plan_fail(struct http_plan *p, int err);

/* BODY_PARTS: part i's head (0 <= i < ranges.n: its delimiter, type and
 * Content-Range; its bytes are [*off, +*len) of the file) or, for
 * i == ranges.n, the closing delimiter (*len = 0) into buf; the length
 * written, or -1 if it does not fit (never with HTTP_PLAN_PART_HEAD_MAX
 * bytes). */
int http_plan_part(const struct http_plan *p,
                   unsigned int i,
                   char *buf,
                   size_t cap,
                   uint64_t *off,
                   uint64_t *len);

/* Build the head into buf; its length, or -1 if it does not fit. */
int http_plan_head(const struct http_plan *p, char *buf, size_t cap);
/* The head did not fit the engine's buffer (no planned head can, see
 * HTTP_SERVER_HEAD_BUF): the plan becomes a 500 with its text, whose
 * head fits any buffer of HTTP_SERVER_HEAD_BUF; the connection closes
 * after it. */
void http_plan_head_failed(struct http_plan *p);

/* ---- a file's head, kept ----
 *
 * The head of a file's plain answer is a function of the file, of its
 * Content-Type, of keep-alive and of Vary; of the clock only through Date.
 * Three kinds are kept (http_head_memo_kind): the identity 200 (its whole
 * body: no range, no Expires, which moves with the clock), the gzip 200
 * (the cached gzip copy), and the 304 of a met condition. An engine keeps
 * one head per cached file, kind and connection disposition: a later plan
 * of the same kind gets the kept bytes with this second's Date written
 * over the old, instead of a head built field by field. A memo belongs to
 * one resource (one cache entry: its size, mtime and ETag never change);
 * the engine makes it once and publishes it to readers itself. */
#define HTTP_HEAD_MEMO_MAX 320
enum http_head_memo_kind {
    HTTP_HEAD_MEMO_NONE = -1, /* a head to build every time */
    HTTP_HEAD_MEMO_200 = 0,
    HTTP_HEAD_MEMO_GZIP,
    HTTP_HEAD_MEMO_304,
    HTTP_HEAD_MEMO_KINDS,
};
struct http_head_memo {
    const char *content_type; /* the plan's, compared by address */
    int64_t content_length;
    uint16_t len;      /* 0: none */
    uint16_t date_off; /* the Date value's HTTP_DATE_LEN bytes */
    int8_t kind;       /* enum http_head_memo_kind */
    bool keep_alive;
    bool vary;
    char head[HTTP_HEAD_MEMO_MAX];
};

/* Which kind of kept head p's head is, or HTTP_HEAD_MEMO_NONE: decided
 * with the head (a file's 200, its gzip copy's 200 or a 304, with a Date
 * and without Expires). */
static inline int http_head_memo_kind(const struct http_plan *p)
{
    return p->memo_kind;
}
/* Make m from p's head when p's head is one to keep; false (m untouched)
 * otherwise. */
bool http_head_memo_make(const struct http_plan *p, struct http_head_memo *m);
/* p's head from m into buf, kind being http_head_memo_kind(p) (which the
 * engine needs anyway to pick the memo): its length, or 0 when m does not
 * fit p (made for another kind or disposition) or buf is too short: build
 * the head with http_plan_head then. */
int http_plan_head_memo(const struct http_plan *p,
                        int kind,
                        const struct http_head_memo *m,
                        char *buf,
                        size_t cap);

#endif /* KTCP_CORE_HTTP_PLAN_H */
