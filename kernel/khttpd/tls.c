// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * tls.c — connections whose TLS records the kernel does (kTLS): a user-space
 * agent completed the handshake and set the keys (TLS_TX, TLS_RX), then
 * handed the socket over (adopt.c). Here: the checks such a socket passes,
 * reading decrypted records (a record that is not application data ends the
 * connection), the close_notify alert, and whether kTLS still holds records
 * TCP had no room for. Below conn.c; sending a response is out.c's, the
 * same for both kinds of connection: tls_sw takes sendmsg, sendpage and
 * MSG_SPLICE_PAGES like TCP does.
 *
 * Only header inlines and struct fields are used: the tls module exports
 * no symbol for any of this, and khttpd must load without it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/net.h>
#include <linux/socket.h>
#include <linux/string.h>
#include <linux/tcp.h>
#include <linux/tls.h>
#include <net/inet_connection_sock.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <net/tls.h>

#include "khttpd.h"

/* Record content types (RFC 8446 5.1, RFC 5246 6.2.1). */
#define KHTTPD_TLS_ALERT 21
#define KHTTPD_TLS_APPLICATION_DATA 23

/* One control message carrying one byte: the record type. */
union khttpd_tls_cmsg {
	struct cmsghdr h;
	u8 buf[CMSG_SPACE(sizeof(u8))];
};

static bool khttpd_tls_conf_ok(u8 conf)
{
	return conf == TLS_SW || conf == TLS_HW;
}

int khttpd_tls_check(struct socket *sock)
{
	const struct tcp_ulp_ops *ulp;
	const struct tls_context *ctx;
	struct sock *sk = sock->sk;
	int err = -EINVAL;

	if (!sk || sock->type != SOCK_STREAM || sk->sk_type != SOCK_STREAM ||
	    sk->sk_protocol != IPPROTO_TCP ||
	    (sk->sk_family != AF_INET && sk->sk_family != AF_INET6))
		return -EINVAL;
	lock_sock(sk);
	if (sk->sk_state != TCP_ESTABLISHED)
		goto out;
	ulp = inet_csk(sk)->icsk_ulp_ops;
	if (!ulp || strcmp(ulp->name, "tls") != 0)
		goto out;
	ctx = tls_get_ctx(sk);
	if (ctx && khttpd_tls_conf_ok(ctx->tx_conf) &&
	    khttpd_tls_conf_ok(ctx->rx_conf))
		err = 0;
out:
	release_sock(sk);
	return err;
}

int khttpd_tls_recv(struct socket *sock, char *buf, size_t len)
{
	union khttpd_tls_cmsg cm = {};
	struct msghdr msg = {
		.msg_control = &cm,
		.msg_controllen = sizeof(cm),
	};
	struct kvec vec = { .iov_base = buf, .iov_len = len };
	int n = kernel_recvmsg(sock, &msg, &vec, 1, len, MSG_DONTWAIT);

	if (n < 0)
		return n;
	/* kTLS says each record's type (put_cmsg moved msg_control on). */
	if (sizeof(cm) - msg.msg_controllen >= sizeof(cm.h) &&
	    cm.h.cmsg_level == SOL_TLS &&
	    cm.h.cmsg_type == TLS_GET_RECORD_TYPE &&
	    *(u8 *)CMSG_DATA(&cm.h) != KHTTPD_TLS_APPLICATION_DATA) {
		/* An alert (close_notify too), or a handshake message
		 * (KeyUpdate, NewSessionTicket) kTLS cannot act on.
		 */
		khttpd_count(tls_nondata, 1);
		return -ESHUTDOWN;
	}
	return n;
}

int khttpd_tls_close_notify(struct socket *sock)
{
	static const u8 alert[2] = { 1 /* warning */, 0 /* close_notify */ };
	union khttpd_tls_cmsg cm = {};
	struct msghdr msg = {
		.msg_control = &cm,
		.msg_controllen = sizeof(cm),
		.msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL,
	};
	struct kvec vec = { .iov_base = (void *)alert,
			    .iov_len = sizeof(alert) };

	cm.h.cmsg_level = SOL_TLS;
	cm.h.cmsg_type = TLS_SET_RECORD_TYPE;
	cm.h.cmsg_len = CMSG_LEN(sizeof(u8));
	*(u8 *)CMSG_DATA(&cm.h) = KHTTPD_TLS_ALERT;
	return kernel_sendmsg(sock, &msg, &vec, 1, sizeof(alert));
}

bool khttpd_tls_tx_pending(struct socket *sock)
{
	struct tls_context *ctx = tls_get_ctx(sock->sk);
	struct tls_sw_context_tx *tx;

	if (READ_ONCE(ctx->partially_sent_record))
		return true;
	if (ctx->tx_conf != TLS_SW)
		return false;
	tx = tls_sw_ctx_tx(ctx);
	return READ_ONCE(tx->open_rec) || !list_empty_careful(&tx->tx_list);
}
