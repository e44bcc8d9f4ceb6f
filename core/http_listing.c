/* http_listing.c — directory listing HTML.
 *
 * Every call either writes its whole piece or nothing (it restores b->len
 * and the overflow flag), so the caller can flush and retry it: a
 * directory of any size streams through a buffer of
 * HTTP_LISTING_ENTRY_MAX bytes.
 */
#include "http_listing.h"
#include "http_date.h"
#include "http_internal.h"
#include "http_limits.h"
#include "http_plan.h"

static int commit(struct http_buf *b, size_t mark)
{
    if (b->overflow) {
        b->overflow = false;
        b->len = mark;
        return -1;
    }
    return 0;
}

int http_html_escape(struct http_buf *b, const char *s, size_t len)
{
    size_t mark = b->len, i, run = 0;

    if (b->overflow)
        return -1;
    for (i = 0; i < len; i++) {
        const char *rep;
        switch (s[i]) {
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '&':
            rep = "&amp;";
            break;
        case '"':
            rep = "&quot;";
            break;
        case '\'':
            rep = "&#39;";
            break;
        default:
            continue;
        }
        http_buf_append(b, s + run, i - run);
        http_buf_append_str(b, rep);
        run = i + 1;
    }
    http_buf_append(b, s + run, len - run);
    return commit(b, mark);
}

static bool is_unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           http_is_digit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

int http_url_encode(struct http_buf *b,
                    const char *s,
                    size_t len,
                    bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t mark = b->len, i;

    if (b->overflow)
        return -1;
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char) s[i];
        if (is_unreserved(c) || (keep_slash && c == '/')) {
            http_buf_append_char(b, (char) c);
        } else {
            char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
            http_buf_append(b, esc, 3);
        }
    }
    return commit(b, mark);
}

static bool is_root_dir(const char *dir, size_t len)
{
    return len == 0 || (len == 1 && dir[0] == '.');
}

/* Title and heading escape the directory's path this many bytes at a
 * time (at most 6 output bytes each), so a part always fits an empty
 * buffer of HTTP_LISTING_ENTRY_MAX bytes however long the path. */
#define TITLE_SLICE 256

enum {
    BEGIN_HEAD,  /* doctype up to "<title>Index of /" */
    BEGIN_TITLE, /* the path, slice by slice */
    BEGIN_MID,   /* "/</title>...<h1>Index of /" */
    BEGIN_H1,    /* the path again */
    BEGIN_TAIL,  /* "/</h1>", the table head, the "../" row */
    BEGIN_DONE,
};

int http_listing_begin_part(struct http_buf *b,
                            const char *dir,
                            size_t dir_len,
                            struct http_listing_cursor *c)
{
    bool root = is_root_dir(dir, dir_len);

    while (c->stage != BEGIN_DONE) {
        size_t mark = b->len, n = 0;

        if (b->overflow)
            return -1;
        switch (c->stage) {
        case BEGIN_HEAD:
            http_buf_append_str(
                b,
                "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
                "<title>Index of /");
            break;
        case BEGIN_TITLE:
        case BEGIN_H1:
            n = root ? 0 : dir_len - c->off;
            if (n > TITLE_SLICE)
                n = TITLE_SLICE;
            if (n && http_html_escape(b, dir + c->off, n) < 0)
                return -1;
            break;
        case BEGIN_MID:
            if (!root)
                http_buf_append_char(b, '/');
            http_buf_append_str(b, "</title></head>\n<body>\n<h1>Index of /");
            break;
        case BEGIN_TAIL:
        default:
            if (!root)
                http_buf_append_char(b, '/');
            http_buf_append_str(b,
                                "</h1>\n<table>\n<tr><th>Name</th><th>Size</th>"
                                "<th>Last modified</th></tr>\n");
            if (!root)
                http_buf_append_str(b,
                                    "<tr><td><a href=\"../\">../</a></td>"
                                    "<td>-</td><td></td></tr>\n");
            break;
        }
        if (commit(b, mark) < 0)
            return -1;
        if (c->stage == BEGIN_TITLE || c->stage == BEGIN_H1) {
            c->off += n;
            if (!root && c->off < dir_len)
                continue; /* the next slice */
            c->off = 0;
        }
        c->stage++;
    }
    return 0;
}

