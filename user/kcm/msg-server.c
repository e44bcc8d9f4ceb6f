/*
 * ktcp-msg-server: the plain-TCP twin of ktcp-kcm-server, a handler on the
 * runtime (user/rt) as ktcp-echo is: the listener, the models, timers, the
 * idle timeout, flags and counters are the runtime's.
 *
 * A connection belongs to the worker that accepted it (the epoll model) and
 * is served in order: the handler cuts frames out of the byte stream
 * itself, does each request's work, and answers. Because a reply is its
 * request unchanged, the answers to all whole frames of one read are the
 * first bytes of the input buffer: they leave in one send straight from
 * there. While the client does not take them the handler waits in that
 * send and reads nothing more (backpressure). With nothing buffered it
 * returns RT_IDLE, so an idle client holds no stack and no buffer; a frame
 * begun waits for its rest as long as an idle client may wait.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

/* On the coroutine's stack; a larger frame gets a heap buffer of its own */
#define MSG_STACK_BUF 16384
/* Receives before the worker's other ready connections get their turn. */
#define MSG_READ_BUDGET 8

struct msg_in {
    uint8_t *p; /* the stack buffer or heap */
    size_t len, cap;
    uint8_t *heap; /* NULL while p is on the stack */
};

static int send_timeout_ms;

/* Room for a frame of need bytes; false when out of memory. */
static bool in_room(struct msg_in *in, size_t need)
{
    uint8_t *p;

    if (need <= in->cap)
        return true;
    p = malloc(need);
    if (!p)
        return false;
    memcpy(p, in->p, in->len);
    free(in->heap);
    in->p = in->heap = p;
    in->cap = need;
    return true;
}

/* Answer the whole frames at the front of in, then make room for the one
 * begun. False when the connection must close: a frame above --max-msg
 * (what came before it is answered first), a failed send. */
static bool answer(struct rt_conn *c, struct msg_in *in)
{
    size_t off = 0;
    uint64_t frames = 0;
    bool too_big = false;

    while (in->len - off >= MSG_HDR_LEN) {
        uint32_t len = msg_get_be32(in->p + off);

        if (len > msg_max) {
            rt_count(MSG_C_TOO_BIG, 1);
            too_big = true;
            break;
        }
        if (in->len - off - MSG_HDR_LEN < len)
            break;
        msg_do_work(in->p + off, MSG_HDR_LEN + len);
        off += MSG_HDR_LEN + len;
        frames++;
    }
    if (frames) {
        msg_count_messages(rt_worker_id(), frames);
        /* counts bytes_out, a timeout or an error itself */
        if (rt_send(c, in->p, off, send_timeout_ms) < 0)
            return false;
        memmove(in->p, in->p + off, in->len - off);
        in->len -= off;
    }
    if (too_big)
        return false;
    if (in->len >= MSG_HDR_LEN &&
        !in_room(in, MSG_HDR_LEN + (size_t) msg_get_be32(in->p))) {
        rt_count(RT_C_ERRORS, 1);
        return false;
    }
    return true;
}

static enum rt_verdict msg_serve(struct rt_conn *c)
{
    uint8_t buf[MSG_STACK_BUF];
    struct msg_in in = {.p = buf, .cap = sizeof(buf)};
    enum rt_verdict verdict = RT_CLOSE;

    for (int budget = MSG_READ_BUDGET;; budget--) {
        ssize_t n;

        if (budget == 0) {
            rt_yield(c);
            budget = MSG_READ_BUDGET;
        }
        n = rt_read_nowait(c, in.p + in.len, in.cap - in.len);
        if (n == -EAGAIN && in.len == 0) {
            verdict = RT_IDLE;
            break;
        }
        if (n == -EAGAIN) {
            int r = rt_wait(c, POLLIN, msg_idle_deadline(), true);

            if (r == -ETIMEDOUT)
                rt_count(RT_C_TIMEOUTS, 1);
            if (r < 0)
                break; /* the frame begun goes with the connection */
            continue;
        }
        /* EOF: every whole frame was answered, a half one is dropped */
        if (n == 0)
            break;
        if (n < 0) {
            if (n != -ECONNRESET)
                rt_count(RT_C_ERRORS, 1);
            break;
        }
        rt_count(MSG_C_BYTES_IN, (uint64_t) n);
        in.len += (size_t) n;
        if (!answer(c, &in))
            break;
    }
    free(in.heap);
    return verdict;
}

int main(int argc, char **argv)
{
    struct rt_config cfg = {.name = "ktcp-msg-server", .handler = msg_serve};
    struct rt_cli cli = {0};

    msg_parse(&cli, &cfg,
              "Serve length-prefixed messages over plain TCP, each "
              "connection in order on one\nworker (the twin of "
              "ktcp-kcm-server).",
              argc, argv);
    /* a client that does not read is given as long as an idle one */
    send_timeout_ms = cfg.idle_timeout_ms ? cfg.idle_timeout_ms : INT_MAX;
    return rt_cli_serve(&cli, &cfg);
}
