/* libFuzzer target: the request parser, the chunked decoder, and every
 * core function a server feeds with request bytes.
 *
 * Invariants asserted (abort() on violation, so libFuzzer reports it):
 * the result does not depend on where the input is cut; a complete head
 * lies inside the buffer and so do all its slices; pipelined parsing
 * always advances; the chunked decoder hands out only bytes it consumed.
 */
#include <stdlib.h>

#include "http_core.h"
#include "http_internal.h"

#define REQUIRE(c)   \
    do {             \
        if (!(c))    \
            abort(); \
    } while (0)

static void slice_inside(struct http_slice s, size_t len)
{
    REQUIRE((size_t) s.off + s.len <= len);
}

static void exercise_request(const char *buf,
                             const struct http_parser *p,
                             size_t head)
{
    const struct http_request *r = &p->req;
    char out[512];
    struct http_path_info info;
    uint64_t first, last;
    int rc;

    REQUIRE(r->version == HTTP_VERSION_1_0 || r->version == HTTP_VERSION_1_1);
    REQUIRE(r->method_token.len > 0);
    REQUIRE(r->head_length == head);
    slice_inside(r->method_token, head);
    slice_inside(r->target, head);
    slice_inside(r->path, head);
    slice_inside(r->host, head);
    slice_inside(r->accept_encoding, head);
    slice_inside(r->if_none_match, head);
    slice_inside(r->if_modified_since, head);
    slice_inside(r->range, head);
    if (r->body_framing == HTTP_BODY_CONTENT_LENGTH)
        REQUIRE(r->content_length <= p->limits.max_body);

    rc = http_path_normalize(buf + r->path.off, r->path.len, out, sizeof(out),
                             &info);
    if (rc == HTTP_PATH_OK) {
        REQUIRE(out[0] != '/' && strlen(out) == info.len);
        REQUIRE(strcmp(out, "..") != 0 && strncmp(out, "../", 3) != 0);
    }
    rc =
        http_range_parse(buf + r->range.off, r->range.len, head, &first, &last);
    if (rc == HTTP_RANGE_SATISFIABLE)
        REQUIRE(first <= last && last < head);
    rc = http_accept_encoding_negotiate(buf + r->accept_encoding.off,
                                        r->accept_encoding.len, true);
    REQUIRE(rc >= HTTP_ENCODING_NONE_ACCEPTABLE && rc <= HTTP_ENCODING_GZIP);
    rc = http_conditional_status(
        (r->seen & HTTP_SEEN_IF_NONE_MATCH) ? buf + r->if_none_match.off : NULL,
        r->if_none_match.len,
        (r->seen & HTTP_SEEN_IF_MODIFIED_SINCE) ? buf + r->if_modified_since.off
                                                : NULL,
        r->if_modified_since.len, "\"1-2\"", 5, 1);
    REQUIRE(rc == 200 || rc == 304);
}

static void check_chunked(const char *buf, size_t len, size_t step)
{
    struct http_chunked_decoder d;
    size_t pos = 0, data = 0;

    http_chunked_init(&d, 1 << 20, 1024);
    while (pos < len) {
        size_t end = pos + step < len ? pos + step : len;
        size_t consumed, off, n;
        int rc =
            http_chunked_decode(&d, buf + pos, end - pos, &consumed, &off, &n);
        REQUIRE(consumed <= end - pos);
        if (rc == HTTP_CHUNKED_DATA) {
            REQUIRE(n > 0 && off + n <= consumed);
            data += n;
        } else {
            REQUIRE(n == 0);
        }
        pos += consumed;
        if (rc == HTTP_CHUNKED_DONE || rc < 0)
            break;
        REQUIRE(consumed > 0 || rc == HTTP_CHUNKED_DATA);
    }
    REQUIRE(data <= len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct http_header h1[16], h2[16];
    struct http_parser p1, p2;
    struct http_limits lim = {256, 1024, 16, 1000};
    const char *buf = (const char *) data;
    size_t c1, c2, split, off = 0;
    int rc1, rc2, rounds = 0;

    /* one shot against cut in two */
    split = size ? data[0] % (size + 1) : 0;
    http_parser_init(&p1, &lim);
    http_parser_set_header_store(&p1, h1, 16);
    rc1 = http_parse_request(&p1, buf, size, &c1);
    http_parser_init(&p2, &lim);
    http_parser_set_header_store(&p2, h2, 16);
    rc2 = http_parse_request(&p2, buf, split, &c2);
    if (rc2 == HTTP_PARSE_INCOMPLETE)
        rc2 = http_parse_request(&p2, buf, size, &c2);
    REQUIRE(rc1 == rc2);
    REQUIRE(rc1 <= HTTP_PARSE_INCOMPLETE && rc1 >= HTTP_PARSE_ERR_LAST);
    if (rc1 < 0) {
        int st = http_parse_error_status(rc1);
        REQUIRE(st == 400 || st == 413 || st == 414 || st == 431 || st == 501 ||
                st == 505);
    }
    if (rc1 == HTTP_PARSE_COMPLETE) {
        uint32_t i,
            stored = p1.req.header_count < 16 ? p1.req.header_count : 16;
        REQUIRE(c1 == c2 && c1 >= 16 && c1 <= size);
        REQUIRE(memcmp(&p1.req, &p2.req, sizeof(p1.req)) == 0);
        REQUIRE(memcmp(h1, h2, stored * sizeof(h1[0])) == 0);
        /* what we accepted is a clean head: CRLF CRLF end, no NUL, every
         * CR followed by LF */
        REQUIRE(memcmp(buf + c1 - 4, "\r\n\r\n", 4) == 0);
        REQUIRE(memchr(buf, '\0', c1) == NULL);
        for (i = 0; i < c1; i++)
            REQUIRE(buf[i] != '\r' || buf[i + 1] == '\n');
        for (i = 0; i < stored; i++) {
            slice_inside(h1[i].name, c1);
            slice_inside(h1[i].value, c1);
            REQUIRE(h1[i].name.len > 0);
        }
        exercise_request(buf, &p1, c1);
    }

    /* pipelined: each complete head moves forward */
    http_parser_init(&p1, NULL);
    while (off < size && rounds++ < 64) {
        http_parser_reset(&p1);
        rc1 = http_parse_request(&p1, buf + off, size - off, &c1);
        if (rc1 != HTTP_PARSE_COMPLETE)
            break;
        REQUIRE(c1 > 0 && c1 <= size - off);
        exercise_request(buf + off, &p1, c1);
        off += c1;
    }

    check_chunked(buf, size, size ? size : 1);
    check_chunked(buf, size, 1 + (size ? data[size - 1] % 7 : 0));
    return 0;
}