bool http_listing_visible(const char *dir,
                          size_t dir_len,
                          const char *name,
                          size_t name_len,
                          bool dotfiles)
{
    if (name_len == 0 || name[0] != '.')
        return name_len > 0;
    if (name_len == 1 || (name_len == 2 && name[1] == '.'))
        return false;
    if (dotfiles)
        return true;
    return is_root_dir(dir, dir_len) && name_len == 11 &&
           memcmp(name, ".well-known", 11) == 0;
}

int http_listing_entry(struct http_buf *b,
                       const char *name,
                       size_t name_len,
                       bool is_dir,
                       uint64_t size,
                       int64_t mtime)
{
    size_t mark = b->len;
    char date[HTTP_DATE_LEN + 1];

    if (b->overflow)
        return -1;
    http_buf_append_str(b, "<tr><td><a href=\"");
    /* "./" keeps a name such as "a:b" from reading as a URL scheme */
    http_buf_append_str(b, "./");
    if (http_url_encode(b, name, name_len, false) < 0)
        goto full;
    if (is_dir)
        http_buf_append_char(b, '/');
    http_buf_append_str(b, "\">");
    if (http_html_escape(b, name, name_len) < 0)
        goto full;
    if (is_dir)
        http_buf_append_char(b, '/');
    http_buf_append_str(b, "</a></td><td>");
    if (is_dir)
        http_buf_append_char(b, '-');
    else
        http_buf_append_u64(b, size);
    http_buf_append_str(b, "</td><td>");
    http_date_format(mtime, date);
    http_buf_append(b, date, HTTP_DATE_LEN);
    http_buf_append_str(b, "</td></tr>\n");
    return commit(b, mark);
full:
    b->len = mark;
    b->overflow = false;
    return -1;
}

int http_listing_end(struct http_buf *b)
{
    size_t mark = b->len;

    if (b->overflow)
        return -1;
    http_buf_append_str(b, "</table>\n</body></html>\n");
    return commit(b, mark);
}

int http_listing_truncated(struct http_buf *b, uint64_t shown)
{
    size_t mark = b->len;

    if (b->overflow)
        return -1;
    http_buf_append_str(b, "<tr><td colspan=\"3\">Only the first ");
    http_buf_append_u64(b, shown);
    http_buf_append_str(b, " entries are listed.</td></tr>\n");
    return commit(b, mark);
}

int http_names_add(struct http_names *n, const char *name, size_t name_len)
{
    if (n->count >= n->max || name_len + 1 > n->cap - n->len ||
        n->len > 0xffffffffu)
        return -1;
    n->off[n->count++] = (uint32_t) n->len;
    memcpy(n->buf + n->len, name, name_len);
    n->buf[n->len + name_len] = '\0';
    n->len += name_len + 1;
    return 0;
}

/* Byte order, as strcmp with unsigned chars. */
static int name_cmp(const struct http_names *n, uint32_t a, uint32_t b)
{
    const unsigned char *x = (const unsigned char *) n->buf + a;
    const unsigned char *y = (const unsigned char *) n->buf + b;

    while (*x && *x == *y) {
        x++;
        y++;
    }
    return (int) *x - (int) *y;
}

static void sift_down(struct http_names *n, size_t root, size_t end)
{
    uint32_t *o = n->off;

    for (;;) {
        size_t child = 2 * root + 1, big = root;
        uint32_t t;

        if (child < end && name_cmp(n, o[child], o[big]) > 0)
            big = child;
        if (child + 1 < end && name_cmp(n, o[child + 1], o[big]) > 0)
            big = child + 1;
        if (big == root)
            return;
        t = o[root];
        o[root] = o[big];
        o[big] = t;
        root = big;
    }
}

/* Heapsort: no recursion and no scratch memory, which a kernel stack
 * wants; names are unique in a directory, so stability does not matter. */
void http_names_sort(struct http_names *n)
{
    size_t i, end = n->count;

    if (end < 2)
        return;
    for (i = end / 2; i-- > 0;)
        sift_down(n, i, end);
    while (end > 1) {
        uint32_t t = n->off[0];

        end--;
        n->off[0] = n->off[end];
        n->off[end] = t;
        sift_down(n, 0, end);
    }
}

