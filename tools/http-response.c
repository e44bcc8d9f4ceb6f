#include "http-response.h"

#include <string.h>
#include <strings.h>

void http_response_parser_init(struct http_response_parser *p)
{
    memset(p, 0, sizeof(*p));
    p->state = HTTP_STATUS_LINE;
}

/* Accumulate one CRLF- (or LF-) terminated line; true once it is complete,
 * with the terminator stripped. */
static bool take_line(struct http_response_parser *p,
                      const char *buf,
                      size_t len,
                      size_t *pos)
{
    const char *start = buf + *pos;
    size_t avail = len - *pos;
    const char *nl = memchr(start, '\n', avail);
    size_t n = nl ? (size_t) (nl - start) : avail;
    size_t room = HTTP_LINE_MAX - 1 - p->line_len;
    memcpy(p->line + p->line_len, start, n < room ? n : room);
    p->line_len += n < room ? n : room;
    p->line_started = true;
    *pos += nl ? n + 1 : n;
    if (!nl)
        return false;
    if (p->line_len && p->line[p->line_len - 1] == '\r')
        p->line_len--;
    p->line[p->line_len] = '\0';
    return true;
}

static void next_line(struct http_response_parser *p)
{
    p->line_len = 0;
    p->line_started = false;
}

static bool parse_status_line(struct http_response_parser *p)
{
    const char *l = p->line;
    if (strncmp(l, "HTTP/1.", 7) || (l[7] != '0' && l[7] != '1') || l[8] != ' ')
        return false;
    p->http_minor = l[7] - '0';
    int status = 0;
    for (int i = 9; i < 12; i++) {
        if (l[i] < '0' || l[i] > '9')
            return false;
        status = status * 10 + (l[i] - '0');
    }
    if (l[12] != '\0' && l[12] != ' ')
        return false;
    p->status = status;
    return true;
}

/* Does the comma-separated list value contain token (case-insensitive)? */
static bool has_token(const char *value, const char *token)
{
    size_t n = strlen(token);
    for (const char *s = value; *s;) {
        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        const char *end = s;
        while (*end && *end != ',')
            end++;
        const char *trim = end;
        while (trim > s && (trim[-1] == ' ' || trim[-1] == '\t'))
            trim--;
        if ((size_t) (trim - s) == n && !strncasecmp(s, token, n))
            return true;
        s = end;
    }
    return false;
}

static bool parse_header_line(struct http_response_parser *p)
{
    char *colon = strchr(p->line, ':');
    if (!colon)
        return false;
    *colon = '\0';
    const char *value = colon + 1;
    while (*value == ' ' || *value == '\t')
        value++;
    if (!strcasecmp(p->line, "content-length")) {
        uint64_t v = 0;
        if (!*value)
            return false;
        for (const char *s = value; *s && *s != ' ' && *s != '\t'; s++) {
            if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
                return false;
            v = v * 10 + (uint64_t) (*s - '0');
        }
        p->has_length = true;
        p->remaining = v;
    } else if (!strcasecmp(p->line, "transfer-encoding")) {
        p->chunked = has_token(value, "chunked");
    } else if (!strcasecmp(p->line, "connection")) {
        if (has_token(value, "close"))
            p->close_after = true;
        if (has_token(value, "keep-alive"))
            p->keep_alive_header = true;
    }
    return true;
}

/* The empty line after the headers: decide how the body is framed. */
static enum http_parse_result end_of_head(struct http_response_parser *p)
{
    if (p->http_minor == 0 && !p->keep_alive_header)
        p->close_after = true;
    if (p->status >= 100 && p->status < 200) {
        /* Interim response (100 Continue): the real one follows. */
        int minor = p->http_minor;
        http_response_parser_init(p);
        p->http_minor = minor;
        return HTTP_PARSE_MORE;
    }
    if (p->status == 204 || p->status == 304)
        return HTTP_PARSE_DONE;
    if (p->chunked) {
        p->state = HTTP_CHUNK_SIZE_LINE;
        return HTTP_PARSE_MORE;
    }
    if (p->has_length) {
        if (!p->remaining)
            return HTTP_PARSE_DONE;
        p->state = HTTP_BODY_LENGTH;
        return HTTP_PARSE_MORE;
    }
    p->close_after = true;
    p->state = HTTP_BODY_UNTIL_CLOSE;
    return HTTP_PARSE_MORE;
}

