/* htstress: HTTP load generator.
 *
 * Connection per request (HTTP/1.0: connect, one request, whole response,
 * close) or keep-alive (HTTP/1.1, many requests per connection, optionally
 * pipelined). Worker threads each run one epoll loop over their share of the
 * connections; every counter and histogram is per thread and merged at the
 * end. A request is "claimed" from its thread's budget (-n) or until the
 * deadline (-d), optionally paced (--rate); each claimed request ends exactly
 * once: as a good (2xx/3xx) or bad (other status) response, or as an error of
 * one kind. Nothing here is fatal to the run except set-up failures.
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "hist.h"
#include "http-response.h"

#define READ_BUFFER_SIZE (64 * 1024)
#define TICK_NS 100000000ull /* timeout scan and longest epoll sleep */
#define EVENTS_PER_WAIT 256

enum error_kind {
    ERR_CONNECT, /* socket(), connect() or the handshake failed */
    ERR_READ,    /* recv() failed (other than reset) */
    ERR_WRITE,   /* send() failed (other than reset) */
    ERR_TIMEOUT, /* no complete response within --timeout */
    ERR_RESET,   /* ECONNRESET / EPIPE */
    ERR_CLOSED,  /* the server closed with a response outstanding */
    ERR_HUP,     /* EPOLLHUP with a response outstanding */
    ERR_PARSE,   /* the response was not valid HTTP/1.x */
    ERR_KINDS
};

static const char *const error_names[ERR_KINDS] = {
    "connect", "read", "write", "timeout", "reset", "closed", "hup", "parse",
};

static struct {
    const char *url;
    char host[256];
    char port[16];
    char path[4096];
    struct sockaddr_storage addr;
    socklen_t addr_len;
    uint64_t requests; /* -n; 0 when running by duration */
    double duration_s; /* -d; 0 when running by count */
    uint64_t concurrency;
    uint64_t threads;
    uint64_t pipeline;
    bool keep_alive;
    double rate; /* requests per second over all threads; 0 = as fast as
                    possible */
    uint64_t timeout_ms;
    bool json;
    bool progress;
    char *extra_headers; /* "Name: value\r\n" lines */
    size_t extra_headers_len;
} opt = {
    .concurrency = 1,
    .threads = 1,
    .pipeline = 1,
    .timeout_ms = 5000,
};

/* Built once before the workers start, read-only afterwards. */
static char *request_batch; /* opt.pipeline copies of the request */
static size_t request_len;
static uint64_t run_start_ns;
static uint64_t run_deadline_ns; /* 0: no deadline */
static volatile sig_atomic_t interrupted;

struct stats {
    uint64_t good;
    uint64_t bad;
    uint64_t status_class[6]; /* [1..5] = 1xx..5xx, [0] = anything else */
    uint64_t errors[ERR_KINDS];
    uint64_t connects; /* connections established */
    uint64_t bytes_read;
};

enum conn_state { CONN_IDLE, CONN_CONNECTING, CONN_OPEN };

struct conn {
    int fd;
    enum conn_state state;
    bool want_write;    /* EPOLLOUT registered */
    bool server_closes; /* a response said the server closes after it */
    bool refill_queued; /* on its worker's refill list */
    uint32_t reserved;  /* claimed, not yet handed to send() */
    uint32_t in_flight; /* handed to send(), no response yet */
    size_t write_off, write_len; /* pending bytes of request_batch */
    uint64_t *issued_at;         /* ring of opt.pipeline issue times */
    uint32_t ring_head;
    struct http_response_parser parser;
};

struct worker {
    pthread_t thread;
    int epfd;
    struct conn *conns;
    size_t nconns;
    uint64_t budget; /* requests this thread may still claim (-n) */
    double rate;     /* this thread's share of --rate */
    uint64_t rate_issued;
    bool need_rescan;     /* some connection could not get work it wanted */
    uint64_t outstanding; /* claimed requests not yet ended */
    /* Keep-alive connections that got responses in this epoll batch; they
     * send their next requests together after the batch, as wrk does, so
     * the server finds many requests ready at once. */
    struct conn **refill;
    size_t nrefill;
    char *readbuf;
    struct stats stats;
    struct hist hist;
    uint64_t finished_ns;
    /* Read by the progress line without locks (relaxed atomics). */
    uint64_t published_done;
    uint64_t published_errors;
    int finished;
};

