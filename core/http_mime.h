/* http_mime.h — Content-Type by file extension. */
#ifndef KTCP_CORE_HTTP_MIME_H
#define KTCP_CORE_HTTP_MIME_H

#include "compat.h"

struct http_mime_type {
    const char *extension;    /* lower case, without the dot */
    const char *content_type; /* with charset for text */
    bool compressible;        /* worth gzip: text, json, js, svg, wasm... */
};

/* Type for an extension (no dot, any case); NULL if unknown. */
const struct http_mime_type *http_mime_by_extension(const char *ext,
                                                    size_t len);
/* Type for the last segment of a path; application/octet-stream (not
 * compressible) when the extension is missing or unknown. Never NULL. */
const struct http_mime_type *http_mime_for_path(const char *path, size_t len);

#define HTTP_MIME_DEFAULT "application/octet-stream"

#endif /* KTCP_CORE_HTTP_MIME_H */
