// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * cache.c — the content cache: one entry per path (metadata, the body of
 * small files, the gzip copy) in an RCU hash table.
 *
 * Lifetime: the table holds one reference on each entry it contains. A
 * reader finds an entry under rcu_read_lock and takes its own reference
 * with refcount_inc_not_zero before rcu_read_unlock; nothing found under
 * RCU is used after the unlock without that reference. Whoever takes an
 * entry out of the table (revalidation, replacement, eviction, unload; all
 * under khttpd_cache_lock) drops the table's reference; the last reference
 * frees the entry after a grace period (call_rcu), as a lookup that has
 * not yet tried to take its reference may still be reading it.
 *
 * Freshness: an entry is re-checked (lookup + getattr) at most once a
 * second; a changed size, mtime, inode or type replaces it.
 * Size: entries are charged (overhead + path + body + gzip copy) against
 * cache_bytes; past it, the least recently used entries are evicted down
 * to 90%. An entry bigger than the whole bound is served once, uncached.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/hashtable.h>
#include <linux/jhash.h>
#include <linux/jiffies.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/stat.h>
#include <linux/string.h>

#include "khttpd.h"

#define KHTTPD_ENTRY_OVERHEAD 256 /* charged per entry besides path, body */
#define KHTTPD_EVICT_BATCH 64

static DEFINE_HASHTABLE(khttpd_cache, 10);
/* Writers of the table, of in_table/charge and of khttpd_cache_total. */
static DEFINE_SPINLOCK(khttpd_cache_lock);
static size_t khttpd_cache_total;
static unsigned int khttpd_cache_entries;
/* One gzip copy is made at a time: each holds the file, the output and the
 * zlib workspace (about 3 x 4 MiB at most), so concurrent first requests
 * must not make one each. */
static DEFINE_MUTEX(khttpd_gzip_lock);

static void khttpd_entry_free_rcu(struct rcu_head *head)
{
	struct khttpd_entry *e = container_of(head, struct khttpd_entry, rcu);

	kvfree(e->gz);
	kvfree(e->body);
	kfree(e);
}

void khttpd_cache_put(struct khttpd_entry *e)
{
	if (refcount_dec_and_test(&e->refs))
		call_rcu(&e->rcu, khttpd_entry_free_rcu);
}

/* Under khttpd_cache_lock: take e out of the table, drop its reference. */
static void khttpd_unpublish_locked(struct khttpd_entry *e)
{
	if (!e->in_table)
		return;
	hash_del_rcu(&e->node);
	WRITE_ONCE(e->in_table, false);
	khttpd_cache_total -= e->charge;
	khttpd_cache_entries--;
	khttpd_cache_put(e);
}

/* Under khttpd_cache_lock: evict the least recently used entries until
 * the total is at most 90% of the bound. */
static void khttpd_evict_locked(void)
{
	size_t target = khttpd_cache_bytes / 10 * 9;
	int pass;

	for (pass = 0; pass < 16 && khttpd_cache_total > target; pass++) {
		struct khttpd_entry *cand[KHTTPD_EVICT_BATCH];
		struct khttpd_entry *e;
		int n = 0, i, bkt;

		hash_for_each(khttpd_cache, bkt, e, node) {
			unsigned long u = READ_ONCE(e->used);

			if (n < KHTTPD_EVICT_BATCH) {
				i = n++;
			} else {
				if (time_before_eq(READ_ONCE(cand[n - 1]->used),
						   u))
					continue;
				i = n - 1; /* drop the youngest candidate */
			}
			/* keep candidates sorted, oldest first */
			while (i > 0 &&
			       time_after(READ_ONCE(cand[i - 1]->used), u)) {
				cand[i] = cand[i - 1];
				i--;
			}
			cand[i] = e;
		}
		if (!n)
			break;
		for (i = 0; i < n && khttpd_cache_total > target; i++) {
			khttpd_unpublish_locked(cand[i]);
			khttpd_count(cache_evictions, 1);
		}
	}
}

