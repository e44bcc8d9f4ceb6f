/* http_access.c — CIDRs, address rules, client keys (see http_access.h). */
#include "http_access.h"
#include "http_internal.h"

static const uint8_t v4_mapped_prefix[12] = {0, 0, 0, 0, 0,    0,
                                             0, 0, 0, 0, 0xff, 0xff};

void http_addr_from_v4(uint8_t addr[16], const uint8_t v4[4])
{
    memcpy(addr, v4_mapped_prefix, 12);
    memcpy(addr + 12, v4, 4);
}

/* Is addr an IPv4 client (IPv4-mapped)? */
static bool http_addr_is_v4(const uint8_t addr[16])
{
    return memcmp(addr, v4_mapped_prefix, 12) == 0;
}

/* A decimal number of at most max_digits digits, no leading zero (but
 * "0"), at s[*i..len): its value or -1; *i past it. */
static long dec(const char *s, size_t len, size_t *i, int max_digits)
{
    size_t start = *i;
    long v = 0;

    while (*i < len && http_is_digit((unsigned char) s[*i])) {
        if ((int) (*i - start) == max_digits)
            return -1;
        v = v * 10 + (s[*i] - '0');
        (*i)++;
    }
    if (*i == start || (s[start] == '0' && *i - start > 1))
        return -1;
    return v;
}

/* s[0..len) is a dotted quad, whole. */
static bool parse_v4(const char *s, size_t len, uint8_t out[4])
{
    size_t i = 0;

    for (int part = 0; part < 4; part++) {
        if (part) {
            if (i >= len || s[i] != '.')
                return false;
            i++;
        }
        long v = dec(s, len, &i, 3);
        if (v < 0 || v > 255)
            return false;
        out[part] = (uint8_t) v;
    }
    return i == len;
}

/* s[0..len) is an IPv6 address in RFC 4291's text forms, whole. */
static bool parse_v6(const char *s, size_t len, uint8_t out[16])
{
    uint16_t w[8];
    int n = 0, gap = -1;
    size_t i = 0;

    if (len >= 2 && s[0] == ':' && s[1] == ':') {
        gap = 0;
        i = 2;
    } else if (len && s[0] == ':') {
        return false;
    }
    while (i < len) {
        size_t start = i;
        unsigned v = 0;
        int h;

        while (i < len && i - start < 5 &&
               (h = http_hex_value((unsigned char) s[i])) >= 0) {
            v = v << 4 | (unsigned) h;
            i++;
        }
        if (i < len && s[i] == '.') {
            /* the last 32 bits as a dotted quad */
            uint8_t q[4];

            if (n > 6 || !parse_v4(s + start, len - start, q))
                return false;
            w[n++] = (uint16_t) (q[0] << 8 | q[1]);
            w[n++] = (uint16_t) (q[2] << 8 | q[3]);
            i = len;
            break;
        }
        if (i == start || i - start > 4 || n == 8)
            return false;
        w[n++] = (uint16_t) v;
        if (i == len)
            break;
        if (s[i] != ':')
            return false;
        i++;
        if (i < len && s[i] == ':') {
            if (gap >= 0)
                return false;
            gap = n;
            i++;
        } else if (i == len) {
            return false; /* a trailing single ':' */
        }
    }
    if (gap < 0 ? n != 8 : n > 7)
        return false;
    memset(out, 0, 16);
    int head = gap < 0 ? n : gap, tail = n - head;
    for (int k = 0; k < head; k++) {
        out[2 * k] = (uint8_t) (w[k] >> 8);
        out[2 * k + 1] = (uint8_t) w[k];
    }
    for (int k = 0; k < tail; k++) {
        int at = 8 - tail + k;
        out[2 * at] = (uint8_t) (w[head + k] >> 8);
        out[2 * at + 1] = (uint8_t) w[head + k];
    }
    return true;
}

/* Are addr's bits after the first bits all zero? */
static bool host_bits_zero(const uint8_t addr[16], unsigned bits)
{
    for (unsigned b = bits; b < 128; b++)
        if (addr[b / 8] & (0x80 >> (b % 8)))
            return false;
    return true;
}

