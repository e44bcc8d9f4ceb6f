// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * khttpd — an in-kernel HTTP/1.1 static file server on the ktcp core.
 *
 * main.c: the module's load and unload, the top layer: it starts the
 * layers below in order and stops them in reverse. Its parameters are
 * params.c's. The listener, the accept thread and every connection's
 * lifecycle are kernel/common's, as in kecho; conn.c is the HTTP step: an
 * idle connection costs memory, never a worker.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>

#include "khttpd.h"

MODULE_LICENSE("Dual MIT/GPL");
MODULE_AUTHOR("ktcp authors");
MODULE_DESCRIPTION("In-kernel HTTP/1.1 static file server on CMWQ");
MODULE_VERSION("0.1");

static int __init khttpd_init(void)
{
	struct ktcp_server_params p;
	kuid_t kuid;
	kgid_t kgid;
	int err;

	err = khttpd_params_load(&p, &kuid, &kgid);
	if (err < 0)
		return err;

	err = khttpd_cred_init(kuid, kgid);
	if (err < 0)
		goto out_root;

	err = khttpd_counters_init();
	if (err < 0)
		goto out_cred;

	err = khttpd_rate_init();
	if (err < 0)
		goto out_counters;

	err = khttpd_cache_init();
	if (err < 0)
		goto out_rate;

	err = khttpd_conns_start(&p);
	if (err < 0)
		goto out_cache;

	/* Last: the files read the counters and the connections. */
	err = khttpd_stats_init();
	if (err < 0)
		goto out_conns;

	err = khttpd_adopt_init();
	if (err < 0)
		goto out_stats;

	khttpd_params_log();
	return 0;

out_stats:
	khttpd_stats_exit();
out_conns:
	khttpd_conns_stop();
out_cache:
	khttpd_cache_exit();
out_rate:
	khttpd_rate_exit();
out_counters:
	khttpd_counters_exit();
out_cred:
	khttpd_cred_exit();
out_root:
	khttpd_params_put();
	return err;
}

static void __exit khttpd_exit(void)
{
	/* No socket is adopted once this returns. */
	khttpd_adopt_exit();
	khttpd_stats_exit();
	/* Stop accepting; every live connection closes; all are freed. */
	khttpd_conns_stop();
	khttpd_cache_exit();
	khttpd_rate_exit();
	khttpd_counters_exit();
	khttpd_cred_exit();
	khttpd_params_put();
	pr_info("unloaded\n");
}

module_init(khttpd_init);
module_exit(khttpd_exit);
