/* http_parser.c — see http_parser.h for the contract.
 *
 * Over 500 lines on purpose: one parser of one head. The request line,
 * the fields and what each field means to the request (Host, Connection,
 * Content-Length, Transfer-Encoding, ...) share the parser's state, its
 * limits and its error paths; split, they would need an internal API with
 * no caller outside this file.
 *
 * The head is processed a line at a time: memchr() finds the next LF among
 * the bytes not yet scanned, and only a complete line is interpreted, once.
 * An incomplete line costs nothing more than the memchr() over new bytes,
 * which keeps byte-at-a-time arrival linear.
 */
#include "http_parser.h"
#include "http_internal.h"

enum parser_state {
    ST_REQUEST_LINE = 0,
    ST_HEADERS,
    ST_DONE,
    ST_ERROR,
};

/* RFC 9112 §2.2 asks servers to skip at least one empty line before the
 * request-line (clients sometimes add CRLF after a body); more than a few
 * is not a client being sloppy. */
#define MAX_LEADING_EMPTY_LINES 4
/* Offsets are 32-bit; keep every limit far from wrapping them. */
#define MAX_LIMIT (1u << 30)
#define MAX_BUFFER (3u * MAX_LIMIT)

void http_parser_init(struct http_parser *p, const struct http_limits *limits)
{
    memset(p, 0, sizeof(*p));
    if (limits) {
        p->limits = *limits;
    } else {
        p->limits.max_request_line = HTTP_DEFAULT_MAX_REQUEST_LINE;
        p->limits.max_header_bytes = HTTP_DEFAULT_MAX_HEADER_BYTES;
        p->limits.max_headers = HTTP_DEFAULT_MAX_HEADERS;
        p->limits.max_body = HTTP_DEFAULT_MAX_BODY;
    }
    if (p->limits.max_request_line > MAX_LIMIT)
        p->limits.max_request_line = MAX_LIMIT;
    if (p->limits.max_header_bytes > MAX_LIMIT)
        p->limits.max_header_bytes = MAX_LIMIT;
}

void http_parser_set_header_store(struct http_parser *p,
                                  struct http_header *headers,
                                  uint32_t capacity)
{
    p->headers = headers;
    p->headers_capacity = headers ? capacity : 0;
}

void http_parser_reset(struct http_parser *p)
{
    struct http_limits limits = p->limits;
    struct http_header *headers = p->headers;
    uint32_t capacity = p->headers_capacity;

    memset(p, 0, sizeof(*p));
    p->limits = limits;
    p->headers = headers;
    p->headers_capacity = capacity;
}

static int fail(struct http_parser *p, int err)
{
    p->state = ST_ERROR;
    p->error = (int8_t) err;
    return err;
}

static struct http_slice slice(size_t off, size_t len)
{
    struct http_slice s = {(uint32_t) off, (uint32_t) len};
    return s;
}

/* Word-at-a-time checks (SWAR). A head is scanned 8 bytes per step; a
 * word in which some byte might break a rule is looked at again a byte at a
 * time, with the same tables as ever, so the words only make the common
 * case fast and never decide a rule alone. Every test below answers
 * "does any byte of the word ..." and does not depend on byte order (the
 * one use of which byte it was is guarded); loads go through memcpy, so
 * alignment does not matter either. */
#define SWAR_ONES 0x0101010101010101ULL
#define SWAR_HIGHS 0x8080808080808080ULL

static inline uint64_t load64(const char *p)
{
    uint64_t w;

    memcpy(&w, p, sizeof(w));
    return w;
}

static inline uint32_t load32(const char *p)
{
    uint32_t w;

    memcpy(&w, p, sizeof(w));
    return w;
}

/* Nonzero iff some byte of x is below n (0 < n <= 0x80). */
static inline uint64_t swar_any_below(uint64_t x, uint64_t n)
{
    return (x - SWAR_ONES * n) & ~x & SWAR_HIGHS;
}

/* Nonzero iff some byte of x is above n (n < 0x80). */
static inline uint64_t swar_any_above(uint64_t x, uint64_t n)
{
    return ((x + SWAR_ONES * (0x7f - n)) | x) & SWAR_HIGHS;
}

/* tchar of RFC 9110 §5.6.2 as a table: the same set as http_is_tchar(),
 * one load per byte on the hot path. */
static const uint8_t tchar_byte[256] = {
    ['!'] = 1,         ['#'] = 1,         ['$'] = 1, ['%'] = 1,
    ['&'] = 1,         ['\''] = 1,        ['*'] = 1, ['+'] = 1,
    ['-'] = 1,         ['.'] = 1,         ['^'] = 1, ['_'] = 1,
    ['`'] = 1,         ['|'] = 1,         ['~'] = 1, ['0' ... '9'] = 1,
    ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1,
};

