// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * ktcp_server.c — the server every ktcp module shares, the upper of
 * kernel/common's two files (see ktcp_server.h; each module compiles its
 * own copy): the listener (one per online CPU with a per-CPU workqueue),
 * the accept thread that drains it in batches (refusal above max_conns,
 * backoff on transient errors, stop on a dead listener), start, stop and
 * the counters' sum. Each accepted socket becomes a connection in
 * ktcp_conn.c, below it.
 */
#ifndef pr_fmt
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt
#endif

#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/inet.h>
#include <linux/kthread.h>
#include <linux/random.h>
#include <linux/net.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/socket.h>
#include <linux/tcp.h>
#include <net/inet_connection_sock.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>
#include <net/request_sock.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "ktcp_server.h"

/* Transient accept errors back off from this, doubling, up to a second. */
#define KTCP_ACCEPT_BACKOFF_MIN_MS 10
#define KTCP_ACCEPT_BACKOFF_MAX_MS 1000

/* ---- the listener ---- */

/*
 * The listening socket on @bind (NULL or "": every address; IPv4 too on a
 * dual-stack socket whatever net.ipv6.bindv6only says), @port. With @cpu
 * (not -1) it is one of a group on the same port (SO_REUSEPORT) and asks
 * for the connections whose packets arrive on @cpu (SO_INCOMING_CPU).
 */
/*
 * The whole of @bind is the address: in4_pton() stops at a ':' as at the
 * end, so "127.0.0.1:80" would bind 127.0.0.1 and leave the port unsaid.
 */
static bool ktcp_parse_v4(const char *bind, struct in_addr *a)
{
	const char *end;

	return in4_pton(bind, -1, (u8 *)a, -1, &end) && !*end;
}

static bool ktcp_parse_v6(const char *bind, struct in6_addr *a)
{
	const char *end;

	return in6_pton(bind, -1, (u8 *)a, -1, &end) && !*end;
}

static int ktcp_listen(const struct ktcp_server_params *p, int cpu,
		       struct socket **res)
{
	const char *bind = p->bind;
	unsigned short port = p->port;
	struct sockaddr_storage ss = {};
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	bool any = !bind || !*bind;
	int family, addrlen, zero = 0;
	int lowat = KTCP_NOTSENT_LOWAT;
	int defer = p->defer_accept_s;
	struct socket *sock;
	int err;

	if (!any && ktcp_parse_v4(bind, &sin->sin_addr)) {
		family = AF_INET;
	} else if (any || ktcp_parse_v6(bind, &sin6->sin6_addr)) {
		family = AF_INET6;
	} else {
		pr_err("bind=%s: not an IPv4 or IPv6 address (the port is its own parameter)\n",
		       bind);
		return -EINVAL;
	}

	err = sock_create_kern(&init_net, family, SOCK_STREAM, IPPROTO_TCP,
			       &sock);
	if (err == -EAFNOSUPPORT && any) {
		/* No IPv6 in this kernel: every IPv4 address then. */
		family = AF_INET;
		err = sock_create_kern(&init_net, family, SOCK_STREAM,
				       IPPROTO_TCP, &sock);
	}
	if (err < 0) {
		pr_err("cannot create socket: %d\n", err);
		return err;
	}
	sock_set_reuseaddr(sock->sk);
	tcp_sock_set_nodelay(sock->sk);
	err = sock->ops->setsockopt(sock, SOL_TCP, TCP_NOTSENT_LOWAT,
				    KERNEL_SOCKPTR(&lowat), sizeof(lowat));
	if (err < 0) {
		pr_err("cannot set TCP_NOTSENT_LOWAT: %d\n", err);
		goto out_release;
	}
	if (cpu >= 0) {
		sock_set_reuseport(sock->sk);
		/* Counted in the reuseport group when it binds. */
		err = sock_setsockopt(sock, SOL_SOCKET, SO_INCOMING_CPU,
				      KERNEL_SOCKPTR(&cpu), sizeof(cpu));
		if (err < 0) {
			pr_err("cannot set SO_INCOMING_CPU: %d\n", err);
			goto out_release;
		}
	}

	if (family == AF_INET6) {
		/* Dual-stack on purpose, not by the sysctl's default. */
		err = sock->ops->setsockopt(sock, SOL_IPV6, IPV6_V6ONLY,
					    KERNEL_SOCKPTR(&zero),
					    sizeof(zero));
		if (err < 0) {
			pr_err("cannot clear IPV6_V6ONLY: %d\n", err);
			goto out_release;
		}
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		addrlen = sizeof(*sin6);
	} else {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		addrlen = sizeof(*sin);
	}

