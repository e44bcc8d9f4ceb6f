/* echo-bench: N clients connect, are released together, and each sends
 * --rounds messages of random length (seeded: the same seed gives the same
 * lengths and bytes), reading each whole echo back and comparing it byte for
 * byte before the next. Per-request latency goes to a histogram and,
 * optionally, to a samples file and a PNG plot (tools/plot-latency.py).
 *
 * One thread per client, with a small stack. The clients block on a start
 * gate until the barrier is sized to the threads that really started; each
 * then connects (or fails to) and waits on the barrier, so every client's
 * first request leaves at the same moment.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "hist.h"
#include "ktcp-version.h"

#define RECV_CHUNK (16 * 1024)
#define CLIENT_STACK_SIZE (64 * 1024)
#define PLOT_TIMEOUT_S 120

enum client_error {
    CE_CONNECT, /* socket() or connect() failed or timed out */
    CE_THREAD,  /* the client's thread could not be created */
    CE_TIMEOUT, /* no progress on a request within --timeout */
    CE_RESET,   /* ECONNRESET / EPIPE */
    CE_CLOSED,  /* the server closed before the whole echo came back */
    CE_IO,      /* any other send/recv/poll error */
    CE_KINDS
};
static const char *const client_error_names[CE_KINDS] = {
    "connect", "thread", "timeout", "reset", "closed", "io",
};

static struct {
    const char *host;
    const char *port;
    uint64_t clients;
    uint64_t rounds;
    uint64_t min_len;
    uint64_t max_len;
    uint64_t seed;
    uint64_t timeout_ms;
    const char *samples_path;
    const char *plot_path;
    bool json;
} opt = {
    .host = "127.0.0.1",
    .port = "12345",
    .clients = 1000,
    .rounds = 10,
    .min_len = 1,
    .max_len = 1024,
    .seed = 1,
    .timeout_ms = 10000,
};

struct sample {
    uint64_t latency_ns;
    uint32_t length;
};

struct client {
    pthread_t thread;
    uint64_t index;
    uint64_t rng;
    bool failed;
    enum client_error error;
    uint64_t ok;
    uint64_t mismatches;
    uint64_t bytes;
    struct sample *samples; /* opt.rounds, the first ok+mismatches used */
};

/* Read-only once the clients run. */
static struct sockaddr_storage server_addr;
static socklen_t server_addr_len;
static unsigned char *pattern; /* random bytes messages are cut from */
static size_t pattern_len;

static pthread_barrier_t start_barrier;
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_open_cond = PTHREAD_COND_INITIALIZER;
static bool gate_open; /* guarded by gate_lock */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fail(struct client *c, enum client_error e)
{
    c->failed = true;
    c->error = e;
}

static enum client_error error_of_errno(int err)
{
    return err == ECONNRESET || err == EPIPE ? CE_RESET : CE_IO;
}

static bool connect_client(struct client *c, int *fdp)
{
    int fd = socket(server_addr.ss_family,
                    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    if (connect(fd, (struct sockaddr *) &server_addr, server_addr_len) &&
        errno != EINPROGRESS) {
        close(fd);
        return false;
    }
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    int err = 0;
    socklen_t len = sizeof(err);
    if (poll(&pfd, 1, (int) opt.timeout_ms) != 1 ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
        close(fd);
        return false;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void) c;
    *fdp = fd;
    return true;
}

/* One request: send msg while reading the echo back (so a large message
 * cannot deadlock against a server that echoes as it reads), and compare
 * every byte. Returns false on a socket failure; *same says whether the
 * echo matched. */
static bool round_trip(struct client *c,
                       int fd,
                       const unsigned char *msg,
                       size_t len,
                       unsigned char *buf,
                       bool *same)
{
    size_t sent = 0, got = 0;
    *same = true;
    while (got < len) {
        if (sent < len) {
            ssize_t n = send(fd, msg + sent, len - sent, MSG_NOSIGNAL);
            if (n > 0)
                sent += (size_t) n;
            else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                fail(c, error_of_errno(errno));
                return false;
            }
        }
        size_t want = len - got < RECV_CHUNK ? len - got : RECV_CHUNK;
        ssize_t n = recv(fd, buf, want, 0);
        if (n > 0) {
            if (memcmp(buf, msg + got, (size_t) n))
                *same = false;
            got += (size_t) n;
            continue;
        }
        if (n == 0) {
            fail(c, CE_CLOSED);
            return false;
        }
        if (errno != EAGAIN && errno != EINTR) {
            fail(c, error_of_errno(errno));
            return false;
        }
        struct pollfd pfd = {.fd = fd,
                             .events = POLLIN | (sent < len ? POLLOUT : 0)};
        int r = poll(&pfd, 1, (int) opt.timeout_ms);
        if (r == 0) {
            fail(c, CE_TIMEOUT);
            return false;
        }
        if (r < 0 && errno != EINTR) {
            fail(c, CE_IO);
            return false;
        }
    }
    return true;
}

