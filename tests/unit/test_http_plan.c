/* Unit tests of the response planner: every status it can produce, each
 * header decision, body sources and connection disposition. Requests are
 * real ones, parsed by core's parser; the "file system" is a table of
 * resources the test answers lookups from, as an engine's cache would. */
#include <errno.h>
#include <stdio.h>

#include "http_core.h"
#include "http_internal.h"
#include "unit.h"

/* a test-only helper */
/* The head leaves alone, ahead of a body sent separately (file, listing):
 * send it with MSG_MORE so head and first body bytes share a segment. */
static inline bool http_plan_body_follows(const struct http_plan *p)
{
    return !p->head_only && (p->body == HTTP_PLAN_BODY_FILE ||
                             p->body == HTTP_PLAN_BODY_LISTING ||
                             p->body == HTTP_PLAN_BODY_PARTS);
}

#define MTIME 1700000000

struct fake_file {
    const char *path;
    bool is_dir;
    uint64_t size;
    bool cached;
    int err;             /* lookup fails with this (-errno) */
    int64_t mtime_delta; /* its mtime is MTIME + this */
};

static const struct fake_file files[] = {
    {".", true, 0, false, 0, 0},
    {"a.txt", false, 10, true, 0, 0},
    {"big.html", false, 100000, false, 0, 0},
    {"empty.txt", false, 0, true, 0, 0},
    {"img.png", false, 500, true, 0, 0},
    {"dir", true, 0, false, 0, 0},
    {"dir/index.html", false, 20, true, 0, 0},
    {"names", true, 0, false, 0, 0},
    {"secret", false, 0, false, -EACCES, 0},
    {"outside", false, 0, false, -EXDEV, 0},
    {"broken", false, 0, false, -EIO, 0},
    {"names/index.html", true, 0, false, 0, 0}, /* a directory: not an index */
    /* gzip_static */
    {"app.js", false, 3000, true, 0, 0},
    {"app.js.gz", false, 700, true, 0, 5},
    {"old.css", false, 3000, false, 0, 0},
    {"old.css.gz", false, 700, true, 0, -5}, /* older than the file */
    {"gzdir.css", false, 3000, true, 0, 0},
    {"gzdir.css.gz", true, 0, false, 0, 0}, /* not a regular file */
    {"dir/index.html.gz", false, 15, true, 0, 0},
    /* error pages */
    {"err/404.html", false, 33, true, 0, 0},
    {"err/big.html", false, 100000, false, 0, 0},
    {"err/dir.html", true, 0, false, 0, 0},
    {"f.weird", false, 4, true, 0, 0},
};

/* Operator settings every plan of plan_ex runs with (zero: off; gzip is
 * always on there), and the Date its requests carry. */
static struct http_site_settings settings;
static const char *settings_date;
/* true: plan_ex's requests carry no settings at all (a NULL site) */
static bool settings_none;

struct run {
    struct http_parser parser;
    struct http_header headers[HTTP_SERVER_MAX_STORED_HEADERS];
    struct http_plan_input in;
    struct http_site_settings site;
    struct http_plan_work work;
    struct http_plan plan;
    struct http_resource res;
    char head[HTTP_SERVER_HEAD_BUF];
    int head_len;
    int lookups;
    bool gzip_asked;
    char looked_up[4][64];
};

/* Resources keep their type from memo_from (http_resource_use_table), as
 * ktcp-httpd's cache does from its table; memo_type, when set, replaces what
 * they kept, to show the planner takes it rather than looking again. */
static const struct http_mime_table *memo_from;
static const struct http_mime_type *memo_type;

/* What the engine's lookup would say. */
static int lookup(struct run *r, const char *path, struct http_resource *res)
{
    for (size_t i = 0; i < HTTP_ARRAY_SIZE(files); i++) {
        const struct fake_file *f = &files[i];
        if (strcmp(f->path, path) != 0)
            continue;
        if (f->err)
            return f->err;
        http_resource_init(res, path, strlen(path), f->is_dir, f->size,
                           MTIME + f->mtime_delta, 0, 0);
        res->body_cached = f->cached;
        if (memo_from) {
            http_resource_use_table(res, memo_from, path, strlen(path));
            if (memo_type)
                res->table_mime = memo_type;
        }
        (void) r;
        return 0;
    }
    /* directories with long names */
    if (strncmp(path, "long", 4) == 0) {
        http_resource_init(res, path, strlen(path), true, 0, MTIME, 0, 0);
        return 0;
    }
    return -ENOENT;
}

/* Plan a request the way an engine does; gz_len < 0: no gzip copy. */
static struct run *plan_ex(const char *req, int64_t gz_len, bool with_work)
{
    static struct run r;
    size_t used = 0;

    memset(&r, 0, sizeof(r));
    http_parser_init(&r.parser, NULL);
    http_parser_set_header_store(&r.parser, r.headers,
                                 HTTP_SERVER_MAX_STORED_HEADERS);
    int rc = http_parse_request(&r.parser, req, strlen(req), &used);
    CHECK_INT(rc, HTTP_PARSE_COMPLETE);
    r.in.req = &r.parser.req;
    r.in.buf = req;
    r.in.buffered = strlen(req);
    r.in.head_len = used;
    r.site = settings;
    r.site.gzip = true;
    r.in.site = settings_none ? NULL : &r.site;
    r.in.now = MTIME + 100;
    r.in.date = settings_date;

    enum http_plan_step step =
        http_plan_start(&r.plan, &r.in, with_work ? &r.work : NULL);
    while (step == HTTP_PLAN_LOOKUP) {
        CHECK(r.plan.path[r.plan.path_len] == '\0');
        if (r.lookups < 4)
            snprintf(r.looked_up[r.lookups], sizeof(r.looked_up[0]), "%s",
                     r.plan.path);
        r.lookups++;
        int err = lookup(&r, r.plan.path, &r.res);
        step = http_plan_resource(&r.plan, err, err ? NULL : &r.res);
    }
    if (step == HTTP_PLAN_GZIP) {
        r.gzip_asked = true;
        step = http_plan_gzip(&r.plan, gz_len >= 0,
                              gz_len >= 0 ? (uint64_t) gz_len : 0);
    }
    CHECK_INT(step, HTTP_PLAN_RESPOND);
    r.head_len = http_plan_head(&r.plan, r.head, sizeof(r.head));
    CHECK(r.head_len > 0);
    if (r.head_len > 0)
        r.head[r.head_len] = '\0';
    else
        r.head[0] = '\0';
    return &r;
}

static struct run *plan(const char *req)
{
    return plan_ex(req, 7, true);
}

/* The first step alone, with the engine's flags of one's choosing. */
struct engine {
    struct http_parser parser;
    struct http_plan_input in;
    struct http_site_settings site;
    struct http_plan_work work;
    struct http_plan plan;
};

static enum http_plan_step start(struct engine *e,
                                 const char *req,
                                 bool gzip,
                                 bool stopping)
{
    size_t used = 0;

    memset(e, 0, sizeof(*e));
    http_parser_init(&e->parser, NULL);
    CHECK_INT(http_parse_request(&e->parser, req, strlen(req), &used), 0);
    e->in.req = &e->parser.req;
    e->in.buf = req;
    e->in.buffered = strlen(req);
    e->in.head_len = used;
    e->site.gzip = gzip;
    e->in.site = &e->site;
    e->in.stopping = stopping;
    return http_plan_start(&e->plan, &e->in, &e->work);
}

static bool has(const struct run *r, const char *field)
{
    return strstr(r->head, field) != NULL;
}

#define GET(path, extra) "GET " path " HTTP/1.1\r\nHost: x\r\n" extra "\r\n"

static void test_errno_status(void)
{
    CHECK_INT(http_errno_status(-ENOENT), 404);
    CHECK_INT(http_errno_status(-ENOTDIR), 404);
    CHECK_INT(http_errno_status(-ENAMETOOLONG), 404);
    CHECK_INT(http_errno_status(-EXDEV), 403);
    CHECK_INT(http_errno_status(-ELOOP), 403);
    CHECK_INT(http_errno_status(-EACCES), 403);
    CHECK_INT(http_errno_status(-EPERM), 403);
    CHECK_INT(http_errno_status(-ENOMEM), 500);
    CHECK_INT(http_errno_status(-EIO), 500);
    /* core's own numbers are Linux's */
    CHECK_INT(HTTP_ENOENT, ENOENT);
    CHECK_INT(HTTP_ELOOP, ELOOP);
    CHECK_INT(HTTP_EXDEV, EXDEV);
}

