/* libFuzzer target: the PROXY protocol header (http_proxy.c), fed the way
 * the engines feed it — whole, byte by byte, and cut every few bytes.
 *
 * Invariants: the result, the header's length and the address do not
 * depend on the cut; MORE takes every byte given; a header never takes
 * more than HTTP_PROXY_MAX bytes (v1: HTTP_PROXY_V1_MAX); a v1 header ends
 * in CRLF; an input that does not start like either version is refused at
 * its first byte; once the bound is passed the answer is never MORE.
 */
#include <string.h>

#include "fuzz.h"
#include "http_proxy.h"

struct outcome {
    int rc;
    size_t len; /* the header's bytes, on DONE */
    struct http_proxy_addr addr;
};

static void parse(const uint8_t *buf,
                  size_t len,
                  size_t step,
                  struct outcome *o)
{
    struct http_proxy p;
    size_t pos = 0;
    int rc = HTTP_PROXY_MORE;

    http_proxy_init(&p);
    memset(o, 0, sizeof(*o));
    while (pos < len) {
        size_t k = len - pos > step ? step : len - pos, used;

        rc = http_proxy_parse(&p, buf + pos, k, &used);
        REQUIRE(used <= k);
        if (rc == HTTP_PROXY_MORE)
            REQUIRE(used == k);
        else if (rc == HTTP_PROXY_DONE)
            REQUIRE(used > 0);
        else
            REQUIRE(used == 0 && rc >= HTTP_PROXY_ERR_UNSUPPORTED);
        pos += used;
        if (rc != HTTP_PROXY_MORE)
            break;
    }
    o->rc = rc;
    if (rc == HTTP_PROXY_DONE) {
        o->len = pos;
        o->addr = p.addr;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct outcome whole, bytewise, cut;
    size_t step = size ? 1 + data[size - 1] % 11 : 1;

    parse(data, size, size ? size : 1, &whole);
    parse(data, size, 1, &bytewise);
    parse(data, size, step, &cut);
    REQUIRE(whole.rc == bytewise.rc && whole.rc == cut.rc);
    REQUIRE(whole.len == bytewise.len && whole.len == cut.len);
    REQUIRE(memcmp(&whole.addr, &bytewise.addr, sizeof(whole.addr)) == 0);
    REQUIRE(memcmp(&whole.addr, &cut.addr, sizeof(whole.addr)) == 0);
    if (size && data[0] != 'P' && data[0] != '\r')
        REQUIRE(whole.rc == HTTP_PROXY_ERR_MISSING);
    if (whole.rc == HTTP_PROXY_DONE) {
        REQUIRE(whole.len <= HTTP_PROXY_MAX);
        REQUIRE(whole.addr.version == 1 || whole.addr.version == 2);
        REQUIRE(whole.addr.family == 0 || whole.addr.family == 4 ||
                whole.addr.family == 6);
        if (whole.addr.version == 1) {
            REQUIRE(whole.len <= HTTP_PROXY_V1_MAX);
            REQUIRE(data[whole.len - 2] == '\r' && data[whole.len - 1] == '\n');
        }
    }
    if (whole.rc == HTTP_PROXY_MORE)
        REQUIRE(size < HTTP_PROXY_MAX);
    return 0;
}