static void *client_main(void *arg)
{
    struct client *c = arg;
    unsigned char *buf = malloc(RECV_CHUNK);
    int fd = -1;

    pthread_mutex_lock(&gate_lock);
    while (!gate_open)
        pthread_cond_wait(&gate_open_cond, &gate_lock);
    pthread_mutex_unlock(&gate_lock);

    bool connected = buf && connect_client(c, &fd);
    if (!connected)
        fail(c, CE_CONNECT);
    /* Everyone waits here, connected or not, so nobody is left behind. */
    pthread_barrier_wait(&start_barrier);

    uint64_t span = opt.max_len - opt.min_len + 1;
    for (uint64_t r = 0; connected && r < opt.rounds && !c->failed; r++) {
        size_t len = (size_t) (opt.min_len + splitmix64(&c->rng) % span);
        size_t off = (size_t) (splitmix64(&c->rng) % (pattern_len - len + 1));
        bool same;
        uint64_t t0 = now_ns();
        if (!round_trip(c, fd, pattern + off, len, buf, &same))
            break;
        uint64_t t1 = now_ns();
        struct sample *s = &c->samples[c->ok + c->mismatches];
        s->latency_ns = t1 - t0;
        s->length = (uint32_t) len;
        c->bytes += len;
        if (same)
            c->ok++;
        else
            c->mismatches++;
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    return NULL;
}

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: echo-bench [options]\n"
        "N echo clients connect, are released together by a barrier, and each "
        "sends\n"
        "--rounds messages of random length and binary content, checking every "
        "echo\n"
        "byte for byte.\n"
        "\n"
        "      --host HOST       server address, IPv4, IPv6 or a name (default "
        "127.0.0.1)\n"
        "      --port PORT       server port (default 12345)\n"
        "  -c, --clients N       concurrent clients, one thread each (default "
        "1000)\n"
        "  -r, --rounds N        requests per client (default 10)\n"
        "      --min-len BYTES   shortest message (default 1)\n"
        "      --max-len BYTES   longest message (default 1024)\n"
        "      --seed N          random seed for lengths and content (default "
        "1)\n"
        "      --timeout MS      connect or request without progress for MS ms "
        "fails\n"
        "                        that client (default 10000)\n"
        "      --samples FILE    write every request's latency: one nanosecond "
        "value a\n"
        "                        line, or 'length_bytes,latency_ns' CSV when "
        "FILE ends in\n"
        "                        .csv (default: not written)\n"
        "      --plot FILE.png   plot the latency histogram and CDF with\n"
        "                        tools/plot-latency.py, run by $KTCP_PYTHON or "
        "the repo's\n"
        "                        .venv/bin/python (default: no plot)\n"
        "      --json            print one JSON object instead of the summary\n"
        "      --version         print the version and exit\n"
        "  -h, --help            this help\n"
        "\n"
        "Exit status: 0 every echo matched and every client finished, 1 a "
        "mismatch or\n"
        "a failed client, 2 bad usage, 3 set-up failed (address, memory, "
        "samples file,\n"
        "plot).\n");
}

