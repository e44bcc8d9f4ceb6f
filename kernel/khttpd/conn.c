// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * conn.c — one connection as a state machine, run by events.
 *
 * The socket's data_ready / write_space / state_change callbacks and the
 * connection's timer only kick the connection; its step (a work item, or in
 * mode=kthread the connection's own thread) reads what is there without
 * blocking, parses with core/, answers, sends what the socket takes, and
 * returns. A slow client therefore holds memory, never a worker: a response
 * that does not fit in the socket waits for write_space.
 *
 *   READ_HEAD  --complete head-->  SEND  --done, keep-alive-->  READ_HEAD
 *       |  parse error / 408          |  request had a body --> DRAIN_BODY
 *       v                             v  close after response
 *     SEND (error)               LINGER (write side shut, read until EOF)
 *
 * Pipelined requests are answered one at a time, in order, from the same
 * buffer: the next head is parsed only after the previous response is out.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/net.h>
#include <linux/pipe_fs_i.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/splice.h>
#include <linux/string.h>
#include <linux/tcp.h>
#include <linux/timekeeping.h>
#include <linux/wait.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "khttpd.h"
#include "ktcp_compat_sendpage.h"

/* Loop iterations (reads, sends, pieces) a step does before it yields. */
#define KHTTPD_BUDGET 32
/* Bytes spliced per piece: big enough to fill a socket buffer, small
 * enough that a worker returns to other connections often. */
#define KHTTPD_SPLICE_PIECE (256 * 1024)
static struct workqueue_struct *khttpd_wq;
static struct kmem_cache *khttpd_conn_cache;
static enum khttpd_mode khttpd_mode;
static atomic_t khttpd_active = ATOMIC_INIT(0);
static DECLARE_WAIT_QUEUE_HEAD(khttpd_all_released);
static LIST_HEAD(khttpd_conns);
static DEFINE_SPINLOCK(khttpd_conns_lock);
/* mode=kthread: every connection thread signals this as its very last act
 * (kthread_complete_and_exit), so unload can wait until no thread still
 * runs module text. */
static DECLARE_COMPLETION(khttpd_threads_exited);
static unsigned long khttpd_threads_started; /* accept thread only */
/* Read without a lock by every step; set once at unload. */
static bool khttpd_stop_flag;

bool khttpd_stopping(void)
{
	return READ_ONCE(khttpd_stop_flag);
}

unsigned int khttpd_conns_active(void)
{
	return atomic_read(&khttpd_active);
}

static void khttpd_kick(struct khttpd_conn *conn)
{
	if (conn->thread) {
		/* xchg orders the flag before the wake-up the thread checks. */
		xchg(&conn->kicked, true);
		wake_up_process(conn->thread);
	} else {
		queue_work(khttpd_wq, &conn->work);
	}
}

/* ---- socket callbacks (softirq context, under sk_callback_lock) ---- */

static void khttpd_data_ready(struct sock *sk)
{
	struct khttpd_conn *conn;

	read_lock_bh(&sk->sk_callback_lock);
	conn = sk->sk_user_data;
	if (conn)
		khttpd_kick(conn);
	read_unlock_bh(&sk->sk_callback_lock);
}

static void khttpd_write_space(struct sock *sk)
{
	struct khttpd_conn *conn;

	read_lock_bh(&sk->sk_callback_lock);
	conn = sk->sk_user_data;
	if (conn) {
		/* TCP's own handler keeps SOCK_NOSPACE accounting right. */
		conn->saved.write_space(sk);
		if (sk_stream_is_writeable(sk))
			khttpd_kick(conn);
	}
	read_unlock_bh(&sk->sk_callback_lock);
}

static void khttpd_state_change(struct sock *sk)
{
	khttpd_data_ready(sk);
}

static void khttpd_timer_fn(struct timer_list *t)
{
	struct khttpd_conn *conn = from_timer(conn, t, timer);

	/* The step decides which deadline passed, if any. */
	khttpd_kick(conn);
}

static const struct ktcp_sock_callbacks khttpd_callbacks = {
	.data_ready = khttpd_data_ready,
	.write_space = khttpd_write_space,
	.state_change = khttpd_state_change,
};

/* ---- the response being sent ---- */

