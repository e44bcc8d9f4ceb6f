/* http_range.h — the single byte range the servers honour (RFC 9110 §14). */
#ifndef KTCP_CORE_HTTP_RANGE_H
#define KTCP_CORE_HTTP_RANGE_H

#include "compat.h"

enum http_range_result {
    HTTP_RANGE_IGNORE = 0,        /* absent, malformed, or several: send 200 */
    HTTP_RANGE_SATISFIABLE = 1,   /* send 206 of [first, last] */
    HTTP_RANGE_UNSATISFIABLE = 2, /* send 416 with "bytes * /size" */
};

/* Parse a Range field value against a representation of size bytes.
 * Accepts "bytes=a-b", "bytes=a-", "bytes=-n" (unit case-insensitive,
 * whitespace around the spec allowed). On SATISFIABLE, *first and *last
 * are inclusive offsets with last < size. */
int http_range_parse(const char *field,
                     size_t len,
                     uint64_t size,
                     uint64_t *first,
                     uint64_t *last);

#endif /* KTCP_CORE_HTTP_RANGE_H */
