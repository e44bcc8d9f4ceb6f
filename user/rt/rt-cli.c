/* rt-cli.c — what every server on the runtime does around it: the command
 * line with the flags they all share (one spelling, one meaning, one
 * default, one message for a bad value) and the program's own, parsed by
 * one parser that never exits (rt_cli_apply: ktcp-httpd runs it again on a
 * --config file at each SIGHUP); the main thread's signal loop, with
 * systemd's readiness protocol; and the counters file.
 *
 * Signals: every signal the loop answers has a handler that only notes it
 * and wakes the loop (a pipe), installed before any thread exists, so
 * whichever thread the kernel delivers it to — a library's own thread
 * (liburcu's call_rcu and rculfhash workers set their own masks) included
 * — nothing else happens there. The runtime's threads block them (they
 * inherit the mask of rt_cli_signals), and the main thread takes them
 * between two waits of its loop, where the program's hooks (reload,
 * reopen) run. docs/operating.md has the table. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ktcp-version.h"
#include "rt-internal.h"

static const char *const model_names[] = {"threads", "epoll", "mn"};
static const char *prog = "ktcp";
/* What messages start with: prog, or the file rt_cli_apply reads. */
static const char *msg_prefix = "ktcp";

int rt_worker_id(void)
{
    struct rt_worker *w = rt_worker_self_full();
    return w ? w->id : -1;
}

const char *rt_model_name(enum rt_model m)
{
    return (unsigned) m < 3 ? model_names[m] : "?";
}

bool rt_cli_bad(const char *flag, const char *arg, const char *why)
{
    fprintf(stderr, "%s: %s %s: %s\n", msg_prefix, flag, arg, why);
    return false;
}

bool rt_cli_long(const char *flag,
                 const char *arg,
                 long min,
                 long max,
                 long *out)
{
    char *end, why[80];
    long v;

    errno = 0;
    v = strtol(arg, &end, 10);
    if (errno || *arg == '\0' || *end != '\0' || v < min || v > max) {
        snprintf(why, sizeof(why), "expected a number in %ld..%ld", min, max);
        return rt_cli_bad(flag, arg, why);
    }
    *out = v;
    return true;
}

/* An int flag in [min, max] into *out. */
static bool int_flag(const char *flag,
                     const char *arg,
                     long min,
                     long max,
                     int *out)
{
    long v;

    if (!rt_cli_long(flag, arg, min, max, &v))
        return false;
    *out = (int) v;
    return true;
}

/* The flags every server shares, in --help's order: one line each drives
 * getopt and --help. A help text may hold one %d, the flag's default read
 * from the rt_config at def; the program's own flags come after
 * --backlog. */
