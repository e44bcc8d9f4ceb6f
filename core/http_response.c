/* http_response.c — response heads; see http_response.h. */
#include "http_response.h"
#include "http_date.h"
#include "http_internal.h"

const char *http_status_reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 408:
        return "Request Timeout";
    case 411:
        return "Length Required";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 416:
        return "Range Not Satisfiable";
    case 417:
        return "Expectation Failed";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

#define STATUS_LINE(b, lit) http_buf_append((b), (lit), sizeof(lit) - 1)

void http_response_status_line(struct http_buf *b, int version, int status)
{
    char line[9 + 4];

    /* the common lines whole (the reasons are http_status_reason's) */
    if (version != 10) {
        switch (status) {
        case 200:
            STATUS_LINE(b, "HTTP/1.1 200 OK\r\n");
            return;
        case 206:
            STATUS_LINE(b, "HTTP/1.1 206 Partial Content\r\n");
            return;
        case 304:
            STATUS_LINE(b, "HTTP/1.1 304 Not Modified\r\n");
            return;
        case 404:
            STATUS_LINE(b, "HTTP/1.1 404 Not Found\r\n");
            return;
        default:
            break;
        }
    }

    memcpy(line, version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ", 9);
    /* three digits whatever the caller passed, so the line stays valid */
    if (status < 100 || status > 999)
        status = 500;
    line[9] = (char) ('0' + status / 100);
    line[10] = (char) ('0' + status / 10 % 10);
    line[11] = (char) ('0' + status % 10);
    line[12] = ' ';
    http_buf_append(b, line, sizeof(line));
    http_buf_append_str(b, http_status_reason(status));
    http_buf_append(b, "\r\n", 2);
}

int http_response_header_len(struct http_buf *b,
                             const char *name,
                             const char *value,
                             size_t value_len)
{
    size_t i;

    for (i = 0; i < value_len; i++) {
        char c = value[i];
        if (c == '\r' || c == '\n' || c == '\0') {
            b->overflow = true;
            return -1;
        }
    }
    http_buf_append_str(b, name);
    http_buf_append(b, ": ", 2);
    http_buf_append(b, value, value_len);
    http_buf_append(b, "\r\n", 2);
    return b->overflow ? -1 : 0;
}

void http_response_content_range(struct http_buf *b,
                                 uint64_t first,
                                 uint64_t last,
                                 uint64_t size)
{
    http_buf_append_str(b, "Content-Range: bytes ");
    http_buf_append_u64(b, first);
    http_buf_append_char(b, '-');
    http_buf_append_u64(b, last);
    http_buf_append_char(b, '/');
    http_buf_append_u64(b, size);
    http_buf_append(b, "\r\n", 2);
}

static void http_response_content_range_unsatisfied(struct http_buf *b,
                                                    uint64_t size)
{
    http_buf_append_str(b, "Content-Range: bytes */");
    http_buf_append_u64(b, size);
    http_buf_append(b, "\r\n", 2);
}

/* The head builder runs once per response, so it appends literals with
 * their lengths known at compile time and checks for CR, LF and NUL only
 * the values it is handed as strings (Date, Server, MIME type, ETag,
 * Location...); what it formats itself (numbers, dates) and its fixed
 * words need no check. */
#define APPEND_LIT(b, lit) http_buf_append((b), (lit), sizeof(lit) - 1)

static void append_checked(struct http_buf *b,
                           const char *name,
                           size_t name_len,
                           const char *v)
{
    const char *p = v;

    /* one pass finds the end and any CR or LF (tabs are allowed) */
    for (;;) {
        while ((unsigned char) *p >= 0x20)
            p++;
        if (*p == '\0')
            break;
        if (*p == '\r' || *p == '\n') {
            b->overflow = true;
            return;
        }
        p++;
    }
    http_buf_append(b, name, name_len);
    http_buf_append(b, v, (size_t) (p - v));
    APPEND_LIT(b, "\r\n");
}
#define APPEND_CHECKED(b, name, v) \
    append_checked((b), name, sizeof(name) - 1, (v))

static void append_date(struct http_buf *b, int64_t t)
{
    char date[HTTP_DATE_LEN + 1];

    http_buf_append(b, date, http_date_format(t, date));
}

int http_response_build(struct http_buf *b, const struct http_response_head *h)
{
    http_response_status_line(b, h->version ? h->version : 11, h->status);
    if (h->date && h->date_len) {
        APPEND_LIT(b, "Date: ");
        http_buf_append(b, h->date, h->date_len);
        APPEND_LIT(b, "\r\n");
    } else if (h->date) {
        APPEND_CHECKED(b, "Date: ", h->date);
    } else {
        APPEND_LIT(b, "Date: ");
        append_date(b, h->now_seconds);
        APPEND_LIT(b, "\r\n");
    }
    if (h->server)
        APPEND_CHECKED(b, "Server: ", h->server);
    else
        APPEND_LIT(b, "Server: ktcp\r\n");
    if (h->content_type && h->content_type_safe) {
        APPEND_LIT(b, "Content-Type: ");
        http_buf_append(b, h->content_type, strlen(h->content_type));
        APPEND_LIT(b, "\r\n");
    } else if (h->content_type) {
        APPEND_CHECKED(b, "Content-Type: ", h->content_type);
    }
    if (h->content_length >= 0) {
        APPEND_LIT(b, "Content-Length: ");
        http_buf_append_u64(b, (uint64_t) h->content_length);
        APPEND_LIT(b, "\r\n");
    }
    if (h->chunked)
        APPEND_LIT(b, "Transfer-Encoding: chunked\r\n");
    if (h->has_last_modified) {
        APPEND_LIT(b, "Last-Modified: ");
        if (h->last_modified_text)
            http_buf_append(b, h->last_modified_text, HTTP_DATE_LEN);
        else
            append_date(b, h->last_modified);
        APPEND_LIT(b, "\r\n");
    }
    if (h->etag && h->etag_len) {
        APPEND_LIT(b, "ETag: ");
        http_buf_append(b, h->etag, h->etag_len);
        APPEND_LIT(b, "\r\n");
    } else if (h->etag) {
        APPEND_CHECKED(b, "ETag: ", h->etag);
    }
    if (h->has_max_age) {
        APPEND_LIT(b, "Cache-Control: max-age=");
        http_buf_append_u64(b, h->max_age);
        APPEND_LIT(b, "\r\nExpires: ");
        append_date(b, h->expires);
        APPEND_LIT(b, "\r\n");
    }
    if (h->accept_ranges)
        APPEND_LIT(b, "Accept-Ranges: bytes\r\n");
    if (h->has_content_range)
        http_response_content_range(b, h->range_first, h->range_last,
                                    h->range_size);
    else if (h->content_range_unsatisfied)
        http_response_content_range_unsatisfied(b, h->range_size);
    if (h->content_encoding)
        APPEND_CHECKED(b, "Content-Encoding: ", h->content_encoding);
    if (h->vary_accept_encoding)
        APPEND_LIT(b, "Vary: Accept-Encoding\r\n");
    if (h->location)
        APPEND_CHECKED(b, "Location: ", h->location);
    if (h->allow)
        APPEND_CHECKED(b, "Allow: ", h->allow);
    if (h->retry_after) {
        APPEND_LIT(b, "Retry-After: ");
        http_buf_append_u64(b, h->retry_after);
        APPEND_LIT(b, "\r\n");
    }
    if (h->keep_alive)
        APPEND_LIT(b, "Connection: keep-alive\r\n");
    else
        APPEND_LIT(b, "Connection: close\r\n");
    if (h->keep_alive && h->keep_alive_timeout_seconds) {
        APPEND_LIT(b, "Keep-Alive: timeout=");
        http_buf_append_u64(b, h->keep_alive_timeout_seconds);
        if (h->keep_alive_max) {
            APPEND_LIT(b, ", max=");
            http_buf_append_u64(b, h->keep_alive_max);
        }
        APPEND_LIT(b, "\r\n");
    }
    if (h->add)
        http_headers_append(b, h->add, h->add_mask);
    if (h->cors_preflight) {
        APPEND_LIT(b, "Access-Control-Allow-Methods: GET, HEAD\r\n");
        if (h->cors_allow_headers_len) {
            APPEND_LIT(b, "Access-Control-Allow-Headers: ");
            http_buf_append(b, h->cors_allow_headers,
                            h->cors_allow_headers_len);
            APPEND_LIT(b, "\r\n");
        }
        APPEND_LIT(b, "Access-Control-Max-Age: ");
        http_buf_append_u64(b, HTTP_CORS_MAX_AGE);
        APPEND_LIT(b, "\r\n");
    }
    APPEND_LIT(b, "\r\n");
    return b->overflow ? -1 : (int) b->len;
}

size_t http_chunk_header(char *out, size_t data_len)
{
    size_t n = http_format_hex(data_len, out);

    out[n++] = '\r';
    out[n++] = '\n';
    return n;
}
