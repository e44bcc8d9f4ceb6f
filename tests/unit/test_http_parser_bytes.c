/* Every byte value in every place of a request head, against a reference
 * written here a byte at a time.
 *
 * The parser reads words of 8 bytes where it can and looks at single
 * bytes only in a word that may break a rule. Here each byte value 0..255
 * is put at each offset of a method, a target, a version, a field name and
 * a field value, in lines of 1..40 bytes that start at every offset of a
 * word, and the parser must decide exactly what the per-byte rules below
 * decide: accept or refuse, and what it took from the line.
 */
#include <stdlib.h>

#include "http_parser.h"
#include "unit.h"

#define MAX_LINE 40
#define STORE 4

/* --- the reference: one byte, one rule --- */

static bool ref_tchar(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool ref_target_byte(int c)
{
    return c > 0x20 && c < 0x7f; /* visible ASCII */
}

static bool ref_value_byte(int c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool ref_host_byte(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z') || (c && strchr("!$%&'()*+,-.:;=[]_~", c));
}

static bool ref_equal_nocase(const char *a, size_t n, const char *b)
{
    size_t i;

    if (n != strlen(b))
        return false;
    for (i = 0; i < n; i++) {
        int x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z')
            x += 'a' - 'A';
        if (y >= 'A' && y <= 'Z')
            y += 'a' - 'A';
        if (x != y)
            return false;
    }
    return true;
}

static void ref_trim(const char *s, size_t n, size_t *off, size_t *len)
{
    size_t b = 0, e = n;

    while (b < e && (s[b] == ' ' || s[b] == '\t'))
        b++;
    while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t'))
        e--;
    *off = b;
    *len = e - b;
}

static enum http_method ref_method(const char *m, size_t n)
{
    static const char *names[] = {"GET",   "HEAD",    "POST",
                                  "PUT",   "DELETE",  "OPTIONS",
                                  "TRACE", "CONNECT", "PATCH"};
    static const enum http_method ids[] = {
        HTTP_METHOD_GET,   HTTP_METHOD_HEAD,    HTTP_METHOD_POST,
        HTTP_METHOD_PUT,   HTTP_METHOD_DELETE,  HTTP_METHOD_OPTIONS,
        HTTP_METHOD_TRACE, HTTP_METHOD_CONNECT, HTTP_METHOD_PATCH};
    size_t i;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (n == strlen(names[i]) && memcmp(m, names[i], n) == 0)
            return ids[i];
    }
    return HTTP_METHOD_OTHER;
}

/* The seen bit of a field name, 0 for one the parser does not act on. */
static uint32_t ref_seen_bit(const char *n, size_t len)
{
    static const struct {
        const char *name;
        uint32_t bit;
    } f[] = {
        {"host", HTTP_SEEN_HOST},
        {"connection", HTTP_SEEN_CONNECTION},
        {"keep-alive", HTTP_SEEN_KEEP_ALIVE},
        {"accept-encoding", HTTP_SEEN_ACCEPT_ENCODING},
        {"if-none-match", HTTP_SEEN_IF_NONE_MATCH},
        {"if-modified-since", HTTP_SEEN_IF_MODIFIED_SINCE},
        {"range", HTTP_SEEN_RANGE},
        {"content-length", HTTP_SEEN_CONTENT_LENGTH},
        {"transfer-encoding", HTTP_SEEN_TRANSFER_ENCODING},
        {"expect", HTTP_SEEN_EXPECT},
        {"if-range", HTTP_SEEN_IF_RANGE},
    };
    size_t i;

    for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        if (ref_equal_nocase(n, len, f[i].name))
            return f[i].bit;
    }
    return 0;
}

/* --- running the parser on a head placed at a given word offset --- */

static struct http_parser parser;
static struct http_header fields[STORE];
static char area[1024] __attribute__((aligned(16)));
static const char *head; /* the head inside area */
static size_t head_len;
static long cases, mismatches;

static int run(const char *s, size_t len, unsigned align)
{
    size_t consumed = 0;
    int rc;

    memcpy(area + align, s, len);
    head = area + align;
    head_len = len;
    http_parser_init(&parser, NULL);
    http_parser_set_header_store(&parser, fields, STORE);
    rc = http_parse_request(&parser, head, len, &consumed);
    if (rc == HTTP_PARSE_COMPLETE && consumed != len)
        rc = 100; /* a complete head that is not the whole input */
    cases++;
    return rc;
}

