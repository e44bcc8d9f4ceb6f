/* libFuzzer target: the directory listing renderer, streamed the way the
 * engines stream it — begin, entries, end into a small buffer that is
 * flushed whenever a call says it is full — with directory and file names
 * (any bytes a file system may hold) from the input.
 *
 * Input: cap (2 bytes), then a length-prefixed directory path, then
 * entries: flags (1: bit 0 directory), size (8), mtime (8), a
 * length-prefixed name.
 *
 * Invariants: a call that fails keeps nothing (length and overflow flag
 * as before); with HTTP_LISTING_ENTRY_MAX of room every entry and begin
 * fit; the page does not depend on the buffer size; in every row the link
 * is "./" and only unreserved bytes and %XX escapes, and decodes to the
 * name; the visible name has no markup characters and unescapes to the
 * name; the page has exactly the rows it was given.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <string.h>

#include "../unit/listing_whole.h"
#include "fuzz.h"
#include "http_listing.h"

#define PAGE_MAX (1 << 20)
#define MAX_ENTRIES 64

struct entry {
    const char *name;
    size_t len;
    bool is_dir;
    uint64_t size;
    int64_t mtime;
};

struct page {
    char *out;
    size_t len;
};

static void flush(struct page *pg, struct http_buf *b)
{
    REQUIRE(pg->len + b->len <= PAGE_MAX);
    memcpy(pg->out + pg->len, b->data, b->len);
    pg->len += b->len;
    b->len = 0;
}

/* Whether a piece fits at all; then run it, flushing when full. */
#define STREAM(pg, b, always_fits, call)                  \
    do {                                                  \
        size_t mark_ = (b)->len;                          \
        int rc_ = (call);                                 \
        if (rc_ < 0) {                                    \
            REQUIRE((b)->len == mark_ && !(b)->overflow); \
            if ((b)->len == 0) {                          \
                REQUIRE(!(always_fits));                  \
                return false;                             \
            }                                             \
            flush(pg, b);                                 \
            rc_ = (call);                                 \
            if (rc_ < 0) {                                \
                REQUIRE((b)->len == 0 && !(b)->overflow); \
                REQUIRE(!(always_fits));                  \
                return false;                             \
            }                                             \
        }                                                 \
    } while (0)

static bool render(struct page *pg,
                   char *buf,
                   size_t cap,
                   const char *dir,
                   size_t dir_len,
                   const struct entry *e,
                   int n)
{
    struct http_buf b;
    bool roomy = cap >= HTTP_LISTING_ENTRY_MAX;
    int i;

    pg->len = 0;
    http_buf_init(&b, buf, cap);
    STREAM(pg, &b, roomy && dir_len <= 1024, listing_begin(&b, dir, dir_len));
    for (i = 0; i < n; i++)
        STREAM(pg, &b, roomy && e[i].len <= 255,
               http_listing_entry(&b, e[i].name, e[i].len, e[i].is_dir,
                                  e[i].size, e[i].mtime));
    STREAM(pg, &b, roomy, http_listing_end(&b));
    flush(pg, &b);
    return true;
}

static int hex(char c)
{
    return http_hex_value((unsigned char) c);
}