static bool stopping(uint64_t now)
{
    return interrupted || (run_deadline_ns && now >= run_deadline_ns);
}

static uint64_t error_total(const struct stats *s)
{
    uint64_t total = 0;
    for (int k = 0; k < ERR_KINDS; k++)
        total += s->errors[k];
    return total;
}

/* Claim up to want requests for this thread; 0 when none may start now. */
static uint32_t claim(struct worker *w, uint32_t want, uint64_t now)
{
    if (!want || stopping(now))
        return 0;
    if (opt.requests && want > w->budget)
        want = (uint32_t) w->budget;
    if (w->rate > 0) {
        uint64_t allowed =
            (uint64_t) ((double) (now - run_start_ns) * w->rate / 1e9) + 1;
        uint64_t tokens =
            allowed > w->rate_issued ? allowed - w->rate_issued : 0;
        if (tokens < want) {
            want = (uint32_t) tokens;
            w->need_rescan = true;
        }
        w->rate_issued += want;
    }
    if (opt.requests)
        w->budget -= want;
    w->outstanding += want;
    return want;
}

/* Requests that were claimed but that the server never took (it closed the
 * connection as announced): give them back so they are issued again. */
static void unclaim(struct worker *w, uint32_t n)
{
    if (opt.requests)
        w->budget += n;
    w->outstanding -= n;
    if (n)
        w->need_rescan = true;
}

static bool claims_possible(const struct worker *w, uint64_t now)
{
    return !stopping(now) && (!opt.requests || w->budget > 0);
}

static void ring_push(struct conn *c, uint64_t t)
{
    uint32_t n = c->reserved + c->in_flight;
    c->issued_at[(c->ring_head + n) % opt.pipeline] = t;
}

static uint64_t ring_pop(struct conn *c)
{
    uint64_t t = c->issued_at[c->ring_head];
    c->ring_head = (c->ring_head + 1) % (uint32_t) opt.pipeline;
    return t;
}

static void set_events(struct worker *w, struct conn *c, bool want_write)
{
    if (c->want_write == want_write)
        return;
    struct epoll_event ev = {
        .events = EPOLLIN | EPOLLRDHUP | (want_write ? EPOLLOUT : 0),
        .data.ptr = c,
    };
    epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_write = want_write;
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd); /* also removes it from the epoll set */
    c->fd = -1;
    c->state = CONN_IDLE;
    c->want_write = false;
    c->server_closes = false;
    c->reserved = c->in_flight = 0;
    c->write_off = c->write_len = 0;
    c->ring_head = 0;
}

/* The connection failed: every request it held ends as an error of kind. */
static void conn_fail(struct worker *w, struct conn *c, enum error_kind kind)
{
    uint32_t lost = c->reserved + c->in_flight;
    /* A reset of an idle keep-alive connection loses no request but is
     * still a socket error worth counting; a plain close of one is not. */
    w->stats.errors[kind] += lost ? lost : (kind != ERR_CLOSED);
    w->outstanding -= lost;
    conn_close(c);
    w->need_rescan = true;
}

static int socket_error(int fd)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
        return errno;
    return err;
}

static enum error_kind kind_of_errno(int err, enum error_kind otherwise)
{
    return err == ECONNRESET || err == EPIPE ? ERR_RESET : otherwise;
}

/* Send what is pending; false if the connection failed. */
static bool conn_flush(struct worker *w, struct conn *c)
{
    while (c->write_off < c->write_len) {
        ssize_t n = send(c->fd, request_batch + c->write_off,
                         c->write_len - c->write_off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                set_events(w, c, true);
                return true;
            }
            conn_fail(w, c, kind_of_errno(errno, ERR_WRITE));
            return false;
        }
        c->write_off += (size_t) n;
    }
    c->write_off = c->write_len = 0;
    set_events(w, c, false);
    return true;
}

/* Hand the reserved requests to send() as one write. */
static bool conn_send_reserved(struct worker *w, struct conn *c)
{
    if (c->state != CONN_OPEN || c->write_len || !c->reserved)
        return true;
    c->write_off = 0;
    c->write_len = c->reserved * request_len;
    c->in_flight += c->reserved;
    c->reserved = 0;
    return conn_flush(w, c);
}