void khttpd_refuse(struct socket *sock)
{
	struct http_plan_input in = { .now = ktime_get_real_seconds() };
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL };
	struct http_plan p;
	char head[512];
	struct kvec vec[2];
	int n;

	http_plan_no_request(&p, &in, 503);
	n = http_plan_head(&p, head, sizeof(head));
	if (n > 0) {
		vec[0].iov_base = head;
		vec[0].iov_len = n;
		vec[1].iov_base = p.text;
		vec[1].iov_len = p.body_len;
		/* Best effort: a fresh socket's send buffer is empty. */
		kernel_sendmsg(sock, &msg, vec, 2, n + p.body_len);
	}
	kernel_sock_shutdown(sock, SHUT_WR);
	sock_release(sock);
}

/* ---- zero-copy file bodies ---- */

/*
 * splice_direct_to_actor() moves page-cache pages of the file into the
 * worker's internal pipe (no copy: the pipe holds page references); this
 * actor hands each pipe buffer to TCP with ktcp_send_page() (sendpage
 * before 6.5, sendmsg with MSG_SPLICE_PAGES after), which takes its own
 * page reference — the same path as sendfile(2) to a socket, but
 * without blocking: MSG_DONTWAIT returns what the socket took, and what
 * stayed in the pipe is released and read again from the page cache on
 * the next piece (splice_direct_to_actor's partial-transfer contract).
 */
static int khttpd_pipe_buf_send(struct pipe_inode_info *pipe,
				struct pipe_buffer *buf, struct splice_desc *sd)
{
	struct khttpd_conn *conn = sd->u.data;
	int flags = MSG_DONTWAIT | MSG_NOSIGNAL;

	if ((sd->flags & SPLICE_F_MORE) || sd->len < sd->total_len)
		flags |= MSG_MORE;
	return ktcp_send_page(conn->sock, buf->page, buf->offset, sd->len,
			      flags);
}

static int khttpd_splice_actor(struct pipe_inode_info *pipe,
			       struct splice_desc *sd)
{
	struct splice_desc out = {
		.total_len = sd->total_len,
		.flags = sd->flags,
		.u.data = sd->u.data,
	};
	ssize_t ret;

	pipe_lock(pipe);
	ret = __splice_from_pipe(pipe, &out, khttpd_pipe_buf_send);
	pipe_unlock(pipe);
	return ret;
}

static int khttpd_send_file_piece(struct khttpd_conn *conn)
{
	struct khttpd_out *o = &conn->out;
	size_t piece = min_t(u64, o->file_left, KHTTPD_SPLICE_PIECE);
	struct splice_desc sd = {
		.total_len = piece,
		.flags = (o->file_left > piece || o->more) ? SPLICE_F_MORE : 0,
		.pos = o->pos,
		.u.data = conn,
	};
	ssize_t ret;

	ret = splice_direct_to_actor(o->file, &sd, khttpd_splice_actor);
	if (ret == 0)
		return -EIO; /* the file shrank under us: the framing is lost */
	if (ret < 0)
		return ret;
	o->pos += ret;
	o->file_left -= ret;
	conn->sent += ret;
	khttpd_count(bytes_out, ret);
	conn->last_active = jiffies;
	return 0;
}

/* Send what the socket takes: 0 when the response is out, -EAGAIN (wait
 * for write_space), -EINPROGRESS (yield, more to do) or an error. */
static int khttpd_out_flush(struct khttpd_conn *conn)
{
	struct khttpd_out *o = &conn->out;
	int pieces = 4;
	int ret;

	for (;;) {
		if (o->head_off < o->head_len || o->mem_off < o->mem_len) {
			struct kvec vec[2];
			struct msghdr msg = {};
			size_t total = 0;
			int n = 0;

			if (o->head_off < o->head_len) {
				vec[n].iov_base = conn->hbuf + o->head_off;
				vec[n].iov_len = o->head_len - o->head_off;
				total += vec[n++].iov_len;
			}
			if (o->mem_off < o->mem_len) {
				vec[n].iov_base = (void *)(o->mem + o->mem_off);
				vec[n].iov_len = o->mem_len - o->mem_off;
				total += vec[n++].iov_len;
			}
			/* The head leaves with MSG_MORE when a body follows it, so
             * head and first body bytes share a segment. */
			msg.msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL;
			if (o->file_left || (o->listing && !o->listing_last) ||
			    o->more)
				msg.msg_flags |= MSG_MORE;
			ret = kernel_sendmsg(conn->sock, &msg, vec, n, total);
			if (ret < 0)
				return ret;
			conn->sent += ret;
			khttpd_count(bytes_out, ret);
			conn->last_active = jiffies;
			if (o->head_off < o->head_len) {
				u32 h = min_t(u32, ret,
					      o->head_len - o->head_off);

				o->head_off += h;
				ret -= h;
			}
			o->mem_off += ret;
			continue;
		}
		if (o->file_left) {
			if (pieces-- == 0)
				return -EINPROGRESS;
			ret = khttpd_send_file_piece(conn);
			if (ret < 0)
				return ret;
			continue;
		}
		if (o->listing) {
			if (pieces-- == 0)
				return -EINPROGRESS;
			ret = khttpd_listing_next(conn);
			if (ret < 0)
				return ret;
			continue;
		}
		return 0;
	}
}

