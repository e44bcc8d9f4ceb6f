/* lat: lmbench-style hot-potato round-trip latency.
 *
 * A message of --size bytes goes to a peer and comes back, one at a time;
 * each round trip is timed and recorded. Peers: a forked child over two pipes,
 * over a unix stream socket pair, over TCP loopback (the child is the server),
 * or any echo server at HOST:PORT (kecho, the user echo server).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "hist.h"
#include "ktcp-version.h"

enum pinning { PIN_NONE, PIN_SAME_CORE, PIN_CROSS_CORE };

static struct {
    const char *mode;
    const char *target; /* echo: HOST:PORT */
    uint64_t size;
    uint64_t count;
    double duration_s;
    uint64_t warmup;
    uint64_t timeout_ms;
    enum pinning pinning;
    bool json;
} opt = {
    .size = 1,
    .count = 10000,
    .warmup = 100,
    .timeout_ms = 5000,
};

/* Chosen before this side pins itself (which narrows its allowed set). */
static int my_cpu = -1, peer_cpu = -1;

static const char *const pinning_names[] = {"unpinned", "same-core",
                                            "cross-core"};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: lat [options] pipe|unix|tcp\n"
            "       lat [options] echo HOST:PORT\n"
            "Hot-potato round-trip latency: send --size bytes, wait for them "
            "to come back,\n"
            "repeat. pipe, unix (stream socket pair) and tcp (127.0.0.1) fork "
            "their own\n"
            "peer; echo talks to any echo server (HOST an IPv4 address, a name "
            "or [IPv6]).\n"
            "\n"
            "  -s, --size BYTES    message size (default 1)\n"
            "  -n, --count N       timed round trips (default 10000)\n"
            "  -d, --duration SEC  stop after SEC seconds even if --count is "
            "not reached\n"
            "                      (default: no time limit besides --timeout)\n"
            "  -w, --warmup N      untimed round trips first (default 100)\n"
            "      --same-core     pin both sides to the first allowed CPU\n"
            "      --cross-core    pin this side to the first allowed CPU, the "
            "peer to the\n"
            "                      second (echo mode: pins only this side)\n"
            "                      (default: unpinned)\n"
            "      --timeout MS    a round trip slower than MS ms fails the "
            "run (default 5000)\n"
            "      --json          print one JSON object instead of the "
            "summary line\n"
            "      --version       print the version and exit\n"
            "  -h, --help          this help\n"
            "\n"
            "Reports microseconds per round trip: min, mean, p50, p90, p99, "
            "max, and the count.\n"
            "Exit status: 0 ok, 1 the peer failed (closed, timed out, echoed "
            "wrong bytes),\n"
            "2 bad usage, 3 set-up failed (pipes, sockets, fork, pinning, "
            "connect).\n");
}

/* Peer side: echo size-byte messages until EOF. */
static void echo_loop(int in, int out)
{
    char *buf = malloc(opt.size);
    if (!buf)
        _exit(EXIT_SETUP);
    for (;;) {
        size_t got = 0;
        while (got < opt.size) {
            ssize_t n = read(in, buf + got, opt.size - got);
            if (n <= 0) {
                if (n < 0 && errno == EINTR)
                    continue;
                _exit(n == 0 && got == 0 ? EXIT_OK : EXIT_FAILED);
            }
            got += (size_t) n;
        }
        for (size_t sent = 0; sent < opt.size;) {
            ssize_t n = write(out, buf + sent, opt.size - sent);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                _exit(EXIT_FAILED);
            }
            sent += (size_t) n;
        }
    }
}

static bool write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "lat: write to the peer: %s\n", strerror(errno));
            return false;
        }
        buf += n;
        len -= (size_t) n;
    }
    return true;
}

static bool read_all(int fd, char *buf, size_t len)
{
    while (len) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int) opt.timeout_ms);
        if (r == 0) {
            fprintf(stderr, "lat: no reply from the peer within %llu ms\n",
                    (unsigned long long) opt.timeout_ms);
            return false;
        }
        ssize_t n = r < 0 ? -1 : read(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "lat: read from the peer: %s\n", strerror(errno));
            return false;
        }
        if (n == 0) {
            fprintf(stderr, "lat: the peer closed the connection\n");
            return false;
        }
        buf += n;
        len -= (size_t) n;
    }
    return true;
}

static int tcp_connect(const struct sockaddr_storage *addr, socklen_t len)
{
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (const struct sockaddr *) addr, len)) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* Fork the peer; it pins itself (cross-core) and echoes in -> out. */
static pid_t start_peer(int in, int out, int close_in_child[], int nclose)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (int i = 0; i < nclose; i++)
        close(close_in_child[i]);
    if (opt.pinning == PIN_CROSS_CORE && !pin_to_cpu(peer_cpu)) {
        fprintf(stderr, "lat: pin the peer to CPU %d: %s\n", peer_cpu,
                strerror(errno));
        _exit(EXIT_SETUP);
    }
    echo_loop(in, out);
    _exit(EXIT_OK);
}

