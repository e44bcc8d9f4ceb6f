/* Unit tests of the response planner: every status it can produce, each
 * header decision, body sources and connection disposition. Requests are
 * real ones, parsed by core's parser; the "file system" is a table of
 * resources the test answers lookups from, as an engine's cache would. */
#include <errno.h>
#include <stdio.h>

#include "http_core.h"
#include "unit.h"

#define MTIME 1700000000

struct fake_file {
    const char *path;
    bool is_dir;
    uint64_t size;
    bool cached;
    int err; /* lookup fails with this (-errno) */
};

static const struct fake_file files[] = {
    {".", true, 0, false, 0},
    {"a.txt", false, 10, true, 0},
    {"big.html", false, 100000, false, 0},
    {"empty.txt", false, 0, true, 0},
    {"img.png", false, 500, true, 0},
    {"dir", true, 0, false, 0},
    {"dir/index.html", false, 20, true, 0},
    {"names", true, 0, false, 0},
    {"secret", false, 0, false, -EACCES},
    {"outside", false, 0, false, -EXDEV},
    {"broken", false, 0, false, -EIO},
    {"names/index.html", true, 0, false, 0}, /* a directory: not an index */
};

struct run {
    struct http_parser parser;
    struct http_header headers[HTTP_SERVER_MAX_STORED_HEADERS];
    struct http_plan_input in;
    struct http_plan_work work;
    struct http_plan plan;
    struct http_resource res;
    char head[HTTP_SERVER_HEAD_BUF];
    int head_len;
    int lookups;
    bool gzip_asked;
    char looked_up[2][64];
};

/* What the engine's lookup would say. */
static int lookup(struct run *r, const char *path, struct http_resource *res)
{
    for (size_t i = 0; i < HTTP_ARRAY_SIZE(files); i++) {
        const struct fake_file *f = &files[i];
        if (strcmp(f->path, path) != 0)
            continue;
        if (f->err)
            return f->err;
        http_resource_init(res, path, strlen(path), f->is_dir, f->size, MTIME);
        res->body_cached = f->cached;
        (void) r;
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
    r.in.gzip = true;
    r.in.now = MTIME + 100;

    enum http_plan_step step =
        http_plan_start(&r.plan, &r.in, with_work ? &r.work : NULL);
    while (step == HTTP_PLAN_LOOKUP) {
        CHECK(r.plan.path[r.plan.path_len] == '\0');
        if (r.lookups < 2)
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
    e->in.gzip = gzip;
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
        http_resource_init(&res, "a.txt", 5, false, 10, MTIME);
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
    CHECK(has(r, "Connection: close\r\n"));

    r = plan(
        "GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        "GET /a.txt HTTP/1.1\r\n");
    CHECK(!r->plan.keep_alive);
    CHECK(r->plan.linger); /* bytes follow: drop them before closing */
    CHECK(!r->plan.more);

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

    http_resource_init(&res, "x.css", 5, false, 100, 5);
    CHECK(res.mime->compressible);
    CHECK_STR(res.etag, "\"5-64\"");
    CHECK(http_resource_keep_body(&res, 400));
    CHECK(!http_resource_keep_body(&res, 399)); /* over a quarter */
    res.size = HTTP_SERVER_SMALL_FILE_MAX + 1;
    CHECK(!http_resource_keep_body(&res, 1ULL << 40));
    res.size = 0;
    CHECK(!http_resource_keep_body(&res, 1ULL << 40));
    http_resource_init(&res, "d", 1, true, 4096, 5);
    CHECK(!http_resource_keep_body(&res, 1ULL << 40));
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
        e.in.dotfiles = true;
        CHECK_INT(http_plan_start(&e.plan, &e.in, &e.work), HTTP_PLAN_LOOKUP);
        CHECK_STR(e.plan.path, ".env");
    }
}

int main(void)
{
    test_dotfiles();
    test_errno_status();
    test_dispatch_errors();
    test_lookup_errors();
    test_regular();
    test_gzip();
    test_conditional();
    test_range();
    test_directories();
    test_connection();
    test_no_request();
    test_helpers();
    UNIT_DONE();
}
