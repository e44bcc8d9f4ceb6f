/* rt.h — the user-space runtime of the ktcp servers (ktcp-httpd,
 * ktcp-echo): connections, coroutines, workers, timers, and the tiny
 * blocking-looking I/O API a handler is written in. It knows nothing of the
 * protocol a handler speaks.
 *
 * The connection handler is written once, as straight-line code over
 * rt_read/rt_send/rt_sendfile. The three models differ only in who runs it:
 *
 *   threads  one blocking pthread per connection; a wait is poll(2).
 *   epoll    one worker thread per core, each with its own SO_REUSEPORT
 *            listener, epoll set, run queue and timer heap; a connection is
 *            a coroutine that never leaves the worker that accepted it.
 *   mn       N worker threads, each with its own listener and epoll set
 *            too; a worker runs what it wakes from its own run queue, and
 *            an idle worker steals from a busy one, so a coroutine may
 *            move.
 *
 * Rule for code that runs on a coroutine (the handler and everything it
 * calls): in the mn model a coroutine can resume on another thread after
 * any wait, and the compiler may cache a thread-local address (errno's
 * included) across the call that switched. So such code never touches a
 * __thread variable or errno across a wait: syscalls that can wait go
 * through the rt_* functions below, which return -errno, and per-thread
 * state is reached through rt_worker_data(), called afresh after a wait.
 */
#ifndef KTCP_RT_H
#define KTCP_RT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

enum rt_model { RT_MODEL_THREADS, RT_MODEL_EPOLL, RT_MODEL_MN };

struct rt_coro;
struct rt_worker;
struct rt_conn;

/* A connection's own transport (TLS, user/tls): when rt_conn.io is set,
 * rt_read, rt_read_nowait, rt_send, rt_sendv, rt_sendfile and
 * rt_shutdown_write go through it, with the same contracts (bytes or
 * -errno; the waiting ones wait through rt_wait), instead of the socket's
 * calls. The runtime never sets it; whoever set it clears it before the
 * handler returns RT_CLOSE. A handler may return RT_IDLE with io still set:
 * the connection then keeps its transport (not its stack) while idle, and
 * if the runtime closes it meanwhile (idle timeout, stop) it calls release
 * first, which frees io_data. */
struct rt_io {
    ssize_t (*read_nowait)(struct rt_conn *c, void *buf, size_t len);
    ssize_t (*read)(struct rt_conn *c,
                    void *buf,
                    size_t len,
                    uint64_t deadline_ms,
                    bool idle);
    ssize_t (*sendv)(struct rt_conn *c,
                     const struct iovec *iov,
                     int iovcnt,
                     bool more,
                     int timeout_ms);
    ssize_t (*sendfile)(struct rt_conn *c,
                        int file_fd,
                        off_t offset,
                        size_t count,
                        int timeout_ms);
    /* 0, or < 0 when the connection is gone (no shutdown follows) */
    int (*shutdown_write)(struct rt_conn *c);
    /* optional: rt_head_alone's answer (NULL: false) */
    bool (*head_alone)(struct rt_conn *c, off_t offset, size_t count);
    void (*release)(struct rt_conn *c);
};

/* One accepted connection. In the coroutine models it lives inside the
 * coroutine header; in the threads model on the thread's stack. */
struct rt_conn {
    int fd;
    struct rt_coro *coro; /* NULL in the threads model */
    /* the client's address, kept raw: formatting it costs more than a
     * whole keep-alive request, so rt_conn_peer does it when asked */
    unsigned char peer_family; /* AF_INET, AF_INET6, or 0: unknown */
    unsigned char peer_addr[16];
    char peer[48]; /* printable, once rt_conn_peer made it */
    /* idle and out of time while the client still takes what was sent:
     * the unacknowledged bytes then (SIOCOUTQ), or 0 */
    int idle_unacked;
    /* which listener accepted it: 0 the port, 1 the second port */
    unsigned char listener;
    /* the handler's own, 0 at accept and kept while the connection lives
     * (ktcp-httpd: its PROXY header was read) */
    unsigned char handler_state;
    /* the address admission counted (--max-conns-per-ip): the peer at
     * accept, kept when rt_conn_set_client names another client */
    unsigned char admit_family;
    unsigned char admit_addr[16];
    const struct rt_io *io; /* NULL: the socket's own calls */
    void *io_data;          /* the transport's state */
    /* rt_wait calls so far. A coroutine's wait is edge-triggered: one
     * for room to send can take the event of bytes (or a FIN) that came
     * meanwhile, so a handler that skips a read because its last one
     * drained the socket reads anyway once this moved. */
    unsigned waits;
};

