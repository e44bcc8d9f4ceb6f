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