/* Keep-alive: top the connection up to the pipeline depth. */
static bool conn_refill(struct worker *w, struct conn *c, uint64_t now)
{
    if (c->state != CONN_OPEN || c->server_closes || c->write_len)
        return true;
    uint32_t room = (uint32_t) opt.pipeline - c->reserved - c->in_flight;
    uint32_t n = claim(w, room, now);
    for (uint32_t i = 0; i < n; i++) {
        ring_push(c, now);
        c->reserved++;
    }
    return conn_send_reserved(w, c);
}

/* Open a connection for the next request(s); leaves it idle when no request
 * may start now. */
static void conn_start(struct worker *w, struct conn *c, uint64_t now)
{
    uint32_t n = claim(w, opt.keep_alive ? (uint32_t) opt.pipeline : 1, now);
    if (!n)
        return;
    for (uint32_t i = 0; i < n; i++) {
        ring_push(c, now);
        c->reserved++;
    }
    c->fd = socket(opt.addr.ss_family,
                   SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        conn_fail(w, c, ERR_CONNECT);
        return;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    http_response_parser_init(&c->parser);
    if (connect(c->fd, (struct sockaddr *) &opt.addr, opt.addr_len) == 0) {
        c->state = CONN_OPEN;
    } else if (errno == EINPROGRESS) {
        c->state = CONN_CONNECTING;
    } else {
        conn_fail(w, c, ERR_CONNECT);
        return;
    }
    c->want_write = c->state == CONN_CONNECTING;
    struct epoll_event ev = {
        .events = EPOLLIN | EPOLLRDHUP | (c->want_write ? EPOLLOUT : 0),
        .data.ptr = c,
    };
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, c->fd, &ev)) {
        conn_fail(w, c, ERR_CONNECT);
        return;
    }
    if (c->state == CONN_OPEN) {
        w->stats.connects++;
        conn_send_reserved(w, c);
    }
}

static void record_response(struct worker *w, struct conn *c, uint64_t now)
{
    uint64_t issued = ring_pop(c);
    hist_record(&w->hist, now - issued);
    c->in_flight--;
    w->outstanding--;
    int status = c->parser.status;
    int cls = status >= 100 && status < 600 ? status / 100 : 0;
    w->stats.status_class[cls]++;
    if (cls == 2 || cls == 3)
        w->stats.good++;
    else
        w->stats.bad++;
    if (c->parser.close_after)
        c->server_closes = true;
}

/* After a response the server said it would close after, or in
 * connection-per-request mode: close, hand back what the server will never
 * answer, and start again. */
static void conn_recycle(struct worker *w, struct conn *c, uint64_t now)
{
    unclaim(w, c->reserved + c->in_flight);
    conn_close(c);
    conn_start(w, c, now);
}

/* Read once (level-triggered) and parse; false if the socket is gone. */
static bool conn_read(struct worker *w, struct conn *c, bool hup, uint64_t now)
{
    ssize_t n = recv(c->fd, w->readbuf, READ_BUFFER_SIZE, 0);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return true;
        conn_fail(w, c, kind_of_errno(errno, ERR_READ));
        return false;
    }
    if (n == 0) {
        enum http_parse_result r = http_response_parse_eof(&c->parser);
        if (r == HTTP_PARSE_DONE && c->in_flight) {
            record_response(w, c, now);
            http_response_parser_init(&c->parser);
        }
        if (r == HTTP_PARSE_ERROR || c->in_flight || c->reserved) {
            if (c->server_closes && r != HTTP_PARSE_ERROR)
                conn_recycle(w, c, now); /* announced close, nothing cut */
            else
                conn_fail(w, c, hup ? ERR_HUP : ERR_CLOSED);
        } else {
            conn_close(c); /* clean close between responses */
            conn_start(w, c, now);
        }
        return false;
    }
    w->stats.bytes_read += (uint64_t) n;
    if (!c->in_flight) {
        /* Bytes nobody asked for. */
        conn_fail(w, c, ERR_PARSE);
        return false;
    }
    const char *p = w->readbuf;
    size_t left = (size_t) n;
    while (left) {
        size_t used;
        enum http_parse_result r =
            http_response_parse(&c->parser, p, left, &used);
        p += used;
        left -= used;
        if (r == HTTP_PARSE_ERROR) {
            conn_fail(w, c, ERR_PARSE);
            return false;
        }
        if (r == HTTP_PARSE_MORE)
            break;
        record_response(w, c, now);
        http_response_parser_init(&c->parser);
        if (!opt.keep_alive || c->server_closes) {
            conn_recycle(w, c, now);
            return false;
        }
        if (left && !c->in_flight) {
            conn_fail(w, c, ERR_PARSE);
            return false;
        }
    }
    if (!c->refill_queued) {
        c->refill_queued = true;
        w->refill[w->nrefill++] = c;
    }
    return true;
}

