/* httpd-options.c — ktcp-httpd's settings: its defaults, its own flags
 * (the runtime's parser, user/rt/rt-cli.c, takes the shared ones and
 * prints --help), and a --config file (the same flags, one per line)
 * parsed by the same parser. Nothing is opened or started here, and
 * nothing exits: a bad file at a SIGHUP keeps the server running. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpd-options.h"

#define DEFAULT_CACHE_SIZE (64UL * 1024 * 1024)
#define NO_TIMEOUT_MS (24 * 3600 * 1000) /* --idle-timeout-ms 0 */
#define DEFAULT_MIME_TYPES "/etc/mime.types"
#define DEFAULT_USER "nobody"

enum {
    OPT_GZIP = 256,
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
    OPT_TLS_PORT,
    OPT_TLS_CERT,
    OPT_TLS_KEY,
    OPT_TLS_HS_TIMEOUT,
    OPT_LISTINGS,
    OPT_LISTING_MAX,
    OPT_LISTING_BYTES,
    OPT_INDEX,
    OPT_FALLBACK,
    OPT_ADD_HEADER,
    OPT_CORS,
    OPT_HOST,
    OPT_ALLOW,
    OPT_DENY,
    OPT_LIMIT_REQ,
    OPT_PROXY,
    OPT_TLS_PROXY,
    OPT_OPEN_FILES,
};

#define DEFAULT_TLS_HS_TIMEOUT_MS 10000

_Static_assert(HTTP_SERVER_EXPIRES_MAX == 315360000, "--help says so");
_Static_assert(HTTP_SERVER_ERROR_PAGES_MAX == 16, "--help says so");

