/* httpd-conn.c — one connection, as straight-line code: read until core's
 * parser has a complete head, answer it, drain any body, repeat. Requests
 * pipelined in one read are answered in order from the same buffer; the
 * parser works on slices, so no request byte is copied. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "httpd.h"

#define REQ_BUF_INITIAL 4096
#define HEAD_BUF_SIZE 2048
#define MAX_STORED_HEADERS 32

struct httpd_config httpd_cfg = {.root_fd = -1, .access_log_fd = -1};

struct conn {
    struct rt_conn *c;
    char *buf;
    size_t start, len, cap; /* current request at buf[start..len) */
    char hbuf[HEAD_BUF_SIZE];
    struct http_parser parser;
    struct http_header headers[MAX_STORED_HEADERS];
};

static uint64_t deadline_in(int ms)
{
    return rt_now_ms() + (uint64_t) ms;
}

void httpd_head_init(struct httpd_req *r,
                     struct http_response_head *h,
                     int status)
{
    memset(h, 0, sizeof(*h));
    h->status = status;
    h->version = 11;
    h->date = httpd_date_now(rt_worker_self(), &h->now_seconds);
    h->content_length = -1;
    h->keep_alive = r->keep_alive;
    r->status = status;
}

bool httpd_send_head(struct httpd_req *r,
                     const struct http_response_head *h,
                     const void *body,
                     size_t body_len)
{
    struct http_buf b;
    http_buf_init(&b, r->hbuf, r->hcap);
    int n = http_response_build(&b, h);
    if (n < 0)
        return false;
    struct iovec iov[2] = {
        {.iov_base = r->hbuf, .iov_len = (size_t) n},
        {.iov_base = (void *) body, .iov_len = body_len},
    };
    int cnt = (body && body_len && !r->head) ? 2 : 1;
    ssize_t s = rt_sendv(r->c, iov, cnt, r->more_pending || r->cork,
                         httpd_cfg.idle_timeout_ms);
    if (s < 0)
        return false;
    if (cnt == 2)
        r->sent += body_len;
    return true;
}

bool httpd_send_error(struct httpd_req *r, int status)
{
    struct http_response_head h;
    char body[64];
    const char *reason = http_status_reason(status);
    struct http_buf b;

    http_buf_init(&b, body, sizeof(body));
    http_buf_append_u64(&b, (uint64_t) status);
    http_buf_append_char(&b, ' ');
    http_buf_append_str(&b, reason);
    http_buf_append_char(&b, '\n');
    httpd_head_init(r, &h, status);
    h.content_type = "text/plain; charset=utf-8";
    h.content_length = (int64_t) b.len;
    if (status == 405)
        h.allow = "GET, HEAD";
    return httpd_send_head(r, &h, body, b.len) && h.keep_alive;
}

/* Answer with a close, outside of any parsed request (parse errors, 408). */
static void send_error_close(struct conn *cs, int status)
{
    struct httpd_req r = {
        .c = cs->c, .hbuf = cs->hbuf, .hcap = sizeof(cs->hbuf)};
    httpd_send_error(&r, status);
    httpd_log_request(&r);
}

