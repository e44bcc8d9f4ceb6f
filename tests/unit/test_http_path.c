/* Unit tests of the path normaliser: every way out of the root is shut. */
#include "http_internal.h"
#include "http_path.h"
#include "unit.h"

static int norm(const char *in,
                char *out,
                size_t cap,
                struct http_path_info *info)
{
    return http_path_normalize(in, strlen(in), out, cap, info);
}

static void check_ok(const char *in, const char *want, bool slash)
{
    char out[256];
    struct http_path_info info;
    int rc = norm(in, out, sizeof(out), &info);

    if (rc != HTTP_PATH_OK)
        fprintf(stderr, "path %s: %s\n", in, http_path_error_name(rc));
    CHECK_INT(rc, HTTP_PATH_OK);
    CHECK_STR(out, want);
    CHECK_INT(info.len, strlen(want));
    CHECK_INT(info.trailing_slash, slash);
    CHECK_INT(info.is_root, strcmp(want, ".") == 0);
}

static void check_err(const char *in, int err)
{
    char out[256];
    struct http_path_info info;
    int rc = norm(in, out, sizeof(out), &info);

    if (rc != err)
        fprintf(stderr, "path %s: got %s\n", in, http_path_error_name(rc));
    CHECK_INT(rc, err);
}

static void test_clean(void)
{
    check_ok("/", ".", true);
    check_ok("", ".", true);
    check_ok("/index.html", "index.html", false);
    check_ok("/a/b/c.txt", "a/b/c.txt", false);
    check_ok("/a/b/", "a/b", true);
    check_ok("//a///b//", "a/b", true);
    check_ok("/./a/./b/.", "a/b", true);
    check_ok("/a/b/../c", "a/c", false);
    check_ok("/a/b/..", "a", true);
    check_ok("/a/..", ".", true);
    check_ok("/a/../", ".", true);
    check_ok("/a/b/../../c/", "c", true);
    check_ok("/a%20b/%7euser", "a b/~user", false);
    check_ok("/%41%62", "Ab", false);
    check_ok("/caf%C3%A9", "caf\xc3\xa9", false);
    check_ok("/%F0%9F%98%80.png", "\xf0\x9f\x98\x80.png", false);
    check_ok("/...", "...", false);
    check_ok("/..a/a..", "..a/a..", false);
    check_ok("/.hidden", ".hidden", false);
    check_ok("/a%2e/b", "a./b", false);
    check_ok("/%2e/a", "a", false);
    check_ok("/a/%2e%2e/b", "b", false);
    check_ok("/a/.%2E/b", "b", false);
    check_ok("/a+b", "a+b", false);
}

static void test_query(void)
{
    char out[64];
    struct http_path_info info;
    const char *p = "/a/b?x=1&y=%2f#frag";

    CHECK_INT(norm(p, out, sizeof(out), &info), 0);
    CHECK_STR(out, "a/b");
    CHECK(info.has_query);
    CHECK_MEM(p + info.query_off, info.query_len, "x=1&y=%2f");
    CHECK_INT(norm("/a#x?y", out, sizeof(out), &info), 0);
    CHECK_STR(out, "a");
    CHECK(!info.has_query);
    CHECK_INT(norm("/d/?", out, sizeof(out), &info), 0);
    CHECK(info.trailing_slash);
    CHECK(info.has_query);
    CHECK_INT(info.query_len, 0);
    CHECK_INT(norm("?q", out, sizeof(out), &info), 0);
    CHECK_STR(out, ".");
    CHECK_MEM("?q" + info.query_off, info.query_len, "q");
    /* ../ in the query is not in the path */
    CHECK_INT(norm("/a?../../etc/passwd", out, sizeof(out), &info), 0);
    CHECK_STR(out, "a");
}

