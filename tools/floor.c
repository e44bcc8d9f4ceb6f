/* floor: the least an HTTP server can do on Linux for the bench's
 * workloads, as the reference that every engine's CPU per request and
 * throughput are divided by (make bench-cost, make bench).
 *
 * Per request it finds the end of the head (\r\n\r\n), takes the path
 * between the first two spaces, and answers either fixed bytes made at
 * start (status line, Content-Length, the file's body: files up to
 * FLOOR_INLINE bytes) in one write, or the head with MSG_MORE followed by
 * sendfile of a file opened at start. HTTP/1.0 requests are answered and
 * the connection closed; HTTP/1.1 ones are kept alive. A path not among
 * the regular files at the top of --root gets 404. Nothing else: no
 * header is read, no method checked, no Date, no limits beyond the
 * head buffer (a head that does not fit closes the connection), no
 * timeouts. It is a measuring stick, not a server to expose.
 *
 * One epoll loop per thread (--threads, default one per core), each with
 * its own SO_REUSEPORT listener: the kernel hashes each new connection to
 * one listener's accept queue, so the threads share no accept queue, lock
 * or wake-up (one shared listener would wake every thread for a
 * connection, or need EPOLLEXCLUSIVE, and serialise the accept); this is
 * also how the bench runs nginx (listen ... reuseport) and ktcp-httpd's
 * epoll model. With --steer cpu (the default) and one thread per CPU, a
 * classic BPF program on the group picks the listener of the thread
 * numbered as the CPU that took the SYN, as ktcp's runtime does
 * (user/rt/rt-steer.c; the floor does not fall back to the hash when the
 * SYNs all come from one CPU); --steer hash leaves the choice to the
 * kernel's hash. Connections are edge-triggered, for input from accept
 * on and for output too once a write has blocked: a read that returns less than
 * the buffer's room has drained the socket (new data raises a new edge), so the
 * answer follows without a read that fails with EAGAIN and without epoll_ctl
 * per request.
 *
 * Two options add what ktcp-httpd does beyond that, to weigh each
 * (BENCHMARKS.md): --shutdown shuts the write side before closing after an
 * HTTP/1.0 answer (ktcp-httpd does, so that request bytes still unread
 * at the close cannot turn it into a RST that discards the answer), and
 * --pad N makes every head N bytes longer (an X-Floor-Pad header), as long
 * as a real server's Date, Content-Type, Last-Modified, ETag and the rest
 * make it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "ktcp-net.h"
#include "ktcp-version.h"

#define FLOOR_INLINE                                         \
    (64 * 1024) /* files up to this are answered from memory \
                 */
#define FLOOR_FILES 256
#define FLOOR_HEAD 2048 /* request head buffer per connection */
#define FLOOR_EVENTS 256

struct answer {
    char *bytes; /* head (+ body when inline) */
    size_t len;
};

struct file {
    char name[256];
    size_t name_len;
    int fd;      /* sendfile source, -1 when inline */
    size_t size; /* body bytes */
    struct answer keep, close;
};

struct conn {
    size_t len;      /* bytes of head buffered */
    const char *out; /* fixed bytes left to write */
    size_t out_len;
    const struct file *sf; /* file being sent, or NULL */
    off_t off;
    size_t left;
    int close_after;
    int owner;     /* the epoll set of the thread serving it; -1 when closed */
    int in_set;    /* in the epoll set (not before its first wait) */
    int out_armed; /* EPOLLOUT in the set: after the first write that blocked */
    char buf[FLOOR_HEAD];
};

static struct file files[FLOOR_FILES];
static int nfiles;
static struct answer not_found_keep, not_found_close;
static struct conn **conns; /* by descriptor (conn_of) */
static rlim_t max_fd;
static struct sockaddr_storage bind_addr;
static socklen_t bind_len;
static int opt_shutdown; /* --shutdown */
static size_t opt_pad;   /* --pad */

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: floor --root DIR [options]\n"
        "The least an HTTP server can do for a static file: the bench's "
        "floor.\n"
        "  -r, --root DIR      regular files at the top of DIR are served\n"
        "  -p, --port N        TCP port (default 8080)\n"
        "  -b, --bind ADDR     address to listen on (default 127.0.0.1)\n"
        "  -t, --threads N     epoll loops, each with its own SO_REUSEPORT\n"
        "                      listener (default: one per online core)\n"
        "      --steer cpu|hash  a connection to the thread of its SYN's CPU\n"
        "                      (with a thread per CPU), or as the kernel\n"
        "                      hashes it (default cpu)\n"
        "      --shutdown      shut the write side before closing after an\n"
        "                      HTTP/1.0 answer, as ktcp-httpd does\n"
        "      --pad N         every head N more bytes (16..4096), as a real\n"
        "                      server's headers make it\n"
        "      --version       print the version and exit\n"
        "  -h, --help          this text\n"
        "Exit: 0 on SIGTERM/SIGINT, 2 bad usage, 3 set-up failed.\n");
}

