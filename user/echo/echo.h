/* ktcp-echo — the user-space twin of kecho.ko, on the user runtime
 * (user/rt). */
#pragma once

#include "rt.h"

/* The echo's own counters, after the runtime's connection counters
 * (accepted, refused, timeouts, errors, bytes_out are RT_C_*). */
enum echo_counter {
    ECHO_C_MESSAGES = RT_C_APP, /* receives that returned data */
    ECHO_C_BYTES_IN,
};

/* How long a send may wait for the client to take more (the idle timeout;
 * 0: never). Set before the runtime starts. */
extern int echo_send_timeout_ms;

/* The connection handler: echo what is there, return when drained. */
enum rt_verdict echo_serve(struct rt_conn *c);
