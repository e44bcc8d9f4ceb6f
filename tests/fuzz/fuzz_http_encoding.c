/* libFuzzer target: Accept-Encoding negotiation with q-values, the field
 * as a client sends it.
 *
 * Invariants: a known result; without a gzip copy never gzip; the two
 * answers agree (identity acceptable without gzip stays acceptable with
 * it, and the other way round unless gzip wins); ASCII case does not
 * matter (coding names and the "q" parameter are case-insensitive);
 * padding the field with empty list elements and whitespace changes
 * nothing; every qvalue parses into 0..1000 or fails, and a parsed one
 * written back in its shortest form parses to itself.
 */
#include <string.h>

#include "fuzz.h"
#include "http_encoding.h"
#include "http_internal.h"

#define FIELD_MAX 4096

static int negotiate(const char *f, size_t len, bool gzip)
{
    int rc = http_accept_encoding_negotiate(f, len, gzip);

    REQUIRE(rc == HTTP_ENCODING_NONE_ACCEPTABLE ||
            rc == HTTP_ENCODING_IDENTITY || rc == HTTP_ENCODING_GZIP);
    if (!gzip)
        REQUIRE(rc != HTTP_ENCODING_GZIP);
    return rc;
}

static void check_qvalue(const char *s, size_t len)
{
    char canon[8];
    size_t n = 0;
    int q = http_qvalue_parse(s, len), d;

    REQUIRE(q >= -1 && q <= 1000);
    if (q < 0)
        return;
    /* "1", "0", or "0." and up to three digits without trailing zeros */
    if (q == 1000 || q == 0) {
        canon[n++] = q ? '1' : '0';
    } else {
        canon[n++] = '0';
        canon[n++] = '.';
        for (d = 100; d > 0 && q % (d * 10) != 0; d /= 10)
            canon[n++] = (char) ('0' + q / d % 10);
    }
    REQUIRE(http_qvalue_parse(canon, n) == q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char alt[2 * FIELD_MAX + 16];
    const char *f = (const char *) data;
    int with, without;
    size_t i, n;

    if (size > FIELD_MAX)
        return 0;
    REQUIRE(negotiate(NULL, 0, true) == HTTP_ENCODING_IDENTITY);
    with = negotiate(f, size, true);
    without = negotiate(f, size, false);
    if (without == HTTP_ENCODING_IDENTITY)
        REQUIRE(with != HTTP_ENCODING_NONE_ACCEPTABLE);
    if (with == HTTP_ENCODING_IDENTITY)
        REQUIRE(without == HTTP_ENCODING_IDENTITY);

    /* upper-cased */
    for (i = 0; i < size; i++) {
        char c = f[i];
        alt[i] = (c >= 'a' && c <= 'z') ? (char) (c - 'a' + 'A') : c;
    }
    REQUIRE(negotiate(alt, size, true) == with);
    REQUIRE(negotiate(alt, size, false) == without);

    /* ", ," before, " ,\t" after: empty elements are ignored */
    memcpy(alt, ", ,", 3);
    memcpy(alt + 3, f, size);
    memcpy(alt + 3 + size, " ,\t", 3);
    REQUIRE(negotiate(alt, size + 6, true) == with);

    /* every "q=" value in the field, and the field as a qvalue itself */
    check_qvalue(f, size);
    for (i = 0; i + 1 < size; i++) {
        if ((f[i] != 'q' && f[i] != 'Q') || f[i + 1] != '=')
            continue;
        for (n = i + 2; n < size && f[n] != ',' && f[n] != ';'; n++)
            ;
        check_qvalue(f + i + 2, n - i - 2);
    }
    return 0;
}
