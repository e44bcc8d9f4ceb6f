/* httpd-main.c — ktcp-httpd's start-up (the MIME table of --mime-types,
 * the --user to serve as, the runtime), and signals: TERM/INT stop,
 * USR1 reopens the access log, HUP reloads the settings that can change
 * while serving (gzip, gzip-static, expires, the access log) without
 * touching a connection. The options are parsed by httpd-options.c. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "httpd-options.h"

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static void reopen_log(const char *path, const char *why)
{
    int err = httpd_log_open(path);
    if (err < 0)
        fprintf(stderr,
                "ktcp-httpd: %s: --access-log %s: %s (still logging to the "
                "file open before)\n",
                why, path, strerror(-err));
    else
        fprintf(stderr, "ktcp-httpd: %s: access log reopened at %s\n", why,
                path);
}

/* The per-request site settings from s into site (zeroed first, so two
 * sites compare with memcmp). */
static struct httpd_site httpd_first_site;

static void site_from(const struct settings *s, struct httpd_site *site)
{
    memset(site, 0, sizeof(*site));
    site->index_given = s->index_given;
    if (s->index_given)
        site->index = s->index;
    memcpy(site->fallback, s->fallback, s->fallback_len);
    site->fallback_len = s->fallback_len;
}

/* --index, --fallback: a request holds the site only while it is
 * planned, so the one a reload replaces is freed at the reload after. */
static void reload_site(const struct settings *n)
{
    static struct httpd_site *retired;
    struct httpd_site want;
    site_from(n, &want);
    const struct httpd_site *cur = atomic_load(&httpd_cfg.site);
    if (memcmp(&want, cur, sizeof(want)) == 0)
        return;
    struct httpd_site *copy = malloc(sizeof(*copy));
    if (!copy) {
        fprintf(stderr,
                "ktcp-httpd: SIGHUP: --index and --fallback kept: "
                "out of memory\n");
        return;
    }
    *copy = want;
    const struct httpd_site *old = atomic_exchange(&httpd_cfg.site, copy);
    free(retired);
    /* main's first site is static, never freed */
    retired = old == &httpd_first_site ? NULL : (struct httpd_site *) old;
}

/* SIGHUP: read the settings again; apply gzip and the access log, which
 * workers read atomically, and say which other changes wait for a
 * restart. Connections and listeners are not touched. */
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
        {!same_str(n.root, running->root), "--root"},
        {n.rt.port != running->rt.port, "--port"},
        {!same_str(n.rt.bind, running->rt.bind), "--bind"},
        {n.rt.workers != running->rt.workers, "--threads"},
        {n.rt.model != running->rt.model, "--model"},
        {n.rt.idle_timeout_ms != running->rt.idle_timeout_ms,
         "--idle-timeout-ms"},
        {n.rt.max_conns != running->rt.max_conns, "--max-conns"},
        {n.rt.max_conns_per_ip != running->rt.max_conns_per_ip,
         "--max-conns-per-ip"},
        {n.rt.backlog != running->rt.backlog, "--backlog"},
        {n.rt.busy_poll_us != running->rt.busy_poll_us, "--busy-poll-us"},
        {n.cache_size != running->cache_size, "--cache-size"},
        {!same_str(n.status_path, running->status_path), "--status-path"},
        {!same_str(n.mime_types, running->mime_types), "--mime-types"},
        {n.error_pages_n != running->error_pages_n ||
             memcmp(n.error_pages, running->error_pages,
                    n.error_pages_n * sizeof(n.error_pages[0])) != 0,
         "--error-page"},
        {!same_str(n.user, running->user), "--user"},
        {n.dotfiles != running->dotfiles, "--dotfiles"},
        {n.listing_max != running->listing_max, "--listing-max"},
        {n.listing_bytes != running->listing_bytes, "--listing-bytes"},
    };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        if (fixed[i].changed)
            fprintf(stderr,
                    "ktcp-httpd: SIGHUP: %s changed: it takes a restart, "
                    "the running value is kept\n",
                    fixed[i].flag);

    atomic_store(&httpd_cfg.gzip, n.gzip);
    running->gzip = n.gzip;
    atomic_store(&httpd_cfg.gzip_static, n.gzip_static);
    running->gzip_static = n.gzip_static;
    atomic_store(&httpd_cfg.expires, n.expires);
    running->expires = n.expires;
    atomic_store(&httpd_cfg.listings, n.listings);
    running->listings = n.listings;
    reload_site(&n);
    /* the same path too: a reload also reopens the log, as SIGUSR1 does */
    if (n.access_log)
        reopen_log(n.access_log, "SIGHUP");
    else
        httpd_log_open(NULL);
    running->access_log = n.access_log;
    fprintf(stderr,
            "ktcp-httpd: SIGHUP: reloaded (gzip %s, access log %s, "
            "gzip-static %s, expires %u, listings %s)\n",
            n.gzip ? "on" : "off", n.access_log ? n.access_log : "off",
            n.gzip_static ? "on" : "off", n.expires, n.listings ? "on" : "off");
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

