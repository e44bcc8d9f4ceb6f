/* Unit tests of the directory listing renderer and its escaping. */
#include <stdlib.h>

#include "http_internal.h"
#include "http_limits.h"
#include "http_listing.h"
#include "http_plan.h"
#include "listing_whole.h"
#include "unit.h"

/* a test-only helper */
static inline const char *http_names_at(const struct http_names *n, size_t i)
{
    return n->buf + n->off[i];
}

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
    CHECK_INT(listing_begin(&b, "sub/d<ir", 8), 0);
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
    CHECK_INT(listing_begin(&b, ".", 1), 0);
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
    CHECK_INT(listing_begin(&b, "big", 3), 0);
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

static void test_visible(void)
{
    CHECK(!http_listing_visible(".", 1, ".", 1, true));
    CHECK(!http_listing_visible(".", 1, "..", 2, true));
    CHECK(!http_listing_visible(".", 1, ".env", 4, false));
    CHECK(http_listing_visible(".", 1, ".env", 4, true));
    CHECK(http_listing_visible(".", 1, "a", 1, false));
    CHECK(http_listing_visible(".", 1, ".well-known", 11, false));
    CHECK(!http_listing_visible("a", 1, ".well-known", 11, false));
    CHECK(!http_listing_visible(".well-known", 11, ".x", 2, false));
}

static void test_sort(void)
{
    static char buf[1 << 16];
    static uint32_t off[2000];
    struct http_names n = {buf, 0, sizeof(buf), off, 0, 3};
    const char *want[] = {"10", "9", "B", "Z", "_", "a", "\xc3\xa9"};
    char name[16];
    int i;

    CHECK_INT(http_names_add(&n, "a", 1), 0);
    CHECK_INT(http_names_add(&n, "\xc3\xa9", 2), 0);
    CHECK_INT(http_names_add(&n, "B", 1), 0);
    CHECK_INT(http_names_add(&n, "9", 1), -1); /* off is full */
    CHECK_INT(n.count, 3);
    n.max = 2000;
    CHECK_INT(http_names_add(&n, "9", 1), 0);
    CHECK_INT(http_names_add(&n, "_", 1), 0);
    CHECK_INT(http_names_add(&n, "Z", 1), 0);
    CHECK_INT(http_names_add(&n, "10", 2), 0);
    http_names_sort(&n);
    for (i = 0; i < 7; i++)
        CHECK_STR(http_names_at(&n, (size_t) i), want[i]);
    /* many, in reverse: sorted, nothing lost */
    n.count = n.len = 0;
    for (i = 1999; i >= 0; i--) {
        int len = snprintf(name, sizeof(name), "n%05d", i);
        CHECK_INT(http_names_add(&n, name, (size_t) len), 0);
    }
    http_names_sort(&n);
    for (i = 0; i < 2000; i++) {
        snprintf(name, sizeof(name), "n%05d", i);
        CHECK_STR(http_names_at(&n, (size_t) i), name);
    }
    /* buf full: nothing added */
    n.count = n.len = 0;
    n.cap = 4;
    CHECK_INT(http_names_add(&n, "abcd", 4), -1);
    CHECK_INT(n.len, 0);
    CHECK_INT(http_names_add(&n, "abc", 3), 0);
}

static void test_long_title(void)
{
    /* a title that cannot fit one buffer comes in parts, each fitting an
     * empty one; put together they are the all-at-once opening */
    static char dir[5000], mem[HTTP_LISTING_ENTRY_MAX], whole[80000];
    static char parts[80000];
    struct http_listing_cursor c = {0, 0};
    struct http_buf b;
    size_t plen = 0;
    int rounds = 0;

    memset(dir, '&', sizeof(dir));
    http_buf_init(&b, whole, sizeof(whole));
    CHECK_INT(listing_begin(&b, dir, sizeof(dir)), 0);
    CHECK(b.len > 2 * 5 * sizeof(dir));
    http_buf_init(&b, mem, sizeof(mem));
    CHECK_INT(listing_begin(&b, dir, sizeof(dir)), -1); /* all or nothing */
    CHECK_INT(b.len, 0);
    while (http_listing_begin_part(&b, dir, sizeof(dir), &c) < 0) {
        CHECK(b.len > 0);
        memcpy(parts + plen, mem, b.len);
        plen += b.len;
        http_buf_init(&b, mem, sizeof(mem));
        CHECK(++rounds < 100);
    }
    memcpy(parts + plen, mem, b.len);
    plen += b.len;
    http_buf_init(&b, whole, sizeof(whole));
    listing_begin(&b, dir, sizeof(dir));
    CHECK_INT(plen, b.len);
    CHECK(memcmp(parts, whole, plen) == 0);
}

static void test_truncated(void)
{
    char mem[256];
    struct http_buf b;

    http_buf_init(&b, mem, sizeof(mem));
    CHECK_INT(http_listing_truncated(&b, 20000), 0);
    CHECK(contains(mem, b.len, "Only the first 20000 entries are listed."));
}

/* A name list's memory for the tests: malloc under a byte budget, every
 * byte charged counted back by the puts. */
struct test_mem {
    size_t charged, budget;
    int gets, fail_at; /* the get numbered fail_at finds no memory */
};

static struct test_mem tm;

static bool test_charge(size_t size)
{
    if (tm.charged + size > tm.budget)
        return false;
    tm.charged += size;
    return true;
}

static void test_uncharge(size_t size)
{
    CHECK(size <= tm.charged);
    tm.charged -= size;
}

