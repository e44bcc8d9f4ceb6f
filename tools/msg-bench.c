/*
 * msg-bench: load for the message servers (ktcp-kcm-server and its twin
 * ktcp-msg-server), in the shape of the KCM cover letter's experiment.
 *
 * --connections connections are spread over --threads client threads, each
 * an epoll loop. Every connection keeps --depth requests in flight: it sends
 * them back to back, and after each read refills every answered slot in one
 * send, so deep pipelining puts many small frames in one segment. A request
 * is a frame of --size body bytes: work_us (asking the server for --work-us
 * of work), a tag naming the slot, then a fixed pattern. Replies may come in
 * any order (the KCM server spreads one connection's requests over its
 * workers); the tag finds the slot and so the send time. Every reply is
 * checked whole: length, work field, tag of an outstanding request, pattern.
 *
 * Only replies that arrive after --warmup and before the end count; QPS is
 * those replies over the measured seconds, latency is send to reply.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "hist.h"
#include "ktcp-version.h"

#define FRAME_HDR 4
#define BODY_MIN 8 /* work_us and the tag */
#define RECV_BUF (256 * 1024)
#define STALL_NS (10ull * 1000000000ull)

static struct {
    const char *host, *port;
    uint64_t connections, depth, size, work_us, threads;
    double duration_s, warmup_s;
    bool json;
} opt = {
    .host = "127.0.0.1",
    .port = "12346",
    .connections = 4,
    .depth = 1,
    .size = 64,
    .work_us = 0,
    .threads = 1,
    .duration_s = 5,
    .warmup_s = 1,
};

enum err_kind { E_CONNECT, E_CLOSED, E_IO, E_BAD_REPLY, E_STALL, E_KINDS };
static const char *const err_names[E_KINDS] = {"connect", "closed", "io",
                                               "bad_reply", "stall"};

struct conn {
    int fd;
    uint64_t *sent_at;    /* per slot; 0: free */
    uint32_t *free_slots; /* stack of free slot tags */
    uint32_t n_free;
    uint8_t *in;
    size_t in_len;
    uint8_t *out;
    size_t out_off, out_len, out_cap;
    bool dead;
};

struct client {
    pthread_t thread;
    struct conn *conns;
    size_t n_conns;
    struct hist hist;
    long double sum_sq;
    uint64_t replies; /* in the measured window */
    uint64_t errors[E_KINDS];
};

static struct sockaddr_storage server;
static socklen_t server_len;
static uint8_t *request_template; /* one whole request frame, tag 0 */
static size_t frame_len;
static uint64_t t_measure, t_end;

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v;
}

static bool queue_request(struct conn *c, uint64_t now)
{
    uint32_t tag;
    uint8_t *p;

    if (c->n_free == 0)
        return false;
    tag = c->free_slots[--c->n_free];
    if (c->out_off) { /* unsent bytes belong to slots in flight: they fit */
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
    }
    p = c->out + c->out_len;
    memcpy(p, request_template, frame_len);
    put_be32(p + 8, tag);
    c->out_len += frame_len;
    c->sent_at[tag] = now;
    return true;
}

static void flush(struct client *cl, struct conn *c, int ep)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};

    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                         MSG_DONTWAIT | MSG_NOSIGNAL);

        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            cl->errors[E_IO]++;
            c->dead = true;
            return;
        }
        c->out_off += n;
    }
    if (c->out_off < c->out_len)
        ev.events |= EPOLLOUT;
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 |
           (uint32_t) p[2] << 8 | p[3];
}