static bool slice_is(struct http_slice sl, const char *s, size_t n)
{
    return sl.len == n && memcmp(head + sl.off, s, n) == 0;
}

static void mismatch(const char *what, size_t len, size_t k, int b, int rc)
{
    if (mismatches++ < 20)
        fprintf(stderr, "%s: line length %zu, byte 0x%02x at %zu: rc %d\n",
                what, len, b, k, rc);
}

/* Byte b at offset k of a run of len bytes built from base (padded with
 * pad). */
static void make(char *out,
                 const char *base,
                 char pad,
                 size_t len,
                 size_t k,
                 int b)
{
    size_t i, bl = strlen(base);

    for (i = 0; i < len; i++)
        out[i] = i < bl ? base[i] : pad;
    out[k] = (char) b;
}

static unsigned align_of(size_t len, size_t k, int b)
{
    return (unsigned) (len * 5 + k * 3 + (size_t) b) % 16;
}

static void test_method_bytes(void)
{
    static const char *bases[] = {"",        "GET",     "HEAD",  "POST",
                                  "OPTIONS", "CONNECT", "DELETE"};
    char m[MAX_LINE], req[256];
    size_t bi, len, k;
    int b;

    for (bi = 0; bi < sizeof(bases) / sizeof(bases[0]); bi++) {
        for (len = 1; len <= MAX_LINE; len++) {
            for (k = 0; k < len; k++) {
                for (b = 0; b < 256; b++) {
                    size_t n;
                    bool ok;
                    int rc;

                    make(m, bases[bi], 'X', len, k, b);
                    n = (size_t) snprintf(req, sizeof(req), "%.*s", (int) len,
                                          m);
                    n += (size_t) snprintf(req + n, sizeof(req) - n, "%s",
                                           " /t HTTP/1.1\r\nHost: h\r\n\r\n");
                    memcpy(req, m, len); /* NUL bytes too */
                    rc = run(req, n, align_of(len, k, b));
                    ok = ref_tchar(b);
                    if (ok != (rc == HTTP_PARSE_COMPLETE) ||
                        (ok && (!slice_is(parser.req.method_token, m, len) ||
                                parser.req.method != ref_method(m, len))))
                        mismatch("method", len, k, b, rc);
                }
            }
        }
    }
}

static void test_target_bytes(void)
{
    char t[MAX_LINE], req[256];
    size_t len, k;
    int b;

    for (len = 1; len <= MAX_LINE; len++) {
        for (k = 0; k < len; k++) {
            for (b = 0; b < 256; b++) {
                size_t n;
                bool ok;
                int rc;

                make(t, "/", 'a', len, k, b);
                memcpy(req, "GET ", 4);
                memcpy(req + 4, t, len);
                n = 4 + len;
                memcpy(req + n, " HTTP/1.1\r\nHost: h\r\n\r\n", 22);
                n += 22;
                rc = run(req, n, align_of(len, k, b));
                ok = k == 0 ? b == '/' : ref_target_byte(b);
                if (ok != (rc == HTTP_PARSE_COMPLETE) ||
                    (ok && (!slice_is(parser.req.target, t, len) ||
                            !slice_is(parser.req.path, t, len))))
                    mismatch("target", len, k, b, rc);
            }
        }
    }
}

static void test_version_bytes(void)
{
    char v[8], req[64];
    size_t k;
    unsigned align;
    int b;

    for (align = 0; align < 16; align++) {
        for (k = 0; k < 8; k++) {
            for (b = 0; b < 256; b++) {
                size_t n;
                int rc, want;

                memcpy(v, "HTTP/1.1", 8);
                v[k] = (char) b;
                memcpy(req, "GET /t ", 7);
                memcpy(req + 7, v, 8);
                memcpy(req + 15, "\r\nHost: h\r\n\r\n", 13);
                n = 28;
                rc = run(req, n, align);
                want = memcmp(v, "HTTP/1.1", 8) == 0   ? HTTP_VERSION_1_1
                       : memcmp(v, "HTTP/1.0", 8) == 0 ? HTTP_VERSION_1_0
                                                       : 0;
                if ((want != 0) != (rc == HTTP_PARSE_COMPLETE) ||
                    (want && parser.req.version != (enum http_version) want))
                    mismatch("version", 8, k, b, rc);
            }
        }
    }
}

