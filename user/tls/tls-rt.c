/* tls-rt.c — a TLS connection on the user runtime: the handshake, and the
 * transport (struct rt_io) through which the handler's rt_read, rt_sendv,
 * rt_sendfile and rt_shutdown_write become records. Every wait is the
 * runtime's (rt_wait): a coroutine yields its worker, a threads-model
 * thread polls; no call here blocks a worker. */
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "rt.h"
#include "tls-internal.h"

/* Wait for what OpenSSL asked for (r: KTCP_TLS_WANT_*). */
static int wait_for(struct rt_conn *c, ssize_t r, uint64_t deadline, bool idle)
{
    return rt_wait(c, r == KTCP_TLS_WANT_WRITE ? POLLOUT : POLLIN, deadline,
                   idle);
}

static bool wants(ssize_t r)
{
    return r == KTCP_TLS_WANT_READ || r == KTCP_TLS_WANT_WRITE;
}

int ktcp_tls_rt_handshake(struct ktcp_tls_conn *t,
                          struct rt_conn *c,
                          uint64_t deadline_ms)
{
    /* Records read whole with what follows, in one read and not a
     * header's and a body's, from the handshake's first byte, as nginx
     * does. kTLS as OpenSSL turns it on takes that: the whole records it
     * still holds when the receive keys go to the kernel, OpenSSL opens
     * itself and the kernel's sequence number starts past them (a part
     * of one held back leaves the reading with OpenSSL, tls_ktls_rx says
     * so). Not for an agent that hands the socket on: it handshakes
     * without the runtime (ktcp_tls_handshake_wait), holding no byte. */
    SSL_set_read_ahead(t->ssl, 1);
    for (;;) {
        int r = ktcp_tls_handshake(t);
        if (!wants(r))
            return r;
        /* no request is in hand yet: a stopping server may end it */
        int w = wait_for(c, r, deadline_ms, true);
        if (w < 0)
            return w;
    }
}

static ssize_t io_read_nowait(struct rt_conn *c, void *buf, size_t len)
{
    ssize_t n = ktcp_tls_read(c->io_data, buf, len);
    return wants(n) ? -EAGAIN : n;
}

static ssize_t io_read(struct rt_conn *c,
                       void *buf,
                       size_t len,
                       uint64_t deadline_ms,
                       bool idle)
{
    for (;;) {
        ssize_t n = ktcp_tls_read(c->io_data, buf, len);
        if (!wants(n))
            return n;
        int w = wait_for(c, n, deadline_ms, idle && n == KTCP_TLS_WANT_READ);
        if (w < 0)
            return w;
    }
}

/* A send that gave up, counted as the runtime counts its own. */
static ssize_t send_failed(ssize_t err)
{
    if (err == -ETIMEDOUT)
        rt_count(RT_C_TIMEOUTS, 1);
    else if (err != -ECONNRESET && err != -EPIPE && err != -ESHUTDOWN)
        rt_count(RT_C_ERRORS, 1);
    return err;
}

/* The unsent bytes a kTLS connection may queue (TCP_NOTSENT_LOWAT):
 * the listener's (KTCP_NOTSENT_LOWAT) to start with, doubled up to
 * KTLS_LOWAT_MAX each time a wait for room ends within
 * KTLS_LOWAT_FAST_MS (the socket turns writable once half the queue
 * left: a reader that takes 32 KiB in 250 ms, 128 KB/s), as TCP's
 * autotuning grows the send buffer of a reader that keeps up. Every step
 * of a large body costs the worker a wake-up, a wait and a record's
 * push: over kTLS in the emulated guests a 1 MiB response took about ten
 * at 64 KiB and 51 system calls, nginx (which queues the whole body) 10.
 * A reader that stalls keeps the small queue, and a slower one too. The
 * cap is Linux's default send buffer maximum (tcp_wmem): for a reader
 * that keeps up, the limit ends up as nginx's, which sets none. */
