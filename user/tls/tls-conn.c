/* tls-conn.c — one server-side TLS connection over a non-blocking socket:
 * every call does what it can now and answers KTCP_TLS_WANT_READ or
 * KTCP_TLS_WANT_WRITE when the socket must be waited for; the caller
 * waits however it waits (tls-rt.c on the runtime, an agent on its own
 * epoll) and calls again with the same arguments. OpenSSL's error queue is
 * per thread, so it is cleared before each call and read right after,
 * before the caller can wait (and, on the runtime, move threads). */
#include <errno.h>
#include <limits.h>
#include <linux/tls.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http_response.h"
#include "tls-internal.h"

/* OpenSSL makes every record: it reads the socket, and writes through
 * tls-out.c (SSL_set_fd would also ask the socket for a kTLS the kernel
 * does not have, a system call a connection). */
static bool set_bios(struct ktcp_tls_conn *t)
{
    BIO *r = BIO_new_socket(t->fd, BIO_NOCLOSE), *w = ktcp_tls_out_bio(t);
    if (!r || !w) {
        BIO_free(r);
        BIO_free(w);
        return false;
    }
    SSL_set_bio(t->ssl, r, w);
    return true;
}

struct ktcp_tls_conn *ktcp_tls_conn_new(struct ktcp_tls_ctx *ctx, int fd)
{
    struct ktcp_tls_conn *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    ktcp_tls_err_reset();
    t->fd = fd;
    t->ssl = ktcp_tls_ctx_ssl_new(ctx);
    if (!t->ssl ||
        !(ctx->user_records ? set_bios(t) : SSL_set_fd(t->ssl, fd))) {
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    SSL_set_accept_state(t->ssl);
    t->user_records = ctx->user_records;
    t->buf_file_off = -1;
    return t;
}

void ktcp_tls_conn_free(struct ktcp_tls_conn *t)
{
    if (!t)
        return;
    SSL_free(t->ssl); /* the socket BIO does not close fd */
    free(t->buf);
    free(t->out);
    free(t);
}

void ktcp_tls_conn_trim(struct ktcp_tls_conn *t)
{
    if (t && t->out && !t->out_len) {
        free(t->out);
        t->out = NULL;
    }
    if (!t || !t->buf || t->buf_done < t->buf_len)
        return;
    free(t->buf);
    t->buf = NULL;
    t->buf_len = t->buf_done = 0;
}

int ktcp_tls_conn_release(struct ktcp_tls_conn *t)
{
    if (!ktcp_tls_ktls_tx(t) || !ktcp_tls_ktls_rx(t) ||
        (t->ssl && SSL_has_pending(t->ssl)) || t->buf_done < t->buf_len)
        return -EBUSY;
    int fd = t->fd;
    ktcp_tls_conn_free(t);
    return fd;
}

/* What a failed OpenSSL call (its return ret) means: KTCP_TLS_WANT_*, 0
 * (the peer closed), or -errno, with the reason kept in t->err. */
static ssize_t failed(struct ktcp_tls_conn *t, int ret)
{
    int err = SSL_get_error(t->ssl, ret);
    int sys = errno; /* read at once: nothing can switch threads here */
    switch (err) {
    case SSL_ERROR_WANT_READ:
        return KTCP_TLS_WANT_READ;
    case SSL_ERROR_WANT_WRITE:
        return KTCP_TLS_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0) {
            if (ret == 0 || sys == 0) /* EOF without close_notify */
                return 0;
            snprintf(t->err, sizeof(t->err), "%s", strerror(sys));
            return sys == EAGAIN ? KTCP_TLS_WANT_READ : -sys;
        }
        /* OpenSSL said why */
        __attribute__((fallthrough));
    default: {
        unsigned long e = ERR_peek_last_error();
        if (e)
            ERR_error_string_n(e, t->err, sizeof(t->err));
        else
            snprintf(t->err, sizeof(t->err), "SSL error %d", err);
        ERR_clear_error();
        return -EPROTO;
    }
    }
}