static void test_dispatch_errors(void)
{
    struct run *r;

    r = plan("BREW /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK_INT(r->plan.status, 501);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_TEXT);
    CHECK_MEM(r->plan.text, r->plan.body_len, "501 Not Implemented\n");
    CHECK(has(r, "Content-Length: 20\r\n"));
    CHECK(has(r, "Content-Type: text/plain; charset=utf-8\r\n"));
    CHECK(r->plan.keep_alive);
    CHECK_INT(r->lookups, 0);

    r = plan("POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    CHECK_INT(r->plan.status, 405);
    CHECK(has(r, "Allow: GET, HEAD\r\n"));
    CHECK(r->plan.keep_alive);

    r = plan(GET("/a.txt", "Expect: teapot\r\n"));
    CHECK_INT(r->plan.status, 417);
    CHECK(!r->plan.keep_alive);
    CHECK(has(r, "Connection: close\r\n"));

    r = plan(GET("/../x", ""));
    CHECK_INT(r->plan.status, 403);
    r = plan(GET("/a%2fb", ""));
    CHECK_INT(r->plan.status, 400);
    CHECK_INT(r->lookups, 0);

    /* no scratch memory: 500, the connection kept */
    r = plan_ex(GET("/a.txt", ""), -1, false);
    CHECK_INT(r->plan.status, 500);
    CHECK(r->plan.keep_alive);
}

static void test_lookup_errors(void)
{
    struct run *r;

    r = plan(GET("/nope", ""));
    CHECK_INT(r->plan.status, 404);
    CHECK_MEM(r->plan.text, r->plan.body_len, "404 Not Found\n");
    r = plan(GET("/secret", ""));
    CHECK_INT(r->plan.status, 403);
    r = plan(GET("/outside", ""));
    CHECK_INT(r->plan.status, 403);
    r = plan(GET("/broken", ""));
    CHECK_INT(r->plan.status, 500);
    /* "file/" names no file */
    r = plan(GET("/a.txt/", ""));
    CHECK_INT(r->plan.status, 404);
    CHECK(r->plan.keep_alive);
    CHECK(r->plan.linger); /* if it closes after an error, it lingers */
}

static void test_regular(void)
{
    struct run *r;

    r = plan(GET("/a.txt", ""));
    CHECK_INT(r->plan.status, 200);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_CACHED);
    CHECK_INT(r->plan.body_off, 0);
    CHECK_INT(r->plan.body_len, 10);
    CHECK(has(r, "HTTP/1.1 200 OK\r\n"));
    CHECK(has(r, "Content-Length: 10\r\n"));
    CHECK(has(r, "Content-Type: text/plain; charset=utf-8\r\n"));
    CHECK(has(r, "Accept-Ranges: bytes\r\n"));
    CHECK(has(r, "ETag: \"6553f100-a\"\r\n"));
    CHECK(has(r, "Last-Modified: Tue, 14 Nov 2023 22:13:20 GMT\r\n"));
    CHECK(has(r, "Vary: Accept-Encoding\r\n"));
    CHECK(has(r, "Connection: keep-alive\r\n"));
    CHECK(!has(r, "Content-Encoding"));
    CHECK(!http_plan_body_follows(&r->plan));

    /* large: from the file, the head ahead of it */
    r = plan(GET("/big.html", ""));
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_FILE);
    CHECK_STR(r->plan.path, "big.html");
    CHECK_INT(r->plan.body_len, 100000);
    CHECK(http_plan_body_follows(&r->plan));

    /* empty: no body at all */
    r = plan(GET("/empty.txt", ""));
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_NONE);
    CHECK(has(r, "Content-Length: 0\r\n"));
    CHECK(!has(r, "Vary")); /* nothing to compress */

    /* not compressible: no Vary */
    r = plan(GET("/img.png", "Accept-Encoding: gzip\r\n"));
    CHECK(!has(r, "Vary"));
    CHECK(!r->gzip_asked);
    CHECK(has(r, "Content-Type: image/png\r\n"));

    /* HEAD: the same head, no body */
    r = plan("HEAD /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(r->plan.head_only);
    CHECK(has(r, "Content-Length: 10\r\n"));
    CHECK(!http_plan_body_follows(&r->plan));
    r = plan("HEAD /big.html HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(r->plan.head_only);
    CHECK(!http_plan_body_follows(&r->plan));
}

static void test_gzip(void)
{
    struct run *r;

    r = plan_ex(GET("/a.txt", "Accept-Encoding: gzip\r\n"), 7, true);
    CHECK(r->gzip_asked);
    CHECK_INT(r->plan.status, 200);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_GZIP);
    CHECK_INT(r->plan.body_len, 7);
    CHECK(has(r, "Content-Encoding: gzip\r\n"));
    CHECK(has(r, "Content-Length: 7\r\n"));
    CHECK(has(r, "ETag: \"6553f100-a-gz\"\r\n"));
    CHECK(has(r, "Vary: Accept-Encoding\r\n"));
    CHECK(!has(r, "Accept-Ranges"));

    /* no copy (or not smaller): identity, its own validator */
    r = plan_ex(GET("/a.txt", "Accept-Encoding: gzip\r\n"), -1, true);
    CHECK(r->gzip_asked);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_CACHED);
    CHECK(has(r, "ETag: \"6553f100-a\"\r\n"));
    CHECK(!has(r, "Content-Encoding"));

    /* refused, or a Range: identity without asking for a copy */
    r = plan(GET("/a.txt", "Accept-Encoding: gzip;q=0\r\n"));
    CHECK(!r->gzip_asked);
    r = plan(GET("/a.txt", "Accept-Encoding: gzip\r\nRange: bytes=0-1\r\n"));
    CHECK(!r->gzip_asked);
    CHECK_INT(r->plan.status, 206);

    /* gzip off in the engine */
    {
        struct engine e;
        struct http_resource res;
        CHECK_INT(
            start(&e, GET("/a.txt", "Accept-Encoding: gzip\r\n"), false, false),
            HTTP_PLAN_LOOKUP);
        http_resource_init(&res, "a.txt", 5, false, 10, MTIME, 0, 0);
        CHECK_INT(http_plan_resource(&e.plan, 0, &res), HTTP_PLAN_RESPOND);
        CHECK(!e.plan.head.vary_accept_encoding);
        /* a gzip report out of turn changes nothing */
        CHECK_INT(http_plan_gzip(&e.plan, true, 3), HTTP_PLAN_RESPOND);
        CHECK(e.plan.head.content_encoding == NULL);
    }
}

static void test_conditional(void)
{
    struct run *r;

    r = plan(GET("/a.txt", "If-None-Match: \"6553f100-a\"\r\n"));
    CHECK_INT(r->plan.status, 304);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_NONE);
    CHECK(has(r, "HTTP/1.1 304 Not Modified\r\n"));
    CHECK(has(r, "ETag: \"6553f100-a\"\r\n"));
    CHECK(!has(r, "Content-Type"));
    CHECK(!has(r, "Content-Length"));

    /* the gzip copy has its own validator */
    r = plan(GET("/a.txt",
                 "Accept-Encoding: gzip\r\n"
                 "If-None-Match: \"6553f100-a-gz\"\r\n"));
    CHECK_INT(r->plan.status, 304);
    r = plan(GET("/a.txt",
                 "Accept-Encoding: gzip\r\n"
                 "If-None-Match: \"6553f100-a\"\r\n"));
    CHECK_INT(r->plan.status, 200);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_GZIP);

    r = plan(
        GET("/a.txt", "If-Modified-Since: Tue, 14 Nov 2023 22:13:20 GMT\r\n"));
    CHECK_INT(r->plan.status, 304);
    r = plan(
        GET("/a.txt", "If-Modified-Since: Tue, 14 Nov 2023 22:13:19 GMT\r\n"));
    CHECK_INT(r->plan.status, 200);
}

static void test_range(void)
{
    struct run *r;

    r = plan(GET("/a.txt", "Range: bytes=2-5\r\n"));
    CHECK_INT(r->plan.status, 206);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_CACHED);
    CHECK_INT(r->plan.body_off, 2);
    CHECK_INT(r->plan.body_len, 4);
    CHECK(has(r, "Content-Range: bytes 2-5/10\r\n"));
    CHECK(has(r, "Content-Length: 4\r\n"));

    r = plan(GET("/big.html", "Range: bytes=-100\r\n"));
    CHECK_INT(r->plan.status, 206);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_FILE);
    CHECK_INT(r->plan.body_off, 99900);
    CHECK_INT(r->plan.body_len, 100);

    r = plan(GET("/a.txt", "Range: bytes=10-\r\n"));
    CHECK_INT(r->plan.status, 416);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_NONE);
    CHECK(has(r, "Content-Range: bytes */10\r\n"));
    CHECK(has(r, "Content-Length: 0\r\n"));
    CHECK(!has(r, "Content-Type"));

    /* ignored: other units, two Range fields */
    r = plan(GET("/a.txt", "Range: lines=1-2\r\n"));
    CHECK_INT(r->plan.status, 200);
    CHECK_INT(r->plan.body_len, 10);
    r = plan(GET("/a.txt", "Range: bytes=0-1\r\nRange: bytes=2-3\r\n"));
    CHECK_INT(r->plan.status, 200);

    /* If-Range: the strong validator or the exact date keep the range */
    r = plan(GET("/a.txt", "Range: bytes=0-1\r\nIf-Range: \"6553f100-a\"\r\n"));
    CHECK_INT(r->plan.status, 206);
    r = plan(GET("/a.txt",
                 "Range: bytes=0-1\r\n"
                 "If-Range: Tue, 14 Nov 2023 22:13:20 GMT\r\n"));
    CHECK_INT(r->plan.status, 206);
    r = plan(GET("/a.txt", "Range: bytes=0-1\r\nIf-Range: \"old\"\r\n"));
    CHECK_INT(r->plan.status, 200);
    CHECK_INT(r->plan.body_len, 10);
    r = plan(
        GET("/a.txt", "Range: bytes=0-1\r\nIf-Range: W/\"6553f100-a\"\r\n"));
    CHECK_INT(r->plan.status, 200);
    r = plan(GET("/a.txt",
                 "Range: bytes=0-1\r\n"
                 "If-Range: Tue, 14 Nov 2023 22:13:21 GMT\r\n"));
    CHECK_INT(r->plan.status, 200);
    /* an unsatisfiable range for another version: the whole new one */
    r = plan(GET("/a.txt", "Range: bytes=50-\r\nIf-Range: \"old\"\r\n"));
    CHECK_INT(r->plan.status, 200);
}

/* The parts of a multipart plan laid end to end: the planned length. */
static void check_parts_len(const struct http_plan *p)
{
    char buf[HTTP_PLAN_PART_HEAD_MAX];
    uint64_t total = 0, off, len;
    unsigned int i;

    for (i = 0; i <= p->ranges.n; i++) {
        int n = http_plan_part(p, i, buf, sizeof(buf), &off, &len);

        CHECK(n > 0);
        total += (uint64_t) n + len;
    }
    CHECK_INT(total, p->body_len);
    CHECK_INT(http_plan_part(p, p->ranges.n + 1, buf, sizeof(buf), &off, &len),
              -1);
}

