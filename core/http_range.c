/* http_range.c — one byte range; several are answered with the whole
 * representation (RFC 9110 §14.2 lets a server ignore Range), which spares
 * multipart/byteranges and its amplification risk. */
#include "http_range.h"

static bool parse_u64(const char *s, size_t len, uint64_t *v)
{
    uint64_t n = 0;
    size_t i;

    if (len == 0)
        return false;
    for (i = 0; i < len; i++) {
        unsigned d = (unsigned char) s[i] - '0';
        if (d > 9 || n > (HTTP_U64_MAX - d) / 10)
            return false;
        n = n * 10 + d;
    }
    *v = n;
    return true;
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

int http_range_parse(const char *field,
                     size_t len,
                     uint64_t size,
                     uint64_t *first,
                     uint64_t *last)
{
    size_t i = 0, dash;
    uint64_t a, b;

    while (i < len && is_ows(field[i]))
        i++;
    while (len > i && is_ows(field[len - 1]))
        len--;
    if (len - i < 6 || !http_ascii_equal_nocase(field + i, 6, "bytes=", 6))
        return HTTP_RANGE_IGNORE;
    i += 6;
    while (i < len && is_ows(field[i]))
        i++;
    if (memchr(field + i, ',', len - i))
        return HTTP_RANGE_IGNORE;

    for (dash = i; dash < len && field[dash] != '-'; dash++)
        ;
    if (dash >= len)
        return HTTP_RANGE_IGNORE;

    if (dash == i) {
        /* suffix: the last b bytes */
        if (!parse_u64(field + dash + 1, len - dash - 1, &b))
            return HTTP_RANGE_IGNORE;
        if (b == 0 || size == 0)
            return HTTP_RANGE_UNSATISFIABLE;
        if (b > size)
            b = size;
        *first = size - b;
        *last = size - 1;
        return HTTP_RANGE_SATISFIABLE;
    }
    if (!parse_u64(field + i, dash - i, &a))
        return HTTP_RANGE_IGNORE;
    if (dash + 1 == len) {
        b = HTTP_U64_MAX;
    } else {
        if (!parse_u64(field + dash + 1, len - dash - 1, &b))
            return HTTP_RANGE_IGNORE;
        if (b < a) /* invalid range-spec: ignore the field (§14.1.1) */
            return HTTP_RANGE_IGNORE;
    }
    if (a >= size)
        return HTTP_RANGE_UNSATISFIABLE;
    *first = a;
    *last = b >= size ? size - 1 : b;
    return HTTP_RANGE_SATISFIABLE;
}