static void handle_event(struct worker *w,
                         struct conn *c,
                         uint32_t events,
                         uint64_t now)
{
    if (c->state == CONN_CONNECTING) {
        int err = socket_error(c->fd);
        if (err || (events & (EPOLLERR | EPOLLHUP))) {
            conn_fail(w, c, ERR_CONNECT);
            return;
        }
        if (!(events & EPOLLOUT))
            return;
        c->state = CONN_OPEN;
        w->stats.connects++;
        if (!conn_send_reserved(w, c))
            return;
        if (!c->write_len)
            set_events(w, c, false);
        return;
    }
    if (events & EPOLLERR) {
        /* The error belongs to this socket: ask it, not errno. */
        conn_fail(w, c, kind_of_errno(socket_error(c->fd), ERR_READ));
        return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) {
        if (!conn_read(w, c, events & EPOLLHUP, now))
            return;
        if ((events & EPOLLHUP) && !(events & EPOLLIN)) {
            conn_fail(w, c, ERR_HUP);
            return;
        }
    }
    if ((events & EPOLLOUT) && c->write_len)
        conn_flush(w, c);
}

static void check_timeouts(struct worker *w, uint64_t now)
{
    uint64_t timeout_ns = opt.timeout_ms * 1000000ull;
    for (size_t i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        if (c->state == CONN_IDLE || !(c->reserved + c->in_flight))
            continue;
        if (now - c->issued_at[c->ring_head] > timeout_ns)
            conn_fail(w, c, ERR_TIMEOUT);
    }
}

/* Give every connection that wants work a chance to claim it. */
static void rescan(struct worker *w, uint64_t now)
{
    w->need_rescan = false;
    for (size_t i = 0; i < w->nconns && claims_possible(w, now); i++) {
        struct conn *c = &w->conns[i];
        if (c->state == CONN_IDLE)
            conn_start(w, c, now);
        else if (opt.keep_alive)
            conn_refill(w, c, now);
    }
}

static int wait_timeout_ms(const struct worker *w, uint64_t now)
{
    uint64_t wait = TICK_NS;
    if (w->need_rescan && w->rate > 0) {
        uint64_t next =
            run_start_ns + (uint64_t) ((double) w->rate_issued * 1e9 / w->rate);
        wait = next > now ? next - now : 0;
        if (wait > TICK_NS)
            wait = TICK_NS;
    } else if (w->need_rescan) {
        wait = 0;
    }
    if (run_deadline_ns && now < run_deadline_ns &&
        run_deadline_ns - now < wait)
        wait = run_deadline_ns - now;
    return (int) ((wait + 999999) / 1000000);
}