static enum http_method method_from_token(const char *m, size_t len)
{
    static const struct {
        const char *name;
        uint8_t len;
        uint8_t method;
    } methods[] = {
        {"GET", 3, HTTP_METHOD_GET},       {"HEAD", 4, HTTP_METHOD_HEAD},
        {"POST", 4, HTTP_METHOD_POST},     {"PUT", 3, HTTP_METHOD_PUT},
        {"DELETE", 6, HTTP_METHOD_DELETE}, {"OPTIONS", 7, HTTP_METHOD_OPTIONS},
        {"TRACE", 5, HTTP_METHOD_TRACE},   {"CONNECT", 7, HTTP_METHOD_CONNECT},
        {"PATCH", 5, HTTP_METHOD_PATCH},
    };
    size_t i;

    /* Methods are case-sensitive (RFC 9110 §9.1): "get" is another one. */
    if (len == 3 && m[0] == 'G' && m[1] == 'E' && m[2] == 'T')
        return HTTP_METHOD_GET; /* nearly every request */
    for (i = 0; i < HTTP_ARRAY_SIZE(methods); i++) {
        if (len == methods[i].len && memcmp(m, methods[i].name, len) == 0)
            return (enum http_method) methods[i].method;
    }
    return HTTP_METHOD_OTHER;
}

bool http_head_buffered(const char *buf, size_t len)
{
    size_t i = 0;

    while (i + 1 < len && buf[i] == '\r' && buf[i + 1] == '\n')
        i += 2; /* empty lines before a request (RFC 9112 2.2) */
    while (i < len) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t at;

        if (!nl)
            return false;
        at = (size_t) (nl - buf);
        if (at >= 1 && buf[at - 1] == '\r' && at + 2 < len &&
            buf[at + 1] == '\r' && buf[at + 2] == '\n')
            return true;
        i = at + 1;
    }
    return false;
}

const char *http_method_name(enum http_method m)
{
    switch (m) {
    case HTTP_METHOD_GET:
        return "GET";
    case HTTP_METHOD_HEAD:
        return "HEAD";
    case HTTP_METHOD_POST:
        return "POST";
    case HTTP_METHOD_PUT:
        return "PUT";
    case HTTP_METHOD_DELETE:
        return "DELETE";
    case HTTP_METHOD_OPTIONS:
        return "OPTIONS";
    case HTTP_METHOD_TRACE:
        return "TRACE";
    case HTTP_METHOD_CONNECT:
        return "CONNECT";
    case HTTP_METHOD_PATCH:
        return "PATCH";
    default:
        return "OTHER";
    }
}

/* NUL and lone CR are refused wherever they appear in the head: both are
 * read differently by different parsers, which is what smuggling needs. */
static int check_line_bytes(const char *line, size_t len)
{
    if (memchr(line, '\0', len))
        return HTTP_PARSE_ERR_NUL;
    if (memchr(line, '\r', len))
        return HTTP_PARSE_ERR_BARE_CR;
    return 0;
}

/* Host bytes: letters, digits, unreserved, sub-delims, ':' for the port,
 * '[' ']' for IPv6, '%' for pct-encoded reg-names and zone ids. */
static const uint8_t host_byte[256] = {
    [0x21] = 1,          /* ! */
    [0x24 ... 0x2e] = 1, /* $ % & ' ( ) * + , - . */
    [0x30 ... 0x3b] = 1, /* 0-9 : ; */
    [0x3d] = 1,          /* = */
    [0x41 ... 0x5b] = 1, /* A-Z [ */
    [0x5d] = 1,          /* ] */
    [0x5f] = 1,          /* _ */
    [0x61 ... 0x7a] = 1, /* a-z */
    [0x7e] = 1,          /* ~ */
};

/* Whether h[0..8) is all host bytes, looked up one by one. */
static inline unsigned host_bytes8(const char *h)
{
    const unsigned char *u = (const unsigned char *) h;

    return host_byte[u[0]] & host_byte[u[1]] & host_byte[u[2]] &
           host_byte[u[3]] & host_byte[u[4]] & host_byte[u[5]] &
           host_byte[u[6]] & host_byte[u[7]];
}

static bool valid_host(const char *h, size_t len)
{
    unsigned ok = 1;
    size_t i;

    if (len < 8) {
        for (i = 0; i < len; i++)
            ok &= host_byte[(unsigned char) h[i]];
        return ok;
    }
    /* blocks of 8, the last one overlapping the one before; no early
     * exit: a valid host is the case worth being fast for */
    for (i = 0; i + 8 < len; i += 8)
        ok &= host_bytes8(h + i);
    return ok & host_bytes8(h + len - 8);
}

/* Control bytes a field value may not hold: all but HTAB, and DEL. */
static const uint8_t value_ctl[256] = {
    [0x00 ... 0x08] = 1,
    [0x0a ... 0x1f] = 1,
    [0x7f] = 1,
};

static bool value_bytes_plain(const char *h, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++) {
        if (value_ctl[(unsigned char) h[i]])
            return false;
    }
    return true;
}

static inline bool value_word_plain(uint64_t x)
{
    /* no byte below SP (HTAB included, so a word holding one is looked at
     * again byte by byte) and none equal to DEL */
    return !(swar_any_below(x, 0x20) |
             swar_any_below(x ^ (SWAR_ONES * 0x7f), 1));
}