static size_t grow_off(const struct http_names *n)
{
    size_t max = n->max * 2;

    if (n->count < n->max)
        return n->max;
    if (max > HTTP_SERVER_LISTING_MAX_ENTRIES)
        max = HTTP_SERVER_LISTING_MAX_ENTRIES;
    return max > n->max ? max : 0;
}

static size_t grow_buf(const struct http_names *n, size_t need)
{
    size_t cap = n->cap * 2;

    if (need <= n->cap - n->len)
        return n->cap;
    if (cap < n->len + need)
        cap = n->len + need;
    if (cap > HTTP_SERVER_LISTING_MAX_NAME_BYTES)
        cap = HTTP_SERVER_LISTING_MAX_NAME_BYTES;
    return cap >= n->len + need ? cap : 0;
}

void *http_names_get(const struct http_names_mem *m, size_t size, int *err)
{
    void *p;

    if (!m->charge(size)) {
        *err = -HTTP_EBUSY;
        return NULL;
    }
    p = m->alloc(size);
    if (!p) {
        m->uncharge(size);
        *err = -HTTP_ENOMEM;
    }
    return p;
}

/* Free a block http_names_get returned (NULL too) and its charge. */
static void http_names_put(const struct http_names_mem *m, void *p, size_t size)
{
    m->free(p);
    m->uncharge(size);
}

/* *p (of *have elements of size each, used of them in use) grown to
 * want: a new block from m, the used ones copied, the old block put. */
static int grow_array(void **p,
                      size_t *have,
                      size_t want,
                      size_t used,
                      size_t size,
                      const struct http_names_mem *m)
{
    int err = 0;
    void *q;

    if (want <= *have)
        return 0;
    q = http_names_get(m, want * size, &err);
    if (!q)
        return err;
    if (used)
        memcpy(q, *p, used * size);
    http_names_put(m, *p, *have * size);
    *p = q;
    *have = want;
    return 0;
}

int http_names_start(struct http_names *n, const struct http_names_mem *m)
{
    int err;

    *n = (struct http_names){0};
    err = grow_array((void **) &n->buf, &n->cap,
                     HTTP_SERVER_LISTING_NAMES_START, 0, 1, m);
    if (err)
        return err;
    return grow_array((void **) &n->off, &n->max,
                      HTTP_SERVER_LISTING_OFFS_START, 0, sizeof(uint32_t), m);
}

int http_names_grow(struct http_names *n,
                    size_t need,
                    const struct http_names_mem *m)
{
    size_t max = grow_off(n), cap;
    int err;

    if (!max)
        return -HTTP_ENOSPC;
    err = grow_array((void **) &n->off, &n->max, max, n->count,
                     sizeof(uint32_t), m);
    if (err)
        return err;
    cap = grow_buf(n, need);
    if (!cap)
        return -HTTP_ENOSPC;
    return grow_array((void **) &n->buf, &n->cap, cap, n->len, 1, m);
}

void http_names_free(struct http_names *n, const struct http_names_mem *m)
{
    http_names_put(m, n->buf, n->cap);
    http_names_put(m, n->off, n->max * sizeof(uint32_t));
    n->buf = NULL;
    n->off = NULL;
    n->cap = n->max = 0;
}

size_t http_names_table_size(const struct http_names *n)
{
    return sizeof(struct http_name_table) + n->count * sizeof(uint32_t) +
           n->len;
}

void http_names_pack(const struct http_names *n,
                     struct http_name_table *t,
                     bool truncated,
                     bool root,
                     bool dotfiles)
{
    t->bytes = http_names_table_size(n);
    t->count = (uint32_t) n->count;
    t->truncated = truncated;
    t->root = root;
    t->dotfiles = dotfiles;
    t->off = (uint32_t *) (t + 1);
    t->names = (char *) (t->off + t->count);
    memcpy(t->off, n->off, t->count * sizeof(uint32_t));
    memcpy(t->names, n->buf, n->len);
}

bool http_names_table_fits(const struct http_name_table *t,
                           bool root,
                           bool dotfiles)
{
    return t && t->root == root && t->dotfiles == dotfiles;
}
