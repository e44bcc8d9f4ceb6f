/* httpd-main.c — ktcp-httpd: options (the command line and --config),
 * set-up (the MIME table of --mime-types), and signals: TERM/INT stop,
 * USR1 reopens the access log, HUP reloads the settings that can change
 * while serving (gzip, gzip-static, expires, the access log) without
 * touching a connection. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "httpd.h"
#include "ktcp-version.h"

#define DEFAULT_PORT 8081
/* Flags shared with ktcp-echo and the modules' parameters: the same names,
 * units and defaults (docs/operating.md, "Flags"). NULL: every address,
 * IPv6 and IPv4, as the modules listen. */
#define DEFAULT_BIND NULL
#define DEFAULT_MAX_CONNS 10000
#define DEFAULT_BACKLOG 1024
#define DEFAULT_IDLE_TIMEOUT_MS 30000
#define DEFAULT_CACHE_SIZE (64UL * 1024 * 1024)
#define NO_TIMEOUT_MS (24 * 3600 * 1000) /* --idle-timeout-ms 0 */
#define DEFAULT_MIME_TYPES "/etc/mime.types"
#define DEFAULT_USER "nobody"


static const char *model_names[] = {"threads", "epoll", "mn"};

static void usage(FILE *out)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(out,
            "Usage: ktcp-httpd [OPTION]...\n"
            "Serve the files under a directory over HTTP/1.1 (GET, HEAD).\n"
            "\n"
            "  -r, --root DIR          directory to serve (default: the "
            "current directory)\n"
            "  -p, --port N            TCP port (default: %d)\n"
            "  -b, --bind ADDR         numeric IPv4/IPv6 address to listen "
            "on (default: every\n"
            "                          address, IPv6 and IPv4, as the "
            "modules; 127.0.0.1\n"
            "                          keeps a server started by hand on this "
            "machine;\n"
            "                          a socket passed by systemd's socket "
            "activation\n"
            "                          replaces --bind and --port)\n"
            "  -t, --threads N         worker threads for epoll and mn "
            "(default: one per\n"
            "                          online CPU, here %ld)\n"
            "  -m, --model MODEL       threads | epoll | mn (default: epoll)\n"
            "  -i, --idle-timeout-ms MS  close a connection idle this long, "
            "or whose request\n"
            "                          head is not complete this long after "
            "its first byte\n"
            "                          (408); also bounds each wait for a "
            "slow reader;\n"
            "                          0 = never (default: %d; "
            "--idle-timeout MS is\n"
            "                          the old spelling, still accepted)\n"
            "  -c, --max-conns N       answer connections beyond N with 503 "
            "and close them\n"
            "                          (default: %d; 0 = no limit)\n"
            "      --max-conns-per-ip N  the same for connections beyond N "
            "from one client\n"
            "                          address (IPv4 and IPv4-mapped IPv6 "
            "count as one)\n"
            "                          (default: 0 = no limit)\n"
            "      --backlog N         listen backlog (default: %d)\n"
            "      --gzip, --no-gzip   gzip compressible files when the client "
            "accepts it\n"
            "                          (default: --gzip)\n"
            "      --gzip-static, --no-gzip-static\n"
            "                          serve FILE.gz (Content-Encoding: gzip) "
            "for FILE when\n"
            "                          it is beside it, not older, and the "
            "client accepts\n"
            "                          gzip (default: --no-gzip-static)\n"
            "      --expires SECONDS   files' 200, 206 and 304 carry "
            "Cache-Control: max-age\n"
            "                          and Expires SECONDS ahead, at most "
            "%d; 0 = off\n"
            "                          (default: 0)\n"
            "      --error-page CODE=/PATH\n"
            "                          answer status CODE (400..599) with the "
            "file PATH\n"
            "                          beneath the root, keeping the status; "
            "repeatable,\n"
            "                          at most %d (default: none, built-in "
            "text)\n"
            "      --mime-types FILE   Content-Types by extension from FILE "
            "(mime.types\n"
            "                          format) before the built-in table; "
            "a missing file or\n"
            "                          '' means the built-in table only\n"
            "                          (default: %s)\n"
            "      --cache-size BYTES  content cache limit, suffix K, M or G "
            "(default: 64M)\n"
            "      --access-log FILE   append one line per request to FILE "
            "in Combined Log\n"
            "                          Format, '-' for stdout; SIGUSR1 reopens "
            "it\n"
            "                          (default: off)\n"
            "      --status-path PATH  serve the counters at PATH, in "
            "Prometheus format at\n"
            "                          PATH/metrics (default: off)\n"
            "      --user NAME         started as root: serve as NAME (its "
            "uid, its primary\n"
            "                          group, no other groups) once the "
            "socket is bound;\n"
            "                          files NAME may not read answer 403 "
            "(default: %s;\n"
            "                          not started as root, or --user root: "
            "no change)\n"
            "      --dotfiles deny|allow  deny: a path with a segment "
            "starting with '.'\n"
            "                          answers 404 and such names are not "
            "listed,\n"
            "                          /.well-known/ excepted (default: "
            "deny)\n"
            "      --config FILE       read options from FILE first, one per "
            "line without\n"
            "                          the dashes ('gzip', 'access-log "
            "/var/log/x.log');\n"
            "                          flags given here win; SIGHUP reads it "
            "again and\n"
            "                          applies gzip, gzip-static, expires and "
            "access-log\n"
            "                          (default: none)\n"
            "      --version           print the version and exit\n"
            "  -h, --help              show this help and exit\n",
            DEFAULT_PORT, cpus, DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_MAX_CONNS,
            DEFAULT_BACKLOG, HTTP_SERVER_EXPIRES_MAX,
            HTTP_SERVER_ERROR_PAGES_MAX, DEFAULT_MIME_TYPES, DEFAULT_USER);
}