/* What the reference makes of one field line "name: value" in an HTTP/1.0
 * request (Host not required): accepted or not, and the seen bits. */
static bool ref_field(const char *name,
                      size_t nl,
                      const char *value,
                      size_t vl,
                      uint32_t *seen)
{
    uint32_t bit = ref_seen_bit(name, nl);
    size_t i;

    *seen = bit;
    if (nl == 0)
        return false;
    for (i = 0; i < nl; i++) {
        if (!ref_tchar((unsigned char) name[i]))
            return false;
    }
    for (i = 0; i < vl; i++) {
        if (!ref_value_byte((unsigned char) value[i]))
            return false;
    }
    if (bit == HTTP_SEEN_TRANSFER_ENCODING)
        return false; /* not in HTTP/1.0 */
    if (bit == HTTP_SEEN_CONTENT_LENGTH) {
        if (vl == 0 || vl > 6)
            return false;
        for (i = 0; i < vl; i++) {
            if (value[i] < '0' || value[i] > '9')
                return false;
        }
    }
    if (bit == HTTP_SEEN_HOST) {
        for (i = 0; i < vl; i++) {
            if (!ref_host_byte((unsigned char) value[i]))
                return false;
        }
    }
    return true;
}

static void test_name_bytes(void)
{
    static const char *bases[] = {
        "",
        "Host",
        "Connection",
        "Content-Length",
        "Accept",
        "Accept-Encoding",
        "If-Modified-Since",
        "Transfer-Encoding",
        "User-Agent",
        "Keep-Alive",
        "Range",
        "If-None-Match",
        "If-Range",
        "Expect",
        "Cookie",
        "Referer",
        "HOST",
        "cOnNeCtIoN",
    };
    char nm[MAX_LINE + 2], req[256];
    size_t bi, len, k;
    int b;

    for (bi = 0; bi < sizeof(bases) / sizeof(bases[0]); bi++) {
        size_t bl = strlen(bases[bi]);
        size_t lo = bl ? bl - 1 : 1, hi = bl ? bl + 1 : MAX_LINE;

        for (len = lo; len <= hi; len++) {
            for (k = 0; k < len; k++) {
                for (b = 0; b < 256; b++) {
                    const char *name = nm, *value;
                    char raw[MAX_LINE + 8];
                    size_t n, nl, rl, vo, vl;
                    uint32_t seen;
                    bool ok;
                    int rc;

                    make(nm, bases[bi], 'x', len, k, b);
                    n = 0;
                    memcpy(req, "GET /t HTTP/1.0\r\n", 17);
                    n = 17;
                    memcpy(req + n, nm, len);
                    n += len;
                    memcpy(req + n, ": 1\r\n\r\n", 7);
                    n += 7;
                    rc = run(req, n, align_of(len, k, b));
                    /* a colon inside the name ends it there */
                    if (b == ':') {
                        nl = k;
                        rl = len - k - 1;
                        memcpy(raw, nm + k + 1, rl);
                        memcpy(raw + rl, ": 1", 3);
                        rl += 3;
                    } else {
                        nl = len;
                        memcpy(raw, " 1", 2);
                        rl = 2;
                    }
                    ref_trim(raw, rl, &vo, &vl);
                    value = raw + vo;
                    ok = ref_field(name, nl, value, vl, &seen);
                    if (ok != (rc == HTTP_PARSE_COMPLETE) ||
                        (ok && (parser.req.seen != seen ||
                                parser.req.header_count != 1 ||
                                !slice_is(fields[0].name, name, nl) ||
                                !slice_is(fields[0].value, value, vl))))
                        mismatch("field name", len, k, b, rc);
                }
            }
        }
    }
}

/* Connection tokens as the reference reads them. */
static void ref_connection(const char *v, size_t n, bool *close, bool *ka)
{
    size_t i = 0;

    *close = *ka = false;
    while (i < n) {
        size_t s, e;

        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        s = i;
        while (i < n && v[i] != ',')
            i++;
        e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (ref_equal_nocase(v + s, e - s, "close"))
            *close = true;
        else if (ref_equal_nocase(v + s, e - s, "keep-alive"))
            *ka = true;
    }
}

