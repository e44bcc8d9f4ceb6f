/* Unit tests of single byte-range parsing. */
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

int main(void)
{
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
