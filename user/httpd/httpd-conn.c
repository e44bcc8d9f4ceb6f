/* httpd-conn.c — one connection, as straight-line code: read until core's
 * parser has a complete head, answer it, drain any body, repeat. Requests
 * pipelined in one read are answered in order from the same buffer; the
 * parser works on slices, so no request byte is copied. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "httpd.h"

struct conn {
    struct rt_conn *c;
    char *buf;
    size_t start, len, cap; /* current request at buf[start..len) */
    /* the last read took less than it asked for: the socket was empty
     * then, and bytes arriving since raise a new edge, so the next idle
     * wait needs no read first to be sure nothing is pending; unless a
     * wait came after that read (rt_conn.waits moved from drained_waits):
     * a wait for room to send takes the edge of what came meanwhile */
    bool drained;
    unsigned drained_waits;
    char hbuf[HTTP_SERVER_HEAD_BUF];
    struct http_parser parser;
    struct http_header headers[HTTP_SERVER_MAX_STORED_HEADERS];
    struct conn *next_free; /* in its thread's spare list */
};

/* A connection's state lives only while it has a request in hand (an idle
 * keep-alive connection holds none), so every wake-up of a keep-alive
 * connection would allocate and free it and its buffer again. Each thread
 * keeps up to CONN_SPARE_MAX freed states whose buffer has its initial size
 * for its next wake-up: a malloc and free pair of each less per request
 * (about 600 instructions). Threads are few in the event models; in the
 * threads model one spare per thread already holds the common case. */
#define CONN_SPARE_MAX 2
static __thread struct conn *conn_spare;
static __thread unsigned conn_spare_count;
static __thread bool conn_spare_keyed;

static pthread_key_t conn_spare_key;
static pthread_once_t conn_spare_once = PTHREAD_ONCE_INIT;

/* A thread that ends frees its spares (the threads model ends idle
 * threads). */
static void conn_spare_drop(void *unused)
{
    (void) unused;
    while (conn_spare) {
        struct conn *cs = conn_spare;
        conn_spare = cs->next_free;
        free(cs->buf);
        free(cs);
    }
    conn_spare_count = 0;
    conn_spare_keyed = false;
}

static void conn_spare_key_init(void)
{
    if (pthread_key_create(&conn_spare_key, conn_spare_drop) != 0)
        abort();
}

/* noinline, as every reader of a thread-local on a coroutine (rt.h): the
 * spare list is reached afresh on each call, never through an address kept
 * across a wait */
static __attribute__((noinline)) struct conn *conn_alloc(void)
{
    struct conn *cs = conn_spare;
    if (cs) {
        conn_spare = cs->next_free;
        conn_spare_count--;
        return cs;
    }
    cs = malloc(sizeof(*cs));
    if (!cs)
        return NULL;
    cs->cap = HTTP_SERVER_REQ_BUF_INITIAL;
    cs->buf = malloc(cs->cap);
    if (!cs->buf) {
        free(cs);
        return NULL;
    }
    return cs;
}

static __attribute__((noinline)) void conn_free(struct conn *cs)
{
    if (cs->cap == HTTP_SERVER_REQ_BUF_INITIAL &&
        conn_spare_count < CONN_SPARE_MAX) {
        if (!conn_spare_keyed) {
            /* the key's value only makes its destructor run */
            pthread_once(&conn_spare_once, conn_spare_key_init);
            pthread_setspecific(conn_spare_key, &conn_spare);
            conn_spare_keyed = true;
        }
        cs->next_free = conn_spare;
        conn_spare = cs;
        conn_spare_count++;
        return;
    }
    free(cs->buf);
    free(cs);
}

static uint64_t deadline_in(int ms)
{
    return rt_loop_now_ms() + (uint64_t) ms;
}

