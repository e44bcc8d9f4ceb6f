/* rt-io.c — the I/O API the handler is written in. Each call tries the
 * syscall first and waits only on EAGAIN, so a ready socket costs exactly
 * one syscall. Each call's error comes back as a value before anything can
 * switch threads (rt.h): the calls of every request from rt_sys6, which
 * sets no errno, the others from noinline helpers that read it at once. */
#include <errno.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rt-internal.h"

#define NOINLINE __attribute__((noinline))

/* The two calls of every request, and the threads model's wait, without
 * libc (rt_sys6 in rt-internal.h). */
static inline ssize_t sys_recv(int fd, void *buf, size_t len)
{
    return rt_sys6(SYS_recvfrom, fd, (long) buf, (long) len, 0, 0, 0);
}

static inline ssize_t sys_sendmsg(int fd, struct msghdr *m, int flags)
{
    return rt_sys6(SYS_sendmsg, fd, (long) m, flags | MSG_NOSIGNAL, 0, 0, 0);
}

/* poll(2), or ppoll where the architecture has no poll */
static inline int sys_poll(struct pollfd *p, nfds_t n, int timeout_ms)
{
#ifdef SYS_poll
    return (int) rt_sys6(SYS_poll, (long) p, (long) n, timeout_ms, 0, 0, 0);
#else
    struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
    return (int) rt_sys6(SYS_ppoll, (long) p, (long) n,
                         timeout_ms < 0 ? 0 : (long) &ts, 0, 8, 0);
#endif
}

static NOINLINE ssize_t sys_send(int fd, const void *buf, size_t len)
{
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
    return n < 0 ? -errno : n;
}

static NOINLINE ssize_t sys_sendfile(int out, int in, off_t *off, size_t n)
{
    ssize_t r = sendfile(out, in, off, n);
    return r < 0 ? -errno : r;
}

/* threads model: block in poll(2), also watching the stop eventfd while
 * the connection is idle so a stopping server can close it, and until the
 * stop begins so that a wait for a slow reader then looks every 50 ms
 * whether rt_stop_now cut it. */
static NOINLINE int wait_poll(struct rt_conn *c,
                              short events,
                              uint64_t deadline_ms,
                              bool idle)
{
    for (;;) {
        if (rt_wait_cut(idle))
            return -ESHUTDOWN;
        int timeout = -1;
        if (deadline_ms) {
            uint64_t now = rt_now_ms();
            if (now >= deadline_ms)
                return -ETIMEDOUT;
            timeout = (int) (deadline_ms - now);
        }
        bool stopping = rt_stopping();
        if (stopping && (timeout < 0 || timeout > 50))
            timeout = 50;
        struct pollfd p[2] = {
            {.fd = c->fd, .events = events},
            {.fd = rt_g.stop_fd, .events = POLLIN},
        };
        int n = sys_poll(p, idle || !stopping ? 2 : 1, timeout);
        if (n < 0 && n != -EINTR)
            return n;
        if (n > 0 && p[0].revents) {
            rt_loop_clock_tick(); /* a threads-model thread's wake-up */
            return 0;
        }
    }
}

/* A send that gave up: a slow reader is a timeout, a peer that went away
 * is nothing to count (as khttpd counts them), anything else an error. */
static ssize_t send_failed(int err)
{
    if (err == -ETIMEDOUT)
        rt_count(RT_C_TIMEOUTS, 1);
    else if (err != -ECONNRESET && err != -EPIPE && err != -ESHUTDOWN)
        rt_count(RT_C_ERRORS, 1);
    return err;
}

int rt_wait(struct rt_conn *c, short events, uint64_t deadline_ms, bool idle)
{
    c->waits++;
    if (c->coro)
        return rt_wait_coro(c->coro, events, deadline_ms, idle);
    return wait_poll(c, events, deadline_ms, idle);
}

/* Wait until a send can go on, giving up after timeout_ms without
 * progress. A slow but steady reader frees the send buffer a little at a
 * time, and the socket turns writable only once a third of it is free,
 * which can take longer than the timeout: bytes the peer acknowledged in
 * the meantime (the unacknowledged queue, SIOCOUTQ, shrank) are progress
 * too, as kecho and khttpd count them. Only a reader that took nothing for
 * a whole timeout is given up on. */
