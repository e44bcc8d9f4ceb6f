// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * ktcp_conn.c — a connection's lifecycle, the lower of kernel/common's two
 * files (see ktcp_conn.h, its only header; each module compiles its own
 * copy): socket callbacks, the kick, deadlines, the registry of live
 * connections and their count per address, start and release.
 * ktcp_server.c, above it, listens, accepts and starts and stops the
 * server.
 *
 * A connection is driven by events, not by a worker sleeping in recvmsg for
 * its whole life: the socket's data_ready / write_space / state_change
 * callbacks and the connection's timer only kick it; its step (a work item,
 * or in kthread mode the connection's own thread) reads without blocking,
 * answers, sends what the socket takes and returns. An idle connection
 * costs memory, never a worker.
 *
 * Lifetime: the accept thread lists the connection and attaches its
 * callbacks under srv->lock. The step closes it by detaching the callbacks
 * (after which none of ours runs for the socket and none can find the
 * connection) and queueing its release, which unlists it under srv->lock,
 * stops the timer, waits out a queued step (it sees ->dead and returns
 * without re-arming the timer) and only then frees. Unload kicks listed
 * connections under the same lock, so it never reaches a freed one.
 */
#ifndef pr_fmt
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt
#endif

#include <linux/delay.h>
#include <linux/err.h>
#include <linux/file.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/inet.h>
#include <linux/jhash.h>
#include <linux/kthread.h>
#include <linux/net.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/socket.h>
#include <linux/tcp.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "ktcp_conn.h"

/* One peer address and how many of its connections are live. */
struct ktcp_peer {
	struct hlist_node node; /* in srv->peers, under srv->lock */
	struct in6_addr addr; /* IPv4 as IPv4-mapped */
	unsigned int count;
};

/* ---- socket callbacks (softirq context, under sk_callback_lock) ---- */

void ktcp_conn_kick(struct ktcp_conn *c)
{
	if (c->thread) {
		/* xchg orders the flag before the wake-up the thread checks. */
		xchg(&c->kicked, true);
		wake_up_process(c->thread);
	} else {
		queue_work(c->srv->wq, &c->work);
	}
}

static void ktcp_data_ready(struct sock *sk)
{
	struct ktcp_conn *c;

	read_lock_bh(&sk->sk_callback_lock);
	c = sk->sk_user_data;
	if (c) {
		/*
		 * An adopted socket's ULP (kTLS) parses records in its own
		 * data_ready; a plain socket's, sock_def_readable, has no
		 * one else to wake.
		 */
		if (c->file)
			c->saved.data_ready(sk);
		ktcp_conn_kick(c);
	}
	read_unlock_bh(&sk->sk_callback_lock);
}

static void ktcp_write_space(struct sock *sk)
{
	struct ktcp_conn *c;

	read_lock_bh(&sk->sk_callback_lock);
	c = sk->sk_user_data;
	if (c) {
		/* TCP's own handler keeps SOCK_NOSPACE accounting right. */
		c->saved.write_space(sk);
		if (sk_stream_is_writeable(sk))
			ktcp_conn_kick(c);
	}
	read_unlock_bh(&sk->sk_callback_lock);
}

static void ktcp_state_change(struct sock *sk)
{
	ktcp_data_ready(sk);
}

static void ktcp_timer_fn(struct timer_list *t)
{
	struct ktcp_conn *c = from_timer(c, t, timer);

	/* The step decides which deadline passed, if any. */
	ktcp_conn_kick(c);
}

/*
 * Take the socket's callbacks over, with @c as sk_user_data; -EBUSY if
 * something else already owns the socket (its callbacks are left alone).
 */
static int ktcp_sock_attach(struct sock *sk, struct ktcp_conn *c)
{
	int err = 0;

	write_lock_bh(&sk->sk_callback_lock);
	if (sk->sk_user_data) {
		err = -EBUSY;
		goto out;
	}
	c->saved.data_ready = sk->sk_data_ready;
	c->saved.write_space = sk->sk_write_space;
	c->saved.state_change = sk->sk_state_change;
	sk->sk_user_data = c;
	sk->sk_data_ready = ktcp_data_ready;
	sk->sk_write_space = ktcp_write_space;
	sk->sk_state_change = ktcp_state_change;
out:
	write_unlock_bh(&sk->sk_callback_lock);
	return err;
}

/* Once this returns no callback of ours runs and none can find @c. */
static void ktcp_sock_detach(struct sock *sk, struct ktcp_conn *c)
{
	write_lock_bh(&sk->sk_callback_lock);
	if (sk->sk_user_data == c) {
		sk->sk_user_data = NULL;
		sk->sk_data_ready = c->saved.data_ready;
		sk->sk_write_space = c->saved.write_space;
		sk->sk_state_change = c->saved.state_change;
	}
	write_unlock_bh(&sk->sk_callback_lock);
}

