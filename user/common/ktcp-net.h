/* ktcp-net.h — what every user-space ktcp server does the same way. */
#pragma once

#include <stdbool.h>

/*
 * A non-blocking listening TCP socket on @port, TCP_NODELAY inherited by
 * accepted sockets. @bind_addr NULL means every address, dual-stack (plain
 * IPv4 on a kernel without IPv6); an address with a ':' is IPv6. @reuseport
 * sets SO_REUSEPORT, for one listener per worker. Returns the fd or -errno
 * (-EINVAL for an address that does not parse).
 */
int ktcp_listen_tcp(const char *bind_addr,
                    int port,
                    int backlog,
                    bool reuseport);