static bool parse_options(int argc, char **argv)
{
    enum {
        O_HOST = 256,
        O_PORT,
        O_MIN,
        O_MAX,
        O_SEED,
        O_TIMEOUT,
        O_SAMPLES,
        O_PLOT,
        O_JSON
    };
    static const struct option longopts[] = {
        {"host", required_argument, NULL, O_HOST},
        {"port", required_argument, NULL, O_PORT},
        {"clients", required_argument, NULL, 'c'},
        {"rounds", required_argument, NULL, 'r'},
        {"min-len", required_argument, NULL, O_MIN},
        {"max-len", required_argument, NULL, O_MAX},
        {"seed", required_argument, NULL, O_SEED},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"samples", required_argument, NULL, O_SAMPLES},
        {"plot", required_argument, NULL, O_PLOT},
        {"json", no_argument, NULL, O_JSON},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t port;
    int ch;
    while ((ch = getopt_long(argc, argv, "c:r:h", longopts, NULL)) != -1) {
        switch (ch) {
        case O_HOST:
            opt.host = optarg;
            break;
        case O_PORT:
            if (!parse_u64_option("--port", optarg, 1, 65535, &port))
                return false;
            opt.port = optarg;
            break;
        case 'c':
            if (!parse_u64_option("--clients", optarg, 1, 100000, &opt.clients))
                return false;
            break;
        case 'r':
            if (!parse_u64_option("--rounds", optarg, 1, 10000000, &opt.rounds))
                return false;
            break;
        case O_MIN:
            if (!parse_u64_option("--min-len", optarg, 1, 1u << 30,
                                  &opt.min_len))
                return false;
            break;
        case O_MAX:
            if (!parse_u64_option("--max-len", optarg, 1, 1u << 30,
                                  &opt.max_len))
                return false;
            break;
        case O_SEED:
            if (!parse_u64_option("--seed", optarg, 0, UINT64_MAX, &opt.seed))
                return false;
            break;
        case O_TIMEOUT:
            if (!parse_u64_option("--timeout", optarg, 1, 3600000,
                                  &opt.timeout_ms))
                return false;
            break;
        case O_SAMPLES:
            opt.samples_path = optarg;
            break;
        case O_PLOT:
            opt.plot_path = optarg;
            break;
        case O_JSON:
            opt.json = true;
            break;
        case 'V':
            ktcp_print_version("echo-bench");
            exit(EXIT_OK);
        case 'h':
            usage(stdout);
            exit(EXIT_OK);
        default:
            usage(stderr);
            return false;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "echo-bench: unexpected argument '%s' (see --help)\n",
                argv[optind]);
        return false;
    }
    if (opt.min_len > opt.max_len) {
        fprintf(stderr, "echo-bench: --min-len %llu is above --max-len %llu\n",
                (unsigned long long) opt.min_len,
                (unsigned long long) opt.max_len);
        return false;
    }
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static bool write_samples(const char *path,
                          const struct client *clients,
                          uint64_t nclients)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "echo-bench: --samples %s: %s\n", path,
                strerror(errno));
        return false;
    }
    bool csv = ends_with(path, ".csv");
    if (csv)
        fprintf(f, "length_bytes,latency_ns\n");
    for (uint64_t i = 0; i < nclients; i++) {
        const struct client *c = &clients[i];
        for (uint64_t r = 0; r < c->ok + c->mismatches; r++) {
            if (csv)
                fprintf(f, "%u,%llu\n", c->samples[r].length,
                        (unsigned long long) c->samples[r].latency_ns);
            else
                fprintf(f, "%llu\n",
                        (unsigned long long) c->samples[r].latency_ns);
        }
    }
    if (fclose(f)) {
        fprintf(stderr, "echo-bench: --samples %s: %s\n", path,
                strerror(errno));
        return false;
    }
    return true;
}

/* The repository root, found from build/echo-bench's own location. */
static bool repo_path(const char *relative, char *out, size_t size)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return false;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return false;
    *slash = '\0';
    return snprintf(out, size, "%s/../%s", exe, relative) < (int) size;
}

static bool run_plot(const char *samples, const char *png, const char *title)
{
    char script[PATH_MAX], venv_python[PATH_MAX];
    if (!repo_path("tools/plot-latency.py", script, sizeof(script))) {
        fprintf(stderr,
                "echo-bench: --plot: cannot locate tools/plot-latency.py\n");
        return false;
    }
    const char *python = getenv("KTCP_PYTHON");
    if (!python || !*python) {
        python = "python3";
        if (repo_path(".venv/bin/python", venv_python, sizeof(venv_python)) &&
            access(venv_python, X_OK) == 0)
            python = venv_python;
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "echo-bench: --plot: fork: %s\n", strerror(errno));
        return false;
    }
    if (pid == 0) {
        char *const args[] = {
            (char *) python, script, (char *) samples, (char *) png, "--title",
            (char *) title,  NULL};
        execvp(python, args);
        fprintf(stderr, "echo-bench: --plot: cannot run %s: %s\n", python,
                strerror(errno));
        _exit(127);
    }
    int status = 0;
    for (int waited = 0;; waited++) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (waited >= PLOT_TIMEOUT_S * 10) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fprintf(stderr, "echo-bench: --plot: %s did not finish in %d s\n",
                    script, PLOT_TIMEOUT_S);
            return false;
        }
        usleep(100000);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "echo-bench: --plot: %s %s failed (status %d)\n",
                python, script, status);
        return false;
    }
    return true;
}

