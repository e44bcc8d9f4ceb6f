/* http_parser.h — incremental, zero-copy HTTP/1.x request-head parser.
 *
 * The caller owns the buffer: it appends each read to it and calls
 * http_parse_request() again with the whole buffer (same start, longer
 * length). The parser resumes where it stopped and never rescans bytes it
 * has already accepted. Results are slices (offsets into the buffer), so
 * the caller may move or grow its buffer between calls as long as the bytes
 * already passed keep their offsets.
 *
 * When a head is complete, *consumed says how many bytes it took; the body
 * (see req.body_framing) and any pipelined request follow at that offset.
 * Call http_parser_reset() before parsing the next request.
 */
#ifndef KTCP_CORE_HTTP_PARSER_H
#define KTCP_CORE_HTTP_PARSER_H

#include "compat.h"

/* A run of bytes inside the caller's buffer. len == 0 with off == 0 also
 * means "absent" for optional fields; see the has_* flags where the
 * difference matters. */
struct http_slice {
    uint32_t off;
    uint32_t len;
};

enum http_method {
    HTTP_METHOD_OTHER = 0, /* a valid token we do not know: answer 501/405 */
    HTTP_METHOD_GET,
    HTTP_METHOD_HEAD,
    HTTP_METHOD_POST,
    HTTP_METHOD_PUT,
    HTTP_METHOD_DELETE,
    HTTP_METHOD_OPTIONS,
    HTTP_METHOD_TRACE,
    HTTP_METHOD_CONNECT,
    HTTP_METHOD_PATCH,
};

enum http_version {
    HTTP_VERSION_1_0 = 10,
    HTTP_VERSION_1_1 = 11,
};

enum http_target_form {
    HTTP_TARGET_ORIGIN = 0, /* /path?query */
    HTTP_TARGET_ABSOLUTE,   /* http://host/path?query */
    HTTP_TARGET_AUTHORITY,  /* host:port (CONNECT only) */
    HTTP_TARGET_ASTERISK,   /* * (OPTIONS only) */
};

enum http_body_framing {
    HTTP_BODY_NONE = 0,
    HTTP_BODY_CONTENT_LENGTH, /* req.content_length bytes follow the head */
    HTTP_BODY_CHUNKED,        /* use struct http_chunked_decoder */
};

/* Return values of http_parse_request() and http_chunked_decode(). Errors
 * are negative; http_parse_error_status() maps each to the status to send,
 * after which the connection must be closed (framing is unknown). */
enum http_parse_result {
    HTTP_PARSE_COMPLETE = 0,
    HTTP_PARSE_INCOMPLETE = 1,

    HTTP_PARSE_ERR_METHOD = -1,              /* 400 empty/invalid token */
    HTTP_PARSE_ERR_TARGET = -2,              /* 400 */
    HTTP_PARSE_ERR_VERSION = -3,             /* 400 malformed HTTP-version */
    HTTP_PARSE_ERR_VERSION_UNSUPPORTED = -4, /* 505 well-formed, not 1.0/1.1 */
    HTTP_PARSE_ERR_REQUEST_LINE = -5,      /* 400 bad spacing in request-line */
    HTTP_PARSE_ERR_URI_TOO_LONG = -6,      /* 414 request-line limit */
    HTTP_PARSE_ERR_HEADERS_TOO_LARGE = -7, /* 431 header bytes limit */
    HTTP_PARSE_ERR_TOO_MANY_HEADERS = -8,  /* 431 header count limit */
    HTTP_PARSE_ERR_HEADER_NAME = -9,       /* 400 empty/invalid token char */
    HTTP_PARSE_ERR_SPACE_BEFORE_COLON = -10, /* 400 "Name : v" */
    HTTP_PARSE_ERR_HEADER_VALUE = -11,       /* 400 control character */
    HTTP_PARSE_ERR_OBS_FOLD = -12,           /* 400 continuation line */
    HTTP_PARSE_ERR_BARE_CR = -13,            /* 400 CR not followed by LF */
    HTTP_PARSE_ERR_BARE_LF = -14,            /* 400 LF without CR */
    HTTP_PARSE_ERR_NUL = -15,                /* 400 NUL byte anywhere */
    HTTP_PARSE_ERR_CONTENT_LENGTH = -16,     /* 400 not 1*DIGIT */
    HTTP_PARSE_ERR_CONTENT_LENGTH_DUP = -17, /* 400 more than one */
    HTTP_PARSE_ERR_CL_AND_TE = -18, /* 400 Content-Length + Transfer-Encoding */
    HTTP_PARSE_ERR_TE_INVALID = -19,   /* 400 chunked not last, twice, empty */
    HTTP_PARSE_ERR_TE_UNKNOWN = -20,   /* 501 coding we cannot decode */
    HTTP_PARSE_ERR_TE_HTTP10 = -21,    /* 400 Transfer-Encoding in HTTP/1.0 */
    HTTP_PARSE_ERR_HOST_MISSING = -22, /* 400 HTTP/1.1 without Host */
    HTTP_PARSE_ERR_HOST_DUP = -23,     /* 400 more than one Host */
    HTTP_PARSE_ERR_HOST_INVALID = -24, /* 400 bad bytes in Host */
    HTTP_PARSE_ERR_BODY_TOO_LARGE = -25, /* 413 body limit */
    HTTP_PARSE_ERR_CHUNK_SIZE = -26,     /* 400 bad chunk-size line */
    HTTP_PARSE_ERR_CHUNK_DATA = -27,     /* 400 chunk data not ended by CRLF */
    HTTP_PARSE_ERR_TRAILERS_TOO_LARGE = -28,  /* 431 */
    HTTP_PARSE_ERR_TRAILER = -29,             /* 400 bad trailer field */
    HTTP_PARSE_ERR_CHUNK_EXT_TOO_LARGE = -30, /* 400 chunk-ext limit */
};
#define HTTP_PARSE_ERR_LAST HTTP_PARSE_ERR_CHUNK_EXT_TOO_LARGE

