/* Unit tests of the request parser and the chunked decoder. */
#include <stdlib.h>

#include "http_internal.h"
#include "http_limits.h"
#include "http_parser.h"
#include "unit.h"

#define MAX_FIELDS 64

struct parsed {
    struct http_parser p;
    struct http_header h[MAX_FIELDS];
    size_t consumed;
    int rc;
};

static int parse(struct parsed *r, const char *s, size_t len)
{
    memset(r, 0, sizeof(*r));
    http_parser_init(&r->p, NULL);
    http_parser_set_header_store(&r->p, r->h, MAX_FIELDS);
    r->rc = http_parse_request(&r->p, s, len, &r->consumed);
    return r->rc;
}

static int parse_str(struct parsed *r, const char *s)
{
    return parse(r, s, strlen(s));
}

#define SLICE_IS(buf, sl, str) CHECK_MEM((buf) + (sl).off, (sl).len, (str))

/* Same answer whether the bytes come at once, cut at any one point, or one
 * at a time. Returns the one-shot result for further checks. */
static int parse_every_split(const char *s, size_t len)
{
    struct parsed whole, part;
    size_t k, c2;
    int rc;

    parse(&whole, s, len);
    for (k = 0; k < len; k++) {
        rc = parse(&part, s, k);
        if (rc == HTTP_PARSE_INCOMPLETE)
            rc = http_parse_request(&part.p, s, len, &c2);
        else
            c2 = part.consumed;
        if (rc != whole.rc || (rc == 0 && c2 != whole.consumed)) {
            fprintf(stderr, "split at %zu of %zu: rc %d vs %d\n", k, len, rc,
                    whole.rc);
            return -1000;
        }
        if (rc == 0 && (memcmp(&part.p.req, &whole.p.req, sizeof(part.p.req)) ||
                        memcmp(part.h, whole.h, sizeof(part.h)))) {
            fprintf(stderr, "split at %zu: different results\n", k);
            return -1000;
        }
    }
    /* byte at a time through one parser */
    memset(&part, 0, sizeof(part));
    http_parser_init(&part.p, NULL);
    http_parser_set_header_store(&part.p, part.h, MAX_FIELDS);
    rc = HTTP_PARSE_INCOMPLETE;
    for (k = 1; k <= len && rc == HTTP_PARSE_INCOMPLETE; k++)
        rc = http_parse_request(&part.p, s, k, &c2);
    if (rc != whole.rc) {
        fprintf(stderr, "byte at a time: rc %d vs %d\n", rc, whole.rc);
        return -1000;
    }
    return whole.rc;
}

static int split_str(const char *s)
{
    return parse_every_split(s, strlen(s));
}

static void test_simple_get(void)
{
    const char *s =
        "GET /index.html?q=1 HTTP/1.1\r\n"
        "Host: example.com:8080\r\n"
        "User-Agent: t\r\n"
        "Accept-Encoding: gzip, deflate\r\n"
        "If-None-Match: \"abc\"\r\n"
        "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
        "Range: bytes=0-9\r\n"
        "Keep-Alive: timeout=5\r\n"
        "X-Empty:\r\n"
        "X-Pad:   spaced value \t \r\n"
        "\r\n";
    struct parsed r;

    CHECK_INT(parse_str(&r, s), HTTP_PARSE_COMPLETE);
    CHECK_INT(r.consumed, strlen(s));
    CHECK_INT(r.p.req.head_length, strlen(s));
    CHECK_INT(r.p.req.method, HTTP_METHOD_GET);
    SLICE_IS(s, r.p.req.method_token, "GET");
    SLICE_IS(s, r.p.req.target, "/index.html?q=1");
    SLICE_IS(s, r.p.req.path, "/index.html?q=1");
    CHECK_INT(r.p.req.target_form, HTTP_TARGET_ORIGIN);
    CHECK_INT(r.p.req.version, HTTP_VERSION_1_1);
    SLICE_IS(s, r.p.req.host, "example.com:8080");
    SLICE_IS(s, r.p.req.accept_encoding, "gzip, deflate");
    SLICE_IS(s, r.p.req.if_none_match, "\"abc\"");
    SLICE_IS(s, r.p.req.if_modified_since, "Sun, 06 Nov 1994 08:49:37 GMT");
    SLICE_IS(s, r.p.req.range, "bytes=0-9");
    SLICE_IS(s, r.p.req.keep_alive_field, "timeout=5");
    CHECK(r.p.req.keep_alive);
    CHECK_INT(r.p.req.body_framing, HTTP_BODY_NONE);
    CHECK_INT(r.p.req.header_count, 9);
    SLICE_IS(s, r.h[1].name, "User-Agent");
    SLICE_IS(s, r.h[1].value, "t");
    SLICE_IS(s, r.h[7].name, "X-Empty");
    CHECK_INT(r.h[7].value.len, 0);
    SLICE_IS(s, r.h[8].value, "spaced value");
    CHECK(http_request_find_header(&r.p, s, "user-agent") == &r.h[1]);
    CHECK(http_request_find_header(&r.p, s, "x-missing") == NULL);
    CHECK(r.p.req.seen & HTTP_SEEN_RANGE);
    CHECK(!(r.p.req.seen & HTTP_SEEN_CONTENT_LENGTH));
    CHECK_INT(split_str(s), HTTP_PARSE_COMPLETE);

    /* a finished parser keeps answering the same */
    CHECK_INT(http_parse_request(&r.p, s, strlen(s), &r.consumed), 0);
    CHECK_INT(r.consumed, strlen(s));
}

