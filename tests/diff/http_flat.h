/* http_flat.h — struct-free parser entry points for language bindings. */
#ifndef KTCP_CORE_HTTP_FLAT_H
#define KTCP_CORE_HTTP_FLAT_H

#include "http_parser.h"

#define HTTP_FLAT_MAX_HEADERS 48
#define HTTP_FLAT_FIXED 16

/* Parse one request head with default limits (max_headers aside; at most
 * HTTP_FLAT_MAX_HEADERS fields are reported, all are counted). On
 * HTTP_PARSE_COMPLETE out[] holds: 0 method, 1-2 method token off/len,
 * 3-4 target, 5 version, 6-7 host, 8 keep_alive, 9 body framing,
 * 10-11 content length low/high, 12-13 path, 14 target form, 15 stored
 * header count n, then n x (name off, name len, value off, value len). */
int http_flat_parse(const char *buf,
                    size_t len,
                    uint32_t max_headers,
                    uint32_t *out,
                    size_t out_cap,
                    size_t *consumed);

/* Parse buf[0..split) then buf[0..len) with one parser: the result must
 * not depend on where the bytes were cut. */
int http_flat_parse_split(const char *buf,
                          size_t len,
                          size_t split,
                          size_t *consumed);

#endif /* KTCP_CORE_HTTP_FLAT_H */