/* The handshake messages of a session the kernel writes the records of:
 * a TLS 1.3 KeyUpdate that asks for the server's new sending keys, and
 * the KeyUpdate OpenSSL answers it with. OpenSSL 3.0 writes that answer
 * from within the SSL_read that read the peer's (the key_update request
 * it leaves pending is cleared by then), so what was asked and what went
 * out can only be learnt as the messages pass. */
static void on_message(int write_p,
                       int version,
                       int content_type,
                       const void *buf,
                       size_t len,
                       SSL *ssl,
                       void *arg)
{
    const unsigned char *m = buf;
    struct ktcp_tls_conn *t = arg;
    (void) version;
    (void) ssl;
    /* type (1), length (3), request_update (1) */
    if (content_type != SSL3_RT_HANDSHAKE || len < 5 ||
        m[0] != SSL3_MT_KEY_UPDATE)
        return;
    if (write_p)
        t->key_update_sent = true;
    else if (m[4] == SSL_KEY_UPDATE_REQUESTED)
        t->key_update_asked = true;
}

int ktcp_tls_handshake(struct ktcp_tls_conn *t)
{
    ktcp_tls_err_reset();
    int n = SSL_do_handshake(t->ssl);
    if (n == 1) {
        if (ktcp_tls_ktls_tx(t)) {
            SSL_set_msg_callback_arg(t->ssl, t);
            SSL_set_msg_callback(t->ssl, on_message);
        }
        return 0;
    }
    ssize_t r = failed(t, n);
    if (r == 0) {
        snprintf(t->err, sizeof(t->err), "closed during the handshake");
        return -ECONNRESET;
    }
    return (int) r;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ktcp_tls_handshake_wait(struct ktcp_tls_conn *t, int timeout_ms)
{
    int64_t deadline = mono_ms() + timeout_ms;
    for (;;) {
        int r = ktcp_tls_handshake(t);
        if (r != KTCP_TLS_WANT_READ && r != KTCP_TLS_WANT_WRITE)
            return r;
        struct pollfd p = {
            .fd = t->fd,
            .events = r == KTCP_TLS_WANT_READ ? POLLIN : POLLOUT,
        };
        int64_t left;
        do {
            left = deadline - mono_ms();
            if (left <= 0) {
                snprintf(t->err, sizeof(t->err), "handshake timed out");
                return -ETIMEDOUT;
            }
        } while (poll(&p, 1, (int) left) < 0 && errno == EINTR);
    }
}

/* Without OpenSSL's state (freed by direct() once the kernel carries
 * both directions; a connection has it from ktcp_tls_conn_new until
 * then) the kernel has both. With OpenSSL's records (no kTLS asked, or
 * no ULP) neither: not asked of the BIOs, which costs a BIO_ctrl a
 * direction on every read and write. */
bool ktcp_tls_ktls_tx(const struct ktcp_tls_conn *t)
{
    return !t->ssl ||
           (!t->user_records && BIO_get_ktls_send(SSL_get_wbio(t->ssl)) > 0);
}

bool ktcp_tls_ktls_rx(const struct ktcp_tls_conn *t)
{
    return !t->ssl ||
           (!t->user_records && BIO_get_ktls_recv(SSL_get_rbio(t->ssl)) > 0);
}

const char *ktcp_tls_version(const struct ktcp_tls_conn *t)
{
    return t->ssl ? SSL_get_version(t->ssl) : "";
}

const char *ktcp_tls_cipher(const struct ktcp_tls_conn *t)
{
    const char *c = t->ssl ? SSL_get_cipher_name(t->ssl) : NULL;
    return c ? c : "";
}

const char *ktcp_tls_alpn(const struct ktcp_tls_conn *t, char *buf, size_t len)
{
    const unsigned char *p = NULL;
    unsigned int n = 0;
    if (t->ssl)
        SSL_get0_alpn_selected(t->ssl, &p, &n);
    if (!len)
        return "";
    if (n >= len)
        n = (unsigned int) len - 1;
    memcpy(buf, p ? (const char *) p : "", p ? n : 0);
    buf[p ? n : 0] = '\0';
    return buf;
}

bool ktcp_tls_resumed(const struct ktcp_tls_conn *t)
{
    return t->ssl && SSL_session_reused(t->ssl) == 1;
}

const char *ktcp_tls_error(const struct ktcp_tls_conn *t)
{
    return t->err;
}

/* Whether application data may bypass OpenSSL from now on: the kernel
 * reads and writes the records (TLS 1.2 here: OpenSSL 3.0 gives kTLS the
 * receive side of no TLS 1.3 session, so no KeyUpdate can arrive), OpenSSL
 * holds no byte it read ahead, no write of its waits to be retried, and
 * no chunk waits to be presented again. It stays so, and OpenSSL is not
 * needed again: its state (session, keys, record layer: about 16 KiB a
 * connection) is freed here, as an agent's hand-off frees it, and what
 * it would still do is done on the socket: a read is one recvmsg, an
 * answer one sendmsg of its iovec, a file body sendfile(2), the
 * close_notify a record of its own (ktcp_tls_shutdown). What it saves is
 * OpenSSL's record layer around each system call, the copy of a head and
 * a small body into one buffer, and an idle connection's memory. */
static bool direct(struct ktcp_tls_conn *t)
{
    if (!t->ssl)
        return true;
    if (!ktcp_tls_ktls_rx(t) || !ktcp_tls_ktls_tx(t) ||
        SSL_has_pending(t->ssl) || SSL_want(t->ssl) == SSL_WRITING ||
        t->buf_done < t->buf_len)
        return false;
    SSL_free(t->ssl); /* sends nothing; the socket BIO leaves fd open */
    t->ssl = NULL;
    free(t->buf);
    t->buf = NULL;
    t->buf_len = t->buf_done = 0;
    return true;
}

/* A record that is not application data, read by the kernel: a
 * close_notify ends the stream, anything else (another alert, a
 * renegotiation's handshake) the connection, as OpenSSL's SSL_read would
 * under SSL_OP_NO_RENEGOTIATION. */
static ssize_t direct_control(struct ktcp_tls_conn *t,
                              unsigned char type,
                              const unsigned char *rec,
                              ssize_t n)
{
    if (type == SSL3_RT_ALERT && n == 2 && rec[1] == SSL_AD_CLOSE_NOTIFY)
        return 0;
    if (type == SSL3_RT_ALERT && n == 2)
        snprintf(t->err, sizeof(t->err), "the peer's alert %u (level %u)",
                 rec[1], rec[0]);
    else
        snprintf(t->err, sizeof(t->err), "a record of type %u", type);
    return -EPROTO;
}

/* A failed recvmsg or sendmsg on the kTLS socket (errno): want (a wait
 * for input or room), or -errno with the reason in t->err; a record that
 * failed to open (EBADMSG) or to fit (EMSGSIZE) is -EPROTO, as OpenSSL's. */
static ssize_t direct_failed(struct ktcp_tls_conn *t, ssize_t want)
{
    int e = errno;
    if (e == EAGAIN || e == EINTR)
        return want;
    snprintf(t->err, sizeof(t->err), "%s", strerror(e));
    return e == EBADMSG || e == EMSGSIZE ? -EPROTO : -e;
}

/* One recvmsg of decrypted records: bytes, KTCP_TLS_WANT_READ, 0 (the
 * peer closed) or -errno. The kernel returns records of one type a call,
 * its type in a control message. */
static ssize_t direct_recv(struct ktcp_tls_conn *t, void *buf, size_t len)
{
    char cbuf[CMSG_SPACE(sizeof(unsigned char))];
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = cbuf,
                         .msg_controllen = sizeof(cbuf)};
    ssize_t n = recvmsg(t->fd, &msg, MSG_DONTWAIT);
    if (n < 0)
        return direct_failed(t, KTCP_TLS_WANT_READ);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    if (n > 0 && cm && cm->cmsg_level == SOL_TLS &&
        cm->cmsg_type == TLS_GET_RECORD_TYPE) {
        unsigned char type = *CMSG_DATA(cm);
        if (type != SSL3_RT_APPLICATION_DATA)
            return direct_control(t, type, buf, n);
    }
    return n;
}

