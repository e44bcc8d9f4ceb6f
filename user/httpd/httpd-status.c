/* httpd-status.c — the counters at --status-path: the same names, meanings
 * and order as khttpd's /proc/net/khttpd ("name value" lines), or the
 * Prometheus text exposition format at PATH/metrics or PATH?format=prometheus
 * (both rendered by core/http_counters.c).
 *
 * The page is built from one pass over the counters (rt_counters_sum), so
 * its values are each recent, not one atomic snapshot. A status request is
 * not a file request: it is kept out of requests and the status classes,
 * so a scraper does not move what it measures; its bytes still count in
 * bytes_out, which is every byte written to clients. */
#include <string.h>

#include "http_counters.h"
#include "httpd.h"

#define STATUS_BODY_MAX 16384

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
    return httpd_cfg.status_path && status_match(r) != 0;
}

static void build_body(struct http_buf *b, enum status_format fmt)
{
    uint64_t c[RT_NCOUNTERS], v[HTTP_NCOUNTERS];
    size_t cache_bytes, cache_entries;
    rt_counters_sum(c);
    httpd_cache_usage(&cache_bytes, &cache_entries);
    long active = rt_live_conns();

    v[HTTP_CTR_ACCEPTED] = c[RT_C_ACCEPTED];
    v[HTTP_CTR_ACTIVE] = active < 0 ? 0 : (uint64_t) active;
    v[HTTP_CTR_REFUSED] = c[RT_C_REFUSED];
    v[HTTP_CTR_REQUESTS] = c[HTTPD_C_REQUESTS];
    for (int i = 0; i < 5; i++)
        v[HTTP_CTR_STATUS_1XX + i] = c[HTTPD_C_STATUS_1XX + i];
    v[HTTP_CTR_BYTES_OUT] = c[RT_C_BYTES_OUT];
    v[HTTP_CTR_CACHE_HITS] = c[HTTPD_C_CACHE_HITS];
    v[HTTP_CTR_CACHE_MISSES] = c[HTTPD_C_CACHE_MISSES];
    v[HTTP_CTR_CACHE_EVICTIONS] = c[HTTPD_C_CACHE_EVICTIONS];
    v[HTTP_CTR_CACHE_BYTES] = cache_bytes;
    v[HTTP_CTR_CACHE_ENTRIES] = cache_entries;
    v[HTTP_CTR_TIMEOUTS] = c[RT_C_TIMEOUTS];
    v[HTTP_CTR_ERRORS] = c[RT_C_ERRORS];
    v[HTTP_CTR_LISTINGS_REFUSED] = c[HTTPD_C_LISTINGS_REFUSED];
    v[HTTP_CTR_PROXY_HEADERS] = c[HTTPD_C_PROXY_HEADERS];
    v[HTTP_CTR_PROXY_REFUSED] = c[HTTPD_C_PROXY_REFUSED];
    v[HTTP_CTR_LISTING_BYTES] = httpd_listing_bytes();
    v[HTTP_CTR_DENIED] = c[HTTPD_C_DENIED];
    v[HTTP_CTR_RATE_LIMITED] = c[HTTPD_C_RATE_LIMITED];
    v[HTTP_CTR_RATE_ENTRIES] = httpd_rate_entries();
    /* after khttpd's set, the ones only this server has */
    uint64_t reopen_failed = c[HTTPD_C_LOG_REOPEN_FAILED];
    uint64_t open_files = httpd_cache_open_files();
    if (fmt == STATUS_PLAIN) {
        http_counters_plain(b, v);
        http_buf_append_str(b, "log_reopen_failures ");
        http_buf_append_u64(b, reopen_failed);
        http_buf_append_str(b, "\ncache_open_files ");
        http_buf_append_u64(b, open_files);
        http_buf_append_char(b, '\n');
    } else {
        http_counters_prometheus(b, "ktcp_httpd", v);
        http_buf_append_str(
            b,
            "# HELP ktcp_httpd_log_reopen_failures_total Reopens of the "
            "access log that failed (SIGUSR1, SIGHUP).\n"
            "# TYPE ktcp_httpd_log_reopen_failures_total counter\n"
            "ktcp_httpd_log_reopen_failures_total ");
        http_buf_append_u64(b, reopen_failed);
        http_buf_append_str(
            b,
            "\n# HELP ktcp_httpd_cache_open_files Descriptors of files the "
            "content cache keeps open (--open-files).\n"
            "# TYPE ktcp_httpd_cache_open_files gauge\n"
            "ktcp_httpd_cache_open_files ");
        http_buf_append_u64(b, open_files);
        http_buf_append_char(b, '\n');
    }
    if (!httpd_cfg.tls)
        return;
    /* HTTPS (--tls-port): ktcp-httpd's own too */
    static const struct {
        const char *name, *help;
        int which;
    } tls[] = {
        {"tls_handshakes", "TLS handshakes completed.", HTTPD_C_TLS_HANDSHAKES},
        {"tls_handshake_failures",
         "TLS handshakes that failed (refused, garbage, plain HTTP, timed "
         "out).",
         HTTPD_C_TLS_HANDSHAKE_FAILURES},
        {"tls_ktls_tx", "TLS connections whose records the kernel writes.",
         HTTPD_C_TLS_KTLS_TX},
        {"tls_ktls_rx", "TLS connections whose records the kernel reads.",
         HTTPD_C_TLS_KTLS_RX},
    };
    for (size_t i = 0; i < sizeof(tls) / sizeof(tls[0]); i++) {
        if (fmt == STATUS_PROMETHEUS) {
            http_buf_append_str(b, "# HELP ktcp_httpd_");
            http_buf_append_str(b, tls[i].name);
            http_buf_append_str(b, "_total ");
            http_buf_append_str(b, tls[i].help);
            http_buf_append_str(b, "\n# TYPE ktcp_httpd_");
            http_buf_append_str(b, tls[i].name);
            http_buf_append_str(b, "_total counter\nktcp_httpd_");
            http_buf_append_str(b, tls[i].name);
            http_buf_append_str(b, "_total ");
        } else {
            http_buf_append_str(b, tls[i].name);
            http_buf_append_char(b, ' ');
        }
        http_buf_append_u64(b, c[tls[i].which]);
        http_buf_append_char(b, '\n');
    }
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
                              ? HTTP_COUNTERS_PROMETHEUS_TYPE
                              : HTTP_COUNTERS_PLAIN_TYPE,
                          b.len);
    return httpd_send_head(r, p, body, b.len, p->more);
}
