/*
 * ktcp-echo: the flags, signals and counters file are the runtime's
 * (user/rt/rt-cli.c), the connections too; the handler is echo-conn.c. The
 * counters have the names and format of kecho's /proc/net/kecho.
 */
#include <limits.h>

#include "echo.h"

static const struct rt_cli_counter counters[] = {
    {"refused", RT_C_REFUSED},
    {"messages", ECHO_C_MESSAGES},
    {"bytes_in", ECHO_C_BYTES_IN},
    {"bytes_out", RT_C_BYTES_OUT},
    {"timeouts", RT_C_TIMEOUTS},
    {"errors", RT_C_ERRORS},
    {0},
};

int main(int argc, char **argv)
{
    struct rt_config cfg = {
        RT_CLI_DEFAULTS,       .name = "ktcp-echo",     .port = 12345,
        .handler = echo_serve, .stop_cuts_sends = true,
    };
    struct rt_cli cli = {
        .description =
            "Echo every byte each TCP client sends back to it (the "
            "user-space twin of kecho.ko).",
        .footer =
            "-m was --max-conns before it meant --model, as in "
            "ktcp-httpd; a number given to\n-m is refused with a hint.",
        .m_hint = "the connection limit is --max-conns (-c)",
        .counters = counters,
    };

    rt_cli_parse(&cli, &cfg, argc, argv);
    /* a client that does not read is given as long as an idle one */
    echo_send_timeout_ms = cfg.idle_timeout_ms ? cfg.idle_timeout_ms : INT_MAX;
    return rt_cli_serve(&cli, &cfg);
}
