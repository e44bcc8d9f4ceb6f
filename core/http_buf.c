/* http_buf.c — bounded appends; see http_buf.h. */
#include "http_buf.h"
#include "http_internal.h"
#include "http_limits.h"

void http_buf_init(struct http_buf *b, char *data, size_t cap)
{
    b->data = data;
    b->cap = cap;
    b->len = 0;
    b->overflow = false;
}

void http_buf_append_str(struct http_buf *b, const char *s)
{
    http_buf_append(b, s, strlen(s));
}

void http_buf_append_char(struct http_buf *b, char c)
{
    http_buf_append(b, &c, 1);
}

size_t http_format_u64(uint64_t v, char *out)
{
    char tmp[20];
    size_t n = 0, i;

    do {
        tmp[n++] = (char) ('0' + v % 10);
        v /= 10;
    } while (v);
    for (i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

size_t http_format_hex(uint64_t v, char *out)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[16];
    size_t n = 0, i;

    do {
        tmp[n++] = digits[v & 15];
        v >>= 4;
    } while (v);
    for (i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

void http_buf_append_u64(struct http_buf *b, uint64_t v)
{
    char tmp[20];

    http_buf_append(b, tmp, http_format_u64(v, tmp));
}

bool http_reqbuf_make_room(char **buf,
                           size_t *start,
                           size_t *len,
                           size_t *cap,
                           void *(*grow)(void *p, size_t size))
{
    char *nb;

    if (*len < *cap)
        return true;
    if (*start > 0) {
        memmove(*buf, *buf + *start, *len - *start);
        *len -= *start;
        *start = 0;
        return true;
    }
    if (*cap >= HTTP_SERVER_REQ_BUF_MAX)
        return false;
    nb = grow(*buf, *cap * 2);
    if (!nb)
        return false;
    *buf = nb;
    *cap *= 2;
    return true;
}