/* The row of e at p: link, text; returns the position after the row. */
static size_t check_row(const char *p, size_t len, const struct entry *e)
{
    static const char open[] = "<tr><td><a href=\"./";
    size_t i = sizeof(open) - 1, k = 0;

    REQUIRE(len > i && memcmp(p, open, i) == 0);
    /* the link decodes to the name, '/' after a directory's */
    while (i < len && p[i] != '"') {
        char c = p[i];
        if (c == '%') {
            REQUIRE(i + 2 < len && hex(p[i + 1]) >= 0 && hex(p[i + 2]) >= 0);
            c = (char) (hex(p[i + 1]) << 4 | hex(p[i + 2]));
            i += 3;
        } else {
            REQUIRE((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
                    c == '_' || c == '~' || (c == '/' && e->is_dir));
            if (c == '/') {
                REQUIRE(k == e->len);
                i++;
                continue;
            }
            i++;
        }
        REQUIRE(k < e->len && e->name[k] == c);
        k++;
    }
    REQUIRE(k == e->len && i + 2 < len && p[i + 1] == '>');
    REQUIRE(p[i - 1] == '/' || !e->is_dir);
    i += 2;
    /* the text: escaped name, then "</a>" */
    k = 0;
    while (i < len && p[i] != '<') {
        char c = p[i];
        REQUIRE(c != '>' && c != '"' && c != '\'');
        if (c == '&') {
            static const char *const ents[] = {"&lt;", "&gt;", "&amp;",
                                               "&quot;", "&#39;"};
            static const char chars[] = "<>&\"'";
            size_t j;
            for (j = 0; j < 5; j++)
                if (len - i >= strlen(ents[j]) &&
                    memcmp(p + i, ents[j], strlen(ents[j])) == 0)
                    break;
            REQUIRE(j < 5);
            c = chars[j];
            i += strlen(ents[j]);
        } else {
            i++;
        }
        if (k == e->len && e->is_dir && c == '/') {
            REQUIRE(p[i] == '<');
            break;
        }
        REQUIRE(k < e->len && e->name[k] == c);
        k++;
    }
    REQUIRE(k == e->len);
    REQUIRE(len - i >= 4 && memcmp(p + i, "</a>", 4) == 0);
    /* the rest of the row has no markup from the entry */
    {
        const char *end = memchr(p + i, '\n', len - i);
        REQUIRE(end != NULL);
        return (size_t) (end - p) + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char page_small[PAGE_MAX], page_big[PAGE_MAX];
    static char buf_small[HTTP_LISTING_ENTRY_MAX * 2],
        buf_big[HTTP_LISTING_ENTRY_MAX * 64];
    static struct entry e[MAX_ENTRIES];
    struct fuzz_input in = {data, size};
    size_t cap = 1 + (size_t) fuzz_uint(&in, 2) % sizeof(buf_small);
    size_t dir_len, pos;
    const char *dir = fuzz_field(&in, &dir_len);
    struct page small = {page_small, 0}, big = {page_big, 0};
    bool ok_small, ok_big;
    int n = 0, i;

    while (in.left && n < MAX_ENTRIES) {
        e[n].is_dir = fuzz_bool(&in);
        e[n].size = fuzz_uint(&in, 8);
        e[n].mtime = (int64_t) fuzz_uint(&in, 8);
        e[n].name = fuzz_field(&in, &e[n].len);
        n++;
    }

    ok_big = render(&big, buf_big, sizeof(buf_big), dir, dir_len, e, n);
    REQUIRE(ok_big); /* 256 KiB holds any page of 64 short names */
    ok_small = render(&small, buf_small, cap, dir, dir_len, e, n);
    if (ok_small)
        REQUIRE(small.len == big.len &&
                memcmp(small.out, big.out, big.len) == 0);

    /* the rows, in order, after the header (and the "../" row) */
    pos = 0;
    {
        static const char table_head[] = "<th>Last modified</th></tr>\n";
        const char *t =
            memmem(big.out, big.len, table_head, sizeof(table_head) - 1);
        REQUIRE(t != NULL);
        pos = (size_t) (t - big.out) + sizeof(table_head) - 1;
        if (!(dir_len == 0 || (dir_len == 1 && dir[0] == '.'))) {
            const char *nl = memchr(big.out + pos, '\n', big.len - pos);
            REQUIRE(nl != NULL);
            pos = (size_t) (nl - big.out) + 1;
        }
    }
    for (i = 0; i < n; i++)
        pos += check_row(big.out + pos, big.len - pos, &e[i]);
    REQUIRE(big.len - pos == strlen("</table>\n</body></html>\n"));
    return 0;
}
