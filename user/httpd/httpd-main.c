/* httpd-main.c — ktcp-httpd's start-up (the MIME table of --mime-types,
 * the --user to serve as, the checks of --test-config, the runtime) and
 * the hooks of the runtime's signal loop (user/rt/rt-cli.c): SIGUSR1
 * reopens the access log, SIGHUP reloads the settings that can change
 * while serving (gzip, gzip-static, expires, the access log,
 * --shutdown-timeout) without touching a connection. The options are
 * parsed by httpd-options.c.
 *
 * Started as root with a --user to serve as, the access log stays
 * reopenable after the drop: a small process forked before it, which
 * keeps root and nothing else, opens the log at each reopen and passes the
 * descriptor back (SCM_RIGHTS), as nginx's master process reopens the logs
 * for its workers. It opens the file of the start, or the one the settings
 * name when it reads them itself (the --config file, as root, at the
 * request): a server that asks for any other path is refused, so the
 * serving user cannot have root open a file of its choosing. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "httpd-options.h"
#include "ktcp-tls.h"

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static void reopen_log(const char *path, const char *why)
{
    int err = httpd_log_open(path);
    if (err < 0) {
        rt_count(HTTPD_C_LOG_REOPEN_FAILED, 1);
        fprintf(stderr,
                "ktcp-httpd: %s: --access-log %s: %s (still logging to the "
                "file open before)\n",
                why, path, strerror(-err));
    } else {
        fprintf(stderr, "ktcp-httpd: %s: access log reopened at %s\n", why,
                path);
    }
}

/* A site's per-request settings from h (its tree: root). */
static void site_from(const struct host_settings *h,
                      struct httpd_root root,
                      struct httpd_site *site)
{
    memset(site, 0, sizeof(*site));
    site->root = root;
    memcpy(site->error_pages, h->error_pages,
           h->error_pages_n * sizeof(h->error_pages[0]));
    site->error_pages_n = h->error_pages_n;
    site->index_given = h->index_given;
    if (h->index_given)
        site->index = h->index;
    memcpy(site->fallback, h->fallback, h->fallback_len);
    site->fallback_len = h->fallback_len;
    site->headers = h->headers;
}

/* The tree at path: 0, or -errno. */
static int root_open(const char *path, struct httpd_root *root)
{
    struct stat st;
    root->fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root->fd < 0)
        return -errno;
    if (fstat(root->fd, &st) < 0) {
        int err = -errno;
        close(root->fd);
        return err;
    }
    root->dev = (uint64_t) st.st_dev;
    root->ino = (uint64_t) st.st_ino;
    return 0;
}

/* Close the trees of sites' hosts (the default's is --root's, kept). */
static void sites_free(struct httpd_sites *t)
{
    if (!t)
        return;
    for (size_t i = 1; i < t->n; i++)
        close(t->site[i].root.fd);
    free(t);
}

/* The sites s names: the default on --root's tree (httpd_cfg.root_fd),
 * each --host on its own, opened now. NULL after saying why. */
static struct httpd_sites *sites_make(const struct settings *s, const char *why)
{
    size_t n = 1 + s->names.n;
    struct httpd_sites *t = calloc(1, sizeof(*t) + n * sizeof(t->site[0]));
    struct httpd_root root = {.fd = httpd_cfg.root_fd};
    struct stat st;
    if (!t) {
        fprintf(stderr, "ktcp-httpd: %s: out of memory\n", why);
        return NULL;
    }
    t->names = s->names;
    if (fstat(root.fd, &st) == 0) {
        root.dev = (uint64_t) st.st_dev;
        root.ino = (uint64_t) st.st_ino;
    }
    site_from(&s->site, root, &t->site[0]);
    t->n = 1;
    for (uint32_t k = 0; k < s->names.n; k++) {
        const struct host_settings *h = &s->hosts[k];
        int err = root_open(h->root, &root);
        if (err < 0) {
            fprintf(stderr, "ktcp-httpd: %s: --host %s: --root %s: %s\n", why,
                    s->names.h[k].name, h->root, strerror(-err));
            sites_free(t);
            return NULL;
        }
        site_from(h, root, &t->site[1 + k]);
        t->n++;
    }
    return t;
}

