/* Small helpers shared by the load generators: clocks, strict number
 * parsing for options, address resolution, CPU pinning, JSON strings. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

/* Exit codes shared by every tool. */
enum {
    EXIT_OK = 0,
    EXIT_FAILED = 1, /* the run finished and found a failure (tool-specific) */
    EXIT_USAGE = 2,  /* bad command line */
    EXIT_SETUP = 3,  /* could not set up: resolve, threads, files, plot */
};

uint64_t now_ns(void); /* CLOCK_MONOTONIC */

/* Parse a whole decimal string into [min, max]; on failure print
 * "prog: --option VALUE: why" on stderr and return false. */
bool parse_u64_option(const char *option,
                      const char *s,
                      uint64_t min,
                      uint64_t max,
                      uint64_t *out);
bool parse_double_option(const char *option,
                         const char *s,
                         double min,
                         double max,
                         double *out);

/* Split "host:port" or "[v6addr]:port" into its parts (brackets removed). */
bool split_host_port(const char *hostport,
                     char *host,
                     size_t host_size,
                     char *port,
                     size_t port_size);

/* Resolve host and port (numeric or names) to the first TCP address; on
 * failure print the reason on stderr and return false. */
bool resolve_tcp_address(const char *host,
                         const char *port,
                         struct sockaddr_storage *addr,
                         socklen_t *addr_len);

/* The n-th CPU (0-based) this process may run on, or -1. */
int nth_allowed_cpu(int n);
/* Pin the calling thread/process to one CPU; false (errno set) on failure. */
bool pin_to_cpu(int cpu);

/* Raise the soft limit on open files to at least need (capped by the hard
 * limit): a thousand connections need more than the usual 1024. */
void raise_fd_limit(uint64_t need);

/* Write s as a JSON string literal (with quotes). */
void json_write_string(FILE *out, const char *s);
