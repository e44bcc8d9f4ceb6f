/* htstress internals shared by its two files: htstress.c (options, output,
 * main) and htstress-worker.c (one epoll loop per worker thread). The
 * options and the request are written before the workers start and only
 * read afterwards; everything a worker writes is in its own struct worker. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <openssl/ssl.h>

#include "hist.h"
#include "http-response.h"

#define READ_BUFFER_SIZE (64 * 1024) /* per worker */

enum error_kind {
    ERR_CONNECT, /* socket(), connect() or the handshake failed */
    ERR_READ,    /* recv() failed (other than reset) */
    ERR_WRITE,   /* send() failed (other than reset) */
    ERR_TIMEOUT, /* no complete response within --timeout */
    ERR_RESET,   /* ECONNRESET / EPIPE */
    ERR_CLOSED,  /* the server closed with a response outstanding */
    ERR_HUP,     /* EPOLLHUP with a response outstanding */
    ERR_PARSE,   /* the response was not valid HTTP/1.x */
    ERR_KINDS
};

extern const char *const error_names[ERR_KINDS];

struct htstress_options {
    const char *url;
    char host[256];
    char port[16];
    char path[4096];
    struct sockaddr_storage addr;
    socklen_t addr_len;
    uint64_t requests; /* -n; 0 when running by duration */
    double duration_s; /* -d; 0 when running by count */
    uint64_t concurrency;
    uint64_t threads;
    uint64_t pipeline;
    bool keep_alive;
    double rate; /* requests per second over all threads; 0 = as fast as
                    possible */
    uint64_t timeout_ms;
    bool json;
    bool progress;
    bool tls;               /* https:// */
    int tls_version;        /* --tls-version: 0 (1.2 or 1.3), 12 or 13 */
    const char *tls_groups; /* --tls-groups (default X25519:P-256) */
    bool tls_sni;           /* the host is a name: sent as SNI */
    bool connect_first;     /* --connect-first: every connection open (and its
                               handshake done) before the clock starts */
    bool sched_batch;       /* --sched-batch: every thread SCHED_BATCH */
    char *extra_headers;    /* "Name: value\r\n" lines */
    size_t extra_headers_len;
};

extern struct htstress_options opt;

/* Built once before the workers start, read-only afterwards. */
extern char *request_batch; /* opt.pipeline copies of the request */
extern size_t request_len;
extern uint64_t run_start_ns;
extern uint64_t run_deadline_ns; /* 0: no deadline */
/* --connect-first: workers whose connections are all open or failed; the
 * clock starts (run_start_ns, run_deadline_ns written, then clock_started
 * set) once every worker is. */
extern uint64_t workers_open;
extern int clock_started;
extern volatile sig_atomic_t interrupted;
extern SSL_CTX *tls_ctx; /* https://: the client context, else NULL */

struct stats {
    uint64_t good;
    uint64_t bad;
    uint64_t status_class[6]; /* [1..5] = 1xx..5xx, [0] = anything else */
    uint64_t errors[ERR_KINDS];
    uint64_t connects;   /* connections established */
    uint64_t bytes_read; /* of the responses (decrypted over TLS) */
    uint64_t handshakes; /* TLS handshakes completed */
    uint64_t resumed;    /* of them, resumed sessions (never expected) */
};

enum conn_state { CONN_IDLE, CONN_CONNECTING, CONN_HANDSHAKE, CONN_OPEN };

struct conn {
    int fd;
    enum conn_state state;
    bool want_write;    /* EPOLLOUT registered */
    bool server_closes; /* a response said the server closes after it */
    bool refill_queued; /* on its worker's refill list */
    uint32_t reserved;  /* claimed, not yet handed to send() */
    uint32_t in_flight; /* handed to send(), no response yet */
    size_t write_off, write_len; /* pending bytes of request_batch */
    uint64_t *issued_at;         /* ring of opt.pipeline issue times */
    uint32_t ring_head;
    struct http_response_parser parser;
    SSL *ssl; /* https://: this connection's TLS session, new for each */
};

struct worker {
    pthread_t thread;
    int epfd;
    struct conn *conns;
    size_t nconns;
    uint64_t budget; /* requests this thread may still claim (-n) */
    double rate;     /* this thread's share of --rate */
    uint64_t rate_issued;
    bool need_rescan;     /* some connection could not get work it wanted */
    uint64_t outstanding; /* claimed requests not yet ended */
    /* Keep-alive connections that got responses in this epoll batch; they
     * send their next requests together after the batch, as wrk does, so
     * the server finds many requests ready at once. */
    struct conn **refill;
    size_t nrefill;
    char *readbuf;
    struct stats stats;
    struct hist hist;
    uint64_t finished_ns;
    /* What the first completed TLS handshake negotiated (static strings). */
    const char *tls_version, *tls_cipher, *tls_group;
    /* Read by the progress line without locks (relaxed atomics). */
    uint64_t published_done;
    uint64_t published_errors;
    int finished;
};

uint64_t error_total(const struct stats *s);
/* Thread body: runs w's connections until its budget or the deadline is
 * spent and nothing is outstanding. */
void *worker_main(void *arg);
