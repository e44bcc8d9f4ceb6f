/* http_conditional.c — ETag and conditional GET (RFC 9110 §8.8, §13). */
#include "http_conditional.h"
#include "http_buf.h"
#include "http_date.h"
#include "http_internal.h"

size_t http_etag_format(uint64_t size,
                        int64_t mtime,
                        uint32_t mtime_nsec,
                        uint64_t ino,
                        char *out)
{
    size_t n = 0;

    /* Negative mtimes are valid file times; their bit pattern is as unique
     * as any other, so the hex of the two's complement serves. A zero
     * nanosecond part or inode is left out: the '.' and the third field
     * say which parts are there, so distinct versions never share a tag. */
    out[n++] = '"';
    n += http_format_hex((uint64_t) mtime, out + n);
    if (mtime_nsec) {
        out[n++] = '.';
        n += http_format_hex(mtime_nsec, out + n);
    }
    out[n++] = '-';
    n += http_format_hex(size, out + n);
    if (ino) {
        out[n++] = '-';
        n += http_format_hex(ino, out + n);
    }
    out[n++] = '"';
    out[n] = '\0';
    return n;
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* Opaque part of an etag without W/ (the weak comparison of §8.8.3.2). */
static bool etag_opaque(const char *e,
                        size_t len,
                        const char **op,
                        size_t *op_len)
{
    if (len >= 2 && e[0] == 'W' && e[1] == '/') {
        e += 2;
        len -= 2;
    }
    if (len < 2 || e[0] != '"' || e[len - 1] != '"')
        return false;
    *op = e;
    *op_len = len;
    return true;
}

bool http_if_none_match_matches(const char *field,
                                size_t field_len,
                                const char *etag,
                                size_t etag_len)
{
    const char *want;
    size_t want_len, i = 0;

    while (i < field_len && is_ows(field[i]))
        i++;
    while (field_len > i && is_ows(field[field_len - 1]))
        field_len--;
    if (field_len - i == 1 && field[i] == '*')
        return true;
    if (!etag_opaque(etag, etag_len, &want, &want_len))
        return false;

    while (i < field_len) {
        size_t start;

        while (i < field_len && (is_ows(field[i]) || field[i] == ','))
            i++;
        if (i >= field_len)
            break;
        start = i;
        if (field_len - i >= 2 && field[i] == 'W' && field[i + 1] == '/')
            i += 2;
        if (i >= field_len || field[i] != '"')
            return false;
        i++;
        /* etagc excludes '"'; the first quote ends the tag */
        while (i < field_len && field[i] != '"') {
            unsigned char c = (unsigned char) field[i];
            if (c < 0x21 || c == 0x7f)
                return false;
            i++;
        }
        if (i >= field_len)
            return false;
        i++;
        {
            const char *op;
            size_t op_len;
            if (etag_opaque(field + start, i - start, &op, &op_len) &&
                op_len == want_len && memcmp(op, want, want_len) == 0)
                return true;
        }
        while (i < field_len && is_ows(field[i]))
            i++;
        if (i < field_len && field[i] != ',')
            return false;
    }
    return false;
}

bool http_if_modified_since_unmodified(const char *field,
                                       size_t field_len,
                                       int64_t mtime)
{
    int64_t since;

    if (!http_date_parse(field, field_len, &since))
        return false;
    return mtime <= since;
}

int http_conditional_status(const char *if_none_match,
                            size_t inm_len,
                            const char *if_modified_since,
                            size_t ims_len,
                            const char *etag,
                            size_t etag_len,
                            int64_t mtime)
{
    if (if_none_match) {
        /* §13.2.2 step 3: If-None-Match present, If-Modified-Since is
         * ignored whatever the outcome */
        return http_if_none_match_matches(if_none_match, inm_len, etag,
                                          etag_len)
                   ? 304
                   : 200;
    }
    if (if_modified_since &&
        http_if_modified_since_unmodified(if_modified_since, ims_len, mtime))
        return 304;
    return 200;
}

size_t http_etag_variant(const char *etag, const char *suffix, char *out)
{
    size_t el = strlen(etag), sl = strlen(suffix);

    if (el < 2 || etag[0] != '"' || etag[el - 1] != '"') {
        memcpy(out, etag, el + 1);
        return el;
    }
    memcpy(out, etag, el - 1);
    out[el - 1] = '-';
    memcpy(out + el, suffix, sl);
    out[el + sl] = '"';
    out[el + sl + 1] = '\0';
    return el + sl + 1;
}

bool http_if_range_holds(const char *field,
                         size_t field_len,
                         const char *etag,
                         size_t etag_len,
                         int64_t mtime)
{
    int64_t t;

    while (field_len && is_ows(field[0])) {
        field++;
        field_len--;
    }
    while (field_len && is_ows(field[field_len - 1]))
        field_len--;
    if (field_len && (field[0] == '"' ||
                      (field_len >= 2 && field[0] == 'W' && field[1] == '/')))
        return field_len == etag_len && etag_len >= 2 && etag[0] == '"' &&
               memcmp(field, etag, etag_len) == 0;
    return http_date_parse(field, field_len, &t) && t == mtime;
}
