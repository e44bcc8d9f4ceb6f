/* httpd-options.h — ktcp-httpd's settings as the command line and a
 * --config file give them (httpd-options.c), for the start-up that
 * applies them (httpd-start.h). */
#ifndef KTCP_HTTPD_OPTIONS_H
#define KTCP_HTTPD_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "httpd.h"

/* A site's settings: the default's, and each --host's (the root,
 * error-page, index, fallback, add-header and cors lines after it). */
struct host_settings {
    const char *root;
    struct http_error_page error_pages[HTTP_SERVER_ERROR_PAGES_MAX];
    size_t error_pages_n;
    struct http_index_files index;           /* --index */
    bool index_given;                        /* else index.html */
    char fallback[HTTP_ERROR_PAGE_PATH_MAX]; /* --fallback, relative */
    size_t fallback_len;                     /* 0: none */
    struct http_headers headers;             /* --add-header, --cors */
};

/* Everything the options set. */
struct settings {
    struct rt_config rt;
    struct host_settings site; /* the default site */
    /* --host NAME: names[k]'s settings are hosts[k] (HTTP_VHOSTS_MAX of
     * them, allocated with the first); host_now: the --host the site's
     * flags go to now, -1 the default (each file and command line starts
     * with it) */
    struct http_vhosts names;
    struct host_settings *hosts;
    int host_now;
    bool gzip;
    size_t cache_size;
    long open_files;        /* --open-files; -1: from RLIMIT_NOFILE at start */
    const char *access_log; /* NULL: off */
    const char *status_path;
    const char *config;
    bool gzip_static;
    uint32_t expires;
    const char *mime_types; /* "": the built-in table only */
    bool mime_types_given;
    const char *user;
    bool dotfiles;
    /* HTTPS: --tls-port is rt.second_port */
    const char *tls_cert;
    const char *tls_key;
    int tls_handshake_timeout_ms;
    bool proxy_protocol;     /* --proxy-protocol: the port's */
    bool tls_proxy_protocol; /* --tls-proxy-protocol: --tls-port's */
    bool listings;
    unsigned listing_max;
    size_t listing_bytes;
    bool test_config;                /* --test-config: check, say so, exit */
    struct http_access access;       /* --allow, --deny, in their order */
    struct http_rate_conf limit_req; /* --limit-req; rate 0: off */
    /* --config's strings, which the fields above may point into:
     * owned[1..owned_n) (httpd_settings_release frees them) */
    char **owned;
    size_t owned_n;
};

/* Defaults, then --config's file, then the command line, into s. A
 * message naming what is wrong is on stderr after RT_CLI_ERROR;
 * RT_CLI_EXIT: --help or --version was answered. Never exits. */
enum rt_cli_result httpd_load_settings(int argc,
                                       char **argv,
                                       struct settings *s);

/* The parser's description of ktcp-httpd (its flags, --help), for
 * rt_cli_serve, which httpd-main.c gives its hooks. */
struct rt_cli *httpd_cli(void);

/* Free the strings read from --config into s (its fields may point into
 * them: s is not used afterwards). */
void httpd_settings_release(struct settings *s);

#endif /* KTCP_HTTPD_OPTIONS_H */
