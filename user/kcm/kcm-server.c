/*
 * ktcp-kcm-server: length-prefixed messages received through AF_KCM.
 *
 * For every accepted client the server builds one KCM multiplexor:
 *
 *   ctl socket  socket(AF_KCM, SOCK_SEQPACKET); receive disabled, used only
 *               to attach and unattach the TCP socket
 *   N clones    SIOCKCMCLONE, one per worker, each in that worker's epoll
 *   TCP socket  attached with the BPF length parser (kcm-parser.bpf.c,
 *               loaded once at start and attached to every mux); the only
 *               one on this mux, so any reply sent on any clone can only
 *               go back to the client that asked
 *
 * KCM cuts whole messages out of the stream in the kernel and hands each to
 * whichever clone is ready, so one client's requests spread over all the
 * workers. The price: with more than one worker, answers to pipelined
 * requests of one connection may leave in another order than the requests
 * came (as with Thrift over KCM, a client matches them by a tag).
 *
 * How much of this runs on the runtime (user/rt), and why not all of it.
 * The runtime's model is a handler per accepted socket, run by one worker
 * that reads and writes that socket. Here no thread ever reads the TCP
 * socket (the mux does), and every worker serves every connection at once
 * through a clone of its mux: N sockets per connection, one per thread,
 * which no handler of the runtime can own. So the runtime does the part
 * that fits, as for the other servers: the flags, signals and counters
 * file (msg-common.c, rt-cli.c), the listener, admission (--max-conns), the
 * stop, and each connection's life as a handler on one epoll worker (what
 * an acceptor thread did): it builds the mux, waits on the TCP socket for
 * its end (an error or hang-up, which KCM reports there, the idle timeout,
 * the stop) and tears the mux down. The clones are served by --threads
 * worker threads of this file, one epoll set each; -m is refused, as this
 * is the one model.
 *
 * Errors on the TCP socket: KCM reports them, and a client's FIN
 * (psock_state_change posts EPIPE), as EPOLLERR on the TCP socket, which
 * wakes its handler. The handler then unattaches it (while the fd still
 * names it: the unattach ioctl looks the fd up), closes the ctl socket, and
 * asks each worker through its command pipe to close its clone; the
 * runtime closes the TCP socket when the handler returns. A worker closes a
 * clone only after the events of the current epoll batch are handled, so
 * no event ever reaches a freed slot, and no fd is closed while another
 * thread may still use it.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcm.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kcm.h"
#include "msg.h"

#define KCM_MAX_EVENTS 256
/* Messages taken from one clone per event before others get their turn. */
#define KCM_RECV_BUDGET 16

/* One worker's clone of one connection's mux; touched only by that worker
 * once it is in the worker's epoll, but for active_ms, which the
 * connection's handler reads for the idle timeout. */
struct kcm_slot {
    int fd;
    uint32_t events;
    uint8_t *out; /* the unsent rest of one reply (KCM may hold the start) */
    size_t out_off, out_len;
    _Atomic uint64_t active_ms; /* when the worker last had an event */
};

/* One connection's mux, owned by its handler. */
struct kcm_conn {
    int tcp_fd;
    int ctl_fd;
    bool in_parser; /* entered in the parser's maps (key, id = tcp_fd) */
    bool attached;
    struct kcm_conn_key key;
    struct kcm_slot *slots[]; /* one per worker */
};

/* SO_RCVBUF of each worker's clone (the kernel doubles it). */
#define KCM_CLONE_RCVBUF 4096

struct kcm_worker {
    pthread_t thread;
    int index;
    int epoll_fd;
    int cmd_rd, cmd_wr; /* pipe of struct kcm_slot * to close; NULL: stop */
    uint8_t *buf;       /* one message: max_msg + 4 */
};

static struct kcm_worker *workers;
static int nworkers;
static int parser_fd; /* the one length parser every mux uses */