static bool khttpd_same_file(const struct khttpd_entry *e,
			     const struct kstat *st)
{
	return e->meta.size == (u64)st->size &&
	       e->meta.mtime == st->mtime.tv_sec &&
	       e->mtime_nsec == st->mtime.tv_nsec && e->ino == st->ino &&
	       e->dev == st->dev && e->meta.is_dir == S_ISDIR(st->mode);
}

static int khttpd_stat(const char *rel, struct path *path, struct kstat *st)
{
	int err = khttpd_lookup_beneath(rel, path);

	if (err < 0)
		return err;
	err = khttpd_getattr(path, st);
	if (err < 0)
		path_put(path);
	return err;
}

/* Build an entry from the file system; refs = 1 (the caller's). */
static int khttpd_load(const char *rel, size_t len, u32 hash,
		       struct khttpd_entry **out)
{
	struct khttpd_entry *e;
	struct path path;
	struct kstat st;
	int err;

	err = khttpd_stat(rel, &path, &st);
	if (err < 0)
		return err;
	if (!S_ISREG(st.mode) && !S_ISDIR(st.mode)) {
		err = -EACCES; /* fifos, devices, sockets: never served */
		goto out_path;
	}
	e = kzalloc(sizeof(*e) + len + 1, GFP_KERNEL);
	if (!e) {
		err = -ENOMEM;
		goto out_path;
	}
	refcount_set(&e->refs, 1);
	e->hash = hash;
	http_resource_init(&e->meta, rel, len, S_ISDIR(st.mode), st.size,
			   st.mtime.tv_sec);
	e->mtime_nsec = st.mtime.tv_nsec;
	e->ino = st.ino;
	e->dev = st.dev;
	e->path_len = len;
	memcpy(e->path, rel, len);
	e->checked = e->used = jiffies;
	e->charge = KHTTPD_ENTRY_OVERHEAD + len;
	if (http_resource_keep_body(&e->meta, khttpd_cache_bytes)) {
		struct file *f = khttpd_open_path(&path);

		if (!IS_ERR(f)) {
			e->body = kvmalloc(e->meta.size, GFP_KERNEL);
			if (e->body &&
			    khttpd_read_whole(f, e->body, e->meta.size) < 0) {
				kvfree(e->body);
				e->body =
					NULL; /* the splice path reports the problem */
			}
			fput(f);
		}
		if (e->body)
			e->charge += e->meta.size;
		e->meta.body_cached = e->body != NULL;
	}
	*out = e;
	err = 0;
out_path:
	path_put(&path);
	return err;
}

/* Is e still what the file system has? Checked at most once a second per
 * entry; one checker wins the timestamp, the others trust the entry. */
static bool khttpd_still_fresh(struct khttpd_entry *e, const char *rel)
{
	unsigned long checked = READ_ONCE(e->checked);
	unsigned long now = jiffies;
	struct path path;
	struct kstat st;
	bool same;

	if (time_before(now, checked + HZ))
		return true;
	if (cmpxchg(&e->checked, checked, now) != checked)
		return true; /* another worker is checking right now */
	if (khttpd_stat(rel, &path, &st) < 0)
		return false;
	same = khttpd_same_file(e, &st);
	path_put(&path);
	return same;
}

