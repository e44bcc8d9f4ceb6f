/* Unit tests of ETag and conditional request evaluation. */
#include "http_conditional.h"
#include "http_internal.h"
#include "unit.h"

#define INM(f, e) http_if_none_match_matches((f), strlen(f), (e), strlen(e))

static void test_etag(void)
{
    char e[HTTP_ETAG_MAX + 1];

    CHECK_MEM(e, http_etag_format(1234, 1700000000, 0, 0, e),
              "\"6553f100-4d2\"");
    CHECK_STR(e, "\"6553f100-4d2\"");
    CHECK_MEM(e, http_etag_format(0, 0, 0, 0, e), "\"0-0\"");
    CHECK_MEM(e, http_etag_format(1234, 1700000000, 999999999, 0x2a, e),
              "\"6553f100.3b9ac9ff-4d2-2a\"");
    CHECK(http_etag_format(HTTP_U64_MAX, -1, 0xffffffff, HTTP_U64_MAX, e) <=
          HTTP_ETAG_MAX);
    CHECK_STR(e,
              "\"ffffffffffffffff.ffffffff-ffffffffffffffff-"
              "ffffffffffffffff\"");
    /* size, mtime, its nanoseconds and the inode all matter */
    {
        char a[HTTP_ETAG_MAX + 1], b[HTTP_ETAG_MAX + 1];
        http_etag_format(10, 5, 0, 0, a);
        http_etag_format(11, 5, 0, 0, b);
        CHECK(strcmp(a, b) != 0);
        http_etag_format(10, 6, 0, 0, b);
        CHECK(strcmp(a, b) != 0);
        http_etag_format(10, 5, 1, 0, b);
        CHECK(strcmp(a, b) != 0);
        http_etag_format(10, 5, 0, 1, b);
        CHECK(strcmp(a, b) != 0);
        /* the same second, a same-size rewrite: a new tag */
        http_etag_format(10, 5, 100, 7, a);
        http_etag_format(10, 5, 200, 7, b);
        CHECK(strcmp(a, b) != 0);
        /* the parts cannot run into each other */
        http_etag_format(0x1, 5, 0, 0x23, a);
        http_etag_format(0x12, 5, 0, 0x3, b);
        CHECK(strcmp(a, b) != 0);
    }
}

static void test_if_none_match(void)
{
    const char *tag = "\"abc\"";

    CHECK(INM("\"abc\"", tag));
    CHECK(INM("*", tag));
    CHECK(INM("  *  ", tag));
    CHECK(INM("W/\"abc\"", tag));
    CHECK(INM("\"x\", \"abc\"", tag));
    CHECK(INM("\"x\",W/\"abc\" , \"y\"", tag));
    CHECK(INM(" ,\"abc\",", tag));
    CHECK(INM("\"abc\"", "W/\"abc\""));
    CHECK(!INM("\"abcd\"", tag));
    CHECK(!INM("\"ab\"", tag));
    CHECK(!INM("abc", tag));
    CHECK(!INM("\"ABC\"", tag));
    CHECK(!INM("", tag));
    CHECK(!INM("w/\"abc\"", tag));
    CHECK(!INM("\"x\" \"abc\"", tag));
    CHECK(!INM("\"abc", tag));
    CHECK(!INM("*, \"x\"", tag));
    CHECK(!INM("\"x\"", "noquotes"));
}

static void test_ims_and_precedence(void)
{
    const char *date = "Sun, 06 Nov 1994 08:49:37 GMT";
    const char *tag = "\"abc\"";

    CHECK(http_if_modified_since_unmodified(date, strlen(date), 784111777));
    CHECK(http_if_modified_since_unmodified(date, strlen(date), 784111776));
    CHECK(!http_if_modified_since_unmodified(date, strlen(date), 784111778));
    CHECK(!http_if_modified_since_unmodified("garbage", 7, 0));

    CHECK_INT(http_conditional_status(NULL, 0, NULL, 0, tag, 5, 0), 200);
    CHECK_INT(http_conditional_status(tag, 5, NULL, 0, tag, 5, 0), 304);
    CHECK_INT(
        http_conditional_status(NULL, 0, date, strlen(date), tag, 5, 784111777),
        304);
    CHECK_INT(
        http_conditional_status(NULL, 0, date, strlen(date), tag, 5, 784111778),
        200);
    /* If-None-Match present and not matching: IMS must not rescue a 304 */
    CHECK_INT(
        http_conditional_status("\"zzz\"", 5, date, strlen(date), tag, 5, 0),
        200);
    /* If-None-Match matching wins even if IMS says modified */
    CHECK_INT(
        http_conditional_status(tag, 5, date, strlen(date), tag, 5, 2000000000),
        304);
    CHECK_INT(http_conditional_status(NULL, 0, "bad", 3, tag, 5, 0), 200);
}

int main(void)
{
    test_etag();
    test_if_none_match();
    test_ims_and_precedence();
    UNIT_DONE();
}
