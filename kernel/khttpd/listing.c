// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * listing.c — a directory listing, sorted by name, streamed piece by piece
 * from a name table every listing of that directory shares.
 *
 * The table: iterate_dir() with a dir_context actor collects the names
 * core says are listed (no dotfiles unless allowed) into core's name
 * table, bounded by HTTP_SERVER_LISTING_MAX_ENTRIES names and
 * HTTP_SERVER_LISTING_MAX_NAME_BYTES bytes (past them the listing says it
 * is truncated); core sorts them and the result is packed into one
 * immutable struct http_name_table. It is published on the directory's cache
 * object (one version of the directory: device, inode, size, mtime), so
 * it is built once per version, shared by every reader through the cache
 * entry each holds, charged against cache_bytes and freed with the object.
 * Builds of one directory wait for each other (a hashed mutex), so a crowd
 * asking for a new directory builds it once.
 *
 * Each request still opens the directory (the permission check, and its
 * version compared with the object's) and looks each row's metadata up
 * beneath the root as the server's user while it renders, into a buffer of
 * KHTTPD_LISTING_MEM bytes. Each full buffer leaves as one chunk
 * (HTTP/1.1) or as raw bytes before a close (HTTP/1.0 has no chunked
 * coding), as the plan's head says. A piece is rendered only once the
 * previous one is out, so a slow client holds no worker and only its own
 * small buffer.
 *
 * Budget: at most listing_max listings in flight, and at most
 * listing_bytes bytes of per-connection buffers and tables being built (or
 * kept privately by a listing whose directory changed under it); a listing
 * beyond either is refused (respond.c answers 503 with Retry-After).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/mutex.h>
#include <linux/namei.h>
#include <linux/slab.h>
#include <linux/stat.h>
#include <linux/string.h>

#include "khttpd.h"

/*
 * The per-connection piece buffer: one kmalloc bucket, its data part
 * between the chunk header's room and the chunk end's; a row always fits
 * an empty one (HTTP_LISTING_ENTRY_MAX).
 */
#define KHTTPD_LISTING_TAIL (2 + sizeof(HTTP_LAST_CHUNK) - 1)
#define KHTTPD_LISTING_DATA HTTP_SERVER_LISTING_BUF
static_assert(HTTP_CHUNK_HEADER_MAX + KHTTPD_LISTING_DATA +
		      KHTTPD_LISTING_TAIL <=
	      KHTTPD_LISTING_MEM);
static_assert(KHTTPD_LISTING_DATA >= HTTP_LISTING_ENTRY_MAX);

/* Listings in flight and the bytes charged against listing_bytes. */
static atomic_t khttpd_listings_now = ATOMIC_INIT(0);
static atomic_long_t khttpd_listing_total = ATOMIC_LONG_INIT(0);

/* Builds of one directory (one object) wait for each other. */
#define KHTTPD_BUILD_LOCKS 8
#define KHTTPD_BUILD_LOCK(i) __MUTEX_INITIALIZER(khttpd_build_locks[i])
static struct mutex khttpd_build_locks[KHTTPD_BUILD_LOCKS] = {
	KHTTPD_BUILD_LOCK(0), KHTTPD_BUILD_LOCK(1), KHTTPD_BUILD_LOCK(2),
	KHTTPD_BUILD_LOCK(3), KHTTPD_BUILD_LOCK(4), KHTTPD_BUILD_LOCK(5),
	KHTTPD_BUILD_LOCK(6), KHTTPD_BUILD_LOCK(7),
};

struct khttpd_listing {
	const struct khttpd_site *site; /* rel is beneath its root */
	struct khttpd_entry *ref; /* the directory's entry: keeps its table */
	const struct http_name_table *names; /* ref's object's, or own */
	struct http_name_table *own; /* a table only this listing reads */
	size_t charge; /* bytes counted against listing_bytes */
	bool chunked;
	bool truncated; /* the last row saying so is still to come */
	bool began; /* the opening is rendered */
	bool finished; /* the last piece is queued */
	bool reset_pending; /* the previous piece is out: reuse the buffer */
	struct http_listing_cursor cursor;
	u32 next; /* the next row to render */
	size_t dir_len; /* of rel's "dir/" part; 0 for the root */
	char *mem; /* [chunk header room][data][CRLF + last chunk room] */
	struct http_buf b;
	char rel[]; /* "dir/" + a name: the row's path beneath the root */
};

/* Charge n more bytes against listing_bytes: false (nothing charged) when
 * that would pass the budget.
 */
static bool khttpd_listing_charge(size_t n)
{
	long total = atomic_long_add_return(n, &khttpd_listing_total);

	if (khttpd_listing_bytes && total > (long)khttpd_listing_bytes) {
		atomic_long_sub(n, &khttpd_listing_total);
		return false;
	}
	return true;
}

static void khttpd_listing_uncharge(size_t n)
{
	atomic_long_sub(n, &khttpd_listing_total);
}

void khttpd_listing_usage(size_t *bytes, size_t *active)
{
	long b = atomic_long_read(&khttpd_listing_total);
	int a = atomic_read(&khttpd_listings_now);

	*bytes = b > 0 ? b : 0;
	*active = a > 0 ? a : 0;
}

void khttpd_listing_free(struct khttpd_listing *l)
{
	if (l->ref)
		khttpd_cache_put(l->ref);
	kvfree(l->own);
	kfree(l->mem);
	khttpd_listing_uncharge(l->charge);
	kfree(l);
	atomic_dec(&khttpd_listings_now);
}

/* ---- building a table ---- */

struct khttpd_build {
	struct dir_context ctx;
	struct http_names n;
	const char *dir; /* for http_listing_visible */
	size_t dir_len;
	bool dotfiles;
	bool full; /* the actor stopped: no room for the next name */
	size_t need; /* bytes the name that did not fit needs */
};

static bool khttpd_build_actor(struct dir_context *ctx, const char *name,
			       int namelen, loff_t off, u64 ino,
			       unsigned int d_type)
{
	struct khttpd_build *b = container_of(ctx, struct khttpd_build, ctx);

	if (!http_listing_visible(b->dir, b->dir_len, name, namelen,
				  b->dotfiles))
		return true;
	if (http_names_add(&b->n, name, namelen) == 0)
		return true;
	/* Full: stop here; iterate_dir resumes at this entry next time. */
	b->full = true;
	b->need = namelen + 1;
	return false;
}

/* The memory of a name list (core's struct http_names_mem): charged. */
static const struct http_names_mem khttpd_names_mem = {
	.charge = khttpd_listing_charge,
	.uncharge = khttpd_listing_uncharge,
	.alloc = khttpd_alloc,
	.free = khttpd_free,
};

/*
 * Read the directory dir (up to core's bounds), sort its names and pack
 * them into one table of exactly their size, charged against
 * listing_bytes (the caller moves the charge when it publishes it).
 */
static struct http_name_table *khttpd_build(struct file *dir, const char *rel,
					    size_t rel_len, bool root,
					    bool dotfiles)
{
	struct khttpd_build b = {
		.ctx.actor = khttpd_build_actor,
		.dir = root ? "." : rel,
		.dir_len = root ? 1 : rel_len,
		.dotfiles = dotfiles,
	};
	struct http_name_table *t = NULL;
	bool truncated = false;
	int err;

	err = http_names_start(&b.n, &khttpd_names_mem);
	while (!err) {
		b.full = false;
		err = khttpd_iterate_dir(dir, &b.ctx);
		if (err < 0 || !b.full)
			break;
		err = http_names_grow(&b.n, b.need, &khttpd_names_mem);
		if (err == -ENOSPC) {
			truncated = true;
			err = 0;
			break;
		}
	}
	if (!err) {
		http_names_sort(&b.n);
		t = http_names_get(&khttpd_names_mem,
				   http_names_table_size(&b.n), &err);
	}
	if (t)
		http_names_pack(&b.n, t, truncated, root, dotfiles);
	http_names_free(&b.n, &khttpd_names_mem);
	return err < 0 ? ERR_PTR(err) : t;
}

/* Is the directory as opened (st) the version o describes? */
static bool khttpd_obj_holds(const struct http_cache_obj *o,
			     const struct kstat *st)
{
	return o->id.is_dir && khttpd_obj_is(o, st);
}

/*
 * The table for l: the one published on the directory's object when it is
 * this version's, else built (once per version: builders of one object
 * wait for each other) and published; built for l alone when the
 * directory is not what the cache knows (changed, or not cacheable).
 */
static int khttpd_listing_table(struct khttpd_listing *l, struct file *dir,
				const char *rel, size_t rel_len, bool dotfiles)
{
	bool root = l->dir_len == 0;
	struct http_name_table *t;
	struct http_cache_obj *o;
	struct mutex *lock; /* the one this object's builders share */
	struct kstat st;
	int err;

	err = khttpd_getattr(&dir->f_path, &st);
	if (err < 0)
		return err;
	if (khttpd_cache_get(l->site, rel, rel_len, &l->ref) < 0)
		l->ref = NULL;
	if (!l->ref || !khttpd_obj_holds(l->ref->c.obj, &st)) {
		/* not the cache's version: a table of its own */
		t = khttpd_build(dir, rel, rel_len, root, dotfiles);
		if (IS_ERR(t))
			return PTR_ERR(t);
		l->own = t;
		l->names = t;
		l->charge += t->bytes; /* stays charged while it lives */
		return 0;
	}
	o = l->ref->c.obj;
	/* Pairs with the claim in http_cache_names_publish(). */
	l->names = smp_load_acquire(&o->names);
	if (http_names_table_fits(l->names, root, dotfiles))
		return 0;
	lock = &khttpd_build_locks[(u32)http_file_id_hash(&o->id) %
				   KHTTPD_BUILD_LOCKS];
	if (mutex_lock_killable(lock))
		return -EINTR;
	/* Again under the lock: the builder we waited for published it. */
	l->names = smp_load_acquire(&o->names);
	if (http_names_table_fits(l->names, root, dotfiles)) {
		mutex_unlock(lock);
		return 0;
	}
	t = khttpd_build(dir, rel, rel_len, root, dotfiles);
	if (IS_ERR(t)) {
		mutex_unlock(lock);
		return PTR_ERR(t);
	}
	if (!l->names && khttpd_cache_set_names(l->ref, t)) {
		/* the cache holds it now, and counts it */
		khttpd_listing_uncharge(t->bytes);
		l->names = t;
	} else {
		/* an alias of another kind (root, dotfiles) has the slot */
		l->own = t;
		l->names = t;
		l->charge += t->bytes;
	}
	mutex_unlock(lock);
	return 0;
}

/* ---- streaming ---- */

/* Queue the buffer as the next piece of the body. */
static void khttpd_listing_emit(struct khttpd_conn *conn,
				struct khttpd_listing *l, bool last)
{
	char *start = l->b.data;
	size_t n = l->b.len;

	if (l->chunked) {
		if (n) {
			char hdr[HTTP_CHUNK_HEADER_MAX];
			size_t hl = http_chunk_header(hdr, n);

			start -= hl;
			memcpy(start, hdr, hl);
			memcpy(l->b.data + n, HTTP_CHUNK_END, 2);
			n += hl + 2;
		}
		if (last) {
			memcpy(start + n, HTTP_LAST_CHUNK,
			       sizeof(HTTP_LAST_CHUNK) - 1);
			n += sizeof(HTTP_LAST_CHUNK) - 1;
		}
	}
	conn->req->out.mem = start;
	conn->req->out.mem_off = 0;
	conn->req->out.mem_len = n;
	conn->req->out.listing_last = last;
	l->reset_pending = true;
	l->finished = last;
}

/* The next row into the buffer: 0 (rendered, or skipped when its
 * metadata cannot be read), or -1 when the buffer is full.
 */
static int khttpd_listing_row(struct khttpd_listing *l, const char *name)
{
	size_t len = strlen(name);
	struct kstat st;

	if (len > NAME_MAX) /* no room in rel: no file system has one */
		return 0;
	memcpy(l->rel + l->dir_len, name, len + 1);
	if (khttpd_stat_beneath(l->site, l->rel, &st) < 0)
		return 0;
	return http_listing_entry(&l->b, name, len, S_ISDIR(st.mode), st.size,
				  st.mtime.tv_sec);
}

int khttpd_listing_next(struct khttpd_conn *conn)
{
	struct khttpd_listing *l = conn->req->out.listing;
	const struct http_name_table *t = l->names;
	const char *dir = l->dir_len ? l->rel : ".";
	size_t dir_len = l->dir_len ? l->dir_len - 1 : 1;

	if (l->finished) {
		khttpd_listing_free(l);
		conn->req->out.listing = NULL;
		return 0;
	}
	if (l->reset_pending) {
		l->b.len = 0;
		l->reset_pending = false;
	}
	if (!l->began) {
		/* a long path's title may take several pieces */
		l->rel[l->dir_len] = '\0';
		if (http_listing_begin_part(&l->b, dir, dir_len, &l->cursor) <
		    0) {
			khttpd_listing_emit(conn, l, false);
			return 0;
		}
		l->began = true;
	}
	while (l->next < t->count) {
		if (khttpd_listing_row(l, t->names + t->off[l->next]) < 0) {
			/* Full: send it, render this row again next time. */
			khttpd_listing_emit(conn, l, false);
			return 0;
		}
		l->next++;
	}
	if (l->truncated) {
		if (http_listing_truncated(&l->b, t->count) < 0) {
			khttpd_listing_emit(conn, l, false);
			return 0;
		}
		l->truncated = false; /* said */
	}
	if (http_listing_end(&l->b) < 0) {
		khttpd_listing_emit(conn, l, false);
		return 0;
	}
	khttpd_listing_emit(conn, l, true);
	return 0;
}

struct khttpd_listing *khttpd_listing_open(const struct khttpd_site *site,
					   const char *rel, size_t rel_len,
					   bool chunked, bool dotfiles)
{
	bool root = rel_len == 1 && rel[0] == '.';
	size_t dir_len = root ? 0 : rel_len + 1;
	size_t size = sizeof(struct khttpd_listing) + dir_len + NAME_MAX + 1;
	struct khttpd_listing *l;
	struct file *dir;
	int err;

	if (rel_len > HTTP_SERVER_PATH_MAX)
		return ERR_PTR(-ENAMETOOLONG);
	if (atomic_inc_return(&khttpd_listings_now) > khttpd_listing_max &&
	    khttpd_listing_max) {
		atomic_dec(&khttpd_listings_now);
		return ERR_PTR(-EBUSY);
	}
	if (!khttpd_listing_charge(size + KHTTPD_LISTING_MEM)) {
		atomic_dec(&khttpd_listings_now);
		return ERR_PTR(-EBUSY);
	}
	l = kzalloc(size, GFP_KERNEL);
	if (!l) {
		khttpd_listing_uncharge(size + KHTTPD_LISTING_MEM);
		atomic_dec(&khttpd_listings_now);
		return ERR_PTR(-ENOMEM);
	}
	/* from here on khttpd_listing_free undoes everything */
	l->charge = size + KHTTPD_LISTING_MEM;
	l->site = site;
	l->chunked = chunked;
	/* rows are looked up as "dir/name" from the root ("name" there) */
	if (!root) {
		memcpy(l->rel, rel, rel_len);
		l->rel[rel_len] = '/';
	}
	l->dir_len = dir_len;
	l->mem = kmalloc(KHTTPD_LISTING_MEM, GFP_KERNEL);
	if (!l->mem) {
		err = -ENOMEM;
		goto fail;
	}
	http_buf_init(&l->b, l->mem + HTTP_CHUNK_HEADER_MAX,
		      KHTTPD_LISTING_DATA);

	dir = khttpd_open_dir_beneath(site, rel);
	if (IS_ERR(dir)) {
		err = PTR_ERR(dir);
		goto fail;
	}
	err = khttpd_listing_table(l, dir, rel, rel_len, dotfiles);
	fput(dir);
	if (err < 0)
		goto fail;
	l->truncated = l->names->truncated;
	return l;
fail:
	khttpd_listing_free(l);
	return ERR_PTR(err);
}