/* ---- requests ---- */

static unsigned long khttpd_idle_jiffies(void)
{
	return msecs_to_jiffies(khttpd_idle_timeout_ms);
}

/* Answer with a close, outside of any parsed request (parse errors, 408). */
static void khttpd_send_error_close(struct khttpd_conn *conn, int status)
{
	khttpd_count(requests, 1);
	khttpd_respond_error(conn, status);
	khttpd_trace_begin(conn, NULL, NULL, status);
	conn->close_after = true;
	conn->linger = true;
	conn->state = KHTTPD_SEND;
}

static void khttpd_answer(struct khttpd_conn *conn, size_t head_len)
{
	const struct http_request *req = &conn->parser.req;
	struct http_plan_input in = {
		.req = req,
		.buf = conn->rbuf + conn->rstart,
		.buffered = conn->rlen - conn->rstart,
		.head_len = head_len,
		.stopping = khttpd_stopping(),
		.gzip = khttpd_gzip_enabled,
		.now = ktime_get_real_seconds(),
	};
	const struct http_plan *p = &conn->plan;

	bool ok;

	khttpd_count(requests, 1);
	ok = khttpd_respond(conn, &in);
	khttpd_trace_begin(conn, req, in.buf, p->status);
	if (!ok || !p->keep_alive) {
		conn->close_after = true;
		conn->linger = p->linger;
	} else {
		conn->rstart += head_len;
		if (p->drain_body) {
			conn->body_deadline = jiffies + khttpd_idle_jiffies();
			if (req->body_framing == HTTP_BODY_CONTENT_LENGTH) {
				conn->body_left = req->content_length;
			} else {
				conn->body_chunked = true;
				http_chunked_init(&conn->chunked,
						  HTTP_SERVER_MAX_BODY,
						  HTTP_SERVER_MAX_TRAILERS);
			}
		}
	}
	http_parser_reset(&conn->parser);
	conn->state = KHTTPD_SEND;
}

static int khttpd_recv(struct khttpd_conn *conn, char *buf, size_t len)
{
	struct kvec vec = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT };
	int n = kernel_recvmsg(conn->sock, &msg, &vec, 1, len, MSG_DONTWAIT);

	if (n > 0)
		conn->last_active = jiffies;
	return n;
}

/* Make room for more bytes: slide the current request to the front, or
 * grow. False if the buffer is at its maximum. Parser slices are offsets
 * from rbuf + rstart, so sliding keeps them valid. */
static bool khttpd_make_room(struct khttpd_conn *conn)
{
	char *nb;

	if (conn->rlen < conn->rcap)
		return true;
	if (conn->rstart > 0) {
		memmove(conn->rbuf, conn->rbuf + conn->rstart,
			conn->rlen - conn->rstart);
		conn->rlen -= conn->rstart;
		conn->rstart = 0;
		return true;
	}
	if (conn->rcap >= HTTP_SERVER_REQ_BUF_MAX)
		return false;
	nb = krealloc(conn->rbuf, conn->rcap * 2, GFP_KERNEL);
	if (!nb)
		return false;
	conn->rbuf = nb;
	conn->rcap *= 2;
	return true;
}

