// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * ktcp_server.c — the server every ktcp module shares, the upper of
 * kernel/common's two files (see ktcp_server.h; each module compiles its
 * own copy): the listener, the accept thread (refusal above max_conns,
 * backoff on transient errors, stop on a dead listener), start, stop and
 * the counters' sum. Each accepted socket becomes a connection in
 * ktcp_conn.c, below it.
 */
#ifndef pr_fmt
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt
#endif

#include <linux/delay.h>
#include <linux/err.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/inet.h>
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

#include "ktcp_server.h"

/* Transient accept errors back off from this, doubling, up to a second. */
#define KTCP_ACCEPT_BACKOFF_MIN_MS 10
#define KTCP_ACCEPT_BACKOFF_MAX_MS 1000

/* ---- the listener ---- */

/*
 * The listening socket on @bind (NULL or "": every address; IPv4 too on a
 * dual-stack socket whatever net.ipv6.bindv6only says), @port.
 */
static int ktcp_listen(const char *bind, unsigned short port, int backlog,
		       struct socket **res)
{
	struct sockaddr_storage ss = {};
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	bool any = !bind || !*bind;
	int family, addrlen, zero = 0;
	struct socket *sock;
	int err;

	if (!any && in4_pton(bind, -1, (u8 *)&sin->sin_addr, -1, NULL)) {
		family = AF_INET;
	} else if (any ||
		   in6_pton(bind, -1, (u8 *)&sin6->sin6_addr, -1, NULL)) {
		family = AF_INET6;
	} else {
		pr_err("bind=%s: not an IPv4 or IPv6 address\n", bind);
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
	err = kernel_listen(sock, backlog);
	if (err < 0) {
		pr_err("cannot listen on port %u: %d\n", port, err);
		goto out_release;
	}
	*res = sock;
	return 0;

out_release:
	sock_release(sock);
	return err;
}

/* ---- the accept thread ---- */

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

static int ktcp_accept_loop(void *data)
{
	struct ktcp_server *srv = data;
	unsigned int backoff = 0;

	while (!kthread_should_stop()) {
		struct socket *sock;
		unsigned int limit = srv->p.max_conns;
		int err = kernel_accept(srv->listener, &sock, 0);

		if (err < 0) {
			if (ktcp_server_stopping(srv) || kthread_should_stop())
				break;
			ktcp_server_count(srv, errors, 1);
			if (ktcp_accept_fatal(srv->listener, err)) {
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
		backoff = 0;
		if (ktcp_server_stopping(srv)) {
			sock_release(sock);
			continue;
		}
		if (limit && ktcp_server_active(srv) >= limit) {
			ktcp_conn_refuse(srv, sock);
			continue;
		}
		err = ktcp_conn_start(srv, sock);
		if (err == -EDQUOT) {
			ktcp_conn_refuse(srv, sock);
			continue;
		}
		if (err < 0) {
			ktcp_server_count(srv, errors, 1);
			sock_release(sock);
		}
	}
	ktcp_wait_for_stop();
	return 0;
}

/* ---- start and stop ---- */

int ktcp_server_start(struct ktcp_server *srv,
		      const struct ktcp_server_ops *ops,
		      const struct ktcp_server_params *p)
{
	unsigned int flags = p->wq_flags | WQ_MEM_RECLAIM;
	int err = -ENOMEM;

	memset(srv, 0, sizeof(*srv));
	srv->ops = ops;
	srv->p = *p;
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
	err = ktcp_listen(p->bind, p->port, p->backlog, &srv->listener);
	if (err < 0)
		goto out_wq;
	srv->accept_task =
		kthread_run(ktcp_accept_loop, srv, "%s-accept", p->name);
	if (IS_ERR(srv->accept_task)) {
		err = PTR_ERR(srv->accept_task);
		goto out_sock;
	}
	return 0;

out_sock:
	sock_release(srv->listener);
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
	/* Wakes the accept thread: accept on a shut-down listener fails. */
	kernel_sock_shutdown(srv->listener, SHUT_RDWR);
	kthread_stop(srv->accept_task);
	sock_release(srv->listener);

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
