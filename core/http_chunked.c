/* http_chunked.c — incremental decoder of the chunked transfer coding
 * (RFC 9112 §7.1), byte-driven so that input may be cut anywhere and no
 * byte of it needs to be kept by the caller once consumed. */
#include "http_internal.h"
#include "http_limits.h"
#include "http_parser.h"

enum chunked_state {
    CH_SIZE_FIRST = 0, /* first hex digit of chunk-size */
    CH_SIZE,           /* more hex digits, ';' or CR */
    CH_EXT,            /* chunk-ext up to CR */
    CH_SIZE_LF,
    CH_DATA,
    CH_DATA_CR,
    CH_DATA_LF,
    CH_TRAILER_START, /* CR of the final empty line, or a field name */
    CH_TRAILER_NAME,
    CH_TRAILER_VALUE,
    CH_TRAILER_LF,
    CH_FINAL_LF,
    CH_DONE,
    CH_ERROR,
};

/* Sixteen hex digits already fill 64 bits; more can only overflow. */
#define MAX_SIZE_DIGITS 16

void http_chunked_init(struct http_chunked_decoder *d,
                       uint64_t max_body,
                       uint32_t max_trailer_bytes)
{
    memset(d, 0, sizeof(*d));
    d->max_body = max_body;
    d->max_trailer_bytes = max_trailer_bytes;
}

static int chunked_fail(struct http_chunked_decoder *d, int err)
{
    d->state = CH_ERROR;
    /* remember which error for later calls, in a field no longer needed */
    d->chunk_remaining = (uint64_t) (int64_t) err;
    return err;
}

/* Count one byte of chunk-ext (the ';' that starts it included); false
 * once past either limit. */
static bool chunk_ext_byte(struct http_chunked_decoder *d)
{
    return ++d->ext_line_bytes <= HTTP_CHUNK_EXT_MAX_LINE &&
           ++d->ext_total_bytes <= HTTP_CHUNK_EXT_MAX_TOTAL;
}

