/* http_response.c — response heads; see http_response.h. */
#include "http_response.h"
#include "http_date.h"

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

void http_response_status_line(struct http_buf *b, int version, int status)
{
    http_buf_append_str(b, version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
    /* three digits whatever the caller passed, so the line stays valid */
    if (status < 100 || status > 999)
        status = 500;
    http_buf_append_u64(b, (uint64_t) status);
    http_buf_append_char(b, ' ');
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

int http_response_header(struct http_buf *b,
                         const char *name,
                         const char *value)
{
    return http_response_header_len(b, name, value, strlen(value));
}

void http_response_header_u64(struct http_buf *b, const char *name, uint64_t v)
{
    http_buf_append_str(b, name);
    http_buf_append(b, ": ", 2);
    http_buf_append_u64(b, v);
    http_buf_append(b, "\r\n", 2);
}

void http_response_header_date(struct http_buf *b, const char *name, int64_t t)
{
    char date[HTTP_DATE_LEN + 1];

    http_date_format(t, date);
    http_response_header_len(b, name, date, HTTP_DATE_LEN);
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

void http_response_content_range_unsatisfied(struct http_buf *b, uint64_t size)
{
    http_buf_append_str(b, "Content-Range: bytes */");
    http_buf_append_u64(b, size);
    http_buf_append(b, "\r\n", 2);
}

void http_response_end(struct http_buf *b)
{
    http_buf_append(b, "\r\n", 2);
}

int http_response_build(struct http_buf *b, const struct http_response_head *h)
{
    http_response_status_line(b, h->version ? h->version : 11, h->status);
    if (h->date)
        http_response_header(b, "Date", h->date);
    else
        http_response_header_date(b, "Date", h->now_seconds);
    http_response_header(b, "Server", h->server ? h->server : "ktcp");
    if (h->content_type)
        http_response_header(b, "Content-Type", h->content_type);
    if (h->content_length >= 0)
        http_response_header_u64(b, "Content-Length",
                                 (uint64_t) h->content_length);
    if (h->chunked)
        http_response_header(b, "Transfer-Encoding", "chunked");
    if (h->has_last_modified)
        http_response_header_date(b, "Last-Modified", h->last_modified);
    if (h->etag)
        http_response_header(b, "ETag", h->etag);
    if (h->has_max_age) {
        http_buf_append_str(b, "Cache-Control: max-age=");
        http_buf_append_u64(b, h->max_age);
        http_buf_append(b, "\r\n", 2);
        http_response_header_date(b, "Expires", h->expires);
    }
    if (h->accept_ranges)
        http_response_header(b, "Accept-Ranges", "bytes");
    if (h->has_content_range)
        http_response_content_range(b, h->range_first, h->range_last,
                                    h->range_size);
    else if (h->content_range_unsatisfied)
        http_response_content_range_unsatisfied(b, h->range_size);
    if (h->content_encoding)
        http_response_header(b, "Content-Encoding", h->content_encoding);
    if (h->vary_accept_encoding)
        http_response_header(b, "Vary", "Accept-Encoding");
    if (h->location)
        http_response_header(b, "Location", h->location);
    if (h->allow)
        http_response_header(b, "Allow", h->allow);
    http_response_header(b, "Connection",
                         h->keep_alive ? "keep-alive" : "close");
    if (h->keep_alive && h->keep_alive_timeout_seconds) {
        http_buf_append_str(b, "Keep-Alive: timeout=");
        http_buf_append_u64(b, h->keep_alive_timeout_seconds);
        if (h->keep_alive_max) {
            http_buf_append_str(b, ", max=");
            http_buf_append_u64(b, h->keep_alive_max);
        }
        http_buf_append(b, "\r\n", 2);
    }
    http_response_end(b);
    return b->overflow ? -1 : (int) b->len;
}

size_t http_chunk_header(char *out, size_t data_len)
{
    size_t n = http_format_hex(data_len, out);

    out[n++] = '\r';
    out[n++] = '\n';
    return n;
}

void http_buf_chunk_header(struct http_buf *b, size_t data_len)
{
    char tmp[HTTP_CHUNK_HEADER_MAX];

    http_buf_append(b, tmp, http_chunk_header(tmp, data_len));
}

void http_buf_chunk_end(struct http_buf *b)
{
    http_buf_append(b, "\r\n", 2);
}

void http_buf_last_chunk(struct http_buf *b)
{
    http_buf_append(b, HTTP_LAST_CHUNK, sizeof(HTTP_LAST_CHUNK) - 1);
}
