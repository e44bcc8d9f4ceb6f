/* http_vhost.c — virtual hosts; see http_vhost.h. */
#include "http_vhost.h"
#include "http_internal.h"

/* The name part of a Host value: without its port and trailing dot;
 * false for an IP literal or what is no host name. */
static bool host_part(const char *s, size_t len, size_t *out)
{
    size_t i, n = len;
    bool digits_dots = true;

    if (len && s[0] == '[')
        return false; /* an IPv6 literal */
    for (i = 0; i < len; i++)
        if (s[i] == ':') {
            n = i;
            break;
        }
    if (n && s[n - 1] == '.')
        n--;
    if (!n || n > HTTP_HOST_NAME_MAX)
        return false;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char) s[i];

        if (!(http_is_digit(c) || c == '.'))
            digits_dots = false;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              http_is_digit(c) || c == '.' || c == '-' || c == '_'))
            return false;
    }
    if (digits_dots)
        return false; /* an IPv4 literal */
    *out = n;
    return true;
}

int http_vhosts_add(struct http_vhosts *t,
                    const char *name,
                    size_t len,
                    const char **why)
{
    struct http_vhost_name *h;
    bool wildcard = len > 2 && name[0] == '*' && name[1] == '.';
    size_t n, i;
    uint32_t k;

    if (wildcard) {
        name++; /* keep the dot: ".example.com" */
        len--;
    }
    if (!host_part(wildcard ? name + 1 : name, wildcard ? len - 1 : len, &n) ||
        memchr(name, ':', len)) {
        *why =
            "expected a host name (letters, digits, '-', '.'; no port, "
            "not an IP address), or *.name";
        return -1;
    }
    if (wildcard)
        n++;
    if (t->n >= HTTP_VHOSTS_MAX) {
        *why = "too many host names (at most 64)";
        return -1;
    }
    h = &t->h[t->n];
    h->wildcard = wildcard;
    h->len = (uint8_t) n;
    for (i = 0; i < n; i++)
        h->name[i] = (char) http_ascii_lower((unsigned char) name[i]);
    h->name[n] = '\0';
    for (k = 0; k < t->n; k++)
        if (t->h[k].wildcard == wildcard && t->h[k].len == n &&
            memcmp(t->h[k].name, h->name, n) == 0) {
            *why = "host name given twice";
            return -1;
        }
    return (int) t->n++;
}

int http_vhosts_find(const struct http_vhosts *t, const char *host, size_t len)
{
    size_t n;
    uint32_t k;
    int best = -1;
    size_t best_len = 0;

    if (!t || !t->n || !host_part(host, len, &n))
        return -1;
    for (k = 0; k < t->n; k++) {
        const struct http_vhost_name *h = &t->h[k];

        if (!h->wildcard && h->len == n &&
            http_ascii_equal_nocase(host, n, h->name, n))
            return (int) k;
    }
    for (k = 0; k < t->n; k++) {
        const struct http_vhost_name *h = &t->h[k];

        /* "*.example.com": "a.example.com", not ".example.com" alone */
        if (h->wildcard && n > h->len && h->len > best_len &&
            http_ascii_equal_nocase(host + n - h->len, h->len, h->name,
                                    h->len)) {
            best = (int) k;
            best_len = h->len;
        }
    }
    return best;
}

int http_vhosts_request(const struct http_vhosts *t,
                        const struct http_request *req,
                        const char *buf)
{
    if (!req || !(req->seen & HTTP_SEEN_HOST))
        return -1;
    return http_vhosts_find(t, buf + req->host.off, req->host.len);
}
