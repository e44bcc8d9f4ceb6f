/* http_mime.c — a const table, searched linearly: it is short, lives in
 * one or two cache lines of pointers, and a hash would need init code the
 * kernel and user space would have to run in different places. */
#include "http_mime.h"
#include "http_internal.h"

#define TEXT(t) t "; charset=utf-8"

static const struct http_mime_type mime_types[] = {
    {"html", TEXT("text/html"), true},
    {"htm", TEXT("text/html"), true},
    {"css", TEXT("text/css"), true},
    {"js", TEXT("text/javascript"), true},
    {"mjs", TEXT("text/javascript"), true},
    {"json", "application/json", true},
    {"map", "application/json", true},
    {"webmanifest", "application/manifest+json", true},
    {"txt", TEXT("text/plain"), true},
    {"text", TEXT("text/plain"), true},
    {"log", TEXT("text/plain"), true},
    {"md", TEXT("text/markdown"), true},
    {"markdown", TEXT("text/markdown"), true},
    {"csv", TEXT("text/csv"), true},
    {"tsv", TEXT("text/tab-separated-values"), true},
    {"xml", "application/xml", true},
    {"xhtml", "application/xhtml+xml", true},
    {"rss", "application/rss+xml", true},
    {"atom", "application/atom+xml", true},
    {"svg", "image/svg+xml", true},
    {"wasm", "application/wasm", true},
    {"ics", TEXT("text/calendar"), true},
    {"c", TEXT("text/plain"), true},
    {"h", TEXT("text/plain"), true},
    {"py", TEXT("text/plain"), true},
    {"sh", TEXT("text/plain"), true},
    {"yaml", TEXT("text/yaml"), true},
    {"yml", TEXT("text/yaml"), true},
    {"toml", TEXT("text/plain"), true},
    {"ttf", "font/ttf", true},
    {"otf", "font/otf", true},
    {"eot", "application/vnd.ms-fontobject", true},
    {"bmp", "image/bmp", true},
    {"ico", "image/vnd.microsoft.icon", true},
    {"tar", "application/x-tar", true},
    {"ps", "application/postscript", true},
    /* already compressed: gzip would burn CPU for nothing */
    {"png", "image/png", false},
    {"jpg", "image/jpeg", false},
    {"jpeg", "image/jpeg", false},
    {"gif", "image/gif", false},
    {"webp", "image/webp", false},
    {"avif", "image/avif", false},
    {"apng", "image/apng", false},
    {"tif", "image/tiff", false},
    {"tiff", "image/tiff", false},
    {"woff", "font/woff", false},
    {"woff2", "font/woff2", false},
    {"pdf", "application/pdf", false},
    {"mp4", "video/mp4", false},
    {"m4v", "video/mp4", false},
    {"webm", "video/webm", false},
    {"ogv", "video/ogg", false},
    {"mov", "video/quicktime", false},
    {"avi", "video/x-msvideo", false},
    {"mkv", "video/x-matroska", false},
    {"mp3", "audio/mpeg", false},
    {"ogg", "audio/ogg", false},
    {"oga", "audio/ogg", false},
    {"opus", "audio/opus", false},
    {"wav", "audio/wav", false},
    {"flac", "audio/flac", false},
    {"m4a", "audio/mp4", false},
    {"aac", "audio/aac", false},
    {"zip", "application/zip", false},
    {"gz", "application/gzip", false},
    {"tgz", "application/gzip", false},
    {"bz2", "application/x-bzip2", false},
    {"xz", "application/x-xz", false},
    {"zst", "application/zstd", false},
    {"7z", "application/x-7z-compressed", false},
    {"rar", "application/vnd.rar", false},
    {"jar", "application/java-archive", false},
    {"deb", "application/vnd.debian.binary-package", false},
    {"iso", "application/x-iso9660-image", false},
    {"bin", HTTP_MIME_DEFAULT, false},
    {"exe", "application/vnd.microsoft.portable-executable", false},
};

static const struct http_mime_type mime_default = {"", HTTP_MIME_DEFAULT,
                                                   false};

/* Longest extension in the table ("webmanifest"). */
#define MAX_EXTENSION 11

const struct http_mime_type *http_mime_by_extension(const char *ext, size_t len)
{
    size_t i;

    if (len == 0 || len > MAX_EXTENSION)
        return NULL;
    for (i = 0; i < HTTP_ARRAY_SIZE(mime_types); i++) {
        const char *e = mime_types[i].extension;
        if (http_ascii_equal_nocase(ext, len, e, strlen(e)))
            return &mime_types[i];
    }
    return NULL;
}

/* Offset of the extension in path (after the last '.' of the last
 * segment), or len when there is none; a leading dot (".bashrc") names a
 * hidden file, not an extension. */
static size_t extension_at(const char *path, size_t len)
{
    size_t i = len;

    while (i > 0 && path[i - 1] != '.' && path[i - 1] != '/')
        i--;
    if (i <= 1 || path[i - 1] != '.' || path[i - 2] == '/')
        return len;
    return i;
}

const struct http_mime_type *http_mime_for_path(const char *path, size_t len)
{
    const struct http_mime_type *t;
    size_t i = extension_at(path, len);

    if (i == len)
        return &mime_default;
    t = http_mime_by_extension(path + i, len - i);
    return t ? t : &mime_default;
}

/* Compare ext[0..len) (any case) with a lower-case table extension. */
static int ext_cmp(const char *ext, size_t len, const char *key)
{
    size_t i;

    for (i = 0; i < len && key[i]; i++) {
        unsigned char a = http_ascii_lower((unsigned char) ext[i]);
        unsigned char b = (unsigned char) key[i];
        if (a != b)
            return a < b ? -1 : 1;
    }
    if (i < len)
        return 1;
    return key[i] ? -1 : 0;
}

