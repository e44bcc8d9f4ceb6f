/* httpd-start.h — ktcp-httpd's start-up and reload, over the settings
 * httpd-options.c parses:
 *   httpd-main.c      main: parse, start, serve (rt_cli_serve's hooks)
 *   httpd-settings.c  the settings applied: at the start, and again at
 *                     each SIGHUP
 *   httpd-check.c     what --test-config (and every start) checks
 *   httpd-user.c      --user: the account, the drop of root, and the
 *                     access log's opener that keeps root */
#ifndef KTCP_HTTPD_START_H
#define KTCP_HTTPD_START_H

#include <stdbool.h>

#include "httpd-options.h"

/* ---- httpd-settings.c ---- */
/* Everything before serving, from s (argc/argv: the command line, read
 * again at each reload): the settings published, --user looked up, the
 * checks, the TLS context, the trees, the access log and its opener, the
 * listeners' hooks into s->rt. -1: serve; else the exit status (0 after
 * a --test-config that found nothing wrong). */
int httpd_settings_start(struct settings *s, int argc, char **argv);
/* SIGHUP: the settings read again and the reloadable ones applied;
 * running is what the start applied, updated. */
void httpd_settings_reload(int argc, char **argv, struct settings *running);
/* SIGUSR1: the access log reopened at path; why names the signal. */
void httpd_reopen_log(const char *path, const char *why);
/* The "serving ..." line, once the listeners are open. */
void httpd_settings_serving(const struct settings *s);

/* ---- httpd-check.c ---- */
/* Every check of s, as the user that will serve: one line per problem
 * on stderr; their number. */
int httpd_check(const struct settings *s);

/* ---- httpd-user.c ---- */
/* Look --user's name up (root only): false after saying why. */
bool httpd_user_resolve(const char *name);
/* The user to serve as, or NULL: the server stays who it is. */
const char *httpd_user_name(void);
/* Become that user (groups, gid, uid): 0, or -1 with errno and *step
 * naming the call that failed. */
int httpd_user_become(const char **step);
/* The runtime's listening hook: root dropped for good, once the
 * listeners are open; 0 or -EPERM after saying why. */
int httpd_user_drop(void);
/* Fork the access log's opener, which keeps root (path: its first file,
 * or NULL); before any thread exists. 0 or -errno. */
int httpd_opener_start(const char *path, int argc, char **argv);
/* httpd_cfg.open_log: through the opener if there is one. fd or -errno. */
int httpd_open_log(const char *path);
/* The access log's file opened for appending: fd or -errno. */
int httpd_open_log_file(const char *path);

#endif /* KTCP_HTTPD_START_H */
