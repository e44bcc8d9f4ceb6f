// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * drop-tcp-socket — benchmark hygiene: a write of netstat-style address pairs
 * to /proc/net/drop_tcp_sock removes those TCP sockets. TIME-WAIT sockets are
 * descheduled at once (freeing the local port for the next run); sockets in
 * any other state are aborted as `ss -K` would.
 *
 * Format: pairs "LOCAL:PORT REMOTE:PORT" separated by whitespace or newlines,
 * as in the Local/Foreign columns of netstat. IPv6 addresses may be written
 * bare (the last colon starts the port) or in brackets: [::1]:8081. A pair of
 * IPv4-mapped addresses (::ffff:a.b.c.d, as netstat shows a dual-stack
 * socket talking IPv4) names the IPv4 connection. A socket matches whatever
 * device it is bound to (SO_BINDTODEVICE, VRF).
 *
 * The write is read twice through a small buffer, never copied whole: first
 * to check every pair, so a malformed write drops nothing and fails with
 * EINVAL, then to drop. Like `ss -K`, it takes CAP_NET_ADMIN over the network
 * namespace, both in the task that opened the file and in the one writing
 * (EPERM otherwise). A write that matched no socket fails with ENOENT.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/ctype.h>
#include <linux/inet.h>
#include <linux/module.h>
#include <linux/proc_fs.h>
#include <linux/uaccess.h>
#include <net/inet6_hashtables.h>
#include <net/inet_hashtables.h>
#include <net/inet_timewait_sock.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>
#include <net/tcp.h>

MODULE_LICENSE("Dual MIT/GPL");
MODULE_AUTHOR("ktcp authors");
MODULE_DESCRIPTION("Drop TCP sockets, TIME-WAIT included, named by address");
MODULE_VERSION("0.1");

/* A write holds at most this many bytes: plenty for thousands of pairs. */
#define DROP_MAX_WRITE (256 * 1024)
/* An endpoint's most bytes: room for the longest IPv6 address written
 * (with an IPv4 tail), brackets, a colon and a port, as in
 * "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535".
 */
#define DROP_MAX_TOKEN (INET6_ADDRSTRLEN + 8)
/* How much of the user's buffer is read at a time. */
#define DROP_CHUNK 256
/* Sockets dropped for one pair at most: one per device it may be bound to
 * is the most a 4-tuple can name; the bound keeps the loop finite.
 */
#define DROP_MAX_PER_PAIR 64

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

/* The user's buffer, read DROP_CHUNK bytes at a time. */
struct drop_input {
	const char __user *ubuf;
	size_t len; /* bytes in the write */
	size_t off; /* next byte of ubuf to fetch */
	size_t head; /* unread bytes are chunk[head, tail) */
	size_t tail;
	char chunk[DROP_CHUNK];
};

static void drop_input_init(struct drop_input *in, const char __user *ubuf,
			    size_t len)
{
	in->ubuf = ubuf;
	in->len = len;
	in->off = 0;
	in->head = 0;
	in->tail = 0;
}

/* The next byte, -ENODATA at the end, or -EFAULT. */
static int drop_getc(struct drop_input *in)
{
	if (in->head == in->tail) {
		size_t n = min_t(size_t, in->len - in->off, DROP_CHUNK);

		if (!n)
			return -ENODATA;
		if (copy_from_user(in->chunk, in->ubuf + in->off, n))
			return -EFAULT;
		in->off += n;
		in->head = 0;
		in->tail = n;
	}
	return (unsigned char)in->chunk[in->head++];
}

/*
 * The next whitespace-separated token into tok[DROP_MAX_TOKEN + 1]: its
 * length, 0 at the end of the write, -EINVAL if it is too long to be an
 * endpoint, or -EFAULT.
 */
static int drop_next_token(struct drop_input *in, char *tok)
{
	int c, n = 0;

	do
		c = drop_getc(in);
	while (c >= 0 && isspace(c));
	while (c >= 0 && !isspace(c)) {
		if (n == DROP_MAX_TOKEN)
			return -EINVAL;
		tok[n++] = c;
		c = drop_getc(in);
	}
	if (c == -EFAULT)
		return c;
	tok[n] = '\0';
	return n;
}

static int drop_parse_endpoint(const char *s, size_t len,
			       struct drop_endpoint *ep)
{
	const char *colon, *addr = s, *end;
	size_t addr_len;
	unsigned int port = 0;
	size_t i;

	if (len == 0 || len > DROP_MAX_TOKEN)
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
		/*
		 * A dual-stack socket talking IPv4 is hashed as IPv4: name it
		 * so. A pair mixing a mapped and a real IPv6 address then
		 * fails as mixed families (no socket can have it).
		 */
		if (ipv6_addr_v4mapped(&ep->addr.v6)) {
			ep->addr.v4 = ep->addr.v6.s6_addr32[3];
			ep->family = AF_INET;
		}
		return 0;
	}
	return -EINVAL;
}

/* The next pair: 1, 0 at the end of the write, or -EINVAL / -EFAULT. */
static int drop_next_pair(struct drop_input *in, struct drop_pair *p)
{
	char tok[DROP_MAX_TOKEN + 1];
	int n, err;

	n = drop_next_token(in, tok);
	if (n <= 0)
		return n;
	err = drop_parse_endpoint(tok, n, &p->local);
	if (err)
		return err;
	n = drop_next_token(in, tok);
	if (n <= 0)
		return n ? n : -EINVAL; /* half a pair */
	err = drop_parse_endpoint(tok, n, &p->remote);
	if (err)
		return err;
	if (p->local.family != p->remote.family)
		return -EINVAL;
	return 1;
}

