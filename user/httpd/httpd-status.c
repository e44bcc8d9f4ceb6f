/* httpd-status.c — the counters at --status-path: the same names, meanings
 * and order as khttpd's /proc/net/khttpd ("name value" lines), or the
 * Prometheus text exposition format at PATH/metrics or PATH?format=prometheus.
 *
 * The page is built from one pass over the counters (rt_counters_sum), so
 * its values are each recent, not one atomic snapshot. A status request is
 * not a file request: it is kept out of requests and the status classes,
 * so a scraper does not move what it measures; its bytes still count in
 * bytes_out, which is every byte written to clients. */
#include <string.h>

#include "httpd.h"

#define STATUS_BODY_MAX 4096

enum status_format { STATUS_PLAIN, STATUS_PROMETHEUS };

/* The request-target's path as sent, up to '?' or '#'. */
static size_t path_part(const char *p, size_t len)
{
    size_t i = 0;
    while (i < len && p[i] != '?' && p[i] != '#')
        i++;
    return i;
}

static bool query_asks_prometheus(const char *p, size_t len)
{
    static const char want[] = "format=prometheus";
    size_t i = path_part(p, len);
    if (i == len || p[i] != '?')
        return false;
    i++;
    while (i < len && p[i] != '#') {
        size_t j = i;
        while (j < len && p[j] != '&' && p[j] != '#')
            j++;
        if (j - i == sizeof(want) - 1 && memcmp(p + i, want, j - i) == 0)
            return true;
        i = j < len && p[j] == '&' ? j + 1 : j;
    }
    return false;
}

/* 0: not the status page; else 1 + enum status_format. */
static int status_match(const struct httpd_req *r)
{
    const char *sp = httpd_cfg.status_path;
    if (!sp || !r->req)
        return 0;
    const char *p = r->rb + r->req->path.off;
    size_t len = r->req->path.len;
    size_t plen = path_part(p, len);
    size_t splen = strlen(sp);
    static const char metrics[] = "/metrics";
    if (plen == splen && memcmp(p, sp, splen) == 0)
        return 1 + (query_asks_prometheus(p, len) ? STATUS_PROMETHEUS
                                                  : STATUS_PLAIN);
    if (plen == splen + sizeof(metrics) - 1 && memcmp(p, sp, splen) == 0 &&
        memcmp(p + splen, metrics, sizeof(metrics) - 1) == 0)
        return 1 + STATUS_PROMETHEUS;
    return 0;
}

bool httpd_status_wanted(const struct httpd_req *r)
{
    return status_match(r) != 0;
}

/* One counter: its /proc/net/khttpd name, its Prometheus name and help. */
struct status_line {
    const char *name;
    const char *metric; /* NULL: a status class, below */
    bool gauge;
    const char *help;
};

static void add_plain(struct http_buf *b, const char *name, uint64_t v)
{
    http_buf_append_str(b, name);
    http_buf_append_char(b, ' ');
    http_buf_append_u64(b, v);
    http_buf_append_char(b, '\n');
}

static void add_metric_head(struct http_buf *b,
                            const char *metric,
                            bool gauge,
                            const char *help)
{
    http_buf_append_str(b, "# HELP ");
    http_buf_append_str(b, metric);
    http_buf_append_char(b, ' ');
    http_buf_append_str(b, help);
    http_buf_append_str(b, "\n# TYPE ");
    http_buf_append_str(b, metric);
    http_buf_append_str(b, gauge ? " gauge\n" : " counter\n");
}

static void add_metric(struct http_buf *b,
                       const char *metric,
                       bool gauge,
                       const char *help,
                       uint64_t v)
{
    add_metric_head(b, metric, gauge, help);
    add_plain(b, metric, v);
}