static void test_traversal(void)
{
    check_err("/..", HTTP_PATH_ERR_ESCAPES_ROOT);
    check_err("/../", HTTP_PATH_ERR_ESCAPES_ROOT);
    check_err("/../etc/passwd", HTTP_PATH_ERR_ESCAPES_ROOT);
    check_err("/a/../../etc/passwd", HTTP_PATH_ERR_ESCAPES_ROOT);
    check_err("/a/b/../../..", HTTP_PATH_ERR_ESCAPES_ROOT);
    check_err("/./../x", HTTP_PATH_ERR_ESCAPES_ROOT);
    check_err("//../x", HTTP_PATH_ERR_ESCAPES_ROOT);
    check_err("/%2e%2e/etc/passwd", HTTP_PATH_ERR_ESCAPES_ROOT);
    check_err("/%2E%2E/x", HTTP_PATH_ERR_ESCAPES_ROOT);
    check_err("/.%2e/x", HTTP_PATH_ERR_ESCAPES_ROOT);
    check_err("/%2e./x", HTTP_PATH_ERR_ESCAPES_ROOT);
    check_err("/a/%2e%2e/%2e%2e/x", HTTP_PATH_ERR_ESCAPES_ROOT);
    check_err("/..%2fetc/passwd", HTTP_PATH_ERR_ENCODED_SLASH);
    check_err("/%2e%2e%2fetc", HTTP_PATH_ERR_ENCODED_SLASH);
    check_err("/a%2Fb", HTTP_PATH_ERR_ENCODED_SLASH);
    check_err("/..\\etc", HTTP_PATH_ERR_BACKSLASH);
    check_err("/a\\b", HTTP_PATH_ERR_BACKSLASH);
    check_err("/%5c..%5cx", HTTP_PATH_ERR_BACKSLASH);
    check_err("/a%00.html", HTTP_PATH_ERR_NUL);
    check_err("/%00", HTTP_PATH_ERR_NUL);
    check_err("/a%0d%0aSet-Cookie:x", HTTP_PATH_ERR_CONTROL);
    check_err("/a%7f", HTTP_PATH_ERR_CONTROL);
    check_err("/a%09", HTTP_PATH_ERR_CONTROL);
    /* overlong and otherwise invalid UTF-8 */
    check_err("/%c0%ae%c0%ae/x", HTTP_PATH_ERR_BAD_UTF8);
    check_err("/%c0%af", HTTP_PATH_ERR_BAD_UTF8);
    check_err("/%c1%9c", HTTP_PATH_ERR_BAD_UTF8);
    check_err("/%e0%80%ae", HTTP_PATH_ERR_BAD_UTF8);
    check_err("/%f0%80%80%ae", HTTP_PATH_ERR_BAD_UTF8);
    check_err("/%ed%a0%80", HTTP_PATH_ERR_BAD_UTF8);    /* surrogate */
    check_err("/%f4%90%80%80", HTTP_PATH_ERR_BAD_UTF8); /* > U+10FFFF */
    check_err("/%f5%80%80%80", HTTP_PATH_ERR_BAD_UTF8);
    check_err("/%ff", HTTP_PATH_ERR_BAD_UTF8);
    check_err("/%80", HTTP_PATH_ERR_BAD_UTF8);
    check_err("/%c3", HTTP_PATH_ERR_BAD_UTF8);      /* truncated */
    check_err("/%c3/%a9", HTTP_PATH_ERR_BAD_UTF8);  /* split by '/' */
    check_err("/\xc0\xae", HTTP_PATH_ERR_BAD_UTF8); /* raw bytes too */
    /* malformed escapes */
    check_err("/%", HTTP_PATH_ERR_BAD_ESCAPE);
    check_err("/%2", HTTP_PATH_ERR_BAD_ESCAPE);
    check_err("/%2?x", HTTP_PATH_ERR_BAD_ESCAPE);
    check_err("/%g0", HTTP_PATH_ERR_BAD_ESCAPE);
    check_err("/%%30", HTTP_PATH_ERR_BAD_ESCAPE);
    check_err("a/b", HTTP_PATH_ERR_NOT_ABSOLUTE);
    check_err("*", HTTP_PATH_ERR_NOT_ABSOLUTE);
    check_err("http://x/", HTTP_PATH_ERR_NOT_ABSOLUTE);
    CHECK_INT(http_path_error_status(HTTP_PATH_ERR_ESCAPES_ROOT), 403);
    CHECK_INT(http_path_error_status(HTTP_PATH_ERR_ENCODED_SLASH), 400);
    CHECK_INT(http_path_error_status(HTTP_PATH_ERR_TOO_LONG), 414);
    CHECK_STR(http_path_error_name(HTTP_PATH_ERR_BAD_UTF8), "bad-utf8");
}

static void test_capacity(void)
{
    char out[8];
    struct http_path_info info;

    CHECK_INT(norm("/abcdefg", out, sizeof(out), &info), 0);
    CHECK_STR(out, "abcdefg");
    CHECK_INT(norm("/abcdefgh", out, sizeof(out), &info),
              HTTP_PATH_ERR_TOO_LONG);
    CHECK_INT(norm("/abc/defg", out, sizeof(out), &info),
              HTTP_PATH_ERR_TOO_LONG);
    CHECK_INT(norm("/", out, 2, &info), 0);
    CHECK_STR(out, ".");
    CHECK_INT(norm("/", out, 1, &info), HTTP_PATH_ERR_TOO_LONG);
}