/* The sites (--host, and per site --root, --error-page, --index,
 * --fallback, --add-header, --cors): a request holds them only while it
 * is planned, so the set a reload replaces is freed at the reload after.
 * False if the new set could not be made (the running one is kept). */
static bool reload_sites(const struct settings *n)
{
    static struct httpd_sites *retired;
    struct httpd_sites *t = sites_make(n, "SIGHUP");
    if (!t)
        return false;
    struct httpd_sites *old = (struct httpd_sites *) atomic_exchange(
        &httpd_cfg.sites, (const struct httpd_sites *) t);
    sites_free(retired);
    retired = old;
    return true;
}

/* --allow and --deny: the rules are read at each accept, briefly, so the
 * list a reload replaces is freed at the reload after. Same rules: kept.
 * At the start (retire false) nothing is replaced. */
static void publish_access(const struct http_access *want, bool retire)
{
    static struct http_access *retired;
    const struct http_access *cur = atomic_load(&httpd_cfg.access);
    size_t used =
        offsetof(struct http_access, rule) + want->n * sizeof(want->rule[0]);
    if (cur ? cur->n == want->n && memcmp(cur, want, used) == 0 : !want->n)
        return;
    struct http_access *copy = NULL;
    if (want->n && !(copy = malloc(sizeof(*copy)))) {
        fprintf(stderr, "ktcp-httpd: --allow and --deny kept: out of memory\n");
        return;
    }
    if (copy)
        memcpy(copy, want, sizeof(*copy));
    const struct http_access *old = atomic_exchange(&httpd_cfg.access, copy);
    if (retire) {
        free(retired);
        retired = (struct http_access *) old;
    }
}

/* --limit-req: rate and burst apply to the next request; the table is
 * made the first time a rate is set, its size fixed from then on. */
static bool publish_rate(const struct http_rate_conf *c)
{
    if (c->rate && httpd_rate_setup(c->entries) < 0) {
        rt_cli_bad("--limit-req", "", "no memory for its table");
        return false;
    }
    atomic_store(&httpd_cfg.rate_burst, (uint64_t) c->rate << 32 | c->burst);
    return true;
}

/* SIGHUP: read the settings again; apply gzip and the access log, which
 * workers read atomically, and say which other changes wait for a
 * restart. Connections and listeners are not touched. What else a reload
 * applies goes here, after the settings are read and before the line that
 * says what was reloaded. */
/* SIGHUP: the certificate and key of --tls-port read again (the paths
 * may have changed too); new handshakes use them, open connections keep
 * theirs, and a pair that does not load leaves the running one. */
static void reload_tls(const struct settings *n)
{
    if (!httpd_cfg.tls || !n->tls_cert || !n->tls_key)
        return;
    char err[512];
    if (ktcp_tls_ctx_reload(httpd_cfg.tls, n->tls_cert, n->tls_key, err,
                            sizeof(err)) < 0)
        fprintf(stderr,
                "ktcp-httpd: SIGHUP: --tls-cert %s --tls-key %s: %s (kept "
                "the certificate and key loaded before)\n",
                n->tls_cert, n->tls_key, err);
    else
        fprintf(stderr,
                "ktcp-httpd: SIGHUP: TLS certificate %s and key %s "
                "reloaded\n",
                n->tls_cert, n->tls_key);
}

