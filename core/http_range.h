/* http_range.h — the byte ranges the servers honour (RFC 9110 §14). */
#ifndef KTCP_CORE_HTTP_RANGE_H
#define KTCP_CORE_HTTP_RANGE_H

#include "compat.h"

enum http_range_result {
    HTTP_RANGE_IGNORE = 0,        /* absent, malformed (or several, for
                                     http_range_parse): send 200 */
    HTTP_RANGE_SATISFIABLE = 1,   /* send 206 of [first, last] */
    HTTP_RANGE_UNSATISFIABLE = 2, /* send 416 with "bytes * /size" */
};

/* At most this many ranges in one request: more are answered with the
 * whole representation (nginx's max_ranges is unlimited by default but
 * every multipart answer costs a part head per range). */
#define HTTP_RANGES_MAX 16

struct http_range_set {
    unsigned int n;
    uint64_t first[HTTP_RANGES_MAX], last[HTTP_RANGES_MAX]; /* inclusive */
};

#endif /* KTCP_CORE_HTTP_RANGE_H */