static void test_incomplete(void)
{
    struct parsed r;

    CHECK_INT(parse_str(&r, ""), HTTP_PARSE_INCOMPLETE);
    CHECK_INT(parse_str(&r, "GET / HTTP/1.1\r\nHost: a\r\n"),
              HTTP_PARSE_INCOMPLETE);
    CHECK_INT(parse_str(&r, "GET / HTTP/1.1\r\nHost: a\r\n\r"),
              HTTP_PARSE_INCOMPLETE);
    CHECK_INT(r.consumed, 0);
    /* a caller passing fewer bytes than before gets "incomplete", not a
     * bogus limit error */
    CHECK_INT(parse_str(&r, "GET / HTTP/1.1\r\nHost: a\r\nX: y"),
              HTTP_PARSE_INCOMPLETE);
    CHECK_INT(http_parse_request(&r.p, "GET", 3, &r.consumed),
              HTTP_PARSE_INCOMPLETE);
}

static void test_methods(void)
{
    static const struct {
        const char *req;
        enum http_method m;
    } cases[] = {
        {"GET / HTTP/1.0\r\n\r\n", HTTP_METHOD_GET},
        {"HEAD / HTTP/1.0\r\n\r\n", HTTP_METHOD_HEAD},
        {"POST / HTTP/1.0\r\n\r\n", HTTP_METHOD_POST},
        {"PUT / HTTP/1.0\r\n\r\n", HTTP_METHOD_PUT},
        {"DELETE / HTTP/1.0\r\n\r\n", HTTP_METHOD_DELETE},
        {"OPTIONS * HTTP/1.0\r\n\r\n", HTTP_METHOD_OPTIONS},
        {"TRACE / HTTP/1.0\r\n\r\n", HTTP_METHOD_TRACE},
        {"PATCH / HTTP/1.0\r\n\r\n", HTTP_METHOD_PATCH},
        {"CONNECT example.com:443 HTTP/1.0\r\n\r\n", HTTP_METHOD_CONNECT},
        {"PROPFIND / HTTP/1.0\r\n\r\n", HTTP_METHOD_OTHER},
        {"get / HTTP/1.0\r\n\r\n", HTTP_METHOD_OTHER},
        {"M-SEARCH / HTTP/1.0\r\n\r\n", HTTP_METHOD_OTHER},
    };
    size_t i;
    struct parsed r;

    for (i = 0; i < HTTP_ARRAY_SIZE(cases); i++) {
        CHECK_INT(parse_str(&r, cases[i].req), HTTP_PARSE_COMPLETE);
        CHECK_INT(r.p.req.method, cases[i].m);
    }
    parse_str(&r, "PROPFIND / HTTP/1.0\r\n\r\n");
    SLICE_IS("PROPFIND / HTTP/1.0\r\n\r\n", r.p.req.method_token, "PROPFIND");
    CHECK_STR(http_method_name(HTTP_METHOD_HEAD), "HEAD");
    CHECK_STR(http_method_name(HTTP_METHOD_OTHER), "OTHER");

    CHECK_INT(parse_str(&r, "G(T / HTTP/1.1\r\nHost: a\r\n\r\n"),
              HTTP_PARSE_ERR_METHOD);
    CHECK_INT(parse_str(&r, "GE\x01T / HTTP/1.1\r\n\r\n"),
              HTTP_PARSE_ERR_METHOD);
    CHECK_INT(parse_str(&r, " GET / HTTP/1.1\r\n\r\n"),
              HTTP_PARSE_ERR_REQUEST_LINE);
    CHECK_INT(parse_str(&r, "GET  / HTTP/1.1\r\n\r\n"),
              HTTP_PARSE_ERR_REQUEST_LINE);
    CHECK_INT(parse_str(&r, "GET\t/ HTTP/1.1\r\n\r\n"),
              HTTP_PARSE_ERR_REQUEST_LINE);
    CHECK_INT(parse_str(&r, "GET /  HTTP/1.1\r\n\r\n"), HTTP_PARSE_ERR_VERSION);
    CHECK_INT(parse_str(&r, "GET /\r\n\r\n"), HTTP_PARSE_ERR_REQUEST_LINE);
    CHECK_INT(parse_str(&r, "GET\r\n\r\n"), HTTP_PARSE_ERR_REQUEST_LINE);
}

static void test_versions(void)
{
    struct parsed r;

    CHECK_INT(parse_str(&r, "GET / HTTP/1.0\r\n\r\n"), 0);
    CHECK_INT(r.p.req.version, HTTP_VERSION_1_0);
    CHECK(!r.p.req.keep_alive);
    CHECK_INT(parse_str(&r, "GET / HTTP/2.0\r\n\r\n"),
              HTTP_PARSE_ERR_VERSION_UNSUPPORTED);
    CHECK_INT(parse_str(&r, "GET / HTTP/1.2\r\n\r\n"),
              HTTP_PARSE_ERR_VERSION_UNSUPPORTED);
    CHECK_INT(parse_str(&r, "GET / HTTP/0.9\r\n\r\n"),
              HTTP_PARSE_ERR_VERSION_UNSUPPORTED);
    CHECK_INT(parse_str(&r, "GET / HTTP/3.0\r\n\r\n"),
              HTTP_PARSE_ERR_VERSION_UNSUPPORTED);
    CHECK_INT(http_parse_error_status(HTTP_PARSE_ERR_VERSION_UNSUPPORTED), 505);
    CHECK_INT(parse_str(&r, "GET / http/1.1\r\n\r\n"), HTTP_PARSE_ERR_VERSION);
    CHECK_INT(parse_str(&r, "GET / HTTP/1.10\r\n\r\n"), HTTP_PARSE_ERR_VERSION);
    CHECK_INT(parse_str(&r, "GET / HTTP/11\r\n\r\n"), HTTP_PARSE_ERR_VERSION);
    CHECK_INT(parse_str(&r, "GET / HTTP/1.1 \r\n\r\n"), HTTP_PARSE_ERR_VERSION);
    CHECK_INT(parse_str(&r, "GET / FOO/1.1\r\n\r\n"), HTTP_PARSE_ERR_VERSION);
    CHECK_INT(http_parse_error_status(HTTP_PARSE_ERR_VERSION), 400);
}