static void slot_set_events(struct kcm_worker *w,
                            struct kcm_slot *s,
                            uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = s};

    if (s->events != events &&
        epoll_ctl(w->epoll_fd, EPOLL_CTL_MOD, s->fd, &ev) == 0)
        s->events = events;
}

/*
 * Send one reply. On SOCK_SEQPACKET, KCM builds a message from every send
 * until one carries MSG_EOR, and a non-blocking send that runs out of buffer
 * returns how much it took: the rest is kept and sent (ending with MSG_EOR)
 * when the clone is writable again. Returns false when the reply is pending.
 */
static bool slot_send(struct kcm_worker *w,
                      struct kcm_slot *s,
                      const uint8_t *p,
                      size_t n,
                      bool pending)
{
    while (n > 0) {
        ssize_t r = send(s->fd, p, n, MSG_DONTWAIT | MSG_EOR | MSG_NOSIGNAL);

        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN) {
                /* The mux lost its TCP socket: the handler is closing
                 * this connection; the reply has nowhere to go. */
                rt_count(RT_C_ERRORS, 1);
                break;
            }
            if (!pending) {
                uint8_t *copy = malloc(n);

                if (!copy) {
                    rt_count(RT_C_ERRORS, 1);
                    return true;
                }
                memcpy(copy, p, n);
                free(s->out);
                s->out = copy;
                s->out_off = 0;
                s->out_len = n;
            }
            slot_set_events(w, s, EPOLLOUT);
            return false;
        }
        rt_count(RT_C_BYTES_OUT, (uint64_t) r);
        p += r;
        n -= r;
        if (pending)
            s->out_off += r;
    }
    if (pending) {
        free(s->out);
        s->out = NULL;
        s->out_off = s->out_len = 0;
    }
    return true;
}

static void slot_event(struct kcm_worker *w, struct kcm_slot *s, uint32_t ev)
{
    if (s->out) {
        if (!(ev & EPOLLOUT) || !slot_send(w, s, s->out + s->out_off,
                                           s->out_len - s->out_off, true))
            return;
        slot_set_events(w, s, EPOLLIN);
    }
    if (!(ev & (EPOLLIN | EPOLLERR | EPOLLOUT)))
        return;
    for (int i = 0; i < KCM_RECV_BUDGET; i++) {
        ssize_t n = recv(s->fd, w->buf, MSG_HDR_LEN + msg_max, MSG_DONTWAIT);

        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR)
                rt_count(RT_C_ERRORS, 1);
            return;
        }
        rt_count(MSG_C_BYTES_IN, (uint64_t) n);
        /* The parser refuses longer frames, so a message always fits
         * the buffer whole and starts with its own length. */
        if (n < MSG_HDR_LEN ||
            msg_get_be32(w->buf) != (uint32_t) n - MSG_HDR_LEN) {
            rt_count(RT_C_ERRORS, 1);
            continue;
        }
        msg_do_work(w->buf, n);
        msg_count_messages(w->index, 1);
        if (!slot_send(w, s, w->buf, n, false))
            return;
    }
}

static void slot_close(struct kcm_slot *s, struct kcm_worker *w)
{
    epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, s->fd, NULL);
    close(s->fd);
    free(s->out);
    free(s);
}

static void *worker_run(void *arg)
{
    struct kcm_worker *w = arg;
    struct epoll_event events[KCM_MAX_EVENTS];

    for (;;) {
        int n = epoll_wait(w->epoll_fd, events, KCM_MAX_EVENTS, -1);
        uint64_t now = rt_now_ms();
        bool commands = false;

        if (n < 0 && errno != EINTR) {
            perror("ktcp-kcm-server: epoll_wait");
            return NULL;
        }
        for (int i = 0; i < n; i++) {
            struct kcm_slot *s = events[i].data.ptr;

            if (s == NULL) {
                commands = true;
                continue;
            }
            atomic_store_explicit(&s->active_ms, now, memory_order_relaxed);
            slot_event(w, s, events[i].events);
        }
        if (!commands)
            continue;
        /* Only now, with this batch's events handled, may slots go. */
        for (;;) {
            struct kcm_slot *s;
            ssize_t r = read(w->cmd_rd, &s, sizeof(s));

            if (r != sizeof(s))
                break;
            if (s == NULL)
                return NULL;
            slot_close(s, w);
        }
    }
}

