/* Unit tests of the directory listing renderer and its escaping. */
#include "http_listing.h"
#include "unit.h"

static bool contains(const char *hay, size_t len, const char *needle)
{
    return memmem(hay, len, needle, strlen(needle)) != NULL;
}

static void test_escape(void)
{
    char mem[128];
    struct http_buf b;

    http_buf_init(&b, mem, sizeof(mem));
    CHECK_INT(http_html_escape(&b, "<a href='x'>&\"", 14), 0);
    CHECK_MEM(mem, b.len, "&lt;a href=&#39;x&#39;&gt;&amp;&quot;");
    http_buf_init(&b, mem, sizeof(mem));
    CHECK_INT(http_url_encode(&b, "a b#?%/\xc3\xa9~.-_Z9", 15, false), 0);
    CHECK_MEM(mem, b.len, "a%20b%23%3F%25%2F%C3%A9~.-_Z9");
    http_buf_init(&b, mem, sizeof(mem));
    CHECK_INT(http_url_encode(&b, "d/e f", 5, true), 0);
    CHECK_MEM(mem, b.len, "d/e%20f");
    /* all or nothing when the buffer is short */
    http_buf_init(&b, mem, 6);
    http_buf_append_str(&b, "ab");
    CHECK_INT(http_html_escape(&b, "<<", 2), -1);
    CHECK_INT(b.len, 2);
    CHECK(!b.overflow);
    CHECK_INT(http_url_encode(&b, "  ", 2, false), -1);
    CHECK_INT(b.len, 2);
}

static void test_listing(void)
{
    static char mem[8192];
    struct http_buf b;
    const char *nasty = "<script>&\"'x y#?%.txt";

    http_buf_init(&b, mem, sizeof(mem));
    CHECK_INT(http_listing_begin(&b, "sub/d<ir", 8), 0);
    CHECK(contains(mem, b.len, "<title>Index of /sub/d&lt;ir/</title>"));
    CHECK(contains(mem, b.len, "<a href=\"../\">../</a>"));
    CHECK_INT(
        http_listing_entry(&b, nasty, strlen(nasty), false, 1234, 784111777),
        0);
    CHECK(contains(mem, b.len,
                   "<a href=\"./%3Cscript%3E%26%22%27x%20y%23%3F%25.txt\">"
                   "&lt;script&gt;&amp;&quot;&#39;x y#?%.txt</a>"));
    CHECK(contains(mem, b.len, "<td>1234</td>"));
    CHECK(contains(mem, b.len, "Sun, 06 Nov 1994 08:49:37 GMT"));
    CHECK(!contains(mem, b.len, "<script>"));
    CHECK_INT(http_listing_entry(&b, "caf\xc3\xa9", 5, true, 4096, 0), 0);
    CHECK(contains(mem, b.len, "href=\"./caf%C3%A9/\">caf\xc3\xa9/</a>"));
    CHECK(contains(mem, b.len, "<td>-</td>"));
    CHECK_INT(http_listing_end(&b), 0);
    CHECK(contains(mem, b.len, "</html>\n"));
    CHECK(!b.overflow);

    http_buf_init(&b, mem, sizeof(mem));
    CHECK_INT(http_listing_begin(&b, ".", 1), 0);
    CHECK(contains(mem, b.len, "<title>Index of /</title>"));
    CHECK(!contains(mem, b.len, "../"));
}

static void test_streaming(void)
{
    /* 10,000 entries through a 4 KiB buffer: every call either fits whole
     * or leaves the buffer untouched, and nothing is lost */
    static char mem[HTTP_LISTING_ENTRY_MAX];
    static char out[4 << 20];
    struct http_buf b;
    size_t out_len = 0, flushes = 0;
    char name[300];
    int i, found = 0;

    http_buf_init(&b, mem, sizeof(mem));
    CHECK_INT(http_listing_begin(&b, "big", 3), 0);
    for (i = 0; i < 10000; i++) {
        size_t n = (size_t) snprintf(name, sizeof(name), "file-%05d<&>.txt", i);
        if (i == 5000) {
            memset(name, 'n', 255);
            n = 255;
        }
        if (http_listing_entry(&b, name, n, false, (uint64_t) i, 0) < 0) {
            memcpy(out + out_len, mem, b.len);
            out_len += b.len;
            flushes++;
            http_buf_init(&b, mem, sizeof(mem));
            CHECK_INT(http_listing_entry(&b, name, n, false, (uint64_t) i, 0),
                      0);
        }
    }
    if (http_listing_end(&b) < 0) {
        memcpy(out + out_len, mem, b.len);
        out_len += b.len;
        http_buf_init(&b, mem, sizeof(mem));
        CHECK_INT(http_listing_end(&b), 0);
    }
    memcpy(out + out_len, mem, b.len);
    out_len += b.len;
    CHECK(flushes > 100);
    for (i = 0; i < 10000; i += 999) {
        snprintf(name, sizeof(name), ">file-%05d&lt;&amp;&gt;.txt</a>", i);
        if (i != 5000)
            found += contains(out, out_len, name);
    }
    CHECK_INT(found, 11);
    CHECK(contains(out, out_len, "</table>\n</body></html>\n"));
    /* a worst-case name fits HTTP_LISTING_ENTRY_MAX */
    memset(name, '"', 255);
    http_buf_init(&b, mem, sizeof(mem));
    CHECK_INT(
        http_listing_entry(&b, name, 255, true, HTTP_U64_MAX, HTTP_I64_MIN), 0);
}

int main(void)
{
    test_escape();
    test_listing();
    test_streaming();
    UNIT_DONE();
}
