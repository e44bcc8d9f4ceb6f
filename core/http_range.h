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

/* Parse a Range field value against a representation of size bytes.
 * Accepts "bytes=a-b", "bytes=a-", "bytes=-n" (unit case-insensitive,
 * whitespace around the spec allowed). On SATISFIABLE, *first and *last
 * are inclusive offsets with last < size. */
int http_range_parse(const char *field,
                     size_t len,
                     uint64_t size,
                     uint64_t *first,
                     uint64_t *last);

/* At most this many ranges in one request: more are answered with the
 * whole representation (nginx's max_ranges is unlimited by default but
 * every multipart answer costs a part head per range). */
#define HTTP_RANGES_MAX 16

struct http_range_set {
    unsigned int n;
    uint64_t first[HTTP_RANGES_MAX], last[HTTP_RANGES_MAX]; /* inclusive */
};

/* Parse a Range field with one or several range-specs, comma separated
 * (empty elements skipped). IGNORE when any spec is malformed, when there
 * are more than HTTP_RANGES_MAX specs, or when the satisfiable ranges add
 * up to more bytes than size (overlaps); UNSATISFIABLE when none is
 * satisfiable; else SATISFIABLE with rs holding the satisfiable ranges in
 * the order asked (the unsatisfiable ones dropped, RFC 9110 §14.1.1); rs->n is
 * 0 unless SATISFIABLE. */
int http_ranges_parse(const char *field,
                      size_t len,
                      uint64_t size,
                      struct http_range_set *rs);

#endif /* KTCP_CORE_HTTP_RANGE_H */
