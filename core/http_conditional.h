/* http_conditional.h — validators (ETag, Last-Modified) and the
 * If-None-Match / If-Modified-Since evaluation of RFC 9110 §13. */
#ifndef KTCP_CORE_HTTP_CONDITIONAL_H
#define KTCP_CORE_HTTP_CONDITIONAL_H

#include "compat.h"

/* Upper bound of what http_etag_format() writes, without NUL. */
#define HTTP_ETAG_MAX 62

#endif /* KTCP_CORE_HTTP_CONDITIONAL_H */
