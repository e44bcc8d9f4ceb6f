// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * stats.c — per-CPU counters, summed on read (proc.c shows them in
 * /proc/net/khttpd). Nothing is logged per request; everything worth
 * knowing is counted here.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/percpu.h>

#include "khttpd.h"

struct khttpd_stats __percpu *khttpd_stats;

void khttpd_count_status(int status)
{
	if (status >= 100 && status < 600)
		this_cpu_inc(khttpd_stats->status[status / 100 - 1]);
}

void khttpd_stats_sum(struct khttpd_stats *sum)
{
	int cpu, i;

	memset(sum, 0, sizeof(*sum));
	for_each_possible_cpu(cpu) {
		struct khttpd_stats *s = per_cpu_ptr(khttpd_stats, cpu);

		sum->requests += READ_ONCE(s->requests);
		for (i = 0; i < 5; i++)
			sum->status[i] += READ_ONCE(s->status[i]);
		sum->bytes_out += READ_ONCE(s->bytes_out);
		sum->cache_hits += READ_ONCE(s->cache_hits);
		sum->cache_misses += READ_ONCE(s->cache_misses);
		sum->cache_evictions += READ_ONCE(s->cache_evictions);
		sum->tls_adopted += READ_ONCE(s->tls_adopted);
		sum->tls_nondata += READ_ONCE(s->tls_nondata);
		sum->listings_refused += READ_ONCE(s->listings_refused);
		sum->denied += READ_ONCE(s->denied);
		sum->rate_limited += READ_ONCE(s->rate_limited);
	}
}

int khttpd_counters_init(void)
{
	khttpd_stats = alloc_percpu(struct khttpd_stats);
	return khttpd_stats ? 0 : -ENOMEM;
}

void khttpd_counters_exit(void)
{
	free_percpu(khttpd_stats);
}