static void reload(int argc, char **argv, struct settings *running)
{
    /* the strings of the reload before: running->access_log points into
     * them until this reload replaces it */
    static struct settings last;
    struct settings n;
    if (httpd_load_settings(argc, argv, &n) != RT_CLI_OK) {
        fprintf(stderr, "ktcp-httpd: SIGHUP: kept the running settings\n");
        httpd_settings_release(&n);
        return;
    }
    const struct {
        bool changed;
        const char *flag;
    } fixed[] = {
        {!same_str(n.site.root, running->site.root), "--root"},
        {n.rt.port != running->rt.port, "--port"},
        {!same_str(n.rt.bind, running->rt.bind), "--bind"},
        {n.rt.workers != running->rt.workers, "--threads"},
        {n.rt.model != running->rt.model, "--model"},
        {n.rt.idle_timeout_ms != running->rt.idle_timeout_ms,
         "--idle-timeout-ms"},
        {n.rt.max_conns != running->rt.max_conns, "--max-conns"},
        {n.rt.max_conns_per_ip != running->rt.max_conns_per_ip,
         "--max-conns-per-ip"},
        {n.rt.per_ip_v6_prefix != running->rt.per_ip_v6_prefix,
         "--per-ip-v6-prefix"},
        {n.rt.backlog != running->rt.backlog, "--backlog"},
        {n.rt.busy_poll_us != running->rt.busy_poll_us, "--busy-poll-us"},
        {n.cache_size != running->cache_size, "--cache-size"},
        {!same_str(n.status_path, running->status_path), "--status-path"},
        {!same_str(n.mime_types, running->mime_types), "--mime-types"},
        {!same_str(n.user, running->user), "--user"},
        {n.dotfiles != running->dotfiles, "--dotfiles"},
        {n.listing_max != running->listing_max, "--listing-max"},
        {n.listing_bytes != running->listing_bytes, "--listing-bytes"},
        {n.rt.second_port != running->rt.second_port, "--tls-port"},
        {n.tls_handshake_timeout_ms != running->tls_handshake_timeout_ms,
         "--tls-handshake-timeout-ms"},
        {n.limit_req.entries != running->limit_req.entries &&
             running->limit_req.rate,
         "--limit-req's entries"},
    };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        if (fixed[i].changed)
            fprintf(stderr,
                    "ktcp-httpd: SIGHUP: %s changed: it takes a restart, "
                    "the running value is kept\n",
                    fixed[i].flag);

    reload_tls(&n);
    atomic_store(&httpd_cfg.gzip, n.gzip);
    running->gzip = n.gzip;
    atomic_store(&httpd_cfg.gzip_static, n.gzip_static);
    running->gzip_static = n.gzip_static;
    atomic_store(&httpd_cfg.expires, n.expires);
    running->expires = n.expires;
    atomic_store(&httpd_cfg.listings, n.listings);
    running->listings = n.listings;
    if (!reload_sites(&n))
        fprintf(stderr,
                "ktcp-httpd: SIGHUP: kept the running sites (hosts, "
                "error pages, index, fallback, added fields)\n");
    publish_access(&n.access, true);
    if (publish_rate(&n.limit_req)) {
        if (!running->limit_req.rate)
            running->limit_req.entries = n.limit_req.entries;
        running->limit_req.rate = n.limit_req.rate;
        running->limit_req.burst = n.limit_req.burst;
    }
    /* read by the signal loop, on this thread, when a stop begins */
    running->rt.shutdown_timeout_s = n.rt.shutdown_timeout_s;
    /* the same path too: a reload also reopens the log, as SIGUSR1 does */
    if (n.access_log)
        reopen_log(n.access_log, "SIGHUP");
    else
        httpd_log_open(NULL);
    running->access_log = n.access_log;
    fprintf(stderr,
            "ktcp-httpd: SIGHUP: reloaded (gzip %s, access log %s, "
            "gzip-static %s, expires %u, listings %s, %u address "
            "rule%s, limit-req %s)\n",
            n.gzip ? "on" : "off", n.access_log ? n.access_log : "off",
            n.gzip_static ? "on" : "off", n.expires, n.listings ? "on" : "off",
            n.access.n, n.access.n == 1 ? "" : "s",
            n.limit_req.rate ? "on" : "off");
    httpd_settings_release(&last);
    last.owned = n.owned;
    last.owned_n = n.owned_n;
}

/* --mime-types: read the file (at most HTTP_MIME_FILE_MAX bytes) into
 * core's table, which the planner consults before its own. A missing
 * file leaves core's table alone; false on another error. */
