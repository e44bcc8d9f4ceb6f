/*
 * ktcp-echo: command line, signals and counters; the connections are the
 * runtime's (user/rt), the handler is echo-conn.c.
 *
 * Signals are blocked in every thread and taken synchronously by the main
 * thread (sigwaitinfo): SIGTERM/SIGINT stop the runtime, SIGUSR1 writes the
 * counters (the same names and format as kecho's /proc/net/kecho). SIGHUP,
 * which would otherwise end the process (a closed terminal, a service
 * manager's "reload"), is taken and ignored: every setting is a flag, so
 * there is nothing to read again.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "echo.h"
#include "ktcp-net.h"
#include "ktcp-version.h"

static const char *const model_names[] = {"threads", "epoll", "mn"};

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: ktcp-echo [OPTION]...\n"
            "Echo every byte each TCP client sends back to it (the user-space "
            "twin of kecho.ko).\n\n"
            "  -b, --bind ADDR            numeric IPv4/IPv6 address to listen "
            "on\n"
            "                             (default: every address, IPv6 and "
            "IPv4)\n"
            "  -p, --port PORT            TCP port (default 12345)\n"
            "  -t, --threads N            worker threads of the epoll and mn "
            "models\n"
            "                             (default: one per core)\n"
            "  -m, --model MODEL          threads | epoll | mn (default: "
            "epoll)\n"
            "  -i, --idle-timeout-ms MS   close a client idle this long; 0 = "
            "never (default 30000)\n"
            "  -c, --max-conns N          clients served at once; more are "
            "closed at accept;\n"
            "                             0 = no limit (default 10000)\n"
            "      --max-conns-per-ip N   clients served at once from one "
            "address (IPv4 and\n"
            "                             IPv4-mapped IPv6 count as one); "
            "more are closed at\n"
            "                             accept; 0 = no limit (default 0)\n"
            "      --backlog N            listen backlog (default 1024)\n"
            "  -s, --stats-file PATH      where SIGUSR1 and exit write the "
            "counters (default: stderr)\n"
            "      --version              print the version and exit\n"
            "  -h, --help                 this text\n\n"
            "-m was --max-conns before it meant --model, as in ktcp-httpd; a "
            "number given to\n"
            "-m is refused with a hint.\n\n"
            "Exit status: 0 after SIGTERM/SIGINT, 1 on a start-up error, 2 on "
            "a bad argument.\n");
}

static long parse_num(const char *flag, const char *s, long min, long max)
{
    return ktcp_parse_long("ktcp-echo", flag, s, min, max);
}

static void write_counters(const char *stats_file)
{
    static const struct {
        const char *name;
        int which;
    } order[] = {
        {"refused", RT_C_REFUSED},     {"messages", ECHO_C_MESSAGES},
        {"bytes_in", ECHO_C_BYTES_IN}, {"bytes_out", RT_C_BYTES_OUT},
        {"timeouts", RT_C_TIMEOUTS},   {"errors", RT_C_ERRORS},
    };
    uint64_t sum[RT_NCOUNTERS];
    char tmp[PATH_MAX];
    FILE *f = stderr;

    rt_counters_sum(sum);
    if (stats_file) {
        /* Written aside and renamed: a reader never sees half a file. */
        snprintf(tmp, sizeof(tmp), "%s.tmp", stats_file);
        f = fopen(tmp, "w");
        if (!f) {
            fprintf(stderr, "ktcp-echo: --stats-file %s: %s\n", tmp,
                    strerror(errno));
            return;
        }
    }
    fprintf(f, "accepted %llu\n", (unsigned long long) sum[RT_C_ACCEPTED]);
    fprintf(f, "active %ld\n", rt_live_conns());
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
        fprintf(f, "%s %llu\n", order[i].name,
                (unsigned long long) sum[order[i].which]);
    if (stats_file) {
        if (fclose(f) != 0 || rename(tmp, stats_file) != 0)
            fprintf(stderr, "ktcp-echo: --stats-file %s: %s\n", stats_file,
                    strerror(errno));
    }
}