/* After the shared flags in --help, in this order. */
static const struct rt_cli_opt opts[] = {
    {"root", 'r', "DIR", "directory to serve (default: the current one)"},
    {"gzip", OPT_GZIP, NULL,
     "gzip compressible files when the client accepts\n"
     "it; --no-gzip: never (default: --gzip)"},
    {"no-gzip", OPT_NOGZIP, NULL, NULL},
    {"gzip-static", OPT_GZIP_STATIC, NULL,
     "serve FILE.gz (Content-Encoding: gzip) for FILE\n"
     "when it is beside it, not older, and the client\n"
     "accepts gzip; --no-gzip-static: never\n"
     "(default: --no-gzip-static)"},
    {"no-gzip-static", OPT_NOGZIP_STATIC, NULL, NULL},
    {"expires", OPT_EXPIRES, "SECONDS",
     "files' 200, 206 and 304 carry Cache-Control:\n"
     "max-age and Expires SECONDS ahead, at most\n"
     "315360000 (ten years); 0 = off (default: 0)"},
    {"error-page", OPT_ERROR_PAGE, "CODE=/PATH",
     "answer status CODE (400..599) with the file PATH\n"
     "beneath the root, keeping the status; repeatable,\n"
     "at most 16 (default: none, built-in text)"},
    {"mime-types", OPT_MIME_TYPES, "FILE",
     "Content-Types by extension from FILE (mime.types\n"
     "format) before the built-in table; a missing file\n"
     "or '' means the built-in table only\n"
     "(default: " DEFAULT_MIME_TYPES ")"},
    {"cache-size", OPT_CACHE, "BYTES",
     "content cache limit, suffix K, M or G\n"
     "(default: 64M)"},
    {"open-files", OPT_OPEN_FILES, "N",
     "descriptors of files too big for the cache's\n"
     "memory kept open for the next requests; a new\n"
     "file takes the least recently used one's place;\n"
     "0 = none (default: a quarter of RLIMIT_NOFILE,\n"
     "less --max-conns, at least 64)"},
    {"access-log", OPT_LOG, "FILE",
     "append one line per request to FILE in Combined\n"
     "Log Format, '-' for stdout; SIGUSR1 reopens it\n"
     "(default: off)"},
    {"status-path", OPT_STATUS, "PATH",
     "serve the counters at PATH, in Prometheus format\n"
     "at PATH/metrics (default: off)"},
    {"user", OPT_USER, "NAME",
     "started as root: serve as NAME (its uid, its\n"
     "primary group, no other groups) once the socket\n"
     "is bound; files NAME may not read answer 403\n"
     "(default: " DEFAULT_USER "; not started as root, or\n"
     "--user root: no change)"},
    {"dotfiles", OPT_DOTFILES, "deny|allow",
     "deny: a path with a segment starting with '.'\n"
     "answers 404 and such names are not listed,\n"
     "/.well-known/ excepted (default: deny)"},
    {"tls-port", OPT_TLS_PORT, "PORT",
     "also serve HTTPS on PORT (same address), with\n"
     "--tls-cert and --tls-key; plain HTTP sent there\n"
     "answers 400 (default: off)"},
    {"tls-cert", OPT_TLS_CERT, "FILE",
     "PEM certificate, then its chain; SIGHUP reloads\n"
     "it and --tls-key (a bad pair keeps the old)"},
    {"tls-key", OPT_TLS_KEY, "FILE", "PEM private key of --tls-cert"},
    {"tls-handshake-timeout-ms", OPT_TLS_HS_TIMEOUT, "MS",
     "a TLS handshake not done by then is closed\n"
     "(default: 10000)"},
    {"proxy-protocol", OPT_PROXY, NULL,
     "every connection of --port starts with a PROXY\n"
     "protocol header (v1 or v2, from a load balancer)\n"
     "naming the client; without one it is closed\n"
     "(default: off)"},
    {"tls-proxy-protocol", OPT_TLS_PROXY, NULL,
     "the same for --tls-port: the header comes before\n"
     "the TLS handshake (default: off)"},
    {"listings", OPT_LISTINGS, "on|off",
     "off: a directory without index.html answers 403\n"
     "instead of its listing (default: on)"},
    {"index", OPT_INDEX, "NAME[,NAME...]",
     "a directory's index: the first of these files in\n"
     "it, at most 8 names (default: index.html)"},
    {"fallback", OPT_FALLBACK, "/PATH",
     "a missing path (not a dotfile, not under\n"
     "/.well-known/) is answered 200 with the file PATH,\n"
     "as a single-page application needs; '' = off\n"
     "(default: off)"},
    {"host", OPT_HOST, "NAME",
     "a virtual host: requests whose Host is NAME\n"
     "(or, for *.NAME, ends in .NAME; port, case and a\n"
     "trailing dot ignored) are served by the root,\n"
     "error-page, index, fallback, add-header and cors\n"
     "flags that follow, up to the next --host; those\n"
     "before any --host are the default site's, which\n"
     "answers every other Host and IP addresses; at\n"
     "most 64 (default: none)"},
    {"add-header", OPT_ADD_HEADER, "'[/PREFIX ]NAME: VALUE'",
     "add the field to every response, or to those\n"
     "whose path starts with /PREFIX; repeatable, at\n"
     "most 32 fields of 3072 bytes in all; a value\n"
     "with CR or LF, a name that is not a token or a\n"
     "field the server sets itself is refused\n"
     "(default: none)"},
    {"cors", OPT_CORS, "ORIGIN|*",
     "Access-Control-Allow-Origin: ORIGIN (and Vary:\n"
     "Origin) on every response, and a CORS preflight\n"
     "(OPTIONS with Origin and Access-Control-Request-\n"
     "Method) answered 204; '' = off (default: off)"},
    {"listing-max", OPT_LISTING_MAX, "N",
     "directory listings in flight at once; the next\n"
     "gets 503 with Retry-After; 0 = no limit\n"
     "(default: 1024)"},
    {"listing-bytes", OPT_LISTING_BYTES, "BYTES",
     "memory of the listings in flight (their name\n"
     "tables and buffers); a listing beyond gets 503\n"
     "with Retry-After; 0 = no limit (default: 64M)"},
    {"allow", OPT_ALLOW, "CIDR",
     "serve clients of CIDR (IPv4 or IPv6 network, an\n"
     "address, or 'all'); with --deny, repeatable, the\n"
     "first rule matching a client decides, in the\n"
     "order given; none matching: served, at most 256\n"
     "rules (default: every client served)"},
    {"deny", OPT_DENY, "CIDR",
     "close connections from CIDR at accept, counted\n"
     "as denied (see --allow)"},
    {"limit-req", OPT_LIMIT_REQ, "rate=Nr/s[,burst=N][,entries=N]",
     "requests per client address (IPv6: per\n"
     "--per-ip-v6-prefix): burst+1 at once, then N a\n"
     "second (r/m: a minute); beyond, 429 with\n"
     "Retry-After; entries: addresses tracked, the\n"
     "oldest forgotten first (default: 16384);\n"
     "'off' (default: off)"},
    {"config", OPT_CONFIG, "FILE",
     "read flags from FILE first, one per line without\n"
     "the dashes ('gzip', 'access-log /var/log/x.log');\n"
     "flags given here win; SIGHUP reads it again and\n"
     "applies gzip, gzip-static, expires, listings,\n"
     "index, fallback, error-page, add-header, cors,\n"
     "host (its root), allow, deny, limit-req (not its\n"
     "entries), access-log and shutdown-timeout\n"
     "(default: none)"},
    {"test-config", 't', NULL,
     "check the settings and exit: 0 when ktcp-httpd\n"
     "could start with them, else 1 with one line per\n"
     "problem (the root missing, or one the serving\n"
     "user may not enter or list; no openat2; an access\n"
     "log that cannot be opened); every start runs the\n"
     "same checks"},
    {"idle-timeout", 'i', "MS", NULL}, /* the old spelling */
    {0},
};

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
        return rt_cli_bad(opt, s, "expected bytes, optionally with K, M or G");
    *out = (size_t) (v * mul);
    return true;
}

