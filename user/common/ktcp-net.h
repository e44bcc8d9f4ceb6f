/* ktcp-net.h — what every user-space ktcp server does the same way. */
#pragma once

#include <stdbool.h>

/*
 * The most a socket may hold that it has not sent yet (TCP_NOTSENT_LOWAT,
 * set on the listener and inherited by what it accepts): a sendfile or
 * send stops queueing there, and poll reports the socket writable again
 * only below it. Bytes in flight are not limited, so a fast path's window
 * is not either. A client that stops reading pins little of the server's
 * send queue, and a large body leaves in steps, interleaved with the
 * worker's other connections (docs/httpd.md has the measurements). The
 * kernel servers use the same value (kernel/common/ktcp_server.h).
 */
#define KTCP_NOTSENT_LOWAT (64 * 1024)

/*
 * A non-blocking listening TCP socket on @port, TCP_NODELAY and
 * KTCP_NOTSENT_LOWAT inherited by accepted sockets. @bind_addr NULL means
 * every address, dual-stack (plain IPv4 on a kernel without IPv6); an
 * address with a ':' is IPv6. @reuseport
 * sets SO_REUSEPORT, for one listener per worker. Returns the fd or -errno
 * (-EINVAL for an address that does not parse).
 */
int ktcp_listen_tcp(const char *bind_addr,
                    int port,
                    int backlog,
                    bool reuseport);

/*
 * Which listener of @fd's SO_REUSEPORT group of @n takes a new connection:
 * @by_cpu, the one numbered as the CPU that runs the SYN's softirq (a
 * classic BPF program on the group, SKF_AD_CPU; a CPU numbered @n or more
 * is left to the hash), else the kernel's hash of the addresses. Listener
 * i is the i-th of the group to listen. 0 or -errno.
 */
int ktcp_reuseport_steer(int fd, unsigned n, bool by_cpu);

/* Whether this process may run on exactly CPUs 0..@n-1, so that a thread
 * per listener of ktcp_reuseport_steer is one per CPU. */
bool ktcp_one_per_cpu(int n);

/*
 * TCP_DEFER_ACCEPT on listener @fd: the kernel keeps a handshaken
 * connection to itself until its first bytes arrive (or, if none come,
 * about @secs later, after a repeated SYN-ACK), and the accept then comes
 * with the request already queued. For protocols whose client speaks
 * first (HTTP, TLS): the server never wakes, accepts or polls for a
 * connection that has sent nothing, and the bare ACK of the handshake is
 * not turned into a socket of its own (docs/httpd.md, "Which worker
 * accepts"). nginx's "listen ... deferred"; lwan sets it on every
 * listener.
 */
#define KTCP_DEFER_ACCEPT_S 1
void ktcp_defer_accept(int fd, int secs);

/* KTCP_NOTSENT_LOWAT on @fd (a listener: what it accepts inherits it). */
void ktcp_set_notsent_lowat(int fd);

/*
 * Whether @bind_addr:@port is free for a new server: 0, or -EADDRINUSE
 * when another socket listens there (a second server, which SO_REUSEPORT
 * would otherwise let share the port), or another -errno of bind(2). A
 * server calls it before its listeners, so that its own workers share the
 * port and another process's never do.
 */
int ktcp_port_free(const char *bind_addr, int port);