	err = kernel_bind(sock, (struct sockaddr *)&ss, addrlen);
	if (err < 0) {
		pr_err("cannot bind %s port %u: %d\n", any ? "*" : bind, port,
		       err);
		goto out_release;
	}
	err = kernel_listen(sock, p->backlog);
	if (err < 0) {
		pr_err("cannot listen on port %u: %d\n", port, err);
		goto out_release;
	}
	/*
	 * The servers answer what they receive at once, and the answer
	 * carries the ACK: delayed-ACK (pingpong) mode from the start,
	 * inherited by every accepted socket, saves the bare ACK a new
	 * connection sends for its first request. After listen, which
	 * resets the mode.
	 */
	tcp_sock_set_quickack(sock->sk, 0);
	if (defer > 0) {
		err = sock->ops->setsockopt(sock, SOL_TCP, TCP_DEFER_ACCEPT,
					    KERNEL_SOCKPTR(&defer),
					    sizeof(defer));
		if (err < 0) {
			pr_err("cannot set TCP_DEFER_ACCEPT: %d\n", err);
			goto out_release;
		}
	}
	*res = sock;
	return 0;

out_release:
	sock_release(sock);
	return err;
}

/* ---- the accept thread ---- */

/*
 * Connections accepted per round before the thread looks whether it should
 * stop and lets others run; the rest of the queue waits for the next round,
 * which follows at once.
 */
#define KTCP_ACCEPT_BUDGET 64

/*
 * The listener's callbacks (softirq context): a connection is ready to be
 * accepted, or the listener changed state (shut down, aborted). Either way
 * the accept thread is woken and looks.
 *
 * A connection the listener makes inherits these callbacks but not
 * sk_user_data (SK_USER_DATA_NOCOPY): until it is accepted, its events find
 * no listener here and are left to its first step, which reads whatever
 * came; accepting gives it the socket's own callbacks back.
 */
enum ktcp_listener_event { KTCP_LE_DATA, KTCP_LE_STATE, KTCP_LE_ERROR };

static void ktcp_listener_wake(struct sock *sk, enum ktcp_listener_event ev)
{
	struct ktcp_listener *l;

	read_lock_bh(&sk->sk_callback_lock);
	l = __locked_read_sk_user_data_with_flags(sk, SK_USER_DATA_NOCOPY);
	if (l) {
		/* The socket's own handler wakes anyone else waiting on it. */
		if (ev == KTCP_LE_DATA)
			l->data_ready(sk);
		else if (ev == KTCP_LE_STATE)
			l->state_change(sk);
		else
			l->error_report(sk);
		/* xchg orders the flag before the wake-up the thread checks. */
		xchg(&l->pending, true);
		wake_up_process(l->task);
	}
	read_unlock_bh(&sk->sk_callback_lock);
}

static void ktcp_listener_data_ready(struct sock *sk)
{
	ktcp_listener_wake(sk, KTCP_LE_DATA);
}

static void ktcp_listener_state_change(struct sock *sk)
{
	ktcp_listener_wake(sk, KTCP_LE_STATE);
}

static void ktcp_listener_error_report(struct sock *sk)
{
	ktcp_listener_wake(sk, KTCP_LE_ERROR);
}

/* Ours in place of the socket's own, with @l as sk_user_data. */
static void ktcp_listener_attach(struct ktcp_listener *l)
{
	struct sock *sk = l->sock->sk;

	write_lock_bh(&sk->sk_callback_lock);
	l->data_ready = sk->sk_data_ready;
	l->state_change = sk->sk_state_change;
	l->error_report = sk->sk_error_report;
	__rcu_assign_sk_user_data_with_flags(sk, l, SK_USER_DATA_NOCOPY);
	sk->sk_data_ready = ktcp_listener_data_ready;
	sk->sk_state_change = ktcp_listener_state_change;
	sk->sk_error_report = ktcp_listener_error_report;
	write_unlock_bh(&sk->sk_callback_lock);
}

/* Once this returns no callback of ours runs for @l's socket. */
static void ktcp_listener_detach(struct ktcp_listener *l)
{
	struct sock *sk = l->sock->sk;

	write_lock_bh(&sk->sk_callback_lock);
	if (__locked_read_sk_user_data_with_flags(sk, SK_USER_DATA_NOCOPY) ==
	    l) {
		rcu_assign_sk_user_data(sk, NULL);
		sk->sk_data_ready = l->data_ready;
		sk->sk_state_change = l->state_change;
		sk->sk_error_report = l->error_report;
	}
	write_unlock_bh(&sk->sk_callback_lock);
}