static void test_targets(void)
{
    struct parsed r;
    const char *abs =
        "GET http://Example.org:81/x/y?z HTTP/1.1\r\nHost: other\r\n\r\n";
    const char *abs_nopath =
        "GET https://example.org HTTP/1.1\r\nHost: e\r\n\r\n";
    const char *abs_query = "GET http://h?x=1 HTTP/1.1\r\nHost: h\r\n\r\n";
    const char *conn = "CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n";

    CHECK_INT(parse_str(&r, abs), 0);
    CHECK_INT(r.p.req.target_form, HTTP_TARGET_ABSOLUTE);
    SLICE_IS(abs, r.p.req.host, "Example.org:81");
    SLICE_IS(abs, r.p.req.path, "/x/y?z");
    SLICE_IS(abs, r.p.req.target, "http://Example.org:81/x/y?z");
    CHECK_INT(split_str(abs), 0);

    CHECK_INT(parse_str(&r, abs_nopath), 0);
    SLICE_IS(abs_nopath, r.p.req.host, "example.org");
    CHECK_INT(r.p.req.path.len, 0);
    CHECK_INT(parse_str(&r, abs_query), 0);
    SLICE_IS(abs_query, r.p.req.path, "?x=1");

    CHECK_INT(parse_str(&r, conn), 0);
    CHECK_INT(r.p.req.target_form, HTTP_TARGET_AUTHORITY);
    SLICE_IS(conn, r.p.req.host, "example.com:443");

    CHECK_INT(parse_str(&r, "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
    CHECK_INT(r.p.req.target_form, HTTP_TARGET_ASTERISK);
    CHECK_INT(parse_str(&r, "GET * HTTP/1.1\r\nHost: a\r\n\r\n"),
              HTTP_PARSE_ERR_TARGET);
    CHECK_INT(parse_str(&r, "GET index.html HTTP/1.1\r\nHost: a\r\n\r\n"),
              HTTP_PARSE_ERR_TARGET);
    CHECK_INT(parse_str(&r, "GET ftp://a/b HTTP/1.1\r\nHost: a\r\n\r\n"),
              HTTP_PARSE_ERR_TARGET);
    CHECK_INT(parse_str(&r, "GET http:///b HTTP/1.1\r\nHost: a\r\n\r\n"),
              HTTP_PARSE_ERR_TARGET);
    CHECK_INT(parse_str(&r, "GET http://u@h/b HTTP/1.1\r\nHost: a\r\n\r\n"),
              HTTP_PARSE_ERR_TARGET);
    CHECK_INT(parse_str(&r, "GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n"),
              HTTP_PARSE_ERR_TARGET);
    CHECK_INT(parse_str(&r, "GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n"),
              HTTP_PARSE_ERR_TARGET);
    CHECK_INT(parse_str(&r, "GET /a\x01 HTTP/1.1\r\nHost: a\r\n\r\n"),
              HTTP_PARSE_ERR_TARGET);
}

static void test_host(void)
{
    struct parsed r;

    CHECK_INT(parse_str(&r, "GET / HTTP/1.1\r\n\r\n"),
              HTTP_PARSE_ERR_HOST_MISSING);
    CHECK_INT(parse_str(&r, "GET http://a/ HTTP/1.1\r\n\r\n"),
              HTTP_PARSE_ERR_HOST_MISSING);
    CHECK_INT(parse_str(&r, "GET / HTTP/1.0\r\n\r\n"), 0);
    CHECK_INT(r.p.req.host.len, 0);
    CHECK(!(r.p.req.seen & HTTP_SEEN_HOST));
    CHECK_INT(parse_str(&r, "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"),
              HTTP_PARSE_ERR_HOST_DUP);
    CHECK_INT(parse_str(&r, "GET / HTTP/1.1\r\nHost: a b\r\n\r\n"),
              HTTP_PARSE_ERR_HOST_INVALID);
    CHECK_INT(parse_str(&r, "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"),
              HTTP_PARSE_ERR_HOST_INVALID);
    CHECK_INT(parse_str(&r, "GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n"), 0);
    CHECK_INT(parse_str(&r, "GET / HTTP/1.1\r\nHost:\r\n\r\n"), 0);
    CHECK(r.p.req.seen & HTTP_SEEN_HOST);
}

static void test_connection(void)
{
    struct parsed r;

    CHECK_INT(
        parse_str(&r, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
        0);
    CHECK(r.p.req.connection_close);
    CHECK(!r.p.req.keep_alive);
    CHECK_INT(parse_str(&r,
                        "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade,  "
                        "CLOSE \r\n\r\n"),
              0);
    CHECK(!r.p.req.keep_alive);
    CHECK_INT(
        parse_str(&r,
                  "GET / HTTP/1.1\r\nHost: a\r\nConnection: closed\r\n\r\n"),
        0);
    CHECK(r.p.req.keep_alive);
    CHECK_INT(parse_str(&r, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
              0);
    CHECK(r.p.req.keep_alive);
    CHECK(r.p.req.connection_keep_alive);
    CHECK_INT(
        parse_str(&r,
                  "GET / HTTP/1.0\r\nConnection: Keep-Alive, close\r\n\r\n"),
        0);
    CHECK(!r.p.req.keep_alive);
    CHECK_INT(parse_str(&r,
                        "GET / HTTP/1.0\r\nConnection: x\r\nConnection: "
                        ",keep-alive,\r\n\r\n"),
              0);
    CHECK(r.p.req.keep_alive);
    CHECK_INT(
        parse_str(&r,
                  "GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n"),
        0);
    CHECK(r.p.req.expect_continue);
    CHECK(!r.p.req.expect_unknown);
    CHECK_INT(
        parse_str(&r,
                  "GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-CONTINUE\r\n\r\n"),
        0);
    CHECK(r.p.req.expect_continue);
    CHECK_INT(parse_str(&r, "PUT / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n"),
              0);
    CHECK(!r.p.req.expect_continue);
    CHECK_INT(
        parse_str(&r, "GET / HTTP/1.1\r\nHost: a\r\nExpect: magic\r\n\r\n"), 0);
    CHECK(!r.p.req.expect_continue);
    CHECK(r.p.req.expect_unknown);
    CHECK_INT(parse_str(&r,
                        "GET / HTTP/1.1\r\nHost: a\r\nRange: "
                        "bytes=1-2\r\nrange: bytes=3-4\r\n\r\n"),
              0);
    CHECK(r.p.req.repeated & HTTP_SEEN_RANGE);
}

static void test_pipelined(void)
{
    const char *s =
        "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n"
        "HEAD /2 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
        "\r\nGET /3 HTTP/1.0\r\n\r\n"
        "GET /4 HTTP/1.1\r\nHo";
    const char *want[] = {"/1", "/2", "/3"};
    struct parsed r;
    size_t off = 0, len = strlen(s);
    int i;

    http_parser_init(&r.p, NULL);
    for (i = 0; i < 3; i++) {
        CHECK_INT(http_parse_request(&r.p, s + off, len - off, &r.consumed), 0);
        SLICE_IS(s + off, r.p.req.path, want[i]);
        off += r.consumed;
        http_parser_reset(&r.p);
    }
    CHECK_INT(http_parse_request(&r.p, s + off, len - off, &r.consumed),
              HTTP_PARSE_INCOMPLETE);
    CHECK_MEM(s + off, 6, "GET /4");

    /* 100 requests in one buffer, all found, none missed */
    {
        static char big[100 * 40];
        size_t n = 0, total = 0;
        int count = 0;
        for (i = 0; i < 100; i++)
            n += (size_t) sprintf(big + n,
                                  "GET /f%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
        while (total < n) {
            char want_path[16];
            http_parser_reset(&r.p);
            if (http_parse_request(&r.p, big + total, n - total, &r.consumed))
                break;
            sprintf(want_path, "/f%d", count);
            SLICE_IS(big + total, r.p.req.path, want_path);
            total += r.consumed;
            count++;
        }
        CHECK_INT(count, 100);
        CHECK_INT(total, n);
    }
}

static void test_leading_empty_lines(void)
{
    struct parsed r;
    const char *s = "\r\n\r\nGET / HTTP/1.0\r\n\r\n";

    CHECK_INT(parse_str(&r, s), 0);
    CHECK_INT(r.consumed, strlen(s));
    SLICE_IS(s, r.p.req.target, "/");
    CHECK_INT(parse_str(&r, "\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.0\r\n\r\n"),
              HTTP_PARSE_ERR_REQUEST_LINE);
    CHECK_INT(parse_str(&r, "\nGET / HTTP/1.0\r\n\r\n"),
              HTTP_PARSE_ERR_BARE_LF);
}

static void test_limits(void)
{
    struct parsed r;
    static char buf[70000];
    struct http_limits lim = {64, 128, 3, 1000};
    size_t n;
    int i;

    /* request-line: 414, even before the line is complete */
    n = (size_t) sprintf(buf, "GET /%0*d HTTP/1.1\r\n", 8200, 0);
    CHECK_INT(parse(&r, buf, n), HTTP_PARSE_ERR_URI_TOO_LONG);
    CHECK_INT(parse(&r, buf, 8193), HTTP_PARSE_ERR_URI_TOO_LONG);
    CHECK_INT(parse(&r, buf, 8192), HTTP_PARSE_INCOMPLETE);
    CHECK_INT(http_parse_error_status(HTTP_PARSE_ERR_URI_TOO_LONG), 414);
    /* exactly at the limit is fine */
    n = (size_t) sprintf(buf, "GET /%0*d HTTP/1.0\r\n\r\n", 8192 - 16 - 1, 0);
    CHECK_INT(parse(&r, buf, n), 0);

    /* custom limits */
    http_parser_init(&r.p, &lim);
    n = (size_t) sprintf(buf, "GET /%0*d HTTP/1.0\r\n", 60, 0);
    CHECK_INT(http_parse_request(&r.p, buf, n, &r.consumed),
              HTTP_PARSE_ERR_URI_TOO_LONG);

    http_parser_init(&r.p, &lim);
    n = (size_t) sprintf(buf, "GET / HTTP/1.0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n");
    CHECK_INT(http_parse_request(&r.p, buf, n, &r.consumed), 0);
    http_parser_init(&r.p, &lim);
    n = (size_t) sprintf(
        buf, "GET / HTTP/1.0\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n");
    CHECK_INT(http_parse_request(&r.p, buf, n, &r.consumed),
              HTTP_PARSE_ERR_TOO_MANY_HEADERS);
    CHECK_INT(http_parse_error_status(HTTP_PARSE_ERR_TOO_MANY_HEADERS), 431);

    http_parser_init(&r.p, &lim);
    n = (size_t) sprintf(buf, "GET / HTTP/1.0\r\nA: %0*d\r\n\r\n", 130, 0);
    CHECK_INT(http_parse_request(&r.p, buf, n, &r.consumed),
              HTTP_PARSE_ERR_HEADERS_TOO_LARGE);
    /* the partial header section is bounded too */
    http_parser_init(&r.p, &lim);
    n = (size_t) sprintf(buf, "GET / HTTP/1.0\r\nA: %0*d", 130, 0);
    CHECK_INT(http_parse_request(&r.p, buf, n, &r.consumed),
              HTTP_PARSE_ERR_HEADERS_TOO_LARGE);
    CHECK_INT(http_parse_error_status(HTTP_PARSE_ERR_HEADERS_TOO_LARGE), 431);

    /* default header bytes: 16 KiB */
    n = (size_t) sprintf(buf, "GET / HTTP/1.0\r\n");
    for (i = 0; i < 20; i++)
        n += (size_t) sprintf(buf + n, "X-%d: %0*d\r\n", i, 1000, 0);
    n += (size_t) sprintf(buf + n, "\r\n");
    CHECK_INT(parse(&r, buf, n), HTTP_PARSE_ERR_HEADERS_TOO_LARGE);
    /* default header count: 100 */
    n = (size_t) sprintf(buf, "GET / HTTP/1.0\r\n");
    for (i = 0; i < 101; i++)
        n += (size_t) sprintf(buf + n, "X-%d: 1\r\n", i);
    n += (size_t) sprintf(buf + n, "\r\n");
    CHECK_INT(parse(&r, buf, n), HTTP_PARSE_ERR_TOO_MANY_HEADERS);
    /* more fields than the store: counted, first ones kept */
    n = (size_t) sprintf(buf, "GET / HTTP/1.0\r\n");
    for (i = 0; i < 100; i++)
        n += (size_t) sprintf(buf + n, "X-%d: %d\r\n", i, i);
    n += (size_t) sprintf(buf + n, "\r\n");
    CHECK_INT(parse(&r, buf, n), 0);
    CHECK_INT(r.p.req.header_count, 100);
    SLICE_IS(buf, r.h[MAX_FIELDS - 1].name, "X-63");

    /* body limit: 413 */
    http_parser_init(&r.p, &lim);
    n = (size_t) sprintf(buf,
                         "POST / HTTP/1.0\r\nContent-Length: 1001\r\n\r\n");
    CHECK_INT(http_parse_request(&r.p, buf, n, &r.consumed),
              HTTP_PARSE_ERR_BODY_TOO_LARGE);
    CHECK_INT(http_parse_error_status(HTTP_PARSE_ERR_BODY_TOO_LARGE), 413);
    http_parser_init(&r.p, &lim);
    n = (size_t) sprintf(buf,
                         "POST / HTTP/1.0\r\nContent-Length: 1000\r\n\r\n");
    CHECK_INT(http_parse_request(&r.p, buf, n, &r.consumed), 0);
    CHECK_INT(r.p.req.content_length, 1000);
    CHECK_INT(parse_str(&r,
                        "POST / HTTP/1.0\r\nContent-Length: "
                        "99999999999999999999999999\r\n\r\n"),
              HTTP_PARSE_ERR_BODY_TOO_LARGE);
}

static void test_smuggling(void)
{
    static const struct {
        const char *req;
        int err;
    } cases[] = {
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: "
         "5\r\nTransfer-Encoding: chunked\r\n\r\n",
         HTTP_PARSE_ERR_CL_AND_TE},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
         "chunked\r\nContent-Length: 5\r\n\r\n",
         HTTP_PARSE_ERR_CL_AND_TE},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: "
         "6\r\n\r\n",
         HTTP_PARSE_ERR_CONTENT_LENGTH_DUP},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: "
         "5\r\n\r\n",
         HTTP_PARSE_ERR_CONTENT_LENGTH_DUP},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n",
         HTTP_PARSE_ERR_CONTENT_LENGTH},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n",
         HTTP_PARSE_ERR_CONTENT_LENGTH},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
         HTTP_PARSE_ERR_CONTENT_LENGTH},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n",
         HTTP_PARSE_ERR_CONTENT_LENGTH},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 0\r\n\r\n",
         HTTP_PARSE_ERR_CONTENT_LENGTH},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n",
         HTTP_PARSE_ERR_CONTENT_LENGTH},
        {"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
         HTTP_PARSE_ERR_OBS_FOLD},
        {"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n",
         HTTP_PARSE_ERR_OBS_FOLD},
        {"GET / HTTP/1.1\r\n Host: a\r\n\r\n", HTTP_PARSE_ERR_OBS_FOLD},
        {"GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", HTTP_PARSE_ERR_BARE_CR},
        {"GET / HTTP/1.1\rHost: a\r\n\r\n", HTTP_PARSE_ERR_BARE_CR},
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\r\n", HTTP_PARSE_ERR_BARE_CR},
        {"GET / HTTP/1.1\nHost: a\r\n\r\n", HTTP_PARSE_ERR_BARE_LF},
        {"GET / HTTP/1.1\r\nHost: a\n\r\n", HTTP_PARSE_ERR_BARE_LF},
        {"GET / HTTP/1.1\r\nHost: a\r\n\n", HTTP_PARSE_ERR_BARE_LF},
        {"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
         HTTP_PARSE_ERR_SPACE_BEFORE_COLON},
        {"GET / HTTP/1.1\r\nHost\t: a\r\n\r\n",
         HTTP_PARSE_ERR_SPACE_BEFORE_COLON},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n",
         HTTP_PARSE_ERR_SPACE_BEFORE_COLON},
        {"GET / HTTP/1.1\r\nHo(st: a\r\n\r\n", HTTP_PARSE_ERR_HEADER_NAME},
        {"GET / HTTP/1.1\r\n: a\r\n\r\n", HTTP_PARSE_ERR_HEADER_NAME},
        {"GET / HTTP/1.1\r\nHost a\r\n\r\n", HTTP_PARSE_ERR_HEADER_NAME},
        {"GET / HTTP/1.1\r\nH\xc3\xa9: a\r\n\r\n", HTTP_PARSE_ERR_HEADER_NAME},
        {"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01\r\n\r\n",
         HTTP_PARSE_ERR_HEADER_VALUE},
        {"GET / HTTP/1.1\r\nHost: a\r\nX: a\x7f\r\n\r\n",
         HTTP_PARSE_ERR_HEADER_VALUE},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
         HTTP_PARSE_ERR_TE_UNKNOWN},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, "
         "chunked\r\n\r\n",
         HTTP_PARSE_ERR_TE_UNKNOWN},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, "
         "gzip\r\n\r\n",
         HTTP_PARSE_ERR_TE_INVALID},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, "
         "chunked\r\n\r\n",
         HTTP_PARSE_ERR_TE_INVALID},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
         "chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
         HTTP_PARSE_ERR_TE_INVALID},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked;x=1\r\n\r\n",
         HTTP_PARSE_ERR_TE_INVALID},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \r\n\r\n",
         HTTP_PARSE_ERR_TE_INVALID},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunk\r\n\r\n",
         HTTP_PARSE_ERR_TE_UNKNOWN},
        {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
         HTTP_PARSE_ERR_TE_HTTP10},
    };
    size_t i;
    struct parsed r;

    for (i = 0; i < HTTP_ARRAY_SIZE(cases); i++) {
        int rc = parse_str(&r, cases[i].req);
        if (rc != cases[i].err)
            fprintf(stderr, "case %zu: %s\n", i, http_parse_error_name(rc));
        CHECK_INT(rc, cases[i].err);
        CHECK_INT(split_str(cases[i].req), cases[i].err);
        CHECK_INT(http_parse_error_status(rc),
                  cases[i].err == HTTP_PARSE_ERR_TE_UNKNOWN ? 501 : 400);
    }

    /* NUL anywhere in the head */
    {
        const char s[] = "GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n";
        const char s2[] = "GET /\0 HTTP/1.1\r\nHost: a\r\n\r\n";
        const char s3[] = "GET / HTTP/1.1\r\nHo\0st: a\r\n\r\n";
        CHECK_INT(parse(&r, s, sizeof(s) - 1), HTTP_PARSE_ERR_NUL);
        CHECK_INT(parse_every_split(s, sizeof(s) - 1), HTTP_PARSE_ERR_NUL);
        CHECK_INT(parse(&r, s2, sizeof(s2) - 1), HTTP_PARSE_ERR_NUL);
        CHECK_INT(parse(&r, s3, sizeof(s3) - 1), HTTP_PARSE_ERR_NUL);
    }
    /* the error sticks */
    CHECK_INT(parse_str(&r, "GET / HTTP/1.1\r\nHost : a\r\n\r\n"),
              HTTP_PARSE_ERR_SPACE_BEFORE_COLON);
    CHECK_INT(
        http_parse_request(&r.p, "GET / HTTP/1.0\r\n\r\n", 18, &r.consumed),
        HTTP_PARSE_ERR_SPACE_BEFORE_COLON);
}

