/* Unit tests of HTTP-date formatting and parsing. */
#include <time.h>

#include "http_date.h"
#include "http_internal.h"
#include "unit.h"

static void check_format(int64_t t, const char *want)
{
    char out[HTTP_DATE_LEN + 1];

    CHECK_INT(http_date_format(t, out), HTTP_DATE_LEN);
    CHECK_STR(out, want);
}

static void check_parse(const char *s, int64_t want)
{
    int64_t t = -1;

    CHECK(http_date_parse(s, strlen(s), &t));
    CHECK_INT(t, want);
}

static void check_bad(const char *s)
{
    int64_t t;

    if (http_date_parse(s, strlen(s), &t))
        fprintf(stderr, "accepted: %s\n", s);
    CHECK(!http_date_parse(s, strlen(s), &t));
}

static void test_format(void)
{
    check_format(0, "Thu, 01 Jan 1970 00:00:00 GMT");
    check_format(784111777, "Sun, 06 Nov 1994 08:49:37 GMT");
    check_format(951782400, "Tue, 29 Feb 2000 00:00:00 GMT");
    check_format(1709164800, "Thu, 29 Feb 2024 00:00:00 GMT");
    check_format(4107542399LL, "Sun, 28 Feb 2100 23:59:59 GMT");
    check_format(4107542400LL, "Mon, 01 Mar 2100 00:00:00 GMT");
    check_format(-1, "Wed, 31 Dec 1969 23:59:59 GMT");
    check_format(-86400LL * 365, "Wed, 01 Jan 1969 00:00:00 GMT");
    check_format(253402300799LL, "Fri, 31 Dec 9999 23:59:59 GMT");
    check_format(HTTP_I64_MAX, "Fri, 31 Dec 9999 23:59:59 GMT");
    check_format(HTTP_I64_MIN, "Sat, 01 Jan 0000 00:00:00 GMT");
}

static void test_parse_three_formats(void)
{
    check_parse("Sun, 06 Nov 1994 08:49:37 GMT", 784111777);
    check_parse("Sunday, 06-Nov-94 08:49:37 GMT", 784111777);
    check_parse("Sun Nov  6 08:49:37 1994", 784111777);
    check_parse("Sun Nov 16 08:49:37 1994", 784111777 + 10 * 86400);
    check_parse("  Sun, 06 Nov 1994 08:49:37 GMT \t", 784111777);
    check_parse("Thursday, 01-Jan-70 00:00:00 GMT", 0);
    check_parse("Saturday, 01-Jan-00 00:00:00 GMT", 946684800);
    check_parse("Thu, 29 Feb 2024 00:00:00 GMT", 1709164800);
    check_parse("Wed, 31 Dec 1969 23:59:59 GMT", -1);
}

static void test_parse_bad(void)
{
    check_bad("");
    check_bad("Sun, 06 Nov 1994 08:49:37");
    check_bad("Sun, 06 Nov 1994 08:49:37 UTC");
    check_bad("Sun, 6 Nov 1994 08:49:37 GMT");
    check_bad("Sun, 06 nov 1994 08:49:37 GMT");
    check_bad("Sun, 06 Nov 94 08:49:37 GMT");
    check_bad("Sun, 31 Nov 1994 08:49:37 GMT");
    check_bad("Sun, 29 Feb 2023 08:49:37 GMT");
    check_bad("Sun, 29 Feb 1900 00:00:00 GMT");
    check_bad("Sun, 06 Nov 1994 24:00:00 GMT");
    check_bad("Sun, 06 Nov 1994 08:60:00 GMT");
    check_bad("Sun, 06 Nov 1994 08:49:37 GMTx");
    check_bad("Xyz, 06 Nov 1994 08:49:37 GMT");
    check_bad("Sun, 00 Nov 1994 08:49:37 GMT");
    check_bad("Sunday, 06-Nov-1994 08:49:37 GMT");
    check_bad("Sun Nov 6 08:49:37 1994");
    check_bad("Sun Nov  6 08:49:37 94");
    check_bad("1994-11-06T08:49:37Z");
    check_bad("784111777");
}

static void test_round_trip(void)
{
    int64_t t, back;
    char out[HTTP_DATE_LEN + 1];
    int bad = 0;

    /* every day over 800 years, at a varying second of the day, against
     * both our own parser and libc's gmtime_r */
    for (t = -5364662400LL; t < 20000000000LL; t += 86400 * 7 + 3607) {
        struct tm tm;
        time_t tt = (time_t) t;
        http_date_format(t, out);
        if (!http_date_parse(out, HTTP_DATE_LEN, &back) || back != t)
            bad++;
        gmtime_r(&tt, &tm);
        {
            char want[64];
            strftime(want, sizeof(want), "%a, %d %b %Y %H:%M:%S GMT", &tm);
            if (strcmp(want, out) != 0) {
                if (bad++ < 5)
                    fprintf(stderr, "%lld: %s vs %s\n", (long long) t, out,
                            want);
            }
        }
    }
    CHECK_INT(bad, 0);
}

static void test_civil(void)
{
    int64_t y;
    unsigned m, d;

    CHECK_INT(http_days_from_civil(1970, 1, 1), 0);
    CHECK_INT(http_days_from_civil(2000, 3, 1), 11017);
    CHECK_INT(http_days_from_civil(1969, 12, 31), -1);
    http_civil_from_days(-719468, &y, &m, &d);
    CHECK_INT(y, 0);
    CHECK_INT(m, 3);
    CHECK_INT(d, 1);
    http_civil_from_days(19782, &y, &m, &d);
    CHECK_INT(y, 2024);
    CHECK_INT(m, 2);
    CHECK_INT(d, 29);
}

int main(void)
{
    test_format();
    test_parse_three_formats();
    test_parse_bad();
    test_round_trip();
    test_civil();
    UNIT_DONE();
}
