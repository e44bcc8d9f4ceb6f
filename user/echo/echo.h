/* ktcp-echo — the user-space twin of kecho.ko. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct echo_options {
    const char *bind_addr; /* NULL: every address, IPv6 and IPv4 */
    int port;
    int backlog;
    int threads;
    unsigned int idle_timeout_ms; /* 0: never */
    unsigned int max_conns;
    const char *stats_file; /* NULL: SIGUSR1 prints to stderr */
};

/*
 * Counters of one worker: written only by that worker, read by the stats
 * writer with relaxed loads, so no lock is needed on the hot path.
 */
struct echo_counters {
    _Atomic uint64_t accepted, refused, messages, bytes_in, bytes_out, timeouts,
        errors;
};

struct echo_worker {
    pthread_t thread;
    int index;
    int listen_fd;
    int epoll_fd;
    int wake_fd; /* eventfd: the main thread asks the worker to stop */
    struct echo_counters counters;
};

/* Connections being served by all workers; bounded by max_conns. */
extern atomic_uint echo_active_conns;

int echo_listen(const struct echo_options *opt);
void *echo_worker_run(void *arg);
void echo_worker_set_options(const struct echo_options *opt);