ssize_t ktcp_tls_read(struct ktcp_tls_conn *t, void *buf, size_t len)
{
    if (t->pending_err) {
        ssize_t e = t->pending_err;
        t->pending_err = 0;
        return e;
    }
    if (t->eof)
        return 0;
    if (len && direct(t)) {
        /* a short read: the socket had no more whole records */
        ssize_t n = direct_recv(t, buf, len);
        if (n == 0)
            t->eof = true;
        return n;
    }
    size_t got = 0;
    while (got < len) {
        size_t want = len - got < INT_MAX ? len - got : INT_MAX;
        ktcp_tls_err_reset();
        int n = SSL_read(t->ssl, (char *) buf + got, (int) want);
        if (n > 0) {
            got += (size_t) n;
            /* OpenSSL holds nothing more and its last read of the socket
             * found it empty: so is a short read of a plain socket, and
             * the read that would say so (EAGAIN) is saved */
            if (t->raw_watched && t->raw_drained && got < len &&
                !SSL_has_pending(t->ssl))
                break;
            continue;
        }
        ssize_t r = failed(t, n);
        if (got == 0) {
            if (r == 0)
                t->eof = true;
            return r;
        }
        /* the bytes first; what ended the loop comes at the next call */
        if (r == 0)
            t->eof = true;
        else if (r != KTCP_TLS_WANT_READ && r != KTCP_TLS_WANT_WRITE)
            t->pending_err = (int) r;
        break;
    }
    return (ssize_t) got;
}