static void test_multi_range(void)
{
    struct run *r;
    char buf[HTTP_PLAN_PART_HEAD_MAX];
    uint64_t off, len;
    int n;

    r = plan(GET("/a.txt", "Range: bytes=0-1,5-\r\n"));
    CHECK_INT(r->plan.status, 206);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_PARTS);
    CHECK(r->plan.parts_cached);
    CHECK_INT(r->plan.ranges.n, 2);
    CHECK(has(r,
              "Content-Type: multipart/byteranges; boundary="
              "0000000000000000\r\n"));
    CHECK(!has(r, "Content-Range"));
    check_parts_len(&r->plan);
    n = http_plan_part(&r->plan, 1, buf, sizeof(buf), &off, &len);
    CHECK(n > 0);
    buf[n > 0 ? n : 0] = '\0';
    CHECK_STR(buf,
              "\r\n--0000000000000000\r\n"
              "Content-Type: text/plain; charset=utf-8\r\n"
              "Content-Range: bytes 5-9/10\r\n\r\n");
    CHECK_INT(off, 5);
    CHECK_INT(len, 5);
    n = http_plan_part(&r->plan, 2, buf, sizeof(buf), &off, &len);
    buf[n > 0 ? n : 0] = '\0';
    CHECK_STR(buf, "\r\n--0000000000000000--\r\n");
    CHECK_INT(len, 0);
    /* too small a buffer: -1, never a cut part */
    CHECK_INT(http_plan_part(&r->plan, 0, buf, 20, &off, &len), -1);

    /* a large file: the parts come from the file */
    r = plan(GET("/big.html", "Range: bytes=-1,0-0,99-99999\r\n"));
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_PARTS);
    CHECK(!r->plan.parts_cached);
    CHECK(has(r, "Content-Length: "));
    check_parts_len(&r->plan);
    /* HEAD: the same head, no body */
    r = plan(
        "HEAD /big.html HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0,5-5\r\n\r\n");
    CHECK_INT(r->plan.status, 206);
    CHECK(r->plan.head_only);
    /* one satisfiable range left: a plain 206 */
    r = plan(GET("/a.txt", "Range: bytes=0-1,50-60\r\n"));
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_CACHED);
    CHECK(has(r, "Content-Range: bytes 0-1/10\r\n"));
    /* more than the file together, or too many: the whole 200 */
    r = plan(GET("/a.txt", "Range: bytes=0-5,4-9\r\n"));
    CHECK_INT(r->plan.status, 200);
    r = plan(GET("/a.txt",
                 "Range: bytes=0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,"
                 "0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0,0-0\r\n"));
    CHECK_INT(r->plan.status, 200);
    /* If-Range for another version: the whole 200 */
    r = plan(GET("/a.txt", "Range: bytes=0-0,2-2\r\nIf-Range: \"old\"\r\n"));
    CHECK_INT(r->plan.status, 200);
}

static void test_index_files(void)
{
    struct http_index_files ix;
    const char *why = NULL;
    struct run *r;
    char many[64 * 10];

    CHECK_INT(
        http_index_files_parse("index.htm, index.html ,dir", 26, &ix, &why), 0);
    CHECK_INT(ix.n, 3);
    CHECK_STR(ix.name[1], "index.html");
    settings.index = &ix;
    /* each name in turn: dir/index.htm is missing, dir/index.html is found */
    r = plan(GET("/dir/", ""));
    CHECK_INT(r->lookups, 3);
    CHECK_STR(r->looked_up[1], "dir/index.htm");
    CHECK_STR(r->looked_up[2], "dir/index.html");
    CHECK_STR(r->plan.path, "dir/index.html");
    CHECK_INT(r->plan.status, 200);
    /* the root's, then none: the listing of the directory itself */
    r = plan(GET("/", ""));
    CHECK_INT(r->lookups, 4);
    CHECK_STR(r->looked_up[3], "dir");
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_LISTING);
    CHECK_STR(r->plan.path, ".");
    /* a directory named like an index is passed over */
    CHECK_INT(http_index_files_parse("index.html,a.txt", 16, &ix, &why), 0);
    r = plan(GET("/names/", ""));
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_LISTING);
    CHECK_STR(r->plan.path, "names");
    settings.index = NULL;

    /* refused */
    CHECK_INT(http_index_files_parse("", 0, &ix, &why), -1);
    CHECK_INT(http_index_files_parse("a,", 2, &ix, &why), 0); /* as pages */
    CHECK_INT(http_index_files_parse("a,,b", 4, &ix, &why), -1);
    CHECK_INT(http_index_files_parse("a/b", 3, &ix, &why), -1);
    CHECK_INT(http_index_files_parse(".x", 2, &ix, &why), -1);
    CHECK_INT(http_index_files_parse("..", 2, &ix, &why), -1);
    CHECK_INT(http_index_files_parse("a\rb", 3, &ix, &why), -1);
    CHECK_INT(http_index_files_parse("a\0b", 3, &ix, &why), -1);
    memset(many, 'x', 63);
    CHECK_INT(http_index_files_parse(many, 63, &ix, &why), 0);
    CHECK_INT(http_index_files_parse(many, 64, &ix, &why), -1);
    CHECK_INT(http_index_files_parse("a,b,c,d,e,f,g,h", 15, &ix, &why), 0);
    CHECK_INT(ix.n, 8);
    CHECK_INT(http_index_files_parse("a,b,c,d,e,f,g,h,i", 17, &ix, &why), -1);
    CHECK(why != NULL);
}

static void test_fallback(void)
{
    char fb[HTTP_ERROR_PAGE_PATH_MAX];
    size_t n = 0;
    const char *why = NULL;
    struct run *r;

    CHECK_INT(http_fallback_parse("/dir/index.html", 15, fb, &n, &why), 0);
    CHECK_STR(fb, "dir/index.html");
    CHECK_INT(n, 14);
    settings.fallback = fb;
    settings.fallback_len = n;
    r = plan(GET("/app/route", ""));
    CHECK_INT(r->lookups, 2);
    CHECK_STR(r->looked_up[1], "dir/index.html");
    CHECK_INT(r->plan.status, 200);
    CHECK(has(r, "ETag: "));
    CHECK(has(r, "Content-Length: 20\r\n"));
    /* hidden, /.well-known/ and what is refused: no fallback */
    r = plan(GET("/.well-known/x", ""));
    CHECK_INT(r->plan.status, 404);
    CHECK_INT(r->lookups, 1);
    r = plan(GET("/secret", ""));
    CHECK_INT(r->plan.status, 403);
    r = plan(GET("/a.txt/", ""));
    CHECK_INT(r->plan.status, 404);
    /* the fallback itself missing or a directory: 404 */
    CHECK_INT(http_fallback_parse("/names", 6, fb, &n, &why), 0);
    settings.fallback_len = n;
    r = plan(GET("/nope", ""));
    CHECK_INT(r->plan.status, 404);
    settings.fallback = NULL;
    settings.fallback_len = 0;
    r = plan(GET("/nope", ""));
    CHECK_INT(r->plan.status, 404);
    CHECK_INT(r->lookups, 1);

    CHECK_INT(http_fallback_parse("index.html", 10, fb, &n, &why), -1);
    CHECK_INT(http_fallback_parse("/", 1, fb, &n, &why), -1);
    CHECK_INT(http_fallback_parse("/d/", 3, fb, &n, &why), -1);
    CHECK_INT(http_fallback_parse("/../x", 5, fb, &n, &why), -1);
    CHECK_INT(http_fallback_parse("/.env", 5, fb, &n, &why), -1);
    CHECK_INT(http_fallback_parse("/a?b", 4, fb, &n, &why), -1);
    CHECK_INT(http_fallback_parse("", 0, fb, &n, &why), -1);
    CHECK(why != NULL);
}

static void test_directories(void)
{
    struct run *r;

    /* no slash: 301 with the query kept */
    r = plan(GET("/dir?x=1&y", ""));
    CHECK_INT(r->plan.status, 301);
    CHECK(has(r, "Location: /dir/?x=1&y\r\n"));
    CHECK(has(r, "Content-Length: 0\r\n"));
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_NONE);
    r = plan(GET("/dir#frag", ""));
    CHECK(has(r, "Location: /dir/\r\n"));
    r = plan(GET("/dir?", ""));
    CHECK(has(r, "Location: /dir/?\r\n"));
    /* a Location longer than the plan keeps: 414 */
    {
        static char req[2048];
        char q[1200];
        memset(q, 'q', sizeof(q) - 1);
        q[sizeof(q) - 1] = '\0';
        snprintf(req, sizeof(req), "GET /dir?%s HTTP/1.1\r\nHost: x\r\n\r\n",
                 q);
        r = plan(req);
        CHECK_INT(r->plan.status, 414);
    }

    /* slash: the index */
    r = plan(GET("/dir/", ""));
    CHECK_INT(r->lookups, 2);
    CHECK_STR(r->looked_up[1], "dir/index.html");
    CHECK_INT(r->plan.status, 200);
    CHECK_STR(r->plan.path, "dir/index.html");
    CHECK(has(r, "Content-Type: text/html; charset=utf-8\r\n"));
    CHECK(has(r, "Content-Length: 20\r\n"));

    /* no index (or one that is a directory): a chunked listing */
    r = plan(GET("/names/", ""));
    CHECK_INT(r->plan.status, 200);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_LISTING);
    CHECK_STR(r->plan.path, "names");
    CHECK_INT(r->plan.path_len, 5);
    CHECK(has(r, "Transfer-Encoding: chunked\r\n"));
    CHECK(!has(r, "Content-Length"));
    CHECK(r->plan.keep_alive);
    CHECK(http_plan_body_follows(&r->plan));

    /* the root */
    r = plan(GET("/", ""));
    CHECK_STR(r->looked_up[0], ".");
    CHECK_STR(r->looked_up[1], "index.html");
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_LISTING);
    CHECK_STR(r->plan.path, ".");

    /* HTTP/1.0: no chunked coding, the close ends the body */
    r = plan("GET /names/ HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_LISTING);
    CHECK(!has(r, "Transfer-Encoding"));
    CHECK(!r->plan.keep_alive);
    CHECK(r->plan.more); /* a keep-alive asked for, now a close: held */
    CHECK(has(r, "Connection: close\r\n"));

    /* listing that cannot be opened */
    http_plan_fail(&r->plan, -EACCES);
    CHECK_INT(r->plan.status, 403);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_TEXT);
}