static bool load_mime_types(const struct settings *s)
{
    static struct http_mime_table table;
    if (!s->mime_types[0])
        return true;
    FILE *f = fopen(s->mime_types, "re");
    if (!f) {
        if (errno == ENOENT) {
            if (s->mime_types_given)
                fprintf(stderr,
                        "ktcp-httpd: --mime-types %s: no such file, "
                        "using the built-in table\n",
                        s->mime_types);
            return true;
        }
        return rt_cli_bad("--mime-types", s->mime_types, strerror(errno));
    }
    char *text = malloc(HTTP_MIME_FILE_MAX);
    size_t len = text ? fread(text, 1, HTTP_MIME_FILE_MAX, f) : 0;
    bool ok = text && !ferror(f);
    if (ok && len == HTTP_MIME_FILE_MAX && fgetc(f) != EOF)
        fprintf(stderr,
                "ktcp-httpd: --mime-types %s: only its first %d bytes are "
                "read\n",
                s->mime_types, HTTP_MIME_FILE_MAX);
    fclose(f);
    char *store = ok ? malloc(HTTP_MIME_STORE_SIZE(len)) : NULL;
    table.types =
        store ? calloc(HTTP_MIME_TABLE_MAX, sizeof(*table.types)) : NULL;
    if (!table.types) {
        free(text);
        free(store);
        return rt_cli_bad("--mime-types", s->mime_types,
                          ok ? strerror(ENOMEM) : "read error");
    }
    http_mime_table_parse(&table, HTTP_MIME_TABLE_MAX, store,
                          HTTP_MIME_STORE_SIZE(len), text, len);
    free(text); /* the table's strings are in store, kept for good */
    httpd_cfg.mime = &table;
    return true;
}

/* The account --user names, looked up before anything is bound so that a
 * wrong name fails at once; dropped to once the listeners are open. */
static uid_t serve_uid;
static gid_t serve_gid;
static const char *serve_user;

static bool resolve_user(const char *name)
{
    errno = 0;
    struct passwd *pw = getpwnam(name);
    if (!pw) {
        rt_cli_bad("--user", name, errno ? strerror(errno) : "no such user");
        return false;
    }
    if (pw->pw_uid == 0) {
        /* asked for by name: keep root (nginx's "user root") */
        fprintf(stderr,
                "ktcp-httpd: --user %s: keeping root's privileges: "
                "every file root may read is served\n",
                name);
        return true;
    }
    if (pw->pw_gid == 0) {
        rt_cli_bad("--user", name, "has group root: name an unprivileged user");
        return false;
    }
    serve_uid = pw->pw_uid;
    serve_gid = pw->pw_gid;
    serve_user = name;
    return true;
}

/* Root's groups, then its gid, then its uid (after setuid nothing else
 * could be changed); each failure is fatal, and root must be gone for
 * good. Runs before any thread serves. */
static int drop_privileges(void)
{
    if (!serve_user)
        return 0;
    const char *step = "setgroups";
    if (setgroups(0, NULL) < 0)
        goto fail;
    step = "setgid";
    if (setgid(serve_gid) < 0)
        goto fail;
    step = "setuid";
    if (setuid(serve_uid) < 0)
        goto fail;
    if (setuid(0) == 0 || getegid() != serve_gid) {
        errno = EPERM;
        step = "root regained";
        goto fail;
    }
    return 0;
fail:
    fprintf(stderr,
            "ktcp-httpd: --user %s: cannot drop root's privileges: "
            "%s: %s\n",
            serve_user, step, strerror(errno));
    return -EPERM;
}

/* ---- the access log's opener, kept as root ---- */

static int opener_sock = -1; /* to the opener, or -1: none */
static char *opener_path;    /* the file it opens; NULL: none yet */
static int main_argc;        /* the command line, read again by the */
static char **main_argv;     /* opener when asked for another file */

static int open_log_file(const char *path)
{
    int fd =
        open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0644);
    return fd < 0 ? -errno : fd;
}

/* In the opener: whether path may be opened, the file of the start or
 * the access log of the settings as root reads them now (a SIGHUP's new
 * --config); the latter becomes opener_path. */
static bool opener_may_open(const char *path)
{
    if (opener_path && strcmp(path, opener_path) == 0)
        return true;
    struct settings n;
    bool ok = httpd_load_settings(main_argc, main_argv, &n) == RT_CLI_OK &&
              n.access_log && strcmp(n.access_log, "-") != 0 &&
              strcmp(n.access_log, path) == 0;
    httpd_settings_release(&n);
    if (ok) {
        char *p = strdup(path);
        if (!p)
            return false;
        free(opener_path);
        opener_path = p;
    }
    return ok;
}

