/*
 * The message protocol shared by ktcp-kcm-server, ktcp-msg-server and
 * msg-bench, and the pieces both servers use (options, listener, work,
 * counters).
 *
 * A frame is a 4-byte big-endian body length followed by the body:
 *
 *   +-----------------+-------------------+---------------------------+
 *   | u32 len (BE)    | u32 work_us (BE)  | rest of the body (opaque)  |
 *   +-----------------+-------------------+---------------------------+
 *    frame header      body: len bytes, at most --max-msg
 *
 * The server spends work_us microseconds hashing the body (a body shorter
 * than 4 bytes asks for no work), then sends the whole frame back unchanged.
 * A length above --max-msg ends that connection and no other.
 */
#pragma once

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MSG_HDR_LEN 4     /* the length prefix */
#define MSG_REQ_HDR_LEN 4 /* work_us, the first word of the body */
#define MSG_DEFAULT_MAX (64 * 1024)
#define MSG_MAX_MAX (16 * 1024 * 1024)
#define MSG_MAX_WORK_US 1000000u /* work is clamped to one second */

struct msg_options {
    const char *prog;      /* "ktcp-kcm-server" or "ktcp-msg-server" */
    const char *bind_addr; /* NULL: every address, IPv6 and IPv4 */
    int port;
    int backlog;
    int threads;
    uint32_t max_msg;       /* largest body accepted, bytes */
    const char *stats_file; /* NULL: counters go to stderr */
};

/*
 * Counters of one worker: written only by that worker, read by the stats
 * writer with relaxed loads. The acceptor has its own set.
 */
struct msg_counters {
    _Atomic uint64_t accepted, closed, messages, bytes_in, bytes_out, too_big,
        errors;
};

static inline uint32_t msg_get_be32(const uint8_t *p)
{
    return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 |
           (uint32_t) p[2] << 8 | p[3];
}

static inline void msg_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24;
    p[1] = v >> 16;
    p[2] = v >> 8;
    p[3] = v;
}

#define msg_count(c, field, n) \
    atomic_fetch_add_explicit(&(c)->field, (n), memory_order_relaxed)

/* Parse argv into opt (defaults filled in); exits 0 after --help, 2 on a bad
 * argument. what is the one-line description --help prints. */
void msg_parse_options(struct msg_options *opt,
                       const char *what,
                       int argc,
                       char **argv);

/* A non-blocking listening socket, or -errno. */
int msg_listen(const struct msg_options *opt, bool reuseport);

/* Do the work a request asks for: hash the frame (header and body) for the
 * requested time. Returns the hash so the compiler keeps the loop. */
uint32_t msg_do_work(const uint8_t *frame, size_t frame_len);

/* Write the counters (summed over n sets, plus per-worker messages) to the
 * stats file, or stderr; active = accepted - closed. */
void msg_write_counters(const struct msg_options *opt,
                        struct msg_counters *const *sets,
                        int n);

/* Block the signals the main thread takes with sigwaitinfo (inherited by
 * every thread started after) and return the set. */
void msg_block_signals(sigset_t *sigs);

/* Wait for SIGTERM/SIGINT, writing counters on SIGUSR1. */
void msg_wait_for_stop(const struct msg_options *opt,
                       sigset_t *sigs,
                       struct msg_counters *const *sets,
                       int n);