static void *test_alloc(size_t size)
{
    return ++tm.gets == tm.fail_at ? NULL : malloc(size);
}

/* Growth of a name list: doubling, never past the listing's bounds,
 * nothing when what is there has room, the names kept, every byte
 * charged while held and given back by the free. */
static void test_grow(void)
{
    struct http_names_mem m = {test_charge, test_uncharge, test_alloc, free};
    struct http_names n;
    char name[16];

    tm = (struct test_mem){0, (size_t) 64 << 20, 0, 0};
    CHECK_INT(http_names_start(&n, &m), 0);
    CHECK_INT(n.cap, HTTP_SERVER_LISTING_NAMES_START);
    CHECK_INT(n.max, HTTP_SERVER_LISTING_OFFS_START);
    CHECK_INT(tm.charged, n.cap + n.max * sizeof(uint32_t));
    CHECK_INT(http_names_grow(&n, 100, &m), 0); /* room: unchanged */
    CHECK_INT(tm.gets, 2);
    for (size_t i = 0; i < n.max; i++) {
        int len = snprintf(name, sizeof(name), "n%zu", i);
        CHECK_INT(http_names_add(&n, name, (size_t) len), 0);
    }
    CHECK_INT(http_names_add(&n, "x", 1), -1);
    CHECK_INT(http_names_grow(&n, 2, &m), 0);
    CHECK_INT(n.max, 2 * HTTP_SERVER_LISTING_OFFS_START);
    CHECK_INT(n.cap, HTTP_SERVER_LISTING_NAMES_START); /* buf had room */
    CHECK_INT(http_names_add(&n, "x", 1), 0);
    CHECK_STR(http_names_at(&n, 0), "n0");
    CHECK_STR(http_names_at(&n, n.count - 2), "n255");
    CHECK_INT(tm.charged, n.cap + n.max * sizeof(uint32_t));
    /* a name longer than the doubling: room for it exactly */
    size_t len = n.len;
    CHECK_INT(http_names_grow(&n, n.cap * 3, &m), 0);
    CHECK_INT(n.cap, len + HTTP_SERVER_LISTING_NAMES_START * 3);
    CHECK_INT(tm.charged, n.cap + n.max * sizeof(uint32_t));
    CHECK_STR(http_names_at(&n, n.count - 1), "x");
    /* past the budget: -EBUSY, the list as it was */
    size_t cap = n.cap;
    tm.budget = tm.charged;
    CHECK_INT(http_names_grow(&n, n.cap, &m), -HTTP_EBUSY);
    CHECK_INT(n.cap, cap);
    /* no memory: the allocator's error */
    tm.budget = (size_t) 64 << 20;
    tm.fail_at = tm.gets + 1;
    size_t charged = tm.charged;
    CHECK_INT(http_names_grow(&n, n.cap, &m), -HTTP_ENOMEM);
    CHECK_INT(n.cap, cap);
    CHECK_INT(tm.charged, charged); /* the failed block's charge back */
    /* the bounds: no more names, no more name bytes */
    n.count = n.max = HTTP_SERVER_LISTING_MAX_ENTRIES;
    CHECK_INT(http_names_grow(&n, 1, &m), -HTTP_ENOSPC);
    n.max = 2 * HTTP_SERVER_LISTING_OFFS_START;
    n.count = 3;
    n.len = HTTP_SERVER_LISTING_MAX_NAME_BYTES - 5;
    size_t real_cap = n.cap;
    n.cap = n.len; /* as if full: grow_buf must refuse, not allocate */
    CHECK_INT(http_names_grow(&n, 6, &m), -HTTP_ENOSPC);
    n.cap = real_cap;
    n.len = 0;
    http_names_free(&n, &m);
    CHECK_INT(tm.charged, 0);
    CHECK(!n.buf && !n.off);
    /* a start the budget refuses: nothing held after the free */
    tm.budget = HTTP_SERVER_LISTING_NAMES_START;
    CHECK_INT(http_names_start(&n, &m), -HTTP_EBUSY);
    http_names_free(&n, &m);
    CHECK_INT(tm.charged, 0);
}

/* The packed table: header, offsets, names, in one block of its size. */
static void test_pack(void)
{
    static char buf[64];
    static uint32_t off[8];
    struct http_names n = {buf, 0, sizeof(buf), off, 0, 8};
    union {
        struct http_name_table t;
        char mem[256];
    } u;
    struct http_name_table *t = &u.t;

    CHECK_INT(http_names_add(&n, "b", 1), 0);
    CHECK_INT(http_names_add(&n, "a", 1), 0);
    http_names_sort(&n);
    CHECK_INT(http_names_table_size(&n), sizeof(*t) + 2 * 4 + 4);
    http_names_pack(&n, t, true, false, true);
    CHECK_INT(t->bytes, sizeof(*t) + 12);
    CHECK_INT(t->count, 2);
    CHECK(t->truncated && !t->root && t->dotfiles);
    CHECK_STR(t->names + t->off[0], "a");
    CHECK_STR(t->names + t->off[1], "b");
    CHECK((char *) t->off == u.mem + sizeof(*t));
    CHECK(http_names_table_fits(t, false, true));
    CHECK(!http_names_table_fits(t, true, true));
    CHECK(!http_names_table_fits(t, false, false));
    CHECK(!http_names_table_fits(NULL, false, true));
}

int main(void)
{
    test_visible();
    test_sort();
    test_grow();
    test_pack();
    test_long_title();
    test_truncated();
    test_escape();
    test_listing();
    test_streaming();
    UNIT_DONE();
}
