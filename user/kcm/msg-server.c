/*
 * ktcp-msg-server: the plain-TCP twin of ktcp-kcm-server.
 *
 * An acceptor thread hands each connection to one worker (round robin), and
 * that worker owns it to the end: it reads the byte stream, cuts frames out
 * of it itself, does each request's work in order and answers. Because a
 * reply is its request unchanged, the answers to all whole frames of one read
 * are the first bytes of the input buffer: they leave in one send() straight
 * from there, and only what the socket does not take is copied aside. A
 * client that stops reading stops being read (backpressure) until its
 * replies drain.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "msg.h"

#define MSG_MAX_EVENTS 256
#define MSG_READ_CHUNK 16384
/* Reads per readiness event before other connections get their turn. */
#define MSG_READ_BUDGET 8
/* Pending replies above this stop reading from the client. */
#define MSG_OUT_HIGH (256 * 1024)

struct msg_conn {
    int fd;
    bool paused;     /* not reading: too many replies pending */
    uint32_t events; /* what epoll watches for now */
    uint8_t *in;
    size_t in_len, in_cap;
    uint8_t *out;
    size_t out_off, out_len, out_cap;
};

struct msg_worker {
    pthread_t thread;
    int epoll_fd;
    int wake_fd;
    struct msg_counters counters;
};

static struct msg_options opt;
static struct msg_worker *workers;
static struct msg_counters acceptor_counters;
static int listen_fd, acceptor_wake_fd;

static void conn_close(struct msg_worker *w, struct msg_conn *c)
{
    epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
    msg_count(&w->counters, closed, 1);
}

static bool reserve(uint8_t **buf, size_t *cap, size_t need)
{
    size_t n = *cap ? *cap : MSG_READ_CHUNK;
    uint8_t *p;

    if (need <= *cap)
        return true;
    while (n < need)
        n *= 2;
    p = realloc(*buf, n);
    if (!p)
        return false;
    *buf = p;
    *cap = n;
    return true;
}

/* Queue bytes behind what is already pending, keeping order. */
static bool out_append(struct msg_conn *c, const uint8_t *p, size_t n)
{
    if (c->out_off && c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    if (!reserve(&c->out, &c->out_cap, c->out_len + n))
        return false;
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
    return true;
}

/* Send what is pending; false when the connection failed. */
static bool out_flush(struct msg_worker *w, struct msg_conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                         MSG_DONTWAIT | MSG_NOSIGNAL);

        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            return false;
        }
        c->out_off += n;
        msg_count(&w->counters, bytes_out, n);
    }
    if (c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    return true;
}

/* Answer the whole frames at the front of the input buffer. Returns false
 * when the connection must close (a frame above --max-msg, a send error). */
static bool serve_frames(struct msg_worker *w, struct msg_conn *c)
{
    size_t off = 0, sent = 0;

    while (c->in_len - off >= MSG_HDR_LEN) {
        uint32_t len = msg_get_be32(c->in + off);

        if (len > opt.max_msg) {
            /* Answer what came before it (best effort), then give up on
             * this connection only. */
            if (off && out_append(c, c->in, off))
                out_flush(w, c);
            msg_count(&w->counters, too_big, 1);
            errno = EMSGSIZE;
            return false;
        }
        if (c->in_len - off < MSG_HDR_LEN + (size_t) len) {
            if (!reserve(&c->in, &c->in_cap, MSG_HDR_LEN + (size_t) len))
                return false;
            break;
        }
        msg_do_work(c->in + off, MSG_HDR_LEN + len);
        off += MSG_HDR_LEN + len;
        msg_count(&w->counters, messages, 1);
    }
    if (off == 0)
        return true;
    if (c->out_len == 0) {
        ssize_t n = send(c->fd, c->in, off, MSG_DONTWAIT | MSG_NOSIGNAL);

        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return false;
        if (n > 0) {
            sent = n;
            msg_count(&w->counters, bytes_out, n);
        }
    }
    if (sent < off && !out_append(c, c->in + sent, off - sent))
        return false;
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    return true;
}

