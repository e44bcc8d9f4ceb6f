// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * trace.c — the request trace event (khttpd_trace.h). A connection notes
 * its request when it is answered and emits the record when the response
 * has left (or the connection ended first). The request's method and
 * target live in the receive buffer only until the next request is read,
 * so they are copied then — only while the event is enabled.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ktime.h>
#include <linux/slab.h>

#include "khttpd.h"

#define CREATE_TRACE_POINTS
#include "khttpd_trace.h"

struct khttpd_trace_req {
	u64 start_ns;
	u64 sent_at_start;
	int status;
	unsigned int target_len;
	char method[KHTTPD_TRACE_METHOD_MAX + 1];
	char target[];
};

void khttpd_trace_begin(struct khttpd_conn *conn,
			const struct http_request *req, const char *base,
			int status)
{
	struct khttpd_trace_req *t;
	size_t mlen = 0, tlen = 0;

	khttpd_trace_end(conn);
	if (!trace_khttpd_request_enabled())
		return;
	if (req) {
		mlen = min_t(size_t, req->method_token.len,
			     KHTTPD_TRACE_METHOD_MAX);
		tlen = min_t(size_t, req->target.len, KHTTPD_TRACE_TARGET_MAX);
	}
	t = kmalloc(sizeof(*t) + tlen + 1, GFP_KERNEL);
	if (!t)
		return;
	t->start_ns = ktime_get_ns();
	t->sent_at_start = conn->sent;
	t->status = status;
	t->target_len = tlen;
	memcpy(t->method, mlen ? base + req->method_token.off : "", mlen);
	t->method[mlen] = '\0';
	memcpy(t->target, tlen ? base + req->target.off : "", tlen);
	t->target[tlen] = '\0';
	conn->req->trace = t;
}

void khttpd_trace_end(struct khttpd_conn *conn)
{
	struct khttpd_trace_req *t = conn->req ? conn->req->trace : NULL;

	if (!t)
		return;
	conn->req->trace = NULL;
	trace_khttpd_request(&conn->client.sa, t->method, t->target,
			     t->target_len, t->status,
			     conn->sent - t->sent_at_start,
			     ktime_get_ns() - t->start_ns);
	kfree(t);
}
