// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * drop-tcp-socket — benchmark hygiene: a write of netstat-style address pairs
 * to /proc/net/drop_tcp_sock removes those TCP sockets. TIME-WAIT sockets are
 * descheduled at once (freeing the local port for the next run); sockets in
 * any other state are aborted as `ss -K` would.
 *
 * Format: pairs "LOCAL:PORT REMOTE:PORT" separated by whitespace or newlines,
 * as in the Local/Foreign columns of netstat. IPv6 addresses may be written
 * bare (the last colon starts the port) or in brackets: [::1]:8081. The whole
 * write is parsed before anything is dropped, so a malformed write drops
 * nothing and fails with EINVAL.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ctype.h>
#include <linux/inet.h>
#include <linux/module.h>
#include <linux/proc_fs.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <net/inet6_hashtables.h>
#include <net/inet_hashtables.h>
#include <net/inet_timewait_sock.h>
#include <net/net_namespace.h>
#include <net/tcp.h>

MODULE_LICENSE("Dual MIT/GPL");
MODULE_AUTHOR("ktcp authors");
MODULE_DESCRIPTION("Drop TCP sockets, TIME-WAIT included, named by address");
MODULE_VERSION("0.1");

/* A write holds at most this many bytes: plenty for thousands of pairs. */
#define DROP_MAX_WRITE (256 * 1024)

struct drop_endpoint {
	int family;
	union {
		__be32 v4;
		struct in6_addr v6;
	} addr;
	u16 port; /* host order */
};

struct drop_pair {
	struct drop_endpoint local, remote;
};

static int drop_parse_endpoint(const char *s, size_t len,
			       struct drop_endpoint *ep)
{
	const char *colon, *addr = s, *end;
	size_t addr_len;
	unsigned int port = 0;
	size_t i;

	if (len == 0 || len > INET6_ADDRSTRLEN + 8)
		return -EINVAL;
	for (colon = s + len - 1; colon > s && *colon != ':'; colon--)
		;
	if (colon == s || colon == s + len - 1)
		return -EINVAL;
	for (i = colon - s + 1; i < len; i++) {
		if (!isdigit(s[i]))
			return -EINVAL;
		port = port * 10 + (s[i] - '0');
		if (port > 65535)
			return -EINVAL;
	}
	if (port == 0)
		return -EINVAL;
	ep->port = port;

	addr_len = colon - s;
	if (addr[0] == '[') {
		if (addr_len < 3 || addr[addr_len - 1] != ']')
			return -EINVAL;
		addr++;
		addr_len -= 2;
	}
	if (in4_pton(addr, addr_len, (u8 *)&ep->addr.v4, -1, &end) &&
	    end == addr + addr_len) {
		ep->family = AF_INET;
		return 0;
	}
	if (in6_pton(addr, addr_len, ep->addr.v6.s6_addr, -1, &end) &&
	    end == addr + addr_len) {
		ep->family = AF_INET6;
		return 0;
	}
	return -EINVAL;
}

/* Returns the number of pairs, or -EINVAL; pairs may be NULL to count. */
static int drop_parse(const char *buf, size_t len, struct drop_pair *pairs)
{
	struct drop_endpoint ep[2];
	int n = 0, half = 0;
	size_t i = 0;

	while (i < len) {
		size_t start;
		int err;

		if (isspace(buf[i])) {
			i++;
			continue;
		}
		start = i;
		while (i < len && !isspace(buf[i]))
			i++;
		err = drop_parse_endpoint(buf + start, i - start, &ep[half]);
		if (err)
			return err;
		if (++half == 2) {
			if (ep[0].family != ep[1].family)
				return -EINVAL;
			if (pairs) {
				pairs[n].local = ep[0];
				pairs[n].remote = ep[1];
			}
			n++;
			half = 0;
		}
	}
	return half ? -EINVAL : n;
}

static struct sock *drop_lookup(struct net *net, const struct drop_pair *p)
{
	struct inet_hashinfo *hinfo = net->ipv4.tcp_death_row.hashinfo;
	struct sock *sk = NULL;

	/*
     * Established-table lookup only: a listener must never match. The
     * lookup is written from the receiving side: the packet's source is the
     * remote end. A reference is taken for us.
     */
	rcu_read_lock();
	local_bh_disable();
	if (p->local.family == AF_INET)
		sk = __inet_lookup_established(net, hinfo, p->remote.addr.v4,
					       htons(p->remote.port),
					       p->local.addr.v4, p->local.port,
					       0, 0);
#if IS_ENABLED(CONFIG_IPV6)
	else
		sk = __inet6_lookup_established(net, hinfo, &p->remote.addr.v6,
						htons(p->remote.port),
						&p->local.addr.v6,
						p->local.port, 0, 0);
#endif
	local_bh_enable();
	rcu_read_unlock();
	return sk;
}

static void drop_sock(struct sock *sk)
{
	if (sk->sk_state == TCP_TIME_WAIT) {
		/* Consumes the reference the lookup took. */
		local_bh_disable();
		inet_twsk_deschedule_put(inet_twsk(sk));
		local_bh_enable();
		return;
	}
	/* Any other state, half-open requests included: as ss -K does. */
	tcp_abort(sk, ECONNABORTED);
	sock_gen_put(sk);
}

static ssize_t drop_write(struct file *file, const char __user *ubuf,
			  size_t len, loff_t *ppos)
{
	struct net *net = pde_data(file_inode(file));
	struct drop_pair *pairs;
	ssize_t ret = len;
	char *buf;
	int n, i;

	if (len > DROP_MAX_WRITE)
		return -E2BIG;
	buf = memdup_user_nul(ubuf, len);
	if (IS_ERR(buf))
		return PTR_ERR(buf);

	n = drop_parse(buf, len, NULL);
	if (n <= 0) {
		ret = n ? n : -EINVAL;
		goto out_buf;
	}
	pairs = kvmalloc_array(n, sizeof(*pairs), GFP_KERNEL);
	if (!pairs) {
		ret = -ENOMEM;
		goto out_buf;
	}
	drop_parse(buf, len, pairs);
	for (i = 0; i < n; i++) {
		struct sock *sk = drop_lookup(net, &pairs[i]);

		if (sk)
			drop_sock(sk);
		cond_resched();
	}
	kvfree(pairs);
out_buf:
	kfree(buf);
	return ret;
}

static const struct proc_ops drop_proc_ops = {
	.proc_write = drop_write,
	.proc_lseek = noop_llseek,
};

static int __net_init drop_net_init(struct net *net)
{
	if (!proc_create_data("drop_tcp_sock", 0200, net->proc_net,
			      &drop_proc_ops, net))
		return -ENOMEM;
	return 0;
}

static void __net_exit drop_net_exit(struct net *net)
{
	remove_proc_entry("drop_tcp_sock", net->proc_net);
}

static struct pernet_operations drop_net_ops = {
	.init = drop_net_init,
	.exit = drop_net_exit,
};

static int __init drop_init(void)
{
	return register_pernet_subsys(&drop_net_ops);
}

static void __exit drop_exit(void)
{
	unregister_pernet_subsys(&drop_net_ops);
}

module_init(drop_init);
module_exit(drop_exit);