/* Check and account every whole reply in the buffer. */
static void take_replies(struct client *cl, struct conn *c, uint64_t now)
{
    size_t off = 0;

    while (c->in_len - off >= frame_len) {
        const uint8_t *f = c->in + off;
        uint32_t tag = be32(f + 8);

        if (be32(f) != opt.size || be32(f + 4) != opt.work_us ||
            tag >= opt.depth || c->sent_at[tag] == 0 ||
            memcmp(f + 12, request_template + 12, frame_len - 12) != 0) {
            cl->errors[E_BAD_REPLY]++;
            c->dead = true;
            return;
        }
        if (now >= t_measure && now <= t_end) {
            uint64_t lat = now - c->sent_at[tag];

            hist_record(&cl->hist, lat);
            cl->sum_sq += (long double) lat * lat;
            cl->replies++;
        }
        c->sent_at[tag] = 0;
        c->free_slots[c->n_free++] = tag;
        off += frame_len;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
}

static void *client_run(void *arg)
{
    struct client *cl = arg;
    struct epoll_event events[64];
    int ep = epoll_create1(EPOLL_CLOEXEC);
    uint64_t now = now_ns(), last_progress = now;
    size_t live = 0;

    for (size_t i = 0; i < cl->n_conns; i++) {
        struct conn *c = &cl->conns[i];
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};

        if (c->dead)
            continue;
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
        while (queue_request(c, now))
            ;
        flush(cl, c, ep);
        live++;
    }
    while (live > 0 && now < t_end) {
        int n = epoll_wait(ep, events, 64, 100);

        now = now_ns();
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            bool got = false;

            if (c->dead)
                continue;
            if (events[i].events & EPOLLOUT)
                flush(cl, c, ep);
            if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
                for (int k = 0; k < 4 && !c->dead; k++) {
                    ssize_t r = recv(c->fd, c->in + c->in_len,
                                     RECV_BUF - c->in_len, MSG_DONTWAIT);

                    if (r < 0) {
                        if (errno != EAGAIN && errno != EINTR) {
                            cl->errors[errno == ECONNRESET ? E_CLOSED : E_IO]++;
                            c->dead = true;
                        }
                        break;
                    }
                    if (r == 0) {
                        cl->errors[E_CLOSED]++;
                        c->dead = true;
                        break;
                    }
                    c->in_len += r;
                    got = true;
                    take_replies(cl, c, now);
                }
            }
            if (got && !c->dead) {
                last_progress = now;
                while (now < t_end && queue_request(c, now))
                    ;
                flush(cl, c, ep);
            }
            if (c->dead) {
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                live--;
            }
        }
        if (now - last_progress > STALL_NS) {
            cl->errors[E_STALL]++;
            break;
        }
    }
    close(ep);
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: msg-bench [OPTION]...\n"
            "Load a length-prefixed message server (ktcp-kcm-server, "
            "ktcp-msg-server):\nframes of a 4-byte big-endian length and a "
            "body starting with work_us.\n\n"
            "  -H, --host HOST        server address (default 127.0.0.1)\n"
            "  -p, --port PORT        server port (default 12346)\n"
            "  -c, --connections N    connections (default 4)\n"
            "  -d, --depth N          requests in flight per connection "
            "(default 1)\n"
            "  -s, --size BYTES       body bytes per request, at least %d "
            "(default 64)\n"
            "  -w, --work-us US       work the server does per request "
            "(default 0)\n"
            "  -t, --threads N        client threads (default 1)\n"
            "  -D, --duration SECS    measured time (default 5)\n"
            "  -W, --warmup SECS      unmeasured time before (default 1)\n"
            "      --json             print one JSON object\n"
            "      --version          print the version and exit\n"
            "  -h, --help             this text\n\n"
            "Exit status: 0 all replies whole and right, 1 a connection "
            "failed or a reply\nwas wrong, 2 bad command line, 3 could not "
            "set up.\n",
            BODY_MIN);
}

static bool setup_conn(struct conn *c)
{
    int one = 1;

    c->sent_at = calloc(opt.depth, sizeof(*c->sent_at));
    c->free_slots = calloc(opt.depth, sizeof(*c->free_slots));
    c->in = malloc(RECV_BUF);
    c->out_cap = opt.depth * frame_len;
    c->out = malloc(c->out_cap);
    if (!c->sent_at || !c->free_slots || !c->in || !c->out)
        return false;
    for (uint32_t i = 0; i < opt.depth; i++)
        c->free_slots[i] = (uint32_t) (opt.depth - 1 - i);
    c->n_free = (uint32_t) opt.depth;
    c->fd = socket(server.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0 ||
        connect(c->fd, (struct sockaddr *) &server, server_len) < 0) {
        fprintf(stderr, "msg-bench: connect to %s port %s: %s\n", opt.host,
                opt.port, strerror(errno));
        c->dead = true;
        return true;
    }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return true;
}