static void make_answer(struct answer *a,
                        const char *status,
                        size_t size,
                        int close,
                        const char *body)
{
    char head[160 + 4096];
    int n = snprintf(head, 160, "HTTP/1.1 %s\r\nContent-Length: %zu\r\n%s",
                     status, size, close ? "Connection: close\r\n" : "");
    size_t blen = body ? size : 0;

    if (opt_pad) { /* "X-Floor-Pad: xxx\r\n", opt_pad bytes in all */
        memcpy(head + n, "X-Floor-Pad: ", 13);
        memset(head + n + 13, 'x', opt_pad - 15);
        memcpy(head + n + opt_pad - 2, "\r\n", 2);
        n += (int) opt_pad;
    }
    memcpy(head + n, "\r\n", 2);
    n += 2;

    a->bytes = malloc((size_t) n + blen);
    if (!a->bytes) {
        perror("floor: malloc");
        exit(EXIT_SETUP);
    }
    memcpy(a->bytes, head, (size_t) n);
    if (blen)
        memcpy(a->bytes + n, body, blen);
    a->len = (size_t) n + blen;
}

static void load_files(const char *root)
{
    DIR *d = opendir(root);
    struct dirent *de;

    if (!d) {
        fprintf(stderr, "floor: --root %s: %s\n", root, strerror(errno));
        exit(EXIT_SETUP);
    }
    while ((de = readdir(d)) && nfiles < FLOOR_FILES) {
        struct file *f = &files[nfiles];
        struct stat st;
        int fd;

        if (strlen(de->d_name) >= sizeof(f->name) - 1)
            continue;
        fd = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
            close(fd);
            continue;
        }
        f->name[0] = '/';
        strcpy(f->name + 1, de->d_name);
        f->name_len = strlen(f->name);
        f->size = (size_t) st.st_size;
        f->fd = fd;
        if (f->size <= FLOOR_INLINE) {
            char *body = malloc(f->size ? f->size : 1);
            size_t got = 0;

            while (body && got < f->size) {
                ssize_t r = pread(fd, body + got, f->size - got, (off_t) got);
                if (r <= 0)
                    break;
                got += (size_t) r;
            }
            close(fd);
            f->fd = -1;
            if (!body || got != f->size) {
                free(body);
                continue;
            }
            make_answer(&f->keep, "200 OK", f->size, 0, body);
            make_answer(&f->close, "200 OK", f->size, 1, body);
            free(body);
        } else {
            make_answer(&f->keep, "200 OK", f->size, 0, NULL);
            make_answer(&f->close, "200 OK", f->size, 1, NULL);
        }
        nfiles++;
    }
    closedir(d);
    make_answer(&not_found_keep, "404 Not Found", 0, 0, NULL);
    make_answer(&not_found_close, "404 Not Found", 0, 1, NULL);
}

/* A descriptor's state is made at its first connection and kept: a
 * descriptor closed by one thread can be accepted again by another while
 * the first still holds an event for it from the same epoll_wait, so
 * the state is never freed and an event is taken only by the thread
 * that owns the connection now (owner, written last on accept). */
static struct conn *conn_of(int ep, int fd)
{
    struct conn *c = __atomic_load_n(&conns[fd], __ATOMIC_ACQUIRE);

    if (!c || __atomic_load_n(&c->owner, __ATOMIC_ACQUIRE) != ep)
        return NULL;
    return c;
}

static void drop(int fd)
{
    __atomic_store_n(&conns[fd]->owner, -1, __ATOMIC_RELEASE);
    if (opt_shutdown && conns[fd]->close_after)
        shutdown(fd, SHUT_WR);
    close(fd); /* also leaves the epoll set */
}

/* Write what the connection owes: 1 done, 0 the socket is full (the next
 * EPOLLOUT edge resumes), -1 the connection failed. */
static int flush(int fd, struct conn *c)
{
    while (c->out_len) {
        /* held back (MSG_MORE) when a file follows, or when the close's
         * FIN is to go in the same segment (tcp_send_fin merges it into
         * the unsent tail) */
        ssize_t n = send(fd, c->out, c->out_len,
                         c->sf || c->close_after ? MSG_MORE : 0);
        if (n < 0)
            return errno == EAGAIN ? 0 : -1;
        c->out += n;
        c->out_len -= (size_t) n;
    }
    while (c->left) {
        ssize_t n = sendfile(fd, c->sf->fd, &c->off, c->left);
        if (n < 0)
            return errno == EAGAIN ? 0 : -1;
        if (n == 0)
            return -1; /* the file shrank */
        c->left -= (size_t) n;
    }
    c->sf = NULL;
    return 1;
}

