/* ktcp-tlsd — the TLS agent for khttpd: accepts on the TLS port, completes
 * the handshake with the certificate and key, turns kernel TLS on for both
 * directions and hands the socket to khttpd (a write of the descriptor's
 * number to /proc/net/khttpd_adopt), then closes its own descriptor.
 * khttpd serves the connection from there, records and all, in the kernel;
 * the agent keeps nothing of it and may exit or restart without dropping
 * a connection khttpd already serves (docs/tls.md).
 *
 * The TLS work is the project's one TLS layer (user/tls): its context
 * (versions, AEAD suites, ALPN, tickets, kTLS asked for), a handshake with
 * a deadline for the whole of it, and the release of a socket whose records
 * the kernel carries both ways. One thread per handshake in progress, at
 * most --max-handshakes of them, each done within --handshake-timeout-ms
 * or closed: a slow or silent client costs a thread for that long, never
 * the listener. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ktcp-net.h"
#include "ktcp-tls.h"
#include "ktcp-version.h"

#define TLSD_ADOPT_FILE "/proc/net/khttpd_adopt"

struct tlsd {
    struct ktcp_tls_ctx *tls;
    int adopt_fd; /* the hand-off file, opened once */
    int timeout_ms;
    int max_handshakes;
    atomic_int handshakes; /* in progress */
    atomic_ulong adopted, failed;
};

struct tlsd_job {
    struct tlsd *d;
    int fd;
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void) sig;
    stop_requested = 1;
}

/* Give @fd to khttpd: 0, or -errno (the socket stays ours). */
static int hand_off(struct tlsd *d, int fd)
{
    char num[16];
    int n = snprintf(num, sizeof(num), "%d", fd);

    if (write(d->adopt_fd, num, (size_t) n) != n)
        return -errno;
    return 0;
}

/* The handshake on fd and, once the kernel carries the records both ways,
 * the hand-off: 0; 1 when the client's handshake failed (any client can
 * make one fail: counted, not logged); 2 when khttpd refused it as over
 * its limits (it answered 503: counted, not logged); -1 with the reason
 * in err when what follows a handshake failed (for the operator to see).
 * fd stays ours. */
static int handshake_and_hand_off(struct tlsd *d, int fd, char *err, size_t len)
{
    struct ktcp_tls_conn *t = ktcp_tls_conn_new(d->tls, fd);
    int r;

    if (!t) {
        snprintf(err, len, "out of memory");
        return -1;
    }
    r = ktcp_tls_handshake_wait(t, d->timeout_ms);
    if (r < 0) {
        snprintf(err, len, "handshake: %s", ktcp_tls_error(t));
        ktcp_tls_conn_free(t);
        return 1;
    }
    if (!ktcp_tls_ktls_tx(t) || !ktcp_tls_ktls_rx(t))
        snprintf(err, len, "kTLS%s%s not on (%s, %s)",
                 ktcp_tls_ktls_tx(t) ? "" : " TX",
                 ktcp_tls_ktls_rx(t) ? "" : " RX", ktcp_tls_version(t),
                 ktcp_tls_cipher(t));
    else
        snprintf(err, len, "data buffered in user space");
    /* Nothing is sent and no OpenSSL state stays: the session goes on in
     * the kernel. Refused while OpenSSL holds bytes the kernel would not
     * see, or a direction is not the kernel's. */
    if (ktcp_tls_conn_release(t) < 0) {
        ktcp_tls_conn_free(t);
        return -1;
    }
    r = hand_off(d, fd);
    if (r == -EBUSY) {
        snprintf(err, len, "hand-off to khttpd: over max_conns");
        return 2;
    }
    if (r < 0) {
        snprintf(err, len, "hand-off to khttpd: %s", strerror(-r));
        return -1;
    }
    return 0;
}

/* How long, and for how many reads, a refused connection is drained. */
#define TLSD_LINGER_MS 500
#define TLSD_LINGER_READS 8

/* khttpd refused the hand-off (over max_conns or max_conns_per_ip) and
 * answered in the kernel's records: 503, close_notify, FIN. The client's
 * request is likely unread in the socket, and closing over unread bytes
 * sends a reset that can overtake the answer: read and drop for a bit. */
