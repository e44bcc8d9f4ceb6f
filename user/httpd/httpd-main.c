/* httpd-main.c — ktcp-httpd: options, set-up, signals. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "httpd.h"
#include "ktcp-version.h"

#define DEFAULT_PORT 8081
#define DEFAULT_BIND "127.0.0.1"
#define DEFAULT_IDLE_TIMEOUT_MS 30000
#define DEFAULT_CACHE_SIZE (64UL * 1024 * 1024)
#define NO_TIMEOUT_MS (24 * 3600 * 1000) /* --idle-timeout 0 */

static const char *model_names[] = {"threads", "epoll", "mn"};

static void usage(FILE *out)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(out,
            "Usage: ktcp-httpd [OPTION]...\n"
            "Serve the files under a directory over HTTP/1.1 (GET, HEAD).\n"
            "\n"
            "  -r, --root DIR          directory to serve (default: the "
            "current directory)\n"
            "  -p, --port N            TCP port (default: %d)\n"
            "  -b, --bind ADDR         numeric IPv4/IPv6 address to listen "
            "on (default: %s;\n"
            "                          0.0.0.0 or :: for all interfaces)\n"
            "  -t, --threads N         worker threads for epoll and mn "
            "(default: one per\n"
            "                          online CPU, here %ld)\n"
            "  -m, --model MODEL       threads | epoll | mn (default: epoll)\n"
            "      --idle-timeout MS   close a connection idle this long, "
            "or whose request\n"
            "                          head is not complete this long after "
            "its first byte\n"
            "                          (408); also bounds each wait for a "
            "slow reader;\n"
            "                          0 = never (default: %d)\n"
            "      --max-conns N       answer connections beyond N with 503 "
            "and close them\n"
            "                          (default: 0, unlimited)\n"
            "      --gzip, --no-gzip   gzip compressible files when the client "
            "accepts it\n"
            "                          (default: --gzip)\n"
            "      --cache-size BYTES  content cache limit, suffix K, M or G "
            "(default: 64M)\n"
            "      --access-log FILE   append one line per request to FILE, "
            "'-' for stdout\n"
            "                          (default: off)\n"
            "      --version           print the version and exit\n"
            "  -h, --help              show this help and exit\n",
            DEFAULT_PORT, DEFAULT_BIND, cpus, DEFAULT_IDLE_TIMEOUT_MS);
}

static void __attribute__((noreturn))
bad_arg(const char *opt, const char *val, const char *why)
{
    fprintf(stderr, "ktcp-httpd: %s %s: %s\n", opt, val, why);
    exit(2);
}

static long parse_long(const char *opt, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        char why[96];
        snprintf(why, sizeof(why), "expected an integer in %ld..%ld", min, max);
        bad_arg(opt, s, why);
    }
    return v;
}

static size_t parse_size(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1ULL << 10, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1ULL << 20, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1ULL << 30, end++;
    if (errno || end == s || *end || s[0] == '-' || v > (1ULL << 50) / mul)
        bad_arg(opt, s, "expected bytes, optionally with K, M or G");
    return (size_t) (v * mul);
}

