// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * stats.c — per-CPU counters, summed on read in /proc/net/khttpd. Nothing
 * is logged per request; everything worth knowing is counted here.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/percpu.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <net/net_namespace.h>

#include "khttpd.h"

struct khttpd_stats __percpu *khttpd_stats;

void khttpd_count_status(int status)
{
	if (status >= 100 && status < 600)
		this_cpu_inc(khttpd_stats->status[status / 100 - 1]);
}

static int khttpd_stats_show(struct seq_file *m, void *v)
{
	struct khttpd_stats sum = {};
	int cpu, i;

	for_each_possible_cpu(cpu) {
		struct khttpd_stats *s = per_cpu_ptr(khttpd_stats, cpu);

		sum.accepted += READ_ONCE(s->accepted);
		sum.refused += READ_ONCE(s->refused);
		sum.requests += READ_ONCE(s->requests);
		for (i = 0; i < 5; i++)
			sum.status[i] += READ_ONCE(s->status[i]);
		sum.bytes_out += READ_ONCE(s->bytes_out);
		sum.cache_hits += READ_ONCE(s->cache_hits);
		sum.cache_misses += READ_ONCE(s->cache_misses);
		sum.cache_evictions += READ_ONCE(s->cache_evictions);
		sum.timeouts += READ_ONCE(s->timeouts);
		sum.errors += READ_ONCE(s->errors);
	}
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
	khttpd_stats = alloc_percpu(struct khttpd_stats);
	if (!khttpd_stats)
		return -ENOMEM;
	if (!proc_create_single("khttpd", 0444, init_net.proc_net,
				khttpd_stats_show)) {
		free_percpu(khttpd_stats);
		return -ENOMEM;
	}
	return 0;
}

void khttpd_stats_exit(void)
{
	remove_proc_entry("khttpd", init_net.proc_net);
	free_percpu(khttpd_stats);
}