static void test_connection(void)
{
    struct run *r;

    r = plan("GET /a.txt HTTP/1.0\r\n\r\n");
    CHECK(!r->plan.keep_alive);
    CHECK(!r->plan.linger); /* nothing unread: a plain close */
    CHECK(r->plan.more);    /* the close's FIN takes the end along */
    CHECK(has(r, "Connection: close\r\n"));

    r = plan(
        "GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        "GET /a.txt HTTP/1.1\r\n");
    CHECK(!r->plan.keep_alive);
    CHECK(r->plan.linger); /* bytes follow: drop them before closing */
    CHECK(r->plan.more);   /* closing: the shut write side pushes it */

    /* pipelining: a whole next head makes the response wait for it */
    r = plan(GET("/a.txt", "") GET("/a.txt", ""));
    CHECK(r->plan.keep_alive);
    CHECK(r->plan.more);
    r = plan(GET("/a.txt", "") "GET /a.txt HTTP/1.1\r\n");
    CHECK(!r->plan.more); /* half a head: send now */

    /* a body: drained when the connection stays */
    r = plan(GET("/a.txt", "Content-Length: 3\r\n") "abc" GET("/a.txt", ""));
    CHECK(r->plan.drain_body);
    CHECK(r->plan.more);
    r = plan(GET("/a.txt", "Content-Length: 3\r\n") "ab");
    CHECK(r->plan.drain_body);
    CHECK(!r->plan.more);
    r = plan(GET("/a.txt", "Transfer-Encoding: chunked\r\n") "0\r\n\r\n" GET(
        "/a.txt", ""));
    CHECK(r->plan.drain_body);
    CHECK(!r->plan.more); /* chunked: the end is unknown */

    /* 100-continue with a body: answer at once and close */
    r = plan(GET("/a.txt", "Content-Length: 3\r\nExpect: 100-continue\r\n"));
    CHECK(!r->plan.keep_alive);
    CHECK(!r->plan.drain_body);
    CHECK(r->plan.linger);
    r = plan(GET("/a.txt", "Expect: 100-continue\r\n"));
    CHECK(r->plan.keep_alive); /* no body: nothing to wait for */

    /* a body the engine makes itself keeps the connection's plan */
    {
        struct engine e;
        char head[512];
        CHECK_INT(start(&e, GET("/status", "") GET("/a.txt", ""), true, false),
                  HTTP_PLAN_LOOKUP);
        http_plan_engine_body(&e.plan, "text/plain", 42);
        CHECK_INT(e.plan.status, 200);
        CHECK_INT(e.plan.body, HTTP_PLAN_BODY_ENGINE);
        CHECK_INT(e.plan.body_len, 42);
        CHECK(e.plan.keep_alive);
        int n = http_plan_head(&e.plan, head, sizeof(head) - 1);
        CHECK(n > 0);
        head[n > 0 ? n : 0] = '\0';
        CHECK(strstr(head, "Content-Length: 42\r\n") != NULL);
        CHECK(strstr(head, "Content-Type: text/plain\r\n") != NULL);
        CHECK(strstr(head, "ETag") == NULL);
    }

    /* the server going away */
    {
        struct engine e;
        CHECK_INT(start(&e, GET("/a.txt", ""), true, true), HTTP_PLAN_LOOKUP);
        CHECK(!e.plan.keep_alive);
    }
}

static void test_no_request(void)
{
    static const int statuses[] = {400, 408, 413, 414, 431, 501, 503, 505};
    struct http_plan_input in = {.now = MTIME};
    struct http_plan p;
    char head[512];

    for (size_t i = 0; i < HTTP_ARRAY_SIZE(statuses); i++) {
        http_plan_no_request(&p, &in, statuses[i]);
        CHECK_INT(p.status, statuses[i]);
        CHECK(!p.keep_alive);
        CHECK(p.linger);
        CHECK(p.more); /* the FIN of the shut write side pushes it */
        CHECK_INT(p.body, HTTP_PLAN_BODY_TEXT);
        int n = http_plan_head(&p, head, sizeof(head));
        CHECK(n > 0);
        head[n > 0 ? n : 0] = '\0';
        CHECK(strstr(head, "Connection: close\r\n") != NULL);
    }
    http_plan_no_request(&p, &in, 503);
    int n = http_plan_head(&p, head, sizeof(head));
    CHECK(n > 0);
    head[n > 0 ? n : 0] = '\0';
    CHECK(strncmp(head, "HTTP/1.1 503 Service Unavailable\r\n", 34) == 0);
    CHECK(strstr(head, "Date: Tue, 14 Nov 2023 22:13:20 GMT\r\n") != NULL);
    CHECK(strstr(head, "Content-Length: 24\r\n") != NULL);
    CHECK_MEM(p.text, p.body_len, "503 Service Unavailable\n");
    CHECK(strstr(head, "Retry-After: 1\r\n") != NULL);
    /* an open that would have waited for a lease: 503, try again */
    CHECK_INT(http_errno_status(-HTTP_EAGAIN), 503);
    /* a head that does not fit */
    CHECK_INT(http_plan_head(&p, head, 20), -1);
}

static void test_helpers(void)
{
    char out[HTTP_ETAG_MAX + 8];
    struct http_resource res;

    CHECK_MEM(out, http_etag_variant("\"1-2\"", "gz", out), "\"1-2-gz\"");
    CHECK_MEM(out, http_etag_variant("x", "gz", out), "x");
    CHECK(http_if_range_holds("\"1-2\"", 5, "\"1-2\"", 5, 0));
    CHECK(!http_if_range_holds("\"1-3\"", 5, "\"1-2\"", 5, 0));
    CHECK(!http_if_range_holds("W/\"1-2\"", 7, "\"1-2\"", 5, 0));
    CHECK(!http_if_range_holds("\"1-2\"", 5, "W/\"1-2\"", 7, 0));
    CHECK(http_if_range_holds(" Thu, 01 Jan 1970 00:00:10 GMT", 30, "\"a\"", 3,
                              10));
    CHECK(!http_if_range_holds("Thu, 01 Jan 1970 00:00:10 GMT", 29, "\"a\"", 3,
                               11));
    CHECK(!http_if_range_holds("garbage", 7, "\"a\"", 3, 0));
    CHECK(!http_if_range_holds("", 0, "\"a\"", 3, 0));

    http_resource_init(&res, "x.css", 5, false, 100, 5, 0, 0);
    CHECK(res.mime->compressible);
    CHECK_STR(res.etag, "\"5-64\"");
    /* nanoseconds and inode reach the tag */
    http_resource_init(&res, "x.css", 5, false, 100, 5, 0x10, 0x77);
    CHECK_STR(res.etag, "\"5.10-64-77\"");
    CHECK(http_resource_keep_body(&res, 400));
    CHECK(!http_resource_keep_body(&res, 399)); /* over a quarter */
    res.size = HTTP_SERVER_SMALL_FILE_MAX + 1;
    CHECK(!http_resource_keep_body(&res, 1ULL << 40));
    res.size = 0;
    CHECK(!http_resource_keep_body(&res, 1ULL << 40));
    http_resource_init(&res, "d", 1, true, 4096, 5, 0, 0);
    CHECK(!http_resource_keep_body(&res, 1ULL << 40));
}

static void test_expires(void)
{
    struct run *r;

    settings = (struct http_site_settings){.expires = 60};
    r = plan(GET("/a.txt", ""));
    CHECK_INT(r->plan.status, 200);
    CHECK(has(r, "Cache-Control: max-age=60\r\n"));
    /* now (MTIME + 100) + 60 */
    CHECK(has(r, "Expires: Tue, 14 Nov 2023 22:16:00 GMT\r\n"));
    r = plan(GET("/a.txt", "Range: bytes=0-1\r\n"));
    CHECK_INT(r->plan.status, 206);
    CHECK(has(r, "Cache-Control: max-age=60\r\n"));
    r = plan(GET("/a.txt", "If-None-Match: \"6553f100-a\"\r\n"));
    CHECK_INT(r->plan.status, 304);
    CHECK(has(r, "Cache-Control: max-age=60\r\n"));
    CHECK(has(r, "Expires: "));
    r = plan(GET("/a.txt", "Accept-Encoding: gzip\r\n"));
    CHECK(has(r, "Content-Encoding: gzip\r\n"));
    CHECK(has(r, "Cache-Control: max-age=60\r\n"));
    /* not on errors, redirects, listings, 416 */
    r = plan(GET("/nope", ""));
    CHECK(!has(r, "Cache-Control") && !has(r, "Expires"));
    r = plan(GET("/dir", ""));
    CHECK_INT(r->plan.status, 301);
    CHECK(!has(r, "Cache-Control"));
    r = plan(GET("/names/", ""));
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_LISTING);
    CHECK(!has(r, "Cache-Control"));
    /* bounded */
    settings.expires = 0xffffffffu;
    r = plan(GET("/a.txt", ""));
    CHECK(has(r, "Cache-Control: max-age=315360000\r\n"));
    settings = (struct http_site_settings){0};
    r = plan(GET("/a.txt", ""));
    CHECK(!has(r, "Cache-Control") && !has(r, "Expires"));
}