/* An accepted socket gets the callbacks the listener had of its own. */
static void ktcp_listener_disown(struct ktcp_listener *l, struct socket *sock)
{
	struct sock *sk = sock->sk;

	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_data_ready = l->data_ready;
	sk->sk_state_change = l->state_change;
	sk->sk_error_report = l->error_report;
	write_unlock_bh(&sk->sk_callback_lock);
}

/* An accept thread that stopped early must still be alive for kthread_stop. */
static void ktcp_wait_for_stop(void)
{
	while (!kthread_should_stop()) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (!kthread_should_stop())
			schedule();
		__set_current_state(TASK_RUNNING);
	}
}

/* Sleep @ms, or less if the thread is stopped meanwhile. */
static void ktcp_backoff(unsigned int ms)
{
	set_current_state(TASK_INTERRUPTIBLE);
	if (!kthread_should_stop())
		schedule_timeout(msecs_to_jiffies(ms));
	__set_current_state(TASK_RUNNING);
}

/* Sleep until a callback says the listener has something, or stop. */
static void ktcp_accept_sleep(struct ktcp_listener *l)
{
	set_current_state(TASK_INTERRUPTIBLE);
	if (!xchg(&l->pending, false) && !kthread_should_stop())
		schedule();
	__set_current_state(TASK_RUNNING);
}

/*
 * A failed accept is fatal when the listener itself is gone: inet_accept()
 * answers -EINVAL once the socket left TCP_LISTEN (shut down, or aborted by
 * ss -K / SOCK_DESTROY), and nothing will bring it back. Anything else
 * (no memory, no descriptors, a connection aborted before it was taken)
 * passes.
 */
static bool ktcp_accept_fatal(struct socket *listener, int err)
{
	if (READ_ONCE(listener->sk->sk_state) != TCP_LISTEN)
		return true;
	return err == -EINVAL || err == -EBADF || err == -ENOTSOCK ||
	       err == -EOPNOTSUPP;
}

/*
 * Hand an accepted socket over: served, refused, or closed. Its place under
 * max_conns is taken before it starts, in one atomic step, so accept
 * threads on several listeners never admit more than max_conns between
 * them.
 */
static void ktcp_accept_one(struct ktcp_server *srv, struct socket *sock)
{
	unsigned int limit = srv->p.max_conns;
	int err;

	if (ktcp_server_stopping(srv)) {
		sock_release(sock);
		return;
	}
	if (!limit) {
		atomic_inc(&srv->active);
	} else if (!atomic_add_unless(&srv->active, 1, limit)) {
		ktcp_conn_refuse(srv, sock);
		return;
	}
	err = ktcp_conn_start(srv, sock, NULL);
	if (err == 0)
		return;
	if (atomic_dec_and_test(&srv->active))
		wake_up(&srv->all_released);
	if (err == -EDQUOT) {
		ktcp_conn_refuse(srv, sock);
		return;
	}
	/* -EACCES: the module turned the client away and counted it */
	if (err != -EACCES)
		ktcp_server_count(srv, errors, 1);
	sock_release(sock);
}

int ktcp_server_adopt(struct ktcp_server *srv, struct file *file)
{
	unsigned int limit = srv->p.max_conns;
	struct socket *sock = sock_from_file(file);
	int err;

	if (!sock)
		return -ENOTSOCK;
	if (ktcp_server_stopping(srv))
		return -ESHUTDOWN;
	if (!limit) {
		atomic_inc(&srv->active);
	} else if (!atomic_add_unless(&srv->active, 1, limit)) {
		ktcp_server_count(srv, refused, 1);
		return -EBUSY;
	}
	err = ktcp_conn_start(srv, sock, file);
	if (err == 0)
		return 0;
	if (atomic_dec_and_test(&srv->active))
		wake_up(&srv->all_released);
	if (err == -EDQUOT) {
		ktcp_server_count(srv, refused, 1);
		err = -EBUSY;
	}
	return err;
}

/*
 * Nothing to accept: the listener is listening and its queue is empty.
 * Asked before kernel_accept(), which allocates a socket (an inode) first
 * and would free it again for nothing at the end of every drain.
 */