int khttpd_cache_get(const char *rel, size_t len, struct khttpd_entry **out)
{
	u32 hash = jhash(rel, len, 0);
	struct khttpd_entry *e, *found = NULL;
	size_t charge;
	int err;

	rcu_read_lock();
	hash_for_each_possible_rcu(khttpd_cache, e, node, hash) {
		if (e->hash == hash && e->path_len == len &&
		    !memcmp(e->path, rel, len) &&
		    refcount_inc_not_zero(&e->refs)) {
			found = e;
			break;
		}
	}
	rcu_read_unlock();

	if (found) {
		if (khttpd_still_fresh(found, rel)) {
			WRITE_ONCE(found->used, jiffies);
			khttpd_count(cache_hits, 1);
			*out = found;
			return 0;
		}
		spin_lock(&khttpd_cache_lock);
		khttpd_unpublish_locked(found);
		spin_unlock(&khttpd_cache_lock);
		khttpd_cache_put(found);
	}
	khttpd_count(cache_misses, 1);

	err = khttpd_load(rel, len, hash, &e);
	if (err < 0)
		return err;
	charge = e->charge;
	if (charge > khttpd_cache_bytes) {
		*out = e; /* too big to cache: used once, freed by the put */
		return 0;
	}

	spin_lock(&khttpd_cache_lock);
	/* A concurrent load of the same path may have won: replace it. */
	hash_for_each_possible(khttpd_cache, found, node, hash) {
		if (found->hash == hash && found->path_len == len &&
		    !memcmp(found->path, rel, len)) {
			khttpd_unpublish_locked(found);
			break;
		}
	}
	refcount_inc(&e->refs); /* the table's */
	WRITE_ONCE(e->in_table, true);
	hash_add_rcu(khttpd_cache, &e->node, hash);
	khttpd_cache_total += charge;
	khttpd_cache_entries++;
	if (khttpd_cache_total > khttpd_cache_bytes)
		khttpd_evict_locked();
	spin_unlock(&khttpd_cache_lock);
	*out = e;
	return 0;
}

const struct khttpd_gz *khttpd_cache_gzip(struct khttpd_entry *e)
{
	struct khttpd_gz *gz = READ_ONCE(e->gz);
	struct khttpd_gz *old;
	char *tmp = NULL;
	const char *src;

	if (gz)
		return gz;
	/* An entry the cache could not keep would be compressed again by every
     * request: send identity instead (never recompress per request). */
	if (!READ_ONCE(e->in_table))
		return NULL;
	mutex_lock(&khttpd_gzip_lock);
	gz = READ_ONCE(e->gz);
	if (gz) {
		mutex_unlock(&khttpd_gzip_lock);
		return gz; /* made while we waited */
	}
	src = e->body;
	if (!src) {
		struct file *f = khttpd_open_beneath(e->path);

		if (IS_ERR(f)) {
			mutex_unlock(&khttpd_gzip_lock);
			return NULL;
		}
		tmp = kvmalloc(e->meta.size, GFP_KERNEL);
		if (!tmp || khttpd_read_whole(f, tmp, e->meta.size) < 0) {
			kvfree(tmp);
			fput(f);
			mutex_unlock(&khttpd_gzip_lock);
			return NULL;
		}
		fput(f);
		src = tmp;
	}
	gz = khttpd_gzip(src, e->meta.size);
	kvfree(tmp);
	if (!gz) {
		mutex_unlock(&khttpd_gzip_lock);
		return NULL;
	}
	old = cmpxchg(&e->gz, NULL, gz);
	mutex_unlock(&khttpd_gzip_lock);
	if (old) {
		kvfree(gz); /* someone else compressed it first */
		return old;
	}
	spin_lock(&khttpd_cache_lock);
	if (e->in_table) {
		size_t more = sizeof(*gz) + gz->len;

		e->charge += more;
		khttpd_cache_total += more;
		if (khttpd_cache_total > khttpd_cache_bytes)
			khttpd_evict_locked();
	}
	spin_unlock(&khttpd_cache_lock);
	return gz;
}

void khttpd_cache_usage(size_t *bytes, size_t *entries)
{
	*bytes = READ_ONCE(khttpd_cache_total);
	*entries = READ_ONCE(khttpd_cache_entries);
}

void khttpd_cache_exit(void)
{
	struct khttpd_entry *e;
	struct hlist_node *tmp;
	int bkt;

	spin_lock(&khttpd_cache_lock);
	hash_for_each_safe(khttpd_cache, bkt, tmp, e, node)
		khttpd_unpublish_locked(e);
	spin_unlock(&khttpd_cache_lock);
	/* Every call_rcu above (and earlier ones) has run before we return. */
	rcu_barrier();
}
