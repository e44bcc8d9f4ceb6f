#include "ktcp-net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void ktcp_set_notsent_lowat(int fd)
{
    int lowat = KTCP_NOTSENT_LOWAT;

    setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat));
}

void ktcp_defer_accept(int fd, int secs)
{
    setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, sizeof(secs));
}

static int listen_socket(const char *bind_addr,
                         int port,
                         int backlog,
                         bool reuseport)
{
    struct sockaddr_storage ss = {0};
    socklen_t len;
    int fd, one = 1, zero = 0;
    int family = AF_INET6;

    if (bind_addr && strchr(bind_addr, ':') == NULL)
        family = AF_INET;
    fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 && family == AF_INET6 && !bind_addr) {
        family = AF_INET; /* a kernel without IPv6 */
        fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    }
    if (fd < 0)
        return -errno;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (reuseport)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    /* Heads leave with MSG_MORE and bodies with sendfile, so Nagle would
     * only delay the last segment of each response. Linux copies the
     * listener's TCP_NODELAY into every socket it accepts: no call per
     * connection. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ktcp_set_notsent_lowat(fd);
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *) &ss;

        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(port);
        a->sin6_addr = in6addr_any;
        if (bind_addr && inet_pton(AF_INET6, bind_addr, &a->sin6_addr) != 1)
            goto einval;
        len = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *) &ss;

        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        a->sin_addr.s_addr = htonl(INADDR_ANY);
        if (bind_addr && inet_pton(AF_INET, bind_addr, &a->sin_addr) != 1)
            goto einval;
        len = sizeof(*a);
    }
    if (bind(fd, (struct sockaddr *) &ss, len) < 0 ||
        (backlog > 0 && listen(fd, backlog) < 0)) {
        int err = -errno;

        close(fd);
        return err;
    }
    if (backlog <= 0)
        return fd; /* the probe: bound, not listening */
    /* Our servers answer what they receive at once, and the answer carries
     * the ACK. Delayed-ACK ("pingpong") mode from the start, inherited by
     * every accepted socket as TCP_NODELAY is, saves the bare ACK a new
     * connection sends for its first request. After listen(), which
     * resets the mode. */
    setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof(zero));
    return fd;

einval:
    close(fd);
    return -EINVAL;
}

int ktcp_listen_tcp(const char *bind_addr,
                    int port,
                    int backlog,
                    bool reuseport)
{
    return listen_socket(bind_addr, port, backlog > 0 ? backlog : 1024,
                         reuseport);
}

int ktcp_port_free(const char *bind_addr, int port)
{
    /* Bound without SO_REUSEPORT, a socket fails (EADDRINUSE) on a port
     * that any socket listens on, SO_REUSEPORT or not; SO_REUSEADDR lets
     * the old connections of a stopped server (TIME-WAIT) pass. */
    int fd = listen_socket(bind_addr, port, 0, false);
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

int ktcp_reuseport_steer(int fd, unsigned n, bool by_cpu)
{
    struct sock_filter cpu_prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_AD_OFF + SKF_AD_CPU),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, n, 1, 0),
        BPF_STMT(BPF_RET | BPF_A, 0),
        BPF_STMT(BPF_RET | BPF_K, n),
    };
    /* an index no socket has: the kernel falls back to its hash */
    struct sock_filter hash_prog[] = {
        BPF_STMT(BPF_RET | BPF_K, n),
    };
    struct sock_fprog prog = {
        .len = by_cpu ? 4 : 1,
        .filter = by_cpu ? cpu_prog : hash_prog,
    };
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
                      sizeof(prog))
               ? -errno
               : 0;
}

bool ktcp_one_per_cpu(int n)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) || CPU_COUNT(&set) != n)
        return false;
    for (int i = 0; i < n; i++)
        if (!CPU_ISSET(i, &set))
            return false;
    return true;
}
