/* htstress worker: one epoll loop over its share of the connections.
 *
 * A request is "claimed" from the thread's budget (-n) or until the deadline
 * (-d), optionally paced (--rate); each claimed request ends exactly once: as
 * a good (2xx/3xx) or bad (other status) response, or as an error of one
 * kind. A connection that fails takes its claimed requests with it as
 * errors; one the server announced it would close hands the unanswered ones
 * back to the budget.
 *
 * Over https:// each connection runs a TLS handshake after its TCP connect
 * (CONN_HANDSHAKE) with a new SSL object: nothing of an earlier session is
 * kept, so every connection makes a full handshake. Its requests and
 * responses then go through SSL_write and SSL_read (conn_send, conn_recv),
 * which answer as send() and recv() do.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/objects.h>

#include "common.h"
#include "htstress.h"

#define TICK_NS 100000000ull /* timeout scan and longest epoll sleep */
#define EVENTS_PER_WAIT 256

static bool stopping(uint64_t now)
{
    return interrupted || (run_deadline_ns && now >= run_deadline_ns);
}

uint64_t error_total(const struct stats *s)
{
    uint64_t total = 0;
    for (int k = 0; k < ERR_KINDS; k++)
        total += s->errors[k];
    return total;
}

/* Claim up to want requests for this thread; 0 when none may start now. */
static uint32_t claim(struct worker *w, uint32_t want, uint64_t now)
{
    if (!want || stopping(now))
        return 0;
    if (opt.requests && want > w->budget)
        want = (uint32_t) w->budget;
    if (w->rate > 0) {
        uint64_t allowed =
            (uint64_t) ((double) (now - run_start_ns) * w->rate / 1e9) + 1;
        uint64_t tokens =
            allowed > w->rate_issued ? allowed - w->rate_issued : 0;
        if (tokens < want) {
            want = (uint32_t) tokens;
            w->need_rescan = true;
        }
        w->rate_issued += want;
    }
    if (opt.requests)
        w->budget -= want;
    w->outstanding += want;
    return want;
}

/* Requests that were claimed but that the server never took (it closed the
 * connection as announced): give them back so they are issued again. */
static void unclaim(struct worker *w, uint32_t n)
{
    if (opt.requests)
        w->budget += n;
    w->outstanding -= n;
    if (n)
        w->need_rescan = true;
}

static bool claims_possible(const struct worker *w, uint64_t now)
{
    return !stopping(now) && (!opt.requests || w->budget > 0);
}

static void ring_push(struct conn *c, uint64_t t)
{
    uint32_t n = c->reserved + c->in_flight;
    c->issued_at[(c->ring_head + n) % opt.pipeline] = t;
}

static uint64_t ring_pop(struct conn *c)
{
    uint64_t t = c->issued_at[c->ring_head];
    c->ring_head = (c->ring_head + 1) % (uint32_t) opt.pipeline;
    return t;
}

static void set_events(struct worker *w, struct conn *c, bool want_write)
{
    if (c->want_write == want_write)
        return;
    struct epoll_event ev = {
        .events = EPOLLIN | EPOLLRDHUP | (want_write ? EPOLLOUT : 0),
        .data.ptr = c,
    };
    epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_write = want_write;
}

static void conn_close(struct conn *c)
{
    if (c->ssl) {
        SSL_free(c->ssl); /* no close_notify: the socket closes next */
        c->ssl = NULL;
    }
    if (c->fd >= 0)
        close(c->fd); /* also removes it from the epoll set */
    c->fd = -1;
    c->state = CONN_IDLE;
    c->want_write = false;
    c->server_closes = false;
    c->reserved = c->in_flight = 0;
    c->write_off = c->write_len = 0;
    c->ring_head = 0;
}

/* The connection failed: every request it held ends as an error of kind. */
static void conn_fail(struct worker *w, struct conn *c, enum error_kind kind)
{
    uint32_t lost = c->reserved + c->in_flight;
    /* A reset of an idle keep-alive connection loses no request but is
     * still a socket error worth counting; a plain close of one is not. */
    w->stats.errors[kind] += lost ? lost : (kind != ERR_CLOSED);
    w->outstanding -= lost;
    conn_close(c);
    w->need_rescan = true;
}

