/* httpd-options.c — ktcp-httpd's options: the defaults, --help, the
 * command line and a --config file (the same options, one per line),
 * parsed into struct settings; nothing is opened or started here. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "httpd-options.h"
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


const char *const httpd_model_names[3] = {"threads", "epoll", "mn"};

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

bool httpd_bad_arg(const char *opt, const char *val, const char *why)
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
        return httpd_bad_arg(opt, s, why);
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
        return httpd_bad_arg(opt, s,
                             "expected bytes, optionally with K, M or G");
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
            int i, n = sizeof(httpd_model_names) / sizeof(httpd_model_names[0]);
            for (i = 0; i < n && strcmp(optarg, httpd_model_names[i]); i++)
                ;
            if (i == n) {
                httpd_bad_arg("--model", optarg,
                              "expected threads, epoll or mn");
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
                httpd_bad_arg("--status-path", optarg,
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
                httpd_bad_arg("--error-page", optarg, why);
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
                httpd_bad_arg("--user", optarg, "expected a user name");
                return PARSE_ERROR;
            }
            s->user = optarg;
            break;
        case OPT_DOTFILES:
            if (strcmp(optarg, "deny") && strcmp(optarg, "allow")) {
                httpd_bad_arg("--dotfiles", optarg, "expected deny or allow");
                return PARSE_ERROR;
            }
            s->dotfiles = strcmp(optarg, "allow") == 0;
            break;
        case OPT_CONFIG:
            if (from_file) {
                httpd_bad_arg("--config", optarg,
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
enum parse_result httpd_load_settings(int argc, char **argv, struct settings *s)
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
