/*
 * ktcp-kcm-server: length-prefixed messages received through AF_KCM.
 *
 * For every accepted client the acceptor builds one KCM multiplexor:
 *
 *   ctl socket  socket(AF_KCM, SOCK_SEQPACKET); receive disabled, used only
 *               by the acceptor to attach and unattach the TCP socket
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
 * Errors on the TCP socket are the acceptor's: KCM reports them, and a
 * client's FIN (psock_state_change posts EPIPE), as EPOLLERR on the TCP fd,
 * which the acceptor watches. It then unattaches the socket (while the fd
 * still names it: the unattach ioctl looks the fd up), closes it and the ctl
 * socket, and asks each worker through its command pipe to close its clone.
 * A worker closes a clone only after the events of the current epoll batch
 * are handled, so no event ever reaches a freed slot, and no fd is closed
 * while another thread may still use it.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcm.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kcm.h"
#include "msg.h"

#define KCM_MAX_EVENTS 256
/* Messages taken from one clone per event before others get their turn. */
#define KCM_RECV_BUDGET 16

/* One worker's clone of one connection's mux; touched only by that worker
 * once it is in the worker's epoll. */
struct kcm_slot {
    int fd;
    uint32_t events;
    uint8_t *out; /* the unsent rest of one reply (KCM may hold the start) */
    size_t out_off, out_len;
};

/* Owned by the acceptor thread. */
struct kcm_conn {
    int tcp_fd;
    int ctl_fd;
    bool in_parser; /* entered in the parser's maps (key, id = tcp_fd) */
    bool attached;
    struct kcm_conn_key key;
    struct kcm_conn *prev, *next;
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
    struct msg_counters counters;
};