static bool parse_chunk_size(struct http_response_parser *p)
{
    uint64_t v = 0;
    const char *s = p->line;
    if (!*s)
        return false;
    for (; *s && *s != ';' && *s != ' ' && *s != '\t'; s++) {
        int d;
        if (*s >= '0' && *s <= '9')
            d = *s - '0';
        else if ((*s | 0x20) >= 'a' && (*s | 0x20) <= 'f')
            d = (*s | 0x20) - 'a' + 10;
        else
            return false;
        if (v >> 59)
            return false;
        v = v * 16 + (uint64_t) d;
    }
    p->remaining = v;
    return true;
}

enum http_parse_result http_response_parse(struct http_response_parser *p,
                                           const char *buf,
                                           size_t len,
                                           size_t *consumed)
{
    size_t pos = 0;
    enum http_parse_result r = HTTP_PARSE_MORE;

    while (pos < len && r == HTTP_PARSE_MORE) {
        switch (p->state) {
        case HTTP_STATUS_LINE:
        case HTTP_HEADER_LINE: {
            size_t before = pos;
            bool complete = take_line(p, buf, len, &pos);
            p->header_bytes += pos - before;
            if (p->header_bytes > HTTP_HEADER_BYTES_MAX) {
                r = HTTP_PARSE_ERROR;
                break;
            }
            if (!complete)
                break;
            if (p->state == HTTP_STATUS_LINE) {
                if (!parse_status_line(p))
                    r = HTTP_PARSE_ERROR;
                else
                    p->state = HTTP_HEADER_LINE;
            } else if (p->line_len == 0) {
                r = end_of_head(p);
            } else if (!parse_header_line(p)) {
                r = HTTP_PARSE_ERROR;
            }
            next_line(p);
            break;
        }
        case HTTP_BODY_LENGTH:
        case HTTP_CHUNK_DATA: {
            size_t n = len - pos;
            if (n > p->remaining)
                n = (size_t) p->remaining;
            pos += n;
            p->remaining -= n;
            if (!p->remaining) {
                if (p->state == HTTP_BODY_LENGTH)
                    r = HTTP_PARSE_DONE;
                else
                    p->state = HTTP_CHUNK_DATA_END;
            }
            break;
        }
        case HTTP_BODY_UNTIL_CLOSE:
            pos = len;
            break;
        case HTTP_CHUNK_SIZE_LINE:
            if (!take_line(p, buf, len, &pos))
                break;
            if (!parse_chunk_size(p))
                r = HTTP_PARSE_ERROR;
            else if (p->remaining)
                p->state = HTTP_CHUNK_DATA;
            else
                p->state = HTTP_TRAILER_LINE;
            next_line(p);
            break;
        case HTTP_CHUNK_DATA_END:
            if (!take_line(p, buf, len, &pos))
                break;
            if (p->line_len)
                r = HTTP_PARSE_ERROR;
            p->state = HTTP_CHUNK_SIZE_LINE;
            next_line(p);
            break;
        case HTTP_TRAILER_LINE:
            if (!take_line(p, buf, len, &pos))
                break;
            if (!p->line_len)
                r = HTTP_PARSE_DONE;
            next_line(p);
            break;
        }
    }
    *consumed = pos;
    return r;
}

enum http_parse_result http_response_parse_eof(struct http_response_parser *p)
{
    if (p->state == HTTP_BODY_UNTIL_CLOSE)
        return HTTP_PARSE_DONE;
    if (p->state == HTTP_STATUS_LINE && !p->line_started)
        return HTTP_PARSE_MORE;
    return HTTP_PARSE_ERROR;
}