enum {
    OPT_BACKLOG = 1 << 20,
    OPT_VERSION,
    OPT_MAX_PER_IP,
    OPT_V6_PREFIX,
    OPT_BUSY_POLL,
    OPT_SHUTDOWN,
    OPT_ACCEPT_STEER,
    NO_DEFAULT = -1
};
static const struct shared_flag {
    int key; /* the short letter, or OPT_* for a long-only flag */
    const char *name, *arg, *help;
    int def;      /* offsetof(struct rt_config, the default), or NO_DEFAULT */
    unsigned bit; /* RT_CLI_* for rt_cli.not_taken, or 0: always taken */
} shared_flags[] = {
    {'b', "bind", "ADDR",
     "numeric IPv4/IPv6 address to listen on (default:\n"
     "every address, IPv6 and IPv4; 127.0.0.1 keeps a\n"
     "server started by hand on this machine; a socket\n"
     "passed by systemd replaces --bind and --port)",
     NO_DEFAULT, 0},
    {'p', "port", "PORT", "TCP port (default %d)",
     offsetof(struct rt_config, port), 0},
    {'T', "threads", "N",
     "worker threads of the epoll and mn models\n"
     "(default: one per core)",
     NO_DEFAULT, 0},
    {'m', "model", "MODEL", "threads | epoll | mn (default: %s)", NO_DEFAULT,
     0},
    {'i', "idle-timeout-ms", "MS",
     "close a client that sends nothing this long, or\n"
     "stalls this long inside a request or a reply it\n"
     "does not read; 0 = never (default %d)",
     offsetof(struct rt_config, idle_timeout_ms), 0},
    {'c', "max-conns", "N",
     "clients served at once; more are refused at\n"
     "accept; 0 = no limit (default %d)",
     offsetof(struct rt_config, max_conns), 0},
    {OPT_MAX_PER_IP, "max-conns-per-ip", "N",
     "clients served at once from one address (IPv4 and\n"
     "IPv4-mapped IPv6 count as one); more are refused\n"
     "at accept; 0 = no limit (default: a quarter of\n"
     "--max-conns, at least 64; none if that is 0)",
     NO_DEFAULT, 0},
    {OPT_V6_PREFIX, "per-ip-v6-prefix", "BITS",
     "IPv6 clients are counted per prefix of this\n"
     "many bits, 1..128 (default %d: a /64)",
     offsetof(struct rt_config, per_ip_v6_prefix), 0},
    {OPT_BUSY_POLL, "busy-poll-us", "US",
     "epoll and mn: how long a worker out of events\n"
     "may poll for more, yielding the CPU, before it\n"
     "sleeps; adapted to the gaps it sees, at most\n"
     "10000; 0 = never (default %d)",
     offsetof(struct rt_config, busy_poll_us), RT_CLI_BUSY_POLL},
    {OPT_ACCEPT_STEER, "accept-steer", "cpu|hash",
     "epoll and mn with one worker per CPU: a new\n"
     "connection goes to the worker of the CPU that took\n"
     "its SYN (cpu), or where the kernel's hash sends it\n"
     "(hash); cpu turns to hash by itself when one\n"
     "worker takes nearly every connection (default cpu)",
     NO_DEFAULT, RT_CLI_ACCEPT_STEER},
    {OPT_SHUTDOWN, "shutdown-timeout", "SECONDS",
     "SIGTERM/SIGINT: how long in-flight responses may\n"
     "finish before they are cut and the server exits;\n"
     "a second SIGTERM cuts at once; 0 = no deadline\n"
     "(default %d)",
     offsetof(struct rt_config, shutdown_timeout_s), 0},
    {OPT_BACKLOG, "backlog", "N", "listen backlog (default %d)",
     offsetof(struct rt_config, backlog), 0},
    {'s', "stats-file", "PATH",
     "where SIGUSR1 and exit write the counters\n(default: stderr)", NO_DEFAULT,
     RT_CLI_STATS_FILE},
    {OPT_VERSION, "version", NULL, "print the version and exit", NO_DEFAULT, 0},
    {'h', "help", NULL, "this text", NO_DEFAULT, 0},
};
#define NSHARED (sizeof(shared_flags) / sizeof(shared_flags[0]))
#define HELP_COLUMN 29

/* "  -x, --long ARG" or "      --long ARG", padded to the help column (a
 * longer one on a line of its own), then the help, each of its lines
 * beginning at the help column. */
static void usage_flag(FILE *f, int key, const char *name, const char *arg)
{
    char head[64];
    bool letter = key < 256;
    snprintf(head, sizeof(head), "%c%c%c --%s%s%s", letter ? '-' : ' ',
             letter ? key : ' ', letter ? ',' : ' ', name, arg ? " " : "",
             arg ? arg : "");
    if (strlen(head) > HELP_COLUMN - 4)
        fprintf(f, "  %s\n%*s", head, HELP_COLUMN, "");
    else
        fprintf(f, "  %-*s  ", HELP_COLUMN - 4, head);
}

static void usage_help(FILE *f, const char *help)
{
    for (; *help; help++) {
        fputc(*help, f);
        if (*help == '\n')
            fprintf(f, "%*s", HELP_COLUMN, "");
    }
    fputc('\n', f);
}

