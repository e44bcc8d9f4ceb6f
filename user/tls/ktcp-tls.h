/* ktcp-tls.h — the project's one TLS layer for user space, on OpenSSL 3
 * (docs/tls.md). Two parts:
 *
 *   tls-ctx.c, tls-conn.c  a server context (certificate chain and key
 *       from PEM files, TLS 1.2 and 1.3 only, AEAD suites only, server
 *       preference, ALPN http/1.1, session tickets under keys of its own
 *       rotated at least daily, kTLS asked for) and its connections, each
 *       call non-blocking: it answers KTCP_TLS_WANT_READ or _WANT_WRITE
 *       and the caller waits for the socket however it waits. Nothing here
 *       knows the runtime: a separate agent (one epoll loop) can create a
 *       context, accept, run the handshake, turn on kTLS and hand the
 *       socket on (ktcp_tls_conn_release).
 *   tls-rt.c  the same connection on the user runtime (user/rt): the
 *       handshake with a deadline waiting through rt_wait, and the
 *       transport (struct rt_io) that makes rt_read/rt_sendv/rt_sendfile of
 *       that connection TLS records (SSL_sendfile when kTLS sends).
 *
 * Thread safety: a context is shared by every thread; a reload swaps the
 * OpenSSL context under a lock, and connections made before keep the old
 * one until they end. A connection is used by one thread at a time.
 */
#ifndef KTCP_TLS_H
#define KTCP_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct ktcp_tls_ctx;
struct ktcp_tls_conn;

/* Non-blocking results (below 0, beside -errno values). */
#define KTCP_TLS_WANT_READ (-100001)
#define KTCP_TLS_WANT_WRITE (-100002)

/* Session ticket keys are replaced at least this often (a day); the key
 * before stays valid for decryption (its tickets are renewed) one more
 * period, so a ticket lives at most two. */
#define KTCP_TLS_TICKET_ROTATE_S (24 * 3600)

struct ktcp_tls_opts {
    const char *cert_file; /* PEM: the certificate, then its chain */
    const char *key_file;  /* PEM: the private key */
    /* seconds between ticket key rotations; 0: KTCP_TLS_TICKET_ROTATE_S */
    unsigned ticket_rotate_s;
    bool no_ktls; /* never ask for kTLS (records always by OpenSSL) */
    /* the highest version negotiated: 0 or KTCP_TLS_V1_3, or KTCP_TLS_V1_2
     * (an agent whose OpenSSL puts a TLS 1.3 session's receive keys in no
     * kernel: OpenSSL 3.0 does so for TLS 1.2 only) */
    unsigned max_version;
};

/* Protocol versions, as on the wire (for ktcp_tls_opts.max_version). */
#define KTCP_TLS_V1_2 0x0303
#define KTCP_TLS_V1_3 0x0304

/* A server context from opts; NULL with the reason in err. */
struct ktcp_tls_ctx *ktcp_tls_ctx_new(const struct ktcp_tls_opts *opts,
                                      char *err,
                                      size_t errlen);
/* Load the certificate and key again (the same or other paths): on
 * success new connections use them at once and 0 is returned; on failure
 * (the files are missing, unreadable, or the key does not match) the
 * context keeps the pair it had and -1 is returned with the reason in
 * err. Connections already open are not touched either way. */
int ktcp_tls_ctx_reload(struct ktcp_tls_ctx *ctx,
                        const char *cert_file,
                        const char *key_file,
                        char *err,
                        size_t errlen);
void ktcp_tls_ctx_free(struct ktcp_tls_ctx *ctx);
/* Whether this kernel takes the "tls" upper-layer protocol (a probe of a
 * TCP socket, no connection): kTLS can be turned on only then. Where it
 * does, a loopback connection's kTLS keys load the kernel's AES-GCM now
 * (seconds on a fresh boot), not in the first client's handshake. */
bool ktcp_tls_kernel_has_ulp(void);
/* The OpenSSL version string, for start-up lines. */
const char *ktcp_tls_library(void);

/* A connection on fd (non-blocking, accepted): the server side of TLS.
 * NULL when out of memory. fd stays the caller's (never closed here). */
struct ktcp_tls_conn *ktcp_tls_conn_new(struct ktcp_tls_ctx *ctx, int fd);
/* One step of the handshake: 0 done, KTCP_TLS_WANT_*, or below that an
 * error (-EPROTO: the peer's bytes were not an acceptable ClientHello or
 * handshake; -ECONNRESET/-EPIPE: it went away). */