/* 0: progress (state may have changed), -EAGAIN, or the end (EOF/error). */
static int khttpd_read_head(struct khttpd_conn *conn)
{
	size_t head_len = 0;
	int n;

	if (conn->rlen > conn->rstart) {
		int pr = http_parse_request(&conn->parser,
					    conn->rbuf + conn->rstart,
					    conn->rlen - conn->rstart,
					    &head_len);

		if (pr == HTTP_PARSE_COMPLETE) {
			conn->head_deadline = 0;
			khttpd_answer(conn, head_len);
			return 0;
		}
		if (pr < 0) {
			conn->head_deadline = 0;
			khttpd_send_error_close(conn,
						http_parse_error_status(pr));
			return 0;
		}
		/* The first byte of a request starts its clock (slowloris). */
		if (!conn->head_deadline)
			conn->head_deadline =
				(jiffies + khttpd_idle_jiffies()) | 1;
	} else {
		conn->rstart = conn->rlen = 0;
	}
	if (!khttpd_make_room(conn)) {
		khttpd_send_error_close(conn, 431);
		return 0;
	}
	n = khttpd_recv(conn, conn->rbuf + conn->rlen, conn->rcap - conn->rlen);
	if (n < 0)
		return n;
	if (n == 0)
		return -ESHUTDOWN;
	conn->rlen += n;
	return 0;
}

/*
 * A body core's decoder refused (its limits bound what a client can make us
 * read): the request has its answer already; say why we close and close.
 */
static void khttpd_refuse_body(struct khttpd_conn *conn, int result)
{
	conn->body_chunked = false;
	khttpd_respond_error(conn, http_parse_error_status(result));
	conn->close_after = true;
	conn->state = KHTTPD_SEND;
}

/*
 * Drop the body of the request just answered: what is buffered, then one
 * read. 0 when it is gone (or refused: then the state is KHTTPD_SEND);
 * -EINPROGRESS after a read, so that every read spends the step's budget
 * and a client streaming a body cannot hold the worker.
 */
static int khttpd_drain_body(struct khttpd_conn *conn)
{
	int n;

	if (conn->body_left) {
		u64 take =
			min_t(u64, conn->body_left, conn->rlen - conn->rstart);

		conn->rstart += take;
		conn->body_left -= take;
		if (!conn->body_left)
			return 0;
	} else if (conn->body_chunked) {
		while (conn->rstart < conn->rlen) {
			size_t used, off, len;
			int r = http_chunked_decode(&conn->chunked,
						    conn->rbuf + conn->rstart,
						    conn->rlen - conn->rstart,
						    &used, &off, &len);

			conn->rstart += used;
			if (r == HTTP_CHUNKED_DONE) {
				conn->body_chunked = false;
				return 0;
			}
			if (r < 0) {
				khttpd_refuse_body(conn, r);
				return 0;
			}
		}
	} else {
		return 0;
	}
	conn->rstart = conn->rlen = 0;
	n = khttpd_recv(conn, conn->rbuf, conn->rcap);
	if (n < 0)
		return n;
	if (n == 0)
		return -ESHUTDOWN;
	conn->rlen = n;
	return -EINPROGRESS;
}

static void khttpd_start_linger(struct khttpd_conn *conn)
{
	kernel_sock_shutdown(conn->sock, SHUT_WR);
	conn->state = KHTTPD_LINGER;
	conn->linger_deadline =
		jiffies + msecs_to_jiffies(HTTP_SERVER_LINGER_MS);
	conn->linger_reads = 0;
}

/* -EAGAIN while the peer still may send; anything else ends it. */
static int khttpd_linger(struct khttpd_conn *conn)
{
	while (conn->linger_reads++ < HTTP_SERVER_LINGER_READS) {
		int n = khttpd_recv(conn, conn->rbuf, conn->rcap);

		if (n <= 0)
			return n ? n : -ESHUTDOWN;
	}
	return -ESHUTDOWN;
}

/* 0, or -ESHUTDOWN: close now (the plan did not ask to linger). */
static int khttpd_response_done(struct khttpd_conn *conn)
{
	khttpd_trace_end(conn);
	khttpd_out_reset(&conn->out);
	conn->last_active = jiffies;
	if (conn->close_after && !conn->linger)
		return -ESHUTDOWN;
	if (conn->close_after)
		khttpd_start_linger(conn);
	else if (conn->body_left || conn->body_chunked)
		conn->state = KHTTPD_DRAIN_BODY;
	else
		conn->state = KHTTPD_READ_HEAD;
	return 0;
}

static void khttpd_close(struct khttpd_conn *conn)
{
	conn->dead = true;
	ktcp_sock_detach(conn->sock->sk, &conn->saved);
	/* mode=kthread: the thread sees ->dead and frees the connection. */
	if (!conn->thread)
		queue_work(khttpd_wq, &conn->release);
}

/* Nothing to do until an event: arm the timer for the state's deadline,
 * or act on it if it passed. Returns true if the step should go on. */