static void linger(int fd)
{
    char sink[2048];
    struct pollfd p = {.fd = fd, .events = POLLIN};

    for (int i = 0; i < TLSD_LINGER_READS; i++) {
        if (poll(&p, 1, TLSD_LINGER_MS) <= 0 ||
            recv(fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0)
            break;
    }
}

static void *handshake_thread(void *arg)
{
    struct tlsd_job *job = arg;
    struct tlsd *d = job->d;
    char err[320];
    int r = handshake_and_hand_off(d, job->fd, err, sizeof(err));

    if (r == 0) {
        atomic_fetch_add(&d->adopted, 1);
    } else {
        if (r < 0)
            fprintf(stderr, "ktcp-tlsd: %s\n", err);
        else if (r == 2)
            linger(job->fd);
        atomic_fetch_add(&d->failed, 1);
    }
    /* khttpd holds its own reference: closing ours ends nothing. */
    close(job->fd);
    atomic_fetch_sub(&d->handshakes, 1);
    free(job);
    return NULL;
}

static void start_handshake(struct tlsd *d, int fd)
{
    struct tlsd_job *job;
    pthread_attr_t attr;
    pthread_t t;

    if (atomic_fetch_add(&d->handshakes, 1) >= d->max_handshakes)
        goto fail;
    job = malloc(sizeof(*job));
    if (!job)
        goto fail;
    job->d = d;
    job->fd = fd;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    if (pthread_create(&t, &attr, handshake_thread, job) != 0) {
        pthread_attr_destroy(&attr);
        free(job);
        goto fail;
    }
    pthread_attr_destroy(&attr);
    return;
fail:
    atomic_fetch_sub(&d->handshakes, 1);
    atomic_fetch_add(&d->failed, 1);
    close(fd);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ktcp-tlsd --cert FILE --key FILE [options]\n"
            "  --port N                  TLS port (default 443)\n"
            "  --bind ADDR               address to listen on (default: all)\n"
            "  --cert FILE               certificate chain, PEM\n"
            "  --key FILE                private key, PEM\n"
            "  --adopt FILE              khttpd's hand-off file "
            "(default " TLSD_ADOPT_FILE
            ")\n"
            "  --handshake-timeout-ms N  a handshake's time from its accept "
            "(default 10000)\n"
            "  --tls-max 1.2|1.3         highest TLS version (default 1.2: "
            "OpenSSL 3.0\n"
            "                            puts TLS 1.3 receive keys in no "
            "kernel)\n"
            "  --max-handshakes N        handshakes at once (default 256)\n"
            "  --version\n");
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int) v;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'p'},
        {"bind", required_argument, NULL, 'b'},
        {"cert", required_argument, NULL, 'c'},
        {"key", required_argument, NULL, 'k'},
        {"adopt", required_argument, NULL, 'a'},
        {"handshake-timeout-ms", required_argument, NULL, 't'},
        {"max-handshakes", required_argument, NULL, 'm'},
        {"tls-max", required_argument, NULL, 'T'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *bind_addr = NULL, *cert = NULL, *key = NULL;
    const char *adopt = TLSD_ADOPT_FILE;
    struct tlsd d = {.timeout_ms = 10000, .max_handshakes = 256};
    struct ktcp_tls_opts topts = {.max_version = KTCP_TLS_V1_2};
    struct sigaction sa = {.sa_handler = on_signal};
    char err[320];
    int port = 443, lfd, c;

    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (parse_int(optarg, 1, 65535, &port) < 0)
                goto bad;
            break;
        case 'b':
            bind_addr = optarg;
            break;
        case 'c':
            cert = optarg;
            break;
        case 'k':
            key = optarg;
            break;
        case 'a':
            adopt = optarg;
            break;
        case 't':
            if (parse_int(optarg, 1, 600000, &d.timeout_ms) < 0)
                goto bad;
            break;
        case 'm':
            if (parse_int(optarg, 1, 65536, &d.max_handshakes) < 0)
                goto bad;
            break;
        case 'T':
            if (strcmp(optarg, "1.2") == 0)
                topts.max_version = KTCP_TLS_V1_2;
            else if (strcmp(optarg, "1.3") == 0)
                topts.max_version = KTCP_TLS_V1_3;
            else
                goto bad;
            break;
        case 'V':
            ktcp_print_version("ktcp-tlsd");
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            goto bad;
        }
    }
    if (optind != argc || !cert || !key)
        goto bad;

    /* The tls ULP loaded now, not by the first handshake's setsockopt,
     * whose module load (a slow one: seconds in an emulated guest) the
     * client would wait through; and said at once when it cannot be. */
    if (!ktcp_tls_kernel_has_ulp())
        fprintf(stderr,
                "ktcp-tlsd: this kernel has no tls ULP (kTLS): "
                "no handshake can be handed to khttpd\n");
    topts.cert_file = cert;
    topts.key_file = key;
    d.tls = ktcp_tls_ctx_new(&topts, err, sizeof(err));
    if (!d.tls) {
        fprintf(stderr, "ktcp-tlsd: %s\n", err);
        return 1;
    }
    d.adopt_fd = open(adopt, O_WRONLY | O_CLOEXEC);
    if (d.adopt_fd < 0) {
        fprintf(stderr, "ktcp-tlsd: %s: %s (is khttpd loaded?)\n", adopt,
                strerror(errno));
        return 1;
    }
    lfd = ktcp_listen_tcp(bind_addr, port, 1024, false);
    if (lfd < 0) {
        fprintf(stderr, "ktcp-tlsd: listen on port %d: %s\n", port,
                strerror(-lfd));
        return 1;
    }
    ktcp_defer_accept(lfd, KTCP_DEFER_ACCEPT_S); /* a ClientHello first */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    fprintf(stderr,
            "ktcp-tlsd: port %d (%s; TLS 1.2%s), handing connections to "
            "%s\n",
            port, ktcp_tls_library(),
            topts.max_version == KTCP_TLS_V1_3 ? " and 1.3" : " at most",
            adopt);

    while (!stop_requested) {
        struct pollfd pfd = {.fd = lfd, .events = POLLIN};
        int fd;

        if (poll(&pfd, 1, 1000) <= 0)
            continue;
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                errno == ENOMEM)
                usleep(10000);
            continue;
        }
        start_handshake(&d, fd);
    }
    close(lfd);
    /* Handshakes under way end on their own timeouts; connections
     * already handed off are khttpd's and go on. */
    fprintf(stderr, "ktcp-tlsd: stopping: %lu adopted, %lu failed\n",
            atomic_load(&d.adopted), atomic_load(&d.failed));
    return 0;
bad:
    usage(stderr);
    return 2;
}
