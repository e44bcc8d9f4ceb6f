/* http_encoding.c — Accept-Encoding with integer q-values (0..1000). */
#include "http_encoding.h"
#include "http_internal.h"

int http_qvalue_parse(const char *s, size_t len)
{
    size_t i;
    int q, scale = 100;

    /* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ) */
    if (len == 0 || len > 5 || (s[0] != '0' && s[0] != '1'))
        return -1;
    q = (s[0] - '0') * 1000;
    if (len == 1)
        return q;
    if (s[1] != '.')
        return -1;
    for (i = 2; i < len; i++) {
        if (!http_is_digit((unsigned char) s[i]))
            return -1;
        q += (s[i] - '0') * scale;
        scale /= 10;
    }
    return q > 1000 ? -1 : q;
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static size_t trim(const char *s, size_t *start, size_t end)
{
    while (*start < end && is_ows(s[*start]))
        (*start)++;
    while (end > *start && is_ows(s[end - 1]))
        end--;
    return end - *start;
}

/* q of one element's parameters ";q=0.5" (other parameters ignored);
 * -1 if the element is malformed and must be disregarded. */
static int element_q(const char *s, size_t pos, size_t end)
{
    int q = 1000;

    while (pos < end) {
        size_t p_start, p_end, n;

        if (s[pos] != ';')
            return -1;
        pos++;
        p_start = pos;
        while (pos < end && s[pos] != ';')
            pos++;
        p_end = pos;
        n = trim(s, &p_start, p_end);
        if (n >= 2 && (s[p_start] == 'q' || s[p_start] == 'Q') &&
            s[p_start + 1] == '=') {
            q = http_qvalue_parse(s + p_start + 2, n - 2);
            if (q < 0)
                return -1;
        }
    }
    return q;
}

enum http_encoding http_accept_encoding_negotiate(const char *field,
                                                  size_t len,
                                                  bool gzip_available)
{
    int q_gzip = -1, q_identity = -1, q_star = -1;
    size_t pos = 0;

    if (!field)
        return HTTP_ENCODING_IDENTITY;

    while (pos < len) {
        size_t el_start, el_end, name_start, name_end, n;
        int q;

        el_start = pos;
        while (pos < len && field[pos] != ',')
            pos++;
        el_end = pos;
        if (pos < len)
            pos++;
        if (trim(field, &el_start, el_end) == 0)
            continue;
        name_start = el_start;
        name_end = name_start;
        while (name_end < el_end &&
               http_is_tchar((unsigned char) field[name_end]))
            name_end++;
        n = name_end - name_start;
        while (name_end < el_end && is_ows(field[name_end]))
            name_end++;
        q = element_q(field, name_end, el_end);
        if (n == 0 || q < 0)
            continue;

        if (http_ascii_equal_nocase(field + name_start, n, "gzip", 4) ||
            http_ascii_equal_nocase(field + name_start, n, "x-gzip", 6)) {
            if (q > q_gzip)
                q_gzip = q;
        } else if (http_ascii_equal_nocase(field + name_start, n, "identity",
                                           8)) {
            if (q > q_identity)
                q_identity = q;
        } else if (n == 1 && field[name_start] == '*') {
            if (q > q_star)
                q_star = q;
        }
    }

    /* "*" speaks for every coding not named (§12.5.3) */
    if (q_gzip < 0)
        q_gzip = q_star >= 0 ? q_star : 0;
    /* identity not named is acceptable (unless "*;q=0") but is the last
     * choice: "gzip;q=0.5" still means "gzip, please" */
    if (q_identity < 0)
        q_identity = q_star >= 0 ? q_star : 1;

    if (gzip_available && q_gzip > 0 && q_gzip >= q_identity)
        return HTTP_ENCODING_GZIP;
    if (q_identity > 0)
        return HTTP_ENCODING_IDENTITY;
    if (gzip_available && q_gzip > 0)
        return HTTP_ENCODING_GZIP;
    return HTTP_ENCODING_NONE_ACCEPTABLE;
}