int main(int argc, char **argv)
{
    enum { O_JSON = 256 };
    static const struct option longopts[] = {
        {"host", required_argument, NULL, 'H'},
        {"port", required_argument, NULL, 'p'},
        {"connections", required_argument, NULL, 'c'},
        {"depth", required_argument, NULL, 'd'},
        {"size", required_argument, NULL, 's'},
        {"work-us", required_argument, NULL, 'w'},
        {"threads", required_argument, NULL, 't'},
        {"duration", required_argument, NULL, 'D'},
        {"warmup", required_argument, NULL, 'W'},
        {"json", no_argument, NULL, O_JSON},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    struct client *clients;
    struct conn *conns;
    struct hist total;
    long double sum_sq = 0;
    uint64_t replies = 0, errors[E_KINDS] = {0}, err_sum = 0;
    double mean, stddev, secs;
    int c;

    while ((c = getopt_long(argc, argv, "H:p:c:d:s:w:t:D:W:h", longopts,
                            NULL)) != -1) {
        bool ok = true;

        switch (c) {
        case 'H':
            opt.host = optarg;
            break;
        case 'p':
            opt.port = optarg;
            break;
        case 'c':
            ok = parse_u64_option("--connections", optarg, 1, 100000,
                                  &opt.connections);
            break;
        case 'd':
            ok = parse_u64_option("--depth", optarg, 1, 65536, &opt.depth);
            break;
        case 's':
            ok = parse_u64_option("--size", optarg, BODY_MIN, 16 << 20,
                                  &opt.size);
            break;
        case 'w':
            ok =
                parse_u64_option("--work-us", optarg, 0, 1000000, &opt.work_us);
            break;
        case 't':
            ok = parse_u64_option("--threads", optarg, 1, 256, &opt.threads);
            break;
        case 'D':
            ok = parse_double_option("--duration", optarg, 0.1, 3600,
                                     &opt.duration_s);
            break;
        case 'W':
            ok =
                parse_double_option("--warmup", optarg, 0, 3600, &opt.warmup_s);
            break;
        case O_JSON:
            opt.json = true;
            break;
        case 'V':
            ktcp_print_version("msg-bench");
            return EXIT_OK;
        case 'h':
            usage(stdout);
            return EXIT_OK;
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
        if (!ok)
            return EXIT_USAGE;
    }
    if (optind < argc) {
        fprintf(stderr, "msg-bench: unexpected argument '%s'\n", argv[optind]);
        return EXIT_USAGE;
    }
    if (opt.threads > opt.connections)
        opt.threads = opt.connections;
    if (!resolve_tcp_address(opt.host, opt.port, &server, &server_len))
        return EXIT_SETUP;
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit(opt.connections + 64);

    frame_len = FRAME_HDR + opt.size;
    request_template = malloc(frame_len);
    clients = calloc(opt.threads, sizeof(*clients));
    conns = calloc(opt.connections, sizeof(*conns));
    if (!request_template || !clients || !conns) {
        fprintf(stderr, "msg-bench: out of memory\n");
        return EXIT_SETUP;
    }
    memset(request_template, 0, frame_len);
    put_be32(request_template, (uint32_t) opt.size);
    put_be32(request_template + 4, (uint32_t) opt.work_us);
    for (size_t i = 12; i < frame_len; i++)
        request_template[i] = (uint8_t) (i * 31 + 7);

    for (uint64_t i = 0; i < opt.connections; i++) {
        if (!setup_conn(&conns[i])) {
            fprintf(stderr, "msg-bench: out of memory\n");
            return EXIT_SETUP;
        }
        if (conns[i].dead)
            errors[E_CONNECT]++;
    }
    for (uint64_t t = 0; t < opt.threads; t++) {
        uint64_t first = opt.connections * t / opt.threads;
        uint64_t last = opt.connections * (t + 1) / opt.threads;

        clients[t].conns = conns + first;
        clients[t].n_conns = last - first;
        hist_init(&clients[t].hist);
    }
    t_measure = now_ns() + (uint64_t) (opt.warmup_s * 1e9);
    t_end = t_measure + (uint64_t) (opt.duration_s * 1e9);
    for (uint64_t t = 0; t < opt.threads; t++) {
        if (pthread_create(&clients[t].thread, NULL, client_run, &clients[t]) !=
            0) {
            fprintf(stderr, "msg-bench: cannot start client thread %llu\n",
                    (unsigned long long) t);
            return EXIT_SETUP;
        }
    }
    hist_init(&total);
    for (uint64_t t = 0; t < opt.threads; t++) {
        pthread_join(clients[t].thread, NULL);
        hist_merge(&total, &clients[t].hist);
        sum_sq += clients[t].sum_sq;
        replies += clients[t].replies;
        for (int k = 0; k < E_KINDS; k++)
            errors[k] += clients[t].errors[k];
    }
    for (uint64_t i = 0; i < opt.connections; i++) {
        if (conns[i].fd >= 0)
            close(conns[i].fd);
    }
    for (int k = 0; k < E_KINDS; k++)
        err_sum += errors[k];

    secs = opt.duration_s;
    mean = hist_mean(&total);
    stddev = total.count > 1
                 ? sqrt((double) (sum_sq / total.count) - mean * mean)
                 : 0;
    if (opt.json) {
        printf("{\"host\": ");
        json_write_string(stdout, opt.host);
        printf(", \"port\": ");
        json_write_string(stdout, opt.port);
        printf(
            ", \"connections\": %llu, \"depth\": %llu, \"size\": %llu, "
            "\"work_us\": %llu, \"threads\": %llu, \"duration_s\": %g, "
            "\"warmup_s\": %g, \"replies\": %llu, \"qps\": %.1f, "
            "\"latency_us\": {\"mean\": %.1f, \"stddev\": %.1f, "
            "\"p50\": %.1f, \"p99\": %.1f, \"max\": %.1f}, \"errors\": {",
            (unsigned long long) opt.connections,
            (unsigned long long) opt.depth, (unsigned long long) opt.size,
            (unsigned long long) opt.work_us, (unsigned long long) opt.threads,
            opt.duration_s, opt.warmup_s, (unsigned long long) replies,
            replies / secs, mean / 1e3, stddev / 1e3,
            hist_percentile(&total, 50) / 1e3,
            hist_percentile(&total, 99) / 1e3, total.max / 1e3);
        for (int k = 0; k < E_KINDS; k++)
            printf("%s\"%s\": %llu", k ? ", " : "", err_names[k],
                   (unsigned long long) errors[k]);
        printf("}}\n");
    } else {
        printf(
            "msg-bench: %s port %s: %llu connections x depth %llu, "
            "%llu-byte bodies, %llu us work, %g s (+%g s warm-up)\n",
            opt.host, opt.port, (unsigned long long) opt.connections,
            (unsigned long long) opt.depth, (unsigned long long) opt.size,
            (unsigned long long) opt.work_us, opt.duration_s, opt.warmup_s);
        printf("  QPS %.0f (%llu replies)\n", replies / secs,
               (unsigned long long) replies);
        printf(
            "  latency us: mean %.1f stddev %.1f p50 %.1f p99 %.1f max "
            "%.1f\n",
            mean / 1e3, stddev / 1e3, hist_percentile(&total, 50) / 1e3,
            hist_percentile(&total, 99) / 1e3, total.max / 1e3);
        printf("  errors:");
        for (int k = 0; k < E_KINDS; k++)
            printf(" %s %llu", err_names[k], (unsigned long long) errors[k]);
        printf("\n");
    }
    return err_sum ? EXIT_FAILED : EXIT_OK;
}
