/* http_mime.c — a const table, searched linearly: it is short, lives in
 * one or two cache lines of pointers, and a hash would need init code the
 * kernel and user space would have to run in different places. */
#include "http_mime.h"

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

const struct http_mime_type *http_mime_for_path(const char *path, size_t len)
{
    const struct http_mime_type *t;
    size_t i = len;

    /* the extension is after the last '.' of the last segment; a leading
     * dot (".bashrc") names a hidden file, not an extension */
    while (i > 0 && path[i - 1] != '.' && path[i - 1] != '/')
        i--;
    if (i <= 1 || path[i - 1] != '.' || path[i - 2] == '/')
        return &mime_default;
    t = http_mime_by_extension(path + i, len - i);
    return t ? t : &mime_default;
}