static int socket_error(int fd)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
        return errno;
    return err;
}

static enum error_kind kind_of_errno(int err, enum error_kind otherwise)
{
    return err == ECONNRESET || err == EPIPE ? ERR_RESET : otherwise;
}

/* SSL_get_error() of a failed SSL_read or SSL_write as errno: EAGAIN to
 * wait (the socket's events then say for what), 0 for the peer's close
 * (close_notify, or a FIN: SSL_OP_IGNORE_UNEXPECTED_EOF), else the
 * socket's error or EPROTO for a TLS one. */
static int tls_errno(SSL *ssl, int r)
{
    int saved = errno;
    switch (SSL_get_error(ssl, r)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return EAGAIN;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        return saved ? saved : ECONNRESET;
    default:
        return EPROTO;
    }
}

/* send() of the connection: through its TLS session when it has one. */
static ssize_t conn_send(struct conn *c, const char *buf, size_t len)
{
    if (!c->ssl)
        return send(c->fd, buf, len, MSG_NOSIGNAL);
    ERR_clear_error();
    errno = 0;
    int r = SSL_write(c->ssl, buf, len > INT32_MAX ? INT32_MAX : (int) len);
    if (r > 0)
        return r;
    int err = tls_errno(c->ssl, r);
    errno = err ? err : EPIPE;
    return -1;
}

/* recv() of the connection: 0 at the peer's close, -1 and errno else. */
static ssize_t conn_recv(struct conn *c, char *buf, size_t len)
{
    if (!c->ssl)
        return recv(c->fd, buf, len, 0);
    ERR_clear_error();
    errno = 0;
    int r = SSL_read(c->ssl, buf, len > INT32_MAX ? INT32_MAX : (int) len);
    if (r > 0)
        return r;
    int err = tls_errno(c->ssl, r);
    if (!err)
        return 0;
    errno = err;
    return -1;
}

/* Send what is pending; false if the connection failed. */
static bool conn_flush(struct worker *w, struct conn *c)
{
    while (c->write_off < c->write_len) {
        ssize_t n = conn_send(c, request_batch + c->write_off,
                              c->write_len - c->write_off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                set_events(w, c, true);
                return true;
            }
            conn_fail(w, c, kind_of_errno(errno, ERR_WRITE));
            return false;
        }
        c->write_off += (size_t) n;
    }
    c->write_off = c->write_len = 0;
    set_events(w, c, false);
    return true;
}

/* Hand the reserved requests to send() as one write. */
static bool conn_send_reserved(struct worker *w, struct conn *c)
{
    if (c->state != CONN_OPEN || c->write_len || !c->reserved)
        return true;
    c->write_off = 0;
    c->write_len = c->reserved * request_len;
    c->in_flight += c->reserved;
    c->reserved = 0;
    return conn_flush(w, c);
}

/* Keep-alive: top the connection up to the pipeline depth. */
static bool conn_refill(struct worker *w, struct conn *c, uint64_t now)
{
    if (c->state != CONN_OPEN || c->server_closes || c->write_len)
        return true;
    uint32_t room = (uint32_t) opt.pipeline - c->reserved - c->in_flight;
    uint32_t n = claim(w, room, now);
    for (uint32_t i = 0; i < n; i++) {
        ring_push(c, now);
        c->reserved++;
    }
    return conn_send_reserved(w, c);
}

/* Drive the TLS handshake; false if the connection failed. Once done, the
 * reserved requests go out. */