static void usage(FILE *f, const struct rt_cli *cli, const struct rt_config *d)
{
    char line[512];

    fprintf(f, "Usage: %s [OPTION]...\n%s\n\n", prog, cli->description);
    for (size_t i = 0; i < NSHARED; i++) {
        const struct shared_flag *s = &shared_flags[i];
        if ((s->key == 'm' && cli->one_model) || (s->bit & cli->not_taken))
            continue;
        const char *help = s->key == 'T' && cli->one_model
                               ? "worker threads (default: one per core)"
                               : s->help;
        usage_flag(f, s->key, s->name, s->arg);
        if (s->key == 'm')
            snprintf(line, sizeof(line), help, model_names[d->model]);
        else if (s->def != NO_DEFAULT)
            snprintf(line, sizeof(line), help,
                     *(const int *) ((const char *) d + s->def));
        else
            snprintf(line, sizeof(line), "%s", help);
        usage_help(f, line);
        for (const struct rt_cli_opt *o = cli->opts;
             s->key == OPT_BACKLOG && o && o->name; o++) {
            if (!o->help)
                continue;
            usage_flag(f, o->key, o->name, o->arg);
            usage_help(f, o->help);
        }
    }
    if (cli->footer)
        fprintf(f, "\n%s\n", cli->footer);
    fprintf(f,
            "\nExit status: 0 after SIGTERM/SIGINT/SIGQUIT, 1 on a start-up "
            "error, 2 on a\nbad argument.\n");
}

static bool parse_model(const struct rt_cli *cli,
                        struct rt_config *cfg,
                        const char *s)
{
    bool number = s[0] >= '0' && s[0] <= '9';
    if (cli->one_model) {
        fprintf(
            stderr, "%s: -m/--model %s: this server has one model (%s)%s%s\n",
            msg_prefix, s, cli->one_model, number && cli->m_hint ? "; " : "",
            number && cli->m_hint ? cli->m_hint : "");
        return false;
    }
    for (size_t i = 0; i < sizeof(model_names) / sizeof(model_names[0]); i++)
        if (!strcmp(s, model_names[i])) {
            cfg->model = (enum rt_model) i;
            return true;
        }
    if (number && cli->m_hint)
        fprintf(stderr, "%s: -m %s: -m is --model now (as everywhere); %s\n",
                msg_prefix, s, cli->m_hint);
    else
        rt_cli_bad("--model", s, "expected threads, epoll or mn");
    return false;
}

/* One shared flag (c, getopt's answer) into cfg and cli. */
static bool shared_flag(struct rt_cli *cli,
                        struct rt_config *cfg,
                        int c,
                        const char *arg)
{
    switch (c) {
    case 'b':
        cfg->bind = arg;
        return true;
    case 'p':
        return int_flag("--port", arg, 1, 65535, &cfg->port);
    case 'T':
        if (!int_flag("--threads", arg, 1, 256, &cli->threads))
            return false;
        if (!cli->one_model)
            cfg->workers = cli->threads;
        return true;
    case 'm':
        return parse_model(cli, cfg, arg);
    case 'i':
        return int_flag("--idle-timeout-ms", arg, 0, INT_MAX,
                        &cfg->idle_timeout_ms);
    case 'c':
        return int_flag("--max-conns", arg, 0, INT_MAX, &cfg->max_conns);
    case OPT_MAX_PER_IP:
        return int_flag("--max-conns-per-ip", arg, 0, INT_MAX,
                        &cfg->max_conns_per_ip);
    case OPT_V6_PREFIX:
        return int_flag("--per-ip-v6-prefix", arg, 1, 128,
                        &cfg->per_ip_v6_prefix);
    case OPT_BACKLOG:
        return int_flag("--backlog", arg, 1, 65535, &cfg->backlog);
    case OPT_SHUTDOWN:
        return int_flag("--shutdown-timeout", arg, 0, 86400,
                        &cfg->shutdown_timeout_s);
    case OPT_ACCEPT_STEER:
        if (!strcmp(arg, "cpu") || !strcmp(arg, "hash")) {
            cfg->accept_steer = arg[0] == 'c';
            return true;
        }
        rt_cli_bad("--accept-steer", arg, "expected cpu or hash");
        return false;
    case OPT_BUSY_POLL:
        return int_flag("--busy-poll-us", arg, 0, RT_BUSY_POLL_US_MAX,
                        &cfg->busy_poll_us);
    case 's':
        cli->stats_file = arg;
        return true;
    }
    return false;
}

/* -t was --threads once; it is ktcp-httpd's --test-config now (as
 * nginx -t). */
static const char threads_hint[] =
    "worker threads are -T N (--threads N); -t is not --threads";

/* Whether argv has "-t" followed by a number: the old --threads. */
static bool old_threads_flag(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-t") && argv[i + 1][0] >= '0' &&
            argv[i + 1][0] <= '9')
            return true;
    return false;
}

