/* Unit tests of the PROXY protocol header: v1 and v2, whole and fed in
 * every split, with what follows it, and the bad ones. */
#include <arpa/inet.h>

#include "http_proxy.h"
#include "unit.h"

/* Feed h (n bytes) in pieces of step bytes: the result, the header's
 * length (bytes used in total) and the address. */
static int feed(const void *h,
                size_t n,
                size_t step,
                size_t *hlen,
                struct http_proxy_addr *a)
{
    struct http_proxy p;
    const unsigned char *s = h;
    size_t at = 0;

    http_proxy_init(&p);
    *hlen = 0;
    while (at < n) {
        size_t k = n - at < step ? n - at : step, used;
        int r = http_proxy_parse(&p, s + at, k, &used);
        if (r == HTTP_PROXY_DONE) {
            *hlen = at + used;
            *a = p.addr;
            return r;
        }
        if (r < 0)
            return r;
        if (used != k)
            return 99; /* MORE must take everything */
        at += k;
    }
    return HTTP_PROXY_MORE;
}

/* Every split of h gives the same result and length. */
static int feed_all(const void *h,
                    size_t n,
                    size_t *hlen,
                    struct http_proxy_addr *a)
{
    int r = feed(h, n, n, hlen, a);
    for (size_t step = 1; step < n; step++) {
        size_t l2;
        struct http_proxy_addr a2;
        int r2 = feed(h, n, step, &l2, &a2);
        CHECK_INT(r2, r);
        CHECK_INT(l2, *hlen);
        if (r == HTTP_PROXY_DONE && r2 == r)
            CHECK(memcmp(&a2, a, sizeof(a2)) == 0);
    }
    return r;
}

static void v1_ok(const char *line,
                  int family,
                  const char *src,
                  int sport,
                  const char *dst,
                  int dport)
{
    char buf[256];
    size_t n = (size_t) snprintf(buf, sizeof(buf), "%sGET / HTTP/1.1\r\n",
                                 line),
           hlen;
    struct http_proxy_addr a;
    memset(&a, 0, sizeof(a));
    int r = feed_all(buf, n, &hlen, &a);
    if (r != HTTP_PROXY_DONE)
        fprintf(stderr, "v1 %s: %d\n", line, r);
    CHECK_INT(r, HTTP_PROXY_DONE);
    CHECK_INT(hlen, strlen(line));
    CHECK_INT(a.version, 1);
    CHECK_INT(a.family, family);
    if (family) {
        unsigned char want[16] = {0};
        int af = family == 4 ? AF_INET : AF_INET6;
        CHECK(inet_pton(af, src, want) == 1);
        CHECK(memcmp(a.src, want, family == 4 ? 4 : 16) == 0);
        CHECK(inet_pton(af, dst, want) == 1);
        CHECK(memcmp(a.dst, want, family == 4 ? 4 : 16) == 0);
        CHECK_INT(a.src_port, sport);
        CHECK_INT(a.dst_port, dport);
    }
}

static void v1_bad(const char *line, int want)
{
    size_t hlen;
    struct http_proxy_addr a;
    int r = feed_all(line, strlen(line), &hlen, &a);
    if (r != want)
        fprintf(stderr, "v1 bad %s: %d\n", line, r);
    CHECK_INT(r, want);
}

/* A v2 header: command, family byte, the address block, then tlv_len
 * bytes of TLV. */
static size_t v2(unsigned char *out,
                 int cmd,
                 int fam,
                 const void *block,
                 size_t block_len,
                 size_t tlv_len)
{
    static const unsigned char sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                          0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};
    size_t len = block_len + tlv_len;
    memcpy(out, sig, 12);
    out[12] = (unsigned char) (0x20 | cmd);
    out[13] = (unsigned char) fam;
    out[14] = (unsigned char) (len >> 8);
    out[15] = (unsigned char) len;
    memcpy(out + 16, block, block_len);
    for (size_t i = 0; i < tlv_len; i++)
        out[16 + block_len + i] = (unsigned char) (i == 0 ? 0x04 : 0xee);
    return 16 + len;
}

