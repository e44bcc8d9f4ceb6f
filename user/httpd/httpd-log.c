/* httpd-log.c — the cached Date header, the request counters and the
 * access log.
 *
 * Both live in the calling thread's struct httpd_worker (the runtime's
 * rt_worker_data()): the Date string is formatted by core at most once per
 * second per thread, and log lines gather in a per-thread buffer written
 * out when it fills, once a second by the worker loop (the runtime's
 * worker_flush hook; the threads model: when its connection goes idle or
 * ends, or at a request a second later), and at exit — one write(2) per
 * flush on an O_APPEND file, so lines of different workers never
 * interleave.
 *
 * Lines are in the Combined Log Format that nginx, Apache, goaccess and
 * awstats know:
 *
 *   host ident authuser [10/Oct/2000:13:55:36 +0000] "GET / HTTP/1.1"
 *   status bytes "referer" "user-agent"
 *
 * ident and authuser are always "-" (no identd, no authentication); bytes
 * are body bytes; an absent field is "-". Like nginx, bytes of the request
 * line and the two headers that are '"', '\' or not printable ASCII are
 * written as \xHH, so a client cannot forge a line or a field. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "httpd.h"

#define LOG_BUF 65536
#define LOG_LINE_MAX 4096
#define LOG_TARGET_MAX 1024 /* request-target bytes logged */
#define LOG_FIELD_MAX 512   /* Referer and User-Agent bytes logged */
/* How long a reopen waits for the workers to write out their buffers. */
#define LOG_REOPEN_FLUSH_MS 1500

const char *httpd_date_now(struct httpd_worker *w, int64_t *now)
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

/* The first time the log was opened, its descriptor number: later opens
 * (SIGUSR1, SIGHUP) dup3 the new file onto this number, so a worker that
 * loaded it always writes to a file that is open, the old one or the new. */
static int log_fd_kept = -1;

int httpd_log_open(const char *path)
{
    /* Lines logged before a reopen belong in the file before it
     * (logrotate's renamed one): the workers write them out first, and
     * only then does the new file appear. */
    if (log_fd_kept >= 0 && atomic_load(&httpd_cfg.access_log_fd) >= 0)
        rt_flush_workers(LOG_REOPEN_FLUSH_MS);
    if (!path) {
        atomic_store(&httpd_cfg.access_log_fd, -1);
        return 0;
    }
    int fd;
    if (httpd_cfg.open_log && strcmp(path, "-") != 0) {
        fd = httpd_cfg.open_log(path); /* fd or -errno */
        if (fd < 0)
            return fd;
    } else {
        fd = strcmp(path, "-") == 0
                 ? fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)
                 : open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0)
            return -errno;
    }
    if (log_fd_kept < 0) {
        log_fd_kept = fd;
    } else if (fd != log_fd_kept) {
        int err = dup3(fd, log_fd_kept, O_CLOEXEC) < 0 ? -errno : 0;
        close(fd);
        if (err)
            return err;
    }
    atomic_store(&httpd_cfg.access_log_fd, log_fd_kept);
    return 0;
}

static void log_flush(struct httpd_worker *w)
{
    int fd =
        atomic_load_explicit(&httpd_cfg.access_log_fd, memory_order_relaxed);
    size_t off = 0;
    while (fd >= 0 && off < w->log_len) {
        ssize_t n = write(fd, w->log_buf + off, w->log_len - off);
        if (n <= 0)
            break; /* a full disk loses log lines, not requests */
        off += (size_t) n;
    }
    w->log_len = 0;
}

void httpd_worker_flush(void *data)
{
    struct httpd_worker *w = data;
    if (w->log_len)
        log_flush(w);
}

void httpd_worker_exit(void *data)
{
    struct httpd_worker *w = data;
    free(w->log_buf);
    w->log_buf = NULL;
}

/* Append p[0..len) with '"', '\', control bytes and bytes >= 0x7f as
 * \xHH, at most max input bytes. */
static void append_escaped(struct http_buf *b,
                           const char *p,
                           size_t len,
                           size_t max)
{
    static const char hex[] = "0123456789ABCDEF";
    if (len > max)
        len = max;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char) p[i];
        if (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\') {
            char e[4] = {'\\', 'x', hex[ch >> 4], hex[ch & 15]};
            http_buf_append(b, e, sizeof(e));
        } else {
            http_buf_append_char(b, (char) ch);
        }
    }
}

