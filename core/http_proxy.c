/* http_proxy.c — the PROXY protocol header, versions 1 and 2 (see
 * http_proxy.h). Bytes are checked as they come: a first byte that starts
 * neither version, or a v2 signature byte that differs, fails at once, so a
 * plain request on a PROXY listener is refused on its first read. */
#include "http_proxy.h"
#include "http_internal.h"

static const uint8_t v1_prefix[] = "PROXY ";
static const uint8_t v2_sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                   0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};

/* v2: what is kept of a header: the head and the longest address block we
 * read (TCP over IPv6); TLVs and the rest are only counted. */
#define V2_KEEP (HTTP_PROXY_V2_HEAD + 36)

void http_proxy_init(struct http_proxy *p)
{
    memset(p, 0, sizeof(*p));
}

/* ---- v1: the line, parsed once its CRLF is in ---- */

/* A decimal number of 1..max_digits digits, at most max: the index after
 * it, or -1. */
static int v1_number(const uint8_t *s,
                     int i,
                     int end,
                     int max_digits,
                     uint32_t max,
                     uint32_t *out)
{
    uint32_t v = 0;
    int n = 0;

    while (i < end && http_is_digit(s[i])) {
        if (++n > max_digits)
            return -1;
        v = v * 10 + (uint32_t) (s[i++] - '0');
    }
    if (n == 0 || v > max)
        return -1;
    *out = v;
    return i;
}

/* Dotted-quad IPv4 in s[i..end): the index after it, or -1. */
static int v1_ipv4(const uint8_t *s, int i, int end, uint8_t out[4])
{
    for (int k = 0; k < 4; k++) {
        uint32_t v;
        if (k > 0) {
            if (i >= end || s[i] != '.')
                return -1;
            i++;
        }
        i = v1_number(s, i, end, 3, 255, &v);
        if (i < 0)
            return -1;
        out[k] = (uint8_t) v;
    }
    return i;
}

/* RFC 4291 text form of IPv6 (with one "::", hex groups of 1..4 digits,
 * a dotted IPv4 tail) in s[i..end), ended by a space: the index after it,
 * or -1. */
static int v1_ipv6(const uint8_t *s, int i, int end, uint8_t out[16])
{
    uint8_t words[16];
    int nbytes = 0, gap = -1;

    if (i + 1 < end && s[i] == ':' && s[i + 1] == ':') {
        gap = 0;
        i += 2;
    }
    while (i < end && s[i] != ' ') {
        int start = i, hex = 0;
        uint32_t v = 0;

        while (i < end && http_hex_value(s[i]) >= 0 && hex < 5) {
            v = v * 16 + (uint32_t) http_hex_value(s[i++]);
            hex++;
        }
        if (i < end && s[i] == '.') {
            /* the last 32 bits as IPv4 */
            if (nbytes > 12)
                return -1;
            i = v1_ipv4(s, start, end, words + nbytes);
            if (i < 0)
                return -1;
            nbytes += 4;
            break;
        }
        if (hex == 0 || hex > 4 || nbytes > 14)
            return -1;
        words[nbytes++] = (uint8_t) (v >> 8);
        words[nbytes++] = (uint8_t) v;
        if (i < end && s[i] == ':') {
            i++;
            if (i < end && s[i] == ':') {
                if (gap >= 0)
                    return -1;
                gap = nbytes;
                i++;
            } else if (i >= end || s[i] == ' ') {
                return -1; /* a trailing single ':' */
            }
        }
    }
    if (gap < 0 ? nbytes != 16 : nbytes > 14)
        return -1;
    if (gap < 0) {
        memcpy(out, words, 16);
    } else {
        int tail = nbytes - gap;
        memset(out, 0, 16);
        memcpy(out, words, (size_t) gap);
        memcpy(out + 16 - tail, words + gap, (size_t) tail);
    }
    return i;
}

/* The whole line s[0..n), CRLF excluded, "PROXY " included. */
static int v1_line(struct http_proxy_addr *a, const uint8_t *s, int n)
{
    int i = 6;
    uint32_t sp, dp;
    bool v6;

    a->version = 1;
    if (n >= i + 7 && memcmp(s + i, "UNKNOWN", 7) == 0 &&
        (n == i + 7 || s[i + 7] == ' '))
        return HTTP_PROXY_DONE; /* the rest is ignored: the real peer */
    if (n < i + 5 || memcmp(s + i, "TCP", 3) != 0 ||
        (s[i + 3] != '4' && s[i + 3] != '6') || s[i + 4] != ' ')
        return HTTP_PROXY_ERR_SYNTAX;
    v6 = s[i + 3] == '6';
    i += 5;
    i = v6 ? v1_ipv6(s, i, n, a->src) : v1_ipv4(s, i, n, a->src);
    if (i < 0 || i >= n || s[i++] != ' ')
        return HTTP_PROXY_ERR_SYNTAX;
    i = v6 ? v1_ipv6(s, i, n, a->dst) : v1_ipv4(s, i, n, a->dst);
    if (i < 0 || i >= n || s[i++] != ' ')
        return HTTP_PROXY_ERR_SYNTAX;
    i = v1_number(s, i, n, 5, 65535, &sp);
    if (i < 0 || i >= n || s[i++] != ' ')
        return HTTP_PROXY_ERR_SYNTAX;
    i = v1_number(s, i, n, 5, 65535, &dp);
    if (i != n)
        return HTTP_PROXY_ERR_SYNTAX;
    a->family = v6 ? 6 : 4;
    a->src_port = (uint16_t) sp;
    a->dst_port = (uint16_t) dp;
    return HTTP_PROXY_DONE;
}

