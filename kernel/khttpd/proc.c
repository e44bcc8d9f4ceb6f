// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * proc.c — /proc/net/khttpd: the counters of stats.c added up, with the
 * live connections and the cache's size. The top of the module's layers:
 * it reads from all of them and nothing calls into it but main.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <net/net_namespace.h>

#include "khttpd.h"

static int khttpd_proc_show(struct seq_file *m, void *v)
{
	struct khttpd_stats sum;
	int i;

	khttpd_stats_sum(&sum);
	seq_printf(m, "accepted %llu\n", sum.accepted);
	seq_printf(m, "active %u\n", khttpd_conns_active());
	seq_printf(m, "refused %llu\n", sum.refused);
	seq_printf(m, "requests %llu\n", sum.requests);
	for (i = 0; i < 5; i++)
		seq_printf(m, "status_%dxx %llu\n", i + 1, sum.status[i]);
	seq_printf(m, "bytes_out %llu\n", sum.bytes_out);
	seq_printf(m, "cache_hits %llu\n", sum.cache_hits);
	seq_printf(m, "cache_misses %llu\n", sum.cache_misses);
	seq_printf(m, "cache_evictions %llu\n", sum.cache_evictions);
	khttpd_cache_show(m);
	seq_printf(m, "timeouts %llu\n", sum.timeouts);
	seq_printf(m, "errors %llu\n", sum.errors);
	return 0;
}

int khttpd_stats_init(void)
{
	int err = khttpd_counters_init();

	if (err < 0)
		return err;
	if (!proc_create_single("khttpd", 0444, init_net.proc_net,
				khttpd_proc_show)) {
		khttpd_counters_exit();
		return -ENOMEM;
	}
	return 0;
}

void khttpd_stats_exit(void)
{
	remove_proc_entry("khttpd", init_net.proc_net);
	khttpd_counters_exit();
}