struct totals {
    uint64_t connected;
    uint64_t failed_clients;
    uint64_t ok;
    uint64_t mismatches;
    uint64_t bytes;
    uint64_t errors[CE_KINDS];
};

static void report(const struct totals *t, const struct hist *h, double secs)
{
    uint64_t requests = t->ok + t->mismatches;
    double rps = secs > 0 ? (double) requests / secs : 0.0;
    double mbps = secs > 0 ? (double) t->bytes / secs / 1e6 : 0.0;
    if (opt.json) {
        printf("{\"tool\":\"echo-bench\",\"host\":");
        json_write_string(stdout, opt.host);
        printf(
            ",\"port\":%s,\"clients\":%llu,\"rounds\":%llu,\"min_len\":%llu,"
            "\"max_len\":%llu,\"seed\":%llu,\"connected\":%llu,"
            "\"failed_clients\":%llu,\"ok\":%llu,\"mismatches\":%llu,",
            opt.port, (unsigned long long) opt.clients,
            (unsigned long long) opt.rounds, (unsigned long long) opt.min_len,
            (unsigned long long) opt.max_len, (unsigned long long) opt.seed,
            (unsigned long long) t->connected,
            (unsigned long long) t->failed_clients, (unsigned long long) t->ok,
            (unsigned long long) t->mismatches);
        printf("\"errors\":{");
        for (int k = 0; k < CE_KINDS; k++)
            printf("%s\"%s\":%llu", k ? "," : "", client_error_names[k],
                   (unsigned long long) t->errors[k]);
        printf(
            "},\"seconds\":%.6f,\"req_per_s\":%.3f,\"bytes_echoed\":%llu,"
            "\"latency_us\":{\"count\":%llu,\"min\":%.3f,\"mean\":%.3f,"
            "\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"max\":%.3f}}\n",
            secs, rps, (unsigned long long) t->bytes,
            (unsigned long long) h->count,
            h->count ? (double) h->min / 1e3 : 0.0, hist_mean(h) / 1e3,
            (double) hist_percentile(h, 50) / 1e3,
            (double) hist_percentile(h, 90) / 1e3,
            (double) hist_percentile(h, 99) / 1e3, (double) h->max / 1e3);
        return;
    }
    printf(
        "echo-bench %s port %s: %llu clients x %llu rounds, lengths "
        "%llu..%llu, seed %llu\n",
        opt.host, opt.port, (unsigned long long) opt.clients,
        (unsigned long long) opt.rounds, (unsigned long long) opt.min_len,
        (unsigned long long) opt.max_len, (unsigned long long) opt.seed);
    printf("clients:    %llu connected, %llu failed\n",
           (unsigned long long) t->connected,
           (unsigned long long) t->failed_clients);
    printf(
        "requests:   %llu ok, %llu mismatches in %.3f s = %.1f req/s, %.2f "
        "MB/s echoed\n",
        (unsigned long long) t->ok, (unsigned long long) t->mismatches, secs,
        rps, mbps);
    printf("errors:    ");
    for (int k = 0; k < CE_KINDS; k++)
        printf("%s %s %llu", k ? "," : "", client_error_names[k],
               (unsigned long long) t->errors[k]);
    printf("\n");
    printf(
        "latency us: min %.1f  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f  mean "
        "%.1f\n",
        h->count ? (double) h->min / 1e3 : 0.0,
        (double) hist_percentile(h, 50) / 1e3,
        (double) hist_percentile(h, 90) / 1e3,
        (double) hist_percentile(h, 99) / 1e3, (double) h->max / 1e3,
        hist_mean(h) / 1e3);
}

