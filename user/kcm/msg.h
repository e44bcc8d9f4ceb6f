/*
 * The message protocol of ktcp-kcm-server and ktcp-msg-server (msg-bench
 * speaks it too), and what both servers share on the runtime (user/rt):
 * the command line, the work a request asks for, the counters.
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

#include <stddef.h>
#include <stdint.h>

#include "rt.h"

#define MSG_HDR_LEN 4     /* the length prefix */
#define MSG_REQ_HDR_LEN 4 /* work_us, the first word of the body */
#define MSG_DEFAULT_MAX (64 * 1024)
#define MSG_MAX_MAX (16 * 1024 * 1024)
#define MSG_MAX_WORK_US 1000000u /* work is clamped to one second */
#define MSG_DEFAULT_PORT 12346

/* The servers' own counters, after the runtime's (accepted, refused,
 * timeouts, errors and bytes_out are RT_C_*). */
enum msg_counter {
    MSG_C_MESSAGES = RT_C_APP,
    MSG_C_BYTES_IN,
    MSG_C_TOO_BIG, /* frames above --max-msg: their connection closed */
};

/* The largest body accepted (--max-msg), and how long a client may be idle
 * (--idle-timeout-ms, 0: never): set by msg_parse. */
extern uint32_t msg_max;
extern int msg_idle_ms;

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

/* The command line both servers take: the runtime's shared flags with
 * their defaults (port 12346) and --max-msg; what is the server's line for
 * --help. cfg->name and cfg->handler come set; exits as rt_cli_parse. */
void msg_parse(struct rt_cli *cli,
               struct rt_config *cfg,
               const char *what,
               int argc,
               char **argv);

/* Do the work a request asks for: hash the frame (header and body) for the
 * requested time. Returns the hash so the compiler keeps the loop. */
uint32_t msg_do_work(const uint8_t *frame, size_t frame_len);

/* n messages answered by worker (rt_worker_id(), or the server's own
 * index): MSG_C_MESSAGES, and the counters file's workerN_messages that
 * show how one connection's messages were shared. */
void msg_count_messages(int worker, uint64_t n);

/* The deadline (rt_now_ms() clock) of a wait that began now and may last
 * as long as a client may be idle; never 0, so a stop finds the wait. */
uint64_t msg_idle_deadline(void);