/* Post a slot to its worker for closing. The pipe is blocking on this end:
 * a worker drains it between batches, so the wait is short. */
static void post_close(struct kcm_worker *w, struct kcm_slot *s)
{
    while (write(w->cmd_wr, &s, sizeof(s)) < 0 && errno == EINTR)
        ;
}

static const char *errno_name(int err)
{
    switch (err) {
    case EAFNOSUPPORT:
        return "EAFNOSUPPORT";
    case EPROTONOSUPPORT:
        return "EPROTONOSUPPORT";
    case EACCES:
        return "EACCES";
    case EPERM:
        return "EPERM";
    case EINVAL:
        return "EINVAL";
    case ENOMEM:
        return "ENOMEM";
    case EMFILE:
        return "EMFILE";
    default:
        return "errno";
    }
}

/* Forget a connection's mux: unattach (if attached) while the TCP fd still
 * names the socket, drop its parser state, close the ctl socket, hand each
 * clone to its worker for closing. The runtime closes the TCP socket. */
static void conn_teardown(struct kcm_conn *c)
{
    if (c->attached) {
        struct kcm_unattach un = {.fd = c->tcp_fd};

        if (ioctl(c->ctl_fd, SIOCKCMUNATTACH, &un) < 0)
            rt_count(RT_C_ERRORS, 1);
    }
    /* Unattached (or never attached): the parser runs no more for this
     * socket, and its id is still this fd's. */
    if (c->in_parser)
        kcm_parser_remove((uint32_t) c->tcp_fd, &c->key);
    if (c->ctl_fd >= 0)
        close(c->ctl_fd);
    for (int i = 0; i < nworkers; i++) {
        if (c->slots[i])
            post_close(&workers[i], c->slots[i]);
    }
    free(c);
}

/* Worker i's clone of c's mux, in that worker's epoll; -1 with errno. */
static int slot_open(struct kcm_conn *c, int i)
{
    struct kcm_clone cl = {0};
    struct epoll_event ev = {.events = EPOLLIN};
    int small = KCM_CLONE_RCVBUF;
    struct kcm_slot *s;

    if (ioctl(c->ctl_fd, SIOCKCMCLONE, &cl) < 0)
        return -1;
    s = calloc(1, sizeof(*s));
    if (!s) {
        close(cl.fd);
        return -1;
    }
    s->fd = cl.fd;
    s->events = EPOLLIN;
    /* The mux hands a message to a clone with room in its receive buffer.
     * With the default buffer one clone can take a whole burst: on Linux
     * 6.12 all 100 pipelined messages of one connection went to one worker
     * (6.1 spread them). A small buffer (a message always fits into an
     * empty queue) passes the rest of a burst on to the other workers on
     * both kernels. */
    setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    /* The clone comes without O_NONBLOCK and FD_CLOEXEC. */
    fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK);
    fcntl(s->fd, F_SETFD, FD_CLOEXEC);
    ev.data.ptr = s;
    if (epoll_ctl(workers[i].epoll_fd, EPOLL_CTL_ADD, s->fd, &ev)) {
        close(s->fd);
        free(s);
        return -1;
    }
    c->slots[i] = s;
    return 0;
}

/* Build the mux of a new connection and attach its TCP socket; NULL (the
 * failure counted) when that failed. No wait in here, so errno may be
 * used on the handler's coroutine (rt.h). */
static struct kcm_conn *conn_setup(int tcp_fd)
{
    struct kcm_attach at = {.fd = tcp_fd, .bpf_fd = parser_fd};
    struct kcm_conn *c;
    socklen_t len = sizeof(int);
    int one = 1, rcvbuf = 0, want = (int) (MSG_HDR_LEN + msg_max) * 2, r;

