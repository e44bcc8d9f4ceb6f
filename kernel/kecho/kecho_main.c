// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * kecho — an in-kernel TCP echo server on Concurrency Managed Workqueues.
 *
 * One kthread accepts. Every connection is driven by events, not by a worker
 * that sleeps in recvmsg for the connection's whole life: the socket's
 * data_ready / write_space / state_change callbacks queue the connection's
 * work item, which reads what is there without blocking, echoes it, and
 * returns. An idle connection therefore costs memory only, never a worker, so
 * thousands of clients cannot exhaust max_active and starve new ones (the
 * failure of a blocking work-per-connection design).
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

#include "ktcp_sock.h"

MODULE_LICENSE("Dual MIT/GPL");
MODULE_AUTHOR("ktcp authors");
MODULE_DESCRIPTION("In-kernel TCP echo server on CMWQ");
MODULE_VERSION("0.1");

static ushort port = 12345;
module_param(port, ushort, 0444);
MODULE_PARM_DESC(port, "TCP port to listen on, IPv6 and IPv4 (default 12345)");

static ushort backlog = 1024;
module_param(backlog, ushort, 0444);
MODULE_PARM_DESC(backlog, "listen() backlog, 1..65535 (default 1024)");

static char *wq_mode = "unbound";
module_param(wq_mode, charp, 0444);
MODULE_PARM_DESC(wq_mode,
		 "workqueue flavour: unbound (default), bound, highpri, "
		 "cpu_intensive");

static uint idle_timeout_ms = 30000;
module_param(idle_timeout_ms, uint, 0444);
MODULE_PARM_DESC(idle_timeout_ms,
		 "close a connection idle this long, in ms; 0 = never "
		 "(default 30000)");

static uint max_conns = 10000;
module_param(max_conns, uint, 0444);
MODULE_PARM_DESC(max_conns,
		 "connections served at once; more are closed at accept "
		 "(default 10000)");

/* Bytes read per receive; a longer message simply takes several rounds. */
#define KECHO_BUF_SIZE 4096
/* Receives a work item does before yielding to other connections. */
#define KECHO_BUDGET 16

struct kecho_stats {
	u64 accepted;
	u64 refused;
	u64 messages; /* receives that returned data */
	u64 bytes_in;
	u64 bytes_out;
	u64 timeouts;
	u64 errors;
};

struct kecho_conn {
	struct socket *sock;
	struct work_struct work; /* runs on events: data, space, state */
	struct work_struct release; /* frees the connection, off its own work */
	struct timer_list idle_timer;
	struct list_head node; /* in kecho_conns, under kecho_conns_lock */
	unsigned long last_active; /* jiffies, written by the work only */
	struct ktcp_sock_callbacks saved; /* the socket's own */
	unsigned int out_off, out_len; /* pending echo in buf */
	bool peer_closed;
	bool dead; /* set once by the work; later runs return at once */
	u8 buf[KECHO_BUF_SIZE];
};

static struct workqueue_struct *kecho_wq;
static struct socket *kecho_listen_sock;
static struct task_struct *kecho_accept_task;
static struct kmem_cache *kecho_conn_cache;
static struct kecho_stats __percpu *kecho_stats;
static atomic_t kecho_active = ATOMIC_INIT(0);
static DECLARE_WAIT_QUEUE_HEAD(kecho_all_released);
static LIST_HEAD(kecho_conns);
static DEFINE_SPINLOCK(kecho_conns_lock);
/* Read without a lock by every work item; set once at unload. */
static bool kecho_stopping;

#define kecho_count(field, n) this_cpu_add(kecho_stats->field, (n))

static void kecho_queue(struct sock *sk)
{
	struct kecho_conn *conn;

	read_lock_bh(&sk->sk_callback_lock);
	conn = sk->sk_user_data;
	if (conn)
		queue_work(kecho_wq, &conn->work);
	read_unlock_bh(&sk->sk_callback_lock);
}

static void kecho_data_ready(struct sock *sk)
{
	kecho_queue(sk);
}

static void kecho_write_space(struct sock *sk)
{
	struct kecho_conn *conn;

	read_lock_bh(&sk->sk_callback_lock);
	conn = sk->sk_user_data;
	if (conn) {
		/* TCP's own handler keeps SOCK_NOSPACE accounting right. */
		conn->saved.write_space(sk);
		if (sk_stream_is_writeable(sk))
			queue_work(kecho_wq, &conn->work);
	}
	read_unlock_bh(&sk->sk_callback_lock);
}

static void kecho_state_change(struct sock *sk)
{
	kecho_queue(sk);
}

static void kecho_idle_timer_fn(struct timer_list *t)
{
	struct kecho_conn *conn = from_timer(conn, t, idle_timer);

	/* The work decides whether the connection really idled. */
	queue_work(kecho_wq, &conn->work);
}

static const struct ktcp_sock_callbacks kecho_callbacks = {
	.data_ready = kecho_data_ready,
	.write_space = kecho_write_space,
	.state_change = kecho_state_change,
};

