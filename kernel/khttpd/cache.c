// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * cache.c — the content cache: a path table (one entry per path: what the
 * planner reads) over file objects keyed by (device, inode) and version
 * (the body of small files, the gzip copy): an RCU hash table of paths and
 * core's table of objects (struct http_cache, under khttpd_cache_lock,
 * looked up by a load only). Aliases of one file (a symlinked directory)
 * have their own path entries and share one object, so its body and gzip
 * copy are stored once.
 *
 * Lifetime: the path table holds one reference on each entry in it; an
 * entry holds one on its object; a gzip build holds one on the object it
 * compresses. A reader finds an entry under rcu_read_lock and takes its
 * own reference with refcount_inc_not_zero before rcu_read_unlock; a load
 * finds an object under khttpd_cache_lock. The last reference of an
 * object, dropped under that lock, takes it out of the object table,
 * uncharges it and frees it after a grace period; an entry likewise. So
 * what a slow reader still holds stays counted — apart, as held bytes: an
 * entry out of the table (evicted, replaced, or too big to keep) moves its
 * bytes (its object's too when it is the only holder) into the held bytes
 * of core's counters (struct http_cache_acct, atomics outside the lock)
 * until its last put. Eviction frees only what is in the table, so it aims
 * at total minus held: bytes it cannot free never make an insert empty the
 * whole LRU list.
 *
 * Lock: khttpd_cache_lock guards the path table, in_table, the LRU list
 * and core's object table. Entries taken out under it are put after it is
 * dropped (their objects' last puts take it again).
 *
 * Freshness: an entry is re-checked (lookup + getattr) at most once per
 * HTTP_SERVER_REVALIDATE_MS; a changed size, mtime (with nanoseconds),
 * inode, device or type replaces it.
 *
 * Size: entries and objects are charged against cache_bytes; past it,
 * entries leave from the tail of core's LRU list (struct http_cache, the
 * user server's too: a hit moves its entry to the front, at most once per
 * HTTP_SERVER_LRU_TOUCH_MS; core's eviction takes the tail through
 * khttpd_cache_ops) until the bytes in the table are at most 90% of the
 * bound: O(1) per entry evicted. An entry bigger than the whole bound is
 * served once, uncached.
 *
 * gzip: a copy is built off the request path by the khttpd_gzip workqueue
 * (at most HTTP_SERVER_GZIP_BUILDERS at once and one per two CPUs, at most
 * HTTP_SERVER_GZIP_QUEUE queued, one build per object: its building bit)
 * and published with smp_store_release; until then requests get identity.
 * Only a small body already in memory is compressed on the spot; an entry
 * out of the table gets no copy (core's http_cache_gz_make decides).
 *
 * The lookup-or-load, the puts and a queued build are core's (http_cache.h);
 * here: the primitives they run on (khttpd_cache_ops) and a hit's lookup.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/hashtable.h>
#include <linux/jhash.h>
#include <linux/jiffies.h>
#include <linux/mm.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/stat.h>
#include <linux/string.h>
#include <linux/workqueue.h>

#include "khttpd.h"

static DEFINE_HASHTABLE(khttpd_cache, 10);
static DEFINE_SPINLOCK(khttpd_cache_lock);
static const struct http_cache_ops khttpd_cache_ops;
/* Core's LRU list, counters and object table, and the primitives its
 * cold paths use.
 */
static struct http_cache khttpd_c =
	HTTP_CACHE_INIT(khttpd_c, &khttpd_cache_ops);

static struct workqueue_struct *khttpd_gzip_wq;
static atomic_t khttpd_gzip_jobs = ATOMIC_INIT(0); /* queued or running */
static bool khttpd_gzip_stop; /* unloading: builds give up */

/* The clock of the stamps core compares (http_cache_due). */
static u64 khttpd_now_ms(void)
{
	return jiffies64_to_msecs(get_jiffies_64());
}

static void khttpd_obj_free_rcu(struct rcu_head *head)
{
	struct khttpd_obj *o = container_of(head, struct khttpd_obj, rcu);

	http_cache_obj_free(&khttpd_c, &o->c);
	kfree(o);
}

static void khttpd_obj_free(struct http_cache_obj *c)
{
	call_rcu(&container_of(c, struct khttpd_obj, c)->rcu,
		 khttpd_obj_free_rcu);
}

static void khttpd_entry_free(struct http_cache_entry *c)
{
	struct khttpd_entry *e = container_of(c, struct khttpd_entry, c);

	kfree_rcu(e, rcu);
}

void khttpd_cache_put(struct khttpd_entry *e)
{
	http_cache_put(&khttpd_c, &e->c);
}

/* Under khttpd_cache_lock: c out of the path table (core's
 * http_cache_unpublish_locked does the rest).
 */
static void khttpd_remove(struct http_cache_entry *c)
{
	hash_del_rcu(&container_of(c, struct khttpd_entry, c)->node);
}

static void khttpd_cache_lock_table(void)
{
	spin_lock(&khttpd_cache_lock);
}

static void khttpd_cache_unlock_table(void)
{
	spin_unlock(&khttpd_cache_lock);
}

static void khttpd_evicted(void)
{
	khttpd_count(cache_evictions, 1);
}

void *khttpd_alloc(size_t size)
{
	return kvmalloc(size, GFP_KERNEL);
}

void khttpd_free(void *p)
{
	kvfree(p);
}

static void khttpd_file_id(const struct kstat *st, struct http_file_id *id)
{
	*id = (struct http_file_id){
		.dev = st->dev,
		.ino = st->ino,
		.size = st->size,
		.mtime = st->mtime.tv_sec,
		.mtime_nsec = st->mtime.tv_nsec,
		.is_dir = S_ISDIR(st->mode),
	};
}

bool khttpd_obj_is(const struct http_cache_obj *o, const struct kstat *st)
{
	struct http_file_id id;

	khttpd_file_id(st, &id);
	return http_file_id_same(&o->id, &id);
}

static struct http_cache_obj *khttpd_obj_new(struct http_cache_file *f,
					     bool body)
{
	struct khttpd_obj *o = kzalloc(sizeof(*o), GFP_KERNEL);

	return o ? &o->c : NULL;
}

/* The path a stat found, held in core's struct http_cache_file. */
static struct path khttpd_path_of(const struct http_cache_file *f)
{
	return (struct path){ .mnt = f->h.p[0], .dentry = f->h.p[1] };
}

static int khttpd_stat(const void *site, const char *rel,
		       struct http_cache_file *f)
{
	struct path path;
	struct kstat st;
	int err = khttpd_lookup_beneath(site, rel, &path);

	if (err < 0)
		return err;
	err = khttpd_getattr(&path, &st);
	if (err < 0) {
		path_put(&path);
		return err;
	}
	khttpd_file_id(&st, &f->id);
	f->regular = S_ISREG(st.mode);
	f->h.p[0] = path.mnt;
	f->h.p[1] = path.dentry;
	return 0;
}

static int khttpd_read(struct http_cache_file *f, char *buf, size_t len)
{
	struct path path = khttpd_path_of(f);
	struct file *file = khttpd_open_path(&path);
	int err;

	if (IS_ERR(file))
		return PTR_ERR(file);
	err = khttpd_read_whole(file, buf, len);
	fput(file);
	return err;
}

static void khttpd_close(struct http_cache_file *f)
{
	struct path path = khttpd_path_of(f);

	path_put(&path);
}

/* One path of one site: two hosts' "/index.html" are two entries. */
static bool khttpd_entry_is(const struct khttpd_entry *e,
			    const struct khttpd_site *site, const char *rel,
			    size_t len, u32 hash)
{
	return e->hash == hash && e->site == site && e->path_len == len &&
	       !memcmp(e->path, rel, len);
}

static struct http_cache_entry *khttpd_entry_new(const struct http_cache_key *k)
{
	struct khttpd_entry *e = kzalloc(sizeof(*e) + k->len + 1, GFP_KERNEL);

	if (!e)
		return NULL;
	e->hash = k->hash;
	e->site = k->tree;
	e->path_len = k->len;
	memcpy(e->path, k->rel, k->len);
	return &e->c;
}

/* The path table's entry of k, referenced, or NULL. */
static struct http_cache_entry *khttpd_find(const struct http_cache_key *k)
{
	u32 hash = k->hash;
	struct khttpd_entry *e;

	rcu_read_lock();
	hash_for_each_possible_rcu(khttpd_cache, e, node, hash) {
		if (khttpd_entry_is(e, k->tree, k->rel, k->len, hash) &&
		    http_ref_get_unless_zero(&e->c.refs)) {
			rcu_read_unlock();
			return &e->c;
		}
	}
	rcu_read_unlock();
	return NULL;
}

int khttpd_cache_get(const struct khttpd_site *site, const char *rel,
		     size_t len, struct khttpd_entry **out)
{
	struct http_cache_key k = {
		.tree = site,
		.rel = rel,
		.len = len,
		.hash = jhash(rel, len, site->id),
	};
	struct http_cache_entry *e;
	int r = http_cache_get(&khttpd_c, &k, khttpd_find(&k), khttpd_now_ms(),
			       khttpd_cache_bytes, &e);

	if (r > 0)
		khttpd_count(cache_hits, 1);
	else
		khttpd_count(cache_misses, 1);
	if (r < 0)
		return r;
	*out = container_of(e, struct khttpd_entry, c);
	return 0;
}

bool khttpd_cache_set_names(struct khttpd_entry *e, struct http_name_table *t)
{
	return http_cache_names_publish(&khttpd_c, e->c.obj, t, t->bytes,
					khttpd_cache_bytes);
}

struct khttpd_gzip_job {
	struct work_struct work;
	struct http_cache_obj *obj;
	const struct khttpd_site *site; /* path is beneath its root */
	char path[];
};

static const struct http_cache_gz_ops khttpd_gz_ops;

static void khttpd_gzip_work(struct work_struct *work)
{
	struct khttpd_gzip_job *job =
		container_of(work, struct khttpd_gzip_job, work);

	http_cache_gz_build(&khttpd_c, job->obj, job->site, job->path,
			    &khttpd_gz_ops, khttpd_cache_bytes);
	kfree(job);
	atomic_dec(&khttpd_gzip_jobs);
}

/* Queue o's build; false if the queue is full or memory is short. */
static bool khttpd_gzip_queue(struct http_cache_entry *c)
{
	struct khttpd_entry *e = container_of(c, struct khttpd_entry, c);
	struct khttpd_gzip_job *job;

	if (atomic_inc_return(&khttpd_gzip_jobs) > HTTP_SERVER_GZIP_QUEUE)
		goto out_full;
	job = kmalloc(sizeof(*job) + e->path_len + 1, GFP_KERNEL);
	if (!job)
		goto out_full;
	INIT_WORK(&job->work, khttpd_gzip_work);
	http_ref_get(&c->obj->refs); /* the build's */
	job->obj = c->obj;
	job->site = e->site;
	memcpy(job->path, e->path, e->path_len + 1);
	queue_work(khttpd_gzip_wq, &job->work);
	return true;
out_full:
	atomic_dec(&khttpd_gzip_jobs);
	return false;
}

static struct http_gz *khttpd_gzip_now(const char *src, size_t len)
{
	return khttpd_gzip(src, len, NULL);
}

/* Off the request path: it gives up at its next slice when unloading. */
static struct http_gz *khttpd_gzip_build(const char *src, size_t len)
{
	return khttpd_gzip(src, len, &khttpd_gzip_stop);
}

static bool khttpd_gzip_stopping(void)
{
	return READ_ONCE(khttpd_gzip_stop);
}

static const struct http_cache_gz_ops khttpd_gz_ops = {
	.gzip = khttpd_gzip_now,
	.queue = khttpd_gzip_queue,
	.build = khttpd_gzip_build,
	.stopping = khttpd_gzip_stopping,
};

const struct http_gz *khttpd_cache_gzip(struct khttpd_entry *e)
{
	return http_cache_gz(&khttpd_c, &e->c, &khttpd_gz_ops,
			     khttpd_cache_bytes);
}

/* Under khttpd_cache_lock: c into the path table, replacing the entry of
 * its path a concurrent load may have put there first.
 */
static void khttpd_insert(struct http_cache_entry *c,
			  struct http_lru_node **gone)
{
	struct khttpd_entry *e = container_of(c, struct khttpd_entry, c), *old;

	hash_for_each_possible(khttpd_cache, old, node, e->hash) {
		if (khttpd_entry_is(old, e->site, e->path, e->path_len,
				    e->hash)) {
			http_cache_unpublish_locked(&khttpd_c, &old->c, gone);
			break;
		}
	}
	hash_add_rcu(khttpd_cache, &e->node, e->hash);
}

static const struct http_cache_ops khttpd_cache_ops = {
	.lock = khttpd_cache_lock_table,
	.unlock = khttpd_cache_unlock_table,
	.remove = khttpd_remove,
	.insert = khttpd_insert,
	.entry_new = khttpd_entry_new,
	.entry_free = khttpd_entry_free,
	.evicted = khttpd_evicted,
	.obj_new = khttpd_obj_new,
	.obj_free = khttpd_obj_free,
	.stat = khttpd_stat,
	.read = khttpd_read,
	.close = khttpd_close,
	.alloc = khttpd_alloc,
	.free = khttpd_free,
};

void khttpd_cache_usage(size_t *bytes, size_t *entries)
{
	http_cache_acct_usage(&khttpd_c.acct, bytes, entries);
}

int khttpd_cache_init(void)
{
	int builders = clamp_t(int, num_online_cpus() / 2, 1,
			       HTTP_SERVER_GZIP_BUILDERS);

	khttpd_gzip_wq = alloc_workqueue("khttpd_gzip", WQ_UNBOUND, builders);
	return khttpd_gzip_wq ? 0 : -ENOMEM;
}

void khttpd_cache_exit(void)
{
	struct khttpd_entry *e;
	struct hlist_node *tmp;
	struct http_lru_node *gone = NULL;
	int bkt;

	/* Queued builds give up at once, running ones at their next slice. */
	WRITE_ONCE(khttpd_gzip_stop, true);
	destroy_workqueue(khttpd_gzip_wq);

	spin_lock(&khttpd_cache_lock);
	hash_for_each_safe(khttpd_cache, bkt, tmp, e, node)
		http_cache_unpublish_locked(&khttpd_c, &e->c, &gone);
	spin_unlock(&khttpd_cache_lock);
	http_cache_put_gone(&khttpd_c, &gone);
	/* Every call_rcu above (and earlier ones) has run before we return. */
	rcu_barrier();
}
