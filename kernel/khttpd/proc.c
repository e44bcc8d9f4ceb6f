// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * proc.c — /proc/net/khttpd: the counters of stats.c added up, with the
 * live connections and the cache's size; /proc/net/khttpd_metrics: the
 * same in the Prometheus text format. core/http_counters.c renders both,
 * as it does ktcp-httpd's status page. The top of the module's layers:
 * it reads from all of them and nothing calls into it but main.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <net/net_namespace.h>

#include "http_counters.h"
#include "khttpd.h"

/* The counters in core's order (http_counters.h); sum: khttpd's own. */
static void khttpd_counters_get(u64 v[HTTP_NCOUNTERS],
				struct khttpd_stats *sum_out)
{
	struct ktcp_server_stats conns;
	struct khttpd_stats sum;
	size_t cache_bytes, cache_entries, listing_bytes, listings;
	int i;

	khttpd_stats_sum(&sum);
	khttpd_conns_sum(&conns);
	khttpd_cache_usage(&cache_bytes, &cache_entries);
	khttpd_listing_usage(&listing_bytes, &listings);
	v[HTTP_CTR_ACCEPTED] = conns.accepted;
	v[HTTP_CTR_ACTIVE] = khttpd_conns_active();
	v[HTTP_CTR_REFUSED] = conns.refused;
	v[HTTP_CTR_REQUESTS] = sum.requests;
	for (i = 0; i < 5; i++)
		v[HTTP_CTR_STATUS_1XX + i] = sum.status[i];
	v[HTTP_CTR_BYTES_OUT] = sum.bytes_out;
	v[HTTP_CTR_CACHE_HITS] = sum.cache_hits;
	v[HTTP_CTR_CACHE_MISSES] = sum.cache_misses;
	v[HTTP_CTR_CACHE_EVICTIONS] = sum.cache_evictions;
	v[HTTP_CTR_CACHE_BYTES] = cache_bytes;
	v[HTTP_CTR_CACHE_ENTRIES] = cache_entries;
	v[HTTP_CTR_TIMEOUTS] = conns.timeouts;
	v[HTTP_CTR_ERRORS] = conns.errors;
	v[HTTP_CTR_LISTINGS_REFUSED] = sum.listings_refused;
	v[HTTP_CTR_LISTING_BYTES] = listing_bytes;
	v[HTTP_CTR_DENIED] = sum.denied;
	v[HTTP_CTR_RATE_LIMITED] = sum.rate_limited;
	v[HTTP_CTR_RATE_ENTRIES] = khttpd_rate_entries();
	*sum_out = sum;
}

/* Both files: core renders into a page, shown whole. */
static int khttpd_proc_render(struct seq_file *m, bool prometheus)
{
	u64 v[HTTP_NCOUNTERS];
	struct khttpd_stats sum;
	struct http_buf b;
	char *page = kmalloc(PAGE_SIZE, GFP_KERNEL);

	if (!page)
		return -ENOMEM;
	khttpd_counters_get(v, &sum);
	http_buf_init(&b, page, PAGE_SIZE);
	if (prometheus)
		http_counters_prometheus(&b, "khttpd", v);
	else
		http_counters_plain(&b, v);
	if (!b.overflow)
		seq_write(m, page, b.len);
	kfree(page);
	/* khttpd's own, after core's: kTLS connections (tls.c, adopt.c). */
	if (prometheus)
		seq_printf(m,
			   "# HELP khttpd_tls_adopted_total kTLS sockets taken over from a TLS agent.\n"
			   "# TYPE khttpd_tls_adopted_total counter\n"
			   "khttpd_tls_adopted_total %llu\n"
			   "# HELP khttpd_tls_nondata_total kTLS connections ended by an alert or handshake record.\n"
			   "# TYPE khttpd_tls_nondata_total counter\n"
			   "khttpd_tls_nondata_total %llu\n",
			   sum.tls_adopted, sum.tls_nondata);
	else
		seq_printf(m, "tls_adopted %llu\ntls_nondata %llu\n",
			   sum.tls_adopted, sum.tls_nondata);
	return b.overflow ? -EOVERFLOW : 0;
}

static int khttpd_proc_show(struct seq_file *m, void *v)
{
	return khttpd_proc_render(m, false);
}

static int khttpd_metrics_show(struct seq_file *m, void *v)
{
	return khttpd_proc_render(m, true);
}

int khttpd_stats_init(void)
{
	if (!proc_create_single("khttpd", 0444, init_net.proc_net,
				khttpd_proc_show))
		return -ENOMEM;
	if (!proc_create_single("khttpd_metrics", 0444, init_net.proc_net,
				khttpd_metrics_show)) {
		remove_proc_entry("khttpd", init_net.proc_net);
		return -ENOMEM;
	}
	return 0;
}

void khttpd_stats_exit(void)
{
	remove_proc_entry("khttpd_metrics", init_net.proc_net);
	remove_proc_entry("khttpd", init_net.proc_net);
}