/* Everything the options set. */
struct settings {
    struct rt_config rt;
    const char *root;
    bool gzip;
    size_t cache_size;
    const char *access_log; /* NULL: off */
    const char *status_path;
    const char *config;
    bool gzip_static;
    uint32_t expires;
    const char *mime_types; /* "": the built-in table only */
    bool mime_types_given;
    struct http_error_page error_pages[HTTP_SERVER_ERROR_PAGES_MAX];
    size_t error_pages_n;
    const char *user;
    bool dotfiles;
};

static void settings_default(struct settings *s)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    memset(s, 0, sizeof(*s));
    s->rt.model = RT_MODEL_EPOLL;
    s->rt.workers = cpus > 0 ? (int) cpus : 1;
    s->rt.bind = DEFAULT_BIND;
    s->rt.port = DEFAULT_PORT;
    s->rt.idle_timeout_ms = DEFAULT_IDLE_TIMEOUT_MS;
    s->rt.max_conns = DEFAULT_MAX_CONNS;
    s->rt.backlog = DEFAULT_BACKLOG;
    s->root = ".";
    s->gzip = true;
    s->cache_size = DEFAULT_CACHE_SIZE;
    s->mime_types = DEFAULT_MIME_TYPES;
    s->user = DEFAULT_USER;
}

/* Messages name the option and, for a file, the file: "ktcp-httpd:
 * --config /etc/ktcp-httpd.conf: --port 99999: expected ...". */
static const char *msg_prefix = "ktcp-httpd";

static bool bad_arg(const char *opt, const char *val, const char *why)
{
    fprintf(stderr, "%s: %s %s: %s\n", msg_prefix, opt, val, why);
    return false;
}

static bool parse_long(const char *opt,
                       const char *s,
                       long min,
                       long max,
                       long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        char why[96];
        snprintf(why, sizeof(why), "expected an integer in %ld..%ld", min, max);
        return bad_arg(opt, s, why);
    }
    *out = v;
    return true;
}

static bool parse_size(const char *opt, const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1ULL << 10, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1ULL << 20, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1ULL << 30, end++;
    if (errno || end == s || *end || s[0] == '-' || v > (1ULL << 50) / mul)
        return bad_arg(opt, s, "expected bytes, optionally with K, M or G");
    *out = (size_t) (v * mul);
    return true;
}

