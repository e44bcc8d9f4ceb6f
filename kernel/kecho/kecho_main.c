// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * kecho — an in-kernel TCP echo server on Concurrency Managed Workqueues.
 *
 * The connection lifecycle (listener, accept thread, registry, callbacks,
 * timer, release) is kernel/common/ktcp_server.c's; this file is the echo
 * step only. Every connection is driven by events, not by a worker that
 * sleeps in recvmsg for the connection's whole life: its step reads what is
 * there without blocking, echoes it, and returns. An idle connection
 * therefore costs memory only, never a worker, so thousands of clients
 * cannot exhaust max_active and starve new ones (the failure of a blocking
 * work-per-connection design).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/list.h>
#include <linux/module.h>
#include <linux/net.h>
#include <linux/percpu.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/tcp.h>
#include <linux/timer.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "ktcp_server.h"

MODULE_LICENSE("Dual MIT/GPL");
MODULE_AUTHOR("ktcp authors");
MODULE_DESCRIPTION("In-kernel TCP echo server on CMWQ");
MODULE_VERSION("0.1");

/*
 * mode, as every ktcp module names it; wq_mode, its old name, sets the same
 * variable (the later of the two on the command line wins).
 */
static char *mode = "unbound";
module_param(mode, charp, 0444);
module_param_named(wq_mode, mode, charp, 0444);
/* Each description on one line: user-visible strings are not split. */
/* clang-format off */
MODULE_PARM_DESC(mode,
		 "workqueue flavour: unbound (default), bound, highpri, cpu_intensive");
MODULE_PARM_DESC(wq_mode, "the old name of mode, still accepted");

KTCP_SERVER_PARAMS(12345,
		   "connections served at once; more are closed at accept (default 10000)",
		   "close a connection idle this long, in ms; 0 = never (default 30000)");
/* clang-format on */

/* Bytes read per receive; a longer message simply takes several rounds. */
#define KECHO_BUF_SIZE 4096
/* Receives a step does before yielding to other connections. */
#define KECHO_BUDGET 16

/* What only an echo counts; the lifecycle counts the rest (ktcp_server). */
struct kecho_stats {
	u64 messages; /* receives that returned data */
	u64 bytes_in;
	u64 bytes_out;
};

struct kecho_conn {
	struct ktcp_conn c;
	unsigned int out_off, out_len; /* pending echo in buf */
	bool peer_closed;
	/* KECHO_BUF_SIZE bytes, taken when there is something to read and
	 * given back once it is echoed: an idle connection holds no buffer.
	 */
	u8 *buf;
};

static struct ktcp_server kecho_server;
static struct kecho_stats __percpu *kecho_stats;

/* checkpatch: MACRO_ARG_PRECEDENCE: field is a member name, not an expression */
#define kecho_count(field, n) this_cpu_add(kecho_stats->field, (n))

/* Sends what is pending; returns 0 when all went, -EAGAIN, or an error. */
static int kecho_flush(struct kecho_conn *conn)
{
	while (conn->out_off < conn->out_len) {
		struct kvec vec = {
			.iov_base = conn->buf + conn->out_off,
			.iov_len = conn->out_len - conn->out_off,
		};
		struct msghdr msg = { .msg_flags = MSG_DONTWAIT |
						   MSG_NOSIGNAL };
		int n = kernel_sendmsg(conn->c.sock, &msg, &vec, 1,
				       vec.iov_len);

		if (n < 0)
			return n;
		conn->out_off += n;
		ktcp_conn_touch(&conn->c); /* a slow reader is not idle */
		kecho_count(bytes_out, n);
	}
	conn->out_off = 0;
	conn->out_len = 0;
	return 0;
}

static void kecho_step(struct ktcp_conn *c)
{
	struct kecho_conn *conn = container_of(c, struct kecho_conn, c);
	int budget = KECHO_BUDGET;
	unsigned long idle;
	int err;

	while (budget--) {
		struct kvec vec = { .iov_len = KECHO_BUF_SIZE };
		struct msghdr msg = { .msg_flags = MSG_DONTWAIT };
		int n;

		err = kecho_flush(conn);
		if (err == -EAGAIN)
			goto wait; /* write_space will bring us back */
		if (err < 0)
			goto error;
		if (conn->peer_closed)
			goto close; /* everything the client sent went back */

		if (!conn->buf) {
			conn->buf = kmalloc(KECHO_BUF_SIZE, GFP_KERNEL);
			if (!conn->buf) {
				err = -ENOMEM;
				goto error;
			}
		}
		vec.iov_base = conn->buf;
		n = kernel_recvmsg(c->sock, &msg, &vec, 1, vec.iov_len,
				   MSG_DONTWAIT);
		if (n == -EAGAIN) {
			/* Everything echoed, nothing to read: idle. */
			kfree(conn->buf);
			conn->buf = NULL;
			goto wait;
		}
		if (n < 0) {
			err = n;
			goto error;
		}
		ktcp_conn_touch(c);
		if (n == 0) {
			conn->peer_closed = true;
			continue;
		}
		conn->out_len = n;
		kecho_count(messages, 1);
		kecho_count(bytes_in, n);
	}
	/* Budget spent with data still flowing: let other connections run. */
	ktcp_conn_kick(c);
	return;

wait:
	idle = ktcp_server_idle(&kecho_server);
	if (idle && ktcp_conn_wait(c, ktcp_conn_idle_deadline(c, idle))) {
		ktcp_server_count(&kecho_server, timeouts, 1);
		goto close;
	}
	return;

error:
	if (err != -ECONNRESET && err != -EPIPE)
		ktcp_server_count(&kecho_server, errors, 1);
close:
	ktcp_conn_close(c);
}