int main(int argc, char **argv)
{
    static struct settings s;

    switch (httpd_load_settings(argc, argv, &s)) {
    case RT_CLI_OK:
        break;
    case RT_CLI_EXIT:
        return 0;
    default:
        return 2;
    }

    httpd_cfg.root_path = s.root;
    httpd_cfg.gzip = s.gzip;
    httpd_cfg.cache_size = s.cache_size;
    httpd_cfg.status_path = s.status_path;
    httpd_cfg.gzip_static = s.gzip_static;
    httpd_cfg.expires = s.expires;
    httpd_cfg.listings = s.listings;
    httpd_cfg.listing_max = s.listing_max;
    httpd_cfg.listing_bytes = s.listing_bytes;
    httpd_cfg.error_pages = s.error_pages;
    httpd_cfg.error_pages_n = s.error_pages_n;
    site_from(&s, &httpd_first_site);
    httpd_cfg.site = &httpd_first_site;
    if (!load_mime_types(&s))
        return 2;
    httpd_cfg.dotfiles = s.dotfiles;
    /* only root can change its user; anyone else serves as itself */
    if (geteuid() == 0 && !resolve_user(s.user))
        return 2;
    httpd_cfg.root_fd = open(s.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (httpd_cfg.root_fd < 0) {
        rt_cli_bad("--root", s.root, strerror(errno));
        return 2;
    }
    if (s.access_log) {
        int err = httpd_log_open(s.access_log);
        if (err < 0) {
            rt_cli_bad("--access-log", s.access_log, strerror(-err));
            return 2;
        }
    }
    httpd_cfg.idle_timeout_ms = s.rt.idle_timeout_ms;

    /* one fd per connection: take all the kernel allows */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    /* Signals: SIGPIPE never (writes return EPIPE instead); the others
     * blocked in every thread (they inherit the mask) and taken by sigwait
     * here, so no handler runs in a worker. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGUSR1);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    if (httpd_cache_init() < 0) {
        fprintf(stderr, "ktcp-httpd: cannot create the content cache\n");
        return 1;
    }
    s.rt.name = "ktcp-httpd";
    s.rt.handler = httpd_conn_serve;
    s.rt.refuse = httpd_conn_refuse;
    s.rt.worker_data_size = sizeof(struct httpd_worker);
    s.rt.worker_flush = httpd_worker_flush;
    s.rt.worker_exit = httpd_worker_exit;
    s.rt.listening = drop_privileges;
    int err = rt_start(&s.rt);
    if (err < 0) {
        if (err != -EINVAL && err != -EADDRINUSE && err != -EACCES &&
            err != -EPERM)
            fprintf(stderr, "ktcp-httpd: cannot start: %s\n", strerror(-err));
        return 1;
    }
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
            s.root, where, as, rt_model_name(s.rt.model),
            s.rt.model == RT_MODEL_THREADS ? 1 : s.rt.workers,
            s.rt.model != RT_MODEL_THREADS && s.rt.workers > 1 ? "s" : "");

    for (;;) {
        int sig;
        if (sigwait(&sigs, &sig) != 0)
            continue;
        if (sig == SIGUSR1) {
            if (s.access_log && strcmp(s.access_log, "-") != 0)
                reopen_log(s.access_log, "SIGUSR1");
        } else if (sig == SIGHUP) {
            reload(argc, argv, &s);
        } else {
            break;
        }
    }
    rt_stop();
    rt_finish();
    httpd_settings_release(&s);
    return 0;
}