enum {
    OPT_BACKLOG = 256,
    OPT_GZIP,
    OPT_NOGZIP,
    OPT_CACHE,
    OPT_LOG,
    OPT_STATUS,
    OPT_CONFIG,
    OPT_GZIP_STATIC,
    OPT_NOGZIP_STATIC,
    OPT_EXPIRES,
    OPT_ERROR_PAGE,
    OPT_MIME_TYPES,
    OPT_USER,
    OPT_DOTFILES,
    OPT_MAX_PER_IP,
};

static const struct option opts[] = {
    {"root", required_argument, NULL, 'r'},
    {"port", required_argument, NULL, 'p'},
    {"bind", required_argument, NULL, 'b'},
    {"threads", required_argument, NULL, 't'},
    {"model", required_argument, NULL, 'm'},
    {"idle-timeout-ms", required_argument, NULL, 'i'},
    {"idle-timeout", required_argument, NULL, 'i'}, /* the old spelling */
    {"max-conns", required_argument, NULL, 'c'},
    {"max-conns-per-ip", required_argument, NULL, OPT_MAX_PER_IP},
    {"backlog", required_argument, NULL, OPT_BACKLOG},
    {"gzip", no_argument, NULL, OPT_GZIP},
    {"no-gzip", no_argument, NULL, OPT_NOGZIP},
    {"cache-size", required_argument, NULL, OPT_CACHE},
    {"access-log", required_argument, NULL, OPT_LOG},
    {"status-path", required_argument, NULL, OPT_STATUS},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"gzip-static", no_argument, NULL, OPT_GZIP_STATIC},
    {"no-gzip-static", no_argument, NULL, OPT_NOGZIP_STATIC},
    {"expires", required_argument, NULL, OPT_EXPIRES},
    {"error-page", required_argument, NULL, OPT_ERROR_PAGE},
    {"mime-types", required_argument, NULL, OPT_MIME_TYPES},
    {"user", required_argument, NULL, OPT_USER},
    {"dotfiles", required_argument, NULL, OPT_DOTFILES},
    {"version", no_argument, NULL, 'V'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

enum parse_result { PARSE_OK, PARSE_EXIT, PARSE_ERROR };

/* Apply argv's options to s. from_file: argv came from --config, where
 * --config, --help and --version are not settings. */
static enum parse_result parse_options(int argc,
                                       char **argv,
                                       struct settings *s,
                                       bool from_file)
{
    int c;
    long v;
    optind = 0; /* glibc: start afresh, also for a second list */
    while ((c = getopt_long(argc, argv, "r:p:b:t:m:i:c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            s->root = optarg;
            break;
        case 'p':
            if (!parse_long("--port", optarg, 0, 65535, &v))
                return PARSE_ERROR;
            s->rt.port = (int) v;
            break;
        case 'b':
            s->rt.bind = optarg;
            break;
        case 't':
            if (!parse_long("--threads", optarg, 1, 256, &v))
                return PARSE_ERROR;
            s->rt.workers = (int) v;
            break;
        case 'm': {
            int i, n = sizeof(model_names) / sizeof(model_names[0]);
            for (i = 0; i < n && strcmp(optarg, model_names[i]); i++)
                ;
            if (i == n) {
                bad_arg("--model", optarg, "expected threads, epoll or mn");
                return PARSE_ERROR;
            }
            s->rt.model = (enum rt_model) i;
            break;
        }
        case 'i':
            if (!parse_long("--idle-timeout-ms", optarg, 0, NO_TIMEOUT_MS, &v))
                return PARSE_ERROR;
            s->rt.idle_timeout_ms = v == 0 ? NO_TIMEOUT_MS : (int) v;
            break;
        case 'c':
            if (!parse_long("--max-conns", optarg, 0, INT_MAX, &v))
                return PARSE_ERROR;
            s->rt.max_conns = (int) v;
            break;
        case OPT_MAX_PER_IP:
            if (!parse_long("--max-conns-per-ip", optarg, 0, INT_MAX, &v))
                return PARSE_ERROR;
            s->rt.max_conns_per_ip = (int) v;
            break;
        case OPT_BACKLOG:
            if (!parse_long("--backlog", optarg, 1, 65535, &v))
                return PARSE_ERROR;
            s->rt.backlog = (int) v;
            break;
        case OPT_GZIP:
            s->gzip = true;
            break;
        case OPT_NOGZIP:
            s->gzip = false;
            break;
        case OPT_CACHE:
            if (!parse_size("--cache-size", optarg, &s->cache_size))
                return PARSE_ERROR;
            break;
        case OPT_LOG:
            s->access_log = optarg;
            break;
        case OPT_STATUS:
            if (optarg[0] != '/' || strpbrk(optarg, "?#")) {
                bad_arg("--status-path", optarg,
                        "expected a path starting with '/', without "
                        "'?' or '#'");
                return PARSE_ERROR;
            }
            s->status_path = optarg;
            break;
        case OPT_GZIP_STATIC:
            s->gzip_static = true;
            break;
        case OPT_NOGZIP_STATIC:
            s->gzip_static = false;
            break;
        case OPT_EXPIRES:
            if (!parse_long("--expires", optarg, 0, HTTP_SERVER_EXPIRES_MAX,
                            &v))
                return PARSE_ERROR;
            s->expires = (uint32_t) v;
            break;
        case OPT_ERROR_PAGE: {
            const char *why = NULL;
            if (http_error_pages_parse(optarg, strlen(optarg), s->error_pages,
                                       HTTP_SERVER_ERROR_PAGES_MAX,
                                       &s->error_pages_n, &why) < 0) {
                bad_arg("--error-page", optarg, why);
                return PARSE_ERROR;
            }
            break;
        }
        case OPT_MIME_TYPES:
            s->mime_types = optarg;
            s->mime_types_given = true;
            break;
        case OPT_USER:
            if (!optarg[0]) {
                bad_arg("--user", optarg, "expected a user name");
                return PARSE_ERROR;
            }
            s->user = optarg;
            break;
        case OPT_DOTFILES:
            if (strcmp(optarg, "deny") && strcmp(optarg, "allow")) {
                bad_arg("--dotfiles", optarg, "expected deny or allow");
                return PARSE_ERROR;
            }
            s->dotfiles = strcmp(optarg, "allow") == 0;
            break;
        case OPT_CONFIG:
            if (from_file) {
                bad_arg("--config", optarg,
                        "not allowed in a --config "
                        "file");
                return PARSE_ERROR;
            }
            s->config = optarg;
            break;
        case 'V':
        case 'h':
            if (from_file) {
                fprintf(stderr, "%s: --%s is not a setting\n", msg_prefix,
                        c == 'V' ? "version" : "help");
                return PARSE_ERROR;
            }
            if (c == 'V')
                ktcp_print_version("ktcp-httpd");
            else
                usage(stdout);
            return PARSE_EXIT;
        default:
            if (!from_file)
                usage(stderr);
            return PARSE_ERROR;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n",
                msg_prefix, argv[optind]);
        return PARSE_ERROR;
    }
    return PARSE_OK;
}

/* Apply the options in a --config file to s: one per line, as on the
 * command line with or without the leading dashes ("gzip",
 * "access-log /var/log/ktcp-httpd/access.log"); the value is the rest of
 * the line, blanks trimmed; blank lines and lines starting with '#' are
 * skipped. The strings stay allocated: s may point into them. */
static enum parse_result parse_config_file(const char *path, struct settings *s)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        fprintf(stderr, "ktcp-httpd: --config %s: %s\n", path, strerror(errno));
        return PARSE_ERROR;
    }
    size_t cap = 16, argc = 1;
    char **argv = malloc(cap * sizeof(*argv));
    char prefix[PATH_MAX + 32];
    snprintf(prefix, sizeof(prefix), "ktcp-httpd: --config %s", path);
    char *line = NULL;
    size_t line_cap = 0;
    enum parse_result r = PARSE_ERROR;
    if (!argv)
        goto out;
    argv[0] = prefix; /* getopt's own messages start with it */
    while (getline(&line, &line_cap, f) >= 0) {
        char *p = line + strspn(line, " \t");
        size_t n = strlen(p);
        while (n && strchr(" \t\r\n", p[n - 1]))
            p[--n] = '\0';
        if (!n || *p == '#')
            continue;
        if (argc + 3 > cap) {
            char **nv = realloc(argv, (cap *= 2) * sizeof(*argv));
            if (!nv)
                goto out;
            argv = nv;
        }
        char *value = p + strcspn(p, " \t");
        if (*value) {
            *value++ = '\0';
            value += strspn(value, " \t");
        }
        char *opt = malloc(strlen(p) + 3);
        if (!opt)
            goto out;
        sprintf(opt, "%s%s", strncmp(p, "--", 2) ? "--" : "", p);
        argv[argc++] = opt;
        if (*value && !(argv[argc++] = strdup(value)))
            goto out;
    }
    if (ferror(f)) {
        fprintf(stderr, "%s: %s\n", prefix, strerror(errno));
        goto out;
    }
    argv[argc] = NULL;
    msg_prefix = prefix;
    r = parse_options((int) argc, argv, s, true);
    msg_prefix = "ktcp-httpd";
out:
    if (r == PARSE_ERROR && argv)
        for (size_t i = 1; i < argc; i++)
            free(argv[i]);
    free(argv); /* the strings themselves stay */
    free(line);
    fclose(f);
    return r;
}

