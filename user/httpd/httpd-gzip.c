/* httpd-gzip.c — one-shot gzip of a whole file with zlib, done once per
 * file version and kept in the cache (never per request). */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "httpd.h"

struct httpd_gz *httpd_gzip(const char *in, size_t len)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    /* windowBits 15 + 16: the gzip wrapper */
    if (deflateInit2(&zs, HTTP_SERVER_GZIP_LEVEL, Z_DEFLATED, 15 + 16, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    size_t bound = deflateBound(&zs, len);
    struct httpd_gz *gz = malloc(sizeof(*gz) + bound);
    if (!gz) {
        deflateEnd(&zs);
        return NULL;
    }
    memset(gz, 0, sizeof(*gz));
    zs.next_in = (Bytef *) in;
    zs.avail_in = (uInt) len;
    zs.next_out = (Bytef *) gz->data;
    zs.avail_out = (uInt) bound;
    int r = deflate(&zs, Z_FINISH);
    gz->len = zs.total_out;
    deflateEnd(&zs);
    if (r != Z_STREAM_END) {
        free(gz);
        return NULL;
    }
    if (gz->len >= len) {
        /* not smaller: remember that, keep nothing */
        struct httpd_gz *w = realloc(gz, sizeof(*gz));
        gz = w ? w : gz;
        gz->worthless = true;
        gz->len = 0;
        return gz;
    }
    struct httpd_gz *shrunk = realloc(gz, sizeof(*gz) + gz->len);
    return shrunk ? shrunk : gz;
}