/* A TLS 1.3 peer's KeyUpdate that asked for new sending keys while the
 * kernel writes the records: OpenSSL 3.0 cannot move new keys into kTLS,
 * so its KeyUpdate goes out (or is pending) and every record after it
 * would go under the kernel's old keys, which the peer can no longer
 * decrypt. Nothing more is written: -EPROTO, the reason in t->err; and
 * once OpenSSL's KeyUpdate went out, not even a close_notify
 * (ktcp_tls_shutdown). */
static bool ktls_keys_stale(struct ktcp_tls_conn *t)
{
    if (!t->ssl)
        return false; /* direct: a KeyUpdate ended the connection */
    if (!t->key_update_asked &&
        SSL_get_key_update_type(t->ssl) == SSL_KEY_UPDATE_NONE)
        return false;
    if (!ktcp_tls_ktls_tx(t))
        return false;
    snprintf(t->err, sizeof(t->err),
             "the peer asked for new sending keys, which kTLS cannot take");
    return true;
}

/* Write buf[0..len): bytes written (> 0), KTCP_TLS_WANT_*, or -errno. */
static ssize_t write_some(struct ktcp_tls_conn *t, const void *buf, size_t len)
{
    if (ktls_keys_stale(t))
        return -EPROTO;
    if (len > INT_MAX)
        len = INT_MAX;
    ktcp_tls_err_reset();
    /* Records made by OpenSSL (tls-out.c): an SSL_write ends after each
     * record (SSL_MODE_ENABLE_PARTIAL_WRITE), so those of len are written
     * here one call each, kept, and go out together. A call that fails
     * leaves its record with OpenSSL, for the caller's next call, which
     * starts with the same bytes. */
    t->out_gather = t->user_records && len > SSL3_RT_MAX_PLAIN_LENGTH;
    size_t done = 0;
    int n;
    do {
        n = SSL_write(t->ssl, (const char *) buf + done, (int) (len - done));
        if (n > 0)
            done += (size_t) n;
    } while (n > 0 && t->out_gather && done < len);
    t->out_gather = false;
    if (done > 0) {
        if (n <= 0) /* what ended the loop is not this call's result */
            ERR_clear_error();
        /* what the socket has no room for waits for the next write or
         * the sender's flush (ktcp_tls_out_flush) */
        ssize_t f = t->out_len ? ktcp_tls_out_flush(t) : 0;
        return f < 0 && f != KTCP_TLS_WANT_WRITE ? f : (ssize_t) done;
    }
    ssize_t r = failed(t, n);
    return r == 0 ? -EPIPE : r;
}

/* The chunk in t->buf that a write has not yet taken all of. */
static ssize_t write_buf(struct ktcp_tls_conn *t)
{
    ssize_t n = write_some(t, t->buf + t->buf_done, t->buf_len - t->buf_done);
    if (n > 0) {
        t->buf_done += (size_t) n;
        if (t->buf_file_off >= 0)
            t->buf_file_off += n;
    }
    return n;
}