/* HTTP status code for a negative parse result (400/413/414/431/501/505). */
int http_parse_error_status(int result);

struct http_limits {
    uint32_t max_request_line; /* bytes incl. CRLF, else 414 */
    uint32_t max_header_bytes; /* all header lines incl. final CRLF, 431 */
    uint32_t max_headers;      /* header field count, else 431 */
    uint64_t max_body;         /* Content-Length or decoded chunked, 413 */
};

#define HTTP_DEFAULT_MAX_REQUEST_LINE 8192
#define HTTP_DEFAULT_MAX_HEADER_BYTES 16384
#define HTTP_DEFAULT_MAX_HEADERS 100
#define HTTP_DEFAULT_MAX_BODY (1024 * 1024)

struct http_header {
    struct http_slice name;
    struct http_slice value; /* leading/trailing whitespace trimmed */
};

/* Bits of http_request.seen: which fields appeared at least once. */
enum http_seen {
    HTTP_SEEN_HOST = 1u << 0,
    HTTP_SEEN_CONNECTION = 1u << 1,
    HTTP_SEEN_KEEP_ALIVE = 1u << 2,
    HTTP_SEEN_ACCEPT_ENCODING = 1u << 3,
    HTTP_SEEN_IF_NONE_MATCH = 1u << 4,
    HTTP_SEEN_IF_MODIFIED_SINCE = 1u << 5,
    HTTP_SEEN_RANGE = 1u << 6,
    HTTP_SEEN_CONTENT_LENGTH = 1u << 7,
    HTTP_SEEN_TRANSFER_ENCODING = 1u << 8,
    HTTP_SEEN_EXPECT = 1u << 9,
    HTTP_SEEN_IF_RANGE = 1u << 10,
    HTTP_SEEN_ORIGIN = 1u << 11,
    HTTP_SEEN_ACR_METHOD = 1u << 12,  /* Access-Control-Request-Method */
    HTTP_SEEN_ACR_HEADERS = 1u << 13, /* Access-Control-Request-Headers */
};

/* Bits of http_request.repeated: list-valued fields sent in more than one
 * line. The slice holds the first line only; a server that needs the rest
 * walks the headers array. Range repeated means "ignore Range". */
struct http_request {
    enum http_method method;
    enum http_version version;
    enum http_target_form target_form;
    struct http_slice method_token; /* as sent, e.g. "GET" or "PROPFIND" */
    struct http_slice target;       /* request-target as sent */
    /* origin-form part of the target (path and query); for absolute-form
     * the part after the authority, empty when the URI has no path (meaning
     * "/"). Feed it to http_path_normalize(). */
    struct http_slice path;
    struct http_slice host; /* from absolute-form, else the Host field */

    struct http_slice keep_alive_field;
    struct http_slice accept_encoding;
    struct http_slice if_none_match;
    struct http_slice if_modified_since;
    struct http_slice if_range;
    struct http_slice range;
    struct http_slice expect;
    struct http_slice transfer_encoding;
    /* CORS: Origin, Access-Control-Request-Method and -Headers (a
     * preflight) */
    struct http_slice origin;
    struct http_slice acr_method;
    struct http_slice acr_headers;
    uint32_t seen;
    uint32_t repeated;

    bool connection_close;      /* "close" token in Connection */
    bool connection_keep_alive; /* "keep-alive" token in Connection */
    bool keep_alive;      /* persist after this response (version + tokens) */
    bool expect_continue; /* Expect: 100-continue */
    bool expect_unknown;  /* Expect with another value (417 if you care) */

    enum http_body_framing body_framing;
    uint64_t content_length; /* when HTTP_BODY_CONTENT_LENGTH */

    uint32_t header_count; /* all fields, stored or not */
    uint32_t head_length;  /* bytes of the whole head, = *consumed */
};

struct http_parser {
    struct http_limits limits;
    /* optional caller-provided array filled with every field in order */
    struct http_header *headers;
    uint32_t headers_capacity;

