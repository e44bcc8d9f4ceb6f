/* http_path.c — percent-decoding and dot-segment removal in one pass.
 *
 * Decoding happens before segments are interpreted, so "%2e%2e" is "..";
 * an encoded '/' is refused rather than decoded, because it would turn one
 * segment into two after the ".." check. Segments are written straight into
 * the output, and ".." pops the last one written: the output can shrink
 * back to the root, never past it.
 */
#include "http_path.h"
#include "http_internal.h"

struct utf8_state {
    uint8_t need;  /* continuation bytes still expected */
    uint8_t lower; /* allowed range of the next continuation byte */
    uint8_t upper;
};

/* Strict UTF-8 (RFC 3629): overlong forms such as C0 AE ("."), surrogates
 * and code points above U+10FFFF are what lets a second decoder see a
 * different path than ours. */
static bool utf8_step(struct utf8_state *u, unsigned char c)
{
    if (u->need == 0) {
        u->lower = 0x80;
        u->upper = 0xbf;
        if (c < 0x80)
            return true;
        if (c >= 0xc2 && c <= 0xdf) {
            u->need = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            u->need = 2;
            if (c == 0xe0)
                u->lower = 0xa0;
            else if (c == 0xed)
                u->upper = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            u->need = 3;
            if (c == 0xf0)
                u->lower = 0x90;
            else if (c == 0xf4)
                u->upper = 0x8f;
        } else {
            return false;
        }
        return true;
    }
    if (c < u->lower || c > u->upper)
        return false;
    u->lower = 0x80;
    u->upper = 0xbf;
    u->need--;
    return true;
}

/* What each byte is to the plain path (normalize_plain): a byte that
 * stands for itself in a segment (printable ASCII but the separator, '%',
 * '\\' and what ends the path), '.', which does too but may not start a
 * segment there, the separator, or an end of the path ('?', '#'). 0: only
 * the general path takes it. */
enum { PB_NONE = 0, PB_PLAIN, PB_DOT, PB_SLASH, PB_END };
static const uint8_t plain_class[256] = {
    [0x21 ... 0x22] = PB_PLAIN, /* ! " */
    [0x23] = PB_END,            /* # */
    [0x24] = PB_PLAIN,          /* $ (not %) */
    [0x26 ... 0x2d] = PB_PLAIN, /* & ' ( ) * + , - */
    [0x2e] = PB_DOT,            /* . */
    [0x2f] = PB_SLASH,          /* / */
    [0x30 ... 0x3e] = PB_PLAIN, /* 0-9 : ; < = > */
    [0x3f] = PB_END,            /* ? */
    [0x40 ... 0x5b] = PB_PLAIN, /* @ A-Z [ (not \\) */
    [0x5d ... 0x7e] = PB_PLAIN, /* ] ^ _ ` a-z { | } ~ */
};

/* The query after path[end] when that is '?', up to any '#'. */
static void note_query(const char *path,
                       size_t path_len,
                       size_t end,
                       struct http_path_info *info)
{
    size_t q = end + 1, qe = q;

    if (end >= path_len || path[end] != '?')
        return;
    while (qe < path_len && path[qe] != '#')
        qe++;
    info->has_query = true;
    info->query_off = q;
    info->query_len = qe - q;
}

/* The common case in one scan: "/seg/seg[/]" whose segments are plain
 * bytes, none empty and none starting with '.', then maybe '?' or '#'; it
 * normalizes to itself less the slashes at both ends, and no segment of
 * it is hidden (info->plain). false: take the general path (which starts
 * over). */
static bool normalize_plain(const char *path,
                            size_t path_len,
                            char *out,
                            size_t out_size,
                            struct http_path_info *info)
{
    const unsigned char *b = (const unsigned char *) path;
    bool slash = false; /* the path so far ends with a separator */
    size_t i = 1, olen;

    while (i < path_len) {
        /* a segment: a plain first byte, then plain bytes and dots */
        if (plain_class[b[i]] != PB_PLAIN)
            break;
        for (i++; i < path_len && (unsigned) (plain_class[b[i]] - PB_PLAIN) <=
                                      PB_DOT - PB_PLAIN;
             i++)
            ;
        slash = false;
        if (i == path_len || plain_class[b[i]] != PB_SLASH)
            break;
        slash = true;
        i++;
    }
    /* stopped at the end, or at what ends the path after a segment */
    if (i < path_len && (plain_class[b[i]] != PB_END || i == 1))
        return false; /* "//", "/." segments, escapes, non-ASCII... */
    olen = i - 1 - (slash ? 1 : 0);
    if (olen == 0 || olen + 1 >= out_size)
        return false; /* the general path says how it does not fit */
    note_query(path, path_len, i, info);
    memcpy(out, path + 1, olen);
    out[olen] = '\0';
    info->len = olen;
    info->trailing_slash = slash;
    info->plain = true;
    return true;
}

int http_path_normalize(const char *path,
                        size_t path_len,
                        char *out,
                        size_t out_size,
                        struct http_path_info *info)
{
    struct utf8_state u = {0, 0x80, 0xbf};
    size_t end = 0, i, olen = 0, seg_start = 0;
    bool in_segment = false, last_is_dir = true;

