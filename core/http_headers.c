/* http_headers.c — the operator's added header fields and CORS; see
 * http_headers.h. */
#include "http_headers.h"
#include "http_internal.h"
#include "http_path.h"

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Fields the server writes itself: a second one would break the framing
 * (Content-Length, Transfer-Encoding, Connection...) or contradict the
 * one it sends. */
static const char *const server_fields[] = {
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "trailer",
    "te",
    "content-range",
    "content-type",
    "content-encoding",
    "date",
    "etag",
    "last-modified",
    "location",
    "accept-ranges",
};

static bool server_field(const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < sizeof(server_fields) / sizeof(server_fields[0]); i++)
        if (http_ascii_equal_nocase(name, len, server_fields[i],
                                    strlen(server_fields[i])))
            return true;
    return false;
}

/* The prefix s[0..len) as the path it names ("/a/b/" or "/a/b"), into
 * t->prefixes; *off and *plen (0 for "/", which is every path). */
static int add_prefix(struct http_headers *t,
                      const char *s,
                      size_t len,
                      uint16_t *off,
                      uint16_t *plen,
                      const char **why)
{
    char rel[HTTP_HEADER_PREFIX_MAX];
    struct http_path_info info;
    size_t n;

    if (len >= HTTP_HEADER_PREFIX_MAX ||
        http_path_normalize(s, len, rel, sizeof(rel), &info) != HTTP_PATH_OK ||
        info.has_query) {
        *why =
            "expected a path prefix starting with '/' (at most 255 bytes, "
            "no '..' above the root, no query)";
        return -1;
    }
    *off = (uint16_t) t->prefixes_used;
    *plen = 0;
    if (info.is_root)
        return 0;
    n = 1 + info.len + (info.trailing_slash ? 1 : 0);
    if (n > sizeof(t->prefixes) - t->prefixes_used) {
        *why = "too many path prefixes (1024 bytes in all)";
        return -1;
    }
    t->prefixes[t->prefixes_used] = '/';
    memcpy(t->prefixes + t->prefixes_used + 1, rel, info.len);
    if (info.trailing_slash)
        t->prefixes[t->prefixes_used + 1 + info.len] = '/';
    t->prefixes_used += (uint32_t) n;
    *plen = (uint16_t) n;
    return 0;
}

int http_headers_add(struct http_headers *t,
                     const char *spec,
                     size_t len,
                     const char **why)
{
    struct http_add_header *h;
    size_t i = 0, name, name_len, v, v_end, line;

    while (i < len && blank(spec[i]))
        i++;
    while (len > i && blank(spec[len - 1]))
        len--;
    if (t->n >= HTTP_ADD_HEADERS_MAX) {
        *why = "too many header fields (at most 32)";
        return -1;
    }
    h = &t->h[t->n];
    h->prefix_len = 0;
    if (i < len && spec[i] == '/') {
        size_t s = i;

        while (i < len && !blank(spec[i]))
            i++;
        if (add_prefix(t, spec + s, i - s, &h->prefix_off, &h->prefix_len,
                       why) < 0)
            return -1;
        while (i < len && blank(spec[i]))
            i++;
    }
    name = i;
    while (i < len && http_is_tchar((unsigned char) spec[i]))
        i++;
    name_len = i - name;
    if (!name_len || i >= len || spec[i] != ':') {
        *why = "expected [/PREFIX ]Name: value, the name a token";
        goto undo;
    }
    if (name_len >= HTTP_HEADER_NAME_MAX) {
        *why = "a field name is at most 63 bytes";
        goto undo;
    }
    if (server_field(spec + name, name_len)) {
        *why = "the server sets this field itself";
        goto undo;
    }
    v = i + 1;
    while (v < len && blank(spec[v]))
        v++;
    v_end = len;
    if (v == v_end) {
        *why = "expected a value after the colon";
        goto undo;
    }
    for (i = v; i < v_end; i++) {
        unsigned char c = (unsigned char) spec[i];

        if (c == '\r' || c == '\n') {
            *why = "a value may not hold CR or LF";
            goto undo;
        }
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            *why = "a value may not hold control bytes";
            goto undo;
        }
    }
    line = name_len + 2 + (v_end - v) + 2;
    if (line > sizeof(t->lines) - t->lines_used) {
        *why = "the header fields take more than 3072 bytes";
        goto undo;
    }
    h->line_off = (uint16_t) t->lines_used;
    h->line_len = (uint16_t) line;
    memcpy(t->lines + t->lines_used, spec + name, name_len);
    memcpy(t->lines + t->lines_used + name_len, ": ", 2);
    memcpy(t->lines + t->lines_used + name_len + 2, spec + v, v_end - v);
    memcpy(t->lines + t->lines_used + line - 2, "\r\n", 2);
    t->lines_used += (uint32_t) line;
    if (!h->prefix_len)
        t->every |= 1u << t->n;
    t->n++;
    return 0;