static bool ktcp_listener_empty(struct ktcp_listener *l)
{
	struct sock *sk = l->sock->sk;

	return READ_ONCE(sk->sk_state) == TCP_LISTEN &&
	       reqsk_queue_empty(&inet_csk(sk)->icsk_accept_queue);
}

/*
 * Each wake-up drains what the listener has queued, without blocking, up
 * to KTCP_ACCEPT_BUDGET connections a round; with the queue empty the
 * thread sleeps until a callback says there is more. A burst of connections
 * costs one wake-up, not one each.
 */
static int ktcp_accept_loop(void *data)
{
	struct ktcp_listener *l = data;
	struct ktcp_server *srv = l->srv;
	unsigned int backoff = 0;

	while (!kthread_should_stop()) {
		unsigned int n;
		int err = 0;

		for (n = 0; n < KTCP_ACCEPT_BUDGET; n++) {
			struct socket *sock;

			if (ktcp_listener_empty(l)) {
				err = -EAGAIN;
				break;
			}
			err = kernel_accept(l->sock, &sock, O_NONBLOCK);
			if (err < 0)
				break;
			backoff = 0;
			ktcp_listener_disown(l, sock);
			ktcp_accept_one(srv, sock);
		}
		if (err == -EAGAIN) {
			ktcp_accept_sleep(l);
			continue;
		}
		if (err < 0) {
			if (ktcp_server_stopping(srv) || kthread_should_stop())
				break;
			ktcp_server_count(srv, errors, 1);
			if (ktcp_accept_fatal(l->sock, err)) {
				pr_err("port %u: the listener is gone (accept: %d); not serving until reloaded\n",
				       srv->p.port, err);
				break;
			}
			backoff = backoff ? min(backoff * 2,
						KTCP_ACCEPT_BACKOFF_MAX_MS) :
					    KTCP_ACCEPT_BACKOFF_MIN_MS;
			ktcp_backoff(backoff);
			continue;
		}
		/* The budget is spent: let others run, then the next round. */
		cond_resched();
	}
	ktcp_wait_for_stop();
	return 0;
}

/* ---- start and stop ---- */

/*
 * With per-CPU workers, one listener per online CPU: the connections the
 * kernel steers to a CPU's listener (SO_REUSEPORT, SO_INCOMING_CPU) are
 * accepted by a thread bound to that CPU and queued there, so the work
 * runs where the connection arrived. Otherwise one listener.
 */
static bool ktcp_server_per_cpu(const struct ktcp_server_params *p)
{
	return !p->kthread && !(p->wq_flags & WQ_UNBOUND);
}

/* Stop and close the first @n listeners; their callbacks go first. */
static void ktcp_listeners_close(struct ktcp_server *srv, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		struct ktcp_listener *l = &srv->listeners[i];

		/* No callback reaches the thread once it is stopped. */
		ktcp_listener_detach(l);
		if (l->task)
			kthread_stop(l->task);
		sock_release(l->sock);
	}
}

/* Listen on @cpu's socket (-1: the only one) and make its thread. */
static int ktcp_listener_open(struct ktcp_server *srv, struct ktcp_listener *l,
			      int cpu)
{
	const struct ktcp_server_params *p = &srv->p;
	int err;

	l->srv = srv;
	l->cpu = cpu;
	err = ktcp_listen(p, cpu, &l->sock);
	if (err < 0)
		return err;
	if (cpu < 0) {
		l->task = kthread_create(ktcp_accept_loop, l, "%s-accept",
					 p->name);
	} else {
		l->task = kthread_create_on_node(ktcp_accept_loop, l,
						 cpu_to_node(cpu),
						 "%s-accept/%d", p->name, cpu);
		if (!IS_ERR(l->task))
			kthread_bind(l->task, cpu);
	}
	if (IS_ERR(l->task)) {
		err = PTR_ERR(l->task);
		l->task = NULL;
		sock_release(l->sock);
		return err;
	}
	return 0;
}

/*
 * Every listener or none: a socket that cannot bind or a thread that cannot
 * be made closes the ones already open. CPUs that come online later get no
 * listener; a CPU going offline leaves its thread to the scheduler, which
 * moves it to another CPU, and its listener keeps being served.
 */