#define KTLS_LOWAT_MAX (4 << 20)
#define KTLS_LOWAT_FAST_MS 250

static void lowat_grow(struct rt_conn *c, uint64_t waited_ms)
{
    struct ktcp_tls_conn *t = c->io_data;
    if (waited_ms > KTLS_LOWAT_FAST_MS || !ktcp_tls_ktls_tx(t))
        return;
    int lowat = t->lowat;
    socklen_t len = sizeof(lowat);
    if (!lowat &&
        (getsockopt(c->fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, &len) < 0 ||
         lowat <= 0))
        return;
    if (lowat >= KTLS_LOWAT_MAX)
        return;
    lowat *= 2;
    if (setsockopt(c->fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat,
                   sizeof(lowat)) == 0)
        t->lowat = lowat;
}

/* One step of a send loop: bytes taken (> 0), 0 to call again after a
 * wait, or below 0 to give up. timeout_ms bounds each wait for progress. */
static ssize_t send_step(struct rt_conn *c, ssize_t n, int timeout_ms)
{
    if (n > 0) {
        rt_count(RT_C_BYTES_OUT, (uint64_t) n);
        ((struct ktcp_tls_conn *) c->io_data)->tx_unflushed = true;
        return n;
    }
    if (!wants(n))
        return send_failed(n == 0 ? -EPIPE : n);
    if (n == KTCP_TLS_WANT_READ) {
        int w = wait_for(c, n, rt_loop_now_ms() + (uint64_t) timeout_ms, false);
        return w < 0 ? send_failed(w) : 0;
    }
    /* Room to write: as the runtime's own sends (rt-io.c), a slow but
     * steady reader whose acknowledgements drain the unacknowledged queue
     * (SIOCOUTQ) makes progress, though the socket may not turn writable
     * within the timeout; only a reader that took nothing for a whole
     * timeout is given up on. */
    int queued = -1, now_queued;
    if (ioctl(c->fd, SIOCOUTQ, &queued) < 0)
        queued = -1;
    uint64_t start = rt_loop_now_ms();
    for (;;) {
        int w = rt_wait(c, POLLOUT, rt_loop_now_ms() + (uint64_t) timeout_ms,
                        false);
        if (w == 0) {
            lowat_grow(c, rt_loop_now_ms() - start);
            return 0;
        }
        if (w != -ETIMEDOUT || queued < 0 ||
            ioctl(c->fd, SIOCOUTQ, &now_queued) < 0 || now_queued >= queued)
            return send_failed(w);
        queued = now_queued;
    }
}

/* The records tls-out.c still keeps, sent before a send counts as done
 * (the peer may wait for them before it says more): 0, or below 0 to
 * give up. */
static ssize_t out_drain(struct rt_conn *c, int timeout_ms)
{
    for (;;) {
        ssize_t f = ktcp_tls_out_flush(c->io_data);
        if (f == 0)
            return 0;
        ssize_t n = send_step(c, f, timeout_ms);
        if (n < 0)
            return n;
    }
}

static ssize_t io_sendv(struct rt_conn *c,
                        const struct iovec *iov_in,
                        int iovcnt,
                        bool more,
                        int timeout_ms)
{
    struct iovec iov[8];
    int cnt = iovcnt < 8 ? iovcnt : 8;
    size_t total = 0, all = 0;
    for (int i = 0; i < iovcnt; i++)
        all += iov_in[i].iov_len;
    for (int i = 0; i < cnt; i++)
        iov[i] = iov_in[i];
    struct iovec *v = iov;
    int left_in = iovcnt - cnt; /* beyond the first 8: sent one by one */
    const struct iovec *rest = iov_in + cnt;
    while (total < all) {
        while (cnt > 0 && v->iov_len == 0) {
            v++;
            cnt--;
        }
        if (cnt == 0) {
            if (left_in == 0)
                break;
            iov[0] = *rest++;
            left_in--;
            v = iov;
            cnt = 1;
            continue;
        }
        ssize_t n =
            send_step(c, ktcp_tls_writev(c->io_data, v, cnt, more), timeout_ms);
        if (n < 0)
            return n;
        total += (size_t) n;
        while (n > 0 && cnt > 0) {
            size_t take = (size_t) n < v->iov_len ? (size_t) n : v->iov_len;
            v->iov_base = (char *) v->iov_base + take;
            v->iov_len -= take;
            n -= (ssize_t) take;
            if (v->iov_len == 0) {
                v++;
                cnt--;
            }
        }
    }
    ssize_t f = out_drain(c, timeout_ms);
    return f < 0 ? f : (ssize_t) total;
}