static void publish_progress(struct worker *w)
{
    uint64_t errors = error_total(&w->stats);
    __atomic_store_n(&w->published_done, w->stats.good + w->stats.bad + errors,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&w->published_errors, errors, __ATOMIC_RELAXED);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct epoll_event events[EVENTS_PER_WAIT];
    uint64_t now = now_ns(), next_tick = now + TICK_NS;

    for (size_t i = 0; i < w->nconns; i++)
        conn_start(w, &w->conns[i], now);
    for (;;) {
        now = now_ns();
        if (w->need_rescan)
            rescan(w, now);
        if (!w->outstanding && !claims_possible(w, now))
            break;
        int n = epoll_wait(w->epfd, events, EVENTS_PER_WAIT,
                           wait_timeout_ms(w, now));
        now = now_ns();
        for (int i = 0; i < n; i++)
            handle_event(w, events[i].data.ptr, events[i].events, now);
        for (size_t i = 0; i < w->nrefill; i++) {
            w->refill[i]->refill_queued = false;
            conn_refill(w, w->refill[i], now);
        }
        w->nrefill = 0;
        if (now >= next_tick) {
            check_timeouts(w, now);
            next_tick = now + TICK_NS;
        }
        publish_progress(w);
    }
    for (size_t i = 0; i < w->nconns; i++)
        conn_close(&w->conns[i]);
    w->finished_ns = now_ns();
    publish_progress(w);
    __atomic_store_n(&w->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: htstress [options] URL\n"
        "HTTP load generator. URL is http://HOST[:PORT][/PATH], HOST an IPv4 "
        "address,\n"
        "a name or [IPv6]. Runs for -n requests or -d seconds, whichever is "
        "given.\n"
        "\n"
        "  -n, --requests N      total requests (default 10000 unless -d is "
        "given)\n"
        "  -d, --duration SEC    run for SEC seconds instead of a count\n"
        "  -c, --concurrency N   connections open at once, over all threads "
        "(default 1)\n"
        "  -t, --threads N       worker threads, each with its own epoll loop "
        "(default 1)\n"
        "  -k, --keep-alive      HTTP/1.1, many requests per connection "
        "(default: off,\n"
        "                        one HTTP/1.0 request per connection)\n"
        "  -p, --pipeline N      requests in flight per keep-alive connection "
        "(default 1)\n"
        "  -r, --rate R          at most R requests/s over all threads "
        "(default 0 = no limit)\n"
        "  -H, --header 'N: V'   extra request header, repeatable (default "
        "none)\n"
        "      --timeout MS      a request without a complete response after "
        "MS ms is a\n"
        "                        timeout error (default 5000)\n"
        "      --json            print one JSON object on stdout instead of "
        "the summary\n"
        "      --progress        live progress line on stderr even when it is "
        "not a tty\n"
        "                        (default: only on a tty, never with --json)\n"
        "  -h, --help            this help\n"
        "\n"
        "Latency is from the moment a request is issued (its connect in\n"
        "connection-per-request mode) to the last byte of its response.\n"
        "Good responses are 2xx/3xx, bad ones anything else; socket errors are "
        "counted\n"
        "per request lost, by kind, and never stop the run.\n"
        "Exit status: 0 the run completed (see the counts), 2 bad usage,\n"
        "3 set-up failed (address, threads, memory).\n");
}

static bool add_header(const char *h)
{
    if (!strchr(h, ':') || strpbrk(h, "\r\n")) {
        fprintf(stderr,
                "htstress: --header '%s': expected 'Name: value' on one line\n",
                h);
        return false;
    }
    size_t n = strlen(h);
    char *grown = realloc(opt.extra_headers, opt.extra_headers_len + n + 3);
    if (!grown)
        return false;
    opt.extra_headers = grown;
    memcpy(opt.extra_headers + opt.extra_headers_len, h, n);
    memcpy(opt.extra_headers + opt.extra_headers_len + n, "\r\n", 3);
    opt.extra_headers_len += n + 2;
    return true;
}

static bool parse_url(const char *url)
{
    const char *prefix = "http://";
    if (strncmp(url, prefix, strlen(prefix))) {
        fprintf(stderr, "htstress: URL '%s': only http:// URLs are supported\n",
                url);
        return false;
    }
    const char *authority = url + strlen(prefix);
    const char *slash = strchr(authority, '/');
    size_t auth_len = slash ? (size_t) (slash - authority) : strlen(authority);
    char hostport[300];
    if (!auth_len || auth_len >= sizeof(hostport))
        goto bad;
    memcpy(hostport, authority, auth_len);
    hostport[auth_len] = '\0';
    if (!split_host_port(hostport, opt.host, sizeof(opt.host), opt.port,
                         sizeof(opt.port))) {
        /* No port given: 80. */
        char with_port[310];
        snprintf(with_port, sizeof(with_port), "%s:80", hostport);
        if (!split_host_port(with_port, opt.host, sizeof(opt.host), opt.port,
                             sizeof(opt.port)))
            goto bad;
    }
    const char *path = slash ? slash : "/";
    if (strlen(path) >= sizeof(opt.path) || strpbrk(path, " \r\n"))
        goto bad;
    strcpy(opt.path, path);
    return true;
bad:
    fprintf(stderr, "htstress: URL '%s': expected http://HOST[:PORT][/PATH]\n",
            url);
    return false;
}

