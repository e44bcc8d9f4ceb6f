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
 *
 * One file, a little over 500 lines, on purpose: one state machine, whose
 * states share the request buffer and the deadlines. Sending is out.c's,
 * planning respond.c's.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/jiffies.h>
#include <linux/net.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/tcp.h>
#include <linux/timekeeping.h>
#include <net/ipv6.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "khttpd.h"

/* Loop iterations (reads, sends, pieces) a step does before it yields. */
#define KHTTPD_BUDGET 32
/* File pieces and listing pieces one send does before it yields. */
#define KHTTPD_SEND_PIECES 4
/* How often a closing kTLS connection looks whether its records left. */
#define KHTTPD_TLS_FLUSH_POLL max(1UL, msecs_to_jiffies(5))

static struct ktcp_server khttpd_server;

bool khttpd_stopping(void)
{
	return ktcp_server_stopping(&khttpd_server);
}

unsigned int khttpd_conns_active(void)
{
	return ktcp_server_active(&khttpd_server);
}

void khttpd_conns_sum(struct ktcp_server_stats *sum)
{
	ktcp_server_sum(&khttpd_server, sum);
}

/* A socket over max_conns or max_conns_per_ip: a planned 503, then the
 * lifecycle closes it. Over kTLS (an adoption refused) the 503 is one
 * record, never held open with MSG_MORE, and a close_notify follows it
 * before the FIN; a fresh socket's send buffer takes both at once. The
 * plan and its head live on the heap: on the stack they made a 1.7 KiB
 * frame (over 2 KiB with KASAN's redzones); with no memory the client
 * gets only the close.
 */
struct khttpd_refusal {
	struct http_plan plan;
	char head[512];
};

static void khttpd_refuse_answer(struct socket *sock, bool tls)
{
	struct http_plan_input in = { .now = ktime_get_real_seconds() };
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL };
	struct khttpd_refusal *r = kmalloc(sizeof(*r), GFP_KERNEL);
	struct kvec vec[2];
	int n;

	if (r) {
		http_plan_no_request(&r->plan, &in, 503);
		/* The plan holds the end back (more) for the shutdown's FIN. */
		if (r->plan.more && !tls)
			msg.msg_flags |= MSG_MORE;
		n = http_plan_head(&r->plan, r->head, sizeof(r->head));
		if (n > 0) {
			vec[0].iov_base = r->head;
			vec[0].iov_len = n;
			vec[1].iov_base = r->plan.text;
			vec[1].iov_len = r->plan.body_len;
			/* Best effort: a fresh socket's send buffer is empty. */
			kernel_sendmsg(sock, &msg, vec, 2,
				       n + r->plan.body_len);
		}
		kfree(r);
	}
	if (tls &&
	    (khttpd_tls_close_notify(sock) < 0 || khttpd_tls_tx_pending(sock)))
		return; /* a FIN would go ahead of the records */
	kernel_sock_shutdown(sock, SHUT_WR);
}

static void khttpd_refuse(struct socket *sock)
{
	khttpd_refuse_answer(sock, false);
}

/* A kTLS socket from the agent: adopted, or over max_conns or
 * max_conns_per_ip (-EBUSY) answered as an accepted one is, 503 with
 * Retry-After, and left to the agent to close. -EBUSY also says that
 * another owner took the socket's callbacks meanwhile: then nothing is
 * written.
 */
int khttpd_conns_adopt(struct file *file)
{
	struct socket *sock = sock_from_file(file);
	int err = ktcp_server_adopt(&khttpd_server, file);

	if (err == 0)
		khttpd_count(tls_adopted, 1);
	else if (err == -EBUSY && !rcu_access_pointer(sock->sk->sk_user_data))
		khttpd_refuse_answer(sock, true);
	return err;
}

/*
 * A kTLS connection whose write side is about to shut: the close_notify
 * alert, then wait until kTLS has handed every record to TCP — a FIN
 * before them would cut the response short. 0 when done, -EAGAIN to wait
 * (write_space, or khttpd_wait's short poll).
 */
static int khttpd_tls_finish(struct khttpd_conn *conn)
{
	if (!conn->tls_notified) {
		int err = khttpd_tls_close_notify(conn->c.sock);

		if (err == -EAGAIN) {
			conn->tls_flushing = true;
			return -EAGAIN;
		}
		/* Sent, or the peer is gone: either way on to the FIN. */
		conn->tls_notified = true;
	}
	conn->tls_flushing = khttpd_tls_tx_pending(conn->c.sock);
	return conn->tls_flushing ? -EAGAIN : 0;
}

