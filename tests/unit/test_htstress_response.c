/* Unit test of the htstress response parser: every framing, fed whole and
 * split at every byte boundary, must end exactly at the response's last
 * byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http-response.h"
#include "unit.h"

struct expect {
    const char *name;
    const char *bytes;
    int status;
    bool close_after;
    bool needs_eof; /* body delimited by close */
};

static const struct expect cases[] = {
    {"content-length",
     "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: x\r\n\r\nhello", 200,
     false, false},
    {"chunked with extension and trailer",
     "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n"
     "5\r\nhello\r\n7;ext=1\r\n, world\r\nA\r\n0123456789\r\n0\r\n"
     "X-Trailer: yes\r\n\r\n",
     200, false, false},
    {"interim 100 then 404",
     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\n"
     "Content-Length: 3\r\nConnection: close\r\n\r\nnop",
     404, true, false},
    {"304 without body", "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
     304, false, false},
    {"HTTP/1.0 close-delimited", "HTTP/1.0 200 OK\r\n\r\nuntil close", 200,
     true, true},
    {"HTTP/1.0 keep-alive",
     "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
     200, false, false},
    {"LF-only lines", "HTTP/1.1 500 Oops\nContent-Length: 2\n\nok", 500, false,
     false},
};

/* Feed bytes in pieces of at most step; return the result at the end. */
static void check(const struct expect *e, size_t step)
{
    struct http_response_parser p;
    http_response_parser_init(&p);
    size_t len = strlen(e->bytes), pos = 0;
    enum http_parse_result r = HTTP_PARSE_MORE;
    while (pos < len && r == HTTP_PARSE_MORE) {
        size_t n = len - pos < step ? len - pos : step, used;
        r = http_response_parse(&p, e->bytes + pos, n, &used);
        pos += used;
    }
    if (e->needs_eof && r == HTTP_PARSE_MORE)
        r = http_response_parse_eof(&p);
    bool ok = r == HTTP_PARSE_DONE && pos == len && p.status == e->status &&
              p.close_after == e->close_after;
    CHECK(ok);
    if (!ok)
        fprintf(stderr,
                "http-response-test: %s, step %zu: result %d at %zu of %zu, "
                "status %d, close_after %d\n",
                e->name, step, r, pos, len, p.status, p.close_after);
}

static void check_error(const char *name, const char *bytes, bool at_eof)
{
    struct http_response_parser p;
    http_response_parser_init(&p);
    size_t used;
    enum http_parse_result r =
        http_response_parse(&p, bytes, strlen(bytes), &used);
    if (at_eof && r == HTTP_PARSE_MORE)
        r = http_response_parse_eof(&p);
    CHECK(r == HTTP_PARSE_ERROR);
    if (r != HTTP_PARSE_ERROR)
        fprintf(stderr, "http-response-test: %s: accepted\n", name);
}

int main(void)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len = strlen(cases[i].bytes);
        for (size_t step = 1; step <= len; step++)
            check(&cases[i], step);
    }
    check_error("not HTTP", "SPDY/9 banana\r\n\r\n", false);
    check_error("bad status", "HTTP/1.1 2x0 OK\r\n\r\n", false);
    check_error("bad chunk size",
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                false);
    check_error("bad content-length",
                "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", false);
    check_error("cut short at EOF",
                "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", true);

    /* A clean EOF between responses is not an error. */
    struct http_response_parser p;
    http_response_parser_init(&p);
    CHECK(http_response_parse_eof(&p) == HTTP_PARSE_MORE);
    UNIT_DONE();
}
