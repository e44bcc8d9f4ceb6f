/* Unit tests of the response head builder, http_buf and chunk framing. */
#include "http_internal.h"
#include "http_response.h"
#include "unit.h"

/* a test-only helper */
static inline size_t http_buf_avail(const struct http_buf *b)
{
    return b->overflow ? 0 : b->cap - b->len;
}

static void test_reasons(void)
{
    static const int used[] = {200, 206, 301, 304, 400, 403, 404, 405, 408,
                               413, 414, 416, 431, 500, 501, 503, 505};
    size_t i;

    for (i = 0; i < HTTP_ARRAY_SIZE(used); i++)
        CHECK(strcmp(http_status_reason(used[i]), "Unknown") != 0);
    CHECK_STR(http_status_reason(416), "Range Not Satisfiable");
    CHECK_STR(http_status_reason(431), "Request Header Fields Too Large");
    CHECK_STR(http_status_reason(299), "Unknown");
}

static void test_buf(void)
{
    char mem[8];
    struct http_buf b;
    char digits[20];

    http_buf_init(&b, mem, sizeof(mem));
    http_buf_append_str(&b, "abc");
    http_buf_append_u64(&b, 42);
    CHECK_MEM(mem, b.len, "abc42");
    CHECK_INT(http_buf_avail(&b), 3);
    http_buf_append_str(&b, "xyzw");
    CHECK(b.overflow);
    CHECK_INT(b.len, 5);
    http_buf_append_char(&b, 'q');
    CHECK_INT(b.len, 5);
    CHECK_INT(http_buf_avail(&b), 0);
    CHECK_MEM(digits, http_format_u64(HTTP_U64_MAX, digits),
              "18446744073709551615");
    CHECK_MEM(digits, http_format_u64(0, digits), "0");
    CHECK_MEM(digits, http_format_hex(0xdeadbeef, digits), "deadbeef");
    CHECK_MEM(digits, http_format_hex(0, digits), "0");
}

static void test_build_full(void)
{
    char mem[1024];
    struct http_buf b;
    struct http_response_head h = {0};
    int n;

    http_buf_init(&b, mem, sizeof(mem));
    h.status = 206;
    h.now_seconds = 784111777;
    h.content_type = "text/html; charset=utf-8";
    h.content_length = 10;
    h.has_last_modified = true;
    h.last_modified = 0;
    h.etag = "\"1-2\"";
    h.accept_ranges = true;
    h.has_content_range = true;
    h.range_first = 0;
    h.range_last = 9;
    h.range_size = 100;
    h.content_encoding = "gzip";
    h.vary_accept_encoding = true;
    h.keep_alive = true;
    h.keep_alive_timeout_seconds = 5;
    h.keep_alive_max = 100;
    n = http_response_build(&b, &h);
    CHECK_MEM(mem, (size_t) (n > 0 ? n : 0),
              "HTTP/1.1 206 Partial Content\r\n"
              "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
              "Server: ktcp\r\n"
              "Content-Type: text/html; charset=utf-8\r\n"
              "Content-Length: 10\r\n"
              "Last-Modified: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
              "ETag: \"1-2\"\r\n"
              "Accept-Ranges: bytes\r\n"
              "Content-Range: bytes 0-9/100\r\n"
              "Content-Encoding: gzip\r\n"
              "Vary: Accept-Encoding\r\n"
              "Connection: keep-alive\r\n"
              "Keep-Alive: timeout=5, max=100\r\n"
              "\r\n");
}

static void test_build_small(void)
{
    char mem[512];
    struct http_buf b;
    struct http_response_head h = {0};
    int n;

    http_buf_init(&b, mem, sizeof(mem));
    h.status = 416;
    h.version = 10;
    h.date = "Sun, 06 Nov 1994 08:49:37 GMT";
    h.server = "test";
    h.content_length = 0;
    h.content_range_unsatisfied = true;
    h.range_size = 1234;
    n = http_response_build(&b, &h);
    CHECK_MEM(mem, (size_t) (n > 0 ? n : 0),
              "HTTP/1.0 416 Range Not Satisfiable\r\n"
              "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
              "Server: test\r\n"
              "Content-Length: 0\r\n"
              "Content-Range: bytes */1234\r\n"
              "Connection: close\r\n"
              "\r\n");

    http_buf_init(&b, mem, sizeof(mem));
    memset(&h, 0, sizeof(h));
    h.status = 301;
    h.date = "D";
    h.content_length = -1;
    h.chunked = true;
    h.location = "/dir/";
    h.allow = "GET, HEAD";
    h.keep_alive = true;
    n = http_response_build(&b, &h);
    CHECK_MEM(mem, (size_t) (n > 0 ? n : 0),
              "HTTP/1.1 301 Moved Permanently\r\nDate: D\r\nServer: ktcp\r\n"
              "Transfer-Encoding: chunked\r\nLocation: /dir/\r\n"
              "Allow: GET, HEAD\r\nConnection: keep-alive\r\n\r\n");

    /* too small: reported, not truncated silently */
    http_buf_init(&b, mem, 40);
    CHECK_INT(http_response_build(&b, &h), -1);
    CHECK(b.overflow);
}

