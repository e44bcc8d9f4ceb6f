/* libFuzzer target: the request parser against its byte-at-a-time
 * reference (tests/fuzz/ref/, the parser before its hot paths read words).
 *
 * Both get the same bytes under the same limits, whole and cut in two;
 * every result must be the same: return code, consumed length, the whole
 * struct http_request and every stored field. The limits come from the
 * first bytes, so the order in which limits and rules fire is compared
 * too.
 */
#define http_parser_init ref_http_parser_init
#define http_parser_set_header_store ref_http_parser_set_header_store
#define http_parser_reset ref_http_parser_reset
#define http_parse_request ref_http_parse_request
#define http_request_find_header ref_http_request_find_header
#define http_method_name ref_http_method_name
#define http_head_buffered ref_http_head_buffered
#define http_parse_error_status ref_http_parse_error_status
#define http_parse_error_name ref_http_parse_error_name
#include "ref/http_parser_a9ce19f.c"
#undef http_parser_init
#undef http_parser_set_header_store
#undef http_parser_reset
#undef http_parse_request
#undef http_request_find_header
#undef http_method_name
#undef http_head_buffered
#undef http_parse_error_status
#undef http_parse_error_name

#include "fuzz.h"
#include "http_internal.h"

/* http_parser.h was included above under the ref_ names; the parser under
 * test has the same types and these entry points. */
void http_parser_init(struct http_parser *p, const struct http_limits *limits);
void http_parser_set_header_store(struct http_parser *p,
                                  struct http_header *headers,
                                  uint32_t capacity);
int http_parse_request(struct http_parser *p,
                       const char *buf,
                       size_t len,
                       size_t *consumed);

#define STORE 8

struct run {
    struct http_parser p;
    struct http_header h[STORE];
    size_t consumed;
    int rc;
};

static void run_new(struct run *r,
                    const struct http_limits *lim,
                    const char *buf,
                    size_t split,
                    size_t len)
{
    memset(r, 0, sizeof(*r));
    http_parser_init(&r->p, lim);
    http_parser_set_header_store(&r->p, r->h, STORE);
    r->rc = http_parse_request(&r->p, buf, split, &r->consumed);
    if (r->rc == HTTP_PARSE_INCOMPLETE && split < len)
        r->rc = http_parse_request(&r->p, buf, len, &r->consumed);
}

static void run_ref(struct run *r,
                    const struct http_limits *lim,
                    const char *buf,
                    size_t split,
                    size_t len)
{
    memset(r, 0, sizeof(*r));
    ref_http_parser_init(&r->p, lim);
    ref_http_parser_set_header_store(&r->p, r->h, STORE);
    r->rc = ref_http_parse_request(&r->p, buf, split, &r->consumed);
    if (r->rc == HTTP_PARSE_INCOMPLETE && split < len)
        r->rc = ref_http_parse_request(&r->p, buf, len, &r->consumed);
}

static void same(const struct run *a, const struct run *b)
{
    REQUIRE(a->rc == b->rc);
    REQUIRE(a->consumed == b->consumed);
    if (a->rc == HTTP_PARSE_COMPLETE) {
        REQUIRE(memcmp(&a->p.req, &b->p.req, sizeof(a->p.req)) == 0);
        REQUIRE(memcmp(a->h, b->h, sizeof(a->h)) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct run a, b;
    struct fuzz_input in = {data, size};
    struct http_limits lim = {HTTP_DEFAULT_MAX_REQUEST_LINE,
                              HTTP_DEFAULT_MAX_HEADER_BYTES,
                              HTTP_DEFAULT_MAX_HEADERS, HTTP_DEFAULT_MAX_BODY};
    unsigned sel = (unsigned) fuzz_uint(&in, 1);
    const char *buf;
    size_t len, split;

    /* half the inputs under small limits, so that they fire */
    if (sel & 1) {
        lim.max_request_line = 8 + (unsigned) fuzz_uint(&in, 1);
        lim.max_header_bytes = 2 + (unsigned) fuzz_uint(&in, 1);
        lim.max_headers = (unsigned) fuzz_uint(&in, 1) % 8;
        lim.max_body = fuzz_uint(&in, 1);
    }
    buf = fuzz_rest(&in, &len);
    split = len ? (sel >> 1) % (len + 1) : 0;

    run_new(&a, &lim, buf, len, len);
    run_ref(&b, &lim, buf, len, len);
    same(&a, &b);
    run_new(&a, &lim, buf, split, len);
    run_ref(&b, &lim, buf, split, len);
    same(&a, &b);
    return 0;
}