    memset(info, 0, sizeof(*info));
    if (out_size < 2)
        return HTTP_PATH_ERR_TOO_LONG;
    if (path_len > 1 && path[0] == '/' &&
        normalize_plain(path, path_len, out, out_size, info))
        return HTTP_PATH_OK;
    memset(info, 0, sizeof(*info));
    out[0] = '\0';

    while (end < path_len && path[end] != '?' && path[end] != '#')
        end++;
    note_query(path, path_len, end, info);
    if (end > 0 && path[0] != '/')
        return HTTP_PATH_ERR_NOT_ABSOLUTE;

    /* one extra round at i == end closes the last segment */
    for (i = 0; i <= end; i++) {
        unsigned char c;
        size_t seg_len;

        if (i == end || path[i] == '/') {
            if (u.need)
                return HTTP_PATH_ERR_BAD_UTF8;
            if (!in_segment) {
                last_is_dir = true; /* empty segment: "//" or trailing '/' */
                continue;
            }
            in_segment = false;
            seg_len = olen - seg_start;
            if (seg_len == 1 && out[seg_start] == '.') {
                olen = seg_start ? seg_start - 1 : 0;
                last_is_dir = true;
            } else if (seg_len == 2 && out[seg_start] == '.' &&
                       out[seg_start + 1] == '.') {
                if (seg_start == 0)
                    return HTTP_PATH_ERR_ESCAPES_ROOT;
                olen = seg_start - 1;
                while (olen > 0 && out[olen - 1] != '/')
                    olen--;
                if (olen > 0)
                    olen--; /* the separator before the popped segment */
                last_is_dir = true;
            } else {
                last_is_dir = false;
            }
            continue;
        }

        c = (unsigned char) path[i];
        if (c == '%') {
            int hi, lo;
            if (end - i < 3)
                return HTTP_PATH_ERR_BAD_ESCAPE;
            hi = http_hex_value((unsigned char) path[i + 1]);
            lo = http_hex_value((unsigned char) path[i + 2]);
            if (hi < 0 || lo < 0)
                return HTTP_PATH_ERR_BAD_ESCAPE;
            c = (unsigned char) (hi << 4 | lo);
            i += 2;
            if (c == '/')
                return HTTP_PATH_ERR_ENCODED_SLASH;
        }
        if (c == '\\')
            return HTTP_PATH_ERR_BACKSLASH;
        if (c == '\0')
            return HTTP_PATH_ERR_NUL;
        if (c < 0x20 || c == 0x7f)
            return HTTP_PATH_ERR_CONTROL;
        if (!utf8_step(&u, c))
            return HTTP_PATH_ERR_BAD_UTF8;

        if (!in_segment) {
            in_segment = true;
            if (olen > 0) {
                if (olen + 1 >= out_size)
                    return HTTP_PATH_ERR_TOO_LONG;
                out[olen++] = '/';
            }
            seg_start = olen;
        }
        if (olen + 1 >= out_size)
            return HTTP_PATH_ERR_TOO_LONG;
        out[olen++] = (char) c;
    }

    if (olen == 0) {
        out[0] = '.';
        olen = 1;
        info->is_root = true;
        last_is_dir = true;
    }
    out[olen] = '\0';
    info->len = olen;
    info->trailing_slash = last_is_dir;
    return HTTP_PATH_OK;
}

#define WELL_KNOWN ".well-known"
#define WELL_KNOWN_LEN (sizeof(WELL_KNOWN) - 1)

bool http_path_hidden(const char *rel, size_t len)
{
    size_t i;

    if (len == 1 && rel[0] == '.')
        return false; /* the root */
    for (i = 0; i < len; i++) {
        if (rel[i] != '.' || (i > 0 && rel[i - 1] != '/'))
            continue;
        /* a segment starts with '.' */
        if (i == 0 && len >= WELL_KNOWN_LEN &&
            memcmp(rel, WELL_KNOWN, WELL_KNOWN_LEN) == 0 &&
            (len == WELL_KNOWN_LEN || rel[WELL_KNOWN_LEN] == '/'))
            continue;
        return true;
    }
    return false;
}

int http_path_error_status(int result)
{
    switch (result) {
    case HTTP_PATH_OK:
        return 200;
    case HTTP_PATH_ERR_ESCAPES_ROOT:
        return 403;
    case HTTP_PATH_ERR_TOO_LONG:
        return 414;
    default:
        return 400;
    }
}

const char *http_path_error_name(int result)
{
    switch (result) {
    case HTTP_PATH_OK:
        return "ok";
    case HTTP_PATH_ERR_NOT_ABSOLUTE:
        return "not-absolute";
    case HTTP_PATH_ERR_BAD_ESCAPE:
        return "bad-escape";
    case HTTP_PATH_ERR_ENCODED_SLASH:
        return "encoded-slash";
    case HTTP_PATH_ERR_BACKSLASH:
        return "backslash";
    case HTTP_PATH_ERR_NUL:
        return "nul";
    case HTTP_PATH_ERR_CONTROL:
        return "control";
    case HTTP_PATH_ERR_BAD_UTF8:
        return "bad-utf8";
    case HTTP_PATH_ERR_ESCAPES_ROOT:
        return "escapes-root";
    case HTTP_PATH_ERR_TOO_LONG:
        return "too-long";
    default:
        return "unknown";
    }
}