/* ---- v2 ---- */

/* The 16-byte head is in: its version, command, family and length. */
static int v2_head(struct http_proxy *p)
{
    const uint8_t *h = p->line;
    unsigned len = (unsigned) h[14] << 8 | h[15];
    unsigned need = 0;

    if (h[12] >> 4 != 2)
        return HTTP_PROXY_ERR_UNSUPPORTED;
    if (len > HTTP_PROXY_V2_LEN_MAX)
        return HTTP_PROXY_ERR_TOO_LONG;
    switch (h[12] & 0xf) {
    case 0: /* LOCAL: whatever follows is ignored */
        break;
    case 1: /* PROXY */
        switch (h[13]) {
        case 0x00: /* UNSPEC */
        case 0x31: /* UNIX stream: no address of ours to take */
            break;
        case 0x11: /* TCP over IPv4 */
            need = 12;
            break;
        case 0x21: /* TCP over IPv6 */
            need = 36;
            break;
        default: /* UDP, and what the specification does not define */
            return HTTP_PROXY_ERR_UNSUPPORTED;
        }
        break;
    default:
        return HTTP_PROXY_ERR_UNSUPPORTED;
    }
    if (len < need)
        return HTTP_PROXY_ERR_SYNTAX;
    p->total = (uint16_t) (HTTP_PROXY_V2_HEAD + len);
    return HTTP_PROXY_MORE;
}

/* The whole header went by: the address block is in p->line. */
static int v2_done(struct http_proxy *p)
{
    const uint8_t *h = p->line, *b = h + HTTP_PROXY_V2_HEAD;
    struct http_proxy_addr *a = &p->addr;

    a->version = 2;
    if ((h[12] & 0xf) == 0) {
        a->local = true;
        return HTTP_PROXY_DONE;
    }
    if (h[13] == 0x11) {
        a->family = 4;
        memcpy(a->src, b, 4);
        memcpy(a->dst, b + 4, 4);
        b += 8;
    } else if (h[13] == 0x21) {
        a->family = 6;
        memcpy(a->src, b, 16);
        memcpy(a->dst, b + 16, 16);
        b += 32;
    } else {
        return HTTP_PROXY_DONE;
    }
    a->src_port = (uint16_t) (b[0] << 8 | b[1]);
    a->dst_port = (uint16_t) (b[2] << 8 | b[3]);
    return HTTP_PROXY_DONE;
}

int http_proxy_parse(struct http_proxy *p,
                     const void *buf,
                     size_t len,
                     size_t *used)
{
    const uint8_t *s = buf;
    size_t i = 0;
    int r;

    *used = 0;
    if (len > 0 && p->version == 0) {
        if (s[0] == v1_prefix[0])
            p->version = 1;
        else if (s[0] == v2_sig[0])
            p->version = 2;
        else
            return HTTP_PROXY_ERR_MISSING;
    }
    while (i < len) {
        uint8_t c = s[i++];

        if (p->version == 1) {
            if (p->pos < 6 && c != v1_prefix[p->pos])
                return p->pos < 5 ? HTTP_PROXY_ERR_MISSING
                                  : HTTP_PROXY_ERR_SYNTAX;
            if (p->pos >= HTTP_PROXY_V1_MAX)
                return HTTP_PROXY_ERR_TOO_LONG;
            p->line[p->pos++] = c;
            if (c != '\n')
                continue;
            if (p->pos < 2 || p->line[p->pos - 2] != '\r')
                return HTTP_PROXY_ERR_SYNTAX;
            r = v1_line(&p->addr, p->line, p->pos - 2);
            if (r == HTTP_PROXY_DONE)
                *used = i;
            return r;
        }
        if (p->pos < sizeof(v2_sig) && c != v2_sig[p->pos])
            return p->pos < 4 ? HTTP_PROXY_ERR_MISSING : HTTP_PROXY_ERR_SYNTAX;
        if (p->pos < V2_KEEP)
            p->line[p->pos] = c;
        p->pos++;
        if (p->pos == HTTP_PROXY_V2_HEAD) {
            r = v2_head(p);
            if (r < 0)
                return r;
        }
        if (p->total && p->pos == p->total) {
            *used = i;
            return v2_done(p);
        }
    }
    *used = len;
    return HTTP_PROXY_MORE;
}
