/* rt-cli.c — what every server on the runtime does around it: the command
 * line with the flags they all share (one spelling, one meaning, one
 * default), the main thread's signal loop, and the counters file.
 *
 * Signals are blocked in every thread and taken synchronously by the main
 * thread (sigwaitinfo), so no handler ever runs inside a connection's code.
 * SIGHUP, which would otherwise end the process (a closed terminal, a
 * service manager's "reload"), is taken and ignored: every setting is a
 * flag, so there is nothing to read again. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ktcp-net.h"
#include "ktcp-version.h"
#include "rt-internal.h"

static const char *const model_names[] = {"threads", "epoll", "mn"};
static const char *prog = "ktcp";

int rt_worker_id(void)
{
    struct rt_worker *w = rt_worker_self_full();
    return w ? w->id : -1;
}

long rt_cli_number(const char *flag, const char *arg, long min, long max)
{
    return ktcp_parse_long(prog, flag, arg, min, max);
}

/* The flags every server shares, in --help's order: one line each drives
 * getopt and --help. A help text may hold one %d, the flag's default read
 * from the rt_config at def; the program's own flags come after
 * --backlog. */
enum { OPT_BACKLOG = 1 << 20, OPT_VERSION, OPT_MAX_PER_IP, NO_DEFAULT = -1 };
#define HELP_INDENT "\n                             "
static const struct shared_flag {
    int key; /* the short letter, or OPT_* for a long-only flag */
    const char *name, *arg, *help;
    int def; /* offsetof(struct rt_config, the default), or NO_DEFAULT */
} shared_flags[] = {
    {'b', "bind", "ADDR",
     "numeric IPv4/IPv6 address to listen on" HELP_INDENT
     "(default: every address, IPv6 and IPv4)",
     NO_DEFAULT},
    {'p', "port", "PORT", "TCP port (default %d)",
     offsetof(struct rt_config, port)},
    {'t', "threads", "N",
     "worker threads of the epoll and mn models" HELP_INDENT
     "(default: one per core)",
     NO_DEFAULT},
    {'m', "model", "MODEL", "threads | epoll | mn (default: %s)", NO_DEFAULT},
    {'i', "idle-timeout-ms", "MS",
     "close a client idle this long; 0 = never (default %d)",
     offsetof(struct rt_config, idle_timeout_ms)},
    {'c', "max-conns", "N",
     "clients served at once; more are closed at accept;" HELP_INDENT
     "0 = no limit (default %d)",
     offsetof(struct rt_config, max_conns)},
    {OPT_MAX_PER_IP, "max-conns-per-ip", "N",
     "clients served at once from one address (IPv4 and" HELP_INDENT
     "IPv4-mapped IPv6 count as one); more are closed at" HELP_INDENT
     "accept; 0 = no limit (default %d)",
     offsetof(struct rt_config, max_conns_per_ip)},
    {OPT_BACKLOG, "backlog", "N", "listen backlog (default %d)",
     offsetof(struct rt_config, backlog)},
    {'s', "stats-file", "PATH",
     "where SIGUSR1 and exit write the counters (default: stderr)", NO_DEFAULT},
    {OPT_VERSION, "version", NULL, "print the version and exit", NO_DEFAULT},
    {'h', "help", NULL, "this text", NO_DEFAULT},
};
#define NSHARED (sizeof(shared_flags) / sizeof(shared_flags[0]))

/* "  -x, --long ARG" or "      --long ARG", padded to the help column. */
static void usage_flag(FILE *f, int key, const char *name, const char *arg)
{
    char head[64];
    bool letter = key < 256;
    snprintf(head, sizeof(head), "%c%c%c --%s%s%s", letter ? '-' : ' ',
             letter ? key : ' ', letter ? ',' : ' ', name, arg ? " " : "",
             arg ? arg : "");
    fprintf(f, "  %-25s  ", head);
}

static void usage(FILE *f, const struct rt_cli *cli, const struct rt_config *d)
{
    fprintf(f, "Usage: %s [OPTION]...\n%s\n\n", prog, cli->description);
    for (size_t i = 0; i < NSHARED; i++) {
        const struct shared_flag *s = &shared_flags[i];
        if (s->key == 'm' && cli->one_model)
            continue;
        usage_flag(f, s->key, s->name, s->arg);
        if (s->key == 't' && cli->one_model)
            fputs("worker threads (default: one per core)", f);
        else if (s->key == 'm')
            fprintf(f, s->help, model_names[d->model]);
        else if (s->def != NO_DEFAULT)
            fprintf(f, s->help, *(const int *) ((const char *) d + s->def));
        else
            fputs(s->help, f);
        fputc('\n', f);
        for (const struct rt_cli_opt *o = cli->opts;
             s->key == OPT_BACKLOG && o && o->name; o++) {
            usage_flag(f, o->key, o->name, o->arg);
            fprintf(f, "%s\n", o->help);
        }
    }
    if (cli->footer)
        fprintf(f, "\n%s\n", cli->footer);
    fprintf(f,
            "\nExit status: 0 after SIGTERM/SIGINT, 1 on a start-up error, 2 "
            "on a bad argument.\n");
}

static void parse_model(const struct rt_cli *cli,
                        struct rt_config *cfg,
                        const char *s)
{
    bool number = s[0] >= '0' && s[0] <= '9';
    if (cli->one_model) {
        fprintf(stderr,
                "%s: -m/--model %s: this server has one model (%s)%s%s\n", prog,
                s, cli->one_model, number && cli->m_hint ? "; " : "",
                number && cli->m_hint ? cli->m_hint : "");
        exit(2);
    }
    for (size_t i = 0; i < sizeof(model_names) / sizeof(model_names[0]); i++)
        if (!strcmp(s, model_names[i])) {
            cfg->model = (enum rt_model) i;
            return;
        }
    if (number && cli->m_hint)
        fprintf(stderr, "%s: -m %s: -m is --model now (as everywhere); %s\n",
                prog, s, cli->m_hint);
    else
        fprintf(stderr, "%s: --model %s: expected threads, epoll or mn\n", prog,
                s);
    exit(2);
}