int main(int argc, char **argv)
{
    if (!parse_options(argc, argv))
        return EXIT_USAGE;
    signal(SIGPIPE, SIG_IGN);
    if (!resolve_tcp_address(opt.host, opt.port, &server_addr,
                             &server_addr_len))
        return EXIT_SETUP;
    raise_fd_limit(opt.clients + 64);

    pattern_len = (size_t) opt.max_len + 4096;
    pattern = malloc(pattern_len);
    struct client *clients = calloc(opt.clients, sizeof(*clients));
    struct sample *samples = calloc(opt.clients * opt.rounds, sizeof(*samples));
    if (!pattern || !clients || !samples) {
        fprintf(stderr,
                "echo-bench: cannot allocate %llu clients x %llu rounds: out "
                "of memory\n",
                (unsigned long long) opt.clients,
                (unsigned long long) opt.rounds);
        return EXIT_SETUP;
    }
    uint64_t rng = opt.seed;
    for (size_t i = 0; i < pattern_len; i += 8) {
        uint64_t v = splitmix64(&rng);
        memcpy(pattern + i, &v, pattern_len - i < 8 ? pattern_len - i : 8);
    }

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, CLIENT_STACK_SIZE < PTHREAD_STACK_MIN
                                         ? PTHREAD_STACK_MIN
                                         : CLIENT_STACK_SIZE);
    uint64_t started = 0;
    for (uint64_t i = 0; i < opt.clients; i++) {
        struct client *c = &clients[i];
        c->index = i;
        uint64_t mix = opt.seed ^ (i * 0x9e3779b97f4a7c15ull);
        c->rng = splitmix64(&mix);
        c->samples = samples + i * opt.rounds;
        int err = pthread_create(&c->thread, &attr, client_main, c);
        if (err) {
            fprintf(stderr, "echo-bench: cannot start client thread %llu: %s\n",
                    (unsigned long long) i, strerror(err));
            for (uint64_t j = i; j < opt.clients; j++)
                fail(&clients[j], CE_THREAD);
            break;
        }
        started++;
    }
    pthread_attr_destroy(&attr);

    /* Size the barrier to the clients that exist, then let them connect. */
    pthread_barrier_init(&start_barrier, NULL, (unsigned) started + 1);
    pthread_mutex_lock(&gate_lock);
    gate_open = true;
    pthread_cond_broadcast(&gate_open_cond);
    pthread_mutex_unlock(&gate_lock);
    pthread_barrier_wait(&start_barrier);
    uint64_t start = now_ns();
    for (uint64_t i = 0; i < started; i++)
        pthread_join(clients[i].thread, NULL);
    double secs = (double) (now_ns() - start) / 1e9;
    pthread_barrier_destroy(&start_barrier);

    struct totals t = {0};
    static struct hist h;
    hist_init(&h);
    for (uint64_t i = 0; i < opt.clients; i++) {
        struct client *c = &clients[i];
        t.ok += c->ok;
        t.mismatches += c->mismatches;
        t.bytes += c->bytes;
        if (c->failed) {
            t.failed_clients++;
            t.errors[c->error]++;
        }
        if (!c->failed || c->error != CE_CONNECT)
            t.connected += i < started;
        for (uint64_t r = 0; r < c->ok + c->mismatches; r++)
            hist_record(&h, c->samples[r].latency_ns);
    }
    report(&t, &h, secs);

    int status = t.mismatches || t.failed_clients ? EXIT_FAILED : EXIT_OK;
    if (t.mismatches)
        fprintf(stderr, "echo-bench: %llu echoes differed from what was sent\n",
                (unsigned long long) t.mismatches);
    if (t.failed_clients)
        fprintf(stderr, "echo-bench: %llu of %llu clients failed\n",
                (unsigned long long) t.failed_clients,
                (unsigned long long) opt.clients);

    const char *samples_path = opt.samples_path;
    char tmp_samples[] = "/tmp/echo-bench-samples-XXXXXX";
    if (opt.plot_path && !samples_path) {
        int fd = mkstemp(tmp_samples);
        if (fd < 0) {
            fprintf(stderr, "echo-bench: --plot: temporary samples file: %s\n",
                    strerror(errno));
            return EXIT_SETUP;
        }
        close(fd);
        samples_path = tmp_samples;
    }
    if (samples_path && !write_samples(samples_path, clients, opt.clients))
        return EXIT_SETUP;
    if (opt.plot_path) {
        char title[256];
        snprintf(title, sizeof(title),
                 "echo-bench %s:%s, %llu clients x %llu rounds, %llu..%llu B",
                 opt.host, opt.port, (unsigned long long) opt.clients,
                 (unsigned long long) opt.rounds,
                 (unsigned long long) opt.min_len,
                 (unsigned long long) opt.max_len);
        bool plotted = run_plot(samples_path, opt.plot_path, title);
        if (samples_path == tmp_samples)
            unlink(tmp_samples);
        if (!plotted)
            return EXIT_SETUP;
    }
    return status;
}