/* The client's address as text ("-" if unknown); made on first use. */
const char *rt_conn_peer(struct rt_conn *c);
/* Name another client than the socket's peer (a PROXY protocol header):
 * family AF_INET (addr 4 bytes) or AF_INET6 (16; an IPv4-mapped one is
 * taken as IPv4). rt_conn_peer and every reader of peer_family/peer_addr
 * see it from then on; the count per address made at accept stays on the
 * socket's peer. */
void rt_conn_set_client(struct rt_conn *c, int family, const void *addr);

/* What a handler returns: close the connection, or keep it open while it
 * is idle. RT_IDLE means "nothing buffered and nothing to read": the
 * runtime then holds the connection without a stack or any handler state
 * (a few hundred bytes) and calls the handler afresh when bytes arrive; it
 * closes the connection itself after idle_timeout_ms or on a stop. */
enum rt_verdict { RT_CLOSE = 0, RT_IDLE = 1 };
typedef enum rt_verdict (*rt_handler_fn)(struct rt_conn *c);

struct rt_config {
    const char *name; /* the program, for messages ("ktcp-echo") */
    enum rt_model model;
    int workers; /* epoll/mn worker threads */
    /* numeric IPv4/IPv6 address; NULL: every address, IPv6 and IPv4 */
    const char *bind;
    int port;
    /* a second listener on the same address, served alike; its
     * connections have listener 1 (ktcp-httpd's --tls-port); 0: none */
    int second_port;
    int backlog;   /* listen(2) backlog; 0: 1024 */
    int max_conns; /* live connections; excess get 503 and close */
    /* live connections from one client address (IPv4 and IPv4-mapped IPv6
     * count as one; IPv6 per per_ip_v6_prefix); excess are refused as over
     * max_conns; 0: no limit; RT_PER_IP_AUTO: a quarter of max_conns, at
     * least RT_PER_IP_FLOOR (no limit when max_conns is 0) */
    int max_conns_per_ip;
    /* IPv6 clients are counted per prefix of this many bits, 1..128; 0:
     * RT_PER_IP_V6_PREFIX (a /64: what one site is given) */
    int per_ip_v6_prefix;
    /* RT_IDLE connections are closed after this; 0: never (a day) */
    int idle_timeout_ms;
    /* epoll/mn: the longest a worker polls for events before it sleeps,
     * adapted to the gaps it sees (rt-sched.c, wait_events); 0: never */
    int busy_poll_us;
    /* epoll/mn with one worker per CPU: a connection goes to the worker of
     * the CPU that took its SYN, until one worker takes nearly all
     * (rt-steer.c); false: the kernel's SO_REUSEPORT hash */
    bool accept_steer;
    /* the runtime's own listeners hand a connection to accept only with
     * its first bytes, or this many seconds later (TCP_DEFER_ACCEPT): a
     * protocol whose client speaks first; 0: at the handshake */
    int defer_accept_s;
    rt_handler_fn handler;
    /* answer a connection of the port over max_conns; NULL: close (the
     * second port's are always closed) */
    void (*refuse)(int fd);
    /* the application's own look at a new connection's address (its
     * address rules), before it is counted or served: false closes it at
     * once, uncounted by the runtime (the application counts it); NULL:
     * every address */
    bool (*admit)(const struct rt_conn *c);
    /* A stop also ends sends waiting for a slow reader (-ESHUTDOWN), as
     * kecho's unload does; false: in-flight responses finish (HTTP). */
    bool stop_cuts_sends;
    /* Per-thread application data (rt_worker_data): its size, and what
     * writes out what a thread has buffered (about once a second, when a
     * threads-model connection goes idle or ends, on rt_flush_workers, and
     * before the thread ends) and frees it (when the thread ends). */
    size_t worker_data_size;
    void (*worker_flush)(void *data);
    void (*worker_exit)(void *data);
    /* Called once the listeners are open and before any thread serves:
     * dropping privileges goes here. Non-zero fails rt_start. */
    int (*listening)(void);
    /* rt_cli_serve: how long a SIGTERM/SIGINT lets in-flight responses
     * finish before they are cut (rt_stop_now); 0: no deadline */
    int shutdown_timeout_s;
};

