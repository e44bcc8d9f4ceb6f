/* htstress: HTTP load generator.
 *
 * Connection per request (HTTP/1.0: connect, one request, whole response,
 * close) or keep-alive (HTTP/1.1, many requests per connection, optionally
 * pipelined). Worker threads (htstress-worker.c) each run one epoll loop over
 * their share of the connections; every counter and histogram is per thread
 * and merged here at the end. Nothing is fatal to the run except set-up
 * failures.
 *
 * https:// URLs speak TLS (OpenSSL) with no session resumption: each
 * connection makes a full handshake, by default TLS 1.2 or 1.3 over X25519
 * with AES-128-GCM offered first, ALPN http/1.1, the certificate not
 * verified (a load generator, as wrk and h2load).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common.h"
#include "htstress.h"
#include "ktcp-version.h"

const char *const error_names[ERR_KINDS] = {
    "connect", "read", "write", "timeout", "reset", "closed", "hup", "parse",
};

struct htstress_options opt = {
    .concurrency = 1,
    .threads = 1,
    .pipeline = 1,
    .timeout_ms = 5000,
};

char *request_batch; /* opt.pipeline copies of the request */
size_t request_len;
uint64_t run_start_ns;
uint64_t run_deadline_ns; /* 0: no deadline */
uint64_t workers_open;
int clock_started;
volatile sig_atomic_t interrupted;
SSL_CTX *tls_ctx;

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: htstress [options] URL\n"
        "HTTP load generator. URL is http[s]://HOST[:PORT][/PATH], HOST an "
        "IPv4 address,\n"
        "a name or [IPv6]. Runs for -n requests or -d seconds, whichever is "
        "given.\n"
        "\n"
        "  -n, --requests N      total requests (default 10000 unless -d is "
        "given)\n"
        "  -d, --duration SEC    run for SEC seconds instead of a count\n"
        "  -c, --concurrency N   connections open at once, over all threads "
        "(default 1)\n"
        "  -t, --threads N       worker threads, each with its own epoll loop "
        "(default 1)\n"
        "  -k, --keep-alive      HTTP/1.1, many requests per connection "
        "(default: off,\n"
        "                        one HTTP/1.0 request per connection)\n"
        "  -p, --pipeline N      requests in flight per keep-alive connection "
        "(default 1)\n"
        "      --connect-first   keep-alive: open every connection (and finish "
        "its TLS\n"
        "                        handshake) before the clock starts, so that "
        "-d and\n"
        "                        req/s count requests only (default: off)\n"
        "      --sched-batch     run every thread under SCHED_BATCH, so that a "
        "waking\n"
        "                        client thread does not preempt a server's "
        "running\n"
        "                        worker on a shared CPU (default: off)\n"
        "  -r, --rate R          at most R requests/s over all threads "
        "(default 0 = no limit)\n"
        "  -H, --header 'N: V'   extra request header, repeatable (default "
        "none)\n"
        "      --timeout MS      a request without a complete response after "
        "MS ms is a\n"
        "                        timeout error (default 5000)\n"
        "      --tls-version V   https://: 1.2 or 1.3 only (default: either, "
        "the server's\n"
        "                        choice)\n"
        "      --tls-groups L    https://: groups offered, OpenSSL's colon "
        "list; the key\n"
        "                        share is the first's (default X25519:P-256: "
        "P-256 for\n"
        "                        a TLS 1.2 server's ECDSA P-256 "
        "certificate)\n"
        "      --json            print one JSON object on stdout instead of "
        "the summary\n"
        "      --progress        live progress line on stderr even when it is "
        "not a tty\n"
        "                        (default: only on a tty, never with --json)\n"
        "      --version         print the version and exit\n"
        "  -h, --help            this help\n"
        "\n"
        "Latency is from the moment a request is issued (its connect in\n"
        "connection-per-request mode) to the last byte of its response.\n"
        "Good responses are 2xx/3xx, bad ones anything else; socket errors are "
        "counted\n"
        "per request lost, by kind, and never stop the run.\n"
        "https:// makes a full TLS handshake on every connection (no session "
        "cache,\n"
        "no tickets kept), offers AES-128-GCM first and ALPN http/1.1, and "
        "does not\n"
        "verify the certificate; a failed handshake is a connect error.\n"
        "Exit status: 0 the run completed (see the counts), 2 bad usage,\n"
        "3 set-up failed (address, threads, memory).\n");
}

