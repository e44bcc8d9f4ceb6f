/* http_range.c — byte ranges (RFC 9110 §14): one, or a bounded set for a
 * multipart/byteranges answer. A set that could amplify (more than
 * HTTP_RANGES_MAX ranges, or more bytes than the representation) is
 * ignored: the whole representation is sent, as nginx does. */
#include "http_range.h"
#include "http_internal.h"

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

/* One range-spec at field[i..len) (no comma): IGNORE when malformed. */
static int one_spec(const char *field,
                    size_t i,
                    size_t len,
                    uint64_t size,
                    uint64_t *first,
                    uint64_t *last)
{
    size_t dash;
    uint64_t a, b;

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

/* The ranges after "bytes=": [*i, *end) trimmed, or false. */
static bool unit_bytes(const char *field, size_t len, size_t *i, size_t *end)
{
    size_t k = 0;

    while (k < len && is_ows(field[k]))
        k++;
    while (len > k && is_ows(field[len - 1]))
        len--;
    if (len - k < 6 || !http_ascii_equal_nocase(field + k, 6, "bytes=", 6))
        return false;
    k += 6;
    while (k < len && is_ows(field[k]))
        k++;
    *i = k;
    *end = len;
    return true;
}

int http_range_parse(const char *field,
                     size_t len,
                     uint64_t size,
                     uint64_t *first,
                     uint64_t *last)
{
    size_t i, end;

    if (!unit_bytes(field, len, &i, &end) || memchr(field + i, ',', end - i))
        return HTTP_RANGE_IGNORE;
    return one_spec(field, i, end, size, first, last);
}

int http_ranges_parse(const char *field,
                      size_t len,
                      uint64_t size,
                      struct http_range_set *rs)
{
    size_t i, end, specs = 0;
    uint64_t total = 0;

    rs->n = 0;
    if (!unit_bytes(field, len, &i, &end))
        return HTTP_RANGE_IGNORE;
    /* one pass over the field, each byte once; at most HTTP_RANGES_MAX
     * specs are parsed before the field is given up */
    while (i <= end) {
        size_t a = i, b;
        uint64_t first, last;
        int rc;

        while (i < end && field[i] != ',')
            i++;
        b = i++;
        while (a < b && is_ows(field[a]))
            a++;
        while (b > a && is_ows(field[b - 1]))
            b--;
        if (a == b) /* an empty list element (RFC 9110 §5.6.1) */
            continue;
        if (++specs > HTTP_RANGES_MAX)
            goto ignore;
        rc = one_spec(field, a, b, size, &first, &last);
        if (rc == HTTP_RANGE_IGNORE)
            goto ignore;
        if (rc == HTTP_RANGE_UNSATISFIABLE)
            continue; /* dropped; the others may still be served */
        total += last - first + 1;
        if (total > size) /* overlaps that add up past the whole */
            goto ignore;
        rs->first[rs->n] = first;
        rs->last[rs->n] = last;
        rs->n++;
    }
    if (!specs)
        return HTTP_RANGE_IGNORE;
    return rs->n ? HTTP_RANGE_SATISFIABLE : HTTP_RANGE_UNSATISFIABLE;
ignore:
    rs->n = 0; /* nothing to serve but the whole */
    return HTTP_RANGE_IGNORE;
}
