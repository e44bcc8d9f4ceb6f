// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * rate.c — request rates per client address (rate=, burst=,
 * rate_entries=): the table core's http_rate.c works over, allocated at
 * load with a random seed and never grown, and its striped locks. Core
 * does the arithmetic; a request it refuses is answered 429 by respond.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/jiffies.h>
#include <linux/mm.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

#include "khttpd.h"

#define KHTTPD_RATE_LOCKS 64

static struct http_rate_table khttpd_rate_table;
static spinlock_t khttpd_rate_locks[KHTTPD_RATE_LOCKS];
static atomic64_t khttpd_rate_used;

int khttpd_rate_init(void)
{
	struct http_rate_entry *mem;
	u64 seed[2];
	int i;

	if (!khttpd_rate_conf.rate)
		return 0;
	mem = kvmalloc_array(khttpd_rate_conf.entries, sizeof(*mem),
			     GFP_KERNEL);
	if (!mem)
		return -ENOMEM;
	/* Random: a client cannot pick addresses that share a set. */
	get_random_bytes(seed, sizeof(seed));
	http_rate_init(&khttpd_rate_table, mem, khttpd_rate_conf.entries, seed);
	for (i = 0; i < KHTTPD_RATE_LOCKS; i++)
		spin_lock_init(&khttpd_rate_locks[i]);
	return 0;
}

void khttpd_rate_exit(void)
{
	kvfree(khttpd_rate_table.e);
	khttpd_rate_table.e = NULL;
}

u32 khttpd_rate_take(const struct in6_addr *addr, unsigned int v6_prefix)
{
	u8 key[16];
	u32 set, wait;
	bool grew;

	if (!khttpd_rate_table.e)
		return 0;
	http_addr_key(key, addr->s6_addr, v6_prefix);
	set = http_rate_set(&khttpd_rate_table, key);
	spin_lock(&khttpd_rate_locks[set % KHTTPD_RATE_LOCKS]);
	wait = http_rate_take(&khttpd_rate_table, set, key,
			      jiffies64_to_msecs(get_jiffies_64()),
			      &khttpd_rate_conf, &grew);
	spin_unlock(&khttpd_rate_locks[set % KHTTPD_RATE_LOCKS]);
	if (grew)
		atomic64_inc(&khttpd_rate_used);
	if (wait)
		khttpd_count(rate_limited, 1);
	return wait;
}

u64 khttpd_rate_entries(void)
{
	return atomic64_read(&khttpd_rate_used);
}