int http_cidr_parse(const char *s,
                    size_t len,
                    struct http_access_rule *out,
                    const char **why)
{
    size_t alen = 0, i;
    long prefix = -1;
    bool v6;

    memset(out, 0, sizeof(*out));
    if (len == 3 && !memcmp(s, "all", 3)) {
        out->family = HTTP_ADDR_ANY;
        return 0;
    }
    if (len > HTTP_CIDR_TEXT_MAX) {
        *why = "too long for an address";
        return -1;
    }
    while (alen < len && s[alen] != '/')
        alen++;
    if (alen < len) {
        i = alen + 1;
        prefix = dec(s, len, &i, 3);
        if (prefix < 0 || i != len) {
            *why = "expected a prefix length (a number) after '/'";
            return -1;
        }
    }
    v6 = memchr(s, ':', alen) != NULL;
    if (v6 ? !parse_v6(s, alen, out->addr)
           : !parse_v4(s, alen, out->addr + 12)) {
        *why = v6 ? "not an IPv6 address"
                  : "not an IPv4 address (four decimal parts 0..255) "
                    "or an IPv6 address";
        return -1;
    }
    if (!v6)
        memcpy(out->addr, v4_mapped_prefix, 12);
    if (prefix > (v6 ? 128 : 32)) {
        *why = v6 ? "an IPv6 prefix is 0..128" : "an IPv4 prefix is 0..32";
        return -1;
    }
    if (prefix < 0)
        prefix = v6 ? 128 : 32;
    out->bits = (uint8_t) (v6 ? prefix : 96 + prefix);
    out->family = v6 ? HTTP_ADDR_V6 : HTTP_ADDR_V4;
    if (!host_bits_zero(out->addr, out->bits)) {
        *why =
            "host bits set after the prefix (name the network, "
            "e.g. 10.0.0.0/8)";
        return -1;
    }
    /* written in IPv6 inside ::ffff:0:0/96: an IPv4 rule */
    if (v6 && out->bits >= 96 && http_addr_is_v4(out->addr))
        out->family = HTTP_ADDR_V4;
    return 0;
}

int http_access_add(struct http_access *a,
                    bool allow,
                    const char *s,
                    size_t len,
                    const char **why)
{
    if (a->n >= HTTP_ACCESS_RULES_MAX) {
        *why = "too many address rules (at most 256)";
        return -1;
    }
    if (http_cidr_parse(s, len, &a->rule[a->n], why) < 0)
        return -1;
    a->rule[a->n++].allow = allow;
    return 0;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

int http_access_parse(struct http_access *a,
                      const char *s,
                      size_t len,
                      const char **why)
{
    uint32_t had = a->n;
    size_t i = 0;

    while (i <= len) {
        size_t end = i;

        while (end < len && s[end] != ',')
            end++;
        size_t b = i, e = end;
        while (b < e && is_blank(s[b]))
            b++;
        while (e > b && is_blank(s[e - 1]))
            e--;
        bool allow;
        if (e - b > 6 && !memcmp(s + b, "allow:", 6)) {
            allow = true;
            b += 6;
        } else if (e - b > 5 && !memcmp(s + b, "deny:", 5)) {
            allow = false;
            b += 5;
        } else {
            *why = "expected allow:CIDR or deny:CIDR, comma separated";
            a->n = had;
            return -1;
        }
        if (http_access_add(a, allow, s + b, e - b, why) < 0) {
            a->n = had;
            return -1;
        }
        i = end + 1;
    }
    return 0;
}

static bool prefix_match(const uint8_t a[16], const uint8_t net[16], int bits)
{
    int whole = bits / 8;

    if (memcmp(a, net, (size_t) whole))
        return false;
    if (bits % 8) {
        uint8_t mask = (uint8_t) (0xff << (8 - bits % 8));
        return (a[whole] & mask) == net[whole];
    }
    return true;
}

bool http_access_allowed(const struct http_access *a, const uint8_t addr[16])
{
    uint8_t fam = http_addr_is_v4(addr) ? HTTP_ADDR_V4 : HTTP_ADDR_V6;

    for (uint32_t i = 0; i < a->n; i++) {
        const struct http_access_rule *r = &a->rule[i];
        if (r->family == HTTP_ADDR_ANY ||
            (r->family == fam && prefix_match(addr, r->addr, r->bits)))
            return r->allow;
    }
    return true;
}

void http_addr_key(uint8_t key[16],
                   const uint8_t addr[16],
                   unsigned int v6_prefix)
{
    unsigned bits = http_addr_is_v4(addr) ? 128 : v6_prefix;

    if (bits > 128 || !bits)
        bits = 128;
    memset(key, 0, 16);
    memcpy(key, addr, bits / 8);
    if (bits % 8)
        key[bits / 8] = (uint8_t) (addr[bits / 8] & (0xff << (8 - bits % 8)));
}