/* Whether no byte of h[0..len) is a control byte other than HTAB, or DEL;
 * bytes from 0x80 up are obs-text and allowed. */
static bool value_bytes_ok(const char *h, size_t len)
{
    size_t i;

    if (len < 8)
        return value_bytes_plain(h, len);
    for (i = 0; i + 8 < len; i += 8) {
        if (!value_word_plain(load64(h + i)) && !value_bytes_plain(h + i, 8))
            return false;
    }
    i = len - 8;
    return value_word_plain(load64(h + i)) || value_bytes_plain(h + i, 8);
}

static int parse_target(struct http_parser *p,
                        const char *buf,
                        size_t off,
                        size_t len)
{
    struct http_request *r = &p->req;
    const char *t = buf + off;
    size_t i, scheme_len, auth_start, auth_end;

    r->target = slice(off, len);
    if (t[0] == '/') {
        r->target_form = HTTP_TARGET_ORIGIN;
        r->path = r->target;
        return 0;
    }
    if (len == 1 && t[0] == '*') {
        if (r->method != HTTP_METHOD_OPTIONS)
            return HTTP_PARSE_ERR_TARGET;
        r->target_form = HTTP_TARGET_ASTERISK;
        return 0;
    }
    if (r->method == HTTP_METHOD_CONNECT) {
        if (memchr(t, '/', len) || memchr(t, '@', len) || !valid_host(t, len))
            return HTTP_PARSE_ERR_TARGET;
        r->target_form = HTTP_TARGET_AUTHORITY;
        r->host = r->target;
        r->seen |= HTTP_SEEN_HOST;
        return 0;
    }

    /* absolute-form: only the schemes an HTTP server can be the origin of */
    if (len > 7 && http_ascii_equal_nocase(t, 7, "http://", 7))
        scheme_len = 7;
    else if (len > 8 && http_ascii_equal_nocase(t, 8, "https://", 8))
        scheme_len = 8;
    else
        return HTTP_PARSE_ERR_TARGET;
    auth_start = scheme_len;
    for (i = auth_start; i < len; i++) {
        if (t[i] == '/' || t[i] == '?' || t[i] == '#')
            break;
    }
    auth_end = i;
    /* userinfo ("user@host") is deprecated and a phishing vector; an empty
     * authority has no host to serve */
    if (auth_end == auth_start ||
        memchr(t + auth_start, '@', auth_end - auth_start) ||
        !valid_host(t + auth_start, auth_end - auth_start))
        return HTTP_PARSE_ERR_TARGET;
    if (auth_end < len && t[auth_end] == '#')
        return HTTP_PARSE_ERR_TARGET;
    r->target_form = HTTP_TARGET_ABSOLUTE;
    r->host = slice(off + auth_start, auth_end - auth_start);
    r->seen |= HTTP_SEEN_HOST;
    r->path = slice(off + auth_end, len - auth_end);
    return 0;
}

static int request_line(struct http_parser *p,
                        const char *buf,
                        size_t start,
                        size_t end)
{
    struct http_request *r = &p->req;
    size_t i = start, m_end, t_start, t_end;
    const char *v;

    if (end - start >= 4 && load32(buf + start) == load32("GET ")) {
        i = start + 3; /* nearly every request */
        r->method = HTTP_METHOD_GET;
    } else {
        while (i < end && tchar_byte[(unsigned char) buf[i]])
            i++;
        r->method = HTTP_METHOD_OTHER;
    }
    m_end = i;
    if (m_end == start)
        return (i < end && buf[i] == ' ') ? HTTP_PARSE_ERR_REQUEST_LINE
                                          : HTTP_PARSE_ERR_METHOD;
    if (i >= end)
        return HTTP_PARSE_ERR_REQUEST_LINE;
    if (buf[i] != ' ')
        return (buf[i] == '\t') ? HTTP_PARSE_ERR_REQUEST_LINE
                                : HTTP_PARSE_ERR_METHOD;
    r->method_token = slice(start, m_end - start);
    if (r->method != HTTP_METHOD_GET)
        r->method = method_from_token(buf + start, m_end - start);

    t_start = ++i;
    /* whole words of visible ASCII first; the word with the SP after the
     * target, or with anything else, goes on byte by byte */
    while (i + 8 <= end) {
        uint64_t x = load64(buf + i);
        uint64_t odd = swar_any_below(x, 0x21) | swar_any_above(x, 0x7e);

        if (odd) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && \
    __SIZEOF_LONG__ == 8
            /* the lowest flag marks the first such byte: a borrow or a
             * carry only runs towards higher bytes */
            i += (size_t) __builtin_ctzl((unsigned long) odd) / 8;
#endif
            break;
        }
        i += 8;
    }
    while (i < end && buf[i] != ' ') {
        unsigned char c = (unsigned char) buf[i];
        /* a target is visible ASCII only; raw bytes >= 0x80 and controls
         * must be percent-encoded by the client */
        if (c <= 0x20 || c >= 0x7f)
            return (c == '\t') ? HTTP_PARSE_ERR_REQUEST_LINE
                               : HTTP_PARSE_ERR_TARGET;
        i++;
    }
    t_end = i;
    if (t_end == t_start || i >= end)
        return HTTP_PARSE_ERR_REQUEST_LINE;

    i++; /* the single SP before the version */
    v = buf + i;
    if (end - i == 8 && load64(v) == load64("HTTP/1.1")) {
        r->version = HTTP_VERSION_1_1;
        return parse_target(p, buf, t_start, t_end - t_start);
    }
    if (end - i != 8 || memcmp(v, "HTTP/", 5) != 0 ||
        !http_is_digit((unsigned char) v[5]) || v[6] != '.' ||
        !http_is_digit((unsigned char) v[7]))
        return HTTP_PARSE_ERR_VERSION;
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return HTTP_PARSE_ERR_VERSION_UNSUPPORTED;
    r->version = (v[7] == '1') ? HTTP_VERSION_1_1 : HTTP_VERSION_1_0;

    return parse_target(p, buf, t_start, t_end - t_start);
}