/* One of ktcp-httpd's own flags into the settings at data. */
static bool option(void *data, int key, const char *arg, bool from_file)
{
    struct settings *s = data;
    struct host_settings *h =
        s->host_now < 0 ? &s->site : &s->hosts[s->host_now];
    const char *why = NULL;
    long v;

    switch (key) {
    case 'r':
        h->root = arg;
        return true;
    case OPT_GZIP:
    case OPT_NOGZIP:
        s->gzip = key == OPT_GZIP;
        return true;
    case OPT_GZIP_STATIC:
    case OPT_NOGZIP_STATIC:
        s->gzip_static = key == OPT_GZIP_STATIC;
        return true;
    case OPT_CACHE:
        return parse_size("--cache-size", arg, &s->cache_size);
    case OPT_OPEN_FILES:
        if (!rt_cli_long("--open-files", arg, 0, 1L << 30, &v))
            return false;
        s->open_files = v;
        return true;
    case OPT_LOG:
        s->access_log = arg;
        return true;
    case OPT_STATUS:
        if (arg[0] != '/' || strpbrk(arg, "?#"))
            return rt_cli_bad("--status-path", arg,
                              "expected a path starting with '/', without "
                              "'?' or '#'");
        s->status_path = arg;
        return true;
    case OPT_EXPIRES:
        if (!rt_cli_long("--expires", arg, 0, HTTP_SERVER_EXPIRES_MAX, &v))
            return false;
        s->expires = (uint32_t) v;
        return true;
    case OPT_ERROR_PAGE:
        if (http_error_pages_parse(arg, strlen(arg), h->error_pages,
                                   HTTP_SERVER_ERROR_PAGES_MAX,
                                   &h->error_pages_n, &why) < 0)
            return rt_cli_bad("--error-page", arg, why);
        return true;
    case OPT_MIME_TYPES:
        s->mime_types = arg;
        s->mime_types_given = true;
        return true;
    case OPT_USER:
        if (!arg[0])
            return rt_cli_bad("--user", arg, "expected a user name");
        s->user = arg;
        return true;
    case OPT_DOTFILES:
        if (strcmp(arg, "deny") && strcmp(arg, "allow"))
            return rt_cli_bad("--dotfiles", arg, "expected deny or allow");
        s->dotfiles = strcmp(arg, "allow") == 0;
        return true;
    case OPT_TLS_PORT:
        if (!rt_cli_long("--tls-port", arg, 1, 65535, &v))
            return false;
        s->rt.second_port = (int) v;
        return true;
    case OPT_PROXY:
        s->proxy_protocol = true;
        return true;
    case OPT_TLS_PROXY:
        s->tls_proxy_protocol = true;
        return true;
    case OPT_TLS_CERT:
        s->tls_cert = arg;
        return true;
    case OPT_TLS_KEY:
        s->tls_key = arg;
        return true;
    case OPT_TLS_HS_TIMEOUT:
        if (!rt_cli_long("--tls-handshake-timeout-ms", arg, 1, 3600000, &v))
            return false;
        s->tls_handshake_timeout_ms = (int) v;
        return true;
    case OPT_LISTINGS:
        if (strcmp(arg, "on") && strcmp(arg, "off"))
            return rt_cli_bad("--listings", arg, "expected on or off");
        s->listings = strcmp(arg, "on") == 0;
        return true;
    case OPT_LISTING_MAX:
        if (!rt_cli_long("--listing-max", arg, 0, 1L << 30, &v))
            return false;
        s->listing_max = (unsigned) v;
        return true;
    case OPT_LISTING_BYTES:
        return parse_size("--listing-bytes", arg, &s->listing_bytes);
    case OPT_INDEX:
        if (http_index_files_parse(arg, strlen(arg), &h->index, &why) < 0)
            return rt_cli_bad("--index", arg, why);
        h->index_given = true;
        return true;
    case OPT_FALLBACK:
        h->fallback_len = 0;
        if (arg[0] && http_fallback_parse(arg, strlen(arg), h->fallback,
                                          &h->fallback_len, &why) < 0)
            return rt_cli_bad("--fallback", arg, why);
        return true;
    case OPT_HOST: {
        int k = http_vhosts_add(&s->names, arg, strlen(arg), &why);
        if (k < 0)
            return rt_cli_bad("--host", arg, why);
        if (!s->hosts &&
            !(s->hosts = calloc(HTTP_VHOSTS_MAX, sizeof(*s->hosts))))
            return rt_cli_bad("--host", arg, strerror(ENOMEM));
        memset(&s->hosts[k], 0, sizeof(s->hosts[k]));
        s->host_now = k;
        return true;
    }
    case OPT_ADD_HEADER:
        if (http_headers_add(&h->headers, arg, strlen(arg), &why) < 0)
            return rt_cli_bad("--add-header", arg, why);
        return true;
    case OPT_CORS:
        if (http_headers_cors(&h->headers, arg, strlen(arg), &why) < 0)
            return rt_cli_bad("--cors", arg, why);
        return true;
    case OPT_ALLOW:
    case OPT_DENY:
        if (http_access_add(&s->access, key == OPT_ALLOW, arg, strlen(arg),
                            &why) < 0)
            return rt_cli_bad(key == OPT_ALLOW ? "--allow" : "--deny", arg,
                              why);
        return true;
    case OPT_LIMIT_REQ:
        if (http_limit_req_parse(arg, strlen(arg), &s->limit_req, &why) < 0)
            return rt_cli_bad("--limit-req", arg, why);
        return true;
    case 't': /* --test-config */
        if (from_file)
            return rt_cli_bad("--test-config", "", "not a setting");
        s->test_config = true;
        return true;
    case OPT_CONFIG:
        if (from_file)
            return rt_cli_bad("--config", arg,
                              "not allowed in a --config file");
        s->config = arg;
        return true;
    }
    return false;
}

