/* libFuzzer target: the response planner.
 *
 * Input: 12 control bytes — what each lookup finds (a file, a directory,
 * or an error), the file's size and mtime, whether the body is cached, the
 * gzip copy's fate, the engine's gzip and stopping flags and the
 * operator's settings (expires, gzip_static, error pages, three index
 * names and an SPA fallback) — then a
 * request, parsed by core's parser (inputs that do not parse are skipped).
 *
 * Invariants: the steps end in RESPOND within five lookups (the path, an
 * index or the fallback, file.gz and the file again, an error's page;
 * two more with three index names); the status is
 * one the servers send; the head always builds into the engines' head
 * buffer, and its Content-Length agrees with the body; a byte range lies
 * inside the file, several of them add up to the multipart body's
 * Content-Length; lookup paths are clean, NUL-terminated and inside the
 * plan's scratch; a connection that closes is never drained and never
 * waits for a next request (MSG_MORE); a listing is chunked exactly when
 * the connection stays open.
 */
#include <stdlib.h>

#include "http_core.h"
#include "http_internal.h"

#define REQUIRE(c)   \
    do {             \
        if (!(c))    \
            abort(); \
    } while (0)

#define CONTROL 12

static const int errors[] = {-HTTP_ENOENT, -HTTP_EACCES, -HTTP_EXDEV,
                             -HTTP_ELOOP,  -HTTP_ENOMEM, -5 /* EIO */};

static bool known_status(int s)
{
    static const int ok[] = {200, 206, 301, 304, 400, 403, 404,
                             405, 414, 416, 417, 500, 501};
    for (size_t i = 0; i < HTTP_ARRAY_SIZE(ok); i++)
        if (ok[i] == s)
            return true;
    return false;
}

/* The n-th lookup's answer, from the control bytes. */
static int lookup(const uint8_t *ctl,
                  int n,
                  const char *path,
                  size_t len,
                  struct http_resource *res)
{
    uint8_t k = ctl[n];
    uint64_t size;
    int64_t mtime;

    if (k % 4 == 3)
        return errors[(k / 4) % HTTP_ARRAY_SIZE(errors)];
    memcpy(&size, ctl + 2, 4);
    size &= 0xffffffff;
    if (ctl[6] & 1)
        size %= 200; /* small files are the interesting ones */
    mtime = (int64_t) ((uint64_t) ctl[7] << 24 | (uint64_t) ctl[8] << 8);
    http_resource_init(res, path, len, k % 4 == 2, size, mtime,
                       (uint32_t) ctl[10] * 1000u, ctl[11]);
    res->body_cached = !res->is_dir && (ctl[6] & 2) && size > 0;
    return 0;
}

/* The kind of kept head read from the head's fields alone: the planner
 * decides it with the head, and must agree. */