static bool build_request(void)
{
    bool v6 = strchr(opt.host, ':') != NULL;
    char host_header[300];
    snprintf(host_header, sizeof(host_header), v6 ? "[%s]:%s" : "%s:%s",
             opt.host, opt.port);
    char *one = NULL;
    int n = asprintf(&one, "GET %s HTTP/1.%d\r\nHost: %s\r\n%.*s\r\n", opt.path,
                     opt.keep_alive ? 1 : 0, host_header,
                     (int) opt.extra_headers_len,
                     opt.extra_headers ? opt.extra_headers : "");
    if (n < 0)
        return false;
    request_len = (size_t) n;
    request_batch = malloc(request_len * opt.pipeline);
    if (!request_batch) {
        free(one);
        return false;
    }
    for (uint64_t i = 0; i < opt.pipeline; i++)
        memcpy(request_batch + i * request_len, one, request_len);
    free(one);
    return true;
}

static void on_interrupt(int sig)
{
    (void) sig;
    interrupted = 1;
}

static void print_progress(struct worker *workers, uint64_t now, bool final)
{
    uint64_t done = 0, errors = 0;
    for (uint64_t i = 0; i < opt.threads; i++) {
        done += __atomic_load_n(&workers[i].published_done, __ATOMIC_RELAXED);
        errors +=
            __atomic_load_n(&workers[i].published_errors, __ATOMIC_RELAXED);
    }
    double secs = (double) (now - run_start_ns) / 1e9;
    fprintf(stderr, "\r[%6.1fs] %llu requests done, %.0f req/s, %llu errors%s",
            secs, (unsigned long long) done,
            secs > 0 ? (double) done / secs : 0.0, (unsigned long long) errors,
            final ? "\n" : "   ");
}

static void print_summary(const struct stats *s,
                          const struct hist *h,
                          double secs,
                          uint64_t done)
{
    const char *mode = opt.keep_alive ? "keep-alive" : "connection per request";
    printf("htstress %s: %s, pipeline %llu, %llu threads, %llu connections\n",
           opt.url, mode, (unsigned long long) opt.pipeline,
           (unsigned long long) opt.threads,
           (unsigned long long) opt.concurrency);
    printf("requests:    %llu in %.3f s = %.1f req/s\n",
           (unsigned long long) done, secs,
           secs > 0 ? (double) done / secs : 0.0);
    printf(
        "responses:   good %llu (2xx %llu, 3xx %llu), bad %llu (1xx %llu, 4xx "
        "%llu, 5xx %llu, other %llu)\n",
        (unsigned long long) s->good, (unsigned long long) s->status_class[2],
        (unsigned long long) s->status_class[3], (unsigned long long) s->bad,
        (unsigned long long) s->status_class[1],
        (unsigned long long) s->status_class[4],
        (unsigned long long) s->status_class[5],
        (unsigned long long) s->status_class[0]);
    printf("errors:      %llu (", (unsigned long long) error_total(s));
    for (int k = 0; k < ERR_KINDS; k++)
        printf("%s%s %llu", k ? ", " : "", error_names[k],
               (unsigned long long) s->errors[k]);
    printf(")\n");
    printf("connections: %llu established, %llu bytes read\n",
           (unsigned long long) s->connects,
           (unsigned long long) s->bytes_read);
    printf(
        "latency us:  min %.1f  p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max "
        "%.1f  mean %.1f\n",
        h->count ? (double) h->min / 1e3 : 0.0,
        (double) hist_percentile(h, 50) / 1e3,
        (double) hist_percentile(h, 90) / 1e3,
        (double) hist_percentile(h, 99) / 1e3,
        (double) hist_percentile(h, 99.9) / 1e3, (double) h->max / 1e3,
        hist_mean(h) / 1e3);
}