static void test_gzip_static(void)
{
    struct run *r;

    settings = (struct http_site_settings){.gzip_static = true};
    r = plan(GET("/app.js", "Accept-Encoding: gzip\r\n"));
    CHECK_INT(r->lookups, 2);
    CHECK_STR(r->looked_up[1], "app.js.gz");
    CHECK(!r->gzip_asked);
    CHECK_INT(r->plan.status, 200);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_CACHED);
    CHECK_INT(r->plan.body_len, 700);
    CHECK_STR(r->plan.path, "app.js.gz");
    CHECK(has(r, "Content-Encoding: gzip\r\n"));
    CHECK(has(r, "Vary: Accept-Encoding\r\n"));
    CHECK(has(r, "Content-Type: text/javascript; charset=utf-8\r\n"));
    CHECK(has(r, "Content-Length: 700\r\n"));
    CHECK(has(r, "ETag: \"6553f105-2bc\"\r\n")); /* the .gz file's */
    CHECK(has(r, "Last-Modified: Tue, 14 Nov 2023 22:13:25 GMT\r\n"));
    /* the .gz's validator gives a 304 */
    r = plan(GET("/app.js",
                 "Accept-Encoding: gzip\r\n"
                 "If-None-Match: \"6553f105-2bc\"\r\n"));
    CHECK_INT(r->plan.status, 304);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_NONE);
    /* ranges are the .gz file's bytes */
    r = plan(GET("/app.js", "Accept-Encoding: gzip\r\nRange: bytes=10-19\r\n"));
    CHECK_INT(r->plan.status, 206);
    CHECK_INT(r->plan.body_off, 10);
    CHECK_INT(r->plan.body_len, 10);
    CHECK(has(r, "Content-Range: bytes 10-19/700\r\n"));
    CHECK(has(r, "Content-Encoding: gzip\r\n"));
    r = plan(GET("/app.js", "Accept-Encoding: gzip\r\nRange: bytes=700-\r\n"));
    CHECK_INT(r->plan.status, 416);
    CHECK(!has(r, "Content-Encoding"));
    /* HEAD: the same head */
    r = plan(
        "HEAD /app.js HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n");
    CHECK(r->plan.head_only);
    CHECK(has(r, "Content-Length: 700\r\n"));
    /* not accepted: identity, one lookup, still Vary */
    r = plan(GET("/app.js", "Accept-Encoding: gzip;q=0\r\n"));
    CHECK_INT(r->lookups, 1);
    CHECK(!has(r, "Content-Encoding"));
    CHECK(has(r, "Vary: Accept-Encoding\r\n"));
    r = plan(GET("/img.png", ""));
    CHECK(has(r, "Vary: Accept-Encoding\r\n"));
    /* no .gz, an older one, a directory: the file again, then the
     * server's own gzip copy */
    r = plan(GET("/a.txt", "Accept-Encoding: gzip\r\n"));
    CHECK_INT(r->lookups, 3);
    CHECK_STR(r->looked_up[1], "a.txt.gz");
    CHECK_STR(r->looked_up[2], "a.txt");
    CHECK(r->gzip_asked);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_GZIP);
    r = plan(GET("/old.css", "Accept-Encoding: gzip\r\n"));
    CHECK_INT(r->lookups, 3);
    CHECK_STR(r->plan.path, "old.css");
    r = plan(GET("/gzdir.css", "Accept-Encoding: gzip\r\n"));
    CHECK_INT(r->lookups, 3);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_GZIP);
    /* an index's .gz */
    r = plan(GET("/dir/", "Accept-Encoding: gzip\r\n"));
    CHECK_INT(r->lookups, 3);
    CHECK_STR(r->looked_up[2], "dir/index.html.gz");
    CHECK(has(r, "Content-Encoding: gzip\r\n"));
    CHECK(has(r, "Content-Type: text/html; charset=utf-8\r\n"));
    settings = (struct http_site_settings){0};
}

/* The longest path plus "/index.html" plus ".gz" fits the scratch. */
static void test_gzip_static_long_path(void)
{
    static char req[HTTP_SERVER_PATH_MAX + 128];
    static struct http_plan_work w;
    struct http_parser parser;
    static const struct http_site_settings site = {.gzip_static = true};
    struct http_plan_input in = {.site = &site, .now = MTIME};
    struct http_plan p;
    struct http_resource res;
    size_t used = 0, n;

    n = (size_t) snprintf(req, sizeof(req), "GET /");
    memset(req + n, 'a', HTTP_SERVER_PATH_MAX - 2);
    n += HTTP_SERVER_PATH_MAX - 2;
    n += (size_t) snprintf(
        req + n, sizeof(req) - n,
        "/ HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n");
    http_parser_init(&parser, NULL);
    CHECK_INT(http_parse_request(&parser, req, n, &used), HTTP_PARSE_COMPLETE);
    in.req = &parser.req;
    in.buf = req;
    in.buffered = n;
    in.head_len = used;
    memset(&w, 0x5a, sizeof(w));
    CHECK_INT(http_plan_start(&p, &in, &w), HTTP_PLAN_LOOKUP);
    CHECK_INT(p.path_len, HTTP_SERVER_PATH_MAX - 2);
    http_resource_init(&res, p.path, p.path_len, true, 0, MTIME, 0, 0);
    CHECK_INT(http_plan_resource(&p, 0, &res), HTTP_PLAN_LOOKUP);
    http_resource_init(&res, p.path, p.path_len, false, 10, MTIME, 0, 0);
    CHECK_INT(http_plan_resource(&p, 0, &res), HTTP_PLAN_LOOKUP);
    CHECK_INT(p.path_len, HTTP_SERVER_PATH_MAX - 2 + 14);
    CHECK(p.path + p.path_len < w.path + sizeof(w.path));
    CHECK(strcmp(p.path + p.path_len - 14, "/index.html.gz") == 0);
}

static void test_error_pages(void)
{
    struct http_error_page pages[HTTP_SERVER_ERROR_PAGES_MAX];
    size_t n = 0;
    const char *why = NULL;
    const char *spec =
        "404=/err/404.html, 405=/err/404.html,"
        "403=/err/missing.html,500=/err/dir.html,"
        "400=/err/big.html";
    struct run *r;

    CHECK_INT(http_error_pages_parse(spec, strlen(spec), pages,
                                     HTTP_SERVER_ERROR_PAGES_MAX, &n, &why),
              0);
    CHECK_INT(n, 5);
    CHECK_INT(pages[0].status, 404);
    CHECK_STR(pages[0].path, "err/404.html");
    settings =
        (struct http_site_settings){.error_pages = pages, .error_pages_n = n};

    r = plan(GET("/nope", ""));
    CHECK_INT(r->lookups, 2);
    CHECK_STR(r->looked_up[1], "err/404.html");
    CHECK_INT(r->plan.status, 404);
    CHECK(r->plan.error_page);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_CACHED);
    CHECK_INT(r->plan.body_len, 33);
    CHECK(has(r, "HTTP/1.1 404 Not Found\r\n"));
    CHECK(has(r, "Content-Type: text/html; charset=utf-8\r\n"));
    CHECK(has(r, "Content-Length: 33\r\n"));
    CHECK(!has(r, "ETag") && !has(r, "Last-Modified"));
    CHECK(!has(r, "Accept-Ranges"));
    CHECK(r->plan.keep_alive);
    /* a Range or a validator does not apply to an error */
    r = plan(GET("/nope", "Range: bytes=0-1\r\nIf-None-Match: *\r\n"));
    CHECK_INT(r->plan.status, 404);
    CHECK_INT(r->plan.body_len, 33);
    /* "file/" too, and a 405 with Allow, from http_plan_start */
    r = plan(GET("/a.txt/", ""));
    CHECK_INT(r->plan.status, 404);
    CHECK(r->plan.error_page);
    r = plan("DELETE /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK_INT(r->lookups, 1);
    CHECK_INT(r->plan.status, 405);
    CHECK(has(r, "Allow: GET, HEAD\r\n"));
    CHECK_INT(r->plan.body_len, 33);
    /* a missing page, a directory: the text, one lookup of the page */
    r = plan(GET("/secret", ""));
    CHECK_INT(r->lookups, 2);
    CHECK_INT(r->plan.status, 403);
    CHECK(!r->plan.error_page);
    CHECK_MEM(r->plan.text, r->plan.body_len, "403 Forbidden\n");
    r = plan(GET("/broken", ""));
    CHECK_INT(r->lookups, 2);
    CHECK_INT(r->plan.status, 500);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_TEXT);
    /* a page opened by the engine that fails: the original status */
    r = plan("HEAD /x%2fy HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK_INT(r->plan.status, 400);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_FILE);
    CHECK(r->plan.head_only);
    CHECK(has(r, "Content-Length: 100000\r\n"));
    http_plan_fail(&r->plan, -EACCES);
    CHECK_INT(r->plan.status, 400);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_TEXT);
    CHECK(!r->plan.error_page);
    /* no page configured for the status: the text, no lookup */
    r = plan(GET("/../x", ""));
    CHECK_INT(r->plan.status, 403);
    CHECK_INT(r->lookups, 1); /* the missing 403 page */

    /* outside a parsed request */
    {
        struct http_site_settings site = {.error_pages = pages,
                                          .error_pages_n = n};
        struct http_plan_input in = {.now = MTIME, .site = &site};
        struct http_plan_work w;
        struct http_plan p;

        CHECK_INT(http_plan_no_request_page(&p, &in, &w, 400),
                  HTTP_PLAN_LOOKUP);
        CHECK_STR(p.path, "err/big.html");
        struct http_resource res;
        http_resource_init(&res, p.path, p.path_len, false, 50, MTIME, 0, 0);
        CHECK_INT(http_plan_resource(&p, 0, &res), HTTP_PLAN_RESPOND);
        CHECK_INT(p.status, 400);
        CHECK_INT(p.body, HTTP_PLAN_BODY_FILE);
        CHECK(!p.keep_alive && p.linger);
        CHECK_INT(http_plan_no_request_page(&p, &in, NULL, 400),
                  HTTP_PLAN_RESPOND);
        CHECK_INT(p.body, HTTP_PLAN_BODY_TEXT);
        CHECK_INT(http_plan_no_request_page(&p, &in, &w, 408),
                  HTTP_PLAN_RESPOND);
        CHECK_INT(p.status, 408);
    }
    settings = (struct http_site_settings){0};

    /* the parser */
    n = 0;
    CHECK_INT(http_error_pages_parse("404=/a,404=/b", 13, pages, 16, &n, &why),
              0);
    CHECK_INT(n, 1);
    CHECK_STR(pages[0].path, "b"); /* the later one wins */
    static const char *bad[] = {
        "404",      "404=",      "=/a",      "200=/a",     "600=/a",
        "4040=/a",  "404=a",     "404=/",    "404=/../a",  "404=/d/",
        "404=/a?x", "404=/a%00", "404=/a,,", "40x=/a.html"};
    for (size_t i = 0; i < HTTP_ARRAY_SIZE(bad); i++) {
        n = 0;
        why = NULL;
        CHECK_INT(
            http_error_pages_parse(bad[i], strlen(bad[i]), pages, 16, &n, &why),
            -1);
        CHECK(why != NULL);
    }
    n = 0;
    CHECK_INT(http_error_pages_parse("404=/a,403=/b", 13, pages, 1, &n, &why),
              -1);
    char longpath[HTTP_ERROR_PAGE_PATH_MAX + 16] = "404=/";
    memset(longpath + 5, 'x', HTTP_ERROR_PAGE_PATH_MAX);
    longpath[5 + HTTP_ERROR_PAGE_PATH_MAX] = '\0';
    n = 0;
    CHECK_INT(
        http_error_pages_parse(longpath, strlen(longpath), pages, 16, &n, &why),
        -1);
}

