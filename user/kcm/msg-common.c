/*
 * What ktcp-kcm-server and ktcp-msg-server share: the command line (the same
 * flags and defaults for both, so a benchmark changes only the program name),
 * the listener, the requested work, counters and signals.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ktcp-net.h"
#include "ktcp-version.h"
#include "msg.h"

static void usage(const struct msg_options *opt, const char *what, FILE *f)
{
    fprintf(f,
            "Usage: %s [OPTION]...\n"
            "%s\n\n"
            "Protocol: each frame is a 4-byte big-endian body length and the "
            "body;\nthe body's first 4 bytes (big-endian) ask for that many "
            "microseconds of\nwork (at most %u); the frame is then sent back "
            "unchanged.\n\n"
            "  -p, --port PORT        TCP port (default 12346)\n"
            "  -b, --bind ADDR        address to listen on (default: all, IPv6 "
            "and IPv4)\n"
            "  -t, --threads N        worker threads (default: one per core)\n"
            "      --max-msg BYTES    largest body accepted; a longer frame "
            "closes its\n"
            "                         connection (default %u)\n"
            "      --backlog N        listen backlog (default 1024)\n"
            "  -s, --stats-file PATH  where SIGUSR1 and exit write the "
            "counters (default: stderr)\n"
            "      --version          print the version and exit\n"
            "  -h, --help             this text\n\n"
            "Exit status: 0 after SIGTERM/SIGINT, 1 on a start-up error, 2 on "
            "a bad argument.\n",
            opt->prog, what, MSG_MAX_WORK_US, MSG_DEFAULT_MAX);
}

static long parse_num(const struct msg_options *opt,
                      const char *flag,
                      const char *s,
                      long min,
                      long max)
{
    return ktcp_parse_long(opt->prog, flag, s, min, max);
}

void msg_parse_options(struct msg_options *opt,
                       const char *what,
                       int argc,
                       char **argv)
{
    static const struct option longopts[] = {
        {"port", required_argument, NULL, 'p'},
        {"bind", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 't'},
        {"max-msg", required_argument, NULL, 'M'},
        {"backlog", required_argument, NULL, 'B'},
        {"stats-file", required_argument, NULL, 's'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    int c;

    opt->port = 12346;
    opt->backlog = 1024;
    opt->threads = (int) sysconf(_SC_NPROCESSORS_ONLN);
    opt->max_msg = MSG_DEFAULT_MAX;
    while ((c = getopt_long(argc, argv, "p:b:t:m:s:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'p':
            opt->port = (int) parse_num(opt, "--port", optarg, 1, 65535);
            break;
        case 'b':
            opt->bind_addr = optarg;
            break;
        case 't':
            opt->threads = (int) parse_num(opt, "--threads", optarg, 1, 256);
            break;
        case 'M':
            opt->max_msg = (uint32_t) parse_num(opt, "--max-msg", optarg,
                                                MSG_REQ_HDR_LEN, MSG_MAX_MAX);
            break;
        case 'm':
            /* -m is --model in every other server; these two have one loop
             * of their own, and the old -m (--max-msg) must not be taken
             * for something else silently */
            fprintf(stderr,
                    "%s: -m is --model in the other servers and these have "
                    "one model; the largest body is --max-msg BYTES\n",
                    opt->prog);
            exit(2);
        case 'B':
            opt->backlog = (int) parse_num(opt, "--backlog", optarg, 1, 65535);
            break;
        case 's':
            opt->stats_file = optarg;
            break;
        case 'V':
            ktcp_print_version(opt->prog);
            exit(0);
        case 'h':
            usage(opt, what, stdout);
            exit(0);
        default:
            usage(opt, what, stderr);
            exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", opt->prog,
                argv[optind]);
        exit(2);
    }
    if (opt->threads < 1)
        opt->threads = 1;
}

int msg_listen(const struct msg_options *opt, bool reuseport)
{
    return ktcp_listen_tcp(opt->bind_addr, opt->port, opt->backlog, reuseport);
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + ts.tv_nsec;
}

uint32_t msg_do_work(const uint8_t *frame, size_t frame_len)
{
    uint32_t work_us, hash = 2166136261u; /* FNV-1a */
    uint64_t deadline;

    if (frame_len < MSG_HDR_LEN + MSG_REQ_HDR_LEN)
        return 0;
    work_us = msg_get_be32(frame + MSG_HDR_LEN);
    if (work_us == 0)
        return 0;
    if (work_us > MSG_MAX_WORK_US)
        work_us = MSG_MAX_WORK_US;
    /* Hash the body in passes of at most 256 bytes between clock reads, so
     * a large body does not overshoot a short request by much. */
    deadline = now_ns() + (uint64_t) work_us * 1000;
    for (size_t off = 0;;) {
        size_t end = off + 256 < frame_len ? off + 256 : frame_len;

        for (; off < end; off++)
            hash = (hash ^ frame[off]) * 16777619u;
        if (off == frame_len)
            off = 0;
        if (now_ns() >= deadline)
            break;
    }
    return hash;
}

void msg_write_counters(const struct msg_options *opt,
                        struct msg_counters *const *sets,
                        int n)
{
    static const char *const names[] = {"accepted", "closed",    "messages",
                                        "bytes_in", "bytes_out", "too_big",
                                        "errors"};
    uint64_t sum[7] = {0};
    char tmp[PATH_MAX];
    FILE *f = stderr;

    for (int i = 0; i < n; i++) {
        _Atomic uint64_t *c = &sets[i]->accepted;

        for (int k = 0; k < 7; k++)
            sum[k] += atomic_load_explicit(&c[k], memory_order_relaxed);
    }
    if (opt->stats_file) {
        /* Written aside and renamed: a reader never sees half a file. */
        snprintf(tmp, sizeof(tmp), "%s.tmp", opt->stats_file);
        f = fopen(tmp, "w");
        if (!f) {
            fprintf(stderr, "%s: --stats-file %s: %s\n", opt->prog, tmp,
                    strerror(errno));
            return;
        }
    }
    for (int k = 0; k < 7; k++)
        fprintf(f, "%s %llu\n", names[k], (unsigned long long) sum[k]);
    fprintf(f, "active %llu\n", (unsigned long long) (sum[0] - sum[1]));
    /* Set 0 belongs to the acceptor; the rest are the workers, in order. */
    for (int i = 1; i < n; i++)
        fprintf(f, "worker%d_messages %llu\n", i - 1,
                (unsigned long long) atomic_load_explicit(
                    &sets[i]->messages, memory_order_relaxed));
    if (opt->stats_file) {
        if (fclose(f) != 0 || rename(tmp, opt->stats_file) != 0)
            fprintf(stderr, "%s: --stats-file %s: %s\n", opt->prog,
                    opt->stats_file, strerror(errno));
    }
}

void msg_block_signals(sigset_t *sigs)
{
    sigemptyset(sigs);
    sigaddset(sigs, SIGTERM);
    sigaddset(sigs, SIGINT);
    sigaddset(sigs, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void msg_wait_for_stop(const struct msg_options *opt,
                       sigset_t *sigs,
                       struct msg_counters *const *sets,
                       int n)
{
    for (;;) {
        int sig = sigwaitinfo(sigs, NULL);

        if (sig == SIGUSR1)
            msg_write_counters(opt, sets, n);
        else if (sig == SIGTERM || sig == SIGINT)
            return;
    }
}
