/* httpd-log.c — the cached Date header and the access log.
 *
 * Both live in the calling thread's worker (rt_worker_self()): the Date
 * string is formatted by core at most once per second per thread, and log
 * lines gather in a per-thread buffer written out when it fills, once a
 * second by the worker loop, and at exit — one write(2) per flush on an
 * O_APPEND file, so lines of different workers never interleave. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "httpd.h"

#define LOG_BUF 65536
#define LOG_LINE_MAX 2048

const char *httpd_date_now(struct rt_worker_pub *w, int64_t *now)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec != w->date_second) {
        http_date_format(ts.tv_sec, w->date);
        w->date_second = ts.tv_sec;
    }
    *now = ts.tv_sec;
    return w->date;
}

void httpd_log_flush(struct rt_worker_pub *w)
{
    size_t off = 0;
    while (off < w->log_len) {
        ssize_t n =
            write(httpd_cfg.access_log_fd, w->log_buf + off, w->log_len - off);
        if (n <= 0)
            break; /* a full disk loses log lines, not requests */
        off += (size_t) n;
    }
    w->log_len = 0;
}

void httpd_log_request(struct httpd_req *r)
{
    if (httpd_cfg.access_log_fd < 0)
        return;
    struct rt_worker_pub *w = rt_worker_self();
    if (!w->log_buf) {
        w->log_buf = malloc(LOG_BUF);
        if (!w->log_buf)
            return;
        w->log_cap = LOG_BUF;
    }
    if (w->log_cap - w->log_len < LOG_LINE_MAX)
        httpd_log_flush(w);

    /* peer "METHOD target" status bytes [date] */
    struct http_buf b;
    int64_t now;
    http_buf_init(&b, w->log_buf + w->log_len, LOG_LINE_MAX);
    http_buf_append_str(&b, r->c->peer[0] ? r->c->peer : "-");
    http_buf_append_str(&b, " [");
    http_buf_append_str(&b, httpd_date_now(w, &now));
    http_buf_append_str(&b, "] \"");
    if (r->req) {
        const struct http_request *q = r->req;
        size_t tl = q->target.len > 1024 ? 1024 : q->target.len;
        /* the parser refused control bytes in the request line */
        http_buf_append(&b, r->rb + q->method_token.off, q->method_token.len);
        http_buf_append_char(&b, ' ');
        http_buf_append(&b, r->rb + q->target.off, tl);
        http_buf_append_str(
            &b, q->version == HTTP_VERSION_1_0 ? " HTTP/1.0" : " HTTP/1.1");
    } else {
        http_buf_append_char(&b, '-');
    }
    http_buf_append_str(&b, "\" ");
    http_buf_append_u64(&b, (uint64_t) r->status);
    http_buf_append_char(&b, ' ');
    http_buf_append_u64(&b, r->sent);
    http_buf_append_char(&b, '\n');
    if (!b.overflow)
        w->log_len += b.len;
}