void rt_cli_parse(struct rt_cli *cli,
                  struct rt_config *cfg,
                  int argc,
                  char **argv)
{
    enum { NOWN = 16 };
    struct option longopts[NSHARED + NOWN + 1];
    char shorts[2 * NSHARED + 1], *sp = shorts;
    size_t n = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int c;

    prog = cfg->name;
    if (cfg->workers <= 0)
        cfg->workers = cpus > 0 ? (int) (cpus < 256 ? cpus : 256) : 1;
    cli->threads = cfg->workers;
    const struct rt_config defaults = *cfg;
    for (size_t i = 0; i < NSHARED; i++) {
        const struct shared_flag *s = &shared_flags[i];
        int has_arg = s->arg ? required_argument : no_argument;
        longopts[n++] = (struct option){s->name, has_arg, NULL, s->key};
        if (s->key < 256) {
            *sp++ = (char) s->key;
            if (s->arg)
                *sp++ = ':';
        }
    }
    *sp = '\0';
    for (const struct rt_cli_opt *o = cli->opts;
         o && o->name && n < NSHARED + NOWN; o++)
        longopts[n++] = (struct option){
            o->name, o->arg ? required_argument : no_argument, NULL, o->key};
    memset(&longopts[n], 0, sizeof(longopts[n]));

    while ((c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            cfg->bind = optarg;
            break;
        case 'p':
            cfg->port = (int) rt_cli_number("--port", optarg, 1, 65535);
            break;
        case 't':
            cli->threads = (int) rt_cli_number("--threads", optarg, 1, 256);
            if (!cli->one_model)
                cfg->workers = cli->threads;
            break;
        case 'm':
            parse_model(cli, cfg, optarg);
            break;
        case 'i':
            cfg->idle_timeout_ms =
                (int) rt_cli_number("--idle-timeout-ms", optarg, 0, INT_MAX);
            break;
        case 'c':
            cfg->max_conns =
                (int) rt_cli_number("--max-conns", optarg, 0, INT_MAX);
            break;
        case OPT_MAX_PER_IP:
            cfg->max_conns_per_ip =
                (int) rt_cli_number("--max-conns-per-ip", optarg, 0, INT_MAX);
            break;
        case OPT_BACKLOG:
            cfg->backlog = (int) rt_cli_number("--backlog", optarg, 1, 65535);
            break;
        case 's':
            cli->stats_file = optarg;
            break;
        case OPT_VERSION:
            ktcp_print_version(prog);
            exit(0);
        case 'h':
            usage(stdout, cli, &defaults);
            exit(0);
        default:
            if (c >= 256 && cli->option) {
                cli->option(c, optarg);
                break;
            }
            usage(stderr, cli, &defaults);
            exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
        exit(2);
    }
}

void rt_cli_write_counters(const struct rt_cli *cli)
{
    uint64_t sum[RT_NCOUNTERS];
    char tmp[PATH_MAX];
    FILE *f = stderr;

    rt_counters_sum(sum);
    if (cli->stats_file) {
        snprintf(tmp, sizeof(tmp), "%s.tmp", cli->stats_file);
        f = fopen(tmp, "w");
        if (!f) {
            fprintf(stderr, "%s: --stats-file %s: %s\n", prog, tmp,
                    strerror(errno));
            return;
        }
    }
    fprintf(f, "accepted %llu\n", (unsigned long long) sum[RT_C_ACCEPTED]);
    fprintf(f, "active %ld\n", rt_live_conns());
    for (const struct rt_cli_counter *k = cli->counters; k && k->name; k++)
        fprintf(f, "%s %llu\n", k->name, (unsigned long long) sum[k->which]);
    if (cli->more)
        cli->more(f);
    if (cli->stats_file &&
        (fclose(f) != 0 || rename(tmp, cli->stats_file) != 0))
        fprintf(stderr, "%s: --stats-file %s: %s\n", prog, cli->stats_file,
                strerror(errno));
}

int rt_cli_serve(struct rt_cli *cli, struct rt_config *cfg)
{
    static const int taken[] = {SIGTERM, SIGINT, SIGUSR1, SIGHUP, SIGPIPE};
    sigset_t sigs;
    int err;

    sigemptyset(&sigs);
    for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++)
        sigaddset(&sigs, taken[i]);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* inherited by every thread */
    if (cli->start && cli->start() != 0)
        return 1;
    err = rt_start(cfg);
    if (err < 0) {
        if (err != -EINVAL)
            fprintf(stderr, "%s: cannot start: %s\n", prog, strerror(-err));
        return 1;
    }
    fprintf(stderr, "%s: listening on port %d, %s model, %d threads\n", prog,
            cfg->port,
            cli->one_model ? cli->one_model : model_names[cfg->model],
            cli->one_model ? cli->threads : cfg->workers);
    for (;;) {
        int sig = sigwaitinfo(&sigs, NULL);
        if (sig == SIGUSR1)
            rt_cli_write_counters(cli);
        else if (sig == SIGHUP)
            fprintf(stderr, "%s: SIGHUP: nothing to reload, connections kept\n",
                    prog);
        else if (sig == SIGTERM || sig == SIGINT)
            break;
    }
    rt_stop();
    rt_finish();
    if (cli->stopped)
        cli->stopped();
    rt_cli_write_counters(cli);
    return 0;
}
