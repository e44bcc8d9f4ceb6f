/*
 * The echo handler, straight-line code on the runtime (user/rt): read what
 * the socket holds, send it back, and return RT_IDLE once the socket is
 * drained, so an idle client holds no stack (the runtime calls the handler
 * afresh when bytes arrive and closes the connection after the idle
 * timeout). rt_send waits while the client does not read: the server stops
 * reading from that client meanwhile, so what it holds for a client is
 * bounded by one buffer (backpressure: nothing dropped, nobody blocked).
 */
#include <errno.h>

#include "echo.h"

#define ECHO_BUF_SIZE 16384
/* Receives before the worker's other ready connections get their turn. */
#define ECHO_BUDGET 16

int echo_send_timeout_ms;

enum rt_verdict echo_serve(struct rt_conn *c)
{
    unsigned char buf[ECHO_BUF_SIZE];

    for (int budget = ECHO_BUDGET;; budget--) {
        ssize_t n;

        if (budget == 0) {
            rt_yield(c);
            budget = ECHO_BUDGET;
        }
        n = rt_read_nowait(c, buf, sizeof(buf));
        if (n == -EAGAIN)
            return RT_IDLE;
        if (n == 0)
            return RT_CLOSE; /* everything the client sent went back */
        if (n < 0) {
            if (n != -ECONNRESET)
                rt_count(RT_C_ERRORS, 1);
            return RT_CLOSE;
        }
        rt_count(ECHO_C_MESSAGES, 1);
        rt_count(ECHO_C_BYTES_IN, (uint64_t) n);
        /* counts bytes_out, a timeout, or an error itself */
        if (rt_send(c, buf, (size_t) n, echo_send_timeout_ms) < 0)
            return RT_CLOSE;
    }
}