/*
 * Send the response: the output takes what the socket takes; a listing
 * refills it piece by piece. 0 when the response is out, -EAGAIN (wait
 * for write_space), -EINPROGRESS (yield, more to do) or an error.
 */
static int khttpd_send(struct khttpd_conn *conn)
{
	int pieces = KHTTPD_SEND_PIECES;
	int ret;

	for (;;) {
		ret = khttpd_out_flush(conn, &pieces);
		if (ret == 0 && !conn->req->out.listing && conn->tls &&
		    conn->close_after)
			return khttpd_tls_finish(conn);
		if (ret < 0 || !conn->req->out.listing)
			return ret;
		if (pieces-- == 0)
			return -EINPROGRESS;
		ret = khttpd_listing_next(conn);
		if (ret < 0)
			return ret;
	}
}

/* ---- requests ---- */

static unsigned long khttpd_idle_jiffies(void)
{
	return ktcp_server_idle(&khttpd_server);
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
	const struct http_request *req = &conn->req->parser.req;
	struct http_plan_input in = {
		.req = req,
		.buf = conn->rbuf + conn->rstart,
		.buffered = conn->rlen - conn->rstart,
		.head_len = head_len,
		.stopping = khttpd_stopping(),
		.now = ktime_get_real_seconds(),
	};
	const struct http_plan *p = &conn->req->plan;

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
			http_body_drain_start(&conn->req->drain, req);
		}
	}
	http_parser_reset(&conn->req->parser);
	conn->state = KHTTPD_SEND;
}

static int khttpd_recv(struct khttpd_conn *conn, char *buf, size_t len)
{
	struct kvec vec = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT };
	int n;

	if (conn->tls)
		n = khttpd_tls_recv(conn->c.sock, buf, len);
	else
		n = kernel_recvmsg(conn->c.sock, &msg, &vec, 1, len,
				   MSG_DONTWAIT);
	if (n > 0)
		ktcp_conn_touch(&conn->c);
	return n;
}

/* The request buffer's growth (core's http_reqbuf_make_room). */
static void *khttpd_rbuf_grow(void *p, size_t size)
{
	return krealloc(p, size, GFP_KERNEL);
}

/* Nothing the socket could give us now: no data, no EOF, no error. */
static bool khttpd_nothing_to_read(struct khttpd_conn *conn)
{
	struct sock *sk = conn->c.sock->sk;

	/* kTLS keeps decrypted records of its own, off the queue. */
	if (conn->tls && sk_is_readable(sk))
		return false;
	return skb_queue_empty_lockless(&sk->sk_receive_queue) &&
	       !(READ_ONCE(sk->sk_shutdown) & RCV_SHUTDOWN) &&
	       !READ_ONCE(sk->sk_err);
}

/* The request's part of the connection, taken when a request's first byte
 * arrives; a slab cache of its own, so an idle connection is small.
 */
static struct kmem_cache *khttpd_req_cache;

static struct khttpd_req *khttpd_req_get(void)
{
	struct http_limits limits = HTTP_SERVER_LIMITS;
	struct khttpd_req *r = kmem_cache_alloc(khttpd_req_cache, GFP_KERNEL);

	if (!r)
		return NULL;
	/* hbuf, last, is written before it is read: left as it is. */
	memset(r, 0, offsetof(struct khttpd_req, hbuf));
	http_parser_init(&r->parser, &limits);
	http_parser_set_header_store(&r->parser, r->headers,
				     HTTP_SERVER_MAX_STORED_HEADERS);
	return r;
}

/* Give back the request buffer and the request's part; once, here only. */
static void khttpd_req_put(struct khttpd_conn *conn)
{
	if (conn->req) {
		/* A response cut short: trace what was sent. */
		khttpd_trace_end(conn);
		khttpd_out_reset(&conn->req->out);
		kmem_cache_free(khttpd_req_cache, conn->req);
		conn->req = NULL;
	}
	kfree(conn->rbuf);
	conn->rbuf = NULL;
	conn->rcap = 0;
}