static struct msg_options opt;
static struct kcm_worker *workers;
static struct msg_counters acceptor_counters;
static int listen_fd, acceptor_wake_fd;
static int parser_fd;          /* the one length parser every mux uses */
static struct kcm_conn *conns; /* the acceptor's list of live connections */

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
                /* The mux lost its TCP socket: the acceptor is closing
                 * this connection; the reply has nowhere to go. */
                msg_count(&w->counters, errors, 1);
                break;
            }
            if (!pending) {
                uint8_t *copy = malloc(n);

                if (!copy) {
                    msg_count(&w->counters, errors, 1);
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
        msg_count(&w->counters, bytes_out, r);
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
        ssize_t n =
            recv(s->fd, w->buf, MSG_HDR_LEN + opt.max_msg, MSG_DONTWAIT);

        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR)
                msg_count(&w->counters, errors, 1);
            return;
        }
        msg_count(&w->counters, bytes_in, n);
        /* The parser refuses longer frames, so a message always fits
         * the buffer whole and starts with its own length. */
        if (n < MSG_HDR_LEN ||
            msg_get_be32(w->buf) != (uint32_t) n - MSG_HDR_LEN) {
            msg_count(&w->counters, errors, 1);
            continue;
        }
        msg_do_work(w->buf, n);
        msg_count(&w->counters, messages, 1);
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
        bool commands = false;

        if (n < 0 && errno != EINTR) {
            perror("ktcp-kcm-server: epoll_wait");
            return NULL;
        }
        for (int i = 0; i < n; i++) {
            if (events[i].data.ptr == NULL)
                commands = true;
            else
                slot_event(w, events[i].data.ptr, events[i].events);
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

/* Unattach (if attached), close the TCP and ctl sockets, hand each clone to
 * its worker for closing, forget the connection. Acceptor thread only. */
static void conn_teardown(int ep, struct kcm_conn *c)
{
    if (c->tcp_fd >= 0) {
        epoll_ctl(ep, EPOLL_CTL_DEL, c->tcp_fd, NULL);
        if (c->attached) {
            struct kcm_unattach un = {.fd = c->tcp_fd};

            if (ioctl(c->ctl_fd, SIOCKCMUNATTACH, &un) < 0)
                msg_count(&acceptor_counters, errors, 1);
        }
        /* Unattached (or never attached): the parser runs no more for
         * this socket, and its id is still this fd's. */
        if (c->in_parser)
            kcm_parser_remove((uint32_t) c->tcp_fd, &c->key);
        close(c->tcp_fd);
    }
    if (c->ctl_fd >= 0)
        close(c->ctl_fd);
    for (int i = 0; i < opt.threads; i++) {
        if (c->slots[i])
            post_close(&workers[i], c->slots[i]);
    }
    if (c->prev)
        c->prev->next = c->next;
    else if (conns == c)
        conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    free(c);
    msg_count(&acceptor_counters, closed, 1);
}

/* The TCP socket has an error or hung up: find out why, then tear down. */
static void conn_error(int ep, struct kcm_conn *c)
{
    int err = 0;
    socklen_t len = sizeof(err);

    getsockopt(c->tcp_fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == EMSGSIZE)
        msg_count(&acceptor_counters, too_big, 1);
    else if (err && err != EPIPE && err != ECONNRESET)
        msg_count(&acceptor_counters, errors, 1);
    conn_teardown(ep, c);
}

static void conn_setup(int ep, int tcp_fd)
{
    struct kcm_conn *c;
    struct kcm_attach at = {.fd = tcp_fd};
    struct epoll_event ev = {.events = EPOLLERR | EPOLLHUP};
    struct tcp_info ti;
    socklen_t len;
    int one = 1, rcvbuf = 0, r;

    c = calloc(1, sizeof(*c) + opt.threads * sizeof(c->slots[0]));
    if (!c) {
        close(tcp_fd);
        msg_count(&acceptor_counters, errors, 1);
        return;
    }
    c->tcp_fd = tcp_fd;
    c->ctl_fd = -1;
    c->next = conns;
    if (conns)
        conns->prev = c;
    conns = c;
    msg_count(&acceptor_counters, accepted, 1);

    c->ctl_fd =
        socket(AF_KCM, SOCK_SEQPACKET | SOCK_CLOEXEC, KCMPROTO_CONNECTED);
    if (c->ctl_fd < 0)
        goto fail;
    /* Every KCM socket of a mux receives, this one included: keep
     * messages away from the one no worker reads. */
    if (setsockopt(c->ctl_fd, SOL_KCM, KCM_RECV_DISABLE, &one, sizeof(one)))
        goto fail;
    for (int i = 0; i < opt.threads; i++) {
        struct kcm_clone cl = {0};
        struct kcm_slot *s;

        if (ioctl(c->ctl_fd, SIOCKCMCLONE, &cl) < 0)
            goto fail;
        s = calloc(1, sizeof(*s));
        if (!s) {
            close(cl.fd);
            goto fail;
        }
        s->fd = cl.fd;
        s->events = EPOLLIN;
        /* The mux hands a message to a clone with room in its receive
         * buffer. With the default buffer one clone can take a whole burst:
         * on Linux 6.12 all 100 pipelined messages of one connection went to
         * one worker (6.1 spread them). A small buffer (a message always
         * fits into an empty queue) passes the rest of a burst on to the
         * other workers on both kernels. */
        {
            int small = KCM_CLONE_RCVBUF;

            setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
        }
        /* The clone comes without O_NONBLOCK and FD_CLOEXEC. */
        fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK);
        fcntl(s->fd, F_SETFD, FD_CLOEXEC);
        c->slots[i] = s;
        {
            struct epoll_event sev = {.events = EPOLLIN, .data.ptr = s};

            if (epoll_ctl(workers[i].epoll_fd, EPOLL_CTL_ADD, s->fd, &sev)) {
                close(s->fd);
                free(s);
                c->slots[i] = NULL;
                goto fail;
            }
        }
    }
    /* KCM's stream parser fails a message longer than the TCP socket's
     * receive buffer (EMSGSIZE): make room for the largest we accept. */
    len = sizeof(rcvbuf);
    getsockopt(tcp_fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len);
    if (rcvbuf < (int) (MSG_HDR_LEN + opt.max_msg) * 2) {
        int want = (int) (MSG_HDR_LEN + opt.max_msg) * 2;

        if (setsockopt(tcp_fd, SOL_SOCKET, SO_RCVBUFFORCE, &want,
                       sizeof(want)) < 0)
            setsockopt(tcp_fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof(want));
    }
    /* The server's one parser; its state for this stream is entered
     * before the attach, as the parser may run during it. */
    r = kcm_parser_add(tcp_fd, (uint32_t) tcp_fd, &c->key);
    if (r < 0) {
        errno = -r;
        goto fail;
    }
    c->in_parser = true;
    at.bpf_fd = parser_fd;
    r = ioctl(c->ctl_fd, SIOCKCMATTACH, &at);
    if (r < 0)
        goto fail;
    c->attached = true;
    ev.data.ptr = c;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, tcp_fd, &ev) < 0)
        goto fail;
    /* A FIN that came before the attach left no callback to report it:
     * look at the state now (one that comes later raises EPOLLERR). */
    len = sizeof(ti);
    if (getsockopt(tcp_fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
        ti.tcpi_state != TCP_ESTABLISHED)
        conn_teardown(ep, c);
    return;
fail:
    if (errno != ECONNRESET && errno != ENOTCONN)
        msg_count(&acceptor_counters, errors, 1);
    conn_teardown(ep, c);
}