static void print_json(const struct stats *s,
                       const struct hist *h,
                       double secs,
                       uint64_t done)
{
    printf("{\"tool\":\"htstress\",\"url\":");
    json_write_string(stdout, opt.url);
    printf(
        ",\"mode\":\"%s\",\"pipeline\":%llu,\"threads\":%llu,"
        "\"connections\":%llu,\"rate_limit\":%g,\"timeout_ms\":%llu,",
        opt.keep_alive ? "keep-alive" : "close",
        (unsigned long long) opt.pipeline, (unsigned long long) opt.threads,
        (unsigned long long) opt.concurrency, opt.rate,
        (unsigned long long) opt.timeout_ms);
    printf(
        "\"seconds\":%.6f,\"requests\":%llu,\"req_per_s\":%.3f,"
        "\"good\":%llu,\"bad\":%llu,",
        secs, (unsigned long long) done, secs > 0 ? (double) done / secs : 0.0,
        (unsigned long long) s->good, (unsigned long long) s->bad);
    printf(
        "\"status\":{\"1xx\":%llu,\"2xx\":%llu,\"3xx\":%llu,\"4xx\":%llu,"
        "\"5xx\":%llu,\"other\":%llu},",
        (unsigned long long) s->status_class[1],
        (unsigned long long) s->status_class[2],
        (unsigned long long) s->status_class[3],
        (unsigned long long) s->status_class[4],
        (unsigned long long) s->status_class[5],
        (unsigned long long) s->status_class[0]);
    printf("\"errors\":{\"total\":%llu", (unsigned long long) error_total(s));
    for (int k = 0; k < ERR_KINDS; k++)
        printf(",\"%s\":%llu", error_names[k],
               (unsigned long long) s->errors[k]);
    printf("},\"connects\":%llu,\"bytes_read\":%llu,",
           (unsigned long long) s->connects,
           (unsigned long long) s->bytes_read);
    printf(
        "\"latency_us\":{\"count\":%llu,\"min\":%.3f,\"mean\":%.3f,"
        "\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"p99_9\":%.3f,\"max\":%.3f}}"
        "\n",
        (unsigned long long) h->count, h->count ? (double) h->min / 1e3 : 0.0,
        hist_mean(h) / 1e3, (double) hist_percentile(h, 50) / 1e3,
        (double) hist_percentile(h, 90) / 1e3,
        (double) hist_percentile(h, 99) / 1e3,
        (double) hist_percentile(h, 99.9) / 1e3, (double) h->max / 1e3);
}

static bool parse_options(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"requests", required_argument, NULL, 'n'},
        {"duration", required_argument, NULL, 'd'},
        {"concurrency", required_argument, NULL, 'c'},
        {"threads", required_argument, NULL, 't'},
        {"keep-alive", no_argument, NULL, 'k'},
        {"pipeline", required_argument, NULL, 'p'},
        {"rate", required_argument, NULL, 'r'},
        {"header", required_argument, NULL, 'H'},
        {"timeout", required_argument, NULL, 'T'},
        {"json", no_argument, NULL, 'J'},
        {"progress", no_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool progress_forced = false;
    int ch;
    while ((ch = getopt_long(argc, argv, "n:d:c:t:kp:r:H:h", longopts, NULL)) !=
           -1) {
        switch (ch) {
        case 'n':
            if (!parse_u64_option("--requests", optarg, 1, UINT64_MAX / 2,
                                  &opt.requests))
                return false;
            break;
        case 'd':
            if (!parse_double_option("--duration", optarg, 0.001, 86400,
                                     &opt.duration_s))
                return false;
            break;
        case 'c':
            if (!parse_u64_option("--concurrency", optarg, 1, 1000000,
                                  &opt.concurrency))
                return false;
            break;
        case 't':
            if (!parse_u64_option("--threads", optarg, 1, 1024, &opt.threads))
                return false;
            break;
        case 'k':
            opt.keep_alive = true;
            break;
        case 'p':
            if (!parse_u64_option("--pipeline", optarg, 1, 1024, &opt.pipeline))
                return false;
            break;
        case 'r':
            if (!parse_double_option("--rate", optarg, 0, 1e9, &opt.rate))
                return false;
            break;
        case 'H':
            if (!add_header(optarg))
                return false;
            break;
        case 'T':
            if (!parse_u64_option("--timeout", optarg, 1, 3600000,
                                  &opt.timeout_ms))
                return false;
            break;
        case 'J':
            opt.json = true;
            break;
        case 'P':
            progress_forced = true;
            break;
        case 'h':
            usage(stdout);
            exit(EXIT_OK);
        default:
            usage(stderr);
            return false;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "htstress: expected exactly one URL (see --help)\n");
        return false;
    }
    opt.url = argv[optind];
    if (opt.requests && opt.duration_s > 0) {
        fprintf(stderr,
                "htstress: give either --requests or --duration, not both\n");
        return false;
    }
    if (!opt.requests && opt.duration_s <= 0)
        opt.requests = 10000;
    if (opt.pipeline > 1 && !opt.keep_alive) {
        fprintf(stderr,
                "htstress: --pipeline needs --keep-alive "
                "(a connection-per-request run sends one request per "
                "connection)\n");
        return false;
    }
    if (opt.threads > opt.concurrency)
        opt.threads = opt.concurrency; /* a thread without a connection idles */
    opt.progress = !opt.json && (progress_forced || isatty(STDERR_FILENO));
    return parse_url(opt.url);
}

