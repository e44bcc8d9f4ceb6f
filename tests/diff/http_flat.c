/* http_flat.c — the parser behind a flat, struct-free ABI, for bindings
 * such as the ctypes differential test (tests/test_core_diff.py): no
 * struct layout to mirror, only integers in a caller array. */
#include "http_flat.h"

int http_flat_parse(const char *buf,
                    size_t len,
                    uint32_t max_headers,
                    uint32_t *out,
                    size_t out_cap,
                    size_t *consumed)
{
    struct http_parser p;
    struct http_header headers[HTTP_FLAT_MAX_HEADERS];
    const struct http_request *r = &p.req;
    struct http_limits limits = {HTTP_DEFAULT_MAX_REQUEST_LINE,
                                 HTTP_DEFAULT_MAX_HEADER_BYTES, max_headers,
                                 HTTP_DEFAULT_MAX_BODY};
    uint32_t i, stored;
    int rc;

    http_parser_init(&p, &limits);
    http_parser_set_header_store(&p, headers, HTTP_FLAT_MAX_HEADERS);
    rc = http_parse_request(&p, buf, len, consumed);
    if (rc != HTTP_PARSE_COMPLETE || out_cap < HTTP_FLAT_FIXED)
        return rc;

    out[0] = r->method;
    out[1] = r->method_token.off;
    out[2] = r->method_token.len;
    out[3] = r->target.off;
    out[4] = r->target.len;
    out[5] = r->version;
    out[6] = r->host.off;
    out[7] = r->host.len;
    out[8] = r->keep_alive;
    out[9] = r->body_framing;
    out[10] = (uint32_t) r->content_length;
    out[11] = (uint32_t) (r->content_length >> 32);
    out[12] = r->path.off;
    out[13] = r->path.len;
    out[14] = r->target_form;
    stored = r->header_count < HTTP_FLAT_MAX_HEADERS ? r->header_count
                                                     : HTTP_FLAT_MAX_HEADERS;
    if (stored > (out_cap - HTTP_FLAT_FIXED) / 4)
        stored = (uint32_t) ((out_cap - HTTP_FLAT_FIXED) / 4);
    out[15] = stored;
    for (i = 0; i < stored; i++) {
        out[HTTP_FLAT_FIXED + 4 * i + 0] = headers[i].name.off;
        out[HTTP_FLAT_FIXED + 4 * i + 1] = headers[i].name.len;
        out[HTTP_FLAT_FIXED + 4 * i + 2] = headers[i].value.off;
        out[HTTP_FLAT_FIXED + 4 * i + 3] = headers[i].value.len;
    }
    return rc;
}

int http_flat_parse_split(const char *buf,
                          size_t len,
                          size_t split,
                          size_t *consumed)
{
    struct http_parser p;
    int rc;

    http_parser_init(&p, NULL);
    if (split < len) {
        rc = http_parse_request(&p, buf, split, consumed);
        if (rc != HTTP_PARSE_INCOMPLETE)
            return rc;
    }
    return http_parse_request(&p, buf, len, consumed);
}