enum rt_cli_result rt_cli_apply(struct rt_cli *cli,
                                struct rt_config *cfg,
                                int argc,
                                char **argv,
                                unsigned flags)
{
    enum { NOWN = 48 };
    struct option longopts[NSHARED + NOWN + 1];
    char shorts[2 * (NSHARED + NOWN) + 1], *sp = shorts;
    size_t n = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    bool from_file = flags & RT_CLI_FROM_FILE;
    enum rt_cli_result r = RT_CLI_OK;
    int c;

    prog = cfg->name;
    if (cfg->workers <= 0)
        cfg->workers = cpus > 0 ? (int) (cpus < 256 ? cpus : 256) : 1;
    cli->threads = cfg->workers;
    const struct rt_config defaults = *cfg;
    for (size_t i = 0; i < NSHARED; i++) {
        const struct shared_flag *s = &shared_flags[i];
        longopts[n++] = (struct option){
            s->name, s->arg ? required_argument : no_argument, NULL, s->key};
        if (s->key < 256)
            sp += sprintf(sp, "%c%s", s->key, s->arg ? ":" : "");
    }
    for (const struct rt_cli_opt *o = cli->opts; o && o->name; o++) {
        if (n == NSHARED + NOWN) {
            fprintf(stderr, "%s: more than %d flags of its own\n", prog, NOWN);
            return RT_CLI_ERROR;
        }
        longopts[n++] = (struct option){
            o->name, o->arg ? required_argument : no_argument, NULL, o->key};
        if (o->key < 256 && !strchr(shorts, o->key))
            sp += sprintf(sp, "%c%s", o->key, o->arg ? ":" : "");
    }
    memset(&longopts[n], 0, sizeof(longopts[n]));

    msg_prefix = from_file ? argv[0] : prog;
    optind = 0; /* glibc: start afresh, also for a second list */
    while (r == RT_CLI_OK &&
           (c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        const struct shared_flag *s = NULL;
        for (size_t i = 0; i < NSHARED && !s; i++)
            if (shared_flags[i].key == c)
                s = &shared_flags[i];
        if (s && (s->bit & cli->not_taken)) {
            char letter[4] = "";
            if (c < 256)
                snprintf(letter, sizeof(letter), "-%c/", c);
            fprintf(stderr, "%s: %s--%s: not taken by %s%s%s\n", msg_prefix,
                    letter, s->name, prog, cli->not_taken_why ? ": " : "",
                    cli->not_taken_why ? cli->not_taken_why : "");
            r = RT_CLI_ERROR;
        } else if (from_file && (c == 'h' || c == OPT_VERSION)) {
            fprintf(stderr, "%s: --%s is not a setting\n", msg_prefix, s->name);
            r = RT_CLI_ERROR;
        } else if (c == OPT_VERSION) {
            ktcp_print_version(prog);
            r = RT_CLI_EXIT;
        } else if (c == 'h') {
            usage(stdout, cli, &defaults);
            r = RT_CLI_EXIT;
        } else if (s) {
            r = shared_flag(cli, cfg, c, optarg) ? RT_CLI_OK : RT_CLI_ERROR;
        } else if (c != '?' && c != ':' && cli->option) {
            r = cli->option(cli->data, c, optarg, from_file) ? RT_CLI_OK
                                                             : RT_CLI_ERROR;
        } else {
            if (c == '?' && optopt == 't')
                fprintf(stderr, "%s: %s\n", msg_prefix, threads_hint);
            else if (!from_file)
                usage(stderr, cli, &defaults);
            r = RT_CLI_ERROR;
        }
    }
    if (r == RT_CLI_OK && optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'%s%s\n", msg_prefix,
                argv[optind], old_threads_flag(argc, argv) ? "; " : "",
                old_threads_flag(argc, argv) ? threads_hint : "");
        r = RT_CLI_ERROR;
    }
    msg_prefix = prog;
    return r;
}