static void kecho_destroy(struct ktcp_conn *c)
{
	struct kecho_conn *conn = container_of(c, struct kecho_conn, c);

	kfree(conn->buf);
	kernel_sock_shutdown(c->sock, SHUT_RDWR);
}

static const struct ktcp_server_ops kecho_ops = {
	.cache_name = "kecho_conn",
	.conn_size = sizeof(struct kecho_conn),
	.conn_offset = offsetof(struct kecho_conn, c),
	.step = kecho_step,
	.destroy = kecho_destroy, /* refused: closed without a word */
};

static int kecho_stats_show(struct seq_file *m, void *v)
{
	struct ktcp_server_stats srv;
	struct kecho_stats sum = {};
	int cpu;

	ktcp_server_sum(&kecho_server, &srv);
	for_each_possible_cpu(cpu) {
		struct kecho_stats *s = per_cpu_ptr(kecho_stats, cpu);

		sum.messages += READ_ONCE(s->messages);
		sum.bytes_in += READ_ONCE(s->bytes_in);
		sum.bytes_out += READ_ONCE(s->bytes_out);
	}
	seq_printf(m, "accepted %llu\n", srv.accepted);
	seq_printf(m, "active %u\n", ktcp_server_active(&kecho_server));
	seq_printf(m, "refused %llu\n", srv.refused);
	seq_printf(m, "messages %llu\n", sum.messages);
	seq_printf(m, "bytes_in %llu\n", sum.bytes_in);
	seq_printf(m, "bytes_out %llu\n", sum.bytes_out);
	seq_printf(m, "timeouts %llu\n", srv.timeouts);
	seq_printf(m, "errors %llu\n", srv.errors);
	return 0;
}

static unsigned int kecho_wq_flags(void)
{
	/*
	 * unbound: workers not tied to the CPU that queued the work, so the
	 * scheduler spreads connections over every core — the right default for a
	 * server whose accept thread would otherwise pile all work on one CPU.
	 * bound: per-CPU workers, best cache locality, CMWQ concurrency
	 * management. highpri: bound, served by the high-priority pools.
	 * cpu_intensive: bound, but excluded from concurrency management so a long
	 * echo does not hold back other items on that CPU.
	 */
	if (!strcmp(mode, "unbound"))
		return WQ_UNBOUND;
	if (!strcmp(mode, "bound"))
		return 0;
	if (!strcmp(mode, "highpri"))
		return WQ_HIGHPRI;
	if (!strcmp(mode, "cpu_intensive"))
		return WQ_CPU_INTENSIVE;
	return UINT_MAX;
}

static int __init kecho_init(void)
{
	struct ktcp_server_params p = ktcp_server_params("kecho", max_conns);
	int err;

	p.wq_flags = kecho_wq_flags();
	if (p.wq_flags == UINT_MAX) {
		pr_err("mode=%s: expected unbound, bound, highpri or cpu_intensive\n",
		       mode);
		return -EINVAL;
	}
	if (!port || !backlog || !max_conns) {
		pr_err("port, backlog and max_conns must be non-zero\n");
		return -EINVAL;
	}

	kecho_stats = alloc_percpu(struct kecho_stats);
	if (!kecho_stats)
		return -ENOMEM;

	err = ktcp_server_start(&kecho_server, &kecho_ops, &p);
	if (err < 0)
		goto out_stats;

	if (!proc_create_single("kecho", 0444, init_net.proc_net,
				kecho_stats_show)) {
		err = -ENOMEM;
		goto out_server;
	}

	pr_info("listening on %s port %u (mode=%s, idle_timeout_ms=%u)\n",
		bind && *bind ? bind : "*", port, mode, idle_timeout_ms);
	return 0;

out_server:
	ktcp_server_stop(&kecho_server);
out_stats:
	free_percpu(kecho_stats);
	return err;
}

static void __exit kecho_exit(void)
{
	remove_proc_entry("kecho", init_net.proc_net);
	ktcp_server_stop(&kecho_server);
	free_percpu(kecho_stats);
	pr_info("unloaded\n");
}

module_init(kecho_init);
module_exit(kecho_exit);
