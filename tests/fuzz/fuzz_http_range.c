/* libFuzzer target: the Range field (http_range_parse), as it arrives from
 * a client, against representations of several sizes.
 *
 * Invariants: a known result; a satisfiable range lies inside the
 * representation (first <= last < size) and an empty one is never
 * satisfiable; the range handed back, written canonically, parses to
 * itself; the unit's case and the whitespace around the field do not
 * change the result. A set of ranges (http_ranges_parse) holds at most
 * HTTP_RANGES_MAX ranges, each inside the representation, adding up to
 * no more than it; a field one range parses to agrees with the set.
 */
#include <string.h>

#include "fuzz.h"
#include "http_buf.h"
#include "http_internal.h"
#include "http_range.h"

#define FIELD_MAX 4096

static int range(const char *f,
                 size_t len,
                 uint64_t size,
                 uint64_t *first,
                 uint64_t *last)
{
    int rc = http_range_parse(f, len, size, first, last);

    REQUIRE(rc == HTTP_RANGE_IGNORE || rc == HTTP_RANGE_SATISFIABLE ||
            rc == HTTP_RANGE_UNSATISFIABLE);
    if (rc == HTTP_RANGE_SATISFIABLE)
        REQUIRE(size > 0 && *first <= *last && *last < size);
    return rc;
}

static void check_set(const char *f, size_t len, uint64_t size)
{
    struct http_range_set rs;
    uint64_t total = 0, first = 0, last = 0;
    unsigned int i;
    int rc = http_ranges_parse(f, len, size, &rs);

    REQUIRE(rc == HTTP_RANGE_IGNORE || rc == HTTP_RANGE_SATISFIABLE ||
            rc == HTTP_RANGE_UNSATISFIABLE);
    REQUIRE((rc == HTTP_RANGE_SATISFIABLE) == (rs.n > 0));
    REQUIRE(rs.n <= HTTP_RANGES_MAX);
    for (i = 0; i < rs.n; i++) {
        REQUIRE(rs.first[i] <= rs.last[i] && rs.last[i] < size);
        total += rs.last[i] - rs.first[i] + 1;
        REQUIRE(total <= size);
    }
    if (http_range_parse(f, len, size, &first, &last) == HTTP_RANGE_SATISFIABLE)
        REQUIRE(rc == HTTP_RANGE_SATISFIABLE && rs.n == 1 &&
                rs.first[0] == first && rs.last[0] == last);
}

static void check_size(const char *f, size_t len, uint64_t size)
{
    static char alt[FIELD_MAX + 8];
    uint64_t first = 0, last = 0, f2 = 0, l2 = 0;
    int rc = range(f, len, size, &first, &last);
    size_t i = 0;

    check_set(f, len, size);
    if (rc == HTTP_RANGE_SATISFIABLE) {
        char canon[64];
        struct http_buf b;

        http_buf_init(&b, canon, sizeof(canon));
        http_buf_append_str(&b, "bytes=");
        http_buf_append_u64(&b, first);
        http_buf_append_char(&b, '-');
        http_buf_append_u64(&b, last);
        REQUIRE(!b.overflow);
        REQUIRE(range(canon, b.len, size, &f2, &l2) == HTTP_RANGE_SATISFIABLE);
        REQUIRE(f2 == first && l2 == last);
    }

    /* the same field with the unit lower-cased and wrapped in OWS */
    alt[0] = ' ';
    memcpy(alt + 1, f, len);
    alt[len + 1] = '\t';
    while (i < len && (f[i] == ' ' || f[i] == '\t'))
        i++;
    if (len - i >= 6)
        memcpy(alt + 1 + i, "bytes=", 6);
    {
        int rc2 = range(alt, len + 2, size, &f2, &l2);
        bool unit =
            len - i >= 6 && http_ascii_equal_nocase(f + i, 6, "bytes=", 6);
        if (unit)
            REQUIRE(rc2 == rc);
        if (unit && rc == HTTP_RANGE_SATISFIABLE)
            REQUIRE(f2 == first && l2 == last);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint64_t sizes[] = {
        0, 1, 2, 7, 4096, 1u << 31, HTTP_U64_MAX - 1, HTTP_U64_MAX};
    const char *f = (const char *) data;
    uint64_t own = 0;
    size_t i;

    if (size > FIELD_MAX)
        return 0;
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        check_size(f, size, sizes[i]);
    /* and a size the input chooses, so boundaries near its numbers show */
    for (i = 0; i < size; i++)
        own = own * 31 + data[i];
    check_size(f, size, own % 100000);
    return 0;
}
