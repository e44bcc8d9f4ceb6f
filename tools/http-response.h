/* Incremental HTTP/1.x response parser for htstress: status line, the few
 * headers that frame the body (Content-Length, Transfer-Encoding: chunked,
 * Connection), Content-Length bodies, chunked bodies with trailers, and
 * bodies delimited by the server closing. Bodies are skipped, not stored;
 * nothing is copied except header lines (truncated to their first
 * HTTP_LINE_MAX bytes, which is all that is looked at). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_LINE_MAX 256
#define HTTP_HEADER_BYTES_MAX (64 * 1024)

enum http_parse_result {
    HTTP_PARSE_MORE,  /* every byte consumed, the response is not complete */
    HTTP_PARSE_DONE,  /* one response complete; *consumed bytes were its end */
    HTTP_PARSE_ERROR, /* malformed response */
};

struct http_response_parser {
    enum {
        HTTP_STATUS_LINE,
        HTTP_HEADER_LINE,
        HTTP_BODY_LENGTH,
        HTTP_BODY_UNTIL_CLOSE,
        HTTP_CHUNK_SIZE_LINE,
        HTTP_CHUNK_DATA,
        HTTP_CHUNK_DATA_END,
        HTTP_TRAILER_LINE,
    } state;
    char line[HTTP_LINE_MAX];
    size_t line_len;     /* bytes kept in line (at most HTTP_LINE_MAX - 1) */
    size_t header_bytes; /* of this response's head, bounded */
    bool line_started;   /* any byte of the current line seen */
    int status;
    int http_minor;
    bool chunked;
    bool has_length;
    bool keep_alive_header;
    /* The server will close the connection after this response. */
    bool close_after;
    uint64_t remaining; /* body or chunk bytes still to skip */
};

void http_response_parser_init(struct http_response_parser *p);
/* Feed len bytes; *consumed is how many were used (all of them unless DONE). */
enum http_parse_result http_response_parse(struct http_response_parser *p,
                                           const char *buf,
                                           size_t len,
                                           size_t *consumed);
/* The connection reached EOF: DONE if that completes the response (a body
 * delimited by close), MORE if no byte of a response had arrived (a clean
 * close between responses), ERROR if a response was cut short. */
enum http_parse_result http_response_parse_eof(struct http_response_parser *p);
