#include "common.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

bool parse_u64_option(const char *option,
                      const char *s,
                      uint64_t min,
                      uint64_t max,
                      uint64_t *out)
{
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-') {
        fprintf(stderr, "%s: %s '%s': expected a number from %llu to %llu\n",
                program_invocation_short_name, option, s ? s : "",
                (unsigned long long) min, (unsigned long long) max);
        return false;
    }
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max) {
        fprintf(stderr, "%s: %s '%s': expected a number from %llu to %llu\n",
                program_invocation_short_name, option, s,
                (unsigned long long) min, (unsigned long long) max);
        return false;
    }
    *out = v;
    return true;
}

bool parse_double_option(const char *option,
                         const char *s,
                         double min,
                         double max,
                         double *out)
{
    char *end;
    errno = 0;
    double v = s && *s ? strtod(s, &end) : NAN;
    if (!s || !*s || errno || *end || !(v >= min && v <= max)) {
        fprintf(stderr, "%s: %s '%s': expected a number from %g to %g\n",
                program_invocation_short_name, option, s ? s : "", min, max);
        return false;
    }
    *out = v;
    return true;
}

bool split_host_port(const char *hostport,
                     char *host,
                     size_t host_size,
                     char *port,
                     size_t port_size)
{
    const char *host_start = hostport, *host_end, *colon;
    if (*hostport == '[') {
        host_start = hostport + 1;
        host_end = strchr(host_start, ']');
        if (!host_end || host_end[1] != ':')
            return false;
        colon = host_end + 1;
    } else {
        colon = strrchr(hostport, ':');
        if (!colon)
            return false;
        host_end = colon;
    }
    size_t host_len = (size_t) (host_end - host_start);
    size_t port_len = strlen(colon + 1);
    if (!host_len || host_len >= host_size || !port_len ||
        port_len >= port_size)
        return false;
    memcpy(host, host_start, host_len);
    host[host_len] = '\0';
    memcpy(port, colon + 1, port_len + 1);
    return true;
}

bool resolve_tcp_address(const char *host,
                         const char *port,
                         struct sockaddr_storage *addr,
                         socklen_t *addr_len)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_protocol = IPPROTO_TCP};
    struct addrinfo *res;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc) {
        fprintf(stderr, "%s: cannot resolve %s port %s: %s\n",
                program_invocation_short_name, host, port, gai_strerror(rc));
        return false;
    }
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *addr_len = res->ai_addrlen;
    freeaddrinfo(res);
    return true;
}

int nth_allowed_cpu(int n)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set))
        return -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, &set) && n-- == 0)
            return cpu;
    }
    return -1;
}

bool pin_to_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set) == 0;
}

void json_write_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char) *s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

void raise_fd_limit(uint64_t need)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= need)
        return;
    rl.rlim_cur =
        rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
}