static bool khttpd_wait(struct khttpd_conn *conn)
{
	unsigned long deadline;
	bool timed = khttpd_idle_timeout_ms != 0;

	switch (conn->state) {
	case KHTTPD_READ_HEAD:
		deadline = conn->head_deadline ?
				   conn->head_deadline :
				   conn->last_active + khttpd_idle_jiffies();
		break;
	case KHTTPD_DRAIN_BODY:
		deadline = conn->body_deadline;
		break;
	case KHTTPD_LINGER:
		deadline = conn->linger_deadline;
		timed = true;
		break;
	case KHTTPD_SEND:
	default:
		deadline = conn->last_active + khttpd_idle_jiffies();
		break;
	}
	if (!timed)
		return false;
	if (time_before(jiffies, deadline)) {
		/* mod_timer returns at once when the deadline did not move. */
		mod_timer(&conn->timer, deadline);
		return false;
	}
	if (conn->state == KHTTPD_LINGER) {
		khttpd_close(conn);
		return false;
	}
	khttpd_count(timeouts, 1);
	if (conn->state == KHTTPD_READ_HEAD && conn->head_deadline &&
	    conn->rlen > conn->rstart) {
		/* A head that never completed: tell the client why we close. */
		conn->head_deadline = 0;
		khttpd_send_error_close(conn, 408);
		return true;
	}
	khttpd_close(conn);
	return false;
}

static void khttpd_conn_step(struct khttpd_conn *conn)
{
	int budget = KHTTPD_BUDGET;
	int err;

	if (conn->dead)
		return;
	if (khttpd_stopping()) {
		khttpd_close(conn);
		return;
	}

	while (budget-- > 0) {
		switch (conn->state) {
		case KHTTPD_SEND:
			err = khttpd_out_flush(conn);
			if (err == -EINPROGRESS)
				continue;
			if (!err)
				err = khttpd_response_done(conn);
			break;
		case KHTTPD_DRAIN_BODY:
			err = khttpd_drain_body(conn);
			if (err == -EINPROGRESS)
				continue;
			if (!err && conn->state == KHTTPD_DRAIN_BODY)
				conn->state = KHTTPD_READ_HEAD;
			break;
		case KHTTPD_LINGER:
			err = khttpd_linger(conn);
			if (err != -EAGAIN) {
				khttpd_close(conn);
				return;
			}
			break;
		case KHTTPD_READ_HEAD:
		default:
			err = khttpd_read_head(conn);
			break;
		}
		if (err == -EAGAIN) {
			if (khttpd_wait(conn))
				continue;
			return;
		}
		if (err < 0) {
			if (err != -ECONNRESET && err != -EPIPE &&
			    err != -ESHUTDOWN)
				khttpd_count(errors, 1);
			khttpd_close(conn);
			return;
		}
	}
	/* Budget spent with work left: let other connections run. */
	khttpd_kick(conn);
}

/* ---- lifetime ---- */

static void khttpd_conn_free(struct khttpd_conn *conn)
{
	/*
     * Off the registry first: unload kicks every listed connection, and a
     * kick after cancel_work_sync would queue the work of a freed conn.
     * Callbacks are detached, so then only the timer and an already queued
     * run of the step can still reach conn: stop the one, then wait out the
     * other (it sees ->dead and returns without re-arming the timer).
     */
	spin_lock(&khttpd_conns_lock);
	list_del(&conn->node);
	spin_unlock(&khttpd_conns_lock);

	del_timer_sync(&conn->timer);
	if (!conn->thread)
		cancel_work_sync(&conn->work);

	khttpd_trace_end(conn); /* a response cut short: what was sent */
	khttpd_out_reset(&conn->out);
	sock_release(conn->sock);
	kfree(conn->rbuf);
	kmem_cache_free(khttpd_conn_cache, conn);
	if (atomic_dec_and_test(&khttpd_active))
		wake_up(&khttpd_all_released);
}

static void khttpd_work_fn(struct work_struct *w)
{
	khttpd_conn_step(container_of(w, struct khttpd_conn, work));
}

static void khttpd_release_fn(struct work_struct *w)
{
	khttpd_conn_free(container_of(w, struct khttpd_conn, release));
}

/*
 * mode=kthread: the connection's own thread runs the same step and sleeps
 * between events — the thread-per-connection model (a stack and a context
 * switch per connection) kept to measure CMWQ against, not for serving.
 */
