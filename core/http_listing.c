/* http_listing.c — directory listing HTML.
 *
 * Every call either writes its whole piece or nothing (it restores b->len
 * and the overflow flag), so the caller can flush and retry it: a
 * directory of any size streams through a buffer of
 * HTTP_LISTING_ENTRY_MAX bytes.
 */
#include "http_listing.h"
#include "http_date.h"

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

static int append_dir_title(struct http_buf *b, const char *dir, size_t len)
{
    http_buf_append_char(b, '/');
    if (is_root_dir(dir, len))
        return b->overflow ? -1 : 0;
    if (http_html_escape(b, dir, len) < 0)
        return -1;
    http_buf_append_char(b, '/');
    return b->overflow ? -1 : 0;
}

int http_listing_begin(struct http_buf *b, const char *dir, size_t dir_len)
{
    size_t mark = b->len;

    if (b->overflow)
        return -1;
    http_buf_append_str(b,
                        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
                        "<title>Index of ");
    if (append_dir_title(b, dir, dir_len) < 0)
        goto full;
    http_buf_append_str(b, "</title></head>\n<body>\n<h1>Index of ");
    if (append_dir_title(b, dir, dir_len) < 0)
        goto full;
    http_buf_append_str(b,
                        "</h1>\n<table>\n<tr><th>Name</th><th>Size</th>"
                        "<th>Last modified</th></tr>\n");
    if (!is_root_dir(dir, dir_len))
        http_buf_append_str(b,
                            "<tr><td><a href=\"../\">../</a></td><td>-</td>"
                            "<td></td></tr>\n");
    return commit(b, mark);
full:
    b->len = mark;
    b->overflow = false;
    return -1;
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
