// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * out.c — the output: a response's head (in req->hbuf), its bytes in
 * memory and its file pages, sent without blocking as far as the socket
 * takes them. Below the cache and the listing: what fills struct
 * khttpd_out (respond.c, listing.c) and what refills it (conn.c) are
 * above; this file only sends.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/net.h>
#include <linux/pipe_fs_i.h>
#include <linux/splice.h>
#include <net/sock.h>

#include "khttpd.h"
#include "ktcp_compat_sendpage.h"

/* Bytes spliced per piece: big enough to fill a socket buffer, small
 * enough that a worker returns to other connections often.
 */
#define KHTTPD_SPLICE_PIECE (256 * 1024)

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

	if (sd->flags & SPLICE_F_MORE)
		flags |= MSG_MORE;
	if (sd->len < sd->total_len)
		flags |= KTCP_SENDPAGE_NOTLAST;
	return ktcp_send_page(conn->c.sock, buf->page, buf->offset, sd->len,
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

/* Part heads still to send after what the output holds now. */
static bool khttpd_parts_left(const struct khttpd_out *o)
{
	return o->parts && o->part_next <= o->parts->ranges.n;
}

/*
 * The next part of a multipart answer: its head into hbuf (the response's
 * head is out), its bytes from the cached body or the file.
 */
static int khttpd_next_part(struct khttpd_conn *conn)
{
	struct khttpd_out *o = &conn->req->out;
	u64 off, len;
	int n = http_plan_part(o->parts, o->part_next++, conn->req->hbuf,
			       sizeof(conn->req->hbuf), &off, &len);

	if (n < 0)
		return -EIO;
	o->head_off = 0;
	o->head_len = n;
	if (o->parts_mem) {
		o->mem = o->parts_mem + off;
		o->mem_off = 0;
		o->mem_len = len;
	} else {
		o->pos = off;
		o->file_left = len;
	}
	return 0;
}

/*
 * Over kTLS, the first piece after a head that left a record open ends,
 * pushed, where the body's next records start on a page
 * (http_tls_first_piece).
 */
static int khttpd_send_file_piece(struct khttpd_conn *conn)
{
	struct khttpd_out *o = &conn->req->out;
	size_t piece = min_t(u64, o->file_left, KHTTPD_SPLICE_PIECE);
	bool push = false, more;
	struct splice_desc sd = {
		.pos = o->pos,
		.u.data = conn,
	};
	ssize_t ret;

	if (conn->tls && o->rec_open) {
		u64 first = http_tls_first_piece(o->rec_open, o->pos,
						 o->file_left, PAGE_SIZE);

		if (first < piece) {
			piece = first;
			push = true;
		}
	}
	sd.total_len = piece;
	more = !push &&
	       (o->file_left > piece || o->more || khttpd_parts_left(o));
	if (more)
		sd.flags = SPLICE_F_MORE;
	/* as the server's user: what the file system (FUSE, an LSM) sees */
	ret = khttpd_splice_file(o->file, &sd, khttpd_splice_actor);
	if (ret == 0)
		return -EIO; /* the file shrank under us: the framing is lost */
	if (ret < 0)
		return ret;
	/* a whole piece without SPLICE_F_MORE ends with a push */
	if (ret == piece && !more)
		o->rec_open = 0;
	else
		o->rec_open = (o->rec_open + ret) & (HTTP_TLS_RECORD_MAX - 1);
	o->pos += ret;
	o->file_left -= ret;
	conn->sent += ret;
	khttpd_count(bytes_out, ret);
	ktcp_conn_touch(&conn->c);
	return 0;
}

int khttpd_out_flush(struct khttpd_conn *conn, int *pieces)
{
	struct khttpd_out *o = &conn->req->out;
	int ret;

	for (;;) {
		if (o->head_off < o->head_len || o->mem_off < o->mem_len) {
			struct kvec vec[2];
			struct msghdr msg = {};
			size_t total = 0;
			int n = 0;

			if (o->head_off < o->head_len) {
				vec[n].iov_base = conn->req->hbuf + o->head_off;
				vec[n].iov_len = o->head_len - o->head_off;
				total += vec[n++].iov_len;
			}
			if (o->mem_off < o->mem_len) {
				vec[n].iov_base = (void *)(o->mem + o->mem_off);
				vec[n].iov_len = o->mem_len - o->mem_off;
				total += vec[n++].iov_len;
			}
			/* The head leaves with MSG_MORE when a body follows it, so
			 * head and first body bytes share a segment.
			 */
			msg.msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL;
			if (o->file_left || (o->listing && !o->listing_last) ||
			    o->more || khttpd_parts_left(o))
				msg.msg_flags |= MSG_MORE;
			ret = kernel_sendmsg(conn->c.sock, &msg, vec, n, total);
			if (ret < 0)
				return ret;
			if (!(msg.msg_flags & MSG_MORE))
				o->rec_open = 0;
			else
				o->rec_open = (o->rec_open + ret) &
					      (HTTP_TLS_RECORD_MAX - 1);
			conn->sent += ret;
			khttpd_count(bytes_out, ret);
			ktcp_conn_touch(&conn->c);
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
			if ((*pieces)-- == 0)
				return -EINPROGRESS;
			ret = khttpd_send_file_piece(conn);
			if (ret < 0)
				return ret;
			continue;
		}
		if (khttpd_parts_left(o)) {
			ret = khttpd_next_part(conn);
			if (ret < 0)
				return ret;
			continue;
		}
		return 0;
	}
}