/*
 * The established-table match of the kernel's own lookups
 * (inet_match/inet6_match) without the device: those see a socket bound to
 * a device only when the packet came through it, and a write has no device.
 * Written from the receiving side: the remote end is the packet's source.
 * Listeners live in another table and never match.
 */
static bool drop_match(const struct net *net, const struct sock *sk,
		       const struct drop_pair *p)
{
	const __portpair ports =
		INET_COMBINED_PORTS(htons(p->remote.port), p->local.port);

	if (!net_eq(sock_net(sk), net) || sk->sk_portpair != ports)
		return false;
	if (p->local.family == AF_INET) {
		INET_ADDR_COOKIE(acookie, p->remote.addr.v4, p->local.addr.v4);

		return sk->sk_addrpair == acookie;
	}
#if IS_ENABLED(CONFIG_IPV6)
	return sk->sk_family == AF_INET6 &&
	       ipv6_addr_equal(&sk->sk_v6_daddr, &p->remote.addr.v6) &&
	       ipv6_addr_equal(&sk->sk_v6_rcv_saddr, &p->local.addr.v6);
#else
	return false;
#endif
}

/* A socket of the pair, with a reference taken for us, or NULL. */
static struct sock *drop_lookup(struct net *net, const struct drop_pair *p)
{
	struct inet_hashinfo *hinfo = net->ipv4.tcp_death_row.hashinfo;
	struct inet_ehash_bucket *head;
	struct hlist_nulls_node *node;
	unsigned int hash, slot;
	struct sock *sk;

	if (p->local.family == AF_INET)
		hash = inet_ehashfn(net, p->local.addr.v4, p->local.port,
				    p->remote.addr.v4, htons(p->remote.port));
#if IS_ENABLED(CONFIG_IPV6)
	else
		hash = inet6_ehashfn(net, &p->local.addr.v6, p->local.port,
				     &p->remote.addr.v6, htons(p->remote.port));
#else
	else
		return NULL;
#endif
	slot = hash & hinfo->ehash_mask;
	head = inet_ehash_bucket(hinfo, hash);

	/* The walk of __inet_lookup_established: a socket may move to
	 * another chain while we look (SLAB_TYPESAFE_BY_RCU), which the
	 * nulls value at the end tells; then look again.
	 */
	rcu_read_lock();
begin:
	sk_nulls_for_each_rcu(sk, node, &head->chain) {
		if (sk->sk_hash != hash || !drop_match(net, sk, p))
			continue;
		if (unlikely(!refcount_inc_not_zero(&sk->sk_refcnt)))
			continue; /* being freed: gone already */
		if (unlikely(sk->sk_hash != hash || !drop_match(net, sk, p))) {
			sock_gen_put(sk);
			goto begin;
		}
		goto found;
	}
	if (get_nulls_value(node) != slot)
		goto begin;
	sk = NULL;
found:
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

/* Drop every socket of the pair (several if bound to different devices);
 * returns how many. Each drop unhashes its socket.
 */
static int drop_pair_sockets(struct net *net, const struct drop_pair *p)
{
	struct sock *sk;
	int n = 0;

	while (n < DROP_MAX_PER_PAIR && (sk = drop_lookup(net, p))) {
		drop_sock(sk);
		n++;
	}
	return n;
}

static ssize_t drop_write(struct file *file, const char __user *ubuf,
			  size_t len, loff_t *ppos)
{
	struct net *net = pde_data(file_inode(file));
	struct drop_input *in;
	struct drop_pair p;
	int pairs = 0, dropped = 0;
	ssize_t ret;

	/*
	 * As sock_diag's destroy (ss -K): the opener and the writer both need
	 * CAP_NET_ADMIN over this namespace. File permissions alone let a
	 * root without it (a container sharing the host's network) through.
	 */
	if (!file_ns_capable(file, net->user_ns, CAP_NET_ADMIN) ||
	    !ns_capable(net->user_ns, CAP_NET_ADMIN))
		return -EPERM;
	if (len > DROP_MAX_WRITE)
		return -E2BIG;
	in = kmalloc(sizeof(*in), GFP_KERNEL);
	if (!in)
		return -ENOMEM;

	/* First pass: every pair well formed, or nothing is dropped. */
	drop_input_init(in, ubuf, len);
	while ((ret = drop_next_pair(in, &p)) > 0) {
		pairs++;
		cond_resched();
	}
	if (ret < 0)
		goto out;
	if (!pairs) {
		ret = -EINVAL;
		goto out;
	}

	/* Second pass: drop. Bytes the writer changed meanwhile may fail
	 * the write halfway; only that writer's own pairs are affected.
	 */
	drop_input_init(in, ubuf, len);
	while ((ret = drop_next_pair(in, &p)) > 0) {
		dropped += drop_pair_sockets(net, &p);
		cond_resched();
	}
	if (ret < 0)
		goto out;
	ret = dropped ? (ssize_t)len : -ENOENT;
out:
	kfree(in);
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
