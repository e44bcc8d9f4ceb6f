// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * cache.c — the content cache: a path table (one entry per path: what the
 * planner reads) over file objects keyed by (device, inode) and version
 * (the body of small files, the gzip copy), both RCU hash tables. Aliases
 * of one file (a symlinked directory) have their own path entries and
 * share one object, so its body and gzip copy are stored once.
 *
 * Lifetime: the path table holds one reference on each entry in it; an
 * entry holds one on its object; a gzip build holds one on the object it
 * compresses. A reader finds an entry or object under rcu_read_lock and
 * takes its own reference with refcount_inc_not_zero before
 * rcu_read_unlock. The last reference of an object takes it out of the
 * object table, uncharges it and frees it after a grace period; an entry
 * likewise. So what a slow reader still holds stays counted — apart, as
 * held bytes: an entry out of the table (evicted, replaced, or too big to
 * keep) moves its bytes (its object's too when it is the only holder) into
 * the held bytes of core's counters (struct http_cache_acct, atomics
 * outside the locks) until its last put. Eviction frees only what is in
 * the table, so it aims at total minus held: bytes it cannot free never
 * make an insert empty the whole LRU list.
 *
 * Locks: khttpd_cache_lock guards the path table, in_table and the LRU
 * list; khttpd_obj_lock the object table. They are never nested: entries
 * taken out under khttpd_cache_lock are put after it is dropped.
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
 * One file, over 500 lines, on purpose: both tables, the LRU list and the
 * gzip copies share the references, the two locks and the one byte budget
 * described above; split, each part would reach into the others' state.
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
static DEFINE_HASHTABLE(khttpd_objs, 10);
static DEFINE_SPINLOCK(khttpd_obj_lock);
static const struct http_cache_ops khttpd_cache_ops;
/* Core's LRU list and counters, and the primitives its cold paths use. */
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

	kvfree(o->c.gz);
	kvfree(o->c.names);
	kvfree(o->c.body);
	kfree(o);
}

static void khttpd_obj_put(struct khttpd_obj *o)
{
	if (!refcount_dec_and_lock(&o->c.refs, &khttpd_obj_lock))
		return;
	if (o->hashed)
		hash_del_rcu(&o->node);
	spin_unlock(&khttpd_obj_lock);
	http_cache_acct_release(&khttpd_c.acct, atomic_long_read(&o->c.charge),
				0, 1);
	call_rcu(&o->rcu, khttpd_obj_free_rcu);
}

static void khttpd_entry_free_rcu(struct rcu_head *head)
{
	kfree(container_of(head, struct khttpd_entry, rcu));
}