/* The opener: root's privileges and nothing else to do but open the path
 * each request names when opener_may_open allows it, answering errno (0)
 * with the descriptor attached. It ends with the server
 * (PR_SET_PDEATHSIG, or the socket's end); the signals an operator sends
 * the server are not its own. */
static __attribute__((noreturn)) void opener_main(int sock, pid_t server)
{
    static const int sigs[] = {SIGTERM, SIGINT,  SIGQUIT,
                               SIGHUP,  SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        signal(sigs[i], SIG_IGN);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != server)
        _exit(0);
    prctl(PR_SET_NAME, "ktcp-httpd-log");
    for (;;) {
        char req[PATH_MAX + 1];
        ssize_t n = recv(sock, req, sizeof(req) - 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            _exit(0);
        req[n] = '\0';
        int fd = strlen(req) == (size_t) n && opener_may_open(req)
                     ? open_log_file(req)
                     : -EPERM;
        int err = fd < 0 ? -fd : 0;
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int))];
        } u;
        struct iovec iov = {&err, sizeof(err)};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        if (fd >= 0) {
            m.msg_control = u.buf;
            m.msg_controllen = sizeof(u.buf);
            struct cmsghdr *c = CMSG_FIRSTHDR(&m);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &fd, sizeof(int));
        }
        if (sendmsg(sock, &m, MSG_NOSIGNAL) < 0 && errno != EINTR)
            _exit(0);
        if (fd >= 0)
            close(fd);
    }
}

/* Fork the opener, path its first file (or NULL); before any thread
 * exists. */
static int opener_start(const char *path)
{
    int sv[2];
    pid_t server = getpid();

    opener_path = path ? strdup(path) : NULL;
    if ((path && !opener_path) ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int err = -errno;
        close(sv[0]);
        close(sv[1]);
        return err;
    }
    if (pid == 0) {
        close(sv[0]);
        opener_main(sv[1], server);
    }
    close(sv[1]);
    opener_sock = sv[0];
    return 0;
}

/* httpd_cfg.open_log: through the opener when there is one, else
 * directly. Main thread only. */
static int open_log(const char *path)
{
    if (opener_sock < 0)
        return open_log_file(path);
    size_t len = strlen(path);
    if (len >= PATH_MAX)
        return -ENAMETOOLONG;
    if (send(opener_sock, path, len, MSG_NOSIGNAL) < 0)
        return -errno;
    int err = 0;
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct iovec iov = {&err, sizeof(err)};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = u.buf,
                       .msg_controllen = sizeof(u.buf)};
    ssize_t n;
    do
        n = recvmsg(opener_sock, &m, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    if (n != (ssize_t) sizeof(err))
        return -EPIPE; /* the opener is gone */
    if (err)
        return -err;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
        return -EPROTO;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof(fd));
    return fd;
}

/* ---- checks (--test-config, and every start) ---- */