/* Answer every whole head in the buffer; 0 to go on, -1 to drop. */
static int serve(int fd, struct conn *c)
{
    for (;;) {
        char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
        const struct answer *a;
        const struct file *f = NULL;
        char *path, *sp;
        size_t used;
        int r;

        if (!end)
            return c->len == sizeof(c->buf) ? -1 : 0;
        used = (size_t) (end + 4 - c->buf);
        path = memchr(c->buf, ' ', used);
        sp = path ? memchr(path + 1, ' ', (size_t) (end - path - 1)) : NULL;
        if (!sp)
            return -1;
        path++;
        /* "HTTP/1.0" after the path: answer and close */
        c->close_after = end - sp >= 9 && sp[8] == '0';
        for (int i = 0; i < nfiles; i++) {
            if (files[i].name_len == (size_t) (sp - path) &&
                !memcmp(files[i].name, path, (size_t) (sp - path))) {
                f = &files[i];
                break;
            }
        }
        a = f ? (c->close_after ? &f->close : &f->keep)
              : (c->close_after ? &not_found_close : &not_found_keep);
        c->out = a->bytes;
        c->out_len = a->len;
        if (f && f->fd >= 0) {
            c->sf = f;
            c->off = 0;
            c->left = f->size;
        }
        c->len -= used;
        if (c->len)
            memmove(c->buf, end + 4, c->len);
        r = flush(fd, c);
        if (r <= 0)
            return r;
        if (c->close_after)
            return -1;
    }
}

/* A write blocked: from now on the connection also waits for EPOLLOUT
 * (once per connection; small answers never get here). */
static int arm_out(int ep, int fd, struct conn *c)
{
    struct epoll_event ev = {
        .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.fd = fd};

    if (c->out_armed)
        return 0;
    c->out_armed = 1;
    if (!c->in_set)
        return 0; /* joins with EPOLLOUT (accept_one) */
    return epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
}

static void on_conn(int ep, int fd, uint32_t ev)
{
    struct conn *c = conn_of(ep, fd);

    if (!c)
        return;
    if (c->out_len || c->sf) {
        int r = flush(fd, c);
        if (r < 0 || (r > 0 && c->close_after)) {
            drop(fd);
            return;
        }
        if (r == 0)
            return;
        if (c->len && (serve(fd, c) < 0 || /* pipelined heads waiting */
                       ((c->out_len || c->sf) && arm_out(ep, fd, c)))) {
            drop(fd);
            return;
        }
    }
    if (!(ev & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        return;
    for (;;) {
        size_t room = sizeof(c->buf) - c->len;
        ssize_t n = read(fd, c->buf + c->len, room);

        if (n <= 0) {
            if (n < 0 && errno == EAGAIN)
                return;
            drop(fd);
            return;
        }
        c->len += (size_t) n;
        if (serve(fd, c) < 0 || ((c->out_len || c->sf) && arm_out(ep, fd, c))) {
            drop(fd);
            return;
        }
        /* a short read drained the socket; a full one may have left more */
        if ((size_t) n < room || c->out_len || c->sf)
            return;
    }
}

/* A listener of its own for a thread. Accepted sockets inherit its
 * TCP_NODELAY (the last piece of a file is not held back for an ACK),
 * TCP_NOTSENT_LOWAT of 64 KiB (sendfile queues that much unsent at most:
 * a 1 MiB answer costs the two sides ~190 us of CPU instead of ~450 on
 * loopback, its pages still in cache when the client copies them) and
 * its delayed-ACK mode (TCP_QUICKACK 0, set after listen(), which resets
 * it: the ACK of a request rides on its answer), set once here rather
 * than per connection; and TCP_DEFER_ACCEPT, so that the kernel hands
 * over a connection with its request (the handshake's bare ACK makes no
 * socket, the thread no accept of its own). */
static int listener(void)
{
    int one = 1, zero = 0, lowat = 64 * 1024, defer = KTCP_DEFER_ACCEPT_S;
    int s = socket(bind_addr.ss_family,
                   SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
        setsockopt(s, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat)) ||
        bind(s, (struct sockaddr *) &bind_addr, bind_len) || listen(s, 4096) ||
        setsockopt(s, IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof(zero)) ||
        setsockopt(s, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof(defer))) {
        perror("floor: listener");
        exit(EXIT_SETUP);
    }
    return s;
}

/* One connection per report of the level-triggered listener (an accept
 * that would fail with EAGAIN is never made; a queue is taken one per
 * loop), read at once: a client sends its request with the handshake's
 * last ACK or right after, so it is usually there and the connection
 * joins the epoll set only when it is not (or for the next request). */
static void accept_one(int ep, int ls)
{
    int fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    struct conn *c;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET,
                             .data.fd = fd};

    if (fd < 0)
        return;
    if ((rlim_t) fd >= max_fd) {
        close(fd);
        return;
    }
    c = conns[fd];
    if (!c) {
        c = malloc(sizeof(*c));
        if (!c) {
            close(fd);
            return;
        }
        c->owner = -1;
        __atomic_store_n(&conns[fd], c, __ATOMIC_RELEASE);
    }
    c->len = c->out_len = c->left = 0;
    c->out = NULL;
    c->sf = NULL;
    c->close_after = c->in_set = c->out_armed = 0;
    __atomic_store_n(&c->owner, ep, __ATOMIC_RELEASE);
    on_conn(ep, fd, EPOLLIN);
    if (c->owner != ep)
        return; /* answered and closed, or failed */
    /* ADD reports what is ready already: nothing arriving since the read
     * is missed */
    if (c->out_armed)
        ev.events |= EPOLLOUT;
    c->in_set = 1;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
        drop(fd);
}

