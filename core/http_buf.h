/* http_buf.h — append-only writer over a caller-provided buffer.
 *
 * Appends never write past cap; the first one that does not fit sets
 * overflow and every later append is ignored, so a builder can append a
 * whole response and check once at the end.
 */
#ifndef KTCP_CORE_HTTP_BUF_H
#define KTCP_CORE_HTTP_BUF_H

#include "compat.h"

struct http_buf {
    char *data;
    size_t cap;
    size_t len;
    bool overflow;
};

void http_buf_init(struct http_buf *b, char *data, size_t cap);
/* Inline: a response head is a dozen appends, most of a known length. */
static inline void http_buf_append(struct http_buf *b, const char *s, size_t n)
{
    if (b->overflow)
        return;
    if (n > b->cap - b->len) {
        b->overflow = true;
        return;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
}
void http_buf_append_str(struct http_buf *b, const char *s);
void http_buf_append_char(struct http_buf *b, char c);
void http_buf_append_u64(struct http_buf *b, uint64_t v);
#endif /* KTCP_CORE_HTTP_BUF_H */