static void build_body(struct http_buf *b, enum status_format fmt)
{
    uint64_t c[RT_NCOUNTERS];
    size_t cache_bytes, cache_entries;
    rt_counters_sum(c);
    httpd_cache_usage(&cache_bytes, &cache_entries);
    long active = rt_live_conns();
    if (active < 0)
        active = 0;

    if (fmt == STATUS_PLAIN) {
        add_plain(b, "accepted", c[RT_C_ACCEPTED]);
        add_plain(b, "active", (uint64_t) active);
        add_plain(b, "refused", c[RT_C_REFUSED]);
        add_plain(b, "requests", c[RT_C_REQUESTS]);
        for (int i = 0; i < 5; i++) {
            char name[] = "status_1xx";
            name[7] = (char) ('1' + i);
            add_plain(b, name, c[RT_C_STATUS_1XX + i]);
        }
        add_plain(b, "bytes_out", c[RT_C_BYTES_OUT]);
        add_plain(b, "cache_hits", c[RT_C_CACHE_HITS]);
        add_plain(b, "cache_misses", c[RT_C_CACHE_MISSES]);
        add_plain(b, "cache_evictions", c[RT_C_CACHE_EVICTIONS]);
        add_plain(b, "cache_bytes", cache_bytes);
        add_plain(b, "cache_entries", cache_entries);
        add_plain(b, "timeouts", c[RT_C_TIMEOUTS]);
        add_plain(b, "errors", c[RT_C_ERRORS]);
        return;
    }
    add_metric(b, "ktcp_httpd_accepted_total", false, "Connections accepted.",
               c[RT_C_ACCEPTED]);
    add_metric(b, "ktcp_httpd_active", true, "Connections open now.",
               (uint64_t) active);
    add_metric(b, "ktcp_httpd_refused_total", false,
               "Connections refused with 503 beyond --max-conns.",
               c[RT_C_REFUSED]);
    add_metric(b, "ktcp_httpd_requests_total", false,
               "Requests answered (the status page excluded).",
               c[RT_C_REQUESTS]);
    add_metric_head(b, "ktcp_httpd_responses_total", false,
                    "Responses by status class (the status page excluded).");
    for (int i = 0; i < 5; i++) {
        http_buf_append_str(b, "ktcp_httpd_responses_total{class=\"");
        http_buf_append_char(b, (char) ('1' + i));
        http_buf_append_str(b, "xx\"} ");
        http_buf_append_u64(b, c[RT_C_STATUS_1XX + i]);
        http_buf_append_char(b, '\n');
    }
    add_metric(b, "ktcp_httpd_bytes_out_total", false,
               "Bytes written to clients, heads and bodies.",
               c[RT_C_BYTES_OUT]);
    add_metric(b, "ktcp_httpd_cache_hits_total", false,
               "Content cache lookups that found a fresh entry.",
               c[RT_C_CACHE_HITS]);
    add_metric(b, "ktcp_httpd_cache_misses_total", false,
               "Content cache lookups that went to the file system.",
               c[RT_C_CACHE_MISSES]);
    add_metric(b, "ktcp_httpd_cache_evictions_total", false,
               "Content cache entries evicted to stay under --cache-size.",
               c[RT_C_CACHE_EVICTIONS]);
    add_metric(b, "ktcp_httpd_cache_bytes", true,
               "Bytes charged against --cache-size.", cache_bytes);
    add_metric(b, "ktcp_httpd_cache_entries", true,
               "Entries in the content cache.", cache_entries);
    add_metric(b, "ktcp_httpd_timeouts_total", false,
               "Connections closed for an idle, head or send timeout.",
               c[RT_C_TIMEOUTS]);
    add_metric(b, "ktcp_httpd_errors_total", false,
               "Accept and socket errors other than a peer going away.",
               c[RT_C_ERRORS]);
}

bool httpd_status_serve(struct httpd_req *r, struct http_plan *p)
{
    enum status_format fmt = (enum status_format)(status_match(r) - 1);
    char body[STATUS_BODY_MAX];
    struct http_buf b;

    r->uncounted = true;
    http_buf_init(&b, body, sizeof(body));
    build_body(&b, fmt);
    if (b.overflow) {
        http_plan_error(p, 500);
        return httpd_send_head(r, p, p->text, p->body_len, p->more);
    }
    http_plan_engine_body(p,
                          fmt == STATUS_PROMETHEUS
                              ? "text/plain; version=0.0.4; charset=utf-8"
                              : "text/plain; charset=utf-8",
                          b.len);
    return httpd_send_head(r, p, body, b.len, p->more);
}