/* Set up the chosen transport; wfd and rfd are this side's ends. */
static bool setup(int *wfd, int *rfd, pid_t *peer)
{
    *peer = -1;
    if (!strcmp(opt.mode, "pipe")) {
        int to_peer[2], from_peer[2];
        if (pipe2(to_peer, O_CLOEXEC) || pipe2(from_peer, O_CLOEXEC)) {
            fprintf(stderr, "lat: pipe: %s\n", strerror(errno));
            return false;
        }
        int mine[] = {to_peer[1], from_peer[0]};
        *peer = start_peer(to_peer[0], from_peer[1], mine, 2);
        close(to_peer[0]);
        close(from_peer[1]);
        *wfd = to_peer[1];
        *rfd = from_peer[0];
    } else if (!strcmp(opt.mode, "unix")) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
            fprintf(stderr, "lat: socketpair: %s\n", strerror(errno));
            return false;
        }
        *peer = start_peer(sv[1], sv[1], sv, 1);
        close(sv[1]);
        *wfd = *rfd = sv[0];
    } else if (!strcmp(opt.mode, "tcp")) {
        struct sockaddr_in sin = {.sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(sin);
        int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lfd < 0 || bind(lfd, (struct sockaddr *) &sin, len) ||
            listen(lfd, 1) ||
            getsockname(lfd, (struct sockaddr *) &sin, &len)) {
            fprintf(stderr, "lat: listen on 127.0.0.1: %s\n", strerror(errno));
            return false;
        }
        struct sockaddr_storage addr;
        memcpy(&addr, &sin, sizeof(sin));
        int fd = tcp_connect(&addr, len);
        int sfd = fd < 0 ? -1 : accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0 || sfd < 0) {
            fprintf(stderr, "lat: connect to our own 127.0.0.1:%d: %s\n",
                    ntohs(sin.sin_port), strerror(errno));
            return false;
        }
        close(lfd);
        int one = 1;
        setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        int mine[] = {fd};
        *peer = start_peer(sfd, sfd, mine, 1);
        close(sfd);
        *wfd = *rfd = fd;
    } else {
        char host[256], port[16];
        struct sockaddr_storage addr;
        socklen_t len;
        if (!split_host_port(opt.target, host, sizeof(host), port,
                             sizeof(port))) {
            fprintf(stderr, "lat: echo target '%s': expected HOST:PORT\n",
                    opt.target);
            return false;
        }
        if (!resolve_tcp_address(host, port, &addr, &len))
            return false;
        int fd = tcp_connect(&addr, len);
        if (fd < 0) {
            fprintf(stderr, "lat: connect to %s: %s\n", opt.target,
                    strerror(errno));
            return false;
        }
        *wfd = *rfd = fd;
        return true;
    }
    if (*peer < 0) {
        fprintf(stderr, "lat: fork: %s\n", strerror(errno));
        return false;
    }
    return true;
}

static bool parse_options(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"size", required_argument, NULL, 's'},
        {"count", required_argument, NULL, 'n'},
        {"duration", required_argument, NULL, 'd'},
        {"warmup", required_argument, NULL, 'w'},
        {"same-core", no_argument, NULL, 'S'},
        {"cross-core", no_argument, NULL, 'X'},
        {"timeout", required_argument, NULL, 'T'},
        {"json", no_argument, NULL, 'J'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "s:n:d:w:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            if (!parse_u64_option("--size", optarg, 1, 64 << 20, &opt.size))
                return false;
            break;
        case 'n':
            if (!parse_u64_option("--count", optarg, 1, 1ull << 40, &opt.count))
                return false;
            break;
        case 'd':
            if (!parse_double_option("--duration", optarg, 0.001, 86400,
                                     &opt.duration_s))
                return false;
            break;
        case 'w':
            if (!parse_u64_option("--warmup", optarg, 0, 1ull << 30,
                                  &opt.warmup))
                return false;
            break;
        case 'S':
        case 'X':
            if (opt.pinning != PIN_NONE) {
                fprintf(stderr, "lat: give one of --same-core, --cross-core\n");
                return false;
            }
            opt.pinning = ch == 'S' ? PIN_SAME_CORE : PIN_CROSS_CORE;
            break;
        case 'T':
            if (!parse_u64_option("--timeout", optarg, 1, 3600000,
                                  &opt.timeout_ms))
                return false;
            break;
        case 'J':
            opt.json = true;
            break;
        case 'V':
            ktcp_print_version("lat");
            exit(EXIT_OK);
        case 'h':
            usage(stdout);
            exit(EXIT_OK);
        default:
            usage(stderr);
            return false;
        }
    }
    if (optind >= argc) {
        fprintf(stderr,
                "lat: expected a mode: pipe, unix, tcp or echo HOST:PORT\n");
        return false;
    }
    opt.mode = argv[optind++];
    bool echo = !strcmp(opt.mode, "echo");
    if (!echo && strcmp(opt.mode, "pipe") && strcmp(opt.mode, "unix") &&
        strcmp(opt.mode, "tcp")) {
        fprintf(stderr,
                "lat: unknown mode '%s': expected pipe, unix, tcp or echo\n",
                opt.mode);
        return false;
    }
    if (echo && optind < argc)
        opt.target = argv[optind++];
    if (echo && !opt.target) {
        fprintf(stderr, "lat: echo mode needs HOST:PORT\n");
        return false;
    }
    if (optind != argc) {
        fprintf(stderr, "lat: unexpected argument '%s'\n", argv[optind]);
        return false;
    }
    return true;
}

