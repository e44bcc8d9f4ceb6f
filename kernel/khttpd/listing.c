// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * listing.c — a directory listing, sorted by name, streamed piece by piece.
 *
 * The first piece reads the directory: iterate_dir() with a dir_context
 * actor collects the names core says are listed (no dotfiles unless
 * allowed) into core's name table, bounded by
 * HTTP_SERVER_LISTING_MAX_ENTRIES names and
 * HTTP_SERVER_LISTING_MAX_NAME_BYTES bytes (past them the listing says it
 * is truncated); core sorts them. Rows are then rendered in order, each
 * name's metadata looked up beneath the root as the server's user, into a
 * buffer of HTTP_SERVER_LISTING_BUF bytes. Each full buffer leaves as one
 * chunk (HTTP/1.1) or as raw bytes before a close (HTTP/1.0 has no chunked
 * coding), as the plan's head says. A piece is rendered only once the
 * previous one is out, so a slow client holds no worker.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/namei.h>
#include <linux/slab.h>
#include <linux/stat.h>
#include <linux/string.h>

#include "khttpd.h"

/* The name table starts this small and doubles up to core's bounds. */
#define KHTTPD_NAMES_START 4096
#define KHTTPD_OFFS_START 256

struct khttpd_listing {
	struct dir_context ctx;
	struct file *dir;
	bool chunked;
	bool dotfiles;
	bool collected; /* the names are read and sorted */
	bool full; /* the actor stopped: no room for the next name */
	size_t need; /* bytes the name that did not fit needs */
	bool truncated; /* more names than a listing holds */
	bool began; /* the opening is rendered */
	bool finished; /* the last piece is queued */
	bool reset_pending; /* the previous piece is out: reuse the buffer */
	struct http_listing_cursor cursor;
	struct http_names names;
	size_t next; /* the next row to render */
	char *rel; /* "dir/" + a name: the row's path beneath the root */
	size_t dir_len; /* of rel's "dir/" part; 0 for the root */
	char *mem; /* [chunk header room][data][CRLF + last chunk room] */
	struct http_buf b;
};

#define KHTTPD_LISTING_TAIL (2 + sizeof(HTTP_LAST_CHUNK) - 1)
#define KHTTPD_REL_MAX (HTTP_SERVER_PATH_MAX + NAME_MAX + 2)

void khttpd_listing_free(struct khttpd_listing *l)
{
	if (l->dir)
		fput(l->dir);
	kvfree(l->names.buf);
	kvfree(l->names.off);
	kfree(l->rel);
	kfree(l->mem);
	kfree(l);
}

static bool khttpd_listing_actor(struct dir_context *ctx, const char *name,
				 int namelen, loff_t off, u64 ino,
				 unsigned int d_type)
{
	struct khttpd_listing *l =
		container_of(ctx, struct khttpd_listing, ctx);
	const char *dir = l->dir_len ? l->rel : ".";
	size_t dir_len = l->dir_len ? l->dir_len - 1 : 1;

	if (!http_listing_visible(dir, dir_len, name, namelen, l->dotfiles))
		return true;
	if (http_names_add(&l->names, name, namelen) == 0)
		return true;
	/* Full: stop here; iterate_dir resumes at this entry next time. */
	l->full = true;
	l->need = namelen + 1;
	return false;
}

/* Room for the name that did not fit, within core's bounds: 0, or
 * -ENOSPC when the listing holds no more. Allocates outside iterate_dir
 * (the directory's lock is not held here).
 */
static int khttpd_names_grow(struct http_names *n, size_t need)
{
	if (n->count >= n->max) {
		size_t max = min_t(size_t, n->max * 2,
				   HTTP_SERVER_LISTING_MAX_ENTRIES);
		u32 *off;

		if (max <= n->max)
			return -ENOSPC;
		off = kvmalloc_array(max, sizeof(*off), GFP_KERNEL);
		if (!off)
			return -ENOMEM;
		memcpy(off, n->off, n->count * sizeof(*off));
		kvfree(n->off);
		n->off = off;
		n->max = max;
	}
	if (need > n->cap - n->len) {
		size_t cap = max(n->cap * 2, n->len + need);
		char *buf;

		cap = min_t(size_t, cap, HTTP_SERVER_LISTING_MAX_NAME_BYTES);
		if (cap < n->len + need)
			return -ENOSPC;
		buf = kvmalloc(cap, GFP_KERNEL);
		if (!buf)
			return -ENOMEM;
		memcpy(buf, n->buf, n->len);
		kvfree(n->buf);
		n->buf = buf;
		n->cap = cap;
	}
	return 0;
}

