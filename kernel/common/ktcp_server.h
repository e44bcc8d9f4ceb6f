/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * ktcp_server.h — one connection lifecycle for every ktcp module, the
 * upper of kernel/common's two layers: the listener, the accept thread,
 * start and stop, and the parameters every module takes, over
 * ktcp_conn.h (a connection's lifecycle and the registry of live
 * connections). A module includes this header and supplies only its
 * protocol step (struct ktcp_server_ops).
 *
 * ktcp_conn.c (a connection's lifecycle) and ktcp_server.c (listener,
 * accept thread, start and stop; above ktcp_conn.c) are compiled into each
 * module through one-line wrappers in the module's folder
 * (kernel/<module>/ktcp_conn.c, ktcp_server.c), as khttpd does with
 * core/: every module gets its own copy under its own KBUILD_MODNAME and
 * pr_fmt, and no module depends on another being loaded (a shared module
 * exporting symbols would add a load order and a second package to keep in
 * step). Too much code to be static inline, which would copy it into every
 * caller.
 */
#ifndef KTCP_SERVER_H
#define KTCP_SERVER_H

#include <linux/minmax.h>

#include "ktcp_conn.h"

/*
 * max_conns_per_ip's default (-1): a quarter of max_conns, but never fewer
 * than KTCP_PER_IP_FLOOR (a small max_conns is not split four ways: one
 * client behind a NAT opens dozens); with max_conns 0 (no limit), no limit.
 */
#define KTCP_PER_IP_FLOOR 64U

static inline unsigned int ktcp_per_ip_auto(unsigned int max_conns)
{
	return max_conns ? max(max_conns / 4, KTCP_PER_IP_FLOOR) : 0;
}

/*
 * The most a connection may queue that TCP has not sent yet
 * (TCP_NOTSENT_LOWAT, set on the listener, inherited by accepted sockets):
 * a send stops there and waits, so a client that stops reading pins tens
 * of KiB of send queue instead of what autotuning grows it to, and a large
 * file leaves in steps while the peer keeps up. Bytes in flight are not
 * limited. The user-space servers use the same value (ktcp-net.h).
 */
#define KTCP_NOTSENT_LOWAT (64 * 1024)

/*
 * For a protocol whose client speaks first (HTTP, TLS): the listener keeps
 * a handshaken connection to itself until its first bytes arrive, or this
 * many seconds later after a repeated SYN-ACK (TCP_DEFER_ACCEPT), so the
 * accept thread never wakes, and no worker runs, for a connection that has
 * sent nothing, and the handshake's bare ACK makes no socket. The
 * user-space servers use the same value (ktcp-net.h).
 */
#define KTCP_DEFER_ACCEPT_S 1

/*
 * A listening socket and the accept thread that drains it. One per server,
 * or with a per-CPU workqueue one per online CPU at start, all on the same
 * port (SO_REUSEPORT), each thread bound to its CPU.
 */
struct ktcp_listener {
	struct ktcp_server *srv;
	struct socket *sock;
	struct task_struct *task;
	int cpu; /* the CPU its thread is bound to; -1: none */
	bool pending; /* set by the callbacks: accept again before sleeping */
	/* The socket's own callbacks, saved while ours are in place. */
	void (*data_ready)(struct sock *sk);
	void (*state_change)(struct sock *sk);
	void (*error_report)(struct sock *sk);
};

/*
 * The parameters every module's listener and lifecycle take, the same
 * everywhere: static variables port (default @default_port), backlog,
 * bind, max_conns (default 10000; @max_conns_desc says what happens above
 * it), max_conns_per_ip (default -1: ktcp_per_ip_auto()), per_ip_v6_prefix
 * (default 64) and idle_timeout_ms (default 30000;
 * @idle_timeout_desc says what the module does at it), read-only in
 * /sys/module/<module>/parameters.
 */
/* checkpatch: MACRO_WITH_FLOW_CONTROL: the return is in the function it defines */
#define KTCP_SERVER_PARAMS(default_port, max_conns_desc, idle_timeout_desc)    \
	static ushort port = default_port;                                     \
	module_param(port, ushort, 0444);                                      \
	MODULE_PARM_DESC(port,                                                 \
			 "TCP port to listen on (default " #default_port ")"); \
	static ushort backlog = 1024;                                          \
	module_param(backlog, ushort, 0444);                                   \
	MODULE_PARM_DESC(backlog,                                              \
			 "listen() backlog, 1..65535 (default 1024)");         \
	static char *bind;                                                     \
	module_param(bind, charp, 0444);                                       \
	MODULE_PARM_DESC(bind, "address to listen on, IPv4 or IPv6 (default: " \
			       "every address, IPv6 and IPv4 whatever "        \
			       "net.ipv6.bindv6only says)");                   \
	static uint max_conns = 10000;                                         \
	module_param(max_conns, uint, 0444);                                   \
	MODULE_PARM_DESC(max_conns, max_conns_desc);                           \
	static int max_conns_per_ip = -1;                                      \
	module_param(max_conns_per_ip, int, 0444);                             \
	MODULE_PARM_DESC(max_conns_per_ip,                                     \
			 "connections served at once from one client "         \
			 "address (IPv6: one per_ip_v6_prefix); more are "     \
			 "refused as over max_conns; 0 = no limit; -1 = a "    \
			 "quarter of max_conns, at least 64 (default -1)");    \
	static uint per_ip_v6_prefix = 64;                                     \
	module_param(per_ip_v6_prefix, uint, 0444);                            \
	MODULE_PARM_DESC(per_ip_v6_prefix,                                     \
			 "IPv6 clients are counted per prefix of this many "   \
			 "bits, 1..128 (default 64: a /64, what one site "     \
			 "is given)");                                         \
	static uint idle_timeout_ms = 30000;                                   \
	module_param(idle_timeout_ms, uint, 0444);                             \
	MODULE_PARM_DESC(idle_timeout_ms, idle_timeout_desc);                  \
	/* The listener's and lifecycle's part of the server's parameters. */  \
	static struct ktcp_server_params ktcp_server_params(const char *name,  \
							    uint max_conns)    \
	{                                                                      \
		return (struct ktcp_server_params){                            \
			.name = name,                                          \
			.bind = bind,                                          \
			.port = port,                                          \
			.backlog = backlog,                                    \
			.max_conns = max_conns,                                \
			.max_conns_per_ip =                                    \
				max_conns_per_ip == -1 ?                       \
					ktcp_per_ip_auto(max_conns) :          \
					max_conns_per_ip,                      \
			.per_ip_v6_prefix = per_ip_v6_prefix,                  \
			.idle_timeout_ms = idle_timeout_ms,                    \
		};                                                             \
	}

/* Listen, start the accept thread: the server is serving on return 0. */
int ktcp_server_start(struct ktcp_server *srv,
		      const struct ktcp_server_ops *ops,
		      const struct ktcp_server_params *p);
/* Stop accepting, close every connection, wait until all are freed. */
void ktcp_server_stop(struct ktcp_server *srv);
/*
 * Serve a connected socket made elsewhere (a user-space process's, checked
 * by the caller), held by @file: on 0 the connection owns the caller's
 * reference to @file; on error the caller still does. -EBUSY over
 * max_conns or max_conns_per_ip, or when something else already owns the
 * socket's callbacks; -ESHUTDOWN while stopping.
 */
int ktcp_server_adopt(struct ktcp_server *srv, struct file *file);

void ktcp_server_sum(const struct ktcp_server *srv,
		     struct ktcp_server_stats *sum);

#endif /* KTCP_SERVER_H */