/* A header's value as a quoted field, "-" when absent. */
static void append_header_field(struct http_buf *b,
                                const struct httpd_req *r,
                                const char *name)
{
    const struct http_parser *p =
        (const struct http_parser *) ((const char *) r->req -
                                      offsetof(struct http_parser, req));
    uint32_t n = r->req->header_count < p->headers_capacity
                     ? r->req->header_count
                     : p->headers_capacity;
    size_t nlen = strlen(name);
    http_buf_append_char(b, '"');
    for (uint32_t i = 0; p->headers && i < n; i++) {
        const struct http_header *h = &p->headers[i];
        if (h->name.len == nlen &&
            strncasecmp(r->rb + h->name.off, name, nlen) == 0) {
            if (h->value.len == 0)
                break;
            append_escaped(b, r->rb + h->value.off, h->value.len,
                           LOG_FIELD_MAX);
            http_buf_append_char(b, '"');
            return;
        }
    }
    http_buf_append_str(b, "-\"");
}

static const char month_names[12][4] = {"Jan", "Feb", "Mar", "Apr",
                                        "May", "Jun", "Jul", "Aug",
                                        "Sep", "Oct", "Nov", "Dec"};

/* "10/Oct/2000:13:55:36 +0000" for second t, into out[32]. */
static void clf_date(int64_t t, char *out)
{
    struct tm tm;
    time_t tt = (time_t) t;
    gmtime_r(&tt, &tm);
    snprintf(out, 32, "%02d/%s/%04d:%02d:%02d:%02d +0000", tm.tm_mday,
             month_names[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
             tm.tm_sec);
}

/* This thread's buffered lines are from this second on (threads model). */
static __thread int64_t log_oldest_second;

/* noinline: the thread-local is reached afresh on each call, never through
 * an address a caller kept across a wait (rt.h) */
static __attribute__((noinline)) void log_line(struct httpd_worker *w,
                                               struct httpd_req *r)
{
    if (!w->log_buf) {
        w->log_buf = malloc(LOG_BUF);
        if (!w->log_buf)
            return;
        w->log_cap = LOG_BUF;
    }
    int64_t now;
    httpd_date_now(w, &now);
    /* A threads-model thread has no loop of its own to flush once a
     * second: it flushes when its oldest line is from an earlier second. */
    if (w->log_cap - w->log_len < LOG_LINE_MAX ||
        (!rt_worker_ticks() && w->log_len && log_oldest_second != now))
        log_flush(w);
    if (w->log_len == 0)
        log_oldest_second = now;

    struct http_buf b;
    char date[32];
    clf_date(now, date);
    http_buf_init(&b, w->log_buf + w->log_len, LOG_LINE_MAX);
    http_buf_append_str(&b, rt_conn_peer(r->c));
    http_buf_append_str(&b, " - - [");
    http_buf_append_str(&b, date);
    http_buf_append_str(&b, "] \"");
    if (r->req) {
        const struct http_request *q = r->req;
        append_escaped(&b, r->rb + q->method_token.off, q->method_token.len,
                       LOG_TARGET_MAX);
        http_buf_append_char(&b, ' ');
        append_escaped(&b, r->rb + q->target.off, q->target.len,
                       LOG_TARGET_MAX);
        http_buf_append_str(&b, q->version == HTTP_VERSION_1_0
                                    ? " HTTP/1.0\" "
                                    : " HTTP/1.1\" ");
    } else {
        /* no parsed request line: a parse error or a timeout */
        http_buf_append_str(&b, "-\" ");
    }
    http_buf_append_u64(&b, (uint64_t) r->status);
    http_buf_append_char(&b, ' ');
    http_buf_append_u64(&b, r->sent);
    http_buf_append_char(&b, ' ');
    if (r->req) {
        append_header_field(&b, r, "Referer");
        http_buf_append_char(&b, ' ');
        append_header_field(&b, r, "User-Agent");
    } else {
        http_buf_append_str(&b, "\"-\" \"-\"");
    }
    http_buf_append_char(&b, '\n');
    if (!b.overflow)
        w->log_len += b.len;
}

void httpd_log_request(struct httpd_req *r)
{
    if (!r->uncounted) {
        if (r->status >= 100 && r->status < 600)
            rt_count2(HTTPD_C_REQUESTS,
                      HTTPD_C_STATUS_1XX + r->status / 100 - 1);
        else
            rt_count(HTTPD_C_REQUESTS, 1);
    }
    if (atomic_load_explicit(&httpd_cfg.access_log_fd, memory_order_relaxed) <
        0)
        return;
    log_line(rt_worker_data(), r);
}