static int memo_kind_of_head(const struct http_plan *p)
{
    const struct http_response_head *h = &p->head;

    if (!h->date || h->date_len != HTTP_DATE_LEN || h->version != 11 ||
        h->server || !h->content_type_safe || h->chunked || h->has_max_age ||
        h->has_content_range || h->content_range_unsatisfied || h->location ||
        h->allow || h->keep_alive_timeout_seconds || !h->etag)
        return HTTP_HEAD_MEMO_NONE;
    if (p->status == 304 && p->body == HTTP_PLAN_BODY_NONE)
        return HTTP_HEAD_MEMO_304;
    if (p->status != 200)
        return HTTP_HEAD_MEMO_NONE;
    if (p->body == HTTP_PLAN_BODY_GZIP && h->content_encoding)
        return HTTP_HEAD_MEMO_GZIP;
    if ((p->body == HTTP_PLAN_BODY_CACHED || p->body == HTTP_PLAN_BODY_FILE) &&
        !h->content_encoding)
        return HTTP_HEAD_MEMO_200;
    return HTTP_HEAD_MEMO_NONE;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct http_parser parser;
    struct http_header headers[HTTP_SERVER_MAX_STORED_HEADERS];
    struct http_plan_input in = {0};
    struct http_site_settings site = {0};
    struct http_plan_work work;
    struct http_plan p;
    /* the longest chain: the target, its index names (three), the last
     * one's .gz, the file again (gzip_static), an error's custom page */
    struct http_resource res[7];
    static struct http_index_files ix;
    static char fallback[HTTP_ERROR_PAGE_PATH_MAX];
    size_t fallback_len = 0;
    struct http_error_page pages[HTTP_SERVER_ERROR_PAGES_MAX];
    size_t npages = 0;
    const char *why;
    static const char spec[] =
        "400=/e/400.html,403=/e/403.html,"
        "404=/404.html,405=/e/405,414=/e/414.html,"
        "500=/e/500.html,501=/e/x/";
    char head[HTTP_SERVER_HEAD_BUF];
    const uint8_t *ctl = data;
    size_t used = 0;
    int lookups = 0;

    if (size < CONTROL)
        return 0;
    data += CONTROL;
    size -= CONTROL;
    http_parser_init(&parser, NULL);
    http_parser_set_header_store(&parser, headers,
                                 HTTP_SERVER_MAX_STORED_HEADERS);
    if (http_parse_request(&parser, (const char *) data, size, &used) !=
        HTTP_PARSE_COMPLETE)
        return 0;
    in.req = &parser.req;
    in.buf = (const char *) data;
    in.buffered = size;
    in.head_len = used;
    in.site = &site;
    site.gzip = ctl[9] & 1;
    in.stopping = ctl[9] & 2;
    in.now = 1700000000;
    in.date = (ctl[9] & 64) ? "Tue, 14 Nov 2023 22:13:20 GMT" : NULL;
    site.expires = (ctl[9] & 8) ? (uint32_t) ctl[10] << 16 : 0;
    site.gzip_static = ctl[9] & 16;
    if (ctl[9] & 32) {
        /* "501=/e/x/" names a directory: refused, the others kept */
        REQUIRE(http_error_pages_parse(spec, sizeof(spec) - 1, pages,
                                       HTTP_SERVER_ERROR_PAGES_MAX, &npages,
                                       &why) < 0);
        REQUIRE(npages == 6);
        site.error_pages = pages;
        site.error_pages_n = npages;
    }

    if (ctl[9] & 128) {
        REQUIRE(http_index_files_parse("index.htm, index.html,home", 26, &ix,
                                       &why) == 0);
        REQUIRE(http_fallback_parse("/app/index.html", 15, fallback,
                                    &fallback_len, &why) == 0);
        site.index = &ix;
        site.fallback = fallback;
        site.fallback_len = fallback_len;
    }
    in.random = (uint64_t) ctl[7] << 8 | ctl[8];

    enum http_plan_step step =
        http_plan_start(&p, &in, (ctl[9] & 4) ? NULL : &work);
    while (step == HTTP_PLAN_LOOKUP) {
        REQUIRE(lookups < ((ctl[9] & 128) ? 7 : 5));
        REQUIRE(p.path >= work.path &&
                p.path + p.path_len < work.path + sizeof(work.path));
        REQUIRE(strlen(p.path) == p.path_len && p.path_len > 0);
        REQUIRE(p.path[0] != '/');
        int err = lookup(ctl, lookups, p.path, p.path_len, &res[lookups]);
        step = http_plan_resource(&p, err, err ? NULL : &res[lookups]);
        lookups++;
    }
    if (step == HTTP_PLAN_GZIP) {
        REQUIRE(lookups > 0 && !res[lookups - 1].is_dir);
        uint64_t gz_len = (uint64_t) ctl[10] | (uint64_t) ctl[11] << 8;
        step = http_plan_gzip(&p, ctl[10] & 1, gz_len);
    }
    REQUIRE(step == HTTP_PLAN_RESPOND);
    REQUIRE(known_status(p.status) && p.status == p.head.status);

    int n = http_plan_head(&p, head, sizeof(head));
    REQUIRE(n > 0);
    /* a kept head gives the bytes a built one does, to its plan only */
    static struct http_head_memo memo;
    static char again[HTTP_SERVER_HEAD_BUF];
    int kind = http_head_memo_kind(&p);
    REQUIRE(kind == memo_kind_of_head(&p));
    if (http_head_memo_make(&p, &memo)) {
        /* a file's 200 (identity or gzip) or its 304, never an error page */
        REQUIRE((p.status == 200 || p.status == 304) && !p.error_page);
        REQUIRE(kind != HTTP_HEAD_MEMO_NONE && memo.kind == kind);
        REQUIRE(http_plan_head_memo(&p, kind, &memo, again, sizeof(again)) ==
                n);
        REQUIRE(memcmp(again, head, (size_t) n) == 0);
    } else {
        /* a head not to keep is never given a kept one */
        REQUIRE(kind == HTTP_HEAD_MEMO_NONE || n > HTTP_HEAD_MEMO_MAX);
        if (memo.len)
            REQUIRE(http_plan_head_memo(&p, kind, &memo, again,
                                        sizeof(again)) == 0 ||
                    kind != HTTP_HEAD_MEMO_NONE);
    }
    REQUIRE(p.head.keep_alive == p.keep_alive);
    if (!p.keep_alive) /* closing: no body to drain, the FIN pushes the end */
        REQUIRE(!p.drain_body && p.more);

    const struct http_resource *r = lookups ? &res[lookups - 1] : NULL;
    switch (p.body) {
    case HTTP_PLAN_BODY_TEXT:
        REQUIRE(p.status >= 400);
        REQUIRE(p.body_len > 0 && p.body_len < HTTP_PLAN_TEXT_MAX);
        REQUIRE(p.head.content_length == (int64_t) p.body_len);
        break;
    case HTTP_PLAN_BODY_CACHED:
    case HTTP_PLAN_BODY_FILE:
        REQUIRE(r && !r->is_dir);
        if (p.error_page) {
            REQUIRE(p.status >= 400 && p.body_off == 0 &&
                    p.body_len == r->size);
            REQUIRE(p.head.content_length == (int64_t) p.body_len);
            break;
        }
        REQUIRE(p.status == 200 || p.status == 206);
        REQUIRE(p.body_len > 0 && p.body_off + p.body_len <= r->size);
        REQUIRE(p.head.content_length == (int64_t) p.body_len);
        REQUIRE((p.body == HTTP_PLAN_BODY_CACHED) == r->body_cached);
        if (p.body == HTTP_PLAN_BODY_FILE)
            REQUIRE(strlen(p.path) == p.path_len);
        if (p.status == 206)
            REQUIRE(p.head.has_content_range &&
                    p.head.range_first == p.body_off &&
                    p.head.range_last - p.head.range_first + 1 == p.body_len);
        break;
    case HTTP_PLAN_BODY_PARTS: {
        char part[HTTP_PLAN_PART_HEAD_MAX];
        uint64_t total = 0, off, len;

        REQUIRE(r && !r->is_dir && p.status == 206 && !p.error_page);
        REQUIRE(p.ranges.n >= 2 && p.ranges.n <= HTTP_RANGES_MAX);
        REQUIRE(p.parts_cached == r->body_cached);
        REQUIRE(!p.head.has_content_range);
        for (unsigned int i = 0; i <= p.ranges.n; i++) {
            int hn = http_plan_part(&p, i, part, sizeof(part), &off, &len);
            REQUIRE(hn > 0);
            REQUIRE(off + len <= r->size && (len > 0) == (i < p.ranges.n));
            total += (uint64_t) hn + len;
        }
        REQUIRE(total == p.body_len &&
                p.head.content_length == (int64_t) p.body_len);
        if (!p.parts_cached)
            REQUIRE(strlen(p.path) == p.path_len);
        break;
    }
    case HTTP_PLAN_BODY_GZIP:
        REQUIRE(r && p.status == 200 && p.head.content_encoding);
        REQUIRE(p.head.content_length == (int64_t) p.body_len);
        break;
    case HTTP_PLAN_BODY_LISTING:
        REQUIRE(p.status == 200 && p.head.content_length < 0);
        REQUIRE(p.head.chunked || !p.keep_alive);
        REQUIRE(strlen(p.path) == p.path_len && p.path_len > 0);
        break;
    case HTTP_PLAN_BODY_NONE:
        REQUIRE(p.status == 200 || p.status == 206 || p.status == 301 ||
                p.status == 304 || p.status == 416 ||
                (p.error_page && p.head.content_length == 0));
        if (p.status == 301)
            REQUIRE(p.head.location && p.head.location[0] == '/');
        break;
    default:
        REQUIRE(0);
    }
    if (p.head.has_max_age)
        REQUIRE(site.expires &&
                (p.status == 200 || p.status == 206 || p.status == 304));
    if (p.status == 416)
        REQUIRE(p.head.content_range_unsatisfied && r &&
                p.head.range_size == r->size);
    return 0;
}
