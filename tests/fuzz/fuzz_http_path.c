/* libFuzzer target: the path normaliser.
 *
 * Invariants: the output is a clean relative path ("." or segments joined
 * by single '/'), never absolute, never with ".", ".." or empty segments,
 * never with '\', NUL or control bytes, always valid UTF-8, within the
 * buffer; and normalising it again (after percent-encoding) is a no-op.
 */
#include <stdlib.h>

#include "http_internal.h"
#include "http_listing.h"
#include "http_path.h"

#define REQUIRE(c)   \
    do {             \
        if (!(c))    \
            abort(); \
    } while (0)

static void check_clean(const char *out, size_t len)
{
    size_t i, seg = 0;

    REQUIRE(len > 0 && strlen(out) == len);
    if (len == 1 && out[0] == '.')
        return;
    REQUIRE(out[0] != '/' && out[len - 1] != '/');
    for (i = 0; i <= len; i++) {
        if (i == len || out[i] == '/') {
            size_t n = i - seg;
            REQUIRE(n > 0);
            REQUIRE(!(n == 1 && out[seg] == '.'));
            REQUIRE(!(n == 2 && out[seg] == '.' && out[seg + 1] == '.'));
            seg = i + 1;
            continue;
        }
        REQUIRE(out[i] != '\\');
        REQUIRE((unsigned char) out[i] >= 0x20 && out[i] != 0x7f);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char out[1024], again[1024], enc[3200];
    struct http_path_info info, info2;
    struct http_buf b;
    int rc;

    rc =
        http_path_normalize((const char *) data, size, out, sizeof(out), &info);
    REQUIRE(rc <= 0 && rc >= HTTP_PATH_ERR_TOO_LONG);
    if (rc != HTTP_PATH_OK)
        return 0;
    REQUIRE(info.len < sizeof(out));
    check_clean(out, info.len);
    REQUIRE(info.is_root == (strcmp(out, ".") == 0));
    /* the planner skips the hidden-path check for a plain path */
    if (info.plain)
        REQUIRE(!http_path_hidden(out, info.len));
    if (info.has_query)
        REQUIRE(info.query_off <= size &&
                info.query_off + info.query_len <= size);

    http_buf_init(&b, enc, sizeof(enc));
    http_buf_append_char(&b, '/');
    REQUIRE(http_url_encode(&b, out, info.len, true) == 0);
    rc = http_path_normalize(enc, b.len, again, sizeof(again), &info2);
    REQUIRE(rc == HTTP_PATH_OK);
    REQUIRE(strcmp(out, again) == 0);
    return 0;
}