static int problem(const char *flag, const char *arg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int problem(const char *flag, const char *arg, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "ktcp-httpd: %s%s%s: ", flag, arg ? " " : "",
            arg ? arg : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

/* What the serving user needs of the tree, checked as that user and as the
 * server reaches it, from the descriptor of the root opened before (the
 * directories above it are not its business): a directory it may enter
 * and list, and openat2(2), by which every file is opened
 * (RESOLVE_BENEATH). The number of problems, each named on a line of its
 * own. */
static int check_tree(int root_fd, const char *root, const char *who)
{
    int problems = 0;
    if (faccessat(root_fd, "", X_OK, AT_EMPTY_PATH | AT_EACCESS) < 0)
        problems += problem("--root", root, "%s may not enter it: %s", who,
                            strerror(errno));
    int fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno != EACCES)
        problems += problem("--root", root, "%s", strerror(errno));
    else if (fd < 0)
        problems += problem("--root", root, "%s may not list it: %s", who,
                            strerror(errno));
    else
        close(fd);
    struct open_how how = {
        .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    long r = syscall(SYS_openat2, root_fd, ".", &how, sizeof(how));
    if (r < 0 && (errno == ENOSYS || errno == EPERM))
        problems += problem("openat2", NULL,
                            "%s: every file is opened by it (Linux 5.6 or "
                            "later, and no seccomp filter refusing it)",
                            strerror(errno));
    if (r >= 0)
        close((int) r);
    return problems;
}

/* check_tree as the user that will serve: a child that drops to it first
 * when root changes user. */
static int check_tree_as_server(const char *root)
{
    int root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        return problem("--root", root, "%s", strerror(errno));
    if (!serve_user) {
        int n =
            check_tree(root_fd, root, geteuid() == 0 ? "root" : "this user");
        close(root_fd);
        return n;
    }
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(root_fd);
        return problem("--user", serve_user, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        char who[96];
        if (setgroups(0, NULL) < 0 || setgid(serve_gid) < 0 ||
            setuid(serve_uid) < 0)
            _exit(problem("--user", serve_user, "cannot become it: %s",
                          strerror(errno)));
        snprintf(who, sizeof(who), "user %s", serve_user);
        int n = check_tree(root_fd, root, who);
        fflush(stderr);
        _exit(n);
    }
    close(root_fd);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return problem("--user", serve_user, "waitpid: %s",
                           strerror(errno));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* Every check: one line per problem; their number. */
static int check_settings(const struct settings *s)
{
    int problems = check_tree_as_server(s->site.root);
    for (uint32_t k = 0; k < s->names.n; k++)
        problems += check_tree_as_server(s->hosts[k].root);
    if (s->access_log && strcmp(s->access_log, "-") != 0) {
        int fd = open_log_file(s->access_log);
        if (fd < 0)
            problems +=
                problem("--access-log", s->access_log, "%s", strerror(-fd));
        else
            close(fd);
    }
    return problems;
}

/* ---- the runtime's hooks ---- */

static struct settings s; /* the running settings */

static int on_start(void)
{
    if (httpd_cache_init() < 0) {
        fprintf(stderr, "ktcp-httpd: cannot create the content cache\n");
        return 1;
    }
    return 0;
}

/* the kernel has the tls ULP (kTLS), probed at start */
static bool tls_ulp;

static void on_serving(void)
{
    char where[96];
    if (rt_socket_activated())
        snprintf(where, sizeof(where), "the socket passed by systemd");
    else
        snprintf(where, sizeof(where), "%s port %d",
                 s.rt.bind ? s.rt.bind : "every address", s.rt.port);
    char as[64] = "";
    if (serve_user)
        snprintf(as, sizeof(as), " as %s", serve_user);
    fprintf(stderr, "ktcp-httpd: serving %s on %s%s (model %s, %d worker%s)\n",
            s.site.root, where, as, rt_model_name(s.rt.model),
            s.rt.model == RT_MODEL_THREADS ? 1 : s.rt.workers,
            s.rt.model != RT_MODEL_THREADS && s.rt.workers > 1 ? "s" : "");
    if (httpd_cfg.tls) {
        bool ulp = tls_ulp;
        fprintf(stderr,
                "ktcp-httpd: HTTPS on port %d (%s; TLS 1.2 and 1.3, ALPN "
                "http/1.1; %s)\n",
                s.rt.second_port, ktcp_tls_library(),
                ulp ? "kernel TLS (kTLS) TX and RX when the cipher allows"
                    : "records written by OpenSSL: this kernel has no tls "
                      "ULP for kTLS");
    }
}

static void on_reload(void)
{
    reload(main_argc, main_argv, &s);
}

static void on_reopen(void)
{
    if (s.access_log && strcmp(s.access_log, "-") != 0)
        reopen_log(s.access_log, "SIGUSR1");
}

static void on_stopped(void)
{
    ktcp_tls_ctx_free(httpd_cfg.tls);
    httpd_cfg.tls = NULL;
    httpd_settings_release(&s);
}

int main(int argc, char **argv)
{
    /* before any thread: every signal the loop answers is caught */
    rt_cli_signals();
    main_argc = argc;
    main_argv = argv;
    switch (httpd_load_settings(argc, argv, &s)) {
    case RT_CLI_OK:
        break;
    case RT_CLI_EXIT:
        return 0;
    default:
        return 2;
    }

    httpd_cfg.root_path = s.site.root;
    httpd_cfg.gzip = s.gzip;
    httpd_cfg.cache_size = s.cache_size;
    httpd_cfg.status_path = s.status_path;
    httpd_cfg.gzip_static = s.gzip_static;
    httpd_cfg.expires = s.expires;
    httpd_cfg.listings = s.listings;
    httpd_cfg.listing_max = s.listing_max;
    httpd_cfg.listing_bytes = s.listing_bytes;
    publish_access(&s.access, false);
    httpd_cfg.per_ip_v6_prefix = s.rt.per_ip_v6_prefix > 0
                                     ? (unsigned) s.rt.per_ip_v6_prefix
                                     : RT_PER_IP_V6_PREFIX;
    if (!publish_rate(&s.limit_req))
        return 1;
    if (!load_mime_types(&s))
        return 2;
    httpd_cfg.dotfiles = s.dotfiles;
    /* only root can change its user; anyone else serves as itself */
    if (geteuid() == 0 && !resolve_user(s.user))
        return 2;
    int problems = check_settings(&s);
    httpd_cfg.tls_handshake_timeout_ms = s.tls_handshake_timeout_ms;
    if (s.rt.second_port) {
        /* read before --user drops root: a key readable by root only */
        char err[512];
        struct ktcp_tls_opts to = {.cert_file = s.tls_cert,
                                   .key_file = s.tls_key};
        httpd_cfg.tls = ktcp_tls_ctx_new(&to, err, sizeof(err));
        /* probed while still root: a kernel whose tls ULP is a module
         * loads it now (an unprivileged process cannot have it loaded) */
        tls_ulp = ktcp_tls_kernel_has_ulp();
        if (!httpd_cfg.tls) {
            fprintf(stderr, "ktcp-httpd: --tls-cert %s --tls-key %s: %s\n",
                    s.tls_cert, s.tls_key, err);
            problems++;
        }
    }
    if (s.test_config) {
        if (!problems)
            fprintf(stderr,
                    "ktcp-httpd: --test-config: the settings are "
                    "usable\n");
        return problems ? 1 : 0;
    }
    if (problems)
        return 1;
    httpd_cfg.root_fd = open(s.site.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (httpd_cfg.root_fd < 0) {
        rt_cli_bad("--root", s.site.root, strerror(errno));
        return 1;
    }
    httpd_cfg.sites = sites_make(&s, "start");
    if (!httpd_cfg.sites)
        return 1;
    /* a --config file read again at SIGHUP may name a log too */
    bool log_file = s.access_log && strcmp(s.access_log, "-") != 0;
    if (serve_user && (log_file || s.config)) {
        int err = opener_start(log_file ? s.access_log : NULL);
        if (err < 0) {
            fprintf(stderr, "ktcp-httpd: the access log's opener: %s\n",
                    strerror(-err));
            return 1;
        }
    }
    httpd_cfg.open_log = open_log;
    if (s.access_log) {
        int err = httpd_log_open(s.access_log);
        if (err < 0) {
            rt_cli_bad("--access-log", s.access_log, strerror(-err));
            return 1;
        }
    }
    httpd_cfg.idle_timeout_ms = s.rt.idle_timeout_ms;

    /* one fd per connection: take all the kernel allows */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    s.rt.name = "ktcp-httpd";
    s.rt.handler = httpd_serve;
    s.rt.refuse = httpd_conn_refuse;
    s.rt.admit = httpd_client_allowed;
    s.rt.worker_data_size = sizeof(struct httpd_worker);
    s.rt.worker_flush = httpd_worker_flush;
    s.rt.worker_exit = httpd_worker_exit;
    s.rt.listening = drop_privileges;
    struct rt_cli *cli = httpd_cli();
    cli->start = on_start;
    cli->serving = on_serving;
    cli->reload = on_reload;
    cli->reopen = on_reopen;
    cli->stopped = on_stopped;
    return rt_cli_serve(cli, &s.rt);
}