undo:
    t->prefixes_used -= h->prefix_len;
    return -1;
}

/* "https://host[:port]": a scheme, then host characters only. */
static bool origin_ok(const char *s, size_t len)
{
    size_t i;

    if (len > 8 && memcmp(s, "https://", 8) == 0)
        i = 8;
    else if (len > 7 && memcmp(s, "http://", 7) == 0)
        i = 7;
    else
        return false;
    for (; i < len; i++) {
        unsigned char c = (unsigned char) s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              http_is_digit(c) || c == '.' || c == '-' || c == ':' ||
              c == '[' || c == ']' || c == '_'))
            return false;
    }
    return true;
}

int http_headers_cors(struct http_headers *t,
                      const char *origin,
                      size_t len,
                      const char **why)
{
    struct http_buf b;

    while (len && blank(*origin))
        origin++, len--;
    while (len && blank(origin[len - 1]))
        len--;
    if (!len) {
        t->cors = t->cors_any = false;
        t->cors_line_len = 0;
        return 0;
    }
    if (!(len == 1 && origin[0] == '*') &&
        (len > HTTP_CORS_ORIGIN_MAX || !origin_ok(origin, len))) {
        *why =
            "expected * or an origin: http:// or https://, a host and an "
            "optional port, no path";
        return -1;
    }
    http_buf_init(&b, t->cors_line, sizeof(t->cors_line));
    http_buf_append_str(&b, "Access-Control-Allow-Origin: ");
    http_buf_append(&b, origin, len);
    http_buf_append(&b, "\r\n", 2);
    t->cors_any = len == 1;
    /* one origin: the answer depends on the request's (for caches) */
    if (!t->cors_any)
        http_buf_append_str(&b, "Vary: Origin\r\n");
    t->cors = true;
    t->cors_line_len = (uint16_t) b.len;
    return 0;
}

/* Does the path "/" rel ["/"] start with prefix p? */
static bool prefix_holds(const char *p,
                         size_t plen,
                         const char *rel,
                         size_t rel_len,
                         bool is_root,
                         bool trailing_slash)
{
    size_t path_len = is_root ? 1 : 1 + rel_len + (trailing_slash ? 1 : 0);
    size_t i;

    if (plen > path_len)
        return false;
    for (i = 1; i < plen; i++) {
        char c = i - 1 < rel_len && !is_root ? rel[i - 1] : '/';

        if (p[i] != c)
            return false;
    }
    return true;
}

uint32_t http_headers_match(const struct http_headers *t,
                            const char *rel,
                            size_t rel_len,
                            bool is_root,
                            bool trailing_slash)
{
    uint32_t mask = t->every;
    uint32_t i;

    for (i = 0; i < t->n; i++) {
        const struct http_add_header *h = &t->h[i];

        if (h->prefix_len &&
            prefix_holds(t->prefixes + h->prefix_off, h->prefix_len, rel,
                         rel_len, is_root, trailing_slash))
            mask |= 1u << i;
    }
    return mask;
}

void http_headers_append(struct http_buf *b,
                         const struct http_headers *t,
                         uint32_t mask)
{
    uint32_t i;

    for (i = 0; i < t->n; i++)
        if (mask & (1u << i))
            http_buf_append(b, t->lines + t->h[i].line_off, t->h[i].line_len);
    if (t->cors)
        http_buf_append(b, t->cors_line, t->cors_line_len);
}