static bool add_header(const char *h)
{
    if (!strchr(h, ':') || strpbrk(h, "\r\n")) {
        fprintf(stderr,
                "htstress: --header '%s': expected 'Name: value' on one line\n",
                h);
        return false;
    }
    size_t n = strlen(h);
    char *grown = realloc(opt.extra_headers, opt.extra_headers_len + n + 3);
    if (!grown)
        return false;
    opt.extra_headers = grown;
    memcpy(opt.extra_headers + opt.extra_headers_len, h, n);
    memcpy(opt.extra_headers + opt.extra_headers_len + n, "\r\n", 3);
    opt.extra_headers_len += n + 2;
    return true;
}

static bool parse_url(const char *url)
{
    const char *prefix = "http://";
    const char *default_port = "80";
    if (!strncmp(url, "https://", 8)) {
        prefix = "https://";
        default_port = "443";
        opt.tls = true;
    } else if (strncmp(url, prefix, strlen(prefix))) {
        fprintf(stderr,
                "htstress: URL '%s': only http:// and https:// URLs are "
                "supported\n",
                url);
        return false;
    }
    const char *authority = url + strlen(prefix);
    const char *slash = strchr(authority, '/');
    size_t auth_len = slash ? (size_t) (slash - authority) : strlen(authority);
    char hostport[300];
    if (!auth_len || auth_len >= sizeof(hostport))
        goto bad;
    memcpy(hostport, authority, auth_len);
    hostport[auth_len] = '\0';
    if (!split_host_port(hostport, opt.host, sizeof(opt.host), opt.port,
                         sizeof(opt.port))) {
        /* No port given: 80 (443 for https). */
        char with_port[310];
        snprintf(with_port, sizeof(with_port), "%s:%s", hostport, default_port);
        if (!split_host_port(with_port, opt.host, sizeof(opt.host), opt.port,
                             sizeof(opt.port)))
            goto bad;
    }
    const char *path = slash ? slash : "/";
    if (strlen(path) >= sizeof(opt.path) || strpbrk(path, " \r\n"))
        goto bad;
    strcpy(opt.path, path);
    /* SNI names a host, never an address (RFC 6066). */
    unsigned char a[16];
    opt.tls_sni = inet_pton(AF_INET, opt.host, a) != 1 &&
                  inet_pton(AF_INET6, opt.host, a) != 1;
    return true;
bad:
    fprintf(stderr,
            "htstress: URL '%s': expected http[s]://HOST[:PORT][/PATH]\n", url);
    return false;
}

static bool build_request(void)
{
    bool v6 = strchr(opt.host, ':') != NULL;
    char host_header[300];
    snprintf(host_header, sizeof(host_header), v6 ? "[%s]:%s" : "%s:%s",
             opt.host, opt.port);
    char *one = NULL;
    int n = asprintf(&one, "GET %s HTTP/1.%d\r\nHost: %s\r\n%.*s\r\n", opt.path,
                     opt.keep_alive ? 1 : 0, host_header,
                     (int) opt.extra_headers_len,
                     opt.extra_headers ? opt.extra_headers : "");
    if (n < 0)
        return false;
    request_len = (size_t) n;
    request_batch = malloc(request_len * opt.pipeline);
    if (!request_batch) {
        free(one);
        return false;
    }
    for (uint64_t i = 0; i < opt.pipeline; i++)
        memcpy(request_batch + i * request_len, one, request_len);
    free(one);
    return true;
}

/* The client context of https://: a full handshake on every connection
 * (no session cache, no ticket asked for or kept), AEAD suites with
 * AES-128-GCM first, the groups of --tls-groups, ALPN http/1.1, no
 * certificate verification. */
