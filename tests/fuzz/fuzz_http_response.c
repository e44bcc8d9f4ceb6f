/* libFuzzer target: the response head builder (http_response_build) and
 * the chunk framing, with every field a server may copy from a request or
 * a file name (Content-Type, ETag, Location, Allow, Server, Date, numbers)
 * under the input's control, into a buffer of the input's size.
 *
 * Input: cap (2 bytes), status (2), version (1), flags (2), content length
 * (8), last-modified (8), range first/last/size (8 each), keep-alive
 * timeout/max (4 each), now (8), chunk size (8), then length-prefixed
 * Server, Date, Content-Type, ETag, Content-Encoding, Location, Allow.
 *
 * Invariants: -1 or the length of what was written, never past cap; a
 * value with CR or LF is refused (no header injection); an accepted head
 * is a status line, "Name: value" lines each ending in CRLF, no bare CR or
 * LF, no NUL, and one empty line at its very end; it fits in exactly its
 * own length and not one byte less; a chunk header reads back as its
 * size.
 */
#include <string.h>

#include "fuzz.h"
#include "http_internal.h"
#include "http_parser.h"
#include "http_response.h"

#define CAP_MAX 4096

/* A length-prefixed field as a C string in out[256]; NUL ends it early,
 * as strlen would. */
static const char *take_str(struct fuzz_input *in,
                            char *out,
                            bool present,
                            bool *has_crlf)
{
    size_t len;
    const char *s = fuzz_field(in, &len);

    memcpy(out, s, len);
    out[len] = '\0';
    if (!present)
        return NULL;
    if (strpbrk(out, "\r\n"))
        *has_crlf = true;
    return out;
}

static void check_head(const char *h, size_t len)
{
    size_t i, line = 0;

    REQUIRE(len >= 19);
    REQUIRE(memcmp(h, "HTTP/1.1 ", 9) == 0 || memcmp(h, "HTTP/1.0 ", 9) == 0);
    REQUIRE(http_is_digit((unsigned char) h[9]) &&
            http_is_digit((unsigned char) h[10]) &&
            http_is_digit((unsigned char) h[11]) && h[12] == ' ');
    REQUIRE(memcmp(h + len - 4, "\r\n\r\n", 4) == 0);
    REQUIRE(memchr(h, '\0', len) == NULL);
    for (i = 0; i < len; i++) {
        if (h[i] == '\r')
            REQUIRE(i + 1 < len && h[i + 1] == '\n');
        if (h[i] != '\n')
            continue;
        REQUIRE(i > 0 && h[i - 1] == '\r');
        /* the line [line, i - 1): the status line, a field, or the end */
        if (line > 0 && i - 1 > line) {
            size_t c = line;
            while (c < i - 1 && http_is_tchar((unsigned char) h[c]))
                c++;
            REQUIRE(c > line && c + 1 < i - 1 && h[c] == ':' &&
                    h[c + 1] == ' ');
        } else if (line > 0) {
            REQUIRE(i + 1 == len); /* the empty line ends the head */
        }
        line = i + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char out[CAP_MAX + 1], again[CAP_MAX + 1];
    static char server[256], date[256], type[256], etag[256], enc[256],
        loc[256], allow[256];
    struct fuzz_input in = {data, size};
    struct http_response_head h;
    struct http_buf b;
    size_t cap = (size_t) fuzz_uint(&in, 2) % (CAP_MAX + 1);
    unsigned flags;
    uint64_t chunk;
    bool crlf = false;
    int n;

    memset(&h, 0, sizeof(h));
    h.status = (int) (int16_t) fuzz_uint(&in, 2);
    h.version = (int) fuzz_uint(&in, 1) % 12;
    flags = (unsigned) fuzz_uint(&in, 2);
    h.content_length = (int64_t) fuzz_uint(&in, 8);
    h.last_modified = (int64_t) fuzz_uint(&in, 8);
    h.range_first = fuzz_uint(&in, 8);
    h.range_last = fuzz_uint(&in, 8);
    h.range_size = fuzz_uint(&in, 8);
    h.keep_alive_timeout_seconds = (uint32_t) fuzz_uint(&in, 4);
    h.keep_alive_max = (uint32_t) fuzz_uint(&in, 4);
    h.now_seconds = (int64_t) fuzz_uint(&in, 8);
    chunk = fuzz_uint(&in, 8);
    h.chunked = flags & 1;
    h.has_last_modified = flags & 2;
    h.accept_ranges = flags & 4;
    h.has_content_range = flags & 8;
    h.content_range_unsatisfied = flags & 16;
    h.vary_accept_encoding = flags & 32;
    h.keep_alive = flags & 64;
    h.server = take_str(&in, server, flags & 128, &crlf);
    h.date = take_str(&in, date, flags & 256, &crlf);
    h.content_type = take_str(&in, type, flags & 512, &crlf);
    h.etag = take_str(&in, etag, flags & 1024, &crlf);
    h.content_encoding = take_str(&in, enc, flags & 2048, &crlf);
    h.location = take_str(&in, loc, flags & 4096, &crlf);
    h.allow = take_str(&in, allow, flags & 8192, &crlf);

    REQUIRE(http_status_reason(h.status) != NULL);
    memset(out, 0x5a, sizeof(out));
    http_buf_init(&b, out, cap);
    n = http_response_build(&b, &h);
    REQUIRE(out[cap] == 0x5a); /* nothing past cap */
    if (crlf)
        REQUIRE(n == -1);
    if (n >= 0) {
        REQUIRE((size_t) n == b.len && (size_t) n <= cap);
        check_head(out, (size_t) n);
        /* deterministic, fits in exactly its length, not in one less */
        http_buf_init(&b, again, (size_t) n);
        REQUIRE(http_response_build(&b, &h) == n);
        REQUIRE(memcmp(out, again, (size_t) n) == 0);
        http_buf_init(&b, again, (size_t) n - 1);
        REQUIRE(http_response_build(&b, &h) == -1);
    } else if (!crlf) {
        /* refused only for room: the largest buffer takes it, unless the
         * strings alone exceed it */
        http_buf_init(&b, again, CAP_MAX);
        n = http_response_build(&b, &h);
        REQUIRE(n == -1 || (size_t) n > cap);
    }

    /* chunk framing: "<hex>\r\n" that reads back as the size */
    if (chunk) {
        char hdr[HTTP_CHUNK_HEADER_MAX];
        size_t len = http_chunk_header(hdr, (size_t) chunk), i;
        uint64_t v = 0;

        REQUIRE(len >= 3 && len <= HTTP_CHUNK_HEADER_MAX);
        REQUIRE(hdr[len - 2] == '\r' && hdr[len - 1] == '\n');
        for (i = 0; i + 2 < len; i++) {
            int d = http_hex_value((unsigned char) hdr[i]);
            REQUIRE(d >= 0);
            v = v << 4 | (unsigned) d;
        }
        REQUIRE(v == chunk);
    }
    return 0;
}