static void *loop(void *arg)
{
    int ls = (int) (long) arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event evs[FLOOR_EVENTS];
    struct epoll_event lev = {.events = EPOLLIN, .data.fd = ls};

    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ls, &lev)) {
        perror("floor: epoll");
        exit(EXIT_SETUP);
    }
    for (;;) {
        int n = epoll_wait(ep, evs, FLOOR_EVENTS, -1);

        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;

            if (fd != ls) {
                on_conn(ep, fd, evs[i].events);
                continue;
            }
            accept_one(ep, ls);
        }
    }
    return NULL;
}

static void on_term(int sig)
{
    (void) sig;
    _exit(0);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"root", required_argument, NULL, 'r'},
        {"port", required_argument, NULL, 'p'},
        {"bind", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 't'},
        {"steer", required_argument, NULL, 'S'},
        {"shutdown", no_argument, NULL, 'D'},
        {"pad", required_argument, NULL, 'P'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *root = NULL, *port = "8080", *bind_to = "127.0.0.1";
    uint64_t threads = (uint64_t) sysconf(_SC_NPROCESSORS_ONLN), v;
    struct rlimit rl;
    int opt, steer = 1;

    while ((opt = getopt_long(argc, argv, "r:p:b:t:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'r':
            root = optarg;
            break;
        case 'p':
            if (!parse_u64_option("--port", optarg, 1, 65535, &v))
                return EXIT_USAGE;
            port = optarg;
            break;
        case 'b':
            bind_to = optarg;
            break;
        case 't':
            if (!parse_u64_option("--threads", optarg, 1, 256, &threads))
                return EXIT_USAGE;
            break;
        case 'S':
            if (strcmp(optarg, "cpu") && strcmp(optarg, "hash")) {
                fprintf(stderr, "floor: --steer %s: expected cpu or hash\n",
                        optarg);
                return EXIT_USAGE;
            }
            steer = optarg[0] == 'c';
            break;
        case 'D':
            opt_shutdown = 1;
            break;
        case 'P':
            if (!parse_u64_option("--pad", optarg, 16, 4096, &v))
                return EXIT_USAGE;
            opt_pad = (size_t) v;
            break;
        case 'V':
            ktcp_print_version("floor");
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (!root || optind != argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!resolve_tcp_address(bind_to, port, &bind_addr, &bind_len))
        return EXIT_SETUP;
    load_files(root);
    raise_fd_limit(1 << 20);
    if (getrlimit(RLIMIT_NOFILE, &rl))
        return EXIT_SETUP;
    max_fd = rl.rlim_cur;
    conns = calloc(max_fd, sizeof(*conns));
    if (!conns) {
        perror("floor: calloc");
        return EXIT_SETUP;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    /* every listener bound before the first connection is taken */
    int *ls = calloc(threads, sizeof(int));
    if (!ls)
        return EXIT_SETUP;
    for (uint64_t i = 0; i < threads; i++)
        ls[i] = listener();
    steer = steer && threads > 1 && ktcp_one_per_cpu((int) threads) &&
            !ktcp_reuseport_steer(ls[0], (unsigned) threads, true);
    fprintf(stderr, "floor: %d files, %lu threads, listening on port %s, %s\n",
            nfiles, (unsigned long) threads, port,
            steer ? "steered by CPU" : "hashed");
    for (uint64_t i = 1; i < threads; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, loop, (void *) (long) ls[i])) {
            fprintf(stderr, "floor: pthread_create failed\n");
            return EXIT_SETUP;
        }
    }
    loop((void *) (long) ls[0]);
    return 0;
}