void rt_cli_parse(struct rt_cli *cli,
                  struct rt_config *cfg,
                  int argc,
                  char **argv)
{
    rt_cli_signals();
    switch (rt_cli_apply(cli, cfg, argc, argv, 0)) {
    case RT_CLI_OK:
        return;
    case RT_CLI_EXIT:
        exit(0);
    default:
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

/* ---- signals ---- */

/* What the loop answers, in the order it answers signals that came
 * together: the reload and the reopen before a stop. */
static const int caught[] = {SIGHUP,  SIGUSR1, SIGUSR2,
                             SIGQUIT, SIGTERM, SIGINT};
#define NCAUGHT (sizeof(caught) / sizeof(caught[0]))
static volatile sig_atomic_t sig_pending[NSIG];
static int sig_pipe[2] = {-1, -1};

/* Any thread: note the signal, wake the loop; nothing else. */
static void on_signal(int sig)
{
    int saved = errno;
    sig_pending[sig] = 1;
    if (write(sig_pipe[1], "", 1) < 0) {
        /* the pipe is full: the loop has a wake-up pending anyway */
    }
    errno = saved;
}

void rt_cli_signals(void)
{
    static bool done;
    sigset_t set;

    if (done)
        return;
    done = true;
    if (pipe2(sig_pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
        fprintf(stderr, "%s: signal pipe: %s\n", prog, strerror(errno));
        exit(1);
    }
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigfillset(&sa.sa_mask);
    sigemptyset(&set);
    for (size_t i = 0; i < NCAUGHT; i++) {
        sigaction(caught[i], &sa, NULL);
        sigaddset(&set, caught[i]);
    }
    signal(SIGPIPE, SIG_IGN); /* a write to a closed peer returns EPIPE */
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* inherited by every thread */
}

/* systemd's socket, connected before the start drops privileges (a
 * --user may not reach the socket's directory); -1: none. */
static int notify_fd = -1;

static void notify_open(void)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = path ? strlen(path) : 0;

    if (notify_fd >= 0 || !path || (path[0] != '/' && path[0] != '@') ||
        len >= sizeof(sa.sun_path))
        return;
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@')
        sa.sun_path[0] = '\0'; /* an abstract socket */
    notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (notify_fd >= 0 &&
        connect(notify_fd, (struct sockaddr *) &sa,
                (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len)) <
            0) {
        fprintf(stderr, "%s: NOTIFY_SOCKET %s: %s\n", prog, path,
                strerror(errno));
        close(notify_fd);
        notify_fd = -1;
    }
}

void rt_notify(const char *state)
{
    notify_open();
    if (notify_fd >= 0 &&
        send(notify_fd, state, strlen(state), MSG_NOSIGNAL) < 0)
        fprintf(stderr, "%s: NOTIFY_SOCKET: %s\n", prog, strerror(errno));
}

static const char *sig_name(int sig)
{
    switch (sig) {
    case SIGTERM:
        return "SIGTERM";
    case SIGINT:
        return "SIGINT";
    case SIGQUIT:
        return "SIGQUIT";
    case SIGHUP:
        return "SIGHUP";
    case SIGUSR1:
        return "SIGUSR1";
    default:
        return "SIGUSR2";
    }
}

/* After a cut, how long the loop waits for the connections to end before
 * it leaves them to the exit. */
#define CUT_GRACE_MS 500

/* The stop: its deadline (0: none), when the responses were cut (0: not
 * yet). */
struct stop_state {
    bool stopping;
    uint64_t deadline, cut_at;
};

static void stop_cut(struct stop_state *st, const char *why)
{
    if (st->cut_at)
        return;
    fprintf(stderr, "%s: %s: cutting %ld connection%s still in flight\n", prog,
            why, rt_live_conns(), rt_live_conns() == 1 ? "" : "s");
    st->cut_at = rt_now_ms();
    rt_stop_now();
}

static void stop_begin(struct stop_state *st, int sig, int timeout_s)
{
    if (st->stopping) {
        if (sig != SIGQUIT) /* a second TERM/INT: at once */
            stop_cut(st, sig == SIGTERM ? "second SIGTERM" : "second SIGINT");
        return;
    }
    st->stopping = true;
    rt_notify("STOPPING=1");
    rt_stop();
    if (sig != SIGQUIT && timeout_s > 0)
        st->deadline = rt_now_ms() + (uint64_t) timeout_s * 1000u;
    if (st->deadline)
        fprintf(stderr,
                "%s: %s: stopping: no new connections; %ld in flight "
                "may finish within %d s\n",
                prog, sig_name(sig), rt_live_conns(), timeout_s);
    else
        fprintf(stderr,
                "%s: %s: stopping: no new connections; %ld in flight "
                "may finish, without a deadline\n",
                prog, sig_name(sig), rt_live_conns());
}

static void reload(struct rt_cli *cli)
{
    char msg[64];
    struct timespec ts;

    if (!cli->reload) {
        fprintf(stderr, "%s: SIGHUP: nothing to reload, connections kept\n",
                prog);
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long) ts.tv_sec * 1000000ULL +
                 (unsigned long long) ts.tv_nsec / 1000);
    rt_notify(msg);
    cli->reload();
    rt_notify("READY=1");
}

/* The main thread from the start to the stop: true when every connection
 * ended, false when some were left to the exit after a cut. */
static bool signal_loop(struct rt_cli *cli, const struct rt_config *cfg)
{
    struct stop_state st = {0};
    sigset_t waitmask;
    char drain[64];

    pthread_sigmask(SIG_SETMASK, NULL, &waitmask);
    for (size_t i = 0; i < NCAUGHT; i++)
        sigdelset(&waitmask, caught[i]);
    for (;;) {
        struct pollfd p = {.fd = sig_pipe[0], .events = POLLIN};
        struct timespec tick = {0, 20 * 1000000L};
        if (st.stopping && rt_live_conns() == 0)
            return true;
        /* the signals are taken here only: a handler run on this thread
         * interrupts the wait, one run on another writes the pipe */
        ppoll(&p, 1, st.stopping ? &tick : NULL, &waitmask);
        while (read(sig_pipe[0], drain, sizeof(drain)) > 0) {
        }
        for (size_t i = 0; i < NCAUGHT; i++) {
            int sig = caught[i];
            if (!sig_pending[sig])
                continue;
            sig_pending[sig] = 0;
            if (sig == SIGUSR1) {
                if (cli->reopen)
                    cli->reopen();
                else
                    rt_cli_write_counters(cli);
            } else if (sig == SIGHUP) {
                if (st.stopping)
                    fprintf(stderr, "%s: SIGHUP: stopping, not reloaded\n",
                            prog);
                else
                    reload(cli);
            } else if (sig == SIGUSR2) {
                fprintf(stderr,
                        "%s: SIGUSR2: ignored (no binary upgrade: restart "
                        "the service instead)\n",
                        prog);
            } else {
                stop_begin(&st, sig, cfg->shutdown_timeout_s);
            }
        }
        uint64_t now = rt_now_ms();
        if (st.deadline && now >= st.deadline)
            stop_cut(&st, "--shutdown-timeout passed");
        if (st.cut_at && now >= st.cut_at + CUT_GRACE_MS) {
            fprintf(stderr, "%s: %ld connection%s left to the exit\n", prog,
                    rt_live_conns(), rt_live_conns() == 1 ? "" : "s");
            return false;
        }
    }
}

int rt_cli_serve(struct rt_cli *cli, struct rt_config *cfg)
{
    int err;

    rt_cli_signals();
    notify_open();
    if (cli->start && cli->start() != 0)
        return 1;
    err = rt_start(cfg);
    if (err < 0) {
        /* the listener's and the listening hook's errors are named already */
        if (err != -EINVAL && err != -EADDRINUSE && err != -EACCES &&
            err != -EPERM)
            fprintf(stderr, "%s: cannot start: %s\n", prog, strerror(-err));
        return 1;
    }
    if (cli->serving)
        cli->serving();
    else
        fprintf(stderr, "%s: listening on port %d, %s model, %d threads\n",
                prog, cfg->port,
                cli->one_model ? cli->one_model : rt_model_name(cfg->model),
                cli->one_model ? cli->threads : cfg->workers);
    rt_notify("READY=1");
    if (!signal_loop(cli, cfg)) {
        /* connections that did not end after the cut: the buffered lines
         * of the workers written, the counters, and the exit closes them */
        rt_flush_workers(200);
        if (!(cli->not_taken & RT_CLI_STATS_FILE))
            rt_cli_write_counters(cli);
        fflush(NULL);
        _exit(0);
    }
    rt_finish();
    if (cli->stopped)
        cli->stopped();
    if (!(cli->not_taken & RT_CLI_STATS_FILE)) /* else served elsewhere */
        rt_cli_write_counters(cli);
    return 0;
}