    /* resumable state; private */
    uint32_t scanned;    /* bytes already examined */
    uint32_t line_start; /* start of the line being collected */
    uint32_t head_start; /* start of request-line (after empty lines) */
    uint32_t headers_start;
    uint8_t state;
    uint8_t te_chunked_seen;
    uint8_t te_other_seen;
    uint8_t leading_empty_lines;
    uint8_t host_field_seen;
    int8_t error;

    struct http_request req;
};

/* limits may be NULL for the defaults above. */
void http_parser_init(struct http_parser *p, const struct http_limits *limits);
/* Store every header field into headers[0..capacity) (extra fields are
 * parsed and counted, but not stored). */
void http_parser_set_header_store(struct http_parser *p,
                                  struct http_header *headers,
                                  uint32_t capacity);
/* Prepare for the next request; keeps limits and the header store. */
void http_parser_reset(struct http_parser *p);

/* Parse the request head in buf[0..len). Returns HTTP_PARSE_COMPLETE (and
 * sets *consumed to the head's length), HTTP_PARSE_INCOMPLETE (call again
 * with more bytes; buf must start at the same request), or an error. After
 * an error, further calls return the same error. */
int http_parse_request(struct http_parser *p,
                       const char *buf,
                       size_t len,
                       size_t *consumed);

/* Limits of the chunked decoder. Chunk extensions carry nothing a server
 * here uses, yet a client may send them without end ("1;aaaa..." never
 * reaching its CR, or a long one on every 1-byte chunk, which max_body
 * alone bounds only at max_body times the extension's length). Bytes from
 * the ';' up to the CR count against both limits below; past either the
 * decoder fails with HTTP_PARSE_ERR_CHUNK_EXT_TOO_LARGE (400). With them,
 * a chunked body is at most 21 bytes on the wire per data byte (1-byte
 * chunks with 16-digit sizes) for max_body data bytes, plus 16 KiB of
 * extensions, plus the trailer limit. */
#define HTTP_CHUNK_EXT_MAX_LINE 4096   /* extension bytes of one chunk line */
#define HTTP_CHUNK_EXT_MAX_TOTAL 16384 /* extension bytes of one whole body */
/* Trailer bytes (every field line and the final CRLF) engines allow; the
 * decoder takes its limit as an argument (HTTP_PARSE_ERR_TRAILERS_TOO_LARGE,
 * 431). */
#define HTTP_DEFAULT_MAX_TRAILER_BYTES 4096

/* Incremental chunked-body decoder. It keeps no pointer into the input, so
 * each call may get any piece of the stream: it consumes bytes and, when
 * chunk data is available, hands back where it is in this piece. */
struct http_chunked_decoder {
    uint64_t chunk_remaining;
    uint64_t body_total;
    uint64_t max_body;
    uint32_t trailer_bytes;
    uint32_t max_trailer_bytes;
    uint32_t ext_line_bytes;  /* extension bytes on the current size line */
    uint32_t ext_total_bytes; /* extension bytes of the whole body */
    uint8_t state;
    uint8_t size_digits;
};

enum http_chunked_result {
    HTTP_CHUNKED_DONE = 0,  /* last chunk and trailers consumed */
    HTTP_CHUNKED_AGAIN = 1, /* all input consumed; feed more */
    HTTP_CHUNKED_DATA = 2,  /* *data_off, *data_len: body bytes */
    /* errors: HTTP_PARSE_ERR_CHUNK_SIZE, _CHUNK_DATA, _CHUNK_EXT_TOO_LARGE,
     * _BODY_TOO_LARGE, _TRAILERS_TOO_LARGE, _TRAILER, _NUL, _BARE_CR,
     * _BARE_LF */
};

/* A request body the server drops (it answered without reading it): a
 * Content-Length body's bytes still to come, or a chunked one through
 * core's decoder, whose limits (HTTP_SERVER_MAX_BODY,
 * HTTP_SERVER_MAX_TRAILERS) bound what a client can make the server read.
 * The engine keeps one per connection (zeroed: nothing to drop) and reads;
 * core says what a piece holds. */
struct http_body_drain {
    uint64_t left; /* Content-Length bytes still to drop */
    bool chunked;  /* a chunked body, through d */
    struct http_chunked_decoder d;
};

/* The drain's answer when all of the piece was body: read more. */
#define HTTP_BODY_DRAIN_MORE (-1)

/* Start dropping the body of req (a plan's drain_body). */
void http_body_drain_start(struct http_body_drain *b,
                           const struct http_request *req);

/* Is a body still to be dropped? */
static inline bool http_body_draining(const struct http_body_drain *b)
{
    return b->left || b->chunked;
}

/* Drop what buf[*start..*len) holds of the body. 0: it is over, *start
 * past it (the rest is the next request); HTTP_BODY_DRAIN_MORE: all of it
 * was body, *start = *len = 0, read into the buffer and call again; or the
 * status (400, 413, 431) to answer a body the decoder refused with before
 * closing. Over or refused, nothing is draining any more. */
int http_body_drain(struct http_body_drain *b,
                    const char *buf,
                    size_t *start,
                    size_t *len);

#endif /* KTCP_CORE_HTTP_PARSER_H */