int ktcp_tls_handshake(struct ktcp_tls_conn *t);
/* The whole handshake in the calling thread, waiting for the socket with
 * poll(2), done within timeout_ms of the call (a deadline for the whole
 * of it, not for each read): 0, -ETIMEDOUT, or the error of
 * ktcp_tls_handshake. For an agent with a thread per handshake. */
int ktcp_tls_handshake_wait(struct ktcp_tls_conn *t, int timeout_ms);
/* After the handshake: whether the kernel now writes (tx) or reads (rx)
 * the records of this connection (kTLS). */
bool ktcp_tls_ktls_tx(const struct ktcp_tls_conn *t);
bool ktcp_tls_ktls_rx(const struct ktcp_tls_conn *t);
/* The version ("TLSv1.3"), cipher and ALPN protocol ("" if none). */
const char *ktcp_tls_version(const struct ktcp_tls_conn *t);
const char *ktcp_tls_cipher(const struct ktcp_tls_conn *t);
const char *ktcp_tls_alpn(const struct ktcp_tls_conn *t, char *buf, size_t len);
/* The session was resumed (a ticket). */
bool ktcp_tls_resumed(const struct ktcp_tls_conn *t);
/* The reason of the last failure of t, for a log line ("" if none). */
const char *ktcp_tls_error(const struct ktcp_tls_conn *t);
/* Application data: bytes (> 0), 0 at the peer's close_notify or EOF,
 * KTCP_TLS_WANT_*, or -errno. A read fills buf until it is full or the
 * socket has nothing more (so a read that returns less than len saw the
 * socket empty, as a recv would). */
ssize_t ktcp_tls_read(struct ktcp_tls_conn *t, void *buf, size_t len);
ssize_t ktcp_tls_write(struct ktcp_tls_conn *t, const void *buf, size_t len);
/* len bytes of file_fd from off: SSL_sendfile (zero copy) under kTLS TX,
 * else read into a buffer and written as records. */
ssize_t ktcp_tls_sendfile(struct ktcp_tls_conn *t,
                          int file_fd,
                          off_t off,
                          size_t len);
/* Whether a head before such a body goes in a record of its own (kTLS
 * TX: http_tls_head_alone); with OpenSSL's records it is one anyway. */
bool ktcp_tls_head_alone(const struct ktcp_tls_conn *t, off_t off, size_t len);
/* Send close_notify, without waiting for the peer's: 0 (sent, or given
 * up on), or KTCP_TLS_WANT_WRITE (no room now: call again once
 * writable). None after a KeyUpdate kTLS could not follow. */
int ktcp_tls_shutdown(struct ktcp_tls_conn *t);
/* For an agent that hands the socket to the kernel once kTLS carries both
 * directions: the fd, with the connection's state freed and nothing sent;
 * -EBUSY (and nothing freed) when kTLS is not on both ways or OpenSSL
 * still holds bytes the kernel would not see. */
int ktcp_tls_conn_release(struct ktcp_tls_conn *t);
void ktcp_tls_conn_free(struct ktcp_tls_conn *t);
/* Between requests: free what t holds only while it writes (the 64 KiB
 * chunk of gathered or file bytes), once all of it is written. */
void ktcp_tls_conn_trim(struct ktcp_tls_conn *t);

/* ---- on the user runtime (tls-rt.c) ---- */
struct rt_conn;
/* The handshake of t on c, waiting through the runtime until deadline_ms
 * (rt_now_ms clock): 0, -ETIMEDOUT, -ESHUTDOWN, or the error of
 * ktcp_tls_handshake. */
int ktcp_tls_rt_handshake(struct ktcp_tls_conn *t,
                          struct rt_conn *c,
                          uint64_t deadline_ms);
/* Make c's rt_read/rt_sendv/rt_sendfile/rt_shutdown_write go through t
 * (c->io), until ktcp_tls_rt_detach. timeout_ms: how long the end of a
 * connection waits for the peer to acknowledge a byte while kTLS may
 * still hold records (ktcp_tls_rt_flush). */
void ktcp_tls_rt_attach(struct ktcp_tls_conn *t,
                        struct rt_conn *c,
                        int timeout_ms);
/* Before c closes: under kTLS TX, wait until the kernel has handed
 * every record to TCP (a close frees those it still holds, a FIN goes
 * ahead of them); 0, or -errno when it gave up (the peer took nothing
 * for timeout_ms, the connection broke, a stop's cut). */
int ktcp_tls_rt_flush(struct rt_conn *c);
void ktcp_tls_rt_detach(struct rt_conn *c);

#endif /* KTCP_TLS_H */
