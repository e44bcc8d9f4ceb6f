/* httpd-tls.c — the connections of --tls-port (docs/tls.md): a first byte
 * that starts an HTTP method instead of a TLS record is answered 400 and
 * closed, as nginx does; otherwise the handshake runs on the runtime with
 * its own deadline (--tls-handshake-timeout-ms), and the connection is
 * then served by httpd-conn.c as any other, its rt_read/rt_sendv/
 * rt_sendfile going through the TLS layer (user/tls: records by the
 * kernel when kTLS is on, by OpenSSL otherwise). Between requests the
 * connection keeps its TLS state but not its coroutine stack: it goes idle
 * (RT_IDLE) with the transport attached, as a plain keep-alive connection
 * does, and the runtime frees the TLS state (rt_io.release) if it closes
 * it idle. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "httpd.h"
#include "ktcp-tls.h"

static const char plain_body[] =
    "400 Bad Request\r\n"
    "plain HTTP request sent to the HTTPS port\r\n";

/* recv(MSG_PEEK) without waiting: bytes, 0 on EOF, or -errno (read at
 * once, before anything can switch threads) */
static __attribute__((noinline)) ssize_t peek(int fd, void *buf, size_t len)
{
    ssize_t n = recv(fd, buf, len, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 ? -errno : n;
}

/* The first byte of a connection: a TLS handshake record starts with 22
 * (0x16); a request line with a method's first letter. */
static int first_byte(struct rt_conn *c, uint64_t deadline)
{
    for (;;) {
        unsigned char b;
        ssize_t n = peek(c->fd, &b, 1);
        if (n == 1)
            return b;
        if (n == 0)
            return -ECONNRESET;
        if (n != -EAGAIN && n != -EINTR)
            return (int) n;
        int r = rt_wait(c, POLLIN, deadline, true);
        if (r < 0)
            return r;
    }
}

/* Stop sending, and read (and drop) what the client still sends, for a
 * bit (HTTP_SERVER_LINGER_*), before the close. */
static void linger(struct rt_conn *c)
{
    shutdown(c->fd, SHUT_WR);
    char sink[2048];
    uint64_t dl = rt_loop_now_ms() + HTTP_SERVER_LINGER_MS;
    for (int i = 0; i < HTTP_SERVER_LINGER_READS; i++)
        if (rt_read(c, sink, sizeof(sink), dl, true) <= 0)
            break;
}

/* Plain HTTP on the TLS port: 400 with the reason, logged, then a
 * lingering close (the request's unread bytes would make the close a
 * reset that can overtake the answer). */
static void refuse_plain(struct rt_conn *c)
{
    char head[256];
    struct httpd_worker *w = rt_worker_data();
    int64_t now;
    const char *date = httpd_date_now(w, &now);
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 400 Bad Request\r\n"
                     "Server: ktcp-httpd\r\n"
                     "Date: %s\r\n"
                     "Content-Type: text/plain\r\n"
                     "Content-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     date, sizeof(plain_body) - 1);
    struct iovec iov[2] = {{head, (size_t) n},
                           {(void *) plain_body, sizeof(plain_body) - 1}};
    struct httpd_req r = {.c = c, .status = 400};
    if (rt_sendv(c, iov, 2, true, httpd_cfg.idle_timeout_ms) > 0)
        r.sent = sizeof(plain_body) - 1;
    httpd_log_request(&r);
    linger(c);
}

/* The requests of a connection whose TLS transport is attached: RT_IDLE
 * when nothing is buffered, in OpenSSL either (the last read saw the
 * socket empty), the session kept for the next record; else the session
 * ends here. */
static enum rt_verdict tls_requests(struct rt_conn *c)
{
    struct ktcp_tls_conn *t = c->io_data;
    if (httpd_conn_serve(c) == RT_IDLE) {
        ktcp_tls_conn_trim(t);
        return RT_IDLE;
    }
    /* the records kTLS still holds go before the close frees them */
    ktcp_tls_rt_flush(c);
    ktcp_tls_rt_detach(c);
    ktcp_tls_conn_free(t);
    return RT_CLOSE;
}

static enum rt_verdict tls_serve(struct rt_conn *c)
{
    uint64_t deadline =
        rt_loop_now_ms() + (uint64_t) httpd_cfg.tls_handshake_timeout_ms;
    int b = first_byte(c, deadline);
    if (b >= 'A' && b <= 'Z') {
        rt_count(HTTPD_C_TLS_HANDSHAKE_FAILURES, 1);
        refuse_plain(c);
        return RT_CLOSE;
    }
    struct ktcp_tls_conn *t = NULL;
    int r = b < 0 ? b : 0;
    if (r == 0) {
        t = ktcp_tls_conn_new(httpd_cfg.tls, c->fd);
        r = t ? ktcp_tls_rt_handshake(t, c, deadline) : -ENOMEM;
    }
    if (r < 0) {
        rt_count(HTTPD_C_TLS_HANDSHAKE_FAILURES, 1);
        if (r == -ETIMEDOUT)
            rt_count(RT_C_TIMEOUTS, 1);
        ktcp_tls_conn_free(t);
        /* refused (an alert went out): the client's unread bytes would
         * turn the close into a reset that can overtake the alert */
        if (r == -EPROTO)
            linger(c);
        return RT_CLOSE;
    }
    rt_count(HTTPD_C_TLS_HANDSHAKES, 1);
    if (ktcp_tls_ktls_tx(t))
        rt_count(HTTPD_C_TLS_KTLS_TX, 1);
    if (ktcp_tls_ktls_rx(t))
        rt_count(HTTPD_C_TLS_KTLS_RX, 1);
    ktcp_tls_rt_attach(t, c, httpd_cfg.idle_timeout_ms);
    return tls_requests(c);
}

enum rt_verdict httpd_serve(struct rt_conn *c)
{
    /* a connection's first call: its listener's PROXY header first */
    if (!c->handler_state) {
        bool proxy = httpd_cfg.proxy_protocol[c->listener & 1];
        if (proxy && !httpd_proxy_read(c))
            return RT_CLOSE;
        c->handler_state = 1;
        /* the address rules, against the client the header named */
        if (proxy && !httpd_client_allowed(c))
            return RT_CLOSE;
    }
    if (c->listener == 1 && httpd_cfg.tls)
        return c->io ? tls_requests(c) : tls_serve(c);
    return httpd_conn_serve(c);
}