/* Decimal digits as a number, saturated well above any limit here. */
static uint64_t ref_number(const char *s, size_t n)
{
    uint64_t v = 0;
    size_t i;

    for (i = 0; i < n; i++) {
        v = v * 10 + (uint64_t) (s[i] - '0');
        if (v > ((uint64_t) 1 << 40))
            return (uint64_t) 1 << 40;
    }
    return v;
}

static int ref_value_error(int b)
{
    if (b == 0)
        return HTTP_PARSE_ERR_NUL;
    if (b == '\r')
        return HTTP_PARSE_ERR_BARE_CR;
    if (b == '\n')
        return HTTP_PARSE_ERR_BARE_LF;
    return HTTP_PARSE_ERR_HEADER_VALUE;
}

static void test_value_bytes(void)
{
    static const struct {
        const char *name, *version, *base;
        char pad;
    } c[] = {
        {"X-A", "1.0", "", 'v'},
        {"User-Agent", "1.0", "Mozilla/5.0 (X11; Linux x86_64)", 'z'},
        {"Host", "1.1", "127.0.0.1:8080", '1'},
        {"Host", "1.1", "localhost", 'a'},
        {"Connection", "1.0", "keep-alive", ' '},
        {"Connection", "1.0", "close", ','},
        {"Content-Length", "1.0", "12345", '0'},
    };
    char v[MAX_LINE], req[256];
    size_t ci, len, k;
    int b;

    for (ci = 0; ci < sizeof(c) / sizeof(c[0]); ci++) {
        for (len = 1; len <= MAX_LINE; len++) {
            for (k = 0; k < len; k++) {
                for (b = 0; b < 256; b++) {
                    size_t n, vo, vl, i;
                    bool ok, is_host = strcmp(c[ci].name, "Host") == 0;
                    int rc, want;

                    make(v, c[ci].base, c[ci].pad, len, k, b);
                    n = (size_t) snprintf(
                        req, sizeof(req),
                        "GET /t HTTP/%s\r\n%s: ", c[ci].version, c[ci].name);
                    memcpy(req + n, v, len);
                    n += len;
                    memcpy(req + n, "\r\n\r\n", 4);
                    n += 4;
                    rc = run(req, n, align_of(len, k, b));
                    ref_trim(v, len, &vo, &vl);
                    ok = ref_value_byte(b);
                    want = ok ? HTTP_PARSE_COMPLETE : ref_value_error(b);
                    if (ok && is_host) {
                        for (i = vo; i < vo + vl; i++) {
                            if (!ref_host_byte((unsigned char) v[i]))
                                want = HTTP_PARSE_ERR_HOST_INVALID;
                        }
                    }
                    if (ok && strcmp(c[ci].name, "Content-Length") == 0) {
                        for (i = vo; i < vo + vl; i++) {
                            if (v[i] < '0' || v[i] > '9')
                                want = HTTP_PARSE_ERR_CONTENT_LENGTH;
                        }
                        if (vl == 0)
                            want = HTTP_PARSE_ERR_CONTENT_LENGTH;
                        if (want == HTTP_PARSE_COMPLETE &&
                            ref_number(v + vo, vl) > HTTP_DEFAULT_MAX_BODY)
                            want = HTTP_PARSE_ERR_BODY_TOO_LARGE;
                    }
                    if (rc != want ||
                        (rc == HTTP_PARSE_COMPLETE &&
                         !slice_is(fields[0].value, v + vo, vl))) {
                        mismatch(c[ci].name, len, k, b, rc);
                        continue;
                    }
                    if (rc == HTTP_PARSE_COMPLETE &&
                        strcmp(c[ci].name, "Connection") == 0) {
                        bool cl, ka;

                        ref_connection(v + vo, vl, &cl, &ka);
                        if (parser.req.connection_close != cl ||
                            parser.req.connection_keep_alive != ka ||
                            parser.req.keep_alive != (ka && !cl))
                            mismatch("Connection tokens", len, k, b, rc);
                    }
                }
            }
        }
    }
}

int main(void)
{
    test_method_bytes();
    test_target_bytes();
    test_version_bytes();
    test_name_bytes();
    test_value_bytes();
    printf("%ld heads\n", cases);
    CHECK_INT(mismatches, 0);
    CHECK(cases > 1000000);
    UNIT_DONE();
}
