/* httpd-main.c — ktcp-httpd: its settings parsed (httpd-options.c) and
 * applied (httpd-settings.c), then the runtime's start-up and signal loop
 * (rt_cli_serve, user/rt/rt-cli.c) with ktcp-httpd's hooks: SIGHUP
 * reloads the settings, SIGUSR1 reopens the access log. */
#include <stdio.h>
#include <string.h>

#include "httpd-start.h"
#include "ktcp-tls.h"

static struct settings s; /* the running settings */
static int main_argc;     /* the command line, read again at each SIGHUP */
static char **main_argv;

static int on_start(void)
{
    if (httpd_cache_init() < 0) {
        fprintf(stderr, "ktcp-httpd: cannot create the content cache\n");
        return 1;
    }
    return 0;
}

static void on_serving(void)
{
    httpd_settings_serving(&s);
}

static void on_reload(void)
{
    httpd_settings_reload(main_argc, main_argv, &s);
}

static void on_reopen(void)
{
    if (s.access_log && strcmp(s.access_log, "-") != 0)
        httpd_reopen_log(s.access_log, "SIGUSR1");
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
    int status = httpd_settings_start(&s, argc, argv);
    if (status >= 0)
        return status;
    struct rt_cli *cli = httpd_cli();
    cli->start = on_start;
    cli->serving = on_serving;
    cli->reload = on_reload;
    cli->reopen = on_reopen;
    cli->stopped = on_stopped;
    return rt_cli_serve(cli, &s.rt);
}
