/* Unit tests of the MIME table. */
#include "http_internal.h"
#include "http_mime.h"
#include "unit.h"

static const struct http_mime_type *for_path(const char *p)
{
    return http_mime_for_path(p, strlen(p));
}

int main(void)
{
    static const char *const required[] = {
        "html", "htm", "css",  "js",   "mjs",   "json", "txt",
        "xml",  "svg", "png",  "jpg",  "jpeg",  "gif",  "webp",
        "ico",  "pdf", "wasm", "woff", "woff2", "mp4",  "webm",
        "mp3",  "ogg", "zip",  "gz",   "tar",   "md",   "csv"};
    size_t i;

    for (i = 0; i < HTTP_ARRAY_SIZE(required); i++) {
        const struct http_mime_type *t =
            http_mime_by_extension(required[i], strlen(required[i]));
        if (!t)
            fprintf(stderr, "missing %s\n", required[i]);
        CHECK(t != NULL);
    }
    CHECK_STR(for_path("index.html")->content_type, "text/html; charset=utf-8");
    CHECK(for_path("index.html")->compressible);
    CHECK_STR(for_path("a/b/PHOTO.JPG")->content_type, "image/jpeg");
    CHECK(!for_path("a/b/photo.jpg")->compressible);
    CHECK_STR(for_path("app.js")->content_type,
              "text/javascript; charset=utf-8");
    CHECK(for_path("app.js")->compressible);
    CHECK(for_path("data.json")->compressible);
    CHECK(for_path("logo.svg")->compressible);
    CHECK(for_path("x.wasm")->compressible);
    CHECK(for_path("x.xml")->compressible);
    CHECK(!for_path("x.woff2")->compressible);
    CHECK(!for_path("x.gz")->compressible);
    CHECK_STR(for_path("archive.tar.gz")->content_type, "application/gzip");
    CHECK_STR(for_path("README")->content_type, HTTP_MIME_DEFAULT);
    CHECK(!for_path("README")->compressible);
    CHECK_STR(for_path(".bashrc")->content_type, HTTP_MIME_DEFAULT);
    CHECK_STR(for_path("dir/.html")->content_type, HTTP_MIME_DEFAULT);
    CHECK_STR(for_path("dir.html/file")->content_type, HTTP_MIME_DEFAULT);
    CHECK_STR(for_path("file.")->content_type, HTTP_MIME_DEFAULT);
    CHECK_STR(for_path("file.unknownext")->content_type, HTTP_MIME_DEFAULT);
    CHECK_STR(for_path("")->content_type, HTTP_MIME_DEFAULT);
    CHECK(http_mime_by_extension("", 0) == NULL);
    CHECK(http_mime_by_extension("HtMl", 4) != NULL);
    CHECK(http_mime_by_extension("htmlx", 5) == NULL);
    UNIT_DONE();
}