/* ---- deadlines ---- */

bool ktcp_conn_wait(struct ktcp_conn *c, unsigned long deadline)
{
	if (!time_before(jiffies, deadline))
		return true;
	/* mod_timer returns at once when the deadline did not move. */
	mod_timer(&c->timer, deadline);
	return false;
}

unsigned long ktcp_conn_idle_deadline(struct ktcp_conn *c, unsigned long idle)
{
	u32 acked = READ_ONCE(tcp_sk(c->sock->sk)->snd_una);

	if (acked != c->acked) {
		c->acked = acked;
		c->last_active = jiffies;
	}
	return c->last_active + idle;
}

/* ---- the registry: live connections and their count per address ---- */

/* @sock's peer, IPv4 as IPv4-mapped IPv6; :: when it has none. */
static void ktcp_peer_addr(struct socket *sock, struct in6_addr *addr)
{
	struct sockaddr_storage ss = {};

	memset(addr, 0, sizeof(*addr));
	if (kernel_getpeername(sock, (struct sockaddr *)&ss) < 0)
		return;
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		ipv6_addr_set_v4mapped(sin->sin_addr.s_addr, addr);
	} else if (ss.ss_family == AF_INET6) {
		*addr = ((struct sockaddr_in6 *)&ss)->sin6_addr;
	}
}

/*
 * The key @addr is counted under: IPv4 whole (the same client either way),
 * IPv6 cut to its first @prefix bits (a client given a /64 has 2^64
 * addresses to walk around a per-address count).
 */
static void ktcp_peer_key(struct in6_addr *key, const struct in6_addr *addr,
			  unsigned int prefix)
{
	if (ipv6_addr_v4mapped(addr))
		*key = *addr;
	else
		ipv6_addr_prefix(key, addr, prefix);
}

static u32 ktcp_peer_hash(const struct ktcp_server *srv,
			  const struct in6_addr *addr)
{
	return jhash2(addr->s6_addr32, 4, srv->peer_seed);
}

/*
 * List @c and count its address, both under srv->lock; false (nothing
 * done) when the address has max_conns_per_ip already. @spare is a peer
 * entry to use if the address is new; it is consumed (set to NULL) then.
 */
static bool ktcp_register(struct ktcp_server *srv, struct ktcp_conn *c,
			  const struct in6_addr *addr, struct ktcp_peer **spare)
{
	struct ktcp_peer *peer = NULL, *p;

	lockdep_assert_held(&srv->lock);
	if (srv->p.max_conns_per_ip) {
		u32 h = ktcp_peer_hash(srv, addr);

		hash_for_each_possible(srv->peers, p, node, h) {
			if (ipv6_addr_equal(&p->addr, addr)) {
				peer = p;
				break;
			}
		}
		if (peer &&
		    peer->count >= (unsigned int)srv->p.max_conns_per_ip)
			return false;
		if (!peer) {
			peer = *spare;
			*spare = NULL;
			peer->addr = *addr;
			peer->count = 0;
			hash_add(srv->peers, &peer->node, h);
		}
		peer->count++;
	}
	c->peer = peer;
	list_add_tail(&c->node, &srv->conns);
	return true;
}

/* Off the registry; returns the peer entry to free, if it became unused. */
static struct ktcp_peer *ktcp_unregister(struct ktcp_server *srv,
					 struct ktcp_conn *c)
{
	struct ktcp_peer *peer = c->peer;

	lockdep_assert_held(&srv->lock);
	list_del(&c->node);
	if (peer && --peer->count == 0) {
		hash_del(&peer->node);
		return peer;
	}
	return NULL;
}

/* ---- lifetime ---- */

static void *ktcp_conn_outer(struct ktcp_conn *c)
{
	return (char *)c - c->srv->ops->conn_offset;
}

static void ktcp_conn_free(struct ktcp_conn *c)
{
	struct ktcp_server *srv = c->srv;
	struct ktcp_peer *unused;

	/*
	 * Off the registry first: unload kicks every listed connection, and
	 * a kick after cancel_work_sync would queue the work of a freed one.
	 * Callbacks are detached, so then only the timer and an already
	 * queued step can still reach c: stop the one, wait out the other.
	 */
	spin_lock(&srv->lock);
	unused = ktcp_unregister(srv, c);
	spin_unlock(&srv->lock);
	kfree(unused);

	del_timer_sync(&c->timer);
	if (!c->thread)
		cancel_work_sync(&c->work);

	srv->ops->destroy(c);
	/* An adopted socket closes with its file's last reference. */
	if (c->file)
		fput(c->file);
	else
		sock_release(c->sock);
	kmem_cache_free(srv->cache, ktcp_conn_outer(c));
	if (atomic_dec_and_test(&srv->active))
		wake_up(&srv->all_released);
}