int http_chunked_decode(struct http_chunked_decoder *d,
                        const char *buf,
                        size_t len,
                        size_t *consumed,
                        size_t *data_off,
                        size_t *data_len)
{
    size_t i = 0;

    *consumed = 0;
    *data_off = 0;
    *data_len = 0;
    if (d->state == CH_DONE)
        return HTTP_CHUNKED_DONE;
    if (d->state == CH_ERROR)
        return (int) (int64_t) d->chunk_remaining;

    while (i < len) {
        unsigned char c = (unsigned char) buf[i];
        int h;

        if (d->state == CH_DATA) {
            size_t n = len - i;
            if (n > d->chunk_remaining)
                n = (size_t) d->chunk_remaining;
            d->chunk_remaining -= n;
            if (d->chunk_remaining == 0)
                d->state = CH_DATA_CR;
            *data_off = i;
            *data_len = n;
            *consumed = i + n;
            return HTTP_CHUNKED_DATA;
        }

        if (c == '\0')
            return chunked_fail(d, HTTP_PARSE_ERR_NUL);
        if (d->state >= CH_TRAILER_START && d->state <= CH_FINAL_LF) {
            if (++d->trailer_bytes > d->max_trailer_bytes)
                return chunked_fail(d, HTTP_PARSE_ERR_TRAILERS_TOO_LARGE);
        }

        switch (d->state) {
        case CH_SIZE_FIRST:
        case CH_SIZE:
            h = http_hex_value(c);
            if (h >= 0) {
                if (++d->size_digits > MAX_SIZE_DIGITS)
                    return chunked_fail(d, HTTP_PARSE_ERR_CHUNK_SIZE);
                d->chunk_remaining = (d->chunk_remaining << 4) | (unsigned) h;
                d->state = CH_SIZE;
            } else if (d->state == CH_SIZE && c == ';') {
                if (!chunk_ext_byte(d))
                    return chunked_fail(d, HTTP_PARSE_ERR_CHUNK_EXT_TOO_LARGE);
                d->state = CH_EXT;
            } else if (d->state == CH_SIZE && c == '\r') {
                d->state = CH_SIZE_LF;
            } else {
                /* no sign, no "0x", no whitespace before ';' or CR */
                return chunked_fail(d, HTTP_PARSE_ERR_CHUNK_SIZE);
            }
            break;
        case CH_EXT:
            /* extensions carry nothing we use; only their bytes matter */
            if (c == '\r') {
                d->state = CH_SIZE_LF;
                break;
            }
            if (c == '\n')
                return chunked_fail(d, HTTP_PARSE_ERR_BARE_LF);
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return chunked_fail(d, HTTP_PARSE_ERR_CHUNK_SIZE);
            if (!chunk_ext_byte(d))
                return chunked_fail(d, HTTP_PARSE_ERR_CHUNK_EXT_TOO_LARGE);
            break;
        case CH_SIZE_LF:
            if (c != '\n')
                return chunked_fail(d, HTTP_PARSE_ERR_BARE_CR);
            if (d->chunk_remaining > d->max_body - d->body_total ||
                d->body_total > d->max_body)
                return chunked_fail(d, HTTP_PARSE_ERR_BODY_TOO_LARGE);
            d->body_total += d->chunk_remaining;
            d->size_digits = 0;
            d->ext_line_bytes = 0;
            d->state = d->chunk_remaining ? CH_DATA : CH_TRAILER_START;
            break;
        case CH_DATA_CR:
            if (c != '\r')
                return chunked_fail(d, HTTP_PARSE_ERR_CHUNK_DATA);
            d->state = CH_DATA_LF;
            break;
        case CH_DATA_LF:
            if (c != '\n')
                return chunked_fail(d, HTTP_PARSE_ERR_CHUNK_DATA);
            d->state = CH_SIZE_FIRST;
            break;
        case CH_TRAILER_START:
            if (c == '\r') {
                d->state = CH_FINAL_LF;
                break;
            }
            if (c == ' ' || c == '\t')
                return chunked_fail(d, HTTP_PARSE_ERR_OBS_FOLD);
            if (!http_is_tchar(c))
                return chunked_fail(d, HTTP_PARSE_ERR_TRAILER);
            d->state = CH_TRAILER_NAME;
            break;
        case CH_TRAILER_NAME:
            if (c == ':')
                d->state = CH_TRAILER_VALUE;
            else if (!http_is_tchar(c))
                return chunked_fail(d, HTTP_PARSE_ERR_TRAILER);
            break;
        case CH_TRAILER_VALUE:
            if (c == '\r')
                d->state = CH_TRAILER_LF;
            else if (c == '\n')
                return chunked_fail(d, HTTP_PARSE_ERR_BARE_LF);
            else if ((c < 0x20 && c != '\t') || c == 0x7f)
                return chunked_fail(d, HTTP_PARSE_ERR_TRAILER);
            break;
        case CH_TRAILER_LF:
            if (c != '\n')
                return chunked_fail(d, HTTP_PARSE_ERR_BARE_CR);
            d->state = CH_TRAILER_START;
            break;
        case CH_FINAL_LF:
            if (c != '\n')
                return chunked_fail(d, HTTP_PARSE_ERR_BARE_CR);
            d->state = CH_DONE;
            *consumed = i + 1;
            return HTTP_CHUNKED_DONE;
        default:
            return chunked_fail(d, HTTP_PARSE_ERR_CHUNK_SIZE);
        }
        i++;
    }
    *consumed = i;
    return HTTP_CHUNKED_AGAIN;
}

/* Drop what buf[0..len) holds of the body: *left bytes of a Content-Length
 * body, or a chunked one through d (NULL: not chunked). *used is always
 * set. 0: the body is over; 1: all of buf was body; or the decoder's error
 * (a negative HTTP_PARSE_ERR_*). */
static int http_body_skip(uint64_t *left,
                          struct http_chunked_decoder *d,
                          const char *buf,
                          size_t len,
                          size_t *used)
{
    *used = 0;
    if (!d) {
        *used = *left < len ? (size_t) *left : len;
        *left -= *used;
        return *left ? 1 : 0;
    }
    while (*used < len) {
        size_t n, off, dlen;
        int r =
            http_chunked_decode(d, buf + *used, len - *used, &n, &off, &dlen);

        *used += n;
        if (r == HTTP_CHUNKED_DONE || r < 0)
            return r;
    }
    return 1;
}

void http_body_drain_start(struct http_body_drain *b,
                           const struct http_request *req)
{
    b->chunked = req->body_framing == HTTP_BODY_CHUNKED;
    b->left =
        req->body_framing == HTTP_BODY_CONTENT_LENGTH ? req->content_length : 0;
    if (b->chunked)
        http_chunked_init(&b->d, HTTP_SERVER_MAX_BODY,
                          HTTP_SERVER_MAX_TRAILERS);
}

int http_body_drain(struct http_body_drain *b,
                    const char *buf,
                    size_t *start,
                    size_t *len)
{
    size_t used;
    int r;

    if (!http_body_draining(b))
        return 0;
    r = http_body_skip(&b->left, b->left ? NULL : &b->d, buf + *start,
                       *len - *start, &used);
    *start += used;
    if (r > 0) {
        *start = *len = 0;
        return HTTP_BODY_DRAIN_MORE;
    }
    b->chunked = false;
    return r < 0 ? http_parse_error_status(r) : 0;
}