void khttpd_cache_put(struct khttpd_entry *e)
{
	if (!http_ref_put(&e->c.refs))
		return;
	/* No one can take a reference any more: the object and the charge go
	 * now, the memory after the lookups that may still read it.
	 */
	http_cache_acct_release(&khttpd_c.acct, e->c.charge, e->c.held, 0);
	khttpd_obj_put(khttpd_obj_of(e));
	call_rcu(&e->rcu, khttpd_entry_free_rcu);
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

static void khttpd_put_node(struct http_lru_node *n)
{
	khttpd_cache_put(container_of(n, struct khttpd_entry, c.lru));
}

static void khttpd_evicted(void)
{
	khttpd_count(cache_evictions, 1);
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

/* The object table's live object for this version, referenced, or NULL. */
static struct khttpd_obj *khttpd_obj_find(const struct http_file_id *id,
					  u32 hash)
{
	struct khttpd_obj *o;

	hash_for_each_possible_rcu(khttpd_objs, o, node, hash) {
		if (o->hash == hash && http_file_id_same(&o->c.id, id) &&
		    refcount_inc_not_zero(&o->c.refs))
			return o;
	}
	return NULL;
}

/* The object for version id of the file at path: the table's if it has
 * this version, else a new one with its body read when keep; referenced.
 */
static struct khttpd_obj *khttpd_obj_get(const struct path *path,
					 const struct http_file_id *id,
					 bool keep)
{
	u32 hash = http_file_id_hash(id);
	struct khttpd_obj *o, *won;
	char *body = NULL;

	rcu_read_lock();
	o = khttpd_obj_find(id, hash);
	rcu_read_unlock();
	if (o)
		return o;

	o = kzalloc(sizeof(*o), GFP_KERNEL);
	if (!o)
		return NULL;
	if (keep) {
		struct file *f = khttpd_open_path(path);

		if (!IS_ERR(f)) {
			body = kvmalloc(id->size, GFP_KERNEL);
			if (body && khttpd_read_whole(f, body, id->size) < 0) {
				kvfree(body);
				body = NULL; /* the splice path reports it */
			}
			fput(f);
		}
	}
	o->hash = hash;
	http_cache_obj_made(&khttpd_c, &o->c, id, body);

	spin_lock(&khttpd_obj_lock);
	rcu_read_lock();
	/* A concurrent load may have published this version meanwhile. Under
	 * the lock no object in the table has dropped its last reference:
	 * that happens under the lock, together with its removal.
	 */
	won = khttpd_obj_find(id, hash);
	if (!won) {
		o->hashed = true;
		hash_add_rcu(khttpd_objs, &o->node, hash);
	}
	rcu_read_unlock();
	spin_unlock(&khttpd_obj_lock);
	if (!won)
		return o;
	http_cache_obj_lost(&khttpd_c, &o->c);
	kvfree(body);
	kfree(o); /* never published */
	return won;
}

static int khttpd_stat(const struct khttpd_site *site, const char *rel,
		       struct path *path, struct kstat *st)
{
	int err = khttpd_lookup_beneath(site, rel, path);

	if (err < 0)
		return err;
	err = khttpd_getattr(path, st);
	if (err < 0)
		path_put(path);
	return err;
}

/* Build an entry from the file system; refs = 1 (the caller's). */
static int khttpd_load(const struct khttpd_site *site, const char *rel,
		       size_t len, u32 hash, struct khttpd_entry **out)
{
	struct http_file_id id;
	struct khttpd_entry *e;
	struct khttpd_obj *o;
	struct path path;
	struct kstat st;
	int err;

	err = khttpd_stat(site, rel, &path, &st);
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
	khttpd_file_id(&st, &id);
	e->hash = hash;
	e->site = site;
	http_cache_entry_made(&e->c, &e->meta, rel, len, &id, khttpd_now_ms());
	e->path_len = len;
	memcpy(e->path, rel, len);
	o = khttpd_obj_get(&path, &id,
			   http_resource_keep_body(&e->meta,
						   khttpd_cache_bytes));
	if (!o) {
		kfree(e);
		err = -ENOMEM;
		goto out_path;
	}
	http_cache_entry_holds(&khttpd_c, &e->c, &e->meta, &o->c, len, 0);
	e->body = o->c.body;
	*out = e;
	err = 0;
out_path:
	path_put(&path);
	return err;
}

/* Is e still what the file system has? Checked at most once per
 * HTTP_SERVER_REVALIDATE_MS per entry; one checker wins the timestamp, the
 * others trust the entry.
 */
static bool khttpd_still_fresh(struct khttpd_entry *e, const char *rel)
{
	struct path path;
	struct kstat st;
	bool same;

	if (!http_cache_claim(&e->c.checked, khttpd_now_ms(),
			      HTTP_SERVER_REVALIDATE_MS))
		return true;
	if (khttpd_stat(e->site, rel, &path, &st) < 0)
		return false;
	same = khttpd_obj_is(e->c.obj, &st);
	path_put(&path);
	return same;
}

/* One path of one site: two hosts' "/index.html" are two entries. */
static bool khttpd_entry_is(const struct khttpd_entry *e,
			    const struct khttpd_site *site, const char *rel,
			    size_t len, u32 hash)
{
	return e->hash == hash && e->site == site && e->path_len == len &&
	       !memcmp(e->path, rel, len);
}

int khttpd_cache_get(const struct khttpd_site *site, const char *rel,
		     size_t len, struct khttpd_entry **out)
{
	u32 hash = jhash(rel, len, site->id);
	struct khttpd_entry *e, *found = NULL;
	int err;

	rcu_read_lock();
	hash_for_each_possible_rcu(khttpd_cache, e, node, hash) {
		if (khttpd_entry_is(e, site, rel, len, hash) &&
		    http_ref_get_unless_zero(&e->c.refs)) {
			found = e;
			break;
		}
	}
	rcu_read_unlock();

	if (found) {
		if (khttpd_still_fresh(found, rel)) {
			http_cache_touch(&khttpd_c, &found->c, khttpd_now_ms());
			khttpd_count(cache_hits, 1);
			*out = found;
			return 0;
		}
		http_cache_drop(&khttpd_c, &found->c.lru);
	}
	khttpd_count(cache_misses, 1);

	err = khttpd_load(site, rel, len, hash, &e);
	if (err < 0)
		return err;
	/* into the table; or too big to keep: used once, freed by the put */
	http_cache_publish(&khttpd_c, &e->c, khttpd_cache_bytes);
	*out = e;
	return 0;
}

bool khttpd_cache_set_names(struct khttpd_entry *e, struct http_name_table *t)
{
	return http_cache_names_publish(&khttpd_c, e->c.obj, t, t->bytes,
					khttpd_cache_bytes);
}

struct khttpd_gzip_job {
	struct work_struct work;
	struct khttpd_obj *obj;
	const struct khttpd_site *site; /* path is beneath its root */
	char path[];
};

/* The whole file as the object knows it, into a fresh buffer, or NULL. */
static char *khttpd_gzip_source(const struct khttpd_site *site, const char *rel,
				const struct khttpd_obj *o)
{
	struct file *f = khttpd_open_beneath(site, rel);
	struct kstat st;
	char *buf = NULL;

	if (IS_ERR(f))
		return NULL;
	if (!khttpd_getattr(&f->f_path, &st) && khttpd_obj_is(&o->c, &st)) {
		buf = kvmalloc(o->c.id.size, GFP_KERNEL);
		if (buf && khttpd_read_whole(f, buf, o->c.id.size) < 0) {
			kvfree(buf);
			buf = NULL;
		}
	}
	fput(f);
	return buf;
}

static void khttpd_gzip_work(struct work_struct *work)
{
	struct khttpd_gzip_job *job =
		container_of(work, struct khttpd_gzip_job, work);
	struct khttpd_obj *o = job->obj;
	struct http_gz *gz = NULL;
	char *tmp = NULL;

	if (!READ_ONCE(khttpd_gzip_stop)) {
		const char *src = o->c.body;

		if (!src) {
			tmp = khttpd_gzip_source(job->site, job->path, o);
			src = tmp;
		}
		/* A file that changed or cannot be read: identity for this
		 * version (an empty copy marked worthless), no build again.
		 */
		gz = src ? khttpd_gzip(src, o->c.id.size, &khttpd_gzip_stop) :
			   kvzalloc(sizeof(*gz), GFP_KERNEL);
		if (gz && !src)
			gz->worthless = true;
		kvfree(tmp);
	}
	http_cache_gz_built(&khttpd_c, &o->c, gz, khttpd_cache_bytes);
	khttpd_obj_put(o);
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
	refcount_inc(&c->obj->refs); /* the build's */
	job->obj = khttpd_obj_of(e);
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

static const struct http_cache_gz_ops khttpd_gz_ops = {
	.gzip = khttpd_gzip_now,
	.queue = khttpd_gzip_queue,
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
	.put = khttpd_put_node,
	.evicted = khttpd_evicted,
	.insert = khttpd_insert,
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