static int ktcp_listeners_open(struct ktcp_server *srv)
{
	cpumask_var_t cpus;
	unsigned int n = 0, i;
	int cpu, err = 0;

	if (!ktcp_server_per_cpu(&srv->p)) {
		srv->listeners = kzalloc(sizeof(*srv->listeners), GFP_KERNEL);
		if (!srv->listeners)
			return -ENOMEM;
		err = ktcp_listener_open(srv, &srv->listeners[0], -1);
		if (err < 0)
			goto out_free;
		n = 1;
		goto out_run;
	}

	if (!alloc_cpumask_var(&cpus, GFP_KERNEL))
		return -ENOMEM;
	cpumask_copy(cpus, cpu_online_mask);
	srv->listeners = kcalloc(cpumask_weight(cpus), sizeof(*srv->listeners),
				 GFP_KERNEL);
	if (!srv->listeners) {
		free_cpumask_var(cpus);
		return -ENOMEM;
	}
	for_each_cpu(cpu, cpus) {
		err = ktcp_listener_open(srv, &srv->listeners[n], cpu);
		if (err < 0)
			break;
		n++;
	}
	free_cpumask_var(cpus);
	if (err < 0) {
		ktcp_listeners_close(srv, n);
		goto out_free;
	}

out_run:
	srv->nr_listeners = n;
	for (i = 0; i < n; i++) {
		ktcp_listener_attach(&srv->listeners[i]);
		wake_up_process(srv->listeners[i].task);
	}
	return 0;

out_free:
	kfree(srv->listeners);
	srv->listeners = NULL;
	return err;
}

int ktcp_server_start(struct ktcp_server *srv,
		      const struct ktcp_server_ops *ops,
		      const struct ktcp_server_params *p)
{
	unsigned int flags = p->wq_flags | WQ_MEM_RECLAIM;
	int err = -ENOMEM;

	if (p->max_conns_per_ip < 0 || !p->per_ip_v6_prefix ||
	    p->per_ip_v6_prefix > 128) {
		pr_err("max_conns_per_ip must be -1 or more, per_ip_v6_prefix 1..128\n");
		return -EINVAL;
	}
	memset(srv, 0, sizeof(*srv));
	srv->ops = ops;
	srv->p = *p;
	/* Random: a client cannot pick addresses that share a bucket. */
	srv->peer_seed = get_random_u32();
	atomic_set(&srv->active, 0);
	init_waitqueue_head(&srv->all_released);
	spin_lock_init(&srv->lock);
	INIT_LIST_HEAD(&srv->conns);
	hash_init(srv->peers);
	init_completion(&srv->threads_exited);

	srv->stats = alloc_percpu(struct ktcp_server_stats);
	if (!srv->stats)
		return -ENOMEM;
	srv->cache =
		kmem_cache_create(ops->cache_name, ops->conn_size, 0, 0, NULL);
	if (!srv->cache)
		goto out_stats;
	/* kthread mode needs the workqueue only for nothing; it is small. */
	srv->wq = alloc_workqueue("%s", flags, 0, p->name);
	if (!srv->wq)
		goto out_cache;
	err = ktcp_listeners_open(srv);
	if (err < 0)
		goto out_wq;
	return 0;

out_wq:
	destroy_workqueue(srv->wq);
out_cache:
	kmem_cache_destroy(srv->cache);
out_stats:
	free_percpu(srv->stats);
	return err;
}

void ktcp_server_stop(struct ktcp_server *srv)
{
	struct ktcp_conn *c;
	unsigned long i;

	WRITE_ONCE(srv->stopping, true);
	/* Each thread is woken by kthread_stop and never accepts again. */
	ktcp_listeners_close(srv, srv->nr_listeners);
	kfree(srv->listeners);
	srv->listeners = NULL;

	/* Every live connection's step sees the flag and closes. */
	spin_lock(&srv->lock);
	list_for_each_entry(c, &srv->conns, node)
		ktcp_conn_kick(c);
	spin_unlock(&srv->lock);
	wait_event(srv->all_released, atomic_read(&srv->active) == 0);
	for (i = 0; i < srv->threads_started; i++)
		wait_for_completion(&srv->threads_exited);

	destroy_workqueue(srv->wq);
	kmem_cache_destroy(srv->cache);
	free_percpu(srv->stats);
}

void ktcp_server_sum(const struct ktcp_server *srv,
		     struct ktcp_server_stats *sum)
{
	int cpu;

	memset(sum, 0, sizeof(*sum));
	for_each_possible_cpu(cpu) {
		const struct ktcp_server_stats *s =
			per_cpu_ptr(srv->stats, cpu);

		sum->accepted += READ_ONCE(s->accepted);
		sum->refused += READ_ONCE(s->refused);
		sum->timeouts += READ_ONCE(s->timeouts);
		sum->errors += READ_ONCE(s->errors);
	}
}
