/* httpd-settings.c — ktcp-httpd's settings applied: at the start (the
 * MIME table of --mime-types, the checks of --test-config, the TLS
 * context, the trees, the access log) and at each SIGHUP, which reloads
 * the settings that can change while serving (gzip, gzip-static, expires,
 * listings, the sites, the address rules and request rates, the access
 * log, the TLS certificate, --shutdown-timeout) without touching a
 * connection. The options are parsed by httpd-options.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <urcu/compiler.h> /* caa_container_of */
#include "httpd-start.h"
#include "ktcp-net.h"
#include "ktcp-tls.h"

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

void httpd_reopen_log(const char *path, const char *why)
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

/* A site's per-request settings from h (its tree: root) and s, and the
 * planner's settings they make. */
static void site_from(const struct host_settings *h,
                      const struct settings *s,
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
    struct http_site_settings *in = &site->settings;
    in->gzip = s->gzip;
    in->dotfiles = s->dotfiles;
    in->expires = s->expires;
    in->gzip_static = s->gzip_static;
    in->no_listings = !s->listings;
    in->index = site->index_given ? &site->index : NULL;
    in->fallback = site->fallback_len ? site->fallback : NULL;
    in->fallback_len = site->fallback_len;
    in->error_pages = site->error_pages;
    in->error_pages_n = site->error_pages_n;
    in->mime = httpd_cfg.mime;
    in->headers = &site->headers;
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
    site_from(&s->site, s, root, &t->site[0]);
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
        site_from(h, s, root, &t->site[1 + k]);
        t->n++;
    }
    return t;
}

/* The live settings of s (httpd.h), its sites' trees opened now; NULL
 * after saying why. --limit-req's table is made the first time a rate
 * is set, its size fixed from then on. */
static struct httpd_live *live_make(const struct settings *s, const char *why)
{
    if (s->limit_req.rate && httpd_rate_setup(s->limit_req.entries) < 0) {
        fprintf(stderr,
                "ktcp-httpd: %s: --limit-req: no memory for its table\n", why);
        return NULL;
    }
    struct httpd_live *l = malloc(sizeof(*l));
    if (!l) {
        fprintf(stderr, "ktcp-httpd: %s: out of memory\n", why);
        return NULL;
    }
    *l = (struct httpd_live){
        .rate_limit = s->limit_req.rate,
        .rate_burst = s->limit_req.burst,
        .sites = sites_make(s, why),
        .access = s->access,
    };
    if (!l->sites) {
        free(l);
        return NULL;
    }
    return l;
}

static void live_free(struct rcu_head *head)
{
    struct httpd_live *l = caa_container_of(head, struct httpd_live, rcu);
    sites_free(l->sites);
    free(l);
}

/* l in place of the running settings; the object it replaces is freed
 * once every reader that may hold it has left its section. */
static void live_publish(struct httpd_live *l)
{
    struct httpd_live *old = atomic_exchange(&httpd_cfg.live, l);
    atomic_store(&httpd_cfg.access_rules, l->access.n > 0);
    if (old)
        urcu_memb_call_rcu(&old->rcu, live_free);
}

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

/* SIGHUP: read the settings again; apply what workers read atomically
 * (or through a pointer replaced whole), and say which other changes wait
 * for a restart. Connections and listeners are not touched. What else a
 * reload applies goes here, after the settings are read and before the
 * line that says what was reloaded. */
