/* http_response.h — status line and header fields gathered into one caller
 * buffer, so a response head leaves in a single send()/writev() entry. */
#ifndef KTCP_CORE_HTTP_RESPONSE_H
#define KTCP_CORE_HTTP_RESPONSE_H

#include "compat.h"
#include "http_buf.h"
#include "http_headers.h"

/* Everything a static-file server puts in a head, built in one call. */
struct http_response_head {
    int status;
    int version;        /* 10 or 11; 0 means 11 */
    const char *server; /* NULL: "ktcp" */
    const char *date;   /* preformatted HTTP-date (cached per second),
                           or NULL to format now_seconds */
    uint8_t date_len;   /* > 0: date was made by http_date_format and is
                           this long: appended as is, not scanned */
    int64_t now_seconds;
    const char *content_type; /* NULL: omitted */
    bool content_type_safe;   /* content_type holds no CR or LF (a MIME
                                 table's, a literal): not scanned */
    int64_t content_length;   /* < 0: omitted */
    bool chunked;             /* Transfer-Encoding: chunked */
    bool has_last_modified;
    int64_t last_modified;
    /* last_modified already formatted (HTTP_DATE_LEN bytes, made by
     * http_date_format), or NULL to format it here */
    const char *last_modified_text;
    const char *etag; /* quoted; NULL: omitted */
    uint8_t etag_len; /* > 0: etag was made by core's ETag formatters and
                         is this long: appended as is, not scanned */
    bool has_max_age; /* Cache-Control: max-age=max_age and
                         Expires: expires (nginx's "expires") */
    uint32_t max_age;
    int64_t expires;
    bool accept_ranges;     /* Accept-Ranges: bytes */
    bool has_content_range; /* 206: range_first..range_last/range_size */
    bool content_range_unsatisfied; /* 416: bytes * /range_size */
    uint64_t range_first, range_last, range_size;
    const char *content_encoding; /* "gzip"; NULL: omitted */
    bool vary_accept_encoding;
    const char *location; /* 301 */
    const char *allow;    /* 405, e.g. "GET, HEAD" */
    uint32_t retry_after; /* > 0: Retry-After: N (seconds; 503, 429) */
    bool keep_alive;      /* Connection: keep-alive, else close */
    uint32_t keep_alive_timeout_seconds; /* > 0: Keep-Alive: timeout=N */
    uint32_t keep_alive_max;             /* > 0: ..., max=N */
    /* the operator's fields (http_headers.h): those of add_mask, then the
     * CORS line if the table has one; checked when the table was made */
    const struct http_headers *add;
    uint32_t add_mask;
    /* a CORS preflight's answer: Access-Control-Allow-Methods, -Max-Age
     * and, when set, -Headers (cors_allow_headers: vetted by the planner) */
    bool cors_preflight;
    uint16_t cors_allow_headers_len;
    const char *cors_allow_headers;
};

/* Chunked transfer coding: header "<hex>\r\n" before data, "\r\n" after
 * it, and "0\r\n\r\n" to end the body. */
#define HTTP_CHUNK_HEADER_MAX 18
#define HTTP_CHUNK_END "\r\n"
#define HTTP_LAST_CHUNK "0\r\n\r\n"
/* Write the chunk header for data_len (> 0) into out; returns its length. */
size_t http_chunk_header(char *out, size_t data_len);

/* kTLS: the most plaintext a record carries; the kernel closes a record
 * when it is full or at a send without MSG_MORE. */
#define HTTP_TLS_RECORD_MAX 16384

/* A file body sent after a head whose record kTLS holds open (open bytes
 * of it, sent with MSG_MORE): how many of the body's len bytes at off the
 * first send carries, ending with a push, so that every record after it
 * starts on a page. The kernel encrypts a record a contiguous run at a
 * time, and a page-cache page is one: a full record from a page boundary
 * is 4 runs of 4 KiB, one from inside a page 5. len when the records fall
 * on pages anyway or no whole record would follow; as many records are
 * made either way. page: a power of two. */
static inline uint64_t http_tls_first_piece(size_t open,
                                            uint64_t off,
                                            uint64_t len,
                                            size_t page)
{
    uint64_t room = HTTP_TLS_RECORD_MAX - (open & (HTTP_TLS_RECORD_MAX - 1));
    uint64_t end = (off + room) & ~(uint64_t) (page - 1);

    if (!open || len < room + HTTP_TLS_RECORD_MAX || end == off + room ||
        end <= off)
        return len;
    return end - off;
}

/* kTLS: whether the head before a file body (len bytes at off) goes in
 * a record of its own, pushed, rather than leaving its record open for
 * the body's first bytes. From a page boundary the body's records then
 * all start on pages in a single send, where a shared record takes a
 * second send to end on a page (http_tls_first_piece): a system call
 * less a response, for at most one record more (none when len is a whole
 * number of records). For an engine whose every send is a system call
 * (user space); khttpd's split costs none. page: a power of two. */
static inline bool http_tls_head_alone(uint64_t off, uint64_t len, size_t page)
{
    return !(off & (page - 1)) && len >= 2 * HTTP_TLS_RECORD_MAX;
}

#endif /* KTCP_CORE_HTTP_RESPONSE_H */