static void set_events(struct msg_worker *w, struct msg_conn *c)
{
    struct epoll_event ev = {.data.ptr = c};

    c->paused = c->out_len - c->out_off > MSG_OUT_HIGH;
    ev.events = (c->paused ? 0 : EPOLLIN) | (c->out_len ? EPOLLOUT : 0);
    if (ev.events != c->events) {
        epoll_ctl(w->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
        c->events = ev.events;
    }
}

static void conn_event(struct msg_worker *w, struct msg_conn *c, uint32_t ev)
{
    bool eof = false;

    if ((ev & EPOLLOUT) && !out_flush(w, c))
        goto fail;
    if (!c->paused && (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
        for (int i = 0; i < MSG_READ_BUDGET && !eof; i++) {
            ssize_t n;

            if (!reserve(&c->in, &c->in_cap, c->in_len + MSG_READ_CHUNK / 4))
                goto fail;
            n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len,
                     MSG_DONTWAIT);
            if (n < 0) {
                if (errno == EAGAIN || errno == EINTR)
                    break;
                goto fail;
            }
            if (n == 0)
                eof = true;
            c->in_len += n;
            msg_count(&w->counters, bytes_in, n);
            if (!serve_frames(w, c))
                goto fail;
            if (c->out_len - c->out_off > MSG_OUT_HIGH)
                break;
        }
    }
    if (eof) {
        /* The client is done sending: answer what it sent, then close. A
         * half frame left behind is dropped with the connection. */
        out_flush(w, c);
        conn_close(w, c);
        return;
    }
    set_events(w, c);
    return;
fail:
    if (errno != ECONNRESET && errno != EPIPE && errno != EMSGSIZE)
        msg_count(&w->counters, errors, 1);
    conn_close(w, c);
}

static void *worker_run(void *arg)
{
    struct msg_worker *w = arg;
    struct epoll_event events[MSG_MAX_EVENTS];

    for (;;) {
        int n = epoll_wait(w->epoll_fd, events, MSG_MAX_EVENTS, -1);

        if (n < 0 && errno != EINTR) {
            perror("ktcp-msg-server: epoll_wait");
            break;
        }
        for (int i = 0; i < n; i++) {
            if (events[i].data.ptr == NULL)
                return NULL; /* the wake eventfd: stop */
            conn_event(w, events[i].data.ptr, events[i].events);
        }
    }
    return NULL;
}

static void *acceptor_run(void *arg)
{
    struct epoll_event ev = {.events = EPOLLIN}, events[2];
    unsigned next = 0;
    int ep = epoll_create1(EPOLL_CLOEXEC);

    (void) arg;
    ev.data.fd = listen_fd;
    epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &ev);
    ev.data.fd = acceptor_wake_fd;
    epoll_ctl(ep, EPOLL_CTL_ADD, acceptor_wake_fd, &ev);
    for (;;) {
        int n = epoll_wait(ep, events, 2, -1);

        for (int i = 0; i < n; i++) {
            if (events[i].data.fd == acceptor_wake_fd) {
                close(ep);
                return NULL;
            }
            for (int k = 0; k < 64; k++) {
                int fd = accept4(listen_fd, NULL, NULL,
                                 SOCK_NONBLOCK | SOCK_CLOEXEC);
                struct msg_worker *w = &workers[next++ % opt.threads];
                struct epoll_event cev = {.events = EPOLLIN};
                struct msg_conn *c;

                if (fd < 0) {
                    if (errno != EAGAIN && errno != ECONNABORTED &&
                        errno != EINTR)
                        msg_count(&acceptor_counters, errors, 1);
                    break;
                }
                c = calloc(1, sizeof(*c));
                if (!c) {
                    close(fd);
                    msg_count(&acceptor_counters, errors, 1);
                    continue;
                }
                c->fd = fd;
                c->events = EPOLLIN;
                cev.data.ptr = c;
                msg_count(&acceptor_counters, accepted, 1);
                /* From here on the connection belongs to w alone. */
                if (epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, fd, &cev) < 0) {
                    close(fd);
                    free(c);
                    msg_count(&acceptor_counters, closed, 1);
                }
            }
        }
    }
}

int main(int argc, char **argv)
{
    struct msg_counters **sets;
    pthread_t acceptor;
    sigset_t sigs;
    uint64_t one = 1;

    opt.prog = "ktcp-msg-server";
    msg_parse_options(&opt,
                      "Serve length-prefixed messages over plain TCP: epoll "
                      "worker threads, each\nconnection owned by one thread "
                      "(the twin of ktcp-kcm-server).",
                      argc, argv);
    msg_block_signals(&sigs);

    listen_fd = msg_listen(&opt, false);
    if (listen_fd < 0) {
        fprintf(stderr, "ktcp-msg-server: listen on %s port %d: %s\n",
                opt.bind_addr ? opt.bind_addr : "*", opt.port,
                strerror(-listen_fd));
        return 1;
    }
    workers = calloc(opt.threads, sizeof(*workers));
    sets = calloc(opt.threads + 1, sizeof(*sets));
    acceptor_wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!workers || !sets || acceptor_wake_fd < 0) {
        perror("ktcp-msg-server: start-up");
        return 1;
    }
    sets[0] = &acceptor_counters;
    for (int i = 0; i < opt.threads; i++) {
        struct msg_worker *w = &workers[i];
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};

        sets[i + 1] = &w->counters;
        w->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->epoll_fd < 0 || w->wake_fd < 0 ||
            epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, w->wake_fd, &ev) < 0) {
            perror("ktcp-msg-server: epoll/eventfd");
            return 1;
        }
        if (pthread_create(&w->thread, NULL, worker_run, w) != 0) {
            fprintf(stderr, "ktcp-msg-server: cannot start worker %d\n", i);
            return 1;
        }
    }
    if (pthread_create(&acceptor, NULL, acceptor_run, NULL) != 0) {
        fprintf(stderr, "ktcp-msg-server: cannot start the acceptor\n");
        return 1;
    }
    fprintf(stderr,
            "ktcp-msg-server: listening on port %d, %d threads, max-msg %u\n",
            opt.port, opt.threads, opt.max_msg);

    msg_wait_for_stop(&opt, &sigs, sets, opt.threads + 1);

    if (write(acceptor_wake_fd, &one, sizeof(one)) < 0)
        perror("ktcp-msg-server: wake acceptor");
    pthread_join(acceptor, NULL);
    for (int i = 0; i < opt.threads; i++) {
        if (write(workers[i].wake_fd, &one, sizeof(one)) < 0)
            perror("ktcp-msg-server: wake worker");
    }
    for (int i = 0; i < opt.threads; i++)
        pthread_join(workers[i].thread, NULL);
    msg_write_counters(&opt, sets, opt.threads + 1);
    return 0;
}