static bool tls_handshake(struct worker *w, struct conn *c)
{
    ERR_clear_error();
    int r = SSL_do_handshake(c->ssl);
    if (r != 1) {
        switch (SSL_get_error(c->ssl, r)) {
        case SSL_ERROR_WANT_READ:
            set_events(w, c, false);
            return true;
        case SSL_ERROR_WANT_WRITE:
            set_events(w, c, true);
            return true;
        default:
            conn_fail(w, c, ERR_CONNECT);
            return false;
        }
    }
    c->state = CONN_OPEN;
    w->stats.handshakes++;
    if (SSL_session_reused(c->ssl))
        w->stats.resumed++;
    if (!w->tls_version) {
        int group = SSL_get_negotiated_group(c->ssl);
        w->tls_version = SSL_get_version(c->ssl);
        w->tls_cipher = SSL_get_cipher_name(c->ssl);
        w->tls_group = group ? OBJ_nid2sn(group) : "";
    }
    if (!conn_send_reserved(w, c))
        return false;
    if (!c->write_len)
        set_events(w, c, false);
    return true;
}

/* The TCP connection is up: count it, then start its TLS handshake or
 * send its requests. False if it failed. */
static bool conn_established(struct worker *w, struct conn *c)
{
    w->stats.connects++;
    if (!tls_ctx)
        return conn_send_reserved(w, c);
    c->ssl = SSL_new(tls_ctx);
    if (!c->ssl || !SSL_set_fd(c->ssl, c->fd)) {
        conn_fail(w, c, ERR_CONNECT);
        return false;
    }
    SSL_set_connect_state(c->ssl);
    if (opt.tls_sni)
        SSL_set_tlsext_host_name(c->ssl, opt.host);
    c->state = CONN_HANDSHAKE;
    return tls_handshake(w, c);
}

/* Open c's socket and start its connect; its reserved requests (none
 * when it opens ahead of the clock) go out once it is up. */
static void conn_open(struct worker *w, struct conn *c)
{
    c->fd = socket(opt.addr.ss_family,
                   SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        conn_fail(w, c, ERR_CONNECT);
        return;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    http_response_parser_init(&c->parser);
    if (connect(c->fd, (struct sockaddr *) &opt.addr, opt.addr_len) == 0) {
        c->state = CONN_OPEN;
    } else if (errno == EINPROGRESS) {
        c->state = CONN_CONNECTING;
    } else {
        conn_fail(w, c, ERR_CONNECT);
        return;
    }
    c->want_write = c->state == CONN_CONNECTING;
    struct epoll_event ev = {
        .events = EPOLLIN | EPOLLRDHUP | (c->want_write ? EPOLLOUT : 0),
        .data.ptr = c,
    };
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, c->fd, &ev)) {
        conn_fail(w, c, ERR_CONNECT);
        return;
    }
    if (c->state == CONN_OPEN)
        conn_established(w, c);
}

/* Open a connection for the next request(s); leaves it idle when no request
 * may start now. */
static void conn_start(struct worker *w, struct conn *c, uint64_t now)
{
    uint32_t n = claim(w, opt.keep_alive ? (uint32_t) opt.pipeline : 1, now);
    if (!n)
        return;
    for (uint32_t i = 0; i < n; i++) {
        ring_push(c, now);
        c->reserved++;
    }
    conn_open(w, c);
}

static void record_response(struct worker *w, struct conn *c, uint64_t now)
{
    uint64_t issued = ring_pop(c);
    hist_record(&w->hist, now - issued);
    c->in_flight--;
    w->outstanding--;
    int status = c->parser.status;
    int cls = status >= 100 && status < 600 ? status / 100 : 0;
    w->stats.status_class[cls]++;
    if (cls == 2 || cls == 3)
        w->stats.good++;
    else
        w->stats.bad++;
    if (c->parser.close_after)
        c->server_closes = true;
}

/* After a response the server said it would close after, or in
 * connection-per-request mode: close, hand back what the server will never
 * answer, and start again. */
static void conn_recycle(struct worker *w, struct conn *c, uint64_t now)
{
    unclaim(w, c->reserved + c->in_flight);
    conn_close(c);
    conn_start(w, c, now);
}