static void kecho_release_fn(struct work_struct *w)
{
	struct kecho_conn *conn = container_of(w, struct kecho_conn, release);

	/*
     * Off the registry first: unload queues the work of every listed
     * connection, and doing so after cancel_work_sync would run it on a
     * freed conn. Callbacks are detached, so then only the timer and an
     * already queued run of the work can still reach conn: stop the one,
     * then wait out the other (it sees ->dead and returns).
     */
	spin_lock(&kecho_conns_lock);
	list_del(&conn->node);
	spin_unlock(&kecho_conns_lock);

	del_timer_sync(&conn->idle_timer);
	cancel_work_sync(&conn->work);

	kernel_sock_shutdown(conn->sock, SHUT_RDWR);
	sock_release(conn->sock);
	kmem_cache_free(kecho_conn_cache, conn);
	if (atomic_dec_and_test(&kecho_active))
		wake_up(&kecho_all_released);
}

static void kecho_close(struct kecho_conn *conn)
{
	conn->dead = true;
	ktcp_sock_detach(conn->sock->sk, &conn->saved);
	queue_work(kecho_wq, &conn->release);
}

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
		int n = kernel_sendmsg(conn->sock, &msg, &vec, 1, vec.iov_len);

		if (n < 0)
			return n;
		conn->out_off += n;
		kecho_count(bytes_out, n);
	}
	conn->out_off = conn->out_len = 0;
	return 0;
}

static void kecho_work_fn(struct work_struct *w)
{
	struct kecho_conn *conn = container_of(w, struct kecho_conn, work);
	int budget = KECHO_BUDGET;
	int err;

	if (conn->dead)
		return;
	if (READ_ONCE(kecho_stopping))
		goto close;

	while (budget--) {
		struct kvec vec = { .iov_base = conn->buf,
				    .iov_len = KECHO_BUF_SIZE };
		struct msghdr msg = { .msg_flags = MSG_DONTWAIT };
		int n;

		err = kecho_flush(conn);
		if (err == -EAGAIN)
			goto wait; /* write_space will bring us back */
		if (err < 0)
			goto error;
		if (conn->peer_closed)
			goto close; /* everything the client sent went back */

		n = kernel_recvmsg(conn->sock, &msg, &vec, 1, vec.iov_len,
				   MSG_DONTWAIT);
		if (n == -EAGAIN)
			goto wait;
		if (n < 0) {
			err = n;
			goto error;
		}
		conn->last_active = jiffies;
		if (n == 0) {
			conn->peer_closed = true;
			continue;
		}
		conn->out_len = n;
		kecho_count(messages, 1);
		kecho_count(bytes_in, n);
	}
	/* Budget spent with data still flowing: let other connections run. */
	queue_work(kecho_wq, &conn->work);
	return;

wait:
	if (idle_timeout_ms) {
		unsigned long deadline =
			conn->last_active + msecs_to_jiffies(idle_timeout_ms);

		if (time_after_eq(jiffies, deadline)) {
			kecho_count(timeouts, 1);
			goto close;
		}
		/* mod_timer returns at once when the deadline did not move. */
		mod_timer(&conn->idle_timer, deadline);
	}
	return;

error:
	if (err != -ECONNRESET && err != -EPIPE)
		kecho_count(errors, 1);
close:
	kecho_close(conn);
}

static int kecho_serve(struct socket *sock)
{
	struct kecho_conn *conn;

	conn = kmem_cache_alloc(kecho_conn_cache, GFP_KERNEL);
	if (!conn)
		return -ENOMEM;
	conn->sock = sock;
	conn->out_off = conn->out_len = 0;
	conn->peer_closed = false;
	conn->dead = false;
	conn->last_active = jiffies;
	INIT_WORK(&conn->work, kecho_work_fn);
	INIT_WORK(&conn->release, kecho_release_fn);
	timer_setup(&conn->idle_timer, kecho_idle_timer_fn, 0);
	tcp_sock_set_nodelay(sock->sk);

	atomic_inc(&kecho_active);
	/*
     * Attach and first queue under the registry lock: once attached, a
     * callback can run the work, which can close the connection, but
     * kecho_release_fn() unlists it under this lock before freeing it.
     */
	spin_lock(&kecho_conns_lock);
	list_add_tail(&conn->node, &kecho_conns);
	ktcp_sock_attach(sock->sk, conn, &kecho_callbacks, &conn->saved);
	/* Data may have arrived before the callbacks were in place. */
	queue_work(kecho_wq, &conn->work);
	spin_unlock(&kecho_conns_lock);
	return 0;
}

static int kecho_accept_loop(void *unused)
{
	while (!kthread_should_stop()) {
		struct socket *sock;
		int err = kernel_accept(kecho_listen_sock, &sock, 0);

		if (err < 0) {
			if (READ_ONCE(kecho_stopping) || kthread_should_stop())
				break;
			/* Transient (ECONNABORTED, ENOMEM): keep accepting. */
			kecho_count(errors, 1);
			cond_resched();
			continue;
		}
		if (READ_ONCE(kecho_stopping) ||
		    atomic_read(&kecho_active) >= max_conns) {
			kecho_count(refused, 1);
			sock_release(sock);
			continue;
		}
		if (kecho_serve(sock) < 0) {
			kecho_count(errors, 1);
			sock_release(sock);
			continue;
		}
		kecho_count(accepted, 1);
	}
	ktcp_kthread_wait_for_stop();
	return 0;
}