static struct rt_cli cli = {
    .description =
        "Serve the files under a directory over HTTP/1.1 (GET, "
        "HEAD).",
    .footer =
        "--idle-timeout MS is the old spelling of --idle-timeout-ms, "
        "still taken.\nSignals: SIGTERM/SIGINT stop (a second one at once), "
        "SIGQUIT stops without a\ndeadline, SIGHUP reloads --config, "
        "SIGUSR1 reopens the access log.",
    .not_taken = RT_CLI_STATS_FILE,
    .not_taken_why = "its counters are served at --status-path",
    .opts = opts,
    .option = option,
};

struct rt_cli *httpd_cli(void)
{
    return &cli;
}

static void settings_default(struct settings *s)
{
    memset(s, 0, sizeof(*s));
    s->rt =
        (struct rt_config){RT_CLI_DEFAULTS, .name = "ktcp-httpd", .port = 8081};
    s->site.root = ".";
    s->host_now = -1;
    s->gzip = true;
    s->cache_size = DEFAULT_CACHE_SIZE;
    s->open_files = -1; /* from RLIMIT_NOFILE at start */
    s->mime_types = DEFAULT_MIME_TYPES;
    s->user = DEFAULT_USER;
    s->listings = true;
    s->listing_max = 1024;
    s->listing_bytes = 64UL << 20;
    s->tls_handshake_timeout_ms = DEFAULT_TLS_HS_TIMEOUT_MS;
    s->limit_req.entries = HTTP_RATE_ENTRIES_DEFAULT;
}

/* --tls-port needs a certificate and a key, and they need it. */
static enum rt_cli_result check_tls(const struct settings *s)
{
    if (s->rt.second_port && (!s->tls_cert || !s->tls_key)) {
        rt_cli_bad("--tls-port", "", "needs --tls-cert and --tls-key");
        return RT_CLI_ERROR;
    }
    if (!s->rt.second_port && (s->tls_cert || s->tls_key)) {
        rt_cli_bad(s->tls_cert ? "--tls-cert" : "--tls-key",
                   s->tls_cert ? s->tls_cert : s->tls_key,
                   "given without --tls-port");
        return RT_CLI_ERROR;
    }
    if (!s->rt.second_port && s->tls_proxy_protocol) {
        rt_cli_bad("--tls-proxy-protocol", "", "given without --tls-port");
        return RT_CLI_ERROR;
    }
    if (s->rt.second_port && s->rt.second_port == s->rt.port) {
        char port[8];

        snprintf(port, sizeof(port), "%d", s->rt.second_port);
        rt_cli_bad("--tls-port", port, "is --port too");
        return RT_CLI_ERROR;
    }
    return RT_CLI_OK;
}