static bool tls_setup(void)
{
    static const unsigned char alpn[] = "\x08http/1.1";
    tls_ctx = SSL_CTX_new(TLS_client_method());
    if (!tls_ctx)
        goto fail;
    int min = opt.tls_version == 13 ? TLS1_3_VERSION : TLS1_2_VERSION;
    int max = opt.tls_version == 12 ? TLS1_2_VERSION : TLS1_3_VERSION;
    SSL_CTX_set_session_cache_mode(tls_ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(tls_ctx,
                        SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_mode(tls_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                                  SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_NONE, NULL);
    if (!SSL_CTX_set_min_proto_version(tls_ctx, min) ||
        !SSL_CTX_set_max_proto_version(tls_ctx, max) ||
        !SSL_CTX_set_ciphersuites(tls_ctx,
                                  "TLS_AES_128_GCM_SHA256:"
                                  "TLS_AES_256_GCM_SHA384:"
                                  "TLS_CHACHA20_POLY1305_SHA256") ||
        !SSL_CTX_set_cipher_list(tls_ctx,
                                 "ECDHE-ECDSA-AES128-GCM-SHA256:"
                                 "ECDHE-RSA-AES128-GCM-SHA256:"
                                 "ECDHE-ECDSA-AES256-GCM-SHA384:"
                                 "ECDHE-RSA-AES256-GCM-SHA384:"
                                 "ECDHE-ECDSA-CHACHA20-POLY1305:"
                                 "ECDHE-RSA-CHACHA20-POLY1305") ||
        SSL_CTX_set_alpn_protos(tls_ctx, alpn, sizeof(alpn) - 1))
        goto fail;
    if (!SSL_CTX_set1_groups_list(
            tls_ctx, opt.tls_groups ? opt.tls_groups : "X25519:P-256")) {
        fprintf(stderr, "htstress: --tls-groups '%s': not a group list\n",
                opt.tls_groups);
        return false;
    }
    return true;
fail:
    fprintf(stderr, "htstress: cannot set up TLS: %s\n",
            ERR_error_string(ERR_get_error(), NULL));
    return false;
}

static void on_interrupt(int sig)
{
    (void) sig;
    interrupted = 1;
}

static void print_progress(struct worker *workers, uint64_t now, bool final)
{
    uint64_t done = 0, errors = 0;
    for (uint64_t i = 0; i < opt.threads; i++) {
        done += __atomic_load_n(&workers[i].published_done, __ATOMIC_RELAXED);
        errors +=
            __atomic_load_n(&workers[i].published_errors, __ATOMIC_RELAXED);
    }
    double secs = (double) (now - run_start_ns) / 1e9;
    fprintf(stderr, "\r[%6.1fs] %llu requests done, %.0f req/s, %llu errors%s",
            secs, (unsigned long long) done,
            secs > 0 ? (double) done / secs : 0.0, (unsigned long long) errors,
            final ? "\n" : "   ");
}

static void print_summary(const struct stats *s,
                          const struct worker *tls,
                          const struct hist *h,
                          double secs,
                          uint64_t done)
{
    const char *mode = opt.keep_alive ? "keep-alive" : "connection per request";
    printf(
        "htstress %s: %s%s, pipeline %llu, %llu threads, %llu "
        "connections\n",
        opt.url, mode, opt.connect_first ? " (connected first)" : "",
        (unsigned long long) opt.pipeline, (unsigned long long) opt.threads,
        (unsigned long long) opt.concurrency);
    printf("requests:    %llu in %.3f s = %.1f req/s\n",
           (unsigned long long) done, secs,
           secs > 0 ? (double) done / secs : 0.0);
    printf(
        "responses:   good %llu (2xx %llu, 3xx %llu), bad %llu (1xx %llu, 4xx "
        "%llu, 5xx %llu, other %llu)\n",
        (unsigned long long) s->good, (unsigned long long) s->status_class[2],
        (unsigned long long) s->status_class[3], (unsigned long long) s->bad,
        (unsigned long long) s->status_class[1],
        (unsigned long long) s->status_class[4],
        (unsigned long long) s->status_class[5],
        (unsigned long long) s->status_class[0]);
    printf("errors:      %llu (", (unsigned long long) error_total(s));
    for (int k = 0; k < ERR_KINDS; k++)
        printf("%s%s %llu", k ? ", " : "", error_names[k],
               (unsigned long long) s->errors[k]);
    printf(")\n");
    printf("connections: %llu established, %llu bytes read\n",
           (unsigned long long) s->connects,
           (unsigned long long) s->bytes_read);
    if (tls)
        printf("tls:         %llu full handshakes, %llu resumed; %s %s %s\n",
               (unsigned long long) (s->handshakes - s->resumed),
               (unsigned long long) s->resumed, tls->tls_version,
               tls->tls_cipher, tls->tls_group);
    printf(
        "latency us:  min %.1f  p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max "
        "%.1f  mean %.1f\n",
        h->count ? (double) h->min / 1e3 : 0.0,
        (double) hist_percentile(h, 50) / 1e3,
        (double) hist_percentile(h, 90) / 1e3,
        (double) hist_percentile(h, 99) / 1e3,
        (double) hist_percentile(h, 99.9) / 1e3, (double) h->max / 1e3,
        hist_mean(h) / 1e3);
}

static void print_json(const struct stats *s,
                       const struct worker *tls,
                       const struct hist *h,
                       double secs,
                       uint64_t done)
{
    printf("{\"tool\":\"htstress\",\"url\":");
    json_write_string(stdout, opt.url);
    printf(
        ",\"mode\":\"%s\",\"connect_first\":%s,\"sched\":\"%s\","
        "\"pipeline\":%llu,"
        "\"threads\":%llu,\"connections\":%llu,\"rate_limit\":%g,"
        "\"timeout_ms\":%llu,",
        opt.keep_alive ? "keep-alive" : "close",
        opt.connect_first ? "true" : "false",
        opt.sched_batch ? "batch" : "other", (unsigned long long) opt.pipeline,
        (unsigned long long) opt.threads, (unsigned long long) opt.concurrency,
        opt.rate, (unsigned long long) opt.timeout_ms);
    printf(
        "\"seconds\":%.6f,\"requests\":%llu,\"req_per_s\":%.3f,"
        "\"good\":%llu,\"bad\":%llu,",
        secs, (unsigned long long) done, secs > 0 ? (double) done / secs : 0.0,
        (unsigned long long) s->good, (unsigned long long) s->bad);
    printf(
        "\"status\":{\"1xx\":%llu,\"2xx\":%llu,\"3xx\":%llu,\"4xx\":%llu,"
        "\"5xx\":%llu,\"other\":%llu},",
        (unsigned long long) s->status_class[1],
        (unsigned long long) s->status_class[2],
        (unsigned long long) s->status_class[3],
        (unsigned long long) s->status_class[4],
        (unsigned long long) s->status_class[5],
        (unsigned long long) s->status_class[0]);
    printf("\"errors\":{\"total\":%llu", (unsigned long long) error_total(s));
    for (int k = 0; k < ERR_KINDS; k++)
        printf(",\"%s\":%llu", error_names[k],
               (unsigned long long) s->errors[k]);
    printf("},\"connects\":%llu,\"bytes_read\":%llu,",
           (unsigned long long) s->connects,
           (unsigned long long) s->bytes_read);
    if (tls) {
        printf("\"tls\":{\"handshakes\":%llu,\"resumed\":%llu,\"version\":",
               (unsigned long long) s->handshakes,
               (unsigned long long) s->resumed);
        json_write_string(stdout, tls->tls_version);
        printf(",\"cipher\":");
        json_write_string(stdout, tls->tls_cipher);
        printf(",\"group\":");
        json_write_string(stdout, tls->tls_group);
        printf("},");
    }
    printf(
        "\"latency_us\":{\"count\":%llu,\"min\":%.3f,\"mean\":%.3f,"
        "\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"p99_9\":%.3f,\"max\":%.3f}}"
        "\n",
        (unsigned long long) h->count, h->count ? (double) h->min / 1e3 : 0.0,
        hist_mean(h) / 1e3, (double) hist_percentile(h, 50) / 1e3,
        (double) hist_percentile(h, 90) / 1e3,
        (double) hist_percentile(h, 99) / 1e3,
        (double) hist_percentile(h, 99.9) / 1e3, (double) h->max / 1e3);
}

static bool parse_options(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"requests", required_argument, NULL, 'n'},
        {"duration", required_argument, NULL, 'd'},
        {"concurrency", required_argument, NULL, 'c'},
        {"threads", required_argument, NULL, 't'},
        {"keep-alive", no_argument, NULL, 'k'},
        {"pipeline", required_argument, NULL, 'p'},
        {"connect-first", no_argument, NULL, 'F'},
        {"sched-batch", no_argument, NULL, 'B'},
        {"rate", required_argument, NULL, 'r'},
        {"header", required_argument, NULL, 'H'},
        {"timeout", required_argument, NULL, 'T'},
        {"json", no_argument, NULL, 'J'},
        {"tls-version", required_argument, NULL, 'L'},
        {"tls-groups", required_argument, NULL, 'G'},
        {"progress", no_argument, NULL, 'P'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool progress_forced = false;
    int ch;
    while ((ch = getopt_long(argc, argv, "n:d:c:t:kp:r:H:h", longopts, NULL)) !=
           -1) {
        switch (ch) {
        case 'n':
            if (!parse_u64_option("--requests", optarg, 1, UINT64_MAX / 2,
                                  &opt.requests))
                return false;
            break;
        case 'd':
            if (!parse_double_option("--duration", optarg, 0.001, 86400,
                                     &opt.duration_s))
                return false;
            break;
        case 'c':
            if (!parse_u64_option("--concurrency", optarg, 1, 1000000,
                                  &opt.concurrency))
                return false;
            break;
        case 't':
            if (!parse_u64_option("--threads", optarg, 1, 1024, &opt.threads))
                return false;
            break;
        case 'k':
            opt.keep_alive = true;
            break;
        case 'F':
            opt.connect_first = true;
            break;
        case 'B':
            opt.sched_batch = true;
            break;
        case 'p':
            if (!parse_u64_option("--pipeline", optarg, 1, 1024, &opt.pipeline))
                return false;
            break;
        case 'r':
            if (!parse_double_option("--rate", optarg, 0, 1e9, &opt.rate))
                return false;
            break;
        case 'H':
            if (!add_header(optarg))
                return false;
            break;
        case 'T':
            if (!parse_u64_option("--timeout", optarg, 1, 3600000,
                                  &opt.timeout_ms))
                return false;
            break;
        case 'J':
            opt.json = true;
            break;
        case 'L':
            if (!strcmp(optarg, "1.2")) {
                opt.tls_version = 12;
            } else if (!strcmp(optarg, "1.3")) {
                opt.tls_version = 13;
            } else {
                fprintf(stderr,
                        "htstress: --tls-version '%s': expected 1.2 or 1.3\n",
                        optarg);
                return false;
            }
            break;
        case 'G':
            opt.tls_groups = optarg;
            break;
        case 'P':
            progress_forced = true;
            break;
        case 'V':
            ktcp_print_version("htstress");
            exit(EXIT_OK);
        case 'h':
            usage(stdout);
            exit(EXIT_OK);
        default:
            usage(stderr);
            return false;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "htstress: expected exactly one URL (see --help)\n");
        return false;
    }
    opt.url = argv[optind];
    if (opt.requests && opt.duration_s > 0) {
        fprintf(stderr,
                "htstress: give either --requests or --duration, not both\n");
        return false;
    }
    if (!opt.requests && opt.duration_s <= 0)
        opt.requests = 10000;
    if (opt.pipeline > 1 && !opt.keep_alive) {
        fprintf(stderr,
                "htstress: --pipeline needs --keep-alive "
                "(a connection-per-request run sends one request per "
                "connection)\n");
        return false;
    }
    if (opt.connect_first && !opt.keep_alive) {
        fprintf(stderr,
                "htstress: --connect-first needs --keep-alive "
                "(a connection-per-request run opens one per request)\n");
        return false;
    }
    if (opt.threads > opt.concurrency)
        opt.threads = opt.concurrency; /* a thread without a connection idles */
    opt.progress = !opt.json && (progress_forced || isatty(STDERR_FILENO));
    if (!parse_url(opt.url))
        return false;
    if (!opt.tls && (opt.tls_version || opt.tls_groups)) {
        fprintf(stderr,
                "htstress: --tls-version and --tls-groups need an "
                "https:// URL\n");
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    if (!parse_options(argc, argv))
        return EXIT_USAGE;
    if (!resolve_tcp_address(opt.host, opt.port, &opt.addr, &opt.addr_len))
        return EXIT_SETUP;
    if (opt.tls && !tls_setup())
        return EXIT_SETUP;
    /* Threads made after this inherit the policy (PTHREAD_INHERIT_SCHED). */
    if (opt.sched_batch &&
        sched_setscheduler(0, SCHED_BATCH, &(struct sched_param){0})) {
        fprintf(stderr, "htstress: --sched-batch: sched_setscheduler: %s\n",
                strerror(errno));
        return EXIT_SETUP;
    }
    if (!build_request()) {
        fprintf(stderr, "htstress: cannot build the request: out of memory\n");
        return EXIT_SETUP;
    }

    raise_fd_limit(opt.concurrency + opt.threads + 64);
    struct worker *workers = calloc(opt.threads, sizeof(*workers));
    struct conn *conns = calloc(opt.concurrency, sizeof(*conns));
    uint64_t *rings = calloc(opt.concurrency * opt.pipeline, sizeof(uint64_t));
    if (!workers || !conns || !rings) {
        fprintf(stderr,
                "htstress: cannot allocate %llu connections: out of memory\n",
                (unsigned long long) opt.concurrency);
        return EXIT_SETUP;
    }
    for (uint64_t i = 0; i < opt.concurrency; i++) {
        conns[i].fd = -1;
        conns[i].issued_at = rings + i * opt.pipeline;
    }

    struct sigaction sa = {.sa_handler = on_interrupt};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    run_start_ns = now_ns();
    if (opt.duration_s > 0)
        run_deadline_ns = run_start_ns + (uint64_t) (opt.duration_s * 1e9);
    size_t next_conn = 0;
    uint64_t started = 0;
    for (uint64_t i = 0; i < opt.threads; i++) {
        struct worker *w = &workers[i];
        w->nconns =
            opt.concurrency / opt.threads + (i < opt.concurrency % opt.threads);
        w->conns = conns + next_conn;
        next_conn += w->nconns;
        w->budget =
            opt.requests / opt.threads + (i < opt.requests % opt.threads);
        w->rate = opt.rate / (double) opt.threads;
        hist_init(&w->hist);
        w->readbuf = malloc(READ_BUFFER_SIZE);
        w->refill = calloc(w->nconns, sizeof(*w->refill));
        w->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (!w->readbuf || !w->refill || w->epfd < 0) {
            fprintf(stderr, "htstress: cannot set up worker %llu: %s\n",
                    (unsigned long long) i, strerror(errno));
            interrupted = 1;
            break;
        }
        int err = pthread_create(&w->thread, NULL, worker_main, w);
        if (err) {
            fprintf(stderr, "htstress: cannot start worker thread %llu: %s\n",
                    (unsigned long long) i, strerror(err));
            interrupted = 1;
            break;
        }
        started++;
    }

    if (opt.connect_first) {
        /* The clock starts once every worker's connections are open or
         * failed; each worker bounds its wait by --timeout. */
        while (__atomic_load_n(&workers_open, __ATOMIC_ACQUIRE) < started &&
               !interrupted)
            usleep(1000);
        run_start_ns = now_ns();
        if (opt.duration_s > 0)
            run_deadline_ns = run_start_ns + (uint64_t) (opt.duration_s * 1e9);
        __atomic_store_n(&clock_started, 1, __ATOMIC_RELEASE);
    }

    /* Progress while the workers run; bounded by their own termination. */
    uint64_t next_print = run_start_ns + 1000000000ull;
    for (;;) {
        uint64_t finished = 0;
        for (uint64_t i = 0; i < started; i++)
            finished += __atomic_load_n(&workers[i].finished, __ATOMIC_ACQUIRE);
        if (finished == started)
            break;
        usleep(20000);
        uint64_t now = now_ns();
        if (opt.progress && now >= next_print) {
            print_progress(workers, now, false);
            next_print += 1000000000ull;
        }
    }
    struct stats total = {0};
    static struct hist merged;
    hist_init(&merged);
    uint64_t end_ns = run_start_ns;
    static const struct worker no_handshake = {
        .tls_version = "", .tls_cipher = "", .tls_group = ""};
    const struct worker *tls = NULL; /* the negotiated version, suite, group */
    for (uint64_t i = 0; i < started; i++) {
        struct worker *w = &workers[i];
        pthread_join(w->thread, NULL);
        total.good += w->stats.good;
        total.bad += w->stats.bad;
        for (int k = 0; k < 6; k++)
            total.status_class[k] += w->stats.status_class[k];
        for (int k = 0; k < ERR_KINDS; k++)
            total.errors[k] += w->stats.errors[k];
        total.connects += w->stats.connects;
        total.bytes_read += w->stats.bytes_read;
        total.handshakes += w->stats.handshakes;
        total.resumed += w->stats.resumed;
        if (!tls && w->tls_version)
            tls = w;
        hist_merge(&merged, &w->hist);
        if (w->finished_ns > end_ns)
            end_ns = w->finished_ns;
    }
    if (opt.progress)
        print_progress(workers, end_ns, true);
    if (started < opt.threads)
        return EXIT_SETUP;

    double secs = (double) (end_ns - run_start_ns) / 1e9;
    uint64_t done = total.good + total.bad + error_total(&total);
    if (opt.tls && !tls)
        tls = &no_handshake;
    if (opt.json)
        print_json(&total, tls, &merged, secs, done);
    else
        print_summary(&total, tls, &merged, secs, done);
    return EXIT_OK;
}
