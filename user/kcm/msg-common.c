/*
 * What ktcp-kcm-server and ktcp-msg-server share: the command line (the
 * runtime's shared flags with the same defaults for both, so a benchmark
 * changes only the program name, plus --max-msg), the requested work and
 * the counters file.
 */
#include <stdio.h>
#include <time.h>

#include "msg.h"

/* workerN_messages: each slot written by its worker alone */
#define MSG_MAX_WORKERS 256

uint32_t msg_max = MSG_DEFAULT_MAX;
int msg_idle_ms;
static _Atomic uint64_t worker_messages[MSG_MAX_WORKERS];
static int nworkers; /* workerN_messages lines in the counters file */

enum { OPT_MAX_MSG = 256 };

static bool option(void *data, int key, const char *arg, bool from_file)
{
    long v;

    (void) data, (void) key, (void) from_file; /* --max-msg alone */
    if (!rt_cli_long("--max-msg", arg, MSG_REQ_HDR_LEN, MSG_MAX_MAX, &v))
        return false;
    msg_max = (uint32_t) v;
    return true;
}

static void more_counters(FILE *f)
{
    uint64_t sum[RT_NCOUNTERS];
    long active = rt_live_conns();

    rt_counters_sum(sum);
    /* accepted is counted after a connection became live: never below 0 */
    fprintf(f, "closed %llu\n",
            (unsigned long long) (sum[RT_C_ACCEPTED] > (uint64_t) active
                                      ? sum[RT_C_ACCEPTED] - active
                                      : 0));
    for (int i = 0; i < nworkers; i++)
        fprintf(f, "worker%d_messages %llu\n", i,
                (unsigned long long) atomic_load_explicit(
                    &worker_messages[i], memory_order_relaxed));
}

void msg_parse(struct rt_cli *cli,
               struct rt_config *cfg,
               const char *what,
               int argc,
               char **argv)
{
    static const struct rt_cli_opt opts[] = {
        {"max-msg", OPT_MAX_MSG, "BYTES",
         "largest body accepted; a longer frame closes its\n"
         "connection (default 65536)"},
        {0},
    };
    static const struct rt_cli_counter counters[] = {
        {"refused", RT_C_REFUSED},    {"messages", MSG_C_MESSAGES},
        {"bytes_in", MSG_C_BYTES_IN}, {"bytes_out", RT_C_BYTES_OUT},
        {"too_big", MSG_C_TOO_BIG},   {"timeouts", RT_C_TIMEOUTS},
        {"errors", RT_C_ERRORS},      {0},
    };
    static char description[1024];

    _Static_assert(MSG_DEFAULT_MAX == 65536, "--help says 65536");
    snprintf(description, sizeof(description),
             "%s\n\nProtocol: each frame is a 4-byte big-endian body length "
             "and the body;\nthe body's first 4 bytes (big-endian) ask for "
             "that many microseconds of\nwork (at most %u); the frame is then "
             "sent back unchanged.",
             what, MSG_MAX_WORK_US);
    *cfg = (struct rt_config){
        RT_CLI_DEFAULTS,         .name = cfg->name,
        .handler = cfg->handler, .port = MSG_DEFAULT_PORT,
        .stop_cuts_sends = true,
    };
    cli->description = description;
    cli->m_hint = "the largest body is --max-msg BYTES";
    cli->opts = opts;
    cli->option = option;
    cli->counters = counters;
    cli->more = more_counters;
    rt_cli_parse(cli, cfg, argc, argv);
    msg_idle_ms = cfg->idle_timeout_ms;
    if (cli->one_model)
        nworkers = cli->threads;
    else if (cfg->model != RT_MODEL_THREADS)
        nworkers = cfg->workers;
}

void msg_count_messages(int worker, uint64_t n)
{
    rt_count(MSG_C_MESSAGES, n);
    if (worker >= 0 && worker < MSG_MAX_WORKERS) {
        /* one writer per slot: no locked instruction */
        _Atomic uint64_t *v = &worker_messages[worker];
        atomic_store_explicit(v,
                              atomic_load_explicit(v, memory_order_relaxed) + n,
                              memory_order_relaxed);
    }
}

uint64_t msg_idle_deadline(void)
{
    /* "never" is a day, then the wait is taken again */
    return rt_now_ms() +
           (msg_idle_ms > 0 ? (uint64_t) msg_idle_ms : 24ull * 3600 * 1000);
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
