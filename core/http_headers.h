/* http_headers.h — header fields the operator adds to responses (nginx's
 * "add_header ... always", lwan's "headers"), to every response or to
 * those whose path starts with a prefix, and the CORS shortcut: an
 * Access-Control-Allow-Origin on every response and the answer to a
 * preflight (decided by the planner, http_plan.c).
 *
 * A table is filled once, when the settings are read, from lines such as
 * "Strict-Transport-Security: max-age=31536000" or
 * "/assets/ Cache-Control: public, max-age=31536000, immutable"; every
 * name, value and prefix is checked then (a value with CR or LF, a name
 * that is not a token, a field the server sets itself: refused with the
 * reason), so the head builder copies the lines as they are. The table
 * lives in the caller's memory; nothing is allocated. */
#ifndef KTCP_CORE_HTTP_HEADERS_H
#define KTCP_CORE_HTTP_HEADERS_H

#include "compat.h"
#include "http_buf.h"

/* At most this many fields, whose lines ("Name: value\r\n") take at most
 * this many bytes together; a prefix is at most HTTP_HEADER_PREFIX_MAX - 1
 * bytes, all prefixes together at most HTTP_ADD_HEADERS_PREFIX_BYTES. */
#define HTTP_ADD_HEADERS_MAX 32
#define HTTP_ADD_HEADERS_BYTES 3072
#define HTTP_HEADER_NAME_MAX 64
#define HTTP_HEADER_PREFIX_MAX 256
#define HTTP_ADD_HEADERS_PREFIX_BYTES 1024
/* --cors ORIGIN: an origin ("https://app.example:8443") of at most this
 * many bytes, or "*". */
#define HTTP_CORS_ORIGIN_MAX 256
/* A preflight's Access-Control-Request-Headers is echoed in
 * Access-Control-Allow-Headers when it is a list of field names of at
 * most this many bytes (else the field is left out, and the browser
 * refuses the request that needs it). */
#define HTTP_CORS_ALLOW_HEADERS_MAX 512
/* How long a browser may keep a preflight's answer (seconds). */
#define HTTP_CORS_MAX_AGE 86400

#define HTTP_CORS_LINE_MAX                                             \
    (sizeof("Access-Control-Allow-Origin: \r\nVary: Origin\r\n") - 1 + \
     HTTP_CORS_ORIGIN_MAX)
#define HTTP_CORS_PREFLIGHT_MAX                           \
    (sizeof("Access-Control-Allow-Methods: GET, HEAD\r\n" \
            "Access-Control-Allow-Headers: \r\n"          \
            "Access-Control-Max-Age: 4294967295\r\n") -   \
     1 + HTTP_CORS_ALLOW_HEADERS_MAX)
/* The most a response head gains from a table: every line, the CORS
 * line and a preflight's fields. */
#define HTTP_HEADERS_HEAD_MAX \
    (HTTP_ADD_HEADERS_BYTES + HTTP_CORS_LINE_MAX + HTTP_CORS_PREFLIGHT_MAX)

struct http_add_header {
    uint16_t line_off, line_len;     /* "Name: value\r\n" in lines[] */
    uint16_t prefix_off, prefix_len; /* in prefixes[]; 0: every response */
};

/* A zeroed table is empty. */
struct http_headers {
    uint32_t n;
    uint32_t lines_used, prefixes_used;
    uint32_t every; /* the fields without a prefix, as a mask */
    struct http_add_header h[HTTP_ADD_HEADERS_MAX];
    char lines[HTTP_ADD_HEADERS_BYTES];
    char prefixes[HTTP_ADD_HEADERS_PREFIX_BYTES]; /* "/assets/": a
                                                     normalised path */
    /* CORS: on, for any origin ("*") or for one; its line(s) */
    bool cors;
    bool cors_any;
    uint16_t cors_line_len;
    char cors_line[HTTP_CORS_LINE_MAX];
};

/* Add "[/PREFIX ]Name: value" (blanks around each part trimmed): the
 * field on every response, or on those whose path (normalised, as
 * "/dir/file") starts with PREFIX ("/" is every path). A name that is not
 * a token, a field the server itself sets (Content-Length, Connection,
 * Content-Type, ETag, ...), an empty value or one holding CR, LF or
 * another control byte, too many fields or bytes: -1 with *why. */
int http_headers_add(struct http_headers *t,
                     const char *spec,
                     size_t len,
                     const char **why);

/* CORS for "*" or one origin ("https://app.example", scheme and host,
 * no path); "" turns it off. -1 with *why for anything else. */
int http_headers_cors(struct http_headers *t,
                      const char *origin,
                      size_t len,
                      const char **why);

#endif /* KTCP_CORE_HTTP_HEADERS_H */
