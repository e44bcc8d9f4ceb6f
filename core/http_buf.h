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

/* A request buffer *buf[0..*cap) is full, the current request at
 * [*start, *len): make room for more bytes. The request slides to the
 * front when it does not start there (*start becomes 0; a parser's slices
 * are offsets from start, so they stay valid); a buffer it fills from the
 * front doubles through grow (the engine's realloc: the bytes kept, NULL
 * when memory is short), up to HTTP_SERVER_REQ_BUF_MAX. False when there
 * is no room: at the bound, or memory is short (the buffer as it was). */
bool http_reqbuf_make_room(char **buf,
                           size_t *start,
                           size_t *len,
                           size_t *cap,
                           void *(*grow)(void *p, size_t size));
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
