/* Unit tests of byte-range parsing: one range, and sets of them. */
#include "http_internal.h"
#include "http_range.h"
#include "unit.h"

static void ok(const char *f, uint64_t size, uint64_t first, uint64_t last)
{
    uint64_t a = 99, b = 99;
    int rc = http_range_parse(f, strlen(f), size, &a, &b);

    if (rc != HTTP_RANGE_SATISFIABLE)
        fprintf(stderr, "range %s size %llu: %d\n", f,
                (unsigned long long) size, rc);
    CHECK_INT(rc, HTTP_RANGE_SATISFIABLE);
    CHECK_INT(a, first);
    CHECK_INT(b, last);
}

static void res(const char *f, uint64_t size, int want)
{
    uint64_t a, b;
    int rc = http_range_parse(f, strlen(f), size, &a, &b);

    if (rc != want)
        fprintf(stderr, "range %s size %llu: %d\n", f,
                (unsigned long long) size, rc);
    CHECK_INT(rc, want);
}

/* f against size: rc, and the ranges as "a-b a-b ..." */
static void set(const char *f, uint64_t size, int want, const char *ranges)
{
    struct http_range_set rs;
    char got[512] = "";
    size_t used = 0;
    unsigned int i;
    int rc = http_ranges_parse(f, strlen(f), size, &rs);

    if (rc != want)
        fprintf(stderr, "ranges %s size %llu: %d\n", f,
                (unsigned long long) size, rc);
    CHECK_INT(rc, want);
    if (rc != HTTP_RANGE_SATISFIABLE)
        return;
    for (i = 0; i < rs.n && used < sizeof(got) - 48; i++)
        used += (size_t) snprintf(
            got + used, sizeof(got) - used, "%s%llu-%llu", i ? " " : "",
            (unsigned long long) rs.first[i], (unsigned long long) rs.last[i]);
    CHECK_STR(got, ranges);
}

static void test_sets(void)
{
    char many[8192];
    size_t n = 0;
    int i;

    set("bytes=0-1,3-4", 10, HTTP_RANGE_SATISFIABLE, "0-1 3-4");
    set("bytes=5-6, 0-1", 10, HTTP_RANGE_SATISFIABLE, "5-6 0-1");
    set("bytes=0-1, 100-200", 10, HTTP_RANGE_SATISFIABLE, "0-1");
    set("bytes=-2,0-0", 10, HTTP_RANGE_SATISFIABLE, "8-9 0-0");
    set("bytes=,0-0,,1-", 10, HTTP_RANGE_SATISFIABLE, "0-0 1-9");
    set("bytes=0-4,5-9", 10, HTTP_RANGE_SATISFIABLE, "0-4 5-9");
    set("bytes=0-4,4-9", 10, HTTP_RANGE_IGNORE, ""); /* 11 bytes of 10 */
    set("bytes=0-,0-", 10, HTTP_RANGE_IGNORE, "");
    set("bytes=10-,20-", 10, HTTP_RANGE_UNSATISFIABLE, "");
    set("bytes=0-1,x", 10, HTTP_RANGE_IGNORE, "");
    set("bytes=0-1,3-2", 10, HTTP_RANGE_IGNORE, "");
    set("bytes=,", 10, HTTP_RANGE_IGNORE, "");
    set("bytes=", 10, HTTP_RANGE_IGNORE, "");
    set("lines=0-1,2-3", 10, HTTP_RANGE_IGNORE, "");
    /* HTTP_RANGES_MAX specs are served, one more is not (unsatisfiable
     * ones count: they cost parsing all the same) */
    for (i = 0; i < HTTP_RANGES_MAX; i++)
        n += (size_t) snprintf(many + n, sizeof(many) - n, "%s%d-%d",
                               i ? "," : "bytes=", i, i);
    many[n] = '\0';
    {
        struct http_range_set rs;

        CHECK_INT(http_ranges_parse(many, n, 100, &rs), HTTP_RANGE_SATISFIABLE);
        CHECK_INT(rs.n, HTTP_RANGES_MAX);
        memcpy(many + n, ",99-", 5);
        CHECK_INT(http_ranges_parse(many, n + 4, 100, &rs), HTTP_RANGE_IGNORE);
        memcpy(many + n, ",999-", 6);
        CHECK_INT(http_ranges_parse(many, n + 5, 100, &rs), HTTP_RANGE_IGNORE);
    }
    /* 1,000 ranges: ignored */
    n = (size_t) snprintf(many, sizeof(many), "bytes=0-0");
    for (i = 1; i < 1000 && n < sizeof(many) - 16; i++)
        n += (size_t) snprintf(many + n, sizeof(many) - n, ",%d-%d", i, i);
    set(many, 100000, HTTP_RANGE_IGNORE, "");
}

int main(void)
{
    test_sets();
    ok("bytes=0-0", 10, 0, 0);
    ok("bytes=0-9", 10, 0, 9);
    ok("bytes=0-100", 10, 0, 9);
    ok("bytes=5-", 10, 5, 9);
    ok("bytes=9-", 10, 9, 9);
    ok("bytes=-3", 10, 7, 9);
    ok("bytes=-10", 10, 0, 9);
    ok("bytes=-1000", 10, 0, 9);
    ok("BYTES=1-2", 10, 1, 2);
    ok(" bytes= 1-2 ", 10, 1, 2);
    ok("bytes=0-18446744073709551615", 10, 0, 9);
    ok("bytes=0-0", 1, 0, 0);

    res("bytes=10-", 10, HTTP_RANGE_UNSATISFIABLE);
    res("bytes=10-20", 10, HTTP_RANGE_UNSATISFIABLE);
    res("bytes=100-200", 10, HTTP_RANGE_UNSATISFIABLE);
    res("bytes=-0", 10, HTTP_RANGE_UNSATISFIABLE);
    res("bytes=0-0", 0, HTTP_RANGE_UNSATISFIABLE);
    res("bytes=0-", 0, HTTP_RANGE_UNSATISFIABLE);
    res("bytes=-5", 0, HTTP_RANGE_UNSATISFIABLE);

    res("", 10, HTTP_RANGE_IGNORE);
    res("bytes=", 10, HTTP_RANGE_IGNORE);
    res("bytes=-", 10, HTTP_RANGE_IGNORE);
    res("bytes=5-1", 10, HTTP_RANGE_IGNORE);
    res("bytes=a-b", 10, HTTP_RANGE_IGNORE);
    res("bytes=1-2x", 10, HTTP_RANGE_IGNORE);
    res("bytes=1 -2", 10, HTTP_RANGE_IGNORE);
    res("bytes=+1-2", 10, HTTP_RANGE_IGNORE);
    res("bytes=0-1,3-4", 10, HTTP_RANGE_IGNORE);
    res("bytes=0-1, 100-200", 10, HTTP_RANGE_IGNORE);
    res("items=0-1", 10, HTTP_RANGE_IGNORE);
    res("bytes 0-1", 10, HTTP_RANGE_IGNORE);
    res("bytes=99999999999999999999-", 10, HTTP_RANGE_IGNORE);
    res("bytes=--1", 10, HTTP_RANGE_IGNORE);
    UNIT_DONE();
}