/* Open the listeners (or take the one systemd passed: socket activation)
 * and start the threads of cfg->model; returns 0 or -errno (a message
 * naming what failed is already on stderr). */
int rt_start(const struct rt_config *cfg);
/* The listener came from systemd, not from bind/port. */
bool rt_socket_activated(void);
/* After rt_stop(): wait until every connection has ended, then join. */
void rt_finish(void);
long rt_live_conns(void);
/* Ask the server to stop: no more accepts, idle connections closed,
 * in-flight responses finished. Safe to call from another thread. */
void rt_stop(void);
/* rt_stop, and cut the in-flight responses too: every wait, a send to a
 * client that does not read included, returns -ESHUTDOWN within about
 * 50 ms, so rt_finish returns soon after. */
void rt_stop_now(void);
bool rt_stopping(void);

/* Counters. The runtime counts connections (accepted, refused, timed
 * out, failed) and bytes sent; the application has RT_APP_COUNTERS more,
 * from RT_C_APP on, named in its own header. Each worker thread of the
 * epoll and mn models adds to its own array (one writer, no lock prefix);
 * other threads (the threads model's) add to one shared array atomically.
 * rt_counters_sum() adds them all up, racing benignly with the writers:
 * each value is a recent one. */
enum rt_counter {
    RT_C_ACCEPTED,
    RT_C_REFUSED,
    RT_C_TIMEOUTS,
    RT_C_ERRORS,
    RT_C_BYTES_OUT,
    RT_C_APP,
};
#define RT_APP_COUNTERS 32
#define RT_NCOUNTERS (RT_C_APP + RT_APP_COUNTERS)
void rt_count(int which, uint64_t n);
/* Two counts at once: one look at the calling thread's counters. */
void rt_count2(int a, int b);
void rt_counters_sum(uint64_t out[RT_NCOUNTERS]);

/* Have every epoll/mn worker call cfg->worker_flush now, and wait until
 * all have or timeout_ms passed (a worker notices within its loop's
 * longest sleep, 1 s). The threads model's connection threads are not
 * waited for: they flush whenever their connection goes idle. Main thread
 * only. */
void rt_flush_workers(int timeout_ms);

/* Milliseconds on CLOCK_MONOTONIC. */
uint64_t rt_now_ms(void);
/* The same clock as the loop saw it: on an epoll or mn worker, the
 * rt_now_ms() its loop read after its last wake-up, on a threads-model
 * connection thread the one read when its connection last woke it (behind
 * by the time that wake-up's work has taken so far, as nginx's cached
 * time); on any other thread, rt_now_ms(). For deadlines and ages, not for
 * measuring. */
uint64_t rt_loop_now_ms(void);

/* The calling thread's application data: cfg->worker_data_size bytes,
 * zeroed when the thread starts, for state the handler keeps per thread
 * (caches, buffers). Never keep the pointer across a wait. */
void *rt_worker_data(void);
/* Whether the calling thread runs a loop that calls cfg->worker_flush about
 * once a second (epoll and mn workers); a threads-model thread does not. */
bool rt_worker_ticks(void);

/* Waits. deadline_ms is absolute (rt_now_ms() clock); 0 means none.
 * idle: the connection holds no partial request, so a stopping server may
 * close it. Return 0 when the fd may be ready, -ETIMEDOUT, or -ESHUTDOWN
 * (idle and the server is stopping). Spurious returns are allowed. */
int rt_wait(struct rt_conn *c, short events, uint64_t deadline_ms, bool idle);

/* I/O that waits instead of returning EAGAIN. Return bytes (0 = EOF for
 * rt_read) or -errno; -ETIMEDOUT when deadline passes, -ESHUTDOWN as
 * rt_wait. rt_send* loop until everything is written, waiting at most
 * timeout_ms for each bit of progress. */
ssize_t rt_read(struct rt_conn *c,
                void *buf,
                size_t len,
                uint64_t deadline_ms,
                bool idle);
/* Read without waiting: bytes, 0 on EOF, -EAGAIN, or -errno. */
ssize_t rt_read_nowait(struct rt_conn *c, void *buf, size_t len);
ssize_t rt_sendv(struct rt_conn *c,
                 struct iovec *iov,
                 int iovcnt,
                 bool more,
                 int timeout_ms);