int main(int argc, char **argv)
{
    if (!parse_options(argc, argv))
        return EXIT_USAGE;
    if (!resolve_tcp_address(opt.host, opt.port, &opt.addr, &opt.addr_len))
        return EXIT_SETUP;
    if (!build_request()) {
        fprintf(stderr, "htstress: cannot build the request: out of memory\n");
        return EXIT_SETUP;
    }

    raise_fd_limit(opt.concurrency + opt.threads + 64);
    struct worker *workers = calloc(opt.threads, sizeof(*workers));
    struct conn *conns = calloc(opt.concurrency, sizeof(*conns));
    uint64_t *rings = calloc(opt.concurrency * opt.pipeline, sizeof(uint64_t));
    if (!workers || !conns || !rings) {
        fprintf(stderr,
                "htstress: cannot allocate %llu connections: out of memory\n",
                (unsigned long long) opt.concurrency);
        return EXIT_SETUP;
    }
    for (uint64_t i = 0; i < opt.concurrency; i++) {
        conns[i].fd = -1;
        conns[i].issued_at = rings + i * opt.pipeline;
    }

    struct sigaction sa = {.sa_handler = on_interrupt};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    run_start_ns = now_ns();
    if (opt.duration_s > 0)
        run_deadline_ns = run_start_ns + (uint64_t) (opt.duration_s * 1e9);
    size_t next_conn = 0;
    uint64_t started = 0;
    for (uint64_t i = 0; i < opt.threads; i++) {
        struct worker *w = &workers[i];
        w->nconns =
            opt.concurrency / opt.threads + (i < opt.concurrency % opt.threads);
        w->conns = conns + next_conn;
        next_conn += w->nconns;
        w->budget =
            opt.requests / opt.threads + (i < opt.requests % opt.threads);
        w->rate = opt.rate / (double) opt.threads;
        hist_init(&w->hist);
        w->readbuf = malloc(READ_BUFFER_SIZE);
        w->refill = calloc(w->nconns, sizeof(*w->refill));
        w->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (!w->readbuf || !w->refill || w->epfd < 0) {
            fprintf(stderr, "htstress: cannot set up worker %llu: %s\n",
                    (unsigned long long) i, strerror(errno));
            interrupted = 1;
            break;
        }
        int err = pthread_create(&w->thread, NULL, worker_main, w);
        if (err) {
            fprintf(stderr, "htstress: cannot start worker thread %llu: %s\n",
                    (unsigned long long) i, strerror(err));
            interrupted = 1;
            break;
        }
        started++;
    }

    /* Progress while the workers run; bounded by their own termination. */
    uint64_t next_print = run_start_ns + 1000000000ull;
    for (;;) {
        uint64_t finished = 0;
        for (uint64_t i = 0; i < started; i++)
            finished += __atomic_load_n(&workers[i].finished, __ATOMIC_ACQUIRE);
        if (finished == started)
            break;
        usleep(20000);
        uint64_t now = now_ns();
        if (opt.progress && now >= next_print) {
            print_progress(workers, now, false);
            next_print += 1000000000ull;
        }
    }
    struct stats total = {0};
    static struct hist merged;
    hist_init(&merged);
    uint64_t end_ns = run_start_ns;
    for (uint64_t i = 0; i < started; i++) {
        struct worker *w = &workers[i];
        pthread_join(w->thread, NULL);
        total.good += w->stats.good;
        total.bad += w->stats.bad;
        for (int k = 0; k < 6; k++)
            total.status_class[k] += w->stats.status_class[k];
        for (int k = 0; k < ERR_KINDS; k++)
            total.errors[k] += w->stats.errors[k];
        total.connects += w->stats.connects;
        total.bytes_read += w->stats.bytes_read;
        hist_merge(&merged, &w->hist);
        if (w->finished_ns > end_ns)
            end_ns = w->finished_ns;
    }
    if (opt.progress)
        print_progress(workers, end_ns, true);
    if (started < opt.threads)
        return EXIT_SETUP;

    double secs = (double) (end_ns - run_start_ns) / 1e9;
    uint64_t done = total.good + total.bad + error_total(&total);
    if (opt.json)
        print_json(&total, &merged, secs, done);
    else
        print_summary(&total, &merged, secs, done);
    return EXIT_OK;
}