static ssize_t io_sendfile(struct rt_conn *c,
                           int file_fd,
                           off_t offset,
                           size_t count,
                           int timeout_ms)
{
    size_t left = count;
    while (left > 0) {
        ssize_t n =
            send_step(c, ktcp_tls_sendfile(c->io_data, file_fd, offset, left),
                      timeout_ms);
        if (n < 0)
            return n;
        offset += n;
        left -= (size_t) n;
    }
    ssize_t f = out_drain(c, timeout_ms);
    return f < 0 ? f : (ssize_t) count;
}

static bool io_head_alone(struct rt_conn *c, off_t offset, size_t count)
{
    return ktcp_tls_head_alone(c->io_data, offset, count);
}

/* How long apart a flush looks at TCP's queue. */
#define KTLS_FLUSH_LOOK_MS 5

/* The bytes c's TCP holds unacknowledged (SIOCOUTQ), or -EPIPE when the
 * connection can no longer carry them. An empty queue needs no state:
 * a reset one reads non-empty (snd_una stops where the reset came). */
static int tcp_queued(struct rt_conn *c)
{
    int q;
    if (ioctl(c->fd, SIOCOUTQ, &q) < 0)
        return -EPIPE;
    if (q == 0)
        return 0;
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
        (ti.tcpi_state != TCP_ESTABLISHED && ti.tcpi_state != TCP_CLOSE_WAIT))
        return -EPIPE;
    return q;
}

/* A record the kernel encrypted while TCP had no room stays with kTLS
 * (tls_sw's tx_list) until the socket's write-space callback hands it to
 * TCP. close() frees such records (tls_sw_release_resources_tx) and a
 * shutdown's FIN goes ahead of them: the response would end cut, the
 * last bytes never sent. No call tells user space whether kTLS still
 * holds one, but it holds one only while TCP's queue is not empty (TCP
 * frees room, the callback pushes, before the queue can drain): so wait
 * until the peer has acknowledged every byte TCP holds (SIOCOUTQ 0) on
 * two looks KTLS_FLUSH_LOOK_MS apart (the callback's work had its time
 * to run). Bounded as a send is: no byte acknowledged for
 * flush_timeout_ms gives up, and so does a stop's cut. Once is enough:
 * with no record sent since a flush that ended, or on a connection found
 * gone, it looks no more. The loop clock times it (rt_loop_now_ms: read
 * at every wake-up, so no clock read of its own). */
int ktcp_tls_rt_flush(struct rt_conn *c)
{
    struct ktcp_tls_conn *t = c->io_data;
    if (!t || !ktcp_tls_ktls_tx(t))
        return 0;
    if (t->tcp_gone)
        return -EPIPE;
    if (!t->tx_unflushed)
        return 0;
    int queued = -1, zeros = 0;
    uint64_t give_up = rt_loop_now_ms() + (uint64_t) t->flush_timeout_ms;
    for (;;) {
        int q = tcp_queued(c);
        if (q < 0) {
            t->tcp_gone = true;
            return q;
        }
        zeros = q == 0 ? zeros + 1 : 0;
        if (zeros == 2) {
            t->tx_unflushed = false;
            return 0;
        }
        uint64_t now = rt_loop_now_ms();
        if (queued < 0 || q < queued)
            give_up = now + (uint64_t) t->flush_timeout_ms;
        queued = q;
        if (now >= give_up)
            return -ETIMEDOUT;
        /* a wait for nothing but the time (POLLPRI: TCP's urgent data,
         * which HTTP never sends); an early return only looks sooner */
        int w = rt_wait(c, POLLPRI, now + KTLS_FLUSH_LOOK_MS, false);
        if (w < 0 && w != -ETIMEDOUT)
            return w;
    }
}