static int khttpd_conn_thread(void *data)
{
	struct khttpd_conn *conn = data;

	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (!xchg(&conn->kicked, false)) {
			schedule();
			continue;
		}
		__set_current_state(TASK_RUNNING);
		khttpd_conn_step(conn);
		if (conn->dead)
			break;
	}
	khttpd_conn_free(conn);
	kthread_complete_and_exit(&khttpd_threads_exited, 0);
}

int khttpd_conn_start(struct socket *sock)
{
	struct khttpd_conn *conn;
	struct http_limits limits = HTTP_SERVER_LIMITS;
	int err = -ENOMEM;

	conn = kmem_cache_zalloc(khttpd_conn_cache, GFP_KERNEL);
	if (!conn)
		goto out;
	conn->rcap = HTTP_SERVER_REQ_BUF_INITIAL;
	conn->rbuf = kmalloc(conn->rcap, GFP_KERNEL);
	if (!conn->rbuf)
		goto out_conn;
	conn->sock = sock;
	conn->state = KHTTPD_READ_HEAD;
	conn->last_active = jiffies;
	http_parser_init(&conn->parser, &limits);
	http_parser_set_header_store(&conn->parser, conn->headers,
				     HTTP_SERVER_MAX_STORED_HEADERS);
	INIT_WORK(&conn->work, khttpd_work_fn);
	INIT_WORK(&conn->release, khttpd_release_fn);
	timer_setup(&conn->timer, khttpd_timer_fn, 0);
	tcp_sock_set_nodelay(sock->sk);

	if (khttpd_mode == KHTTPD_MODE_KTHREAD) {
		/* Data may have arrived before the callbacks were in place. */
		conn->kicked = true;
		conn->thread =
			kthread_create(khttpd_conn_thread, conn, "khttpd-conn");
		if (IS_ERR(conn->thread)) {
			err = PTR_ERR(conn->thread);
			goto out_buf;
		}
		khttpd_threads_started++;
	}

	atomic_inc(&khttpd_active);
	/*
     * Attach and first kick under the registry lock: once attached, a
     * callback can run the step, which can close the connection, but
     * khttpd_conn_free() unlists it under this lock before freeing it.
     */
	spin_lock(&khttpd_conns_lock);
	list_add_tail(&conn->node, &khttpd_conns);
	ktcp_sock_attach(conn->sock->sk, conn, &khttpd_callbacks, &conn->saved);
	khttpd_kick(conn);
	spin_unlock(&khttpd_conns_lock);
	return 0;

out_buf:
	kfree(conn->rbuf);
out_conn:
	kmem_cache_free(khttpd_conn_cache, conn);
out:
	return err;
}

int khttpd_conns_init(enum khttpd_mode mode)
{
	/*
     * unbound: workers not tied to the CPU that queued the work, so the
     * scheduler spreads connections over every core — the right default,
     * since the accept thread and the softirqs of one NIC queue would
     * otherwise pile all work on one CPU. bound: per-CPU workers, best
     * cache locality, CMWQ concurrency management (a worker blocked on a
     * page-cache miss lets another run). kthread needs no workqueue but the
     * release path of the others; it gets a small one all the same.
     */
	unsigned int flags = mode == KHTTPD_MODE_BOUND ? 0 : WQ_UNBOUND;

	khttpd_mode = mode;
	khttpd_conn_cache = KMEM_CACHE(khttpd_conn, 0);
	if (!khttpd_conn_cache)
		return -ENOMEM;
	khttpd_wq = alloc_workqueue("khttpd", flags | WQ_MEM_RECLAIM, 0);
	if (!khttpd_wq) {
		kmem_cache_destroy(khttpd_conn_cache);
		return -ENOMEM;
	}
	return 0;
}

void khttpd_conns_stop(void)
{
	WRITE_ONCE(khttpd_stop_flag, true);
}

void khttpd_conns_exit(void)
{
	struct khttpd_conn *conn;
	unsigned long i;

	WRITE_ONCE(khttpd_stop_flag, true);
	/* Every live connection's step sees the flag and closes. */
	spin_lock(&khttpd_conns_lock);
	list_for_each_entry(conn, &khttpd_conns, node)
		khttpd_kick(conn);
	spin_unlock(&khttpd_conns_lock);
	wait_event(khttpd_all_released, atomic_read(&khttpd_active) == 0);
	for (i = 0; i < khttpd_threads_started; i++)
		wait_for_completion(&khttpd_threads_exited);

	destroy_workqueue(khttpd_wq);
	kmem_cache_destroy(khttpd_conn_cache);
}
