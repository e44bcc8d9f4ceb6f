/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * ktcp_conn.h — the lower of kernel/common's two layers: a connection's
 * lifecycle (socket-callback attach/detach, the kick that runs its step,
 * its idle timer, its release) and the registry it lives in (the live
 * connections, their count per peer address, the counters), all kept in
 * struct ktcp_server. A module supplies its protocol step (struct
 * ktcp_server_ops). ktcp_conn.c implements it and includes nothing of
 * the layer above; ktcp_server.h (listener, accept thread, start and
 * stop) is built on it, and is what a module includes.
 */
#ifndef KTCP_CONN_H
#define KTCP_CONN_H

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/hashtable.h>
#include <linux/in6.h>
#include <linux/jiffies.h>
#include <linux/list.h>
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
struct ktcp_listener;

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
	/* TCP_DEFER_ACCEPT of the listeners, seconds; 0: accept at the
	 * handshake
	 */
	int defer_accept_s;
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
 * A server: what the lifecycle and the registry keep, and its listeners
 * (struct ktcp_listener, ktcp_server.h's).
 */
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

/* checkpatch: MACRO_ARG_PRECEDENCE: field is a member name, not an expression */
#define ktcp_server_count(srv, field, n) this_cpu_add((srv)->stats->field, (n))

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

#endif /* KTCP_CONN_H */
