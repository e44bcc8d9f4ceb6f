/* libFuzzer target: the conditional request fields — If-None-Match,
 * If-Modified-Since and If-Range — against a file's validators, the way
 * both engines evaluate them (core's http_conditional_status, then the
 * If-Range rule: the exact strong ETag, or an HTTP-date equal to the
 * file's mtime).
 *
 * Input: size (8 bytes), mtime (8), flags (1), then three length-prefixed
 * fields: If-None-Match, If-Modified-Since, If-Range.
 *
 * Invariants: 200 or 304 only; If-None-Match when present decides alone;
 * "*", the ETag itself and its weak form always match, also inside a list;
 * a date that parses is "unmodified" for an mtime at it and not for one a
 * second later; every formatted date parses back to its time (years
 * 0..9999); the ETag is quoted and no longer than HTTP_ETAG_MAX.
 */
#include <string.h>

#include "fuzz.h"
#include "http_buf.h"
#include "http_conditional.h"
#include "http_date.h"
#include "http_internal.h"

/* Seconds of 0000-01-01 and 9999-12-31T23:59:59, what a date can show. */
#define DATE_MIN (-62167219200LL)
#define DATE_MAX (253402300799LL)

static void check_date_roundtrip(int64_t t)
{
    char out[HTTP_DATE_LEN + 1];
    int64_t back;

    REQUIRE(http_date_format(t, out) == HTTP_DATE_LEN);
    REQUIRE(strlen(out) == HTTP_DATE_LEN);
    REQUIRE(http_date_parse(out, HTTP_DATE_LEN, &back));
    if (t < DATE_MIN)
        t = DATE_MIN;
    if (t > DATE_MAX)
        t = DATE_MAX;
    REQUIRE(back == t);
}

static void check_date_field(const char *f, size_t len)
{
    int64_t t;

    if (!http_date_parse(f, len, &t)) {
        REQUIRE(!http_if_modified_since_unmodified(f, len, HTTP_I64_MAX));
        return;
    }
    REQUIRE(http_if_modified_since_unmodified(f, len, t));
    if (t < HTTP_I64_MAX)
        REQUIRE(!http_if_modified_since_unmodified(f, len, t + 1));
    /* a parsed date is a date: formatting it is defined, and in range it
     * comes back the same */
    if (t >= DATE_MIN && t <= DATE_MAX)
        check_date_roundtrip(t);
    REQUIRE(http_conditional_status(NULL, 0, f, len, "\"x\"", 3, t) == 304);
}

static void check_etag_lists(const char *etag,
                             size_t etag_len,
                             const char *f,
                             size_t len)
{
    static char list[600];
    struct http_buf b;

    REQUIRE(http_if_none_match_matches("*", 1, etag, etag_len));
    REQUIRE(http_if_none_match_matches(etag, etag_len, etag, etag_len));
    /* the fuzzed field's members before ours only matter if malformed;
     * ours first, then anything, always matches */
    http_buf_init(&b, list, sizeof(list));
    http_buf_append_str(&b, " W/");
    http_buf_append(&b, etag, etag_len);
    http_buf_append_str(&b, " ,\t");
    http_buf_append(&b, f, len);
    if (!b.overflow)
        REQUIRE(http_if_none_match_matches(list, b.len, etag, etag_len));
}

/* A strong entity-tag: '"', etagc bytes (no '"', no control or space),
 * '"'. */
static bool is_strong_etag(const char *e, size_t len)
{
    size_t i;

    if (len < 2 || e[0] != '"' || e[len - 1] != '"')
        return false;
    for (i = 1; i + 1 < len; i++) {
        unsigned char c = (unsigned char) e[i];
        if (c < 0x21 || c == '"' || c == 0x7f)
            return false;
    }
    return true;
}

/* If-Range as the engines apply it: the exact strong ETag, or an
 * HTTP-date equal to the file's mtime; anything else drops the Range. */
static bool if_range_holds(const char *f,
                           size_t len,
                           const char *etag,
                           size_t etag_len,
                           int64_t mtime)
{
    int64_t t;

    if (len == etag_len && memcmp(f, etag, len) == 0)
        return true;
    return http_date_parse(f, len, &t) && t == mtime;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in = {data, size};
    uint64_t fsize = fuzz_uint(&in, 8);
    int64_t mtime = (int64_t) fuzz_uint(&in, 8);
    unsigned flags = (unsigned) fuzz_uint(&in, 1);
    size_t inm_len, ims_len, ir_len;
    const char *inm = fuzz_field(&in, &inm_len);
    const char *ims = fuzz_field(&in, &ims_len);
    const char *ir = fuzz_field(&in, &ir_len);
    char etag[HTTP_ETAG_MAX + 1];
    size_t etag_len = http_etag_format(fsize, mtime, (uint32_t) (fsize >> 7),
                                       fsize >> 3, etag);
    int st;
    bool holds;

    REQUIRE(etag_len <= HTTP_ETAG_MAX && etag_len == strlen(etag));
    REQUIRE(etag[0] == '"' && etag[etag_len - 1] == '"');

    st = http_conditional_status((flags & 1) ? inm : NULL, inm_len,
                                 (flags & 2) ? ims : NULL, ims_len, etag,
                                 etag_len, mtime);
    REQUIRE(st == 200 || st == 304);
    if (flags & 1)
        REQUIRE((st == 304) ==
                http_if_none_match_matches(inm, inm_len, etag, etag_len));
    else if (flags & 2)
        REQUIRE((st == 304) ==
                http_if_modified_since_unmodified(ims, ims_len, mtime));
    else
        REQUIRE(st == 200);

    /* the fuzzed field may also stand for the ETag the file has */
    if (is_strong_etag(inm, inm_len))
        check_etag_lists(inm, inm_len, ims, ims_len);
    check_etag_lists(etag, etag_len, inm, inm_len);

    check_date_field(ims, ims_len);
    check_date_field(ir, ir_len);
    check_date_roundtrip(mtime);

    /* If-Range holds for the file's own validators, written as a client
     * would echo them, and a weak tag never holds (strong comparison) */
    holds = if_range_holds(ir, ir_len, etag, etag_len, mtime);
    if (holds && !(ir_len == etag_len && memcmp(ir, etag, etag_len) == 0)) {
        int64_t t;
        REQUIRE(http_date_parse(ir, ir_len, &t) && t == mtime);
    }
    if (mtime >= DATE_MIN && mtime <= DATE_MAX) {
        char date[HTTP_DATE_LEN + 1];
        http_date_format(mtime, date);
        REQUIRE(if_range_holds(date, HTTP_DATE_LEN, etag, etag_len, mtime));
    }
    REQUIRE(if_range_holds(etag, etag_len, etag, etag_len, mtime));
    if (ir_len >= 2 && ir[0] == 'W' && ir[1] == '/')
        REQUIRE(!if_range_holds(ir, ir_len, etag, etag_len, mtime));
    return 0;
}