/* Defaults, then --config's file, then the command line. */
static enum parse_result load_settings(int argc,
                                       char **argv,
                                       struct settings *s)
{
    struct settings cmdline;
    settings_default(&cmdline);
    enum parse_result r = parse_options(argc, argv, &cmdline, false);
    if (r != PARSE_OK || !cmdline.config) {
        *s = cmdline;
        return r;
    }
    settings_default(s);
    r = parse_config_file(cmdline.config, s);
    if (r != PARSE_OK)
        return r;
    return parse_options(argc, argv, s, false);
}

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

/* SIGHUP: read the settings again; apply gzip and the access log, which
 * workers read atomically, and say which other changes wait for a
 * restart. Connections and listeners are not touched. */
static void reload(int argc, char **argv, struct settings *running)
{
    struct settings n;
    if (load_settings(argc, argv, &n) != PARSE_OK) {
        fprintf(stderr, "ktcp-httpd: SIGHUP: kept the running settings\n");
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
        {n.cache_size != running->cache_size, "--cache-size"},
        {!same_str(n.status_path, running->status_path), "--status-path"},
        {!same_str(n.mime_types, running->mime_types), "--mime-types"},
        {n.error_pages_n != running->error_pages_n ||
             memcmp(n.error_pages, running->error_pages,
                    n.error_pages_n * sizeof(n.error_pages[0])) != 0,
         "--error-page"},
        {!same_str(n.user, running->user), "--user"},
        {n.dotfiles != running->dotfiles, "--dotfiles"},
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
    /* the same path too: a reload also reopens the log, as SIGUSR1 does */
    if (n.access_log)
        reopen_log(n.access_log, "SIGHUP");
    else
        httpd_log_open(NULL);
    running->access_log = n.access_log;
    fprintf(stderr,
            "ktcp-httpd: SIGHUP: reloaded (gzip %s, access log %s, "
            "gzip-static %s, expires %u)\n",
            n.gzip ? "on" : "off", n.access_log ? n.access_log : "off",
            n.gzip_static ? "on" : "off", n.expires);
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
        return bad_arg("--mime-types", s->mime_types, strerror(errno));
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
        return bad_arg("--mime-types", s->mime_types,
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
        bad_arg("--user", name, errno ? strerror(errno) : "no such user");
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
        bad_arg("--user", name, "has group root: name an unprivileged user");
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

    switch (load_settings(argc, argv, &s)) {
    case PARSE_OK:
        break;
    case PARSE_EXIT:
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
    httpd_cfg.error_pages = s.error_pages;
    httpd_cfg.error_pages_n = s.error_pages_n;
    if (!load_mime_types(&s))
        return 2;
    httpd_cfg.dotfiles = s.dotfiles;
    /* only root can change its user; anyone else serves as itself */
    if (geteuid() == 0 && !resolve_user(s.user))
        return 2;
    httpd_cfg.root_fd = open(s.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (httpd_cfg.root_fd < 0) {
        bad_arg("--root", s.root, strerror(errno));
        return 2;
    }
    if (s.access_log) {
        int err = httpd_log_open(s.access_log);
        if (err < 0) {
            bad_arg("--access-log", s.access_log, strerror(-err));
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
            s.root, where, as, model_names[s.rt.model],
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
    return 0;
}
