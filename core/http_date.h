/* http_date.h — HTTP-date (RFC 9110 §5.6.7) with integer arithmetic only. */
#ifndef KTCP_CORE_HTTP_DATE_H
#define KTCP_CORE_HTTP_DATE_H

#include "compat.h"

/* "Sun, 06 Nov 1994 08:49:37 GMT" */
#define HTTP_DATE_LEN 29

/* IMF-fixdate of t (seconds since the epoch) into out[HTTP_DATE_LEN + 1],
 * NUL-terminated. Years outside 0..9999 are clamped to that range's ends.
 * Returns HTTP_DATE_LEN. */
size_t http_date_format(int64_t t, char *out);

#endif /* KTCP_CORE_HTTP_DATE_H */
