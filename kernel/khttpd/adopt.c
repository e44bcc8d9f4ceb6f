// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * adopt.c — /proc/net/khttpd_adopt: a TLS agent with CAP_NET_ADMIN writes
 * the number of one of its descriptors, a connected TCP socket on which it
 * finished the handshake and turned kTLS on for both directions; khttpd
 * takes its own reference to the socket's file and serves it like any
 * connection (tls.c, conn.c), and the agent closes its descriptor. The
 * number is looked up in the writer's descriptor table, so only the
 * writer's own sockets can be named. The top of the module's layers,
 * beside proc.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/kernel.h>
#include <linux/net.h>
#include <linux/proc_fs.h>
#include <linux/uaccess.h>
#include <linux/user_namespace.h>
#include <net/net_namespace.h>

#include "khttpd.h"

/* The longest line a write may hold: a descriptor number and a newline. */
#define KHTTPD_ADOPT_MAX 16

static ssize_t khttpd_adopt_write(struct file *pf, const char __user *ubuf,
				  size_t count, loff_t *ppos)
{
	struct socket *sock;
	struct file *file;
	unsigned int fd;
	int err;

	/*
	 * Both the writer and whoever opened the file: a privileged
	 * process must not be made to write a number into a descriptor
	 * an unprivileged one opened and passed it.
	 */
	if (!file_ns_capable(pf, &init_user_ns, CAP_NET_ADMIN) ||
	    !capable(CAP_NET_ADMIN))
		return -EPERM;
	if (count == 0 || count > KHTTPD_ADOPT_MAX)
		return -EINVAL;
	err = kstrtouint_from_user(ubuf, count, 10, &fd);
	if (err < 0)
		return -EINVAL;
	file = fget(fd);
	if (!file)
		return -EBADF;
	sock = sock_from_file(file);
	err = sock ? khttpd_tls_check(sock) : -EINVAL;
	if (err == 0)
		err = khttpd_conns_adopt(file);
	if (err < 0) {
		fput(file);
		return err;
	}
	/* The connection holds the reference fget() took. */
	return count;
}

static const struct proc_ops khttpd_adopt_ops = {
	.proc_write = khttpd_adopt_write,
	.proc_lseek = noop_llseek,
};

int khttpd_adopt_init(void)
{
	if (!proc_create("khttpd_adopt", 0200, init_net.proc_net,
			 &khttpd_adopt_ops))
		return -ENOMEM;
	return 0;
}

void khttpd_adopt_exit(void)
{
	/* Waits for a write under way: none adopts after this returns. */
	remove_proc_entry("khttpd_adopt", init_net.proc_net);
}