/* Read once (level-triggered) and parse; false if the socket is gone. */
static bool conn_read(struct worker *w, struct conn *c, bool hup, uint64_t now)
{
    ssize_t n = conn_recv(c, w->readbuf, READ_BUFFER_SIZE);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return true;
        conn_fail(w, c, kind_of_errno(errno, ERR_READ));
        return false;
    }
    if (n == 0) {
        enum http_parse_result r = http_response_parse_eof(&c->parser);
        if (r == HTTP_PARSE_DONE && c->in_flight) {
            record_response(w, c, now);
            http_response_parser_init(&c->parser);
        }
        if (r == HTTP_PARSE_ERROR || c->in_flight || c->reserved) {
            if (c->server_closes && r != HTTP_PARSE_ERROR)
                conn_recycle(w, c, now); /* announced close, nothing cut */
            else
                conn_fail(w, c, hup ? ERR_HUP : ERR_CLOSED);
        } else {
            conn_close(c); /* clean close between responses */
            conn_start(w, c, now);
        }
        return false;
    }
    w->stats.bytes_read += (uint64_t) n;
    if (!c->in_flight) {
        /* Bytes nobody asked for. */
        conn_fail(w, c, ERR_PARSE);
        return false;
    }
    const char *p = w->readbuf;
    size_t left = (size_t) n;
    while (left) {
        size_t used;
        enum http_parse_result r =
            http_response_parse(&c->parser, p, left, &used);
        p += used;
        left -= used;
        if (r == HTTP_PARSE_ERROR) {
            conn_fail(w, c, ERR_PARSE);
            return false;
        }
        if (r == HTTP_PARSE_MORE)
            break;
        record_response(w, c, now);
        http_response_parser_init(&c->parser);
        if (!opt.keep_alive || c->server_closes) {
            conn_recycle(w, c, now);
            return false;
        }
        if (left && !c->in_flight) {
            conn_fail(w, c, ERR_PARSE);
            return false;
        }
    }
    if (!c->refill_queued) {
        c->refill_queued = true;
        w->refill[w->nrefill++] = c;
    }
    return true;
}

static void handle_event(struct worker *w,
                         struct conn *c,
                         uint32_t events,
                         uint64_t now)
{
    if (c->state == CONN_CONNECTING) {
        int err = socket_error(c->fd);
        if (err || (events & (EPOLLERR | EPOLLHUP))) {
            conn_fail(w, c, ERR_CONNECT);
            return;
        }
        if (!(events & EPOLLOUT))
            return;
        c->state = CONN_OPEN;
        if (!conn_established(w, c))
            return;
        if (c->state == CONN_OPEN && !c->write_len)
            set_events(w, c, false);
        return;
    }
    if (c->state == CONN_HANDSHAKE) {
        if (!tls_handshake(w, c) || c->state == CONN_OPEN)
            return;
        /* Still waiting, but the server has closed or failed: no more of
         * the handshake can come. */
        if (events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP))
            conn_fail(w, c, ERR_CONNECT);
        return;
    }
    if (events & EPOLLERR) {
        /* The error belongs to this socket: ask it, not errno. */
        conn_fail(w, c, kind_of_errno(socket_error(c->fd), ERR_READ));
        return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) {
        if (!conn_read(w, c, events & EPOLLHUP, now))
            return;
        if ((events & EPOLLHUP) && !(events & EPOLLIN)) {
            conn_fail(w, c, ERR_HUP);
            return;
        }
    }
    if ((events & EPOLLOUT) && c->write_len)
        conn_flush(w, c);
}

static void check_timeouts(struct worker *w, uint64_t now)
{
    uint64_t timeout_ns = opt.timeout_ms * 1000000ull;
    for (size_t i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        if (c->state == CONN_IDLE || !(c->reserved + c->in_flight))
            continue;
        if (now - c->issued_at[c->ring_head] > timeout_ns)
            conn_fail(w, c, ERR_TIMEOUT);
    }
}

/* Give every connection that wants work a chance to claim it. */
static void rescan(struct worker *w, uint64_t now)
{
    w->need_rescan = false;
    for (size_t i = 0; i < w->nconns && claims_possible(w, now); i++) {
        struct conn *c = &w->conns[i];
        if (c->state == CONN_IDLE)
            conn_start(w, c, now);
        else if (opt.keep_alive)
            conn_refill(w, c, now);
    }
}