static void test_mime_table(void)
{
    static struct http_mime_type types[8];
    static char store[1024];
    struct http_mime_table t = {types, 0};
    const char *text =
        "# comment\n"
        "text/x-weird weird wEiRd2 # a comment\n"
        "application/x-a\ta  b\r\n"
        "nonsense c\n"
        "a/b/c d\n"
        "text/x-dup weird\n"
        "application/x-long "
        "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee f.g\n"
        "image/x-own png\n"
        "application/x-many m1 m2 m3 m4 m5 m6 m7";

    CHECK_INT(
        http_mime_table_parse(&t, 8, store, sizeof(store), text, strlen(text)),
        8);
    CHECK_INT(t.count, 8);
    for (size_t i = 1; i < t.count; i++)
        CHECK(strcmp(t.types[i - 1].extension, t.types[i].extension) < 0);
    CHECK_STR(http_mime_table_for_path(&t, "x.weird", 7)->content_type,
              "text/x-weird; charset=utf-8");
    CHECK(http_mime_table_for_path(&t, "x.weird", 7)->compressible);
    CHECK_STR(http_mime_table_for_path(&t, "d/X.WEIRD2", 10)->content_type,
              "text/x-weird; charset=utf-8");
    CHECK_STR(http_mime_table_for_path(&t, "x.a", 3)->content_type,
              "application/x-a");
    CHECK(!http_mime_table_for_path(&t, "x.a", 3)->compressible);
    CHECK_STR(http_mime_table_for_path(&t, "x.b", 3)->content_type,
              "application/x-a");
    /* the file's type wins, the built-in compressibility stays */
    CHECK_STR(http_mime_table_for_path(&t, "i.png", 5)->content_type,
              "image/x-own");
    CHECK(!http_mime_table_for_path(&t, "i.png", 5)->compressible);
    /* skipped lines, unknown extensions: the built-in table */
    CHECK_STR(http_mime_table_for_path(&t, "x.c", 3)->content_type,
              "text/plain; charset=utf-8");
    CHECK_STR(http_mime_table_for_path(&t, "x.d", 3)->content_type,
              HTTP_MIME_DEFAULT);
    CHECK_STR(http_mime_table_for_path(&t, "x.css", 5)->content_type,
              "text/css; charset=utf-8");
    CHECK_STR(http_mime_table_for_path(&t, ".weird", 6)->content_type,
              HTTP_MIME_DEFAULT);
    CHECK_STR(http_mime_table_for_path(NULL, "x.css", 5)->content_type,
              "text/css; charset=utf-8");
    /* capped at the room given: m1..m3 made it, m4.. not */
    CHECK_STR(http_mime_table_for_path(&t, "x.m3", 4)->content_type,
              "application/x-many");
    CHECK_STR(http_mime_table_for_path(&t, "x.m4", 4)->content_type,
              HTTP_MIME_DEFAULT);
    /* storage too small: stops, keeps what fits */
    CHECK(http_mime_table_parse(&t, 8, store, 20, text, strlen(text)) < 8);
    for (size_t i = 0; i < t.count; i++)
        CHECK(t.types[i].extension && t.types[i].content_type);

    /* through the planner: the table before core's */
    settings = (struct http_site_settings){.mime = &t};
    http_mime_table_parse(&t, 8, store, sizeof(store), text, strlen(text));
    struct run *r = plan(GET("/f.weird", ""));
    CHECK(has(r, "Content-Type: text/x-weird; charset=utf-8\r\n"));
    r = plan(GET("/img.png", ""));
    CHECK(has(r, "Content-Type: image/x-own\r\n"));
    r = plan(GET("/a.txt", ""));
    CHECK(has(r, "Content-Type: text/plain; charset=utf-8\r\n"));

    /* a resource that kept its type from this table: the same answer, and
     * the kept type is the one used (no lookup per request) */
    memo_from = &t;
    r = plan(GET("/f.weird", ""));
    CHECK(has(r, "Content-Type: text/x-weird; charset=utf-8\r\n"));
    r = plan(GET("/a.txt", ""));
    CHECK(has(r, "Content-Type: text/plain; charset=utf-8\r\n"));
    static const struct http_mime_type kept = {"weird", "text/x-kept", true};
    memo_type = &kept;
    r = plan(GET("/f.weird", ""));
    CHECK(has(r, "Content-Type: text/x-kept\r\n"));
    /* kept from another table: looked up in the plan's */
    struct http_mime_table other = t;
    settings.mime = &other;
    r = plan(GET("/f.weird", ""));
    CHECK(has(r, "Content-Type: text/x-weird; charset=utf-8\r\n"));
    memo_from = NULL;
    memo_type = NULL;
    settings = (struct http_site_settings){0};
}

/* A directory name too long for a Location: 414, never a bad Location. */
static void test_long_location(void)
{
    static char req[8192];
    struct run *r;
    size_t n;

    n = (size_t) snprintf(req, sizeof(req), "GET /long");
    memset(req + n, 'd', 1000);
    n += 1000;
    snprintf(req + n, sizeof(req) - n, " HTTP/1.1\r\nHost: x\r\n\r\n");
    r = plan(req);
    CHECK_INT(r->plan.status, 301);
    CHECK(r->head_len > 1000 && r->head_len < 2048);
    CHECK(strstr(r->head, "Location: /long") != NULL);

    n = (size_t) snprintf(req, sizeof(req), "GET /long");
    for (int i = 0; i < 400; i++)
        n += (size_t) snprintf(req + n, sizeof(req) - n, "%%C3%%A9");
    snprintf(req + n, sizeof(req) - n, " HTTP/1.1\r\nHost: x\r\n\r\n");
    r = plan(req);
    CHECK_INT(r->plan.status, 414);
    CHECK(r->head[0] && !has(r, "Location"));
    CHECK_MEM(r->plan.text, r->plan.body_len, "414 URI Too Long\n");
}

#define X512                                                                   \
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" \
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" \
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" \
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" \
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" \
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" \
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" \
    "xxxxxxxx"

/* The operator's fields: checked when added, on every response or a
 * path's, with CORS and its preflight. */
#define PREFLIGHT(path, acrh)                               \
    "OPTIONS " path                                         \
    " HTTP/1.1\r\nHost: x\r\nOrigin: https://o.example\r\n" \
    "Access-Control-Request-Method: GET\r\n" acrh "\r\n"

