/* http_counters.h — a static-file server's counters and their two
 * renderings, the same for both engines: "name value" lines (khttpd's
 * /proc/net/khttpd, ktcp-httpd's status path) and the Prometheus text
 * exposition format (version 0.0.4), with one metric prefix per engine.
 *
 * The engines count; core names, orders and documents what they count. */
#ifndef KTCP_HTTP_COUNTERS_H
#define KTCP_HTTP_COUNTERS_H

#include "compat.h"
#include "http_buf.h"

enum http_counter {
    HTTP_CTR_ACCEPTED,
    HTTP_CTR_ACTIVE, /* a gauge */
    HTTP_CTR_REFUSED,
    HTTP_CTR_REQUESTS,
    HTTP_CTR_STATUS_1XX, /* .. 5XX follow */
    HTTP_CTR_STATUS_5XX = HTTP_CTR_STATUS_1XX + 4,
    HTTP_CTR_BYTES_OUT,
    HTTP_CTR_CACHE_HITS,
    HTTP_CTR_CACHE_MISSES,
    HTTP_CTR_CACHE_EVICTIONS,
    HTTP_CTR_CACHE_BYTES,   /* a gauge */
    HTTP_CTR_CACHE_ENTRIES, /* a gauge */
    HTTP_CTR_TIMEOUTS,
    HTTP_CTR_ERRORS,
    HTTP_CTR_LISTINGS_REFUSED,
    HTTP_CTR_LISTING_BYTES, /* a gauge */
    HTTP_CTR_DENIED,        /* connections closed by an address rule */
    HTTP_CTR_RATE_LIMITED,  /* requests answered 429 */
    HTTP_CTR_RATE_ENTRIES,  /* a gauge: addresses in the rate table */
    HTTP_NCOUNTERS
};

/* "accepted 12\n" ... in enum order. */
void http_counters_plain(struct http_buf *b, const uint64_t v[HTTP_NCOUNTERS]);

/* "# HELP prefix_accepted_total ..." ...: counters end in _total, the
 * status classes are one metric with a class label. */
void http_counters_prometheus(struct http_buf *b,
                              const char *prefix,
                              const uint64_t v[HTTP_NCOUNTERS]);

/* The content type of each rendering. */
#define HTTP_COUNTERS_PLAIN_TYPE "text/plain; charset=utf-8"
#define HTTP_COUNTERS_PROMETHEUS_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