    c = calloc(1, sizeof(*c) + nworkers * sizeof(c->slots[0]));
    if (!c) {
        rt_count(RT_C_ERRORS, 1);
        return NULL;
    }
    c->tcp_fd = tcp_fd;
    c->ctl_fd =
        socket(AF_KCM, SOCK_SEQPACKET | SOCK_CLOEXEC, KCMPROTO_CONNECTED);
    if (c->ctl_fd < 0)
        goto fail;
    /* Every KCM socket of a mux receives, this one included: keep
     * messages away from the one no worker reads. */
    if (setsockopt(c->ctl_fd, SOL_KCM, KCM_RECV_DISABLE, &one, sizeof(one)))
        goto fail;
    for (int i = 0; i < nworkers; i++)
        if (slot_open(c, i) < 0)
            goto fail;
    /* KCM's stream parser fails a message longer than the TCP socket's
     * receive buffer (EMSGSIZE): make room for the largest we accept. */
    getsockopt(tcp_fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len);
    if (rcvbuf < want &&
        setsockopt(tcp_fd, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof(want)) < 0)
        setsockopt(tcp_fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof(want));
    /* The server's one parser; its state for this stream is entered
     * before the attach, as the parser may run during it. */
    r = kcm_parser_add(tcp_fd, (uint32_t) tcp_fd, &c->key);
    if (r < 0) {
        errno = -r;
        goto fail;
    }
    c->in_parser = true;
    if (ioctl(c->ctl_fd, SIOCKCMATTACH, &at) < 0)
        goto fail;
    c->attached = true;
    return c;
fail:
    if (errno != ECONNRESET && errno != ENOTCONN)
        rt_count(RT_C_ERRORS, 1);
    conn_teardown(c);
    return NULL;
}

/* Has the client gone? KCM reports its FIN (EPIPE), a reset and a parser
 * abort (EMSGSIZE for a frame above --max-msg) as the TCP socket's error;
 * a FIN that came before the attach left no callback to report it, so the
 * state is looked at too. */
static bool conn_ended(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof(int);
    int err = 0;

    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err) {
        if (err == EMSGSIZE)
            rt_count(MSG_C_TOO_BIG, 1);
        else if (err != EPIPE && err != ECONNRESET)
            rt_count(RT_C_ERRORS, 1);
        return true;
    }
    len = sizeof(ti);
    return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
           ti.tcpi_state != TCP_ESTABLISHED;
}

/* A connection's life, on the runtime's worker: build the mux, wait on the
 * TCP socket until the client goes, it is idle too long or the server
 * stops, then tear the mux down. The workers serve the messages. */
static enum rt_verdict kcm_serve(struct rt_conn *rc)
{
    struct kcm_conn *c = conn_setup(rc->fd);
    uint64_t active = rt_now_ms();

    if (!c)
        return RT_CLOSE;
    while (!conn_ended(rc->fd)) {
        uint64_t deadline = msg_idle_ms > 0 ? active + (uint64_t) msg_idle_ms
                                            : msg_idle_deadline();
        int r = rt_wait(rc, POLLIN, deadline, true);

        if (r == -ESHUTDOWN)
            break;
        if (r != -ETIMEDOUT || msg_idle_ms <= 0)
            continue;
        /* idle: no worker had an event of this connection for so long */
        for (int i = 0; i < nworkers; i++) {
            uint64_t t = atomic_load_explicit(&c->slots[i]->active_ms,
                                              memory_order_relaxed);

            if (t > active)
                active = t;
        }
        if (rt_now_ms() >= active + (uint64_t) msg_idle_ms) {
            rt_count(RT_C_TIMEOUTS, 1);
            break;
        }
    }
    conn_teardown(c);
    return RT_CLOSE;
}

/* Before the listener opens: AF_KCM and the parser must be there (a kernel
 * or a policy refusing them fails the start, not the clients), then the
 * workers start. */