static void test_add_headers(void)
{
    static struct http_headers t;
    const char *why = NULL;
    char line[64];

#define ADD(s) http_headers_add(&t, s, strlen(s), &why)
    memset(&t, 0, sizeof(t)); /* an empty table */
    CHECK_INT(ADD("X-Frame-Options: DENY"), 0);
    CHECK_INT(ADD("  /dir/  Cache-Control:  public, max-age=60  "), 0);
    CHECK_INT(ADD("/a.txt X-A: 1"), 0);
    CHECK_INT(ADD("/ X-Root: every"), 0);
    /* refused, the table unchanged */
    CHECK_INT(ADD("X-Bad: a\r\nSet-Cookie: x=1"), -1);
    CHECK(strstr(why, "CR or LF") != NULL);
    CHECK_INT(ADD("X-Bad: a\nb"), -1);
    CHECK_INT(ADD("X-Bad: a\001b"), -1);
    CHECK_INT(ADD("Bad Name: x"), -1);
    CHECK_INT(ADD("X-Empty:   "), -1);
    CHECK_INT(ADD("no colon"), -1);
    CHECK_INT(ADD("content-length: 5"), -1);
    CHECK(strstr(why, "server sets") != NULL);
    CHECK_INT(ADD("Connection: close"), -1);
    CHECK_INT(ADD("/../x X-A: 1"), -1);
    CHECK_INT(ADD("/a?b X-A: 1"), -1);
    CHECK_INT(t.n, 4);
    CHECK_INT(t.prefixes_used, (int) strlen("/dir/") + (int) strlen("/a.txt"));
    settings.headers = &t;

    struct run *r = plan(GET("/a.txt", ""));
    CHECK_INT(r->plan.status, 200);
    CHECK(has(r, "\r\nX-Frame-Options: DENY\r\n"));
    CHECK(has(r, "\r\nX-A: 1\r\n"));
    CHECK(has(r, "\r\nX-Root: every\r\n"));
    CHECK(!has(r, "Cache-Control"));
    CHECK_INT(http_head_memo_kind(&r->plan), HTTP_HEAD_MEMO_NONE);
    r = plan(GET("/dir/", ""));
    CHECK(has(r, "\r\nCache-Control: public, max-age=60\r\n"));
    CHECK(!has(r, "X-A:"));
    r = plan(GET("/%64ir/index.html", "")); /* decoded before matching */
    CHECK(has(r, "Cache-Control: public"));
    r = plan(GET("/dir", "")); /* the 301: not beneath /dir/ */
    CHECK_INT(r->plan.status, 301);
    CHECK(!has(r, "Cache-Control") && has(r, "X-Frame-Options: DENY"));
    r = plan(GET("/missing", ""));
    CHECK_INT(r->plan.status, 404);
    CHECK(has(r, "X-Frame-Options: DENY"));
    r = plan("POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    CHECK_INT(r->plan.status, 405);
    CHECK(has(r, "X-A: 1"));

    /* CORS off: OPTIONS stays 405, even a preflight */
    r = plan(PREFLIGHT("/a.txt", ""));
    CHECK_INT(r->plan.status, 405);
    CHECK(!has(r, "Access-Control"));

    CHECK_INT(http_headers_cors(&t, "https://app.example", 19, &why), 0);
    r = plan(GET("/a.txt", ""));
    CHECK(has(r,
              "\r\nAccess-Control-Allow-Origin: https://app.example\r\n"
              "Vary: Origin\r\n"));
    r = plan(
        "OPTIONS /a.txt HTTP/1.1\r\nHost: x\r\nOrigin: https://o.example"
        "\r\naccess-control-request-method: PUT\r\n"
        "Access-Control-Request-Headers: content-type, x-token\r\n\r\n");
    CHECK_INT(r->plan.status, 204);
    CHECK(r->plan.keep_alive);
    CHECK(!has(r, "Content-Length") && !has(r, "Content-Type"));
    CHECK(has(r, "\r\nAccess-Control-Allow-Methods: GET, HEAD\r\n"));
    CHECK(
        has(r, "\r\nAccess-Control-Allow-Headers: content-type, x-token\r\n"));
    CHECK(has(r, "\r\nAccess-Control-Max-Age: 86400\r\n"));
    CHECK(has(r, "Access-Control-Allow-Origin: https://app.example"));
    CHECK(has(r, "X-A: 1"));
    /* not a preflight: OPTIONS as before */
    r = plan(
        "OPTIONS /a.txt HTTP/1.1\r\nHost: x\r\nOrigin: https://o.example"
        "\r\n\r\n");
    CHECK_INT(r->plan.status, 405);
    r = plan("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK_INT(r->plan.status, 405);
    /* Allow-Headers only for names */
    r = plan(PREFLIGHT("/", "Access-Control-Request-Headers: a;b\r\n"));
    CHECK_INT(r->plan.status, 204);
    CHECK(!has(r, "Access-Control-Allow-Headers"));
    CHECK_INT(http_headers_cors(&t, "*", 1, &why), 0);
    r = plan(GET("/a.txt", ""));
    CHECK(has(r, "\r\nAccess-Control-Allow-Origin: *\r\n"));
    CHECK(!has(r, "Vary: Origin"));
    CHECK_INT(http_headers_cors(&t, "ftp://x", 7, &why), -1);
    CHECK_INT(http_headers_cors(&t, "https://x/path", 14, &why), -1);
    CHECK_INT(http_headers_cors(&t, "https://x\r\nA: b", 15, &why), -1);
    CHECK_INT(http_headers_cors(&t, "", 0, &why), 0);
    r = plan(GET("/a.txt", ""));
    CHECK(!has(r, "Access-Control"));

    /* 32 fields of the budget's bytes fit the head buffer, a 33rd does
     * not fit the table */
    memset(&t, 0, sizeof(t)); /* an empty table */
    for (int i = 0; i < HTTP_ADD_HEADERS_MAX; i++) {
        /* each line "X-Hnn: v...v\r\n" is its share of the budget */
        char spec[128];
        size_t share = HTTP_ADD_HEADERS_BYTES / HTTP_ADD_HEADERS_MAX;
        int n = snprintf(spec, sizeof(spec), "/ X-H%02d: ", i);
        size_t v = share - strlen("X-Hnn: ") - 2;
        memset(spec + n, 'v', v);
        CHECK_INT(http_headers_add(&t, spec, (size_t) n + v, &why), 0);
    }
    CHECK_INT(t.lines_used, HTTP_ADD_HEADERS_BYTES);
    snprintf(line, sizeof(line), "X-More: 1");
    CHECK_INT(ADD(line), -1);
    CHECK(strstr(why, "32") != NULL);
    static char origin[HTTP_CORS_ORIGIN_MAX + 1];
    memcpy(origin, "https://", 8);
    memset(origin + 8, 'o', HTTP_CORS_ORIGIN_MAX - 8);
    CHECK_INT(http_headers_cors(&t, origin, HTTP_CORS_ORIGIN_MAX, &why), 0);
    r = plan(
        "OPTIONS /names/ HTTP/1.1\r\nHost: x\r\nOrigin: https://o\r\n"
        "Access-Control-Request-Method: GET\r\n"
        "Access-Control-Request-Headers: " X512 "\r\n\r\n");
    CHECK_INT(r->plan.status, 204);
    CHECK(has(r, "X-H31: vvv"));
    CHECK(has(r, "Access-Control-Allow-Headers: xxxx"));
    settings.headers = NULL;
#undef ADD
}

/* The largest head the planner can make fits HTTP_SERVER_HEAD_BUF. */
static void test_head_bound(void)
{
    static char location[HTTP_PLAN_LOCATION_MAX];
    static char type[HTTP_MIME_TYPE_LEN_MAX + 32];
    char etag[HTTP_ETAG_MAX + 4];
    char buf[HTTP_SERVER_HEAD_BUF];
    struct http_buf b;
    struct http_response_head h = {0};

    memset(location, 'L', sizeof(location) - 1);
    memset(type, 't', HTTP_MIME_TYPE_LEN_MAX);
    strcat(type, "; charset=utf-8");
    memset(etag, 'e', sizeof(etag) - 1);
    etag[sizeof(etag) - 1] = '\0';
    h.status = 431;
    h.now_seconds = HTTP_I64_MAX;
    h.content_type = type;
    h.content_length = HTTP_I64_MAX;
    h.chunked = true;
    h.has_last_modified = true;
    h.last_modified = HTTP_I64_MAX;
    h.etag = etag;
    h.has_max_age = true;
    h.max_age = 0xffffffffu;
    h.expires = HTTP_I64_MAX;
    h.accept_ranges = true;
    h.has_content_range = true;
    h.range_first = h.range_last = h.range_size = HTTP_U64_MAX;
    h.content_encoding = "gzip";
    h.vary_accept_encoding = true;
    h.location = location;
    h.allow = "GET, HEAD";
    h.keep_alive = true;
    h.keep_alive_timeout_seconds = 0xffffffffu;
    h.keep_alive_max = 0xffffffffu;
    http_buf_init(&b, buf, sizeof(buf));
    CHECK(http_response_build(&b, &h) > 0);

    /* should one not fit, the plan becomes a 500 that does */
    struct run *r = plan(GET("/a.txt", ""));
    CHECK_INT(http_plan_head(&r->plan, buf, 40), -1);
    http_plan_head_failed(&r->plan);
    CHECK_INT(r->plan.status, 500);
    CHECK(!r->plan.keep_alive);
    CHECK(r->plan.more);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_TEXT);
    CHECK(http_plan_head(&r->plan, buf, sizeof(buf)) > 0);
}

static void test_dotfiles(void)
{
    struct engine e;

    /* hidden: answered before any lookup */
    CHECK_INT(start(&e, GET("/.env", ""), true, false), HTTP_PLAN_RESPOND);
    CHECK_INT(e.plan.status, 404);
    CHECK_INT(start(&e, GET("/a/%2egit/config", ""), true, false),
              HTTP_PLAN_RESPOND);
    CHECK_INT(e.plan.status, 404);
    CHECK_INT(start(&e, GET("/.well-known/../.env", ""), true, false),
              HTTP_PLAN_RESPOND);
    CHECK_INT(e.plan.status, 404);
    CHECK_INT(start(&e, GET("/.well-known/acme", ""), true, false),
              HTTP_PLAN_LOOKUP);
    CHECK_INT(start(&e, GET("/a/./b", ""), true, false), HTTP_PLAN_LOOKUP);
    /* allowed */
    memset(&e, 0, sizeof(e));
    {
        const char *req = GET("/.env", "");
        size_t used = 0;

        http_parser_init(&e.parser, NULL);
        CHECK_INT(http_parse_request(&e.parser, req, strlen(req), &used), 0);
        e.in.req = &e.parser.req;
        e.in.buf = req;
        e.in.buffered = strlen(req);
        e.in.head_len = used;
        e.site.dotfiles = true;
        e.in.site = &e.site;
        CHECK_INT(http_plan_start(&e.plan, &e.in, &e.work), HTTP_PLAN_LOOKUP);
        CHECK_STR(e.plan.path, ".env");
    }
}

/* A kept head (http_head_memo) gives the bytes a built one would, with the
 * Date of the moment, and only to a plan it was made for. */
static void test_head_memo(void)
{
    static struct http_head_memo memo, other;
    char buf[HTTP_SERVER_HEAD_BUF];
    struct run *r;
    int n;

    settings_date = "Mon, 20 Nov 2023 10:00:00 GMT";
    r = plan(GET("/a.txt", ""));
    CHECK(http_head_memo_make(&r->plan, &memo));
    CHECK_INT(memo.len, r->head_len);
    CHECK_MEM(memo.head, memo.len, r->head);

    /* a second later, another connection: the same head, the new Date */
    settings_date = "Mon, 20 Nov 2023 10:00:01 GMT";
    r = plan(GET("/a.txt", ""));
    n = http_plan_head_memo(&r->plan, http_head_memo_kind(&r->plan), &memo, buf,
                            sizeof(buf));
    CHECK_INT(n, r->head_len);
    CHECK_MEM(buf, n, r->head);
    CHECK(strstr(r->head, "Date: Mon, 20 Nov 2023 10:00:01 GMT\r\n"));
    CHECK_INT(http_plan_head_memo(&r->plan, http_head_memo_kind(&r->plan),
                                  &memo, buf, 10),
              0); /* short */

    /* another disposition, another type or framing: not this memo */
    r = plan(GET("/a.txt", "Connection: close\r\n"));
    CHECK_INT(http_plan_head_memo(&r->plan, http_head_memo_kind(&r->plan),
                                  &memo, buf, sizeof(buf)),
              0);
    CHECK(http_head_memo_make(&r->plan, &other));
    CHECK(strstr(other.head, "Connection: close\r\n"));
    r = plan(GET("/img.png", ""));
    CHECK_INT(http_plan_head_memo(&r->plan, http_head_memo_kind(&r->plan),
                                  &memo, buf, sizeof(buf)),
              0);

    /* heads that depend on the request or the clock are never kept */
    static const char *const not_kept[] = {
        GET("/a.txt", "Range: bytes=0-3\r\n"),
        GET("/a.txt", "If-None-Match: \"x\"\r\nRange: bytes=0-99\r\n"),
        GET("/nothing", ""),
        GET("/dir/", ""),
        "GET /a.txt HTTP/1.0\r\n\r\n",
    };
    for (size_t i = 0; i < HTTP_ARRAY_SIZE(not_kept); i++) {
        r = plan(not_kept[i]);
        if (r->plan.status == 200 && r->plan.head.version == 11 &&
            !r->plan.head.content_encoding && !r->plan.head.chunked &&
            r->plan.body != HTTP_PLAN_BODY_LISTING)
            continue; /* planned as the plain 200 after all */
        memset(&other, 0, sizeof(other));
        CHECK(!http_head_memo_make(&r->plan, &other));
        CHECK_INT(http_plan_head_memo(&r->plan, http_head_memo_kind(&r->plan),
                                      &memo, buf, sizeof(buf)),
                  0);
    }
    /* a 304 is a kind of its own: not the 200's memo, but kept itself,
     * and given to the next 304 whichever condition met it */
    settings_date = "Mon, 20 Nov 2023 10:00:02 GMT";
    r = plan(GET("/a.txt", "If-None-Match: *\r\n"));
    CHECK_INT(r->plan.status, 304);
    CHECK_INT(http_head_memo_kind(&r->plan), HTTP_HEAD_MEMO_304);
    CHECK_INT(http_plan_head_memo(&r->plan, HTTP_HEAD_MEMO_304, &memo, buf,
                                  sizeof(buf)),
              0);
    CHECK(http_head_memo_make(&r->plan, &other));
    settings_date = "Mon, 20 Nov 2023 10:00:03 GMT";
    r = plan(GET("/a.txt",
                 "If-Modified-Since: Mon, 20 Nov 2023 10:00:00 "
                 "GMT\r\n"));
    if (r->plan.status == 304) {
        n = http_plan_head_memo(&r->plan, HTTP_HEAD_MEMO_304, &other, buf,
                                sizeof(buf));
        CHECK_INT(n, r->head_len);
        CHECK_MEM(buf, n, r->head);
    }
    r = plan(GET("/a.txt", "If-None-Match: *\r\n"));
    n = http_plan_head_memo(&r->plan, HTTP_HEAD_MEMO_304, &other, buf,
                            sizeof(buf));
    CHECK_INT(n, r->head_len);
    CHECK_MEM(buf, n, r->head);
    CHECK(strstr(r->head, "Date: Mon, 20 Nov 2023 10:00:03 GMT\r\n"));
    CHECK(!strstr(r->head, "Content-Length"));
    /* Expires moves with the clock */
    settings.expires = 60;
    r = plan(GET("/a.txt", ""));
    CHECK(!http_head_memo_make(&r->plan, &other));
    CHECK_INT(http_plan_head_memo(&r->plan, http_head_memo_kind(&r->plan),
                                  &memo, buf, sizeof(buf)),
              0);
    settings.expires = 0;
    settings_date = NULL;
}

static void test_no_listings(void)
{
    struct run *r;

    settings = (struct http_site_settings){.no_listings = true};
    /* a directory without an index: 403, not a listing */
    r = plan(GET("/names/", ""));
    CHECK_INT(r->plan.status, 403);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_TEXT);
    CHECK(r->plan.keep_alive);
    CHECK(!http_plan_body_follows(&r->plan));
    r = plan(GET("/", ""));
    CHECK_INT(r->plan.status, 403);
    /* an index is still served */
    r = plan(GET("/dir/", ""));
    CHECK_INT(r->plan.status, 200);
    CHECK_STR(r->plan.path, "dir/index.html");
    /* and the 403 takes its custom page */
    static struct http_error_page pages[1];
    size_t n = 0;
    const char *why = NULL;
    CHECK_INT(
        http_error_pages_parse("403=/err/404.html", 17, pages, 1, &n, &why), 0);
    settings.error_pages = pages;
    settings.error_pages_n = n;
    r = plan(GET("/names/", ""));
    CHECK_INT(r->plan.status, 403);
    CHECK_STR(r->plan.path, "err/404.html");
    settings = (struct http_site_settings){0};
    r = plan(GET("/names/", ""));
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_LISTING);

    /* no room for the listing now: 503 with Retry-After, connection kept */
    http_plan_busy(&r->plan, 2);
    CHECK_INT(r->plan.status, 503);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_TEXT);
    CHECK(r->plan.keep_alive);
    r->head_len = http_plan_head(&r->plan, r->head, sizeof(r->head) - 1);
    CHECK(r->head_len > 0);
    r->head[r->head_len > 0 ? r->head_len : 0] = '\0';
    CHECK(has(r, "Retry-After: 2\r\n"));
    CHECK(has(r, "Content-Length: 24\r\n")); /* "503 Service Unavailable\n" */
    /* a later error head has none */
    http_plan_error(&r->plan, 500);
    r->head_len = http_plan_head(&r->plan, r->head, sizeof(r->head) - 1);
    CHECK(r->head_len > 0);
    r->head[r->head_len > 0 ? r->head_len : 0] = '\0';
    CHECK(has(r, "500 Internal Server Error"));
    CHECK(!has(r, "Retry-After"));
}

