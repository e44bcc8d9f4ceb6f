/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * ktcp_sock.h — the socket plumbing every ktcp module shares: the dual-stack
 * listener, installing and restoring a connection's socket callbacks, and the
 * accept thread's wait for kthread_stop(). Static inline so each module
 * compiles its own copy under its own pr_fmt, with no object shared between
 * modules.
 */
#ifndef KTCP_SOCK_H
#define KTCP_SOCK_H

#include <linux/in.h>
#include <linux/in6.h>
#include <linux/kthread.h>
#include <linux/net.h>
#include <linux/sched.h>
#include <linux/tcp.h>
#include <net/net_namespace.h>
#include <net/sock.h>

/* The callbacks a connection takes over; also where the socket's own wait. */
struct ktcp_sock_callbacks {
	void (*data_ready)(struct sock *sk);
	void (*write_space)(struct sock *sk);
	void (*state_change)(struct sock *sk);
};

/* Installs @ours with @owner as sk_user_data; the socket's own go to @saved. */
static inline void ktcp_sock_attach(struct sock *sk, void *owner,
				    const struct ktcp_sock_callbacks *ours,
				    struct ktcp_sock_callbacks *saved)
{
	write_lock_bh(&sk->sk_callback_lock);
	saved->data_ready = sk->sk_data_ready;
	saved->write_space = sk->sk_write_space;
	saved->state_change = sk->sk_state_change;
	sk->sk_user_data = owner;
	sk->sk_data_ready = ours->data_ready;
	sk->sk_write_space = ours->write_space;
	sk->sk_state_change = ours->state_change;
	write_unlock_bh(&sk->sk_callback_lock);
}

/*
 * Puts the socket's own callbacks back. Once this returns no callback of
 * ours runs for this socket any more and none can find the owner.
 */
static inline void ktcp_sock_detach(struct sock *sk,
				    const struct ktcp_sock_callbacks *saved)
{
	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_user_data = NULL;
	sk->sk_data_ready = saved->data_ready;
	sk->sk_write_space = saved->write_space;
	sk->sk_state_change = saved->state_change;
	write_unlock_bh(&sk->sk_callback_lock);
}

/* A listening TCP socket on @port: dual-stack, plain IPv4 without IPv6. */
static inline int ktcp_listen(unsigned short port, int backlog,
			      struct socket **res)
{
	struct sockaddr_in6 sin6 = {
		.sin6_family = AF_INET6,
		.sin6_addr = IN6ADDR_ANY_INIT,
		.sin6_port = htons(port),
	};
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_ANY),
		.sin_port = htons(port),
	};
	struct sockaddr *addr = (struct sockaddr *)&sin6;
	int addrlen = sizeof(sin6);
	struct socket *sock;
	int err;

	err = sock_create_kern(&init_net, PF_INET6, SOCK_STREAM, IPPROTO_TCP,
			       &sock);
	if (err == -EAFNOSUPPORT) {
		err = sock_create_kern(&init_net, PF_INET, SOCK_STREAM,
				       IPPROTO_TCP, &sock);
		addr = (struct sockaddr *)&sin;
		addrlen = sizeof(sin);
	}
	if (err < 0) {
		pr_err("cannot create socket: %d\n", err);
		goto out;
	}
	sock_set_reuseaddr(sock->sk);
	tcp_sock_set_nodelay(sock->sk);

	err = kernel_bind(sock, addr, addrlen);
	if (err < 0) {
		pr_err("cannot bind port %u: %d\n", port, err);
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
out:
	return err;
}

/* An accept thread that stopped early must still be alive for kthread_stop. */
static inline void ktcp_kthread_wait_for_stop(void)
{
	while (!kthread_should_stop()) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (!kthread_should_stop())
			schedule();
		__set_current_state(TASK_RUNNING);
	}
}

#endif /* KTCP_SOCK_H */