static void test_injection(void)
{
    char mem[256];
    struct http_buf b;
    struct http_response_head h = {0};

    http_buf_init(&b, mem, sizeof(mem));
    CHECK_INT(
        http_response_header_len(&b, "Location", "/a\r\nSet-Cookie: x", 17),
        -1);
    CHECK(b.overflow);
    http_buf_init(&b, mem, sizeof(mem));
    CHECK_INT(http_response_header_len(&b, "X", "a\0b", 3), -1);
    http_buf_init(&b, mem, sizeof(mem));
    h.status = 301;
    h.location = "/x\ny";
    CHECK_INT(http_response_build(&b, &h), -1);
    http_buf_init(&b, mem, sizeof(mem));
    CHECK_INT(http_response_header_len(&b, "X", "fine", 4), 0);
    CHECK_MEM(mem, b.len, "X: fine\r\n");
    /* an out-of-range status cannot break the status line */
    http_buf_init(&b, mem, sizeof(mem));
    http_response_status_line(&b, 11, 42);
    CHECK_MEM(mem, b.len, "HTTP/1.1 500 Internal Server Error\r\n");
}

/* The lines written whole are the lines built from the reason table, in
 * both versions. */
static void test_status_lines(void)
{
    static const int statuses[] = {200, 206, 304, 404, 400, 503};
    char mem[64], want[64];
    struct http_buf b;
    size_t i;
    int v;

    for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        for (v = 10; v <= 11; v++) {
            int n = snprintf(want, sizeof(want), "HTTP/1.%d %d %s\r\n", v - 10,
                             statuses[i], http_status_reason(statuses[i]));
            http_buf_init(&b, mem, sizeof(mem));
            http_response_status_line(&b, v, statuses[i]);
            CHECK_INT((int) b.len, n);
            CHECK_MEM(mem, b.len, want);
        }
    }
}

static void test_chunks(void)
{
    char mem[64], hdr[HTTP_CHUNK_HEADER_MAX];
    struct http_buf b;

    CHECK_MEM(hdr, http_chunk_header(hdr, 1), "1\r\n");
    CHECK_MEM(hdr, http_chunk_header(hdr, 4096), "1000\r\n");
    CHECK_MEM(hdr, http_chunk_header(hdr, 255), "ff\r\n");
    CHECK_INT(http_chunk_header(hdr, (size_t) -1), HTTP_CHUNK_HEADER_MAX);
    http_buf_init(&b, mem, sizeof(mem));
    http_response_content_range(&b, 5, 5, 6);
    CHECK_MEM(mem, b.len, "Content-Range: bytes 5-5/6\r\n");
}

/* kTLS: the first piece of a file body after a head's open record */
static void test_tls_first_piece(void)
{
    const uint64_t mib = 1 << 20;

    /* a 315-byte head open: the body to 12 KiB, then records on pages */
    CHECK_INT(http_tls_first_piece(315, 0, mib, 4096), 12288);
    /* from a range inside a page: to the page boundary the record allows */
    CHECK_INT(http_tls_first_piece(315, 100, mib, 4096), 12288 - 100);
    /* nothing open, or the records fall on pages: all of it */
    CHECK_INT(http_tls_first_piece(0, 100, mib, 4096), mib);
    CHECK_INT(http_tls_first_piece(4096, 0, mib, 4096), mib);
    /* no whole record would follow the shorter one */
    CHECK_INT(http_tls_first_piece(315, 0, 20 << 10, 4096), 20 << 10);
    CHECK_INT(http_tls_first_piece(315, 0, 16069 + 16383, 4096), 32452);
    CHECK_INT(http_tls_first_piece(315, 0, 16069 + 16384, 4096), 12288);
    /* a head of almost a record: no page boundary before it fills */
    CHECK_INT(http_tls_first_piece(16300, 0, mib, 4096), mib);
    /* a record's worth open is none; 64 KiB pages: one record a page */
    CHECK_INT(http_tls_first_piece(16384 + 315, 0, mib, 4096), 12288);
    CHECK_INT(http_tls_first_piece(315, 0, mib, 65536), mib);
}

/* kTLS in user space: which heads before a file body go alone */
static void test_tls_head_alone(void)
{
    /* from a page boundary, two records or more: alone */
    CHECK_INT(http_tls_head_alone(0, 1 << 20, 4096), 1);
    CHECK_INT(http_tls_head_alone(8192, 32768, 4096), 1);
    /* less than two records: the head and the body share the first */
    CHECK_INT(http_tls_head_alone(0, 32767, 4096), 0);
    CHECK_INT(http_tls_head_alone(0, 20 << 10, 4096), 0);
    /* a range from inside a page: alone would not put records on pages */
    CHECK_INT(http_tls_head_alone(100, 1 << 20, 4096), 0);
    CHECK_INT(http_tls_head_alone(4096, 1 << 20, 65536), 0);
}

int main(void)
{
    test_reasons();
    test_buf();
    test_build_full();
    test_build_small();
    test_injection();
    test_status_lines();
    test_chunks();
    test_tls_first_piece();
    test_tls_head_alone();
    UNIT_DONE();
}