void httpd_conn_refuse(int fd)
{
    /* Called from accept paths, outside any worker's request handling: no
     * cached Date here, core formats the current second itself. */
    char head[512];
    static const char body[] = "503 Service Unavailable\n";
    struct http_buf b;
    struct http_response_head h = {
        .status = 503,
        .version = 11,
        .now_seconds = (int64_t) time(NULL),
        .content_type = "text/plain; charset=utf-8",
        .content_length = sizeof(body) - 1,
        .keep_alive = false,
    };
    http_buf_init(&b, head, sizeof(head));
    int n = http_response_build(&b, &h);
    if (n < 0)
        return;
    struct iovec iov[2] = {{head, (size_t) n},
                           {(void *) body, sizeof(body) - 1}};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    /* best effort: a fresh socket's send buffer is empty */
    if (sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
        shutdown(fd, SHUT_WR);
}

/* Make room for more bytes: slide the current request to the front, or
 * grow. False if the buffer is at its maximum. */
static bool buf_make_room(struct conn *cs)
{
    if (cs->len < cs->cap)
        return true;
    if (cs->start > 0) {
        memmove(cs->buf, cs->buf + cs->start, cs->len - cs->start);
        cs->len -= cs->start;
        cs->start = 0;
        return true;
    }
    if (cs->cap >= HTTPD_REQ_BUF_MAX)
        return false;
    char *nb = realloc(cs->buf, cs->cap * 2);
    if (!nb)
        return false;
    cs->buf = nb;
    cs->cap *= 2;
    return true;
}

/* Read and discard a request body. Content-Length bodies skip what is
 * buffered and read the rest; chunked ones go through core's decoder,
 * whose limits bound what a client can make us read. Returns 0 when the
 * body is gone, -1 when the connection is (EOF, error, timeout), or the
 * status to answer a body the decoder refused with before closing. */
static int drain_body(struct conn *cs, const struct http_request *req)
{
    uint64_t dl = deadline_in(httpd_cfg.idle_timeout_ms);
    if (req->body_framing == HTTP_BODY_CONTENT_LENGTH) {
        uint64_t left = req->content_length;
        size_t have = cs->len - cs->start;
        size_t take = left < have ? (size_t) left : have;
        cs->start += take;
        left -= take;
        while (left > 0) {
            cs->start = cs->len = 0;
            ssize_t n = rt_read(cs->c, cs->buf, cs->cap, dl, false);
            if (n <= 0)
                return -1;
            take = (uint64_t) n < left ? (size_t) n : (size_t) left;
            cs->start = take;
            cs->len = (size_t) n;
            left -= take;
        }
        return 0;
    }
    if (req->body_framing != HTTP_BODY_CHUNKED)
        return 0;
    struct http_chunked_decoder d;
    http_chunked_init(&d, HTTPD_MAX_BODY, HTTP_DEFAULT_MAX_TRAILER_BYTES);
    for (;;) {
        while (cs->start < cs->len) {
            size_t used, off, dlen;
            int r =
                http_chunked_decode(&d, cs->buf + cs->start,
                                    cs->len - cs->start, &used, &off, &dlen);
            cs->start += used;
            if (r == HTTP_CHUNKED_DONE)
                return 0;
            if (r < 0)
                return http_parse_error_status(r);
        }
        cs->start = cs->len = 0;
        ssize_t n = rt_read(cs->c, cs->buf, cs->cap, dl, false);
        if (n <= 0)
            return -1;
        cs->len = (size_t) n;
    }
}

/* Close after an error without losing the answer: unread request bytes
 * would make close() send a RST that can overtake our response. So stop
 * sending, and read (and drop) what the client still sends, for a bit. */
static void lingering_close(struct conn *cs)
{
    shutdown(cs->c->fd, SHUT_WR);
    uint64_t dl = deadline_in(1000);
    for (int i = 0; i < 64; i++) {
        ssize_t n = rt_read(cs->c, cs->buf, cs->cap, dl, true);
        if (n <= 0)
            return;
    }
}

/* Answer one parsed request; false if the connection must close. */
static bool answer(struct conn *cs, size_t head_len, bool *linger)
{
    const struct http_request *req = &cs->parser.req;
    const char *rb = cs->buf + cs->start;
    bool has_body = req->body_framing != HTTP_BODY_NONE &&
                    !(req->body_framing == HTTP_BODY_CONTENT_LENGTH &&
                      req->content_length == 0);
    struct httpd_req r = {
        .c = cs->c,
        .req = req,
        .rb = rb,
        .head = req->method == HTTP_METHOD_HEAD,
        .keep_alive = req->keep_alive && !rt_stopping(),
        .hbuf = cs->hbuf,
        .hcap = sizeof(cs->hbuf),
    };
    /* With Expect: 100-continue the client waits before sending its body;
     * we never need a body, so we answer at once and close instead of
     * reading one (the client may also send it anyway: closing is the only
     * framing-safe end). */
    if (has_body && req->expect_continue)
        r.keep_alive = false;
    /* Another whole request head already buffered behind this one (and its
     * body)? Then the response may wait in the socket for the next
     * (MSG_MORE); otherwise it must leave now. Chunked bodies: unknown,
     * assume not. */
    uint64_t after = head_len;
    if (req->body_framing == HTTP_BODY_CONTENT_LENGTH)
        after += req->content_length;
    r.more_pending = r.keep_alive && req->body_framing != HTTP_BODY_CHUNKED &&
                     cs->len - cs->start > after &&
                     http_head_buffered(cs->buf + cs->start + after,
                                        cs->len - cs->start - after);

    bool ok;
    if (req->expect_unknown) {
        r.keep_alive = false;
        ok = httpd_send_error(&r, 417);
    } else if (req->method == HTTP_METHOD_OTHER) {
        ok = httpd_send_error(&r, 501);
    } else if (req->method != HTTP_METHOD_GET &&
               req->method != HTTP_METHOD_HEAD) {
        ok = httpd_send_error(&r, 405);
    } else {
        char rel[4096];
        struct http_path_info info;
        int pr = http_path_normalize(rb + req->path.off, req->path.len, rel,
                                     sizeof(rel), &info);
        if (pr != HTTP_PATH_OK)
            ok = httpd_send_error(&r, http_path_error_status(pr));
        else
            ok = httpd_file_serve(&r, rel, &info);
    }
    httpd_log_request(&r);
    if (!ok)
        return false;
    if (!r.keep_alive) {
        *linger = has_body || r.status >= 400;
        return false;
    }
    cs->start += head_len;
    if (!has_body)
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
    struct conn *cs = malloc(sizeof(*cs));
    if (!cs)
        return RT_CLOSE;
    cs->c = c;
    cs->start = cs->len = 0;
    cs->cap = REQ_BUF_INITIAL;
    cs->buf = malloc(cs->cap);
    if (!cs->buf) {
        free(cs);
        return RT_CLOSE;
    }
    struct http_limits limits = {
        .max_request_line = HTTP_DEFAULT_MAX_REQUEST_LINE,
        .max_header_bytes = HTTP_DEFAULT_MAX_HEADER_BYTES,
        .max_headers = HTTP_DEFAULT_MAX_HEADERS,
        .max_body = HTTPD_MAX_BODY,
    };
    http_parser_init(&cs->parser, &limits);
    http_parser_set_header_store(&cs->parser, cs->headers, MAX_STORED_HEADERS);

    for (;;) {
        /* 0. between requests: if nothing has come, the connection is
         * idle and the runtime keeps it without us (RT_IDLE) */
        if (cs->start == cs->len) {
            cs->start = cs->len = 0;
            ssize_t n = rt_read_nowait(c, cs->buf, cs->cap);
            if (n == -EAGAIN)
                verdict = rt_stopping() ? RT_CLOSE : RT_IDLE;
            if (n <= 0)
                goto out;
            cs->len = (size_t) n;
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
            if (!buf_make_room(cs)) {
                pr = HTTP_PARSE_ERR_HEADERS_TOO_LARGE;
                break;
            }
            ssize_t n = rt_read(c, cs->buf + cs->len, cs->cap - cs->len,
                                head_deadline, false);
            if (n == -ETIMEDOUT) {
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
        http_parser_reset(&cs->parser);
    }
out:
    free(cs->buf);
    free(cs);
    return verdict;
}
