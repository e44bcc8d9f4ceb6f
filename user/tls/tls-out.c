/* tls-out.c — where OpenSSL's records go when the kernel does not make
 * them: a BIO over the socket that, while tls-conn.c writes more than one
 * record's worth (t->out_gather), keeps the records of that write and
 * sends them together (up to KTCP_TLS_OUT bytes a send). A 64 KiB chunk of
 * a file is then one send and one large segment, not four of 16 KiB: the
 * kernel's cost is per call and per segment more than per byte. A write
 * of one record, and every handshake flight, goes to the socket at once.
 * Records kept are sent before any later one, by the next write through
 * the BIO or by ktcp_tls_out_flush, which the sender calls before it
 * counts a response sent. */
#include <errno.h>
#include <openssl/bio.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "tls-internal.h"

/* Send what is kept: 0 once all of it went, -1 with errno (EAGAIN: the
 * socket is full; the rest is kept). */
static int out_send(struct ktcp_tls_conn *t)
{
    while (t->out_len > 0) {
        ssize_t n = send(t->fd, t->out + t->out_off, t->out_len,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        t->out_off += (size_t) n;
        t->out_len -= (size_t) n;
    }
    t->out_off = 0;
    return 0;
}

/* A socket error as OpenSSL's socket BIO gives it: a retry for a full
 * socket, else -1 with errno kept for SSL_get_error's SSL_ERROR_SYSCALL. */
static int out_failed(BIO *b)
{
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        BIO_set_retry_write(b);
    return -1;
}

static bool out_keep(struct ktcp_tls_conn *t, const char *in, size_t len)
{
    if (!t->out_gather || len > KTCP_TLS_OUT - t->out_off - t->out_len)
        return false;
    if (!t->out && !(t->out = malloc(KTCP_TLS_OUT)))
        return false;
    memcpy(t->out + t->out_off + t->out_len, in, len);
    t->out_len += len;
    return true;
}

static int out_write(BIO *b, const char *in, int len)
{
    struct ktcp_tls_conn *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (len <= 0)
        return 0;
    if (out_keep(t, in, (size_t) len))
        return len;
    if (out_send(t) < 0)
        return out_failed(b);
    if (out_keep(t, in, (size_t) len))
        return len;
    ssize_t n;
    do
        n = send(t->fd, in, (size_t) len, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    return n < 0 ? out_failed(b) : (int) n;
}

static long out_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    struct ktcp_tls_conn *t = BIO_get_data(b);
    (void) num;
    (void) ptr;
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        BIO_clear_retry_flags(b);
        return out_send(t) == 0 ? 1 : out_failed(b);
    case BIO_CTRL_WPENDING:
        return (long) t->out_len;
    case BIO_CTRL_PENDING:
        return 0;
    default:
        /* kTLS among them: OpenSSL asks, and is told no */
        return 0;
    }
}

static int out_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static BIO_METHOD *out_method;

static void out_method_make(void)
{
    int index = BIO_get_new_index();
    BIO_METHOD *m = index < 0 ? NULL
                              : BIO_meth_new(index | BIO_TYPE_SOURCE_SINK,
                                             "ktcp gathered records");
    if (m &&
        (!BIO_meth_set_write(m, out_write) || !BIO_meth_set_ctrl(m, out_ctrl) ||
         !BIO_meth_set_create(m, out_create))) {
        BIO_meth_free(m);
        m = NULL;
    }
    out_method = m;
}

BIO *ktcp_tls_out_bio(struct ktcp_tls_conn *t)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, out_method_make);
    BIO *b = out_method ? BIO_new(out_method) : NULL;
    if (b)
        BIO_set_data(b, t);
    return b;
}

ssize_t ktcp_tls_out_flush(struct ktcp_tls_conn *t)
{
    if (out_send(t) == 0)
        return 0;
    int e = errno;
    if (e == EAGAIN || e == EWOULDBLOCK)
        return KTCP_TLS_WANT_WRITE;
    snprintf(t->err, sizeof(t->err), "%s", strerror(e));
    return -e;
}