/* rt_sendv of one buffer, without MSG_MORE (send(2), no iovec). */
ssize_t rt_send(struct rt_conn *c, const void *buf, size_t len, int timeout_ms);
/* Stop sending: the transport's end (a TLS close_notify) and the FIN
 * (shutdown(SHUT_WR)); reading goes on. */
void rt_shutdown_write(struct rt_conn *c);
/* Let the worker's other ready connections run before this one goes on
 * (a handler that still has bytes to read after a budget of work; the
 * sockets are edge-triggered, so returning RT_IDLE would lose them). A
 * no-op in the threads model. */
void rt_yield(struct rt_conn *c);
ssize_t rt_sendfile(struct rt_conn *c,
                    int file_fd,
                    off_t offset,
                    size_t count,
                    int timeout_ms);
/* Whether the head sent before a file body (rt_sendfile of count bytes
 * at offset) goes without MSG_MORE: never over TCP, whose segments the
 * head then shares with the body; a record-framing transport may say yes
 * when the body goes out in fewer calls with the head in a record of its
 * own (kTLS: http_tls_head_alone). */
bool rt_head_alone(struct rt_conn *c, off_t offset, size_t count);

/* ---- a server's command line, signals and counters file (rt-cli.c) ----
 *
 * The flags every server on the runtime takes alike, with one meaning and
 * one default (docs/operating.md): -b/--bind, -p/--port, -t/--threads,
 * -m/--model, -i/--idle-timeout-ms, -c/--max-conns, --max-conns-per-ip,
 * --busy-poll-us, --backlog, -s/--stats-file, --version, -h/--help; a
 * program adds its own flags to the same table and --help. rt_cli_serve is
 * the rest of main(): the start, the signal loop (docs/operating.md has
 * the table: SIGTERM/SIGINT stop within --shutdown-timeout, a second one
 * at once; SIGQUIT stops without a deadline; SIGHUP calls cli->reload,
 * SIGUSR1 cli->reopen or writes the counters; SIGUSR2 and SIGPIPE are
 * ignored), systemd's readiness protocol, and the stop. */
#include <stdio.h>

/* The longest poll before a sleep: the haltpoll cpuidle governor's default
 * for a guest's idle CPU (guest_halt_poll_ns, 200 us). At 50, a client
 * whose next request comes 50-100 us after a response (TLS on a virtual
 * machine: its own wake-up is most of that) was never caught; the worker
 * slept, and waking it made the gap longer still. */
#define RT_BUSY_POLL_US_DEFAULT 200
#define RT_PER_IP_AUTO (-1)
#define RT_PER_IP_FLOOR 64
#define RT_PER_IP_V6_PREFIX 64
#define RT_BUSY_POLL_US_MAX 10000

/* The shared defaults, for a struct rt_config initialiser (workers: one
 * per core unless set). */
#define RT_CLI_DEFAULTS                                                 \
    .model = RT_MODEL_EPOLL, .backlog = 1024, .idle_timeout_ms = 30000, \
    .max_conns = 10000, .max_conns_per_ip = RT_PER_IP_AUTO,             \
    .per_ip_v6_prefix = RT_PER_IP_V6_PREFIX,                            \
    .busy_poll_us = RT_BUSY_POLL_US_DEFAULT, .shutdown_timeout_s = 10,  \
    .accept_steer = true

/* One of the program's own flags. */
struct rt_cli_opt {
    const char *name;
    int key;         /* a short letter not shared, or >= 256: long only */
    const char *arg; /* the argument's name in --help; NULL: none */
    /* --help's text, its lines (at most 50 columns) split by '\n'; NULL:
     * not listed (another spelling of a listed flag) */
    const char *help;
};

/* A line of the counters file: name and the rt_count index summed. */
struct rt_cli_counter {
    const char *name;
    int which;
};

/* Shared flags a program may not take (rt_cli.not_taken). */
#define RT_CLI_STATS_FILE 1u
#define RT_CLI_BUSY_POLL 2u
#define RT_CLI_ACCEPT_STEER 4u

