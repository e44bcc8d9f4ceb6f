/* tls-internal.h — what the files of user/tls share: the context and the
 * connection as they are. */
#ifndef KTCP_TLS_INTERNAL_H
#define KTCP_TLS_INTERNAL_H

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>

#include "ktcp-tls.h"

struct ktcp_tls_ticket_key {
    unsigned char name[16];
    unsigned char aes[32];
    unsigned char hmac[32];
    uint64_t made_s; /* CLOCK_MONOTONIC seconds */
    bool valid;
};

struct ktcp_tls_ctx {
    pthread_mutex_t lock; /* ssl and keys */
    SSL_CTX *ssl;         /* new connections' (a reload swaps it) */
    /* [0] seals new tickets, [1] (the one before) still opens them */
    struct ktcp_tls_ticket_key keys[2];
    unsigned rotate_s;
    unsigned long rotations;
    bool no_ktls;
    int max_version; /* OpenSSL's TLS1_2_VERSION or TLS1_3_VERSION */
    /* kTLS off or not in this kernel: OpenSSL makes every record and
     * writes it through tls-out.c's BIO */
    bool user_records;
};

/* An empty error queue before an OpenSSL call, for SSL_get_error to read
 * its result right. A queue that is empty already is left alone: looking
 * costs a quarter of what ERR_clear_error does, which clears all sixteen
 * slots (206 against 837 instructions a call, callgrind, OpenSSL 3.0),
 * and a request makes two or three such calls. */
static inline void ktcp_tls_err_reset(void)
{
    if (ERR_peek_error() != 0)
        ERR_clear_error();
}

/* Size of the buffer a connection fills from a file when the kernel does
 * not write its records: four full records a write, a quarter of the
 * file reads of one (a 1 MiB body: 16 preads, not 64). */
#define KTCP_TLS_BUF 65536

/* An answer of at most this many bytes in more than one piece (a head
 * and a small body) is gathered on the stack, not in the chunk buffer. */
#define KTCP_TLS_SMALL 4096

/* The records tls-out.c keeps to send together: those of one
 * KTCP_TLS_BUF chunk (four full records with their headers and tags). */
#define KTCP_TLS_OUT (4 * (SSL3_RT_MAX_PLAIN_LENGTH + 64))

struct ktcp_tls_conn {
    SSL *ssl;
    int fd;
    bool eof;        /* the peer closed (close_notify or EOF) after data */
    int pending_err; /* an error met after data was returned */
    /* a chunk read from a file (or gathered from an iovec by tls-rt.c)
     * and not yet all written: OpenSSL wants a retried write to present
     * the same bytes */
    char *buf;
    size_t buf_len, buf_done;
    off_t buf_file_off; /* where the file chunk came from; -1: not one */
    /* TLS 1.3 KeyUpdate messages seen (msg callback, kTLS TX only): the
     * peer's asking for new sending keys, and OpenSSL's own sent */
    bool key_update_asked, key_update_sent;
    /* Records read by OpenSSL (no kTLS RX): the last read of the socket
     * returned less than OpenSSL asked for, so the socket was empty then
     * (tls-rt.c's BIO callback sets it; ktcp_tls_read stops there). */
    bool raw_watched, raw_drained;
    /* tls-rt.c: how long a flush of kTLS's records waits for an
     * acknowledged byte before it gives up */
    int flush_timeout_ms;
    /* kTLS TX: a record went to the kernel since the last flush ended
     * (ktcp_tls_rt_flush); the flush found the connection gone */
    bool tx_unflushed, tcp_gone;
    /* kTLS TX: TCP_NOTSENT_LOWAT as tls-rt.c grew it; 0: the listener's */
    int lowat;
    /* ssl NULL (after the handshake): the kernel reads and writes every
     * record and OpenSSL's state is freed; application data goes
     * straight to the socket (tls-conn.c's direct()). Then alert_sent:
     * the close_notify went (or was given up). */
    bool alert_sent;
    /* direct: bytes of the record kTLS holds open (sent with MSG_MORE, a
     * head before its body) that no send pushed yet */
    size_t rec_open;
    /* tls-out.c (user_records: the context's): records kept to go in one
     * send, out_len bytes from out_off of out, while out_gather (a write
     * of several records) */
    char *out;
    size_t out_off, out_len;
    bool user_records, out_gather;
    char err[160];
};

/* An iovec gathered into records (tls-conn.c): bytes of it taken,
 * KTCP_TLS_WANT_*, or -errno; called again with the iovec advanced. more:
 * the response goes on (a file body follows; the close's alert pushes
 * the end), so under kTLS both ways its last record stays open. */
ssize_t ktcp_tls_writev(struct ktcp_tls_conn *t,
                        const struct iovec *iov,
                        int iovcnt,
                        bool more);

/* tls-out.c: the BIO OpenSSL writes t's records to when it makes them,
 * and the send of those it kept (0 once none is left, KTCP_TLS_WANT_WRITE
 * or -errno). */
BIO *ktcp_tls_out_bio(struct ktcp_tls_conn *t);
ssize_t ktcp_tls_out_flush(struct ktcp_tls_conn *t);

/* A new OpenSSL connection of ctx's current SSL_CTX (under its lock). */
SSL *ktcp_tls_ctx_ssl_new(struct ktcp_tls_ctx *ctx);

#endif /* KTCP_TLS_INTERNAL_H */
