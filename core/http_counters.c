/* http_counters.c — the counters' two renderings (see http_counters.h). */
#include "http_counters.h"
#include "http_internal.h"

struct counter_desc {
    const char *name; /* the plain name; the metric adds prefix and _total */
    bool gauge;
    const char *help;
};

static const struct counter_desc counters[HTTP_NCOUNTERS] = {
    [HTTP_CTR_ACCEPTED] = {"accepted", false, "Connections accepted."},
    [HTTP_CTR_ACTIVE] = {"active", true, "Connections open now."},
    [HTTP_CTR_REFUSED] = {"refused", false,
                          "Connections refused with 503 beyond the "
                          "connection limit."},
    [HTTP_CTR_REQUESTS] = {"requests", false,
                           "Requests answered (a status page excluded)."},
    [HTTP_CTR_BYTES_OUT] = {"bytes_out", false,
                            "Bytes written to clients, heads and bodies."},
    [HTTP_CTR_CACHE_HITS] = {"cache_hits", false,
                             "Content cache lookups that found a fresh "
                             "entry."},
    [HTTP_CTR_CACHE_MISSES] = {"cache_misses", false,
                               "Content cache lookups that went to the file "
                               "system."},
    [HTTP_CTR_CACHE_EVICTIONS] = {"cache_evictions", false,
                                  "Content cache entries evicted to stay "
                                  "under the cache size."},
    [HTTP_CTR_CACHE_BYTES] = {"cache_bytes", true,
                              "Bytes charged against the cache size."},
    [HTTP_CTR_CACHE_ENTRIES] = {"cache_entries", true,
                                "Files in the content cache (one per file, "
                                "however many paths name it)."},
    [HTTP_CTR_TIMEOUTS] = {"timeouts", false,
                           "Connections closed for an idle, head or send "
                           "timeout."},
    [HTTP_CTR_ERRORS] = {"errors", false,
                         "Accept and socket errors other than a peer going "
                         "away."},
    [HTTP_CTR_LISTINGS_REFUSED] = {"listings_refused", false,
                                   "Directory listings answered 503 beyond "
                                   "the listing budget."},
    [HTTP_CTR_LISTING_BYTES] = {"listing_bytes", true,
                                "Bytes charged against the listing budget."},
    [HTTP_CTR_DENIED] = {"denied", false,
                         "Connections closed at accept by an address "
                         "rule."},
    [HTTP_CTR_RATE_LIMITED] = {"rate_limited", false,
                               "Requests answered 429 beyond their "
                               "address's request rate."},
    [HTTP_CTR_RATE_ENTRIES] = {"rate_entries", true,
                               "Client addresses in the request rate "
                               "table (at most its size)."},
    [HTTP_CTR_PROXY_HEADERS] = {"proxy_headers", false,
                                "PROXY protocol headers taken on a listener "
                                "that expects them."},
    [HTTP_CTR_PROXY_REFUSED] = {"proxy_refused", false,
                                "Connections closed for a missing, malformed, "
                                "oversized or unfinished PROXY protocol "
                                "header."},
};

static bool is_status(int i)
{
    return i >= HTTP_CTR_STATUS_1XX && i <= HTTP_CTR_STATUS_5XX;
}

static void line(struct http_buf *b, const char *name, uint64_t v)
{
    http_buf_append_str(b, name);
    http_buf_append_char(b, ' ');
    http_buf_append_u64(b, v);
    http_buf_append_char(b, '\n');
}

void http_counters_plain(struct http_buf *b, const uint64_t v[HTTP_NCOUNTERS])
{
    for (int i = 0; i < HTTP_NCOUNTERS; i++) {
        if (is_status(i)) {
            char name[] = "status_1xx";
            name[7] = (char) ('1' + i - HTTP_CTR_STATUS_1XX);
            line(b, name, v[i]);
        } else {
            line(b, counters[i].name, v[i]);
        }
    }
}

static void metric_name(struct http_buf *b,
                        const char *prefix,
                        const char *name,
                        bool gauge)
{
    http_buf_append_str(b, prefix);
    http_buf_append_char(b, '_');
    http_buf_append_str(b, name);
    if (!gauge)
        http_buf_append_str(b, "_total");
}

static void metric_head(struct http_buf *b,
                        const char *prefix,
                        const char *name,
                        bool gauge,
                        const char *help)
{
    http_buf_append_str(b, "# HELP ");
    metric_name(b, prefix, name, gauge);
    http_buf_append_char(b, ' ');
    http_buf_append_str(b, help);
    http_buf_append_str(b, "\n# TYPE ");
    metric_name(b, prefix, name, gauge);
    http_buf_append_str(b, gauge ? " gauge\n" : " counter\n");
}

void http_counters_prometheus(struct http_buf *b,
                              const char *prefix,
                              const uint64_t v[HTTP_NCOUNTERS])
{
    for (int i = 0; i < HTTP_NCOUNTERS; i++) {
        if (i == HTTP_CTR_STATUS_1XX) {
            metric_head(b, prefix, "responses", false,
                        "Responses by status class (a status page "
                        "excluded).");
            for (int c = 0; c < 5; c++) {
                metric_name(b, prefix, "responses", false);
                http_buf_append_str(b, "{class=\"");
                http_buf_append_char(b, (char) ('1' + c));
                http_buf_append_str(b, "xx\"} ");
                http_buf_append_u64(b, v[HTTP_CTR_STATUS_1XX + c]);
                http_buf_append_char(b, '\n');
            }
            i = HTTP_CTR_STATUS_5XX;
            continue;
        }
        metric_head(b, prefix, counters[i].name, counters[i].gauge,
                    counters[i].help);
        metric_name(b, prefix, counters[i].name, counters[i].gauge);
        http_buf_append_char(b, ' ');
        http_buf_append_u64(b, v[i]);
        http_buf_append_char(b, '\n');
    }
}