/* Read into buf[len..cap) (blocking up to dl); notes whether it drained. */
static ssize_t conn_read(struct conn *cs, size_t at, uint64_t dl)
{
    size_t want = cs->cap - at;
    ssize_t n = rt_read(cs->c, cs->buf + at, want, dl, false);
    cs->drained = n > 0 && (size_t) n < want;
    cs->drained_waits = cs->c->waits;
    return n;
}

/* Nothing is buffered and the connection may go idle without a read
 * first: the last read drained the socket and no wait came after it (a
 * wait for room to send takes the edge of bytes that came meanwhile). The
 * one test both of the request loop's decisions use: to go idle, and to
 * leave the parser unreset for a connection that does. */
static bool idle_unread(const struct conn *cs)
{
    return cs->start == cs->len && cs->drained &&
           cs->c->waits == cs->drained_waits;
}

/* Answer with a close, outside of any parsed request (parse errors, 408). */
static void send_error_close(struct conn *cs, int status)
{
    struct httpd_req r = {
        .c = cs->c, .hbuf = cs->hbuf, .hcap = sizeof(cs->hbuf)};
    struct http_plan_input in = {0};
    in.date = httpd_date_now(rt_worker_data(), &in.now);
    httpd_respond_error(&r, &in, status);
    httpd_log_request(&r);
}

void httpd_conn_refuse(int fd)
{
    /* Called from accept paths, outside any worker's request handling: no
     * cached Date here, core formats the current second itself. */
    char head[512];
    struct http_plan_input in = {.now = (int64_t) time(NULL)};
    struct http_plan p;
    http_plan_no_request(&p, &in, 503);
    int n = http_plan_head(&p, head, sizeof(head));
    if (n < 0)
        return;
    struct iovec iov[2] = {{head, (size_t) n}, {p.text, p.body_len}};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    /* best effort: a fresh socket's send buffer is empty. The plan holds
     * the end back (more) for the shutdown's FIN to take along. */
    if (sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT | (p.more ? MSG_MORE : 0)) >
        0)
        shutdown(fd, SHUT_WR);
}

/* Read and discard a request body: core says what each piece holds (its
 * decoder's limits bound what a client can make us read). Returns 0 when
 * the body is gone, -1 when the connection is (EOF, error, timeout), or
 * the status to answer a body the decoder refused with before closing. */
static int drain_body(struct conn *cs, const struct http_request *req)
{
    uint64_t dl = deadline_in(httpd_cfg.idle_timeout_ms);
    struct http_body_drain b;
    int r;
    http_body_drain_start(&b, req);
    while ((r = http_body_drain(&b, cs->buf, &cs->start, &cs->len)) ==
           HTTP_BODY_DRAIN_MORE) {
        ssize_t n = conn_read(cs, 0, dl);
        if (n <= 0)
            return -1;
        cs->len = (size_t) n;
    }
    return r;
}

/* Close after an error without losing the answer: unread request bytes
 * would make close() send a RST that can overtake our response. So stop
 * sending, and read (and drop) what the client still sends, for a bit. */
static void lingering_close(struct conn *cs)
{
    rt_shutdown_write(cs->c);
    uint64_t dl = deadline_in(HTTP_SERVER_LINGER_MS);
    for (int i = 0; i < HTTP_SERVER_LINGER_READS; i++) {
        ssize_t n = rt_read(cs->c, cs->buf, cs->cap, dl, true);
        if (n <= 0)
            return;
    }
}