/* Read the whole directory (up to the bounds) and sort its names. Each
 * round either adds names, grows the table or ends.
 */
static int khttpd_listing_collect(struct khttpd_listing *l)
{
	for (;;) {
		int err;

		l->full = false;
		err = khttpd_iterate_dir(l->dir, &l->ctx);
		if (err < 0)
			return err;
		if (!l->full)
			break;
		err = khttpd_names_grow(&l->names, l->need);
		if (err == -ENOSPC) {
			l->truncated = true;
			break;
		}
		if (err < 0)
			return err;
	}
	http_names_sort(&l->names);
	l->collected = true;
	return 0;
}

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

	if (l->dir_len + len + 1 > KHTTPD_REL_MAX)
		return 0;
	memcpy(l->rel + l->dir_len, name, len + 1);
	if (khttpd_stat_beneath(l->rel, &st) < 0)
		return 0;
	return http_listing_entry(&l->b, name, len, S_ISDIR(st.mode), st.size,
				  st.mtime.tv_sec);
}

int khttpd_listing_next(struct khttpd_conn *conn)
{
	struct khttpd_listing *l = conn->req->out.listing;
	const char *dir = l->dir_len ? l->rel : ".";
	size_t dir_len = l->dir_len ? l->dir_len - 1 : 1;
	int err;

	if (l->finished) {
		khttpd_listing_free(l);
		conn->req->out.listing = NULL;
		return 0;
	}
	if (l->reset_pending) {
		l->b.len = 0;
		l->reset_pending = false;
	}
	if (!l->collected) {
		err = khttpd_listing_collect(l);
		if (err < 0)
			return err;
	}
	if (!l->began) {
		/* a long path's title may take several pieces */
		if (http_listing_begin_part(&l->b, dir, dir_len, &l->cursor) <
		    0) {
			khttpd_listing_emit(conn, l, false);
			return 0;
		}
		l->began = true;
	}
	while (l->next < l->names.count) {
		if (khttpd_listing_row(l, http_names_at(&l->names, l->next)) <
		    0) {
			/* Full: send it, render this row again next time. */
			khttpd_listing_emit(conn, l, false);
			return 0;
		}
		l->next++;
	}
	if (l->truncated) {
		if (http_listing_truncated(&l->b, l->names.count) < 0) {
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

struct khttpd_listing *khttpd_listing_open(const char *rel, size_t rel_len,
					   bool chunked, bool dotfiles)
{
	struct khttpd_listing *l;
	struct file *dir;

	dir = khttpd_open_dir_beneath(rel);
	if (IS_ERR(dir))
		return ERR_CAST(dir);
	l = kzalloc(sizeof(*l), GFP_KERNEL);
	if (!l) {
		fput(dir);
		return ERR_PTR(-ENOMEM);
	}
	l->dir = dir;
	l->ctx.actor = khttpd_listing_actor;
	l->chunked = chunked;
	l->dotfiles = dotfiles;
	l->names.buf = kvmalloc(KHTTPD_NAMES_START, GFP_KERNEL);
	l->names.cap = KHTTPD_NAMES_START;
	l->names.off =
		kvmalloc_array(KHTTPD_OFFS_START, sizeof(u32), GFP_KERNEL);
	l->names.max = KHTTPD_OFFS_START;
	l->rel = kmalloc(KHTTPD_REL_MAX, GFP_KERNEL);
	l->mem = kmalloc(HTTP_CHUNK_HEADER_MAX + HTTP_SERVER_LISTING_BUF +
				 KHTTPD_LISTING_TAIL,
			 GFP_KERNEL);
	if (!l->names.buf || !l->names.off || !l->rel || !l->mem ||
	    rel_len + 2 > KHTTPD_REL_MAX) {
		khttpd_listing_free(l);
		return ERR_PTR(-ENOMEM);
	}
	/* rows are looked up as "dir/name" from the root ("name" there) */
	if (!(rel_len == 1 && rel[0] == '.')) {
		memcpy(l->rel, rel, rel_len);
		l->rel[rel_len] = '/';
		l->dir_len = rel_len + 1;
	}
	l->rel[l->dir_len] = '\0';
	http_buf_init(&l->b, l->mem + HTTP_CHUNK_HEADER_MAX,
		      HTTP_SERVER_LISTING_BUF);
	return l;
}