/* close_notify, then (rt_shutdown_write) the FIN after it. kTLS sends
 * its records in order, the alert behind any it still holds, so only
 * the FIN waits for them (a flush); a connection found gone gets none
 * (-EPIPE: shutdown would fail with ENOTCONN). */
static int io_shutdown_write(struct rt_conn *c)
{
    struct ktcp_tls_conn *t = c->io_data;
    if (ktcp_tls_shutdown(t) == KTCP_TLS_WANT_WRITE &&
        rt_wait(c, POLLOUT, rt_loop_now_ms() + (uint64_t) t->flush_timeout_ms,
                false) == 0)
        ktcp_tls_shutdown(t);
    t->tx_unflushed = true; /* the alert, when it went (kTLS only flushes) */
    return ktcp_tls_rt_flush(c) == -EPIPE ? -EPIPE : 0;
}

/* The runtime closes an idle connection (its timeout, a stop): the TLS
 * state goes with it, no close_notify (as a timed-out plain connection
 * gets no answer either). */
static void io_release(struct rt_conn *c)
{
    struct ktcp_tls_conn *t = c->io_data;
    ktcp_tls_rt_detach(c);
    ktcp_tls_conn_free(t);
}

static const struct rt_io tls_io = {
    .read_nowait = io_read_nowait,
    .read = io_read,
    .sendv = io_sendv,
    .sendfile = io_sendfile,
    .head_alone = io_head_alone,
    .shutdown_write = io_shutdown_write,
    .release = io_release,
};

/* The socket BIO's reads, seen as they return: did the last one find
 * the socket empty (fewer bytes than asked, or none)? */
static long raw_read_seen(BIO *b,
                          int oper,
                          const char *argp,
                          size_t len,
                          int argi,
                          long argl,
                          int ret,
                          size_t *processed)
{
    (void) argp;
    (void) argi;
    (void) argl;
    if (oper == (BIO_CB_READ | BIO_CB_RETURN)) {
        struct ktcp_tls_conn *t =
            (struct ktcp_tls_conn *) BIO_get_callback_arg(b);
        t->raw_drained = ret <= 0 || !processed || *processed < len;
    }
    return ret;
}

void ktcp_tls_rt_attach(struct ktcp_tls_conn *t,
                        struct rt_conn *c,
                        int timeout_ms)
{
    t->flush_timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;
    /* the handshake may have sent records through kTLS (TLS 1.3's
     * tickets) */
    t->tx_unflushed = true;
    /* ktcp_tls_read reads until OpenSSL holds nothing more and its last
     * read of the socket found it empty (raw_read_seen), so going idle
     * strands nothing and the read that would fail with EAGAIN is saved.
     * Records OpenSSL reads itself come whole with what follows
     * (read-ahead, ktcp_tls_rt_handshake). Records kTLS reads: one
     * recvmsg returns the data of every record the kernel has ready, so
     * a short one found no more. Only a control record right behind data
     * waits for the next event (tls_sw keeps it for the next read, with
     * no new wake-up): the client's next bytes, its FIN, or the idle
     * timeout. */
    BIO *rb = SSL_get_rbio(t->ssl);
    BIO_set_callback_arg(rb, (char *) t);
    BIO_set_callback_ex(rb, raw_read_seen);
    t->raw_watched = true;
    c->io_data = t;
    c->io = &tls_io;
}

void ktcp_tls_rt_detach(struct rt_conn *c)
{
    c->io = NULL;
    c->io_data = NULL;
}