/* Answer one parsed request; false if the connection must close. */
static bool answer(struct conn *cs, size_t head_len, bool *linger)
{
    const struct http_request *req = &cs->parser.req;
    struct httpd_req r = {
        .c = cs->c,
        .req = req,
        .rb = cs->buf + cs->start,
        .hbuf = cs->hbuf,
        .hcap = sizeof(cs->hbuf),
    };
    struct http_plan_input in = {
        .req = req,
        .buf = r.rb,
        .buffered = cs->len - cs->start,
        .head_len = head_len,
        .stopping = rt_stopping(),
    };
    struct http_plan p;

    r.w = rt_worker_data();
    in.date = httpd_date_now(r.w, &in.now);
    bool ok = httpd_respond(&r, &in, &p);
    httpd_log_request(&r);
    if (!ok)
        return false;
    if (!p.keep_alive) {
        /* the plan held the response's end back (more): shutting the
         * write side sends it with the FIN, one segment (a lingering
         * close shuts it itself) */
        *linger = p.linger;
        if (!p.linger)
            rt_shutdown_write(cs->c);
        return false;
    }
    cs->start += head_len;
    if (!p.drain_body)
        return true;
    /* A body we cannot frame ends the connection: say why, after the
     * answer already sent, and close (lingering: the client is likely
     * still sending). */
    int st = drain_body(cs, req);
    if (st > 0) {
        send_error_close(cs, st);
        *linger = true;
    }
    return st == 0;
}

enum rt_verdict httpd_conn_serve(struct rt_conn *c)
{
    enum rt_verdict verdict = RT_CLOSE;
    struct conn *cs = conn_alloc();
    if (!cs)
        return RT_CLOSE;
    cs->c = c;
    cs->start = cs->len = 0;
    cs->drained = false; /* a wake-up: read first */
    struct http_limits limits = HTTP_SERVER_LIMITS;
    http_parser_init(&cs->parser, &limits);
    http_parser_set_header_store(&cs->parser, cs->headers,
                                 HTTP_SERVER_MAX_STORED_HEADERS);

    for (;;) {
        /* 0. between requests: if nothing has come, the connection is
         * idle and the runtime keeps it without us (RT_IDLE) */
        if (cs->start == cs->len) {
            cs->start = cs->len = 0;
            /* after a request the read would mostly fail with EAGAIN: when
             * the socket was drained, go idle without it (one system call
             * less per keep-alive request) */
            ssize_t n =
                idle_unread(cs) ? -EAGAIN : rt_read_nowait(c, cs->buf, cs->cap);
            if (n == -EAGAIN)
                verdict = rt_stopping() ? RT_CLOSE : RT_IDLE;
            if (n <= 0)
                goto out;
            cs->len = (size_t) n;
            cs->drained = (size_t) n < cs->cap;
            cs->drained_waits = c->waits;
        }
        /* 1. a complete head. The first byte of a request starts its clock:
         * a head must be complete within one idle timeout (slowloris). */
        uint64_t head_deadline = deadline_in(httpd_cfg.idle_timeout_ms);
        size_t head_len = 0;
        int pr;
        for (;;) {
            pr = http_parse_request(&cs->parser, cs->buf + cs->start,
                                    cs->len - cs->start, &head_len);
            if (pr != HTTP_PARSE_INCOMPLETE)
                break;
            if (!http_reqbuf_make_room(&cs->buf, &cs->start, &cs->len, &cs->cap,
                                       realloc)) {
                pr = HTTP_PARSE_ERR_HEADERS_TOO_LARGE;
                break;
            }
            ssize_t n = conn_read(cs, cs->len, head_deadline);
            if (n == -ETIMEDOUT) {
                rt_count(RT_C_TIMEOUTS, 1);
                send_error_close(cs, 408);
                lingering_close(cs);
            }
            if (n <= 0)
                goto out;
            cs->len += (size_t) n;
        }
        if (pr < 0) {
            send_error_close(cs, http_parse_error_status(pr));
            lingering_close(cs);
            goto out;
        }
        /* 2. the answer */
        bool linger = false;
        if (!answer(cs, head_len, &linger)) {
            if (linger)
                lingering_close(cs);
            goto out;
        }
        /* the parser again for a next request, unless the connection
         * goes idle now without a read (a wake-up starts with a fresh
         * one): every request that is read here is parsed afresh */
        if (!idle_unread(cs))
            http_parser_reset(&cs->parser);
    }
out:
    conn_free(cs);
    return verdict;
}