static bool buf_alloc(struct ktcp_tls_conn *t)
{
    if (!t->buf)
        t->buf = malloc(KTCP_TLS_BUF);
    return t->buf != NULL;
}

/* One sendmsg through kTLS: one record a call (more past 16 KiB), or,
 * with more (MSG_MORE), a record the kernel keeps open for what follows
 * (a file body's first bytes join the head's record). */
static ssize_t direct_send(struct ktcp_tls_conn *t,
                           const struct iovec *iov,
                           int iovcnt,
                           bool more)
{
    struct msghdr msg = {.msg_iov = (struct iovec *) iov,
                         .msg_iovlen = (size_t) iovcnt};
    ssize_t n = sendmsg(t->fd, &msg,
                        MSG_NOSIGNAL | MSG_DONTWAIT | (more ? MSG_MORE : 0));
    if (n < 0)
        return direct_failed(t, KTCP_TLS_WANT_WRITE);
    t->rec_open = more ? (t->rec_open + (size_t) n) % HTTP_TLS_RECORD_MAX : 0;
    return n;
}

ssize_t ktcp_tls_write(struct ktcp_tls_conn *t, const void *buf, size_t len)
{
    if (!t->ssl || (len && direct(t))) {
        struct iovec iov = {.iov_base = (void *) buf, .iov_len = len};
        return direct_send(t, &iov, 1, false);
    }
    return write_some(t, buf, len);
}

/* The iovec's first bytes, up to cap, copied to dst; how many. */
static size_t gather(char *dst, size_t cap, const struct iovec *iov, int iovcnt)
{
    size_t n = 0;
    for (int i = 0; i < iovcnt && n < cap; i++) {
        size_t take = iov[i].iov_len;
        if (take > cap - n)
            take = cap - n;
        memcpy(dst + n, iov[i].iov_base, take);
        n += take;
    }
    return n;
}

/* Used by tls-rt.c: an iovec gathered into records of up to KTCP_TLS_BUF
 * (a head and a small body in one record, not two). Bytes of the iovec
 * taken (> 0), KTCP_TLS_WANT_*, or -errno; the caller calls again with
 * the iovec advanced by what was taken. */
ssize_t ktcp_tls_writev(struct ktcp_tls_conn *t,
                        const struct iovec *iov,
                        int iovcnt,
                        bool more)
{
    if (!t->ssl || (iovcnt > 0 && direct(t)))
        return direct_send(t, iov, iovcnt < IOV_MAX ? iovcnt : IOV_MAX, more);
    if (t->buf_done < t->buf_len && t->buf_file_off < 0)
        return write_buf(t); /* the chunk a write wants presented again */
    if (iovcnt == 1 || (iovcnt > 0 && iov[0].iov_len >= KTCP_TLS_BUF))
        return write_some(t, iov[0].iov_base, iov[0].iov_len);
    /* A head and a small body are one record, gathered on the stack: the
     * chunk buffer would be allocated and, the connection idle again,
     * freed for each answer. A write that must be presented again gets
     * the same bytes: the caller's next call gathers them again. */
    size_t all = 0;
    for (int i = 0; i < iovcnt && all <= KTCP_TLS_SMALL; i++)
        all += iov[i].iov_len;
    if (all <= KTCP_TLS_SMALL) {
        char small[KTCP_TLS_SMALL];
        return write_some(t, small, gather(small, sizeof(small), iov, iovcnt));
    }
    if (!buf_alloc(t))
        return -ENOMEM;
    t->buf_len = gather(t->buf, KTCP_TLS_BUF, iov, iovcnt);
    t->buf_done = 0;
    t->buf_file_off = -1;
    return write_buf(t);
}

bool ktcp_tls_head_alone(const struct ktcp_tls_conn *t, off_t off, size_t len)
{
    return ktcp_tls_ktls_tx(t) &&
           http_tls_head_alone((uint64_t) off, len, (size_t) getpagesize());
}

/* kTLS: a file body's first send after a head that left a record open
 * ends where the body's next records start on a page
 * (http_tls_first_piece) */