void httpd_settings_reload(int argc, char **argv, struct settings *running)
{
    /* the strings of the reload before: running->access_log points into
     * them until this reload replaces it */
    static struct settings last;
    struct settings n;
    struct httpd_live *l = NULL;
    if (httpd_load_settings(argc, argv, &n) != RT_CLI_OK ||
        !(l = live_make(&n, "SIGHUP"))) {
        /* what was wrong is said: nothing changes */
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
        {n.rt.accept_steer != running->rt.accept_steer, "--accept-steer"},
        {n.cache_size != running->cache_size, "--cache-size"},
        {n.open_files != running->open_files, "--open-files"},
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
        {n.proxy_protocol != running->proxy_protocol, "--proxy-protocol"},
        {n.tls_proxy_protocol != running->tls_proxy_protocol,
         "--tls-proxy-protocol"},
    };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        if (fixed[i].changed)
            fprintf(stderr,
                    "ktcp-httpd: SIGHUP: %s changed: it takes a restart, "
                    "the running value is kept\n",
                    fixed[i].flag);

    live_publish(l);
    reload_tls(&n);
    if (!running->limit_req.rate)
        running->limit_req.entries = n.limit_req.entries;
    running->limit_req.rate = n.limit_req.rate;
    /* read by the signal loop, on this thread, when a stop begins */
    running->rt.shutdown_timeout_s = n.rt.shutdown_timeout_s;
    /* the same path too: a reload also reopens the log, as SIGUSR1 does */
    if (n.access_log)
        httpd_reopen_log(n.access_log, "SIGHUP");
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

/* the kernel has the tls ULP (kTLS), probed at start */
static bool tls_ulp;

/* --tls-port's context, read before --user drops root (a key readable
 * by root only); false after saying why. */
static bool start_tls(const struct settings *s)
{
    char err[512];
    /* probed while still root: a kernel whose tls ULP is a module loads
     * it now (an unprivileged process cannot have it loaded). A kernel
     * without it never gets it, so OpenSSL is not asked to try kTLS on
     * each connection (two failed setsockopt calls a handshake). */
    tls_ulp = ktcp_tls_kernel_has_ulp();
    struct ktcp_tls_opts to = {
        .cert_file = s->tls_cert, .key_file = s->tls_key, .no_ktls = !tls_ulp};
    httpd_cfg.tls = ktcp_tls_ctx_new(&to, err, sizeof(err));
    if (!httpd_cfg.tls)
        fprintf(stderr, "ktcp-httpd: --tls-cert %s --tls-key %s: %s\n",
                s->tls_cert, s->tls_key, err);
    return httpd_cfg.tls != NULL;
}

/* The settings fixed until a restart, read by the layers below, from s. */
static void publish(const struct settings *s)
{
    httpd_cfg.root_path = s->site.root;
    httpd_cfg.cache_size = s->cache_size;
    httpd_cfg.status_path = s->status_path;
    httpd_cfg.listing_max = s->listing_max;
    httpd_cfg.listing_bytes = s->listing_bytes;
    httpd_cfg.dotfiles = s->dotfiles;
    httpd_cfg.proxy_protocol[0] = s->proxy_protocol;
    httpd_cfg.proxy_protocol[1] = s->tls_proxy_protocol;
    httpd_cfg.tls_handshake_timeout_ms = s->tls_handshake_timeout_ms;
    httpd_cfg.idle_timeout_ms = s->rt.idle_timeout_ms;
    httpd_cfg.per_ip_v6_prefix = s->rt.per_ip_v6_prefix > 0
                                     ? (unsigned) s->rt.per_ip_v6_prefix
                                     : RT_PER_IP_V6_PREFIX;
}

/* --open-files, or by default a quarter of the descriptors the process
 * may have (its soft RLIMIT_NOFILE, once raised to the hard one), never so
 * many that --max-conns connections (one descriptor each) and
 * HTTPD_FD_RESERVE others (listeners, log, epoll, the server's own) would
 * not fit beside them, but at least HTTPD_OPEN_FILES_MIN (a quarter, if
 * that is less): a --max-conns beyond the limit is out of reach anyway
 * (accept fails first), and was 0 then (the default 10,000 against a
 * limit of 1,024). The cache gives up its least recently used descriptor
 * for a new file (httpd-cache.c), so a few serve the files in use. */
#define HTTPD_FD_RESERVE 64
#define HTTPD_OPEN_FILES_MIN 64
static size_t open_files(const struct settings *s)
{
    struct rlimit rl;
    if (s->open_files >= 0)
        return (size_t) s->open_files;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 0;
    uint64_t lim = rl.rlim_cur == RLIM_INFINITY ? 1u << 20 : rl.rlim_cur;
    uint64_t need = (uint64_t) (s->rt.max_conns > 0 ? s->rt.max_conns : 0) +
                    HTTPD_FD_RESERVE;
    uint64_t n = lim / 4, least = HTTPD_OPEN_FILES_MIN;
    if (least > n)
        least = n;
    if (need < lim && lim - need < n)
        n = lim - need;
    if (need >= lim || n < least)
        n = least;
    return (size_t) n;
}

/* The access log, through an opener that keeps root when the server
 * drops to --user; false after saying why. */
static bool start_log(const struct settings *s, int argc, char **argv)
{
    /* a --config file read again at SIGHUP may name a log too */
    bool log_file = s->access_log && strcmp(s->access_log, "-") != 0;
    if (httpd_user_name() && (log_file || s->config)) {
        int err =
            httpd_opener_start(log_file ? s->access_log : NULL, argc, argv);
        if (err < 0) {
            fprintf(stderr, "ktcp-httpd: the access log's opener: %s\n",
                    strerror(-err));
            return false;
        }
    }
    httpd_cfg.open_log = httpd_open_log;
    if (s->access_log) {
        int err = httpd_log_open(s->access_log);
        if (err < 0)
            return rt_cli_bad("--access-log", s->access_log, strerror(-err));
    }
    return true;
}

int httpd_settings_start(struct settings *s, int argc, char **argv)
{
    publish(s);
    if (!load_mime_types(s))
        return 2;
    /* only root can change its user; anyone else serves as itself */
    if (geteuid() == 0 && !httpd_user_resolve(s->user))
        return 2;
    int problems = httpd_check(s);
    if (s->rt.second_port && !start_tls(s))
        problems++;
    if (s->test_config) {
        if (!problems)
            fprintf(stderr,
                    "ktcp-httpd: --test-config: the settings are "
                    "usable\n");
        return problems ? 1 : 0;
    }
    if (problems)
        return 1;
    httpd_cfg.root_fd = open(s->site.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (httpd_cfg.root_fd < 0) {
        rt_cli_bad("--root", s->site.root, strerror(errno));
        return 1;
    }
    struct httpd_live *l = live_make(s, "start");
    if (!l)
        return 1;
    live_publish(l);
    if (!start_log(s, argc, argv))
        return 1;

    /* one fd per connection: take all the kernel allows */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    httpd_cfg.open_files = open_files(s);
    s->rt.name = "ktcp-httpd";
    s->rt.handler = httpd_serve;
    s->rt.refuse = httpd_conn_refuse;
    s->rt.admit = httpd_client_allowed;
    s->rt.defer_accept_s = KTCP_DEFER_ACCEPT_S; /* HTTP and TLS: the client
                                                   speaks first */
    s->rt.worker_data_size = sizeof(struct httpd_worker);
    s->rt.worker_flush = httpd_worker_flush;
    s->rt.worker_exit = httpd_worker_exit;
    s->rt.listening = httpd_user_drop;
    return -1;
}

void httpd_settings_serving(const struct settings *s)
{
    char where[96];
    if (rt_socket_activated())
        snprintf(where, sizeof(where), "the socket passed by systemd");
    else
        snprintf(where, sizeof(where), "%s port %d",
                 s->rt.bind ? s->rt.bind : "every address", s->rt.port);
    char as[64] = "";
    if (httpd_user_name())
        snprintf(as, sizeof(as), " as %s", httpd_user_name());
    fprintf(stderr, "ktcp-httpd: serving %s on %s%s (model %s, %d worker%s)\n",
            s->site.root, where, as, rt_model_name(s->rt.model),
            s->rt.model == RT_MODEL_THREADS ? 1 : s->rt.workers,
            s->rt.model != RT_MODEL_THREADS && s->rt.workers > 1 ? "s" : "");
    if (httpd_cfg.tls)
        fprintf(stderr,
                "ktcp-httpd: HTTPS on port %d (%s; TLS 1.2 and 1.3, ALPN "
                "http/1.1; %s)\n",
                s->rt.second_port, ktcp_tls_library(),
                tls_ulp ? "kernel TLS (kTLS) TX and RX when the cipher allows"
                        : "records written by OpenSSL: this kernel has no tls "
                          "ULP for kTLS");
}