/* A line that parses holds no NUL and no CR (every byte of it is matched
 * by a class that excludes both), so they are looked for only in a line
 * that fails, where they are the reason reported. */
static int parse_request_line(struct http_parser *p,
                              const char *buf,
                              size_t start,
                              size_t end)
{
    int err = request_line(p, buf, start, end);

    if (err) {
        int bytes = check_line_bytes(buf + start, end - start);

        if (bytes)
            return bytes;
    }
    return err;
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* Walk a comma-separated list: returns the next non-empty element
 * (OWS-trimmed) starting at *pos, or false when the list is exhausted. */
static bool next_list_element(const char *v,
                              size_t len,
                              size_t *pos,
                              size_t *el_off,
                              size_t *el_len)
{
    size_t i = *pos, s, e;

    while (i < len) {
        while (i < len && (is_ows(v[i]) || v[i] == ','))
            i++;
        if (i >= len)
            break;
        s = i;
        while (i < len && v[i] != ',')
            i++;
        e = i;
        while (e > s && is_ows(v[e - 1]))
            e--;
        *pos = i;
        *el_off = s;
        *el_len = e - s;
        return true;
    }
    *pos = len;
    return false;
}

static void parse_connection(struct http_request *r, const char *v, size_t len)
{
    size_t pos = 0, off, n;

    while (next_list_element(v, len, &pos, &off, &n)) {
        if (http_ascii_equal_nocase(v + off, n, "close", 5))
            r->connection_close = true;
        else if (http_ascii_equal_nocase(v + off, n, "keep-alive", 10))
            r->connection_keep_alive = true;
    }
}

static int parse_transfer_encoding(struct http_parser *p,
                                   const char *v,
                                   size_t len)
{
    size_t pos = 0, off, n, i;
    bool any = false;

    while (next_list_element(v, len, &pos, &off, &n)) {
        any = true;
        for (i = 0; i < n; i++) {
            /* parameters (";q=") or odd bytes: not a coding we can trust */
            if (!http_is_tchar((unsigned char) v[off + i]))
                return HTTP_PARSE_ERR_TE_INVALID;
        }
        /* Nothing may follow chunked: the body length would be unknown. */
        if (p->te_chunked_seen)
            return HTTP_PARSE_ERR_TE_INVALID;
        if (http_ascii_equal_nocase(v + off, n, "chunked", 7))
            p->te_chunked_seen = 1;
        else
            p->te_other_seen = 1;
    }
    return any ? 0 : HTTP_PARSE_ERR_TE_INVALID;
}

static int parse_content_length(struct http_request *r,
                                const char *v,
                                size_t len)
{
    uint64_t n = 0;
    size_t i;

    /* 1*DIGIT only: no sign, no list ("5, 5"), no spaces inside. */
    if (len == 0)
        return HTTP_PARSE_ERR_CONTENT_LENGTH;
    for (i = 0; i < len; i++) {
        unsigned d = (unsigned char) v[i] - '0';
        if (d > 9)
            return HTTP_PARSE_ERR_CONTENT_LENGTH;
        /* saturate: a huge but well-formed length is a 413, not a 400 */
        if (n > (HTTP_U64_MAX - d) / 10)
            n = HTTP_U64_MAX;
        else
            n = n * 10 + d;
    }
    r->content_length = n;
    return 0;
}

static void store_first(struct http_request *r,
                        struct http_slice *field,
                        uint32_t bit,
                        struct http_slice value)
{
    if (r->seen & bit) {
        r->repeated |= bit;
        return;
    }
    r->seen |= bit;
    *field = value;
}

/* Fields the parser acts on, and a few common ones it does not, which are
 * recognised only to skip the byte-at-a-time name scan. */
enum field_id {
    F_OTHER = 0,
    F_HOST,
    F_RANGE,
    F_EXPECT,
    F_IF_RANGE,
    F_CONNECTION,
    F_KEEP_ALIVE,
    F_IF_NONE_MATCH,
    F_CONTENT_LENGTH,
    F_ACCEPT_ENCODING,
    F_IF_MODIFIED_SINCE,
    F_TRANSFER_ENCODING,
    F_ORIGIN,
    F_ACR_METHOD,
    F_ACR_HEADERS,
    F_PASSIVE, /* known, nothing to do: Accept, User-Agent, ... */
};

/* Bits that turn the ASCII letters of a lowercase literal into both
 * cases: 0x20 where the literal has a letter (0x40 set), 0 at '-' and
 * ':', so those must match exactly. */
#define FOLD64(l) (((l) >> 1) & 0x2020202020202020ULL)
#define FOLD32(l) (((l) >> 1) & 0x20202020u)

/* Whether s[0..n) is lit (n = strlen(lit), 4 <= n <= 24), letters in any
 * case, everything else exactly, for any bytes in s. lit holds only
 * lowercase letters, digits, '-' and ':'. Only s[0..n) is read. */
static inline bool word_match(const char *s, const char *lit, size_t n)
{
    if (n <= 8) {
        uint32_t a = load32(lit), b = load32(lit + n - 4);

        return (((load32(s) | FOLD32(a)) ^ a) |
                ((load32(s + n - 4) | FOLD32(b)) ^ b)) == 0;
    } else {
        uint64_t a = load64(lit), b = load64(lit + n - 8);
        uint64_t d = ((load64(s) | FOLD64(a)) ^ a) |
                     ((load64(s + n - 8) | FOLD64(b)) ^ b);

        if (n > 16) {
            uint64_t c = load64(lit + 8);

            d |= (load64(s + 8) | FOLD64(c)) ^ c;
        }
        return d == 0;
    }
}

/* The name of a field line at s, with its colon, against the names above:
 * the field's id and *name_len, or F_OTHER. avail is the line's length
 * (without CRLF). A match means every name byte is a tchar and the colon
 * follows at once, which is what the byte-at-a-time scan would have found.
 */
#define FIELD(lit, id)                                                         \
    do {                                                                       \
        if (avail >= sizeof(lit) - 1 && word_match(s, lit, sizeof(lit) - 1)) { \
            *name_len = sizeof(lit) - 2;                                       \
            return id;                                                         \
        }                                                                      \
    } while (0)

static enum field_id known_field(const char *s, size_t avail, size_t *name_len)
{
    if (avail < 4)
        return F_OTHER;
    switch (s[0] | 0x20) {
    case 'a':
        FIELD("accept:", F_PASSIVE);
        FIELD("accept-encoding:", F_ACCEPT_ENCODING);
        FIELD("accept-language:", F_PASSIVE);
        /* longer than word_match takes: its common prefix, then the rest */
        if (avail >= 30 && word_match(s, "access-control-request-", 23)) {
            if (word_match(s + 23, "method:", 7)) {
                *name_len = 29;
                return F_ACR_METHOD;
            }
            if (avail >= 31 && word_match(s + 23, "headers:", 8)) {
                *name_len = 30;
                return F_ACR_HEADERS;
            }
        }
        break;
    case 'c':
        FIELD("connection:", F_CONNECTION);
        FIELD("content-length:", F_CONTENT_LENGTH);
        FIELD("cache-control:", F_PASSIVE);
        FIELD("cookie:", F_PASSIVE);
        break;
    case 'e':
        FIELD("expect:", F_EXPECT);
        break;
    case 'h':
        FIELD("host:", F_HOST);
        break;
    case 'i':
        FIELD("if-modified-since:", F_IF_MODIFIED_SINCE);
        FIELD("if-none-match:", F_IF_NONE_MATCH);
        FIELD("if-range:", F_IF_RANGE);
        break;
    case 'k':
        FIELD("keep-alive:", F_KEEP_ALIVE);
        break;
    case 'o':
        FIELD("origin:", F_ORIGIN);
        break;
    case 'r':
        FIELD("range:", F_RANGE);
        FIELD("referer:", F_PASSIVE);
        break;
    case 't':
        FIELD("transfer-encoding:", F_TRANSFER_ENCODING);
        break;
    case 'u':
        FIELD("user-agent:", F_PASSIVE);
        break;
    default:
        break;
    }
    return F_OTHER;
}
#undef FIELD

static int act_on_header(struct http_parser *p,
                         const char *buf,
                         enum field_id id,
                         size_t val_off,
                         size_t val_len,
                         bool host_ok)
{
    struct http_request *r = &p->req;
    struct http_slice value = slice(val_off, val_len);
    const char *v = buf + val_off;

    switch (id) {
    case F_HOST:
        if (p->host_field_seen)
            return HTTP_PARSE_ERR_HOST_DUP;
        p->host_field_seen = 1;
        if (!host_ok)
            return HTTP_PARSE_ERR_HOST_INVALID;
        /* an absolute-form target's authority wins (RFC 9112 §3.2.2) */
        if (!(r->seen & HTTP_SEEN_HOST))
            r->host = value;
        r->seen |= HTTP_SEEN_HOST;
        break;
    case F_RANGE:
        store_first(r, &r->range, HTTP_SEEN_RANGE, value);
        break;
    case F_EXPECT:
        store_first(r, &r->expect, HTTP_SEEN_EXPECT, value);
        if (http_ascii_equal_nocase(v, val_len, "100-continue", 12))
            r->expect_continue = true;
        else
            r->expect_unknown = true;
        break;
    case F_IF_RANGE:
        store_first(r, &r->if_range, HTTP_SEEN_IF_RANGE, value);
        break;
    case F_CONNECTION:
        r->seen |= HTTP_SEEN_CONNECTION;
        /* the one-token values nearly every client sends, else the list */
        if (val_len == 10 && word_match(v, "keep-alive", 10))
            r->connection_keep_alive = true;
        else if (val_len == 5 && word_match(v, "close", 5))
            r->connection_close = true;
        else
            parse_connection(r, v, val_len);
        break;
    case F_KEEP_ALIVE:
        store_first(r, &r->keep_alive_field, HTTP_SEEN_KEEP_ALIVE, value);
        break;
    case F_IF_NONE_MATCH:
        store_first(r, &r->if_none_match, HTTP_SEEN_IF_NONE_MATCH, value);
        break;
    case F_CONTENT_LENGTH:
        if (r->seen & HTTP_SEEN_CONTENT_LENGTH)
            return HTTP_PARSE_ERR_CONTENT_LENGTH_DUP;
        r->seen |= HTTP_SEEN_CONTENT_LENGTH;
        return parse_content_length(r, v, val_len);
    case F_ACCEPT_ENCODING:
        store_first(r, &r->accept_encoding, HTTP_SEEN_ACCEPT_ENCODING, value);
        break;
    case F_IF_MODIFIED_SINCE:
        store_first(r, &r->if_modified_since, HTTP_SEEN_IF_MODIFIED_SINCE,
                    value);
        break;
    case F_TRANSFER_ENCODING:
        store_first(r, &r->transfer_encoding, HTTP_SEEN_TRANSFER_ENCODING,
                    value);
        return parse_transfer_encoding(p, v, val_len);
    case F_ORIGIN:
        store_first(r, &r->origin, HTTP_SEEN_ORIGIN, value);
        break;
    case F_ACR_METHOD:
        store_first(r, &r->acr_method, HTTP_SEEN_ACR_METHOD, value);
        break;
    case F_ACR_HEADERS:
        store_first(r, &r->acr_headers, HTTP_SEEN_ACR_HEADERS, value);
        break;
    default:
        break;
    }
    return 0;
}

static int header_line(struct http_parser *p,
                       const char *buf,
                       size_t start,
                       size_t end)
{
    struct http_request *r = &p->req;
    size_t i = start, name_end, vs, ve, name_len;
    enum field_id id = known_field(buf + start, end - start, &name_len);
    bool host_ok = false;

    if (id != F_OTHER) {
        name_end = start + name_len;
        i = name_end; /* the colon */
    } else {
        while (i < end && tchar_byte[(unsigned char) buf[i]])
            i++;
        name_end = i;
        if (i >= end)
            return HTTP_PARSE_ERR_HEADER_NAME;
        if (buf[i] != ':') {
            /* "Name : value" is read as "Name" by some and "Name " by
             * others */
            while (i < end && is_ows(buf[i]))
                i++;
            return (i < end && buf[i] == ':' && name_end > start)
                       ? HTTP_PARSE_ERR_SPACE_BEFORE_COLON
                       : HTTP_PARSE_ERR_HEADER_NAME;
        }
        if (name_end == start)
            return HTTP_PARSE_ERR_HEADER_NAME;
    }

    vs = i + 1;
    ve = end;
    while (vs < ve && is_ows(buf[vs]))
        vs++;
    while (ve > vs && is_ows(buf[ve - 1]))
        ve--;
    /* a valid Host holds no control byte, so its check answers both */
    if (id == F_HOST)
        host_ok = valid_host(buf + vs, ve - vs);
    if (!host_ok && !value_bytes_ok(buf + vs, ve - vs))
        return HTTP_PARSE_ERR_HEADER_VALUE;

    if (r->header_count >= p->limits.max_headers)
        return HTTP_PARSE_ERR_TOO_MANY_HEADERS;
    if (r->header_count < p->headers_capacity) {
        p->headers[r->header_count].name = slice(start, name_end - start);
        p->headers[r->header_count].value = slice(vs, ve - vs);
    }
    r->header_count++;
    return act_on_header(p, buf, id, vs, ve - vs, host_ok);
}

static int parse_header_line(struct http_parser *p,
                             const char *buf,
                             size_t start,
                             size_t end)
{
    int err;

    /* obs-fold: a continuation line; RFC 9112 §5.2 lets a server reject it,
     * and joining lines is how two parsers come to disagree */
    if (buf[start] == ' ' || buf[start] == '\t')
        return HTTP_PARSE_ERR_OBS_FOLD;
    err = header_line(p, buf, start, end);
    if (err) {
        /* NUL and CR first, as in parse_request_line */
        int bytes = check_line_bytes(buf + start, end - start);

        if (bytes)
            return bytes;
    }
    return err;
}

static int finish_head(struct http_parser *p, size_t head_end)
{
    struct http_request *r = &p->req;

    /* RFC 9112 §3.2: a 1.1 request without Host gets 400 */
    if (r->version == HTTP_VERSION_1_1 && !p->host_field_seen)
        return HTTP_PARSE_ERR_HOST_MISSING;

    if (r->seen & HTTP_SEEN_TRANSFER_ENCODING) {
        /* RFC 9112 §6.1: both present is a smuggling attempt until proven
         * otherwise; a 1.0 peer cannot know chunked */
        if (r->seen & HTTP_SEEN_CONTENT_LENGTH)
            return HTTP_PARSE_ERR_CL_AND_TE;
        if (r->version == HTTP_VERSION_1_0)
            return HTTP_PARSE_ERR_TE_HTTP10;
        if (p->te_other_seen)
            return HTTP_PARSE_ERR_TE_UNKNOWN;
        if (!p->te_chunked_seen)
            return HTTP_PARSE_ERR_TE_INVALID;
        r->body_framing = HTTP_BODY_CHUNKED;
    } else if (r->seen & HTTP_SEEN_CONTENT_LENGTH) {
        if (r->content_length > p->limits.max_body)
            return HTTP_PARSE_ERR_BODY_TOO_LARGE;
        r->body_framing = HTTP_BODY_CONTENT_LENGTH;
    }

    /* RFC 9110 §10.1.1: a 1.0 client cannot wait for 100 Continue */
    if (r->version == HTTP_VERSION_1_0)
        r->expect_continue = false;

    if (r->version == HTTP_VERSION_1_1)
        r->keep_alive = !r->connection_close;
    else
        r->keep_alive = r->connection_keep_alive && !r->connection_close;
    r->head_length = (uint32_t) head_end;
    return 0;
}

int http_parse_request(struct http_parser *p,
                       const char *buf,
                       size_t len,
                       size_t *consumed)
{
    *consumed = 0;
    if (p->state == ST_DONE) {
        *consumed = p->req.head_length;
        return HTTP_PARSE_COMPLETE;
    }
    if (p->state == ST_ERROR)
        return p->error;
    /* Limits cap a head far below this; bytes past it cannot belong to it,
     * and the cap keeps every offset within 32 bits. */
    if (len > MAX_BUFFER)
        len = MAX_BUFFER;
    /* The buffer only grows between calls; a shorter one holds nothing
     * new, and must not turn the limit arithmetic below negative. */
    if (len < p->scanned)
        return HTTP_PARSE_INCOMPLETE;

    for (;;) {
        const char *nl;
        size_t line_end, content_end;
        int err;

        if (p->scanned >= len)
            nl = NULL;
        else if (len - p->scanned >= 2 && buf[p->scanned] == '\r' &&
                 buf[p->scanned + 1] == '\n')
            nl = buf + p->scanned + 1; /* the empty line that ends a head:
                                          where memchr would stop */
        else
            nl = memchr(buf + p->scanned, '\n', len - p->scanned);
        if (!nl) {
            /* Enforce limits on the partial line now: a peer that never
             * sends LF must not make us buffer without bound. */
            if (len > p->scanned)
                p->scanned = (uint32_t) len;
            if (p->state == ST_REQUEST_LINE &&
                len - p->line_start > p->limits.max_request_line)
                return fail(p, HTTP_PARSE_ERR_URI_TOO_LONG);
            if (p->state == ST_HEADERS &&
                len - p->headers_start > p->limits.max_header_bytes)
                return fail(p, HTTP_PARSE_ERR_HEADERS_TOO_LARGE);
            return HTTP_PARSE_INCOMPLETE;
        }

        line_end = (size_t) (nl - buf);
        p->scanned = (uint32_t) (line_end + 1);
        if (line_end == p->line_start || buf[line_end - 1] != '\r') {
            /* Report what the line held first, so "a NUL" is not hidden
             * behind "no CR". */
            err =
                check_line_bytes(buf + p->line_start, line_end - p->line_start);
            if (!err)
                err = HTTP_PARSE_ERR_BARE_LF;
            if (p->state == ST_REQUEST_LINE &&
                line_end + 1 - p->line_start > p->limits.max_request_line)
                err = HTTP_PARSE_ERR_URI_TOO_LONG;
            return fail(p, err);
        }
        content_end = line_end - 1;

        if (p->state == ST_REQUEST_LINE) {
            if (line_end + 1 - p->line_start > p->limits.max_request_line)
                return fail(p, HTTP_PARSE_ERR_URI_TOO_LONG);
            if (content_end == p->line_start) {
                if (++p->leading_empty_lines > MAX_LEADING_EMPTY_LINES)
                    return fail(p, HTTP_PARSE_ERR_REQUEST_LINE);
                p->line_start = p->scanned;
                p->head_start = p->scanned;
                continue;
            }
            err = parse_request_line(p, buf, p->line_start, content_end);
            if (err)
                return fail(p, err);
            p->state = ST_HEADERS;
            p->headers_start = p->scanned;
            p->line_start = p->scanned;
            continue;
        }

        /* ST_HEADERS */
        if (line_end + 1 - p->headers_start > p->limits.max_header_bytes)
            return fail(p, HTTP_PARSE_ERR_HEADERS_TOO_LARGE);
        if (content_end == p->line_start) {
            err = finish_head(p, p->scanned);
            if (err)
                return fail(p, err);
            p->state = ST_DONE;
            *consumed = p->req.head_length;
            return HTTP_PARSE_COMPLETE;
        }
        err = parse_header_line(p, buf, p->line_start, content_end);
        if (err)
            return fail(p, err);
        p->line_start = p->scanned;
    }
}

const struct http_header *http_request_find_header(const struct http_parser *p,
                                                   const char *buf,
                                                   const char *name)
{
    size_t name_len = strlen(name);
    uint32_t i, n = p->req.header_count;

    if (n > p->headers_capacity)
        n = p->headers_capacity;
    for (i = 0; i < n; i++) {
        const struct http_header *h = &p->headers[i];
        if (http_ascii_equal_nocase(buf + h->name.off, h->name.len, name,
                                    name_len))
            return h;
    }
    return NULL;
}

int http_parse_error_status(int result)
{
    switch (result) {
    case HTTP_PARSE_COMPLETE:
    case HTTP_PARSE_INCOMPLETE:
        return 200;
    case HTTP_PARSE_ERR_VERSION_UNSUPPORTED:
        return 505;
    case HTTP_PARSE_ERR_URI_TOO_LONG:
        return 414;
    case HTTP_PARSE_ERR_HEADERS_TOO_LARGE:
    case HTTP_PARSE_ERR_TOO_MANY_HEADERS:
    case HTTP_PARSE_ERR_TRAILERS_TOO_LARGE:
        return 431;
    case HTTP_PARSE_ERR_BODY_TOO_LARGE:
        return 413;
    case HTTP_PARSE_ERR_TE_UNKNOWN:
        return 501;
    default:
        return 400;
    }
}

const char *http_parse_error_name(int result)
{
    switch (result) {
    case HTTP_PARSE_COMPLETE:
        return "complete";
    case HTTP_PARSE_INCOMPLETE:
        return "incomplete";
    case HTTP_PARSE_ERR_METHOD:
        return "method";
    case HTTP_PARSE_ERR_TARGET:
        return "target";
    case HTTP_PARSE_ERR_VERSION:
        return "version";
    case HTTP_PARSE_ERR_VERSION_UNSUPPORTED:
        return "version-unsupported";
    case HTTP_PARSE_ERR_REQUEST_LINE:
        return "request-line";
    case HTTP_PARSE_ERR_URI_TOO_LONG:
        return "uri-too-long";
    case HTTP_PARSE_ERR_HEADERS_TOO_LARGE:
        return "headers-too-large";
    case HTTP_PARSE_ERR_TOO_MANY_HEADERS:
        return "too-many-headers";
    case HTTP_PARSE_ERR_HEADER_NAME:
        return "header-name";
    case HTTP_PARSE_ERR_SPACE_BEFORE_COLON:
        return "space-before-colon";
    case HTTP_PARSE_ERR_HEADER_VALUE:
        return "header-value";
    case HTTP_PARSE_ERR_OBS_FOLD:
        return "obs-fold";
    case HTTP_PARSE_ERR_BARE_CR:
        return "bare-cr";
    case HTTP_PARSE_ERR_BARE_LF:
        return "bare-lf";
    case HTTP_PARSE_ERR_NUL:
        return "nul";
    case HTTP_PARSE_ERR_CONTENT_LENGTH:
        return "content-length";
    case HTTP_PARSE_ERR_CONTENT_LENGTH_DUP:
        return "content-length-dup";
    case HTTP_PARSE_ERR_CL_AND_TE:
        return "cl-and-te";
    case HTTP_PARSE_ERR_TE_INVALID:
        return "te-invalid";
    case HTTP_PARSE_ERR_TE_UNKNOWN:
        return "te-unknown";
    case HTTP_PARSE_ERR_TE_HTTP10:
        return "te-http10";
    case HTTP_PARSE_ERR_HOST_MISSING:
        return "host-missing";
    case HTTP_PARSE_ERR_HOST_DUP:
        return "host-dup";
    case HTTP_PARSE_ERR_HOST_INVALID:
        return "host-invalid";
    case HTTP_PARSE_ERR_BODY_TOO_LARGE:
        return "body-too-large";
    case HTTP_PARSE_ERR_CHUNK_SIZE:
        return "chunk-size";
    case HTTP_PARSE_ERR_CHUNK_DATA:
        return "chunk-data";
    case HTTP_PARSE_ERR_TRAILERS_TOO_LARGE:
        return "trailers-too-large";
    case HTTP_PARSE_ERR_TRAILER:
        return "trailer";
    case HTTP_PARSE_ERR_CHUNK_EXT_TOO_LARGE:
        return "chunk-ext-too-large";
    default:
        return "unknown";
    }
}