static enum rt_model parse_model(const char *s)
{
    for (size_t i = 0; i < sizeof(model_names) / sizeof(model_names[0]); i++)
        if (!strcmp(s, model_names[i]))
            return (enum rt_model) i;
    if (s[0] >= '0' && s[0] <= '9')
        fprintf(stderr,
                "ktcp-echo: -m %s: -m is --model now (as in ktcp-httpd); "
                "the connection limit is --max-conns (-c)\n",
                s);
    else
        fprintf(stderr,
                "ktcp-echo: --model %s: expected threads, epoll or mn\n", s);
    exit(2);
}

int main(int argc, char **argv)
{
    enum { OPT_BACKLOG = 256, OPT_VERSION, OPT_MAX_PER_IP };
    static const struct option longopts[] = {
        {"bind", required_argument, NULL, 'b'},
        {"port", required_argument, NULL, 'p'},
        {"threads", required_argument, NULL, 't'},
        {"model", required_argument, NULL, 'm'},
        {"idle-timeout-ms", required_argument, NULL, 'i'},
        {"max-conns", required_argument, NULL, 'c'},
        {"max-conns-per-ip", required_argument, NULL, OPT_MAX_PER_IP},
        {"backlog", required_argument, NULL, OPT_BACKLOG},
        {"stats-file", required_argument, NULL, 's'},
        {"version", no_argument, NULL, OPT_VERSION},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct rt_config cfg = {
        .name = "ktcp-echo",
        .model = RT_MODEL_EPOLL,
        .workers = cpus > 0 ? (int) cpus : 1,
        .bind = NULL,
        .port = 12345,
        .backlog = 1024,
        .idle_timeout_ms = 30000,
        .max_conns = 10000,
        .handler = echo_serve,
        .stop_cuts_sends = true,
    };
    const char *stats_file = NULL;
    sigset_t sigs;
    int c, err;

    while ((c = getopt_long(argc, argv, "b:p:t:m:i:c:s:h", longopts, NULL)) !=
           -1) {
        switch (c) {
        case 'b':
            cfg.bind = optarg;
            break;
        case 'p':
            cfg.port = (int) parse_num("--port", optarg, 1, 65535);
            break;
        case 't':
            cfg.workers = (int) parse_num("--threads", optarg, 1, 256);
            break;
        case 'm':
            cfg.model = parse_model(optarg);
            break;
        case 'i':
            cfg.idle_timeout_ms =
                (int) parse_num("--idle-timeout-ms", optarg, 0, INT_MAX);
            break;
        case 'c':
            cfg.max_conns = (int) parse_num("--max-conns", optarg, 0, INT_MAX);
            break;
        case OPT_MAX_PER_IP:
            cfg.max_conns_per_ip =
                (int) parse_num("--max-conns-per-ip", optarg, 0, INT_MAX);
            break;
        case OPT_BACKLOG:
            cfg.backlog = (int) parse_num("--backlog", optarg, 1, 65535);
            break;
        case 's':
            stats_file = optarg;
            break;
        case OPT_VERSION:
            ktcp_print_version("ktcp-echo");
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
        fprintf(stderr, "ktcp-echo: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    /* a client that does not read is given as long as an idle one */
    echo_send_timeout_ms = cfg.idle_timeout_ms ? cfg.idle_timeout_ms : INT_MAX;

    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGUSR1);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* inherited by the workers */

    err = rt_start(&cfg);
    if (err < 0) {
        if (err != -EINVAL)
            fprintf(stderr, "ktcp-echo: cannot start: %s\n", strerror(-err));
        return 1;
    }
    fprintf(stderr, "ktcp-echo: listening on port %d, %s model, %d threads\n",
            cfg.port, model_names[cfg.model], cfg.workers);

    for (;;) {
        int sig = sigwaitinfo(&sigs, NULL);

        if (sig == SIGUSR1)
            write_counters(stats_file);
        else if (sig == SIGHUP)
            fprintf(stderr,
                    "ktcp-echo: SIGHUP: nothing to reload, "
                    "connections kept\n");
        else if (sig == SIGTERM || sig == SIGINT)
            break;
    }
    rt_stop();
    rt_finish();
    write_counters(stats_file);
    return 0;
}