static void *acceptor_run(void *arg)
{
    static int listen_marker, wake_marker;
    struct epoll_event ev = {.events = EPOLLIN}, events[64];
    int ep = epoll_create1(EPOLL_CLOEXEC);

    (void) arg;
    ev.data.ptr = &listen_marker;
    epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &ev);
    ev.data.ptr = &wake_marker;
    epoll_ctl(ep, EPOLL_CTL_ADD, acceptor_wake_fd, &ev);
    for (;;) {
        int n = epoll_wait(ep, events, 64, -1);
        bool stop = false;

        for (int i = 0; i < n; i++) {
            void *p = events[i].data.ptr;

            if (p == &wake_marker) {
                stop = true;
            } else if (p == &listen_marker) {
                for (int k = 0; k < 64; k++) {
                    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

                    if (fd < 0) {
                        if (errno != EAGAIN && errno != ECONNABORTED &&
                            errno != EINTR)
                            msg_count(&acceptor_counters, errors, 1);
                        break;
                    }
                    conn_setup(ep, fd);
                }
            } else {
                conn_error(ep, p);
            }
        }
        if (stop)
            break;
    }
    while (conns)
        conn_teardown(ep, conns);
    close(ep);
    return NULL;
}

int main(int argc, char **argv)
{
    struct msg_counters **sets;
    pthread_t acceptor;
    sigset_t sigs;
    uint64_t one = 1;
    int probe;

    opt.prog = "ktcp-kcm-server";
    msg_parse_options(&opt,
                      "Serve length-prefixed messages received through AF_KCM: "
                      "a BPF parser cuts\nthe TCP stream into messages in the "
                      "kernel and KCM spreads each client's\nmessages over "
                      "the worker threads (the twin of ktcp-msg-server).",
                      argc, argv);
    msg_block_signals(&sigs);

    probe = socket(AF_KCM, SOCK_SEQPACKET | SOCK_CLOEXEC, KCMPROTO_CONNECTED);
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
    /* One parser for every connection, loaded now: a kernel or a policy
     * refusing it fails the start, not the clients. */
    parser_fd = kcm_parser_load(opt.max_msg);
    if (parser_fd < 0) {
        fprintf(stderr,
                "ktcp-kcm-server: loading the BPF length parser: %s (%s)%s\n",
                strerror(-parser_fd), errno_name(-parser_fd),
                -parser_fd == EPERM ? ": needs root (CAP_BPF)" : "");
        return 1;
    }

    listen_fd = msg_listen(&opt, false);
    if (listen_fd < 0) {
        fprintf(stderr, "ktcp-kcm-server: listen on %s port %d: %s\n",
                opt.bind_addr ? opt.bind_addr : "*", opt.port,
                strerror(-listen_fd));
        return 1;
    }
    workers = calloc(opt.threads, sizeof(*workers));
    sets = calloc(opt.threads + 1, sizeof(*sets));
    acceptor_wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!workers || !sets || acceptor_wake_fd < 0) {
        perror("ktcp-kcm-server: start-up");
        return 1;
    }
    sets[0] = &acceptor_counters;
    for (int i = 0; i < opt.threads; i++) {
        struct kcm_worker *w = &workers[i];
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        int fds[2];

        w->index = i;
        sets[i + 1] = &w->counters;
        w->buf = malloc(MSG_HDR_LEN + opt.max_msg);
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
    if (pthread_create(&acceptor, NULL, acceptor_run, NULL) != 0) {
        fprintf(stderr, "ktcp-kcm-server: cannot start the acceptor\n");
        return 1;
    }
    fprintf(stderr,
            "ktcp-kcm-server: listening on port %d, %d threads, max-msg %u\n",
            opt.port, opt.threads, opt.max_msg);

    msg_wait_for_stop(&opt, &sigs, sets, opt.threads + 1);

    /* The acceptor tears every connection down and posts the clones to
     * their workers before the workers are told to stop. */
    if (write(acceptor_wake_fd, &one, sizeof(one)) < 0)
        perror("ktcp-kcm-server: wake acceptor");
    pthread_join(acceptor, NULL);
    for (int i = 0; i < opt.threads; i++)
        post_close(&workers[i], NULL);
    for (int i = 0; i < opt.threads; i++)
        pthread_join(workers[i].thread, NULL);
    kcm_parser_unload();
    msg_write_counters(&opt, sets, opt.threads + 1);
    return 0;
}