static int kecho_stats_show(struct seq_file *m, void *v)
{
	struct kecho_stats sum = {};
	int cpu;

	for_each_possible_cpu(cpu) {
		struct kecho_stats *s = per_cpu_ptr(kecho_stats, cpu);

		sum.accepted += READ_ONCE(s->accepted);
		sum.refused += READ_ONCE(s->refused);
		sum.messages += READ_ONCE(s->messages);
		sum.bytes_in += READ_ONCE(s->bytes_in);
		sum.bytes_out += READ_ONCE(s->bytes_out);
		sum.timeouts += READ_ONCE(s->timeouts);
		sum.errors += READ_ONCE(s->errors);
	}
	seq_printf(m, "accepted %llu\n", sum.accepted);
	seq_printf(m, "active %d\n", atomic_read(&kecho_active));
	seq_printf(m, "refused %llu\n", sum.refused);
	seq_printf(m, "messages %llu\n", sum.messages);
	seq_printf(m, "bytes_in %llu\n", sum.bytes_in);
	seq_printf(m, "bytes_out %llu\n", sum.bytes_out);
	seq_printf(m, "timeouts %llu\n", sum.timeouts);
	seq_printf(m, "errors %llu\n", sum.errors);
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
	if (!strcmp(wq_mode, "unbound"))
		return WQ_UNBOUND;
	if (!strcmp(wq_mode, "bound"))
		return 0;
	if (!strcmp(wq_mode, "highpri"))
		return WQ_HIGHPRI;
	if (!strcmp(wq_mode, "cpu_intensive"))
		return WQ_CPU_INTENSIVE;
	return UINT_MAX;
}

static int __init kecho_init(void)
{
	unsigned int flags = kecho_wq_flags();
	int err;

	if (flags == UINT_MAX) {
		pr_err("wq_mode=%s: expected unbound, bound, highpri or "
		       "cpu_intensive\n",
		       wq_mode);
		return -EINVAL;
	}
	if (!port || !backlog || !max_conns) {
		pr_err("port, backlog and max_conns must be non-zero\n");
		return -EINVAL;
	}

	kecho_stats = alloc_percpu(struct kecho_stats);
	if (!kecho_stats)
		return -ENOMEM;

	kecho_conn_cache = KMEM_CACHE(kecho_conn, 0);
	if (!kecho_conn_cache) {
		err = -ENOMEM;
		goto out_stats;
	}

	kecho_wq = alloc_workqueue("kecho", flags | WQ_MEM_RECLAIM, 0);
	if (!kecho_wq) {
		err = -ENOMEM;
		goto out_cache;
	}

	err = ktcp_listen(port, backlog, &kecho_listen_sock);
	if (err < 0)
		goto out_wq;

	if (!proc_create_single("kecho", 0444, init_net.proc_net,
				kecho_stats_show)) {
		err = -ENOMEM;
		goto out_sock;
	}

	kecho_accept_task =
		kthread_run(kecho_accept_loop, NULL, "kecho-accept");
	if (IS_ERR(kecho_accept_task)) {
		err = PTR_ERR(kecho_accept_task);
		goto out_proc;
	}

	pr_info("listening on port %u (wq_mode=%s, idle_timeout_ms=%u)\n", port,
		wq_mode, idle_timeout_ms);
	return 0;

out_proc:
	remove_proc_entry("kecho", init_net.proc_net);
out_sock:
	sock_release(kecho_listen_sock);
out_wq:
	destroy_workqueue(kecho_wq);
out_cache:
	kmem_cache_destroy(kecho_conn_cache);
out_stats:
	free_percpu(kecho_stats);
	return err;
}

static void __exit kecho_exit(void)
{
	struct kecho_conn *conn;

	WRITE_ONCE(kecho_stopping, true);
	/* Wakes the accept thread: accept on a shut-down listener fails. */
	kernel_sock_shutdown(kecho_listen_sock, SHUT_RDWR);
	kthread_stop(kecho_accept_task);
	sock_release(kecho_listen_sock);

	/* Every live connection's work sees kecho_stopping and closes. */
	spin_lock(&kecho_conns_lock);
	list_for_each_entry(conn, &kecho_conns, node)
		queue_work(kecho_wq, &conn->work);
	spin_unlock(&kecho_conns_lock);
	wait_event(kecho_all_released, atomic_read(&kecho_active) == 0);

	destroy_workqueue(kecho_wq);
	remove_proc_entry("kecho", init_net.proc_net);
	kmem_cache_destroy(kecho_conn_cache);
	free_percpu(kecho_stats);
	pr_info("unloaded\n");
}

module_init(kecho_init);
module_exit(kecho_exit);