struct rt_cli {
    const char *description; /* --help's paragraph under Usage */
    const char *footer;      /* --help's last paragraph, or NULL */
    /* A number given to -m (which meant another flag once): what to use
     * instead, e.g. "the connection limit is --max-conns (-c)". */
    const char *m_hint;
    /* A program that runs its own threads in one model of its own: -m is
     * refused, -T fills threads (not cfg->workers), and the runtime serves
     * the connections as the program set cfg->model and cfg->workers. */
    const char *one_model;
    int threads;
    /* Shared flags (RT_CLI_*) left out of --help and refused, naming
     * not_taken_why ("its counters are served at --status-path"). */
    unsigned not_taken;
    const char *not_taken_why;
    const struct rt_cli_opt *opts; /* ended by {0}; NULL: none */
    /* One of opts given: false after saying why arg is wrong (rt_cli_bad,
     * rt_cli_long). data is the field below; from_file as rt_cli_apply's
     * RT_CLI_FROM_FILE. */
    bool (*option)(void *data, int key, const char *arg, bool from_file);
    void *data;
    /* the counters file: "accepted" and "active", these, then more() */
    const struct rt_cli_counter *counters; /* ended by {0} */
    void (*more)(FILE *f);
    /* rt_cli_serve: after the signals are blocked (threads started here
     * inherit that) and before rt_start; non-zero: exit status 1 */
    int (*start)(void);
    /* rt_cli_serve: after rt_finish, before the last counters */
    void (*stopped)(void);
    /* rt_cli_serve, on the main thread, between two signals: after the
     * start, say what is served (NULL: a line of the runtime's); SIGHUP,
     * reload what can change while serving (NULL: nothing to reload);
     * SIGUSR1, reopen the logs (NULL: write the counters). Each runs
     * alone: the next signal waits for it. */
    void (*serving)(void);
    void (*reload)(void);
    void (*reopen)(void);
    const char *stats_file; /* -s, or NULL: stderr */
};

enum rt_cli_result {
    RT_CLI_OK,
    RT_CLI_EXIT,  /* --help or --version answered on stdout */
    RT_CLI_ERROR, /* the reason is on stderr */
};
/* rt_cli_apply's flags. FROM_FILE: argv holds settings read from a file,
 * argv[0] is what messages start with ("ktcp-httpd: --config FILE", as
 * getopt's own use it), --help and --version are refused and a bad flag
 * prints no usage. */
#define RT_CLI_FROM_FILE 1u

/* Apply argv's flags to cfg and cli (and the program's own through
 * cli->option), over what they hold: the defaults --help shows. Prints
 * and returns; exits nothing. */
enum rt_cli_result rt_cli_apply(struct rt_cli *cli,
                                struct rt_config *cfg,
                                int argc,
                                char **argv,
                                unsigned flags);
/* rt_cli_apply of the command line, then exit 0 after --help or
 * --version, 2 on a bad argument. */
void rt_cli_parse(struct rt_cli *cli,
                  struct rt_config *cfg,
                  int argc,
                  char **argv);
/* "PREFIX: FLAG ARG: WHY" on stderr, PREFIX the program's name or, inside
 * rt_cli_apply from a file, the file's argv[0]; returns false. */
bool rt_cli_bad(const char *flag, const char *arg, const char *why);
/* A flag's number in [min, max] into *out, or rt_cli_bad's "expected a
 * number in MIN..MAX" and false. */
bool rt_cli_long(const char *flag,
                 const char *arg,
                 long min,
                 long max,
                 long *out);
/* --model's name of m. */
const char *rt_model_name(enum rt_model m);
/* Catch the signals rt_cli_serve answers (a handler that only notes the
 * signal and wakes the loop, whichever thread the kernel picks, library
 * threads included) and block them in the calling thread, whose mask the
 * threads it creates inherit. Call it before any thread exists; rt_cli_parse
 * does. */
void rt_cli_signals(void);
/* Start, serve until SIGTERM/SIGINT/SIGQUIT, stop, write the counters:
 * main()'s exit status. */
int rt_cli_serve(struct rt_cli *cli, struct rt_config *cfg);
/* Tell systemd (the datagram protocol of sd_notify(3), to $NOTIFY_SOCKET;
 * nothing when it is unset), e.g. "READY=1". rt_cli_serve sends READY=1,
 * RELOADING=1 and STOPPING=1 itself. */
void rt_notify(const char *state);
/* Write the counters to cli->stats_file (aside, then renamed: a reader
 * never sees half a file), or stderr. */
void rt_cli_write_counters(const struct rt_cli *cli);
/* The calling worker's index (0 .. cfg->workers - 1), or -1 outside the
 * epoll and mn workers. Read it afresh after a wait (mn). */
int rt_worker_id(void);

#endif /* KTCP_RT_H */
