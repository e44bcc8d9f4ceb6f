/* libFuzzer target: the chunked body decoder, fed the way engines feed it
 * (any cut of the stream), with a small body limit so every limit is in
 * reach.
 *
 * Invariants: the outcome (result, body bytes, bytes consumed) does not
 * depend on where the input is cut; data handed out lies inside what was
 * consumed; every call makes progress; after the end or an error further
 * calls consume nothing and repeat the result; and the decoder never
 * accepts more than its limits allow — at most 21 bytes of framing per
 * body byte, HTTP_CHUNK_EXT_MAX_TOTAL of extensions and the trailer limit
 * before it either finishes or fails.
 */
#include <string.h>

#include "fuzz.h"
#include "http_internal.h"
#include "http_parser.h"

#define MAX_BODY 64
#define MAX_TRAILER 256
/* Most the decoder may take without finishing: per data byte a 1-byte
 * chunk with a 16-digit size line (16 + CRLF + byte + CRLF), all the
 * extensions, one more size line (16 digits, CRLF), and the trailers with
 * the final CRLF. */
#define MAX_ACCEPTED \
    (21 * MAX_BODY + HTTP_CHUNK_EXT_MAX_TOTAL + 18 + MAX_TRAILER)

struct outcome {
    int rc;
    size_t consumed;
    size_t body_len;
    uint8_t body[MAX_BODY];
};

static void decode(const char *buf, size_t len, size_t step, struct outcome *o)
{
    struct http_chunked_decoder d;
    size_t pos = 0;
    int rc = HTTP_CHUNKED_AGAIN;

    http_chunked_init(&d, MAX_BODY, MAX_TRAILER);
    memset(o, 0, sizeof(*o));
    while (pos < len) {
        size_t end = len - pos > step ? pos + step : len;
        size_t consumed, off, n;

        rc = http_chunked_decode(&d, buf + pos, end - pos, &consumed, &off, &n);
        REQUIRE(consumed <= end - pos);
        if (rc == HTTP_CHUNKED_DATA) {
            REQUIRE(n > 0 && off + n <= consumed);
            REQUIRE(o->body_len + n <= MAX_BODY);
            memcpy(o->body + o->body_len, buf + pos + off, n);
            o->body_len += n;
        } else {
            REQUIRE(n == 0);
        }
        if (rc == HTTP_CHUNKED_AGAIN)
            REQUIRE(consumed == end - pos);
        pos += consumed;
        if (rc == HTTP_CHUNKED_DONE || rc < 0) {
            size_t c2, o2, n2;
            /* finished: nothing more is taken, the same answer comes */
            REQUIRE(http_chunked_decode(&d, buf + pos, len - pos, &c2, &o2,
                                        &n2) == rc);
            REQUIRE(c2 == 0 && n2 == 0);
            break;
        }
        REQUIRE(consumed > 0);
        /* a DATA result may end a piece; the next call starts after it */
        if (rc == HTTP_CHUNKED_DATA)
            rc = HTTP_CHUNKED_AGAIN;
    }
    REQUIRE(rc == HTTP_CHUNKED_AGAIN || rc == HTTP_CHUNKED_DONE ||
            (rc < 0 && rc >= HTTP_PARSE_ERR_LAST));
    o->rc = rc;
    o->consumed = pos;
    if (rc == HTTP_CHUNKED_AGAIN)
        REQUIRE(pos <= MAX_ACCEPTED);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct outcome whole, bytewise, cut;
    const char *buf = (const char *) data;
    size_t step = size ? 1 + data[0] % 13 : 1;

    decode(buf, size, size ? size : 1, &whole);
    decode(buf, size, 1, &bytewise);
    decode(buf, size, step, &cut);
    REQUIRE(whole.rc == bytewise.rc && whole.rc == cut.rc);
    /* a failing call reports nothing consumed, so where it stopped
     * depends on the cut; otherwise the position does not */
    if (whole.rc >= 0)
        REQUIRE(whole.consumed == bytewise.consumed &&
                whole.consumed == cut.consumed);
    REQUIRE(whole.body_len == bytewise.body_len &&
            whole.body_len == cut.body_len);
    REQUIRE(memcmp(whole.body, bytewise.body, whole.body_len) == 0);
    REQUIRE(memcmp(whole.body, cut.body, whole.body_len) == 0);
    if (whole.rc < 0) {
        int st = http_parse_error_status(whole.rc);
        REQUIRE(st == 400 || st == 413 || st == 431);
    }
    return 0;
}