enum {
    OPT_IDLE = 256,
    OPT_MAXCONNS,
    OPT_GZIP,
    OPT_NOGZIP,
    OPT_CACHE,
    OPT_LOG,
};

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"root", required_argument, NULL, 'r'},
        {"port", required_argument, NULL, 'p'},
        {"bind", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 't'},
        {"model", required_argument, NULL, 'm'},
        {"idle-timeout", required_argument, NULL, OPT_IDLE},
        {"max-conns", required_argument, NULL, OPT_MAXCONNS},
        {"gzip", no_argument, NULL, OPT_GZIP},
        {"no-gzip", no_argument, NULL, OPT_NOGZIP},
        {"cache-size", required_argument, NULL, OPT_CACHE},
        {"access-log", required_argument, NULL, OPT_LOG},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static struct rt_config cfg;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const char *access_log = NULL;

    cfg.model = RT_MODEL_EPOLL;
    cfg.workers = cpus > 0 ? (int) cpus : 1;
    cfg.bind = DEFAULT_BIND;
    cfg.port = DEFAULT_PORT;
    cfg.idle_timeout_ms = DEFAULT_IDLE_TIMEOUT_MS;
    httpd_cfg.root_path = ".";
    httpd_cfg.gzip = true;
    httpd_cfg.cache_size = DEFAULT_CACHE_SIZE;

    int c;
    while ((c = getopt_long(argc, argv, "r:p:b:t:m:h", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            httpd_cfg.root_path = optarg;
            break;
        case 'p':
            cfg.port = (int) parse_long("--port", optarg, 0, 65535);
            break;
        case 'b':
            cfg.bind = optarg;
            break;
        case 't':
            cfg.workers = (int) parse_long("--threads", optarg, 1, 256);
            break;
        case 'm': {
            int i, n = sizeof(model_names) / sizeof(model_names[0]);
            for (i = 0; i < n && strcmp(optarg, model_names[i]); i++)
                ;
            if (i == n)
                bad_arg("--model", optarg, "expected threads, epoll or mn");
            cfg.model = (enum rt_model) i;
            break;
        }
        case OPT_IDLE:
            cfg.idle_timeout_ms =
                (int) parse_long("--idle-timeout", optarg, 0, NO_TIMEOUT_MS);
            if (cfg.idle_timeout_ms == 0)
                cfg.idle_timeout_ms = NO_TIMEOUT_MS;
            break;
        case OPT_MAXCONNS:
            cfg.max_conns = (int) parse_long("--max-conns", optarg, 0, INT_MAX);
            break;
        case OPT_GZIP:
            httpd_cfg.gzip = true;
            break;
        case OPT_NOGZIP:
            httpd_cfg.gzip = false;
            break;
        case OPT_CACHE:
            httpd_cfg.cache_size = parse_size("--cache-size", optarg);
            break;
        case OPT_LOG:
            access_log = optarg;
            break;
        case 'V':
            ktcp_print_version("ktcp-httpd");
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ktcp-httpd: unexpected argument '%s' (see --help)\n",
                argv[optind]);
        return 2;
    }

    httpd_cfg.root_fd =
        open(httpd_cfg.root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (httpd_cfg.root_fd < 0)
        bad_arg("--root", httpd_cfg.root_path, strerror(errno));
    if (access_log) {
        httpd_cfg.access_log_fd =
            strcmp(access_log, "-") == 0
                ? dup(STDOUT_FILENO)
                : open(access_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                       0644);
        if (httpd_cfg.access_log_fd < 0)
            bad_arg("--access-log", access_log, strerror(errno));
    }
    httpd_cfg.idle_timeout_ms = cfg.idle_timeout_ms;

    /* one fd per connection: take all the kernel allows */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    /* Signals: SIGPIPE never (writes return EPIPE instead); SIGTERM and
     * SIGINT blocked in every thread and taken by sigwait here. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);

    if (httpd_cache_init() < 0) {
        fprintf(stderr, "ktcp-httpd: cannot create the content cache\n");
        return 1;
    }
    cfg.handler = httpd_conn_serve;
    cfg.refuse = httpd_conn_refuse;
    int err = rt_start(&cfg);
    if (err < 0) {
        if (err != -EINVAL && err != -EADDRINUSE && err != -EACCES)
            fprintf(stderr, "ktcp-httpd: cannot start: %s\n", strerror(-err));
        return 1;
    }
    fprintf(stderr,
            "ktcp-httpd: serving %s on %s port %d (model %s, %d worker%s)\n",
            httpd_cfg.root_path, cfg.bind, cfg.port, model_names[cfg.model],
            cfg.model == RT_MODEL_THREADS ? 1 : cfg.workers,
            cfg.model != RT_MODEL_THREADS && cfg.workers > 1 ? "s" : "");

    int sig;
    while (sigwait(&stop_signals, &sig) != 0)
        ;
    rt_stop();
    rt_finish();
    return 0;
}