static int wait_timeout_ms(const struct worker *w, uint64_t now)
{
    uint64_t wait = TICK_NS;
    if (w->need_rescan && w->rate > 0) {
        uint64_t next =
            run_start_ns + (uint64_t) ((double) w->rate_issued * 1e9 / w->rate);
        wait = next > now ? next - now : 0;
        if (wait > TICK_NS)
            wait = TICK_NS;
    } else if (w->need_rescan) {
        wait = 0;
    }
    if (run_deadline_ns && now < run_deadline_ns &&
        run_deadline_ns - now < wait)
        wait = run_deadline_ns - now;
    return (int) ((wait + 999999) / 1000000);
}

static void publish_progress(struct worker *w)
{
    uint64_t errors = error_total(&w->stats);
    __atomic_store_n(&w->published_done, w->stats.good + w->stats.bad + errors,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&w->published_errors, errors, __ATOMIC_RELAXED);
}

/* --connect-first: open every connection of w, claiming nothing, and
 * wait until each is open (its TLS handshake done) or failed, within
 * --timeout. A failed one is an error, and opens again with the run. */
static void open_ahead(struct worker *w)
{
    struct epoll_event events[EVENTS_PER_WAIT];
    uint64_t deadline = now_ns() + opt.timeout_ms * 1000000ull;

    for (size_t i = 0; i < w->nconns; i++)
        conn_open(w, &w->conns[i]);
    for (;;) {
        size_t opening = 0;
        for (size_t i = 0; i < w->nconns; i++)
            opening += w->conns[i].state == CONN_CONNECTING ||
                       w->conns[i].state == CONN_HANDSHAKE;
        uint64_t now = now_ns();
        if (!opening || interrupted || now >= deadline)
            break;
        int n = epoll_wait(w->epfd, events, EVENTS_PER_WAIT,
                           (int) ((deadline - now + 999999) / 1000000));
        for (int i = 0; i < n; i++)
            handle_event(w, events[i].data.ptr, events[i].events, now_ns());
    }
    for (size_t i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        if (c->state == CONN_CONNECTING || c->state == CONN_HANDSHAKE)
            conn_fail(w, c, ERR_TIMEOUT);
    }
}

void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct epoll_event events[EVENTS_PER_WAIT];
    uint64_t now = now_ns(), next_tick = now + TICK_NS;

    if (opt.connect_first) {
        open_ahead(w);
        __atomic_fetch_add(&workers_open, 1, __ATOMIC_RELEASE);
        while (!__atomic_load_n(&clock_started, __ATOMIC_ACQUIRE) &&
               !interrupted)
            usleep(1000);
        now = now_ns();
        next_tick = now + TICK_NS;
        w->need_rescan = true; /* the open ones claim their first requests */
    } else {
        for (size_t i = 0; i < w->nconns; i++)
            conn_start(w, &w->conns[i], now);
    }
    for (;;) {
        now = now_ns();
        if (w->need_rescan)
            rescan(w, now);
        if (!w->outstanding && !claims_possible(w, now))
            break;
        int n = epoll_wait(w->epfd, events, EVENTS_PER_WAIT,
                           wait_timeout_ms(w, now));
        now = now_ns();
        for (int i = 0; i < n; i++)
            handle_event(w, events[i].data.ptr, events[i].events, now);
        for (size_t i = 0; i < w->nrefill; i++) {
            w->refill[i]->refill_queued = false;
            conn_refill(w, w->refill[i], now);
        }
        w->nrefill = 0;
        if (now >= next_tick) {
            check_timeouts(w, now);
            next_tick = now + TICK_NS;
        }
        publish_progress(w);
    }
    for (size_t i = 0; i < w->nconns; i++)
        conn_close(&w->conns[i]);
    w->finished_ns = now_ns();
    publish_progress(w);
    __atomic_store_n(&w->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}
