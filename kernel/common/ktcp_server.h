/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * ktcp_server.h — one connection lifecycle for every ktcp module: the
 * listener, the accept thread, the registry of live connections (with a
 * count per peer address), socket-callback attach/detach, the kick that runs
 * a connection's step, its idle timer, its release, and the counters of all
 * that. A module supplies only its protocol step (struct ktcp_server_ops).
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

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/hashtable.h>
#include <linux/in6.h>
#include <linux/jiffies.h>
#include <linux/list.h>
#include <linux/minmax.h>
#include <linux/percpu.h>
#include <linux/spinlock.h>
#include <linux/timer.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

struct file;
struct kmem_cache;
struct sock;
struct socket;
struct task_struct;
struct ktcp_server;
struct ktcp_peer;

/* The socket's own callbacks, saved while a connection holds the socket. */
struct ktcp_sock_callbacks {
	void (*data_ready)(struct sock *sk);
	void (*write_space)(struct sock *sk);
	void (*state_change)(struct sock *sk);
};

/*
 * What the lifecycle keeps of a connection. A module's connection embeds it
 * (anywhere; ops->conn_offset says where) and reaches its own part with
 * container_of().
 */
struct ktcp_conn {
	struct ktcp_server *srv;
	struct socket *sock;
	/* Adopted (ktcp_server_adopt): the file that holds sock, put at the
	 * end instead of releasing sock; its ULP's data_ready is chained.
	 */
	struct file *file;
	struct work_struct work; /* the step, on events: data, space, state */
	struct work_struct release; /* frees the connection, off its own work */
	struct task_struct *thread; /* kthread mode: the connection's thread */
	bool kicked; /* kthread mode: run the step again */
	bool dead; /* closed; later steps return at once */
	struct timer_list timer; /* the step's next deadline */
	struct list_head node; /* in srv->conns, under srv->lock */
	struct ktcp_peer *peer; /* its address's count (max_conns_per_ip) */
	/*
	 * The client's address, IPv4 as IPv4-mapped IPv6, read at accept
	 * (before ops->init); a PROXY protocol header, once read, replaces it
	 * with the address it carries. What a module decides per client
	 * (khttpd's address rules and request rates) reads this field.
	 */
	struct in6_addr addr;
	struct ktcp_sock_callbacks saved;
	/* Below: the step's alone. */
	unsigned long last_active; /* jiffies of the last progress */
	u32 acked; /* snd_una when progress was last seen */
};

struct ktcp_server_ops {
	const char *cache_name; /* the connections' slab cache */
	size_t conn_size; /* the module's connection */
	size_t conn_offset; /* offsetof its struct ktcp_conn */
	/*
	 * Optional: the module's part of a new connection, 0 or -errno;
	 * -EACCES turns the client away (the module counts it): the socket
	 * is closed at once, not counted as an error.
	 */
	int (*init)(struct ktcp_conn *c);
	/* Run on every kick: read, answer, send without blocking; close with
	 * ktcp_conn_close(), wait with ktcp_conn_wait().
	 */
	void (*step)(struct ktcp_conn *c);
	/* Drop the module's part; the socket is released after this. */
	void (*destroy)(struct ktcp_conn *c);
	/* Optional: tell a socket refused at accept why, before it closes. */
	void (*refuse)(struct socket *sock);
};

struct ktcp_server_params {
	const char *name; /* the accept thread's and workqueue's name */
	const char *bind; /* an IPv4 or IPv6 address; NULL or "": all */
	unsigned short port;
	unsigned short backlog;
	unsigned int max_conns; /* 0: no limit */
	/* 0: no limit; the parameter's -1 is resolved to ktcp_per_ip_auto() of
	 * the max_conns asked for (mode=kthread's cap on 0 leaves it at 0)
	 */
	int max_conns_per_ip;
	/* IPv6 clients are counted per this prefix; IPv4 per address */
	unsigned int per_ip_v6_prefix;
	unsigned int idle_timeout_ms; /* 0: never */
	unsigned int wq_flags; /* alloc_workqueue() flags */
	bool kthread; /* a thread per connection instead of the workqueue */
};

/* Per-CPU, summed on read with ktcp_server_sum(). */
struct ktcp_server_stats {
	u64 accepted;
	u64 refused; /* over max_conns or max_conns_per_ip */
	u64 timeouts;
	u64 errors;
};

#define KTCP_PEER_HASH_BITS 8

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

struct ktcp_server {
	const struct ktcp_server_ops *ops;
	struct ktcp_server_params p;
	struct ktcp_listener *listeners;
	unsigned int nr_listeners;
	struct workqueue_struct *wq;
	struct kmem_cache *cache;
	struct ktcp_server_stats __percpu *stats;
	atomic_t active;
	wait_queue_head_t all_released;
	spinlock_t lock; /* conns, peers */
	struct list_head conns;
	DECLARE_HASHTABLE(peers, KTCP_PEER_HASH_BITS);
	u32 peer_seed; /* the peers hash's, random at start */
	/* kthread mode: every connection thread completes this as its very
	 * last act, so unload waits until none still runs module text.
	 */
	struct completion threads_exited;
	unsigned long threads_started; /* under lock */
	bool stopping; /* set once at unload; read without a lock */
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

/* checkpatch: MACRO_ARG_PRECEDENCE: field is a member name, not an expression */
#define ktcp_server_count(srv, field, n) this_cpu_add((srv)->stats->field, (n))

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

static inline bool ktcp_server_stopping(const struct ktcp_server *srv)
{
	return READ_ONCE(srv->stopping);
}

/* The idle timeout, idle_timeout_ms, in jiffies; 0: never. */
static inline unsigned long ktcp_server_idle(const struct ktcp_server *srv)
{
	return msecs_to_jiffies(srv->p.idle_timeout_ms);
}

static inline unsigned int ktcp_server_active(const struct ktcp_server *srv)
{
	return atomic_read(&srv->active);
}

void ktcp_server_sum(const struct ktcp_server *srv,
		     struct ktcp_server_stats *sum);

/* Run the connection's step soon (any context). */
void ktcp_conn_kick(struct ktcp_conn *c);
/* From the step: detach and free the connection; the step returns. */
void ktcp_conn_close(struct ktcp_conn *c);

static inline void ktcp_conn_touch(struct ktcp_conn *c)
{
	c->last_active = jiffies;
}

/*
 * From the step, with nothing to do until an event: true if @deadline has
 * passed, else the timer is armed for it (an event or the timer kicks).
 */
bool ktcp_conn_wait(struct ktcp_conn *c, unsigned long deadline);

/*
 * From the step: the deadline of a connection idle for @idle (jiffies),
 * counting as activity every byte the peer acknowledged — a reader that
 * takes a long response slowly but steadily is not idle; one whose window
 * stays shut is.
 */
unsigned long ktcp_conn_idle_deadline(struct ktcp_conn *c, unsigned long idle);

/*
 * Between kernel/common's two files only (ktcp_server.c calls ktcp_conn.c).
 * Take over an accepted socket (or an adopted one, held by @file; else
 * NULL), for which the caller has already counted one in srv->active (its
 * place under max_conns); on error (-EDQUOT: over max_conns_per_ip) the
 * caller still owns the socket and the count.
 */
int ktcp_conn_start(struct ktcp_server *srv, struct socket *sock,
		    struct file *file);
/* Refuse a socket: the module may say why, then it closes. */
void ktcp_conn_refuse(struct ktcp_server *srv, struct socket *sock);

#endif /* KTCP_SERVER_H */
