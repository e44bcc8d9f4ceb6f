/* httpd-proxy.c — the PROXY protocol header (HAProxy's versions 1 and 2,
 * parsed by core's http_proxy.c) on a listener started with
 * --proxy-protocol (the port) or --tls-proxy-protocol (--tls-port): read
 * before anything else on the connection, before a request or a TLS
 * ClientHello, and never past its end. The bytes are peeked, fed to the
 * parser, and only those that belong to the header are taken from the
 * socket, so what follows stays there for whoever reads next (the HTTP
 * reader, or OpenSSL). The client it names replaces the socket's peer for
 * the access log and everything after; LOCAL and UNKNOWN keep the peer.
 * No header, a malformed or oversized one, or one not whole within
 * --idle-timeout-ms closes the connection without an answer. */
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include "httpd.h"

/* recv without waiting: bytes, 0 on EOF, or -errno (read at once, before
 * anything can switch threads) */
static __attribute__((noinline)) ssize_t sock_recv(int fd,
                                                   void *buf,
                                                   size_t len,
                                                   int flags)
{
    ssize_t n = recv(fd, buf, len, flags | MSG_DONTWAIT);
    return n < 0 ? -errno : n;
}

bool httpd_proxy_read(struct rt_conn *c)
{
    struct http_proxy p;
    unsigned char buf[HTTP_PROXY_MAX];
    uint64_t deadline = rt_loop_now_ms() + (uint64_t) httpd_cfg.idle_timeout_ms;
    int r = HTTP_PROXY_MORE;

    http_proxy_init(&p);
    /* every round takes at least one header byte or waits: at most
     * HTTP_PROXY_MAX rounds that read */
    while (r == HTTP_PROXY_MORE) {
        ssize_t n = sock_recv(c->fd, buf, sizeof(buf) - p.pos, MSG_PEEK);
        if (n == -EAGAIN || n == -EINTR) {
            int w = rt_wait(c, POLLIN, deadline, true);
            if (w == -ETIMEDOUT) {
                rt_count(RT_C_TIMEOUTS, 1);
                break;
            }
            if (w < 0)
                return false; /* stopping */
            continue;
        }
        if (n <= 0)
            break; /* gone before its header was whole */
        size_t used;
        r = http_proxy_parse(&p, buf, (size_t) n, &used);
        if (r < 0)
            break;
        /* take the header's bytes, which are queued: they come at once */
        if (sock_recv(c->fd, buf, used, 0) != (ssize_t) used)
            return false;
    }
    if (r != HTTP_PROXY_DONE) {
        rt_count(HTTPD_C_PROXY_REFUSED, 1);
        return false;
    }
    rt_count(HTTPD_C_PROXY_HEADERS, 1);
    if (p.addr.family)
        rt_conn_set_client(c, p.addr.family == 4 ? AF_INET : AF_INET6,
                           p.addr.src);
    return true;
}