ssize_t ktcp_tls_sendfile(struct ktcp_tls_conn *t,
                          int file_fd,
                          off_t off,
                          size_t len)
{
    if (ktcp_tls_ktls_tx(t)) {
        if (ktls_keys_stale(t))
            return -EPROTO;
        ktcp_tls_err_reset();
        errno = 0;
        size_t chunk =
            !t->ssl ? (size_t) http_tls_first_piece(t->rec_open, (uint64_t) off,
                                                    len, (size_t) getpagesize())
                    : len;
        ossl_ssize_t n;
        if (!t->ssl) {
            off_t from = off;
            n = sendfile(t->fd, file_fd, &from, chunk);
            if (n < 0)
                return direct_failed(t, KTCP_TLS_WANT_WRITE);
            if (n == 0)
                return -EIO; /* the file shrank under us */
        } else {
            n = SSL_sendfile(t->ssl, file_fd, off, chunk, 0);
        }
        if (n > 0) {
            /* a whole call ends with a push; a part leaves it open */
            t->rec_open = (size_t) n == chunk ? 0
                                              : (t->rec_open + (size_t) n) %
                                                    HTTP_TLS_RECORD_MAX;
            return n;
        }
        /* A full socket: OpenSSL 3.0 marks its BIO for a retried write
         * but not the SSL, so SSL_get_error says SSL_ERROR_SYSCALL and
         * failed() would read the EAGAIN as a wait for input, which the
         * client, waiting for the body, never sends. A wait for room. */
        if (n < 0 && (errno == EAGAIN || errno == EINTR) &&
            ERR_peek_error() == 0)
            return KTCP_TLS_WANT_WRITE;
        ssize_t r = failed(t, (int) n);
        return r == 0 ? -EPIPE : r;
    }
    if (t->buf_done < t->buf_len && t->buf_file_off == off)
        return write_buf(t);
    if (!buf_alloc(t))
        return -ENOMEM;
    size_t want = len < KTCP_TLS_BUF ? len : KTCP_TLS_BUF;
    ssize_t got = pread(file_fd, t->buf, want, off);
    if (got < 0)
        return -errno;
    if (got == 0)
        return -EIO; /* the file shrank under us */
    t->buf_len = (size_t) got;
    t->buf_done = 0;
    t->buf_file_off = off;
    return write_buf(t);
}

/* direct: the close_notify alert, a record of its own (a data record
 * kTLS holds open goes out before it); once, as OpenSSL sends it. */
static int direct_close_notify(struct ktcp_tls_conn *t)
{
    static const unsigned char alert[2] = {SSL3_AL_WARNING,
                                           SSL_AD_CLOSE_NOTIFY};
    if (t->alert_sent)
        return 0;
    union {
        char buf[CMSG_SPACE(sizeof(unsigned char))];
        struct cmsghdr align;
    } cbuf;
    memset(&cbuf, 0, sizeof(cbuf));
    struct iovec iov = {.iov_base = (void *) alert, .iov_len = sizeof(alert)};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = cbuf.buf,
                         .msg_controllen = sizeof(cbuf.buf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_TLS;
    cm->cmsg_type = TLS_SET_RECORD_TYPE;
    cm->cmsg_len = CMSG_LEN(sizeof(unsigned char));
    *CMSG_DATA(cm) = SSL3_RT_ALERT;
    if (sendmsg(t->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
        (errno == EAGAIN || errno == EINTR))
        return KTCP_TLS_WANT_WRITE;
    t->alert_sent = true; /* or given up on: the FIN follows anyway */
    t->rec_open = 0;
    return 0;
}

int ktcp_tls_shutdown(struct ktcp_tls_conn *t)
{
    if (!t->ssl)
        return direct_close_notify(t);
    /* after OpenSSL's KeyUpdate the peer reads under keys the kernel
     * does not have: a close_notify would be a record it cannot decrypt */
    if (t->key_update_sent && ktcp_tls_ktls_tx(t))
        return 0;
    ktcp_tls_err_reset();
    int n = SSL_shutdown(t->ssl);
    if (n >= 0)
        return 0;
    ssize_t r = failed(t, n);
    /* kTLS had no room for the alert: worth a wait. Else best effort:
     * the FIN follows anyway */
    return r == KTCP_TLS_WANT_WRITE ? KTCP_TLS_WANT_WRITE : 0;
}
