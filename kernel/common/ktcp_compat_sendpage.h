/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * ktcp_compat_sendpage.h - sending a page-cache page to a TCP socket without
 * copying it, on every supported kernel.
 *
 * Linux 6.5 removed kernel_sendpage() and ->sendpage: a page now reaches
 * TCP as a bio_vec in a sendmsg() flagged MSG_SPLICE_PAGES, which takes a
 * page reference instead of copying (as splice to a socket does). Before
 * 6.5, kernel_sendpage() is that path. Callers pass the usual MSG_* flags,
 * and KTCP_SENDPAGE_NOTLAST on a page that more of the same send follows,
 * as splice does: before 6.5 kTLS closes a record at every page without
 * MSG_SENDPAGE_NOTLAST (MSG_MORE alone does not keep it open there), so a
 * file went out in records of 4 KiB; from 6.5 MSG_MORE keeps it open.
 */
#ifndef KTCP_COMPAT_SENDPAGE_H
#define KTCP_COMPAT_SENDPAGE_H

#include <linux/net.h>
#include <linux/socket.h>
#include <linux/uio.h>
#include <linux/version.h>

/* checkpatch: LINUX_VERSION_CODE: built for 6.1 and 6.12; checkpatch: CONSTANT_COMPARISON: idiom */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 5, 0)
#include <linux/bvec.h>

#define KTCP_SENDPAGE_NOTLAST MSG_MORE

static inline int ktcp_send_page(struct socket *sock, struct page *page,
				 int offset, size_t size, int flags)
{
	struct bio_vec bvec;
	struct msghdr msg = { .msg_flags = flags | MSG_SPLICE_PAGES };

	bvec_set_page(&bvec, page, size, offset);
	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, &bvec, 1, size);
	return sock_sendmsg(sock, &msg);
}
#else
#define KTCP_SENDPAGE_NOTLAST (MSG_MORE | MSG_SENDPAGE_NOTLAST)

static inline int ktcp_send_page(struct socket *sock, struct page *page,
				 int offset, size_t size, int flags)
{
	return kernel_sendpage(sock, page, offset, size, flags);
}
#endif

#endif /* KTCP_COMPAT_SENDPAGE_H */