/* Index of ext in t, or -(insertion point) - 1. */
static long table_find(const struct http_mime_table *t,
                       const char *ext,
                       size_t len)
{
    size_t lo = 0, hi = t->count;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = ext_cmp(ext, len, t->types[mid].extension);
        if (c == 0)
            return (long) mid;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return -(long) lo - 1;
}

const struct http_mime_type *http_mime_table_for_path(
    const struct http_mime_table *t,
    const char *path,
    size_t len)
{
    size_t i;
    long k;

    if (!t || !t->count)
        return http_mime_for_path(path, len);
    i = extension_at(path, len);
    if (i == len || len - i > HTTP_MIME_EXT_LEN_MAX)
        return http_mime_for_path(path, len);
    k = table_find(t, path + i, len - i);
    return k >= 0 ? &t->types[k] : http_mime_for_path(path, len);
}

static bool starts_with(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);

    return len >= n && http_ascii_equal_nocase(s, n, prefix, n);
}

static bool ends_with(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);

    return len >= n && http_ascii_equal_nocase(s + len - n, n, suffix, n);
}

/* Worth gzip, judged by the type alone. */
static bool type_compressible(const char *type, size_t len)
{
    return starts_with(type, len, "text/") || ends_with(type, len, "+xml") ||
           ends_with(type, len, "+json") || ends_with(type, len, "/json") ||
           ends_with(type, len, "/xml") ||
           ends_with(type, len, "/javascript") || ends_with(type, len, "/wasm");
}

/* "token/token", within the length bound. */
static bool valid_type(const char *s, size_t len)
{
    size_t i, slash = 0, slashes = 0;

    if (len == 0 || len > HTTP_MIME_TYPE_LEN_MAX)
        return false;
    for (i = 0; i < len; i++) {
        if (s[i] == '/') {
            slash = i;
            slashes++;
        } else if (!http_is_tchar((unsigned char) s[i])) {
            return false;
        }
    }
    return slashes == 1 && slash > 0 && slash < len - 1;
}

static bool valid_ext(const char *s, size_t len)
{
    size_t i;

    if (len == 0 || len > HTTP_MIME_EXT_LEN_MAX)
        return false;
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char) s[i];
        if (c == '.' || c == '/' || !http_is_tchar(c))
            return false;
    }
    return true;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* Copy s[0..len) (lower-cased when lower) and suffix into store; the
 * copy, or NULL when store is full. */
static const char *store_copy(char *store,
                              size_t cap,
                              size_t *used,
                              const char *s,
                              size_t len,
                              bool lower,
                              const char *suffix)
{
    size_t n = strlen(suffix), i;
    char *out = store + *used;

    if (cap - *used < len + n + 1)
        return NULL;
    for (i = 0; i < len; i++)
        out[i] = lower ? (char) http_ascii_lower((unsigned char) s[i]) : s[i];
    memcpy(out + len, suffix, n + 1);
    *used += len + n + 1;
    return out;
}

size_t http_mime_table_parse(struct http_mime_table *t,
                             size_t max,
                             char *store,
                             size_t store_cap,
                             const char *text,
                             size_t len)
{
    size_t pos = 0, used = 0;

    t->count = 0;
    if (len > HTTP_MIME_FILE_MAX)
        len = HTTP_MIME_FILE_MAX;
    if (max > HTTP_MIME_TABLE_MAX)
        max = HTTP_MIME_TABLE_MAX;
    while (pos < len && t->count < max) {
        size_t end = pos, a, b, x;
        const char *type = NULL;
        bool text_type;

        while (end < len && text[end] != '\n')
            end++;
        /* the type, then its extensions, blank-separated; '#' starts a
         * comment */
        a = pos;
        pos = end + 1;
        while (a < end && is_blank(text[a]))
            a++;
        if (a == end || text[a] == '#')
            continue;
        b = a;
        while (b < end && !is_blank(text[b]) && text[b] != '#')
            b++;
        if (!valid_type(text + a, b - a))
            continue;
        text_type = starts_with(text + a, b - a, "text/");
        for (x = b; x < end && t->count < max;) {
            const struct http_mime_type *builtin;
            const char *ext;
            size_t y;
            long k;

            while (x < end && is_blank(text[x]))
                x++;
            if (x == end || text[x] == '#')
                break;
            y = x;
            while (y < end && !is_blank(text[y]) && text[y] != '#')
                y++;
            if (!valid_ext(text + x, y - x)) {
                x = y;
                continue;
            }
            k = table_find(t, text + x, y - x);
            if (k >= 0) { /* an earlier line named it: the first wins */
                x = y;
                continue;
            }
            k = -k - 1;
            /* the line's type is stored once, on its first extension */
            if (!type)
                type = store_copy(store, store_cap, &used, text + a, b - a,
                                  false, text_type ? "; charset=utf-8" : "");
            ext =
                store_copy(store, store_cap, &used, text + x, y - x, true, "");
            if (!type || !ext)
                return t->count; /* storage full: keep what fits */
            builtin = http_mime_by_extension(text + x, y - x);
            memmove(&t->types[k + 1], &t->types[k],
                    (t->count - (size_t) k) * sizeof(t->types[0]));
            t->types[k].extension = ext;
            t->types[k].content_type = type;
            t->types[k].compressible = builtin
                                           ? builtin->compressible
                                           : type_compressible(text + a, b - a);
            t->count++;
            x = y;
        }
    }
    return t->count;
}
