/* http_encoding.h — Accept-Encoding negotiation (RFC 9110 §12.5.3). */
#ifndef KTCP_CORE_HTTP_ENCODING_H
#define KTCP_CORE_HTTP_ENCODING_H

#include "compat.h"

enum http_encoding {
    HTTP_ENCODING_NONE_ACCEPTABLE = -1, /* even identity refused: 406 or
                                           identity anyway, server's choice */
    HTTP_ENCODING_IDENTITY = 0,
    HTTP_ENCODING_GZIP = 1,
};

/* Parse a qvalue ("1", "0.5", "0.125", "1.000") into 0..1000, or -1. */
int http_qvalue_parse(const char *s, size_t len);

/* Choose the response coding. field NULL = header absent (identity).
 * gzip_available: the server has (or can make) a gzip copy. gzip (or its
 * alias x-gzip) wins over identity on equal q; q=0 excludes; "*" covers
 * codings not listed; identity is acceptable unless excluded. */
enum http_encoding http_accept_encoding_negotiate(const char *field,
                                                  size_t len,
                                                  bool gzip_available);

#endif /* KTCP_CORE_HTTP_ENCODING_H */