static int send_wait(struct rt_conn *c, int timeout_ms)
{
    int queued = -1, now_queued;
    if (ioctl(c->fd, SIOCOUTQ, &queued) < 0)
        queued = -1;
    for (;;) {
        int r = rt_wait(c, POLLOUT, rt_now_ms() + (uint64_t) timeout_ms,
                        rt_g.cfg->stop_cuts_sends);
        if (r != -ETIMEDOUT || queued < 0)
            return r;
        if (ioctl(c->fd, SIOCOUTQ, &now_queued) < 0 || now_queued >= queued)
            return r;
        queued = now_queued;
    }
}

ssize_t rt_read_nowait(struct rt_conn *c, void *buf, size_t len)
{
    if (__builtin_expect(c->io != NULL, 0))
        return c->io->read_nowait(c, buf, len);
    ssize_t n;
    do
        n = sys_recv(c->fd, buf, len);
    while (n == -EINTR);
    return n;
}

ssize_t rt_read(struct rt_conn *c,
                void *buf,
                size_t len,
                uint64_t deadline_ms,
                bool idle)
{
    if (__builtin_expect(c->io != NULL, 0))
        return c->io->read(c, buf, len, deadline_ms, idle);
    for (;;) {
        ssize_t n = rt_read_nowait(c, buf, len);
        if (n != -EAGAIN)
            return n;
        int r = rt_wait(c, POLLIN, deadline_ms, idle);
        if (r < 0)
            return r;
    }
}

/* What a send loop makes of one call's result n: the bytes sent (0 when
 * it is to try again: interrupted, or it waited for room) or, below 0,
 * why it gives up. */
static ssize_t send_step(struct rt_conn *c, ssize_t n, int timeout_ms)
{
    if (n == -EINTR)
        return 0;
    if (n == -EAGAIN) {
        int r = send_wait(c, timeout_ms);
        return r < 0 ? send_failed(r) : 0;
    }
    if (n < 0)
        return send_failed((int) n);
    rt_count(RT_C_BYTES_OUT, (uint64_t) n);
    return n;
}

ssize_t rt_sendv(struct rt_conn *c,
                 struct iovec *iov,
                 int iovcnt,
                 bool more,
                 int timeout_ms)
{
    if (__builtin_expect(c->io != NULL, 0))
        return c->io->sendv(c, iov, iovcnt, more, timeout_ms);
    ssize_t total = 0;
    while (iovcnt > 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = iovcnt};
        ssize_t n = send_step(c, sys_sendmsg(c->fd, &m, more ? MSG_MORE : 0),
                              timeout_ms);
        if (n < 0)
            return n;
        total += n;
        while (iovcnt > 0 && (size_t) n >= iov->iov_len) {
            n -= iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            iov->iov_base = (char *) iov->iov_base + n;
            iov->iov_len -= n;
        }
    }
    return total;
}

/* One buffer: send(2) straight, without rt_sendv's iovec bookkeeping (an
 * echo's every message comes this way). */
ssize_t rt_send(struct rt_conn *c, const void *buf, size_t len, int timeout_ms)
{
    if (__builtin_expect(c->io != NULL, 0)) {
        struct iovec iov = {.iov_base = (void *) buf, .iov_len = len};
        return c->io->sendv(c, &iov, 1, false, timeout_ms);
    }
    size_t done = 0;
    while (done < len) {
        ssize_t n =
            send_step(c, sys_send(c->fd, (const char *) buf + done, len - done),
                      timeout_ms);
        if (n < 0)
            return n;
        done += (size_t) n;
    }
    return (ssize_t) done;
}

void rt_shutdown_write(struct rt_conn *c)
{
    if (c->io && c->io->shutdown_write(c) < 0)
        return;
    shutdown(c->fd, SHUT_WR);
}

void rt_yield(struct rt_conn *c)
{
    if (c->coro)
        rt_yield_coro(c->coro);
}

bool rt_head_alone(struct rt_conn *c, off_t offset, size_t count)
{
    return c->io && c->io->head_alone && c->io->head_alone(c, offset, count);
}

ssize_t rt_sendfile(struct rt_conn *c,
                    int file_fd,
                    off_t offset,
                    size_t count,
                    int timeout_ms)
{
    if (__builtin_expect(c->io != NULL, 0))
        return c->io->sendfile(c, file_fd, offset, count, timeout_ms);
    size_t left = count;
    while (left > 0) {
        ssize_t n = sys_sendfile(c->fd, file_fd, &offset, left);
        if (n == 0)
            return send_failed(-EIO); /* the file shrank under us */
        n = send_step(c, n, timeout_ms);
        if (n < 0)
            return n;
        left -= (size_t) n;
    }
    return count;
}