void ktcp_conn_close(struct ktcp_conn *c)
{
	c->dead = true;
	ktcp_sock_detach(c->sock->sk, c);
	/* kthread mode: the thread sees ->dead and frees the connection. */
	if (!c->thread)
		queue_work(c->srv->wq, &c->release);
}

static void ktcp_step(struct ktcp_conn *c)
{
	if (c->dead)
		return;
	if (ktcp_server_stopping(c->srv)) {
		ktcp_conn_close(c);
		return;
	}
	c->srv->ops->step(c);
}

static void ktcp_work_fn(struct work_struct *w)
{
	ktcp_step(container_of(w, struct ktcp_conn, work));
}

static void ktcp_release_fn(struct work_struct *w)
{
	ktcp_conn_free(container_of(w, struct ktcp_conn, release));
}

/*
 * kthread mode: the connection's own thread runs the same step and sleeps
 * between events — the thread-per-connection model, kept to measure the
 * workqueue against.
 */
static int ktcp_conn_thread(void *data)
{
	struct ktcp_conn *c = data;
	struct ktcp_server *srv = c->srv;

	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (!xchg(&c->kicked, false)) {
			schedule();
			continue;
		}
		__set_current_state(TASK_RUNNING);
		ktcp_step(c);
		if (c->dead)
			break;
	}
	ktcp_conn_free(c);
	kthread_complete_and_exit(&srv->threads_exited, 0);
}

void ktcp_conn_refuse(struct ktcp_server *srv, struct socket *sock)
{
	ktcp_server_count(srv, refused, 1);
	if (srv->ops->refuse)
		srv->ops->refuse(sock);
	sock_release(sock);
}

int ktcp_conn_start(struct ktcp_server *srv, struct socket *sock,
		    struct file *file)
{
	struct ktcp_peer *spare = NULL;
	struct in6_addr addr, key = {};
	struct ktcp_conn *c;
	void *outer;
	int err;

	ktcp_peer_addr(sock, &addr);
	if (srv->p.max_conns_per_ip) {
		ktcp_peer_key(&key, &addr, srv->p.per_ip_v6_prefix);
		spare = kmalloc(sizeof(*spare), GFP_KERNEL);
		if (!spare)
			return -ENOMEM;
	}
	outer = kmem_cache_zalloc(srv->cache, GFP_KERNEL);
	if (!outer) {
		err = -ENOMEM;
		goto out_spare;
	}
	c = (struct ktcp_conn *)((char *)outer + srv->ops->conn_offset);
	c->srv = srv;
	c->sock = sock;
	c->file = file;
	c->addr = addr;
	c->last_active = jiffies;
	c->acked = READ_ONCE(tcp_sk(sock->sk)->snd_una);
	INIT_WORK(&c->work, ktcp_work_fn);
	INIT_WORK(&c->release, ktcp_release_fn);
	timer_setup(&c->timer, ktcp_timer_fn, 0);
	tcp_sock_set_nodelay(sock->sk);
	err = srv->ops->init ? srv->ops->init(c) : 0;
	if (err < 0)
		goto out_conn;

	if (srv->p.kthread) {
		/* Data may have arrived before the callbacks were in place. */
		c->kicked = true;
		c->thread = kthread_create(ktcp_conn_thread, c, "%s-conn",
					   srv->p.name);
		if (IS_ERR(c->thread)) {
			err = PTR_ERR(c->thread);
			c->thread = NULL;
			goto out_destroy;
		}
	}

	/*
	 * List, attach and first kick under the registry lock: once attached,
	 * a callback can run the step, which can close the connection, but
	 * ktcp_conn_free() unlists it under this lock before freeing it.
	 */
	spin_lock(&srv->lock);
	if (!ktcp_register(srv, c, &key, &spare)) {
		spin_unlock(&srv->lock);
		err = -EDQUOT;
		goto out_thread;
	}
	err = ktcp_sock_attach(sock->sk, c);
	if (err < 0) {
		struct ktcp_peer *unused = ktcp_unregister(srv, c);

		spin_unlock(&srv->lock);
		kfree(unused);
		goto out_thread;
	}
	/* Counted before its first step: a client served at once never sees
	 * itself missing from accepted.
	 */
	ktcp_server_count(srv, accepted, 1);
	if (c->thread)
		srv->threads_started++;
	ktcp_conn_kick(c);
	spin_unlock(&srv->lock);
	kfree(spare);
	return 0;

out_thread:
	if (c->thread) {
		/* Never woken: kthread_stop() makes it exit before its fn. */
		kthread_stop(c->thread);
		c->thread = NULL;
	}
out_destroy:
	srv->ops->destroy(c);
out_conn:
	kmem_cache_free(srv->cache, outer);
out_spare:
	kfree(spare);
	return err;
}