static int start(void)
{
    int probe =
        socket(AF_KCM, SOCK_SEQPACKET | SOCK_CLOEXEC, KCMPROTO_CONNECTED);

    if (probe < 0) {
        int err = errno;

        if (err == EAFNOSUPPORT)
            fprintf(stderr,
                    "ktcp-kcm-server: AF_KCM unavailable: modprobe kcm "
                    "(EAFNOSUPPORT: this kernel has no KCM loaded)\n");
        else if (err == EACCES || err == EPERM)
            fprintf(stderr,
                    "ktcp-kcm-server: AF_KCM denied by the security policy "
                    "(SELinux, AppArmor or seccomp?) (%s)\n",
                    errno_name(err));
        else
            fprintf(stderr, "ktcp-kcm-server: socket(AF_KCM): %s (%s)\n",
                    strerror(err), errno_name(err));
        return 1;
    }
    close(probe);
    parser_fd = kcm_parser_load(msg_max);
    if (parser_fd < 0) {
        fprintf(stderr,
                "ktcp-kcm-server: loading the BPF length parser: %s (%s)%s\n",
                strerror(-parser_fd), errno_name(-parser_fd),
                -parser_fd == EPERM ? ": needs root (CAP_BPF)" : "");
        return 1;
    }
    workers = calloc(nworkers, sizeof(*workers));
    if (!workers) {
        perror("ktcp-kcm-server: start-up");
        return 1;
    }
    for (int i = 0; i < nworkers; i++) {
        struct kcm_worker *w = &workers[i];
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        int fds[2];

        w->index = i;
        w->buf = malloc(MSG_HDR_LEN + msg_max);
        w->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (!w->buf || w->epoll_fd < 0 || pipe2(fds, O_CLOEXEC) < 0) {
            perror("ktcp-kcm-server: worker set-up");
            return 1;
        }
        w->cmd_rd = fds[0];
        w->cmd_wr = fds[1];
        fcntl(w->cmd_rd, F_SETFL, O_NONBLOCK);
        if (epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, w->cmd_rd, &ev) < 0) {
            perror("ktcp-kcm-server: epoll_ctl");
            return 1;
        }
        if (pthread_create(&w->thread, NULL, worker_run, w) != 0) {
            fprintf(stderr, "ktcp-kcm-server: cannot start worker %d\n", i);
            return 1;
        }
    }
    return 0;
}

/* After the runtime finished: every handler has torn its mux down and
 * posted the clones, which the workers close before they stop. */
static void stopped(void)
{
    for (int i = 0; i < nworkers; i++)
        post_close(&workers[i], NULL);
    for (int i = 0; i < nworkers; i++)
        pthread_join(workers[i].thread, NULL);
    kcm_parser_unload();
}

int main(int argc, char **argv)
{
    struct rt_config cfg = {.name = "ktcp-kcm-server", .handler = kcm_serve};
    struct rt_cli cli = {
        .one_model = "kcm",
        /* the runtime's worker only sees connections start and end */
        .not_taken = RT_CLI_BUSY_POLL | RT_CLI_ACCEPT_STEER,
        .not_taken_why =
            "its message threads wait on KCM sockets of "
            "their own",
        .start = start,
        .stopped = stopped,
    };

    msg_parse(&cli, &cfg,
              "Serve length-prefixed messages received through AF_KCM: a "
              "BPF parser cuts\nthe TCP stream into messages in the kernel and "
              "KCM spreads each client's\nmessages over the worker threads "
              "(the twin of ktcp-msg-server).",
              argc, argv);
    nworkers = cli.threads;
    /* the connections' lives, mostly waits, on one worker of the runtime;
     * their messages on nworkers threads of this file */
    cfg.model = RT_MODEL_EPOLL;
    cfg.workers = 1;
    cfg.busy_poll_us = 0;
    return rt_cli_serve(&cli, &cfg);
}