/*
 * The request buffer and the request's part exist only while a request is
 * in flight: an idle keep-alive connection with nothing buffered gives both
 * back (however far a long head grew the buffer) and takes fresh ones when
 * bytes arrive; a pipeline keeps them. 0, -EAGAIN (idle, nothing to read)
 * or -ENOMEM (the step closes the connection: no memory for a request is
 * no memory for its error response either).
 */
static int khttpd_rbuf_for_read(struct khttpd_conn *conn)
{
	if (conn->rbuf && conn->rlen > conn->rstart)
		return 0;
	conn->rstart = 0;
	conn->rlen = 0;
	if (khttpd_nothing_to_read(conn)) {
		khttpd_req_put(conn);
		return -EAGAIN;
	}
	if (conn->rbuf)
		return 0;
	conn->req = khttpd_req_get();
	if (!conn->req)
		return -ENOMEM;
	conn->rbuf = kmalloc(HTTP_SERVER_REQ_BUF_INITIAL, GFP_KERNEL);
	if (!conn->rbuf) {
		khttpd_req_put(conn);
		return -ENOMEM;
	}
	conn->rcap = HTTP_SERVER_REQ_BUF_INITIAL;
	return 0;
}

/* The socket's peer as the connection's client. */
static void khttpd_client_from_sock(struct khttpd_conn *conn)
{
	struct sock *sk = conn->c.sock->sk;
	union khttpd_addr *a = &conn->client;

	memset(a, 0, sizeof(*a));
	/* a dual-stack listener's IPv4 peer is named as IPv4 */
	if (sk->sk_family == AF_INET6 &&
	    !ipv6_addr_v4mapped(&sk->sk_v6_daddr)) {
		a->v6.sin6_family = AF_INET6;
		a->v6.sin6_port = inet_sk(sk)->inet_dport;
		a->v6.sin6_addr = sk->sk_v6_daddr;
	} else {
		a->v4.sin_family = AF_INET;
		a->v4.sin_port = inet_sk(sk)->inet_dport;
		a->v4.sin_addr.s_addr = sk->sk_family == AF_INET6 ?
						sk->sk_v6_daddr.s6_addr32[3] :
						inet_sk(sk)->inet_daddr;
	}
}

/*
 * The address rules (acl=) against the client's address, c->addr: true
 * if it is served; a denial is counted. Run at accept (khttpd_conn_init);
 * with proxy_protocol, once the header is read, against the client it
 * names (khttpd_read_proxy).
 */
static bool khttpd_client_allowed(struct ktcp_conn *c)
{
	if (!khttpd_access.n ||
	    http_access_allowed(&khttpd_access, c->addr.s6_addr))
		return true;
	khttpd_count(denied, 1);
	return false;
}

/* The client a PROXY header named (an IPv4-mapped IPv6 one as IPv4). */
static void khttpd_client_from_proxy(struct khttpd_conn *conn,
				     const struct http_proxy_addr *p)
{
	union khttpd_addr *a = &conn->client;
	const struct in6_addr *v6 = (const struct in6_addr *)p->src;

	memset(a, 0, sizeof(*a));
	if (p->family == 6 && !ipv6_addr_v4mapped(v6)) {
		a->v6.sin6_family = AF_INET6;
		a->v6.sin6_port = htons(p->src_port);
		memcpy(&a->v6.sin6_addr, p->src, 16);
		conn->c.addr = *v6;
	} else {
		a->v4.sin_family = AF_INET;
		a->v4.sin_port = htons(p->src_port);
		memcpy(&a->v4.sin_addr, p->family == 4 ? p->src : p->src + 12,
		       4);
		/* the lifecycle's form: IPv4 as IPv4-mapped */
		ipv6_addr_set_v4mapped(a->v4.sin_addr.s_addr, &conn->c.addr);
	}
}

/*
 * proxy_protocol: feed the bytes buffered to the PROXY header's parse and
 * take those that are header. 0 (the header is whole, or wants more), or
 * -ESHUTDOWN: no header, a bad one, or one too long; counted, closed
 * without an answer.
 */