static void test_body_framing(void)
{
    struct parsed r;

    CHECK_INT(
        parse_str(&r,
                  "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0042\r\n\r\n"),
        0);
    CHECK_INT(r.p.req.body_framing, HTTP_BODY_CONTENT_LENGTH);
    CHECK_INT(r.p.req.content_length, 42);
    CHECK_INT(parse_str(&r,
                        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:  "
                        "Chunked \r\n\r\n"),
              0);
    CHECK_INT(r.p.req.body_framing, HTTP_BODY_CHUNKED);
    CHECK_INT(parse_str(&r,
                        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
                        ",chunked\r\n\r\n"),
              0);
    CHECK_INT(r.p.req.body_framing, HTTP_BODY_CHUNKED);
    CHECK_INT(parse_str(&r, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
    CHECK_INT(r.p.req.body_framing, HTTP_BODY_NONE);
}

static int decode_all(const char *s,
                      size_t len,
                      size_t step,
                      char *out,
                      size_t *out_len,
                      size_t *used)
{
    struct http_chunked_decoder d;
    size_t pos = 0, avail_end = 0;
    int rc = HTTP_CHUNKED_AGAIN;

    http_chunked_init(&d, 1000, 200);
    *out_len = 0;
    while (avail_end < len || rc == HTTP_CHUNKED_DATA) {
        size_t consumed, off, n;
        if (pos == avail_end) {
            avail_end += step;
            if (avail_end > len)
                avail_end = len;
        }
        rc = http_chunked_decode(&d, s + pos, avail_end - pos, &consumed, &off,
                                 &n);
        if (rc == HTTP_CHUNKED_DATA) {
            memcpy(out + *out_len, s + pos + off, n);
            *out_len += n;
        }
        pos += consumed;
        if (rc == HTTP_CHUNKED_DONE || rc < 0)
            break;
    }
    *used = pos;
    return rc;
}

static void test_chunked(void)
{
    const char *s =
        "5\r\nhello\r\n1;ext=\"v\"\r\n \r\n10\r\n0123456789abcdef\r\n"
        "0\r\nTrailer: x\r\n\r\nNEXT";
    char out[256];
    size_t n, used, step;

    for (step = 1; step <= strlen(s); step++) {
        int rc = decode_all(s, strlen(s), step, out, &n, &used);
        CHECK_INT(rc, HTTP_CHUNKED_DONE);
        CHECK_MEM(out, n, "hello 0123456789abcdef");
        CHECK_INT(used, strlen(s) - 4);
        if (rc != HTTP_CHUNKED_DONE)
            break;
    }
    CHECK_INT(decode_all("0\r\n\r\n", 5, 5, out, &n, &used), HTTP_CHUNKED_DONE);
    CHECK_INT(n, 0);
    CHECK_INT(decode_all("5\r\nhel", 8, 8, out, &n, &used), HTTP_CHUNKED_AGAIN);
    CHECK_INT(decode_all("x\r\n", 3, 3, out, &n, &used),
              HTTP_PARSE_ERR_CHUNK_SIZE);
    CHECK_INT(decode_all("-1\r\n", 4, 4, out, &n, &used),
              HTTP_PARSE_ERR_CHUNK_SIZE);
    CHECK_INT(decode_all("5 \r\n", 4, 4, out, &n, &used),
              HTTP_PARSE_ERR_CHUNK_SIZE);
    CHECK_INT(decode_all("\r\n", 2, 2, out, &n, &used),
              HTTP_PARSE_ERR_CHUNK_SIZE);
    CHECK_INT(decode_all("10000000000000001\r\n", 19, 19, out, &n, &used),
              HTTP_PARSE_ERR_CHUNK_SIZE);
    CHECK_INT(decode_all("5\nhello\r\n", 9, 9, out, &n, &used),
              HTTP_PARSE_ERR_CHUNK_SIZE);
    CHECK_INT(decode_all("5\r\nhelloX\r\n", 11, 11, out, &n, &used),
              HTTP_PARSE_ERR_CHUNK_DATA);
    CHECK_INT(decode_all("5\rhello", 7, 7, out, &n, &used),
              HTTP_PARSE_ERR_BARE_CR);
    CHECK_INT(decode_all("3e9\r\n", 5, 5, out, &n, &used),
              HTTP_PARSE_ERR_BODY_TOO_LARGE);
    CHECK_INT(decode_all("ffffffffffffffff\r\n", 18, 18, out, &n, &used),
              HTTP_PARSE_ERR_BODY_TOO_LARGE);
    CHECK_INT(decode_all("0\r\n x: y\r\n\r\n", 12, 12, out, &n, &used),
              HTTP_PARSE_ERR_OBS_FOLD);
    CHECK_INT(decode_all("0\r\nx y\r\n\r\n", 10, 10, out, &n, &used),
              HTTP_PARSE_ERR_TRAILER);
    CHECK_INT(decode_all("1\r\n\0\r\n0\r\n\r\n", 11, 11, out, &n, &used),
              HTTP_CHUNKED_DONE); /* NUL is fine inside data */
    {
        char big[400];
        memset(big, 'a', sizeof(big));
        memcpy(big, "0\r\nX: ", 6);
        CHECK_INT(decode_all(big, sizeof(big), 400, out, &n, &used),
                  HTTP_PARSE_ERR_TRAILERS_TOO_LARGE);
    }
    CHECK_INT(http_parse_error_status(HTTP_PARSE_ERR_TRAILERS_TOO_LARGE), 431);
    CHECK_INT(http_parse_error_status(HTTP_PARSE_ERR_CHUNK_SIZE), 400);
}

/* "1", an extension of ext_len bytes (';' included), "\r\nx\r\n", the
 * unit n times, then the last chunk; returns the length written to out. */
static size_t ext_body(char *out, size_t ext_len, int n)
{
    size_t len = 0;
    int i;

    for (i = 0; i < n; i++) {
        memcpy(out + len, "1;", 2);
        len += 2;
        memset(out + len, 'e', ext_len - 1);
        len += ext_len - 1;
        memcpy(out + len, "\r\nx\r\n", 5);
        len += 5;
    }
    memcpy(out + len, "0\r\n\r\n", 5);
    return len + 5;
}

static void test_chunk_extension_limits(void)
{
    static char in[HTTP_CHUNK_EXT_MAX_TOTAL * 2 + 4096];
    char out[256];
    size_t len, n, used, step;

    /* one extension at the line limit passes, one byte more fails, however
     * the input is cut */
    len = ext_body(in, HTTP_CHUNK_EXT_MAX_LINE, 1);
    for (step = 1; step <= len; step = step * 3 + 1) {
        CHECK_INT(decode_all(in, len, step, out, &n, &used), HTTP_CHUNKED_DONE);
        CHECK_MEM(out, n, "x");
    }
    len = ext_body(in, HTTP_CHUNK_EXT_MAX_LINE + 1, 1);
    for (step = 1; step <= len; step = step * 3 + 1) {
        CHECK_INT(decode_all(in, len, step, out, &n, &used),
                  HTTP_PARSE_ERR_CHUNK_EXT_TOO_LARGE);
        /* refused at the first byte past the limit, not at the CR */
        CHECK(used <= 1 + HTTP_CHUNK_EXT_MAX_LINE);
    }
    /* an extension that never ends: refused within the line limit */
    memcpy(in, "1;", 2);
    memset(in + 2, 'a', sizeof(in) - 2);
    CHECK_INT(decode_all(in, sizeof(in), 4096, out, &n, &used),
              HTTP_PARSE_ERR_CHUNK_EXT_TOO_LARGE);
    CHECK(used <= 1 + HTTP_CHUNK_EXT_MAX_LINE);
    /* extensions under the line limit, chunk after chunk: the body total */
    len = ext_body(in, 1000, HTTP_CHUNK_EXT_MAX_TOTAL / 1000);
    CHECK_INT(decode_all(in, len, 512, out, &n, &used), HTTP_CHUNKED_DONE);
    CHECK_INT(n, HTTP_CHUNK_EXT_MAX_TOTAL / 1000);
    len = ext_body(in, 1000, HTTP_CHUNK_EXT_MAX_TOTAL / 1000 + 1);
    CHECK_INT(decode_all(in, len, 512, out, &n, &used),
              HTTP_PARSE_ERR_CHUNK_EXT_TOO_LARGE);
    CHECK(used < len);
    /* the same error is returned again, and maps to 400 */
    {
        struct http_chunked_decoder d;
        size_t off, dl;
        http_chunked_init(&d, 1000, 200);
        memset(in + 2, 'a', HTTP_CHUNK_EXT_MAX_LINE);
        CHECK_INT(http_chunked_decode(&d, in, HTTP_CHUNK_EXT_MAX_LINE + 2,
                                      &used, &off, &dl),
                  HTTP_PARSE_ERR_CHUNK_EXT_TOO_LARGE);
        CHECK_INT(http_chunked_decode(&d, "\r\n", 2, &used, &off, &dl),
                  HTTP_PARSE_ERR_CHUNK_EXT_TOO_LARGE);
    }
    CHECK_INT(http_parse_error_status(HTTP_PARSE_ERR_CHUNK_EXT_TOO_LARGE), 400);
    CHECK_STR(http_parse_error_name(HTTP_PARSE_ERR_CHUNK_EXT_TOO_LARGE),
              "chunk-ext-too-large");
}

static void test_head_buffered(void)
{
#define HB(str) http_head_buffered(str, sizeof(str) - 1)
    CHECK(HB("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    CHECK(HB("GET / HTTP/1.0\r\n\r\n"));
    CHECK(HB("\r\n\r\nGET / HTTP/1.0\r\n\r\nGET"));
    CHECK(!HB(""));
    CHECK(!HB("GET / HTTP/1.1\r\nHost: x\r\n"));
    CHECK(!HB("GET / HTTP/1.1\r\nHost: x\r\n\r"));
    CHECK(!HB("\r\n\r\n")); /* only empty lines: no request yet */
    CHECK(!HB("\r\n\r\nGET / HTTP/1.1\r\n"));
    CHECK(!HB("GET / HTTP/1.1\nHost: x\n\n")); /* bare LF: not corked */
#undef HB
}

static void test_error_names(void)
{
    int e;

    for (e = HTTP_PARSE_ERR_METHOD; e >= HTTP_PARSE_ERR_LAST; e--) {
        int st = http_parse_error_status(e);
        CHECK(strcmp(http_parse_error_name(e), "unknown") != 0);
        CHECK(st == 400 || st == 413 || st == 414 || st == 431 || st == 501 ||
              st == 505);
    }
}

/* A body the server drops: what a piece holds of it, where the next
 * request starts, the reads it asks for, and the decoder's refusal. */
static void test_body_drain(void)
{
    const char cl[] = "0123456789GET";
    const char ch[] = "3\r\nabc\r\n0\r\n\r\nGET";
    struct http_request req = {0};
    struct http_body_drain b = {0};
    size_t start = 0, len = 0, i;

    /* none: nothing to drop */
    CHECK(!http_body_draining(&b));
    CHECK_INT(http_body_drain(&b, cl, &start, &len), 0);
    req.body_framing = HTTP_BODY_NONE;
    http_body_drain_start(&b, &req);
    CHECK(!http_body_draining(&b));
    /* Content-Length: a piece all body asks for more, the buffer emptied;
     * then the rest of the piece is the next request */
    req.body_framing = HTTP_BODY_CONTENT_LENGTH;
    req.content_length = 10;
    http_body_drain_start(&b, &req);
    CHECK(http_body_draining(&b));
    start = 0;
    len = 4;
    CHECK_INT(http_body_drain(&b, cl, &start, &len), HTTP_BODY_DRAIN_MORE);
    CHECK_INT(start, 0);
    CHECK_INT(len, 0);
    CHECK_INT(b.left, 6);
    start = 4;
    len = 13;
    CHECK_INT(http_body_drain(&b, cl, &start, &len), 0);
    CHECK_INT(start, 10);
    CHECK_INT(len, 13);
    CHECK(!http_body_draining(&b));
    /* chunked, whole and byte by byte: the same end */
    req.body_framing = HTTP_BODY_CHUNKED;
    http_body_drain_start(&b, &req);
    CHECK(http_body_draining(&b));
    start = 0;
    len = sizeof(ch) - 1;
    CHECK_INT(http_body_drain(&b, ch, &start, &len), 0);
    CHECK_INT(start, sizeof(ch) - 4);
    CHECK(!http_body_draining(&b));
    http_body_drain_start(&b, &req);
    for (i = 0; i < sizeof(ch) - 5; i++) {
        start = i;
        len = i + 1;
        CHECK_INT(http_body_drain(&b, ch, &start, &len), HTTP_BODY_DRAIN_MORE);
        CHECK_INT(start + len, 0);
    }
    start = i;
    len = i + 4;
    CHECK_INT(http_body_drain(&b, ch, &start, &len), 0);
    CHECK_INT(start, i + 1);
    /* nothing buffered yet: more */
    http_body_drain_start(&b, &req);
    start = len = 0;
    CHECK_INT(http_body_drain(&b, ch, &start, &len), HTTP_BODY_DRAIN_MORE);
    /* the decoder's refusal: its status, and the drain is over */
    CHECK_INT(http_body_drain(&b, "x\r\n", &start, &(size_t){3}), 400);
    CHECK(!http_body_draining(&b));
    /* a chunk past HTTP_SERVER_MAX_BODY: 413 at its size line */
    http_body_drain_start(&b, &req);
    char line[32];
    start = 0;
    len = (size_t) snprintf(line, sizeof(line), "%x\r\n",
                            (unsigned) HTTP_SERVER_MAX_BODY + 1);
    CHECK_INT(http_body_drain(&b, line, &start, &len), 413);
    CHECK(!http_body_draining(&b));
}

int main(void)
{
    test_body_drain();
    test_simple_get();
    test_incomplete();
    test_methods();
    test_versions();
    test_targets();
    test_host();
    test_connection();
    test_pipelined();
    test_leading_empty_lines();
    test_limits();
    test_smuggling();
    test_body_framing();
    test_chunked();
    test_chunk_extension_limits();
    test_head_buffered();
    test_error_names();
    UNIT_DONE();
}