int main(void)
{
    v1_ok("PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\n", 4, "192.0.2.1",
          56324, "198.51.100.7", 443);
    v1_ok("PROXY TCP4 0.0.0.0 255.255.255.255 0 65535\r\n", 4, "0.0.0.0", 0,
          "255.255.255.255", 65535);
    v1_ok("PROXY TCP6 2001:db8::1 ::1 1 2\r\n", 6, "2001:db8::1", 1, "::1", 2);
    v1_ok("PROXY TCP6 :: 1:2:3:4:5:6:7:8 80 8080\r\n", 6, "::", 80,
          "1:2:3:4:5:6:7:8", 8080);
    v1_ok("PROXY TCP6 ::ffff:192.0.2.9 FE80::AB:1 9 9\r\n", 6,
          "::ffff:192.0.2.9", 9, "fe80::ab:1", 9);
    v1_ok("PROXY TCP6 1:2:3:4:5:6:7:: 2001:db8::1.2.3.4 9 9\r\n", 6,
          "1:2:3:4:5:6:7::", 9, "2001:db8::1.2.3.4", 9);
    v1_ok("PROXY UNKNOWN\r\n", 0, NULL, 0, NULL, 0);
    v1_ok("PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n", 0,
          NULL, 0, NULL, 0);
    /* the longest lines: TCP6's 104 bytes; UNKNOWN with addresses, 107
     * (the specification's bound), taken; one byte more, not */
    {
        const char *l =
            "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 "
            "65535\r\n";
        CHECK_INT(strlen(l), 104);
        v1_ok(l, 6, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535,
              "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535);
        l = "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
        CHECK_INT(strlen(l), HTTP_PROXY_V1_MAX);
        v1_ok(l, 0, NULL, 0, NULL, 0);
        l = "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 655355\r\n";
        v1_bad(l, HTTP_PROXY_ERR_TOO_LONG);
    }

    /* no header at all: refused at the first byte that tells */
    v1_bad("GET / HTTP/1.1\r\n\r\n", HTTP_PROXY_ERR_MISSING);
    v1_bad("PUT / HTTP/1.1\r\n\r\n", HTTP_PROXY_ERR_MISSING);
    v1_bad("\x16\x03\x01\x02\x00", HTTP_PROXY_ERR_MISSING);
    v1_bad("proxy TCP4 1.2.3.4 1.2.3.4 1 2\r\n", HTTP_PROXY_ERR_MISSING);
    v1_bad("PROXYTCP4 1.2.3.4 1.2.3.4 1 2\r\n", HTTP_PROXY_ERR_SYNTAX);
    /* malformed */
    v1_bad("PROXY TCP4 1.2.3.4 1.2.3.4 1 2\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY TCP4 1.2.3.4 1.2.3.4 1 2 \r\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY TCP4  1.2.3.4 1.2.3.4 1 2\r\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY TCP4 1.2.3 1.2.3.4 1 2\r\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY TCP4 1.2.3.256 1.2.3.4 1 2\r\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY TCP4 1.2.3.4 1.2.3.4 65536 2\r\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY TCP4 1.2.3.4 1.2.3.4 -1 2\r\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY TCP4 1.2.3.4 1.2.3.4 1\r\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY TCP4 ::1 ::1 1 2\r\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY TCP6 1.2.3.4 1.2.3.4 1 2\r\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY TCP6 1::2::3 ::1 1 2\r\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY TCP6 12345::1 ::1 1 2\r\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY TCP6 1:2:3:4:5:6:7:8:9 ::1 1 2\r\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY TCP6 1:2:3 ::1 1 2\r\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY TCP6 1: ::1 1 2\r\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY UDP4 1.2.3.4 1.2.3.4 1 2\r\n", HTTP_PROXY_ERR_SYNTAX);
    v1_bad("PROXY UNKNOWNX\r\n", HTTP_PROXY_ERR_SYNTAX);
    /* oversized: no CRLF within 107 bytes */
    {
        char l[300];
        memset(l, '1', sizeof(l));
        memcpy(l, "PROXY UNKNOWN ", 14);
        l[sizeof(l) - 1] = '\0';
        v1_bad(l, HTTP_PROXY_ERR_TOO_LONG);
    }
    /* unfinished: more wanted */
    v1_bad("PROXY TCP4 1.2.3.4 1.2", HTTP_PROXY_MORE);

    /* ---- v2 ---- */
    unsigned char h[700];
    size_t n, hlen;
    struct http_proxy_addr a;
    const unsigned char b4[12] = {192, 0, 2,    1,    198,  51,
                                  100, 7, 0xdc, 0x04, 0x01, 0xbb};
    unsigned char b6[36] = {0x20, 0x01, 0x0d, 0xb8};
    b6[15] = 1;
    b6[31] = 2;
    b6[32] = 0x30;
    b6[33] = 0x39;
    b6[34] = 0x00;
    b6[35] = 0x50;

    n = v2(h, 1, 0x11, b4, sizeof(b4), 0);
    memcpy(h + n, "GET", 3);
    CHECK_INT(feed_all(h, n + 3, &hlen, &a), HTTP_PROXY_DONE);
    CHECK_INT(hlen, 28);
    CHECK_INT(a.version, 2);
    CHECK_INT(a.family, 4);
    CHECK(memcmp(a.src, b4, 4) == 0 && memcmp(a.dst, b4 + 4, 4) == 0);
    CHECK_INT(a.src_port, 56324);
    CHECK_INT(a.dst_port, 443);

    /* TLVs are skipped */
    n = v2(h, 1, 0x21, b6, sizeof(b6), 40);
    memcpy(h + n, "\x16\x03\x01", 3);
    CHECK_INT(feed_all(h, n + 3, &hlen, &a), HTTP_PROXY_DONE);
    CHECK_INT(hlen, 16 + 36 + 40);
    CHECK_INT(a.family, 6);
    CHECK(memcmp(a.src, b6, 16) == 0 && memcmp(a.dst, b6 + 16, 16) == 0);
    CHECK_INT(a.src_port, 12345);
    CHECK_INT(a.dst_port, 80);

    /* LOCAL: no address, whatever the family says */
    n = v2(h, 0, 0x11, b4, sizeof(b4), 0);
    CHECK_INT(feed_all(h, n, &hlen, &a), HTTP_PROXY_DONE);
    CHECK_INT(hlen, n);
    CHECK(a.local && a.family == 0);
    n = v2(h, 0, 0x00, NULL, 0, 0);
    CHECK_INT(feed_all(h, n, &hlen, &a), HTTP_PROXY_DONE);
    CHECK_INT(hlen, 16);
    CHECK(a.local && a.family == 0);
    /* PROXY over UNSPEC or a UNIX socket: the real peer */
    n = v2(h, 1, 0x00, NULL, 0, 0);
    CHECK_INT(feed_all(h, n, &hlen, &a), HTTP_PROXY_DONE);
    CHECK(!a.local && a.family == 0);
    n = v2(h, 1, 0x31, h + 300, 216, 0);
    CHECK_INT(feed_all(h, n, &hlen, &a), HTTP_PROXY_DONE);
    CHECK_INT(hlen, 16 + 216);
    CHECK_INT(a.family, 0);
    /* the length's bound: 520 taken, 521 not */
    n = v2(h, 1, 0x11, b4, sizeof(b4), 520 - 12);
    CHECK_INT(feed_all(h, n, &hlen, &a), HTTP_PROXY_DONE);
    CHECK_INT(hlen, HTTP_PROXY_MAX);
    n = v2(h, 1, 0x11, b4, sizeof(b4), 521 - 12);
    CHECK_INT(feed_all(h, n, &hlen, &a), HTTP_PROXY_ERR_TOO_LONG);
    /* an address block shorter than its family's */
    n = v2(h, 1, 0x21, b6, 12, 0);
    CHECK_INT(feed_all(h, n, &hlen, &a), HTTP_PROXY_ERR_SYNTAX);
    /* UDP, an undefined family, another version or command */
    n = v2(h, 1, 0x12, b4, sizeof(b4), 0);
    CHECK_INT(feed_all(h, n, &hlen, &a), HTTP_PROXY_ERR_UNSUPPORTED);
    n = v2(h, 1, 0x41, b4, sizeof(b4), 0);
    CHECK_INT(feed_all(h, n, &hlen, &a), HTTP_PROXY_ERR_UNSUPPORTED);
    n = v2(h, 2, 0x11, b4, sizeof(b4), 0);
    CHECK_INT(feed_all(h, n, &hlen, &a), HTTP_PROXY_ERR_UNSUPPORTED);
    n = v2(h, 1, 0x11, b4, sizeof(b4), 0);
    h[12] = 0x11; /* version 1 in a v2 header */
    CHECK_INT(feed_all(h, n, &hlen, &a), HTTP_PROXY_ERR_UNSUPPORTED);
    /* a broken signature */
    n = v2(h, 1, 0x11, b4, sizeof(b4), 0);
    h[8] = 'X';
    CHECK_INT(feed_all(h, n, &hlen, &a), HTTP_PROXY_ERR_SYNTAX);
    /* unfinished */
    n = v2(h, 1, 0x21, b6, sizeof(b6), 10);
    CHECK_INT(feed_all(h, n - 1, &hlen, &a), HTTP_PROXY_MORE);
    CHECK_INT(feed_all(h, 5, &hlen, &a), HTTP_PROXY_MORE);
    UNIT_DONE();
}