/* Apply argv (the command line, or a file's lines) to s. */
static enum rt_cli_result apply(int argc,
                                char **argv,
                                struct settings *s,
                                unsigned flags)
{
    cli.data = s;
    s->host_now = -1; /* a file's or the command line's first lines: the
                         default site's */
    enum rt_cli_result r = rt_cli_apply(&cli, &s->rt, argc, argv, flags);
    s->host_now = -1;
    for (uint32_t k = 0; r == RT_CLI_OK && k < s->names.n; k++)
        if (!s->hosts[k].root) {
            rt_cli_bad("--host", s->names.h[k].name, "needs a --root after it");
            r = RT_CLI_ERROR;
        }
    if (s->rt.idle_timeout_ms == 0) /* never: a day, each wait bounded */
        s->rt.idle_timeout_ms = NO_TIMEOUT_MS;
    return r;
}

/* Apply the options in a --config file to s: one per line, as on the
 * command line with or without the leading dashes ("gzip",
 * "access-log /var/log/ktcp-httpd/access.log"); the value is the rest of
 * the line, blanks trimmed; blank lines and lines starting with '#' are
 * skipped (core's http_conf_next, which khttpd's site= file is read with
 * too). At most HTTP_CONF_FILE_MAX bytes. The strings belong to s
 * (s->owned): its fields may point into them. */
static enum rt_cli_result apply_file(const char *path, struct settings *s)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        fprintf(stderr, "ktcp-httpd: --config %s: %s\n", path, strerror(errno));
        return RT_CLI_ERROR;
    }
    size_t cap = 16, argc = 1, pos = 0;
    char **argv = malloc(cap * sizeof(*argv));
    char prefix[PATH_MAX + 32];
    snprintf(prefix, sizeof(prefix), "ktcp-httpd: --config %s", path);
    char *text = malloc(HTTP_CONF_FILE_MAX + 1);
    size_t len = text ? fread(text, 1, HTTP_CONF_FILE_MAX + 1, f) : 0;
    struct http_conf_line l = {0};
    enum rt_cli_result r = RT_CLI_ERROR;
    if (!argv || !text)
        goto out;
    argv[0] = prefix; /* what every message about the file starts with */
    if (ferror(f)) {
        fprintf(stderr, "%s: %s\n", prefix, strerror(errno));
        goto out;
    }
    if (len > HTTP_CONF_FILE_MAX) {
        fprintf(stderr, "%s: longer than %d bytes\n", prefix,
                HTTP_CONF_FILE_MAX);
        goto out;
    }
    while (http_conf_next(text, len, &pos, &l)) {
        if (argc + 3 > cap) {
            char **nv = realloc(argv, (cap *= 2) * sizeof(*argv));
            if (!nv)
                goto out;
            argv = nv;
        }
        char *opt = malloc(l.name_len + 3);
        if (!opt)
            goto out;
        memcpy(opt, "--", 2);
        memcpy(opt + 2, l.name, l.name_len);
        opt[l.name_len + 2] = '\0';
        argv[argc++] = opt;
        if (l.value_len && !(argv[argc++] = strndup(l.value, l.value_len)))
            goto out;
    }
    argv[argc] = NULL;
    r = apply((int) argc, argv, s, RT_CLI_FROM_FILE);
out:
    if (argv) {
        argv[0] = NULL; /* the prefix is on this stack */
        s->owned = argv;
        s->owned_n = argc;
    }
    free(text);
    fclose(f);
    return r;
}

void httpd_settings_release(struct settings *s)
{
    free(s->hosts);
    s->hosts = NULL;
    for (size_t i = 1; i < s->owned_n; i++)
        free(s->owned[i]);
    free(s->owned);
    s->owned = NULL;
    s->owned_n = 0;
}

/* Defaults, then --config's file, then the command line. */
enum rt_cli_result httpd_load_settings(int argc,
                                       char **argv,
                                       struct settings *s)
{
    struct settings cmdline;
    settings_default(&cmdline);
    enum rt_cli_result r = apply(argc, argv, &cmdline, 0);
    if (r != RT_CLI_OK || !cmdline.config) {
        *s = cmdline;
        return r == RT_CLI_OK ? check_tls(s) : r;
    }
    free(cmdline.hosts); /* read again below, after the file's */
    settings_default(s);
    r = apply_file(cmdline.config, s);
    if (r != RT_CLI_OK)
        return r;
    r = apply(argc, argv, s, 0);
    return r == RT_CLI_OK ? check_tls(s) : r;
}