/* No settings (a NULL site): every operator setting off or its default,
 * and the gzip copies off. */
static void test_no_site(void)
{
    struct run *r;

    settings_none = true;
    r = plan_ex(GET("/a.txt", "Accept-Encoding: gzip\r\n"), 7, true);
    CHECK(!r->gzip_asked);
    CHECK_INT(r->plan.status, 200);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_CACHED);
    CHECK(!has(r, "Content-Encoding"));
    CHECK(!has(r, "Cache-Control"));
    CHECK(!has(r, "Vary"));
    /* hidden paths are not looked up */
    r = plan(GET("/.env", ""));
    CHECK_INT(r->lookups, 0);
    CHECK_INT(r->plan.status, 404);
    /* index.html, else the listing */
    r = plan(GET("/dir/", ""));
    CHECK_STR(r->looked_up[1], "dir/index.html");
    CHECK_INT(r->plan.status, 200);
    r = plan(GET("/names/", ""));
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_LISTING);
    /* no fallback, no custom page: the built-in 404 */
    r = plan(GET("/missing", ""));
    CHECK_INT(r->lookups, 1);
    CHECK_INT(r->plan.status, 404);
    CHECK_INT(r->plan.body, HTTP_PLAN_BODY_TEXT);
    settings_none = false;
}

int main(void)
{
    test_no_site();
    test_head_memo();
    test_dotfiles();
    test_errno_status();
    test_dispatch_errors();
    test_lookup_errors();
    test_regular();
    test_gzip();
    test_conditional();
    test_range();
    test_multi_range();
    test_directories();
    test_index_files();
    test_fallback();
    test_connection();
    test_no_request();
    test_helpers();
    test_expires();
    test_gzip_static();
    test_gzip_static_long_path();
    test_error_pages();
    test_mime_table();
    test_long_location();
    test_head_bound();
    test_add_headers();
    test_no_listings();
    UNIT_DONE();
}
