/*
 * ktcp-echo: command line, workers, signals and counters.
 *
 * Signals are blocked in every thread and taken synchronously by the main
 * thread (sigwaitinfo): SIGTERM/SIGINT stop the workers through their
 * eventfds, SIGUSR1 writes the counters (the same names and format as
 * kecho's /proc/net/kecho). SIGHUP, which would otherwise end the process
 * (a closed terminal, a service manager's "reload"), is taken and
 * ignored: every setting is a flag, so there is nothing to read again.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "echo.h"
#include "ktcp-net.h"
#include "ktcp-version.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: ktcp-echo [OPTION]...\n"
            "Echo every byte each TCP client sends back to it (the user-space "
            "twin of kecho.ko).\n\n"
            "  -p, --port PORT            TCP port (default 12345)\n"
            "  -b, --bind ADDR            address to listen on (default: all, "
            "IPv6 and IPv4)\n"
            "  -t, --threads N            worker threads, one event loop each "
            "(default: one per core)\n"
            "      --backlog N            listen backlog (default 1024)\n"
            "  -i, --idle-timeout-ms MS   close a client idle this long; 0 = "
            "never (default 30000)\n"
            "  -m, --max-conns N          clients served at once; more are "
            "closed at accept (default 10000)\n"
            "  -s, --stats-file PATH      where SIGUSR1 and exit write the "
            "counters (default: stderr)\n"
            "      --version              print the version and exit\n"
            "  -h, --help                 this text\n\n"
            "Exit status: 0 after SIGTERM/SIGINT, 1 on a start-up error, 2 on "
            "a bad argument.\n");
}

static long parse_num(const char *flag, const char *s, long min, long max)
{
    return ktcp_parse_long("ktcp-echo", flag, s, min, max);
}

static void write_counters(const struct echo_options *opt,
                           struct echo_worker *workers,
                           int n)
{
    uint64_t sum[7] = {0};
    static const char *const names[7] = {"accepted", "refused",   "messages",
                                         "bytes_in", "bytes_out", "timeouts",
                                         "errors"};
    char tmp[PATH_MAX];
    FILE *f = stderr;

    for (int i = 0; i < n; i++) {
        struct echo_counters *c = &workers[i].counters;

        sum[0] += atomic_load_explicit(&c->accepted, memory_order_relaxed);
        sum[1] += atomic_load_explicit(&c->refused, memory_order_relaxed);
        sum[2] += atomic_load_explicit(&c->messages, memory_order_relaxed);
        sum[3] += atomic_load_explicit(&c->bytes_in, memory_order_relaxed);
        sum[4] += atomic_load_explicit(&c->bytes_out, memory_order_relaxed);
        sum[5] += atomic_load_explicit(&c->timeouts, memory_order_relaxed);
        sum[6] += atomic_load_explicit(&c->errors, memory_order_relaxed);
    }
    if (opt->stats_file) {
        /* Written aside and renamed: a reader never sees half a file. */
        snprintf(tmp, sizeof(tmp), "%s.tmp", opt->stats_file);
        f = fopen(tmp, "w");
        if (!f) {
            fprintf(stderr, "ktcp-echo: --stats-file %s: %s\n", tmp,
                    strerror(errno));
            return;
        }
    }
    fprintf(f, "accepted %llu\n", (unsigned long long) sum[0]);
    fprintf(f, "active %u\n", atomic_load(&echo_active_conns));
    for (int i = 1; i < 7; i++)
        fprintf(f, "%s %llu\n", names[i], (unsigned long long) sum[i]);
    if (opt->stats_file) {
        if (fclose(f) != 0 || rename(tmp, opt->stats_file) != 0)
            fprintf(stderr, "ktcp-echo: --stats-file %s: %s\n", opt->stats_file,
                    strerror(errno));
    }
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"port", required_argument, NULL, 'p'},
        {"bind", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 't'},
        {"backlog", required_argument, NULL, 'B'},
        {"idle-timeout-ms", required_argument, NULL, 'i'},
        {"max-conns", required_argument, NULL, 'm'},
        {"stats-file", required_argument, NULL, 's'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    struct echo_options opt = {
        .port = 12345,
        .backlog = 1024,
        .threads = (int) sysconf(_SC_NPROCESSORS_ONLN),
        .idle_timeout_ms = 30000,
        .max_conns = 10000,
    };
    struct echo_worker *workers;
    sigset_t sigs;
    int c;

    while ((c = getopt_long(argc, argv, "p:b:t:i:m:s:h", longopts, NULL)) !=
           -1) {
        switch (c) {
        case 'p':
            opt.port = (int) parse_num("--port", optarg, 1, 65535);
            break;
        case 'b':
            opt.bind_addr = optarg;
            break;
        case 't':
            opt.threads = (int) parse_num("--threads", optarg, 1, 1024);
            break;
        case 'B':
            opt.backlog = (int) parse_num("--backlog", optarg, 1, 65535);
            break;
        case 'i':
            opt.idle_timeout_ms =
                (unsigned) parse_num("--idle-timeout-ms", optarg, 0, INT_MAX);
            break;
        case 'm':
            opt.max_conns =
                (unsigned) parse_num("--max-conns", optarg, 1, INT_MAX);
            break;
        case 's':
            opt.stats_file = optarg;
            break;
        case 'V':
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
    if (opt.threads < 1)
        opt.threads = 1;
    echo_worker_set_options(&opt);

    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGUSR1);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* inherited by the workers */

    workers = calloc(opt.threads, sizeof(*workers));
    if (!workers) {
        fprintf(stderr, "ktcp-echo: out of memory\n");
        return 1;
    }
    for (int i = 0; i < opt.threads; i++) {
        struct echo_worker *w = &workers[i];
        struct epoll_event ev = {.events = EPOLLIN};

        w->index = i;
        w->listen_fd = echo_listen(&opt);
        if (w->listen_fd < 0) {
            fprintf(stderr, "ktcp-echo: listen on %s port %d: %s\n",
                    opt.bind_addr ? opt.bind_addr : "*", opt.port,
                    strerror(-w->listen_fd));
            return 1;
        }
        w->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->epoll_fd < 0 || w->wake_fd < 0) {
            perror("ktcp-echo: epoll/eventfd");
            return 1;
        }
        ev.data.ptr = &w->listen_fd;
        epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, w->listen_fd, &ev);
        ev.data.ptr = &w->wake_fd;
        epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, w->wake_fd, &ev);
        if (pthread_create(&w->thread, NULL, echo_worker_run, w) != 0) {
            fprintf(stderr, "ktcp-echo: cannot start worker %d\n", i);
            return 1;
        }
    }
    fprintf(stderr, "ktcp-echo: listening on port %d, %d threads\n", opt.port,
            opt.threads);

    for (;;) {
        int sig = sigwaitinfo(&sigs, NULL);

        if (sig == SIGUSR1)
            write_counters(&opt, workers, opt.threads);
        else if (sig == SIGHUP)
            fprintf(stderr,
                    "ktcp-echo: SIGHUP: nothing to reload, "
                    "connections kept\n");
        else if (sig == SIGTERM || sig == SIGINT)
            break;
    }
    for (int i = 0; i < opt.threads; i++) {
        uint64_t one = 1;

        if (write(workers[i].wake_fd, &one, sizeof(one)) < 0)
            perror("ktcp-echo: wake worker");
    }
    for (int i = 0; i < opt.threads; i++)
        pthread_join(workers[i].thread, NULL);
    write_counters(&opt, workers, opt.threads);
    return 0;
}
