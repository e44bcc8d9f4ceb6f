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

/* Parse IMF-fixdate, RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT"; two-digit
 * years 70..99 are 19xx, 00..69 are 20xx) or asctime ("Sun Nov  6 08:49:37
 * 1994"). Surrounding whitespace is allowed. Returns false if malformed. */
bool http_date_parse(const char *s, size_t len, int64_t *t);

/* Days since 1970-01-01 of a proleptic Gregorian date, and back. */
int64_t http_days_from_civil(int64_t year, unsigned month, unsigned day);
void http_civil_from_days(int64_t days,
                          int64_t *year,
                          unsigned *month,
                          unsigned *day);

#endif /* KTCP_CORE_HTTP_DATE_H */