static void report(const struct hist *h, double secs)
{
    double min = h->count ? (double) h->min / 1e3 : 0.0;
    if (opt.json) {
        printf("{\"tool\":\"lat\",\"mode\":\"%s\",\"target\":", opt.mode);
        if (opt.target)
            json_write_string(stdout, opt.target);
        else
            printf("null");
        printf(
            ",\"size\":%llu,\"pinning\":\"%s\",\"count\":%llu,"
            "\"seconds\":%.6f,\"latency_us\":{\"min\":%.3f,\"mean\":%.3f,"
            "\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"max\":%.3f}}\n",
            (unsigned long long) opt.size, pinning_names[opt.pinning],
            (unsigned long long) h->count, secs, min, hist_mean(h) / 1e3,
            (double) hist_percentile(h, 50) / 1e3,
            (double) hist_percentile(h, 90) / 1e3,
            (double) hist_percentile(h, 99) / 1e3, (double) h->max / 1e3);
        return;
    }
    printf(
        "lat %s%s%s: %llu round trips of %llu B, %s: p50 %.2f us  p99 %.2f us  "
        "min %.2f us  mean %.2f us  max %.2f us\n",
        opt.mode, opt.target ? " " : "", opt.target ? opt.target : "",
        (unsigned long long) h->count, (unsigned long long) opt.size,
        pinning_names[opt.pinning], (double) hist_percentile(h, 50) / 1e3,
        (double) hist_percentile(h, 99) / 1e3, min, hist_mean(h) / 1e3,
        (double) h->max / 1e3);
}

int main(int argc, char **argv)
{
    if (!parse_options(argc, argv))
        return EXIT_USAGE;
    signal(SIGPIPE, SIG_IGN);
    if (opt.pinning != PIN_NONE) {
        my_cpu = nth_allowed_cpu(0);
        peer_cpu = nth_allowed_cpu(1);
        if (opt.pinning == PIN_CROSS_CORE && strcmp(opt.mode, "echo") &&
            peer_cpu < 0) {
            fprintf(stderr,
                    "lat: --cross-core needs two CPUs; only one is allowed\n");
            return EXIT_SETUP;
        }
        if (my_cpu < 0 || !pin_to_cpu(my_cpu)) {
            fprintf(stderr, "lat: pin to CPU %d: %s\n", my_cpu,
                    strerror(errno));
            return EXIT_SETUP;
        }
    }
    int wfd, rfd;
    pid_t peer;
    if (!setup(&wfd, &rfd, &peer))
        return EXIT_SETUP;

    char *msg = malloc(opt.size), *reply = malloc(opt.size);
    if (!msg || !reply) {
        fprintf(stderr, "lat: cannot allocate %llu-byte buffers\n",
                (unsigned long long) opt.size);
        return EXIT_SETUP;
    }
    for (uint64_t i = 0; i < opt.size; i++)
        msg[i] = (char) ('a' + i % 26);
    static struct hist h;
    hist_init(&h);
    int status = EXIT_OK;
    uint64_t start = now_ns(), deadline = 0;
    if (opt.duration_s > 0)
        deadline = start + (uint64_t) (opt.duration_s * 1e9);
    for (uint64_t i = 0; i < opt.warmup + opt.count; i++) {
        uint64_t t0 = now_ns();
        if (deadline && t0 >= deadline)
            break;
        if (!write_all(wfd, msg, opt.size) || !read_all(rfd, reply, opt.size)) {
            status = EXIT_FAILED;
            break;
        }
        uint64_t t1 = now_ns();
        if (memcmp(msg, reply, opt.size)) {
            fprintf(stderr, "lat: the peer echoed different bytes\n");
            status = EXIT_FAILED;
            break;
        }
        if (i == opt.warmup)
            start = t0;
        if (i >= opt.warmup)
            hist_record(&h, t1 - t0);
    }
    double secs = (double) (now_ns() - start) / 1e9;
    close(wfd);
    if (rfd != wfd)
        close(rfd);
    if (peer > 0) {
        int ws;
        waitpid(peer, &ws, 0);
        if (status == EXIT_OK && !(WIFEXITED(ws) && WEXITSTATUS(ws) == 0)) {
            fprintf(stderr, "lat: the %s peer failed (wait status %d)\n",
                    opt.mode, ws);
            status = EXIT_FAILED;
        }
    }
    if (status == EXIT_OK)
        report(&h, secs);
    return status;
}