static int khttpd_read_proxy(struct khttpd_conn *conn)
{
	size_t used;
	int r = http_proxy_parse(conn->proxy, conn->rbuf + conn->rstart,
				 conn->rlen - conn->rstart, &used);

	if (r < 0) {
		khttpd_count(proxy_refused, 1);
		return -ESHUTDOWN;
	}
	conn->rstart += used;
	if (r == HTTP_PROXY_DONE) {
		khttpd_count(proxy_headers, 1);
		if (conn->proxy->addr.family)
			khttpd_client_from_proxy(conn, &conn->proxy->addr);
		kfree(conn->proxy);
		conn->proxy = NULL;
		if (!khttpd_client_allowed(&conn->c))
			return -ESHUTDOWN;
		/* The request's own clock starts with its first byte. */
		conn->head_deadline = 0;
	}
	return 0;
}

/* 0: progress (state may have changed), -EAGAIN, or the end (EOF/error). */
static int khttpd_read_head(struct khttpd_conn *conn)
{
	size_t head_len = 0;
	int n;

	if (conn->proxy && conn->rlen > conn->rstart)
		return khttpd_read_proxy(conn);
	if (conn->rlen > conn->rstart) {
		int pr = http_parse_request(&conn->req->parser,
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
		n = khttpd_rbuf_for_read(conn);
		if (n < 0)
			return n;
	}
	if (!http_reqbuf_make_room(&conn->rbuf, &conn->rstart, &conn->rlen,
				   &conn->rcap, khttpd_rbuf_grow)) {
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
 * Drop the body of the request just answered: what is buffered, then one
 * read. 0 when it is gone, or refused by core's decoder (its limits bound
 * what a client can make us read): then the request has its answer
 * already, the state is KHTTPD_SEND with why we close; -EINPROGRESS after
 * a read, so that every read spends the step's budget and a client
 * streaming a body cannot hold the worker.
 */
static int khttpd_drain_body(struct khttpd_conn *conn)
{
	int n = http_body_drain(&conn->req->drain, conn->rbuf, &conn->rstart,
				&conn->rlen);

	if (n > 0) {
		khttpd_respond_error(conn, n);
		conn->close_after = true;
		conn->state = KHTTPD_SEND;
	}
	if (n >= 0)
		return 0;
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
	kernel_sock_shutdown(conn->c.sock, SHUT_WR);
	conn->state = KHTTPD_LINGER;
	conn->linger_deadline =
		jiffies + msecs_to_jiffies(HTTP_SERVER_LINGER_MS);
	conn->linger_reads = 0;
}

/* -EAGAIN while the peer still may send; anything else ends it. */
static int khttpd_linger(struct khttpd_conn *conn)
{
	char scratch[64];

	while (conn->linger_reads++ < HTTP_SERVER_LINGER_READS) {
		int n = conn->rbuf ?
				khttpd_recv(conn, conn->rbuf, conn->rcap) :
				khttpd_recv(conn, scratch, sizeof(scratch));

		if (n <= 0)
			return n ? n : -ESHUTDOWN;
	}
	return -ESHUTDOWN;
}

/* 0, or -ESHUTDOWN: close now (the plan did not ask to linger). */
static int khttpd_response_done(struct khttpd_conn *conn)
{
	khttpd_trace_end(conn);
	khttpd_out_reset(&conn->req->out);
	ktcp_conn_touch(&conn->c);
	if (conn->close_after && !conn->linger) {
		/* The plan held the response's end back (more): shutting the
		 * write side sends it with the FIN, in one segment.
		 */
		kernel_sock_shutdown(conn->c.sock, SHUT_WR);
		return -ESHUTDOWN;
	}
	if (conn->close_after)
		khttpd_start_linger(conn);
	else if (http_body_draining(&conn->req->drain))
		conn->state = KHTTPD_DRAIN_BODY;
	else
		conn->state = KHTTPD_READ_HEAD;
	return 0;
}

static void khttpd_close(struct khttpd_conn *conn)
{
	ktcp_conn_close(&conn->c);
}

/* Nothing to do until an event: arm the timer for the state's deadline,
 * or act on it if it passed. Returns true if the step should go on.
 */
static bool khttpd_wait(struct khttpd_conn *conn)
{
	unsigned long deadline;
	bool timed = khttpd_server.p.idle_timeout_ms != 0;

	switch (conn->state) {
	case KHTTPD_READ_HEAD:
		deadline =
			conn->head_deadline ?
				conn->head_deadline :
				ktcp_conn_idle_deadline(&conn->c,
							khttpd_idle_jiffies());
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
		deadline = ktcp_conn_idle_deadline(&conn->c,
						   khttpd_idle_jiffies());
		/* kTLS's own worker hands held records to TCP: look soon. */
		if (conn->tls_flushing &&
		    (!timed || time_before(jiffies, deadline))) {
			ktcp_conn_wait(&conn->c,
				       jiffies + KHTTPD_TLS_FLUSH_POLL);
			return false;
		}
		break;
	}
	if (!timed || !ktcp_conn_wait(&conn->c, deadline))
		return false;
	if (conn->state == KHTTPD_LINGER) {
		khttpd_close(conn);
		return false;
	}
	ktcp_server_count(&khttpd_server, timeouts, 1);
	if (conn->proxy) /* its header never came whole */
		khttpd_count(proxy_refused, 1);
	else if (conn->state == KHTTPD_READ_HEAD && conn->head_deadline &&
		 conn->rlen > conn->rstart) {
		/* A head that never completed: tell the client why we close. */
		conn->head_deadline = 0;
		khttpd_send_error_close(conn, 408);
		return true;
	}
	khttpd_close(conn);
	return false;
}

static void khttpd_conn_step(struct ktcp_conn *c)
{
	struct khttpd_conn *conn = container_of(c, struct khttpd_conn, c);
	int budget = KHTTPD_BUDGET;
	int err;

	while (budget-- > 0) {
		switch (conn->state) {
		case KHTTPD_SEND:
			err = khttpd_send(conn);
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
				ktcp_server_count(&khttpd_server, errors, 1);
			khttpd_close(conn);
			return;
		}
	}
	/* Budget spent with work left: let other connections run. */
	ktcp_conn_kick(c);
}

/* ---- lifetime: kernel/common/ktcp_server.c, with these steps ---- */

static void khttpd_conn_destroy(struct ktcp_conn *c)
{
	struct khttpd_conn *conn = container_of(c, struct khttpd_conn, c);

	kfree(conn->proxy);
	conn->proxy = NULL;
	khttpd_req_put(conn);
}

static int khttpd_conn_init(struct ktcp_conn *c)
{
	struct khttpd_conn *conn = container_of(c, struct khttpd_conn, c);

	/* With proxy_protocol the rules see the header's client instead. */
	if ((!khttpd_proxy_protocol || c->file) && !khttpd_client_allowed(c))
		return -EACCES;

	/* No request buffer yet: khttpd_rbuf_for_read() takes one. */
	conn->state = KHTTPD_READ_HEAD;
	/* Only kTLS sockets are adopted (adopt.c). */
	conn->tls = c->file;
	khttpd_client_from_sock(conn);
	/* An adopted socket's agent read the PROXY header, if any. */
	if (khttpd_proxy_protocol && !conn->tls) {
		conn->proxy = kmalloc(sizeof(*conn->proxy), GFP_KERNEL);
		if (!conn->proxy)
			return -ENOMEM;
		http_proxy_init(conn->proxy);
		/* The whole header within one idle timeout of the accept. */
		if (khttpd_idle_jiffies())
			conn->head_deadline =
				(jiffies + khttpd_idle_jiffies()) | 1;
	}
	return 0;
}

static const struct ktcp_server_ops khttpd_ops = {
	.cache_name = "khttpd_conn",
	.conn_size = sizeof(struct khttpd_conn),
	.conn_offset = offsetof(struct khttpd_conn, c),
	.init = khttpd_conn_init,
	.step = khttpd_conn_step,
	.destroy = khttpd_conn_destroy,
	.refuse = khttpd_refuse,
};

/* What stays of an idle connection: the request's part is not in it. */
static_assert(sizeof(struct khttpd_conn) <= 512);

int khttpd_conns_start(const struct ktcp_server_params *p)
{
	int err;

	khttpd_req_cache = kmem_cache_create("khttpd_req",
					     sizeof(struct khttpd_req), 0, 0,
					     NULL);
	if (!khttpd_req_cache)
		return -ENOMEM;
	err = ktcp_server_start(&khttpd_server, &khttpd_ops, p);
	if (err < 0) {
		kmem_cache_destroy(khttpd_req_cache);
		khttpd_req_cache = NULL;
	}
	return err;
}

void khttpd_conns_stop(void)
{
	ktcp_server_stop(&khttpd_server);
	/* Every connection is freed, and with it its request's part. */
	kmem_cache_destroy(khttpd_req_cache);
	khttpd_req_cache = NULL;
}