static bool hidden(const char *rel)
{
    return http_path_hidden(rel, strlen(rel));
}

static void test_hidden(void)
{
    CHECK(!hidden("."));
    CHECK(!hidden("a.txt"));
    CHECK(!hidden("a/b.c/d..e"));
    CHECK(hidden(".env"));
    CHECK(hidden(".git/config"));
    CHECK(hidden("a/.htpasswd"));
    CHECK(hidden("a/.b/c"));
    CHECK(hidden("..x"));
    CHECK(!hidden(".well-known"));
    CHECK(!hidden(".well-known/acme-challenge/t0k3n"));
    CHECK(hidden(".well-known/.x"));
    CHECK(hidden(".well-knownx"));
    CHECK(hidden(".well-known-x/a"));
    CHECK(hidden("a/.well-known/x")); /* only at the root */
}

/* The one-scan path (info.plain) must give what the general one gives,
 * and only for paths with no hidden segment. */
static void check_plain(const char *in, bool plain)
{
    char out[256];
    struct http_path_info info;

    CHECK_INT(norm(in, out, sizeof(out), &info), HTTP_PATH_OK);
    if (info.plain != plain)
        fprintf(stderr, "path %s: plain %d\n", in, info.plain);
    CHECK_INT(info.plain, plain);
    if (info.plain)
        CHECK(!hidden(out));
}

static void test_plain(void)
{
    check_plain("/small.txt", true);
    check_plain("/a.b/c..d/", true);
    check_plain("/a/?q=/.x", true);
    check_plain("/a#f", true);
    check_plain("/a/.b", false);
    check_plain("/.well-known/x", false);
    check_plain("/a//b", false);
    check_plain("/a%41", false);
    check_plain("/?q", false);
    check_plain("/a/./b", false);
    check_ok("/a.b/c..d/", "a.b/c..d", true);
    check_ok("/a/?q=/.x", "a", true);
    check_err("/a%00b", HTTP_PATH_ERR_NUL);
    check_err("/a\\b", HTTP_PATH_ERR_BACKSLASH);
}

/* Every byte value in every place of a 31-byte path: the one-scan path
 * takes it (info.plain) exactly when the byte is one a segment may hold
 * (printable ASCII but '/', '%', '\\', '?' and '#'; a '.' not first in
 * its segment), and then gives the path less its leading slash; '/', '?'
 * and '#' split or end it as they should. */
static void test_plain_every_byte(void)
{
    static const char base[] = "/abcdefghijklmnopqrstuvwxyz0123";
    size_t n = sizeof(base) - 1;

    for (size_t at = 1; at < n; at++) {
        for (int v = 0; v < 256; v++) {
            char in[sizeof(base)], out[256], want[sizeof(base)];
            struct http_path_info info;
            bool seg = v > 0x20 && v < 0x7f && v != '/' && v != '%' &&
                       v != '\\' && v != '?' && v != '#';
            bool plain;
            int rc;

            memcpy(in, base, sizeof(base));
            in[at] = (char) v;
            rc = http_path_normalize(in, n, out, sizeof(out), &info);
            if (seg) {
                plain = !(v == '.' && at == 1);
                memcpy(want, in + 1, n - 1);
                want[n - 1] = '\0';
            } else if (v == '/') {
                plain = at != 1; /* "//" is the general path's */
                memcpy(want, in + 1, n - 1);
                want[n - 1] = '\0';
                if (at == n - 1)
                    want[n - 2] = '\0'; /* a trailing slash */
            } else if (v == '?' || v == '#') {
                plain = at != 1;
                memcpy(want, in + 1, at - 1);
                want[at - 1] = '\0';
            } else {
                plain = false;
            }
            if (rc == HTTP_PATH_OK && info.plain != plain)
                fprintf(stderr, "byte %#x at %zu: plain %d\n", v, at,
                        info.plain);
            if (plain) {
                CHECK_INT(rc, HTTP_PATH_OK);
                CHECK_INT(info.plain, true);
                CHECK_STR(out, want);
            } else {
                CHECK_INT(rc == HTTP_PATH_OK && info.plain, false);
            }
        }
    }
}

int main(void)
{
    test_hidden();
    test_plain();
    test_plain_every_byte();
    test_clean();
    test_query();
    test_traversal();
    test_capacity();
    UNIT_DONE();
}
