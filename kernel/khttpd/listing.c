// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * listing.c — a directory listing streamed as it is read.
 *
 * iterate_dir() with a dir_context actor collects a batch of names (the
 * actor cannot stat them: the directory's lock is held); the names are
 * then looked up one by one and core renders their rows into a buffer of
 * HTTP_SERVER_LISTING_BUF bytes. Each full buffer leaves as one chunk
 * (HTTP/1.1) or as raw bytes before a close (HTTP/1.0 has no chunked
 * coding), as the plan's head says. A piece is rendered only once the
 * previous one is out, so memory stays flat however large the directory
 * and a slow client holds no worker.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/namei.h>
#include <linux/slab.h>
#include <linux/stat.h>
#include <linux/string.h>

#include "khttpd.h"

#define KHTTPD_NAMES_BUF 8192

struct khttpd_name {
	u16 len;
	char name[]; /* NUL-terminated */
};

struct khttpd_listing {
	struct dir_context ctx;
	struct file *dir;
	bool chunked;
	bool eof; /* iterate_dir has nothing more */
	bool finished; /* the last piece is queued */
	bool reset_pending; /* the previous piece is out: reuse the buffer */
	char *names; /* batch: khttpd_name records */
	size_t names_len, names_pos;
	char *mem; /* [chunk header room][data][CRLF + last chunk room] */
	struct http_buf b;
};

#define KHTTPD_LISTING_TAIL (2 + sizeof(HTTP_LAST_CHUNK) - 1)

void khttpd_listing_free(struct khttpd_listing *l)
{
	if (l->dir)
		fput(l->dir);
	kfree(l->names);
	kfree(l->mem);
	kfree(l);
}

static bool khttpd_listing_actor(struct dir_context *ctx, const char *name,
				 int namelen, loff_t off, u64 ino,
				 unsigned int d_type)
{
	struct khttpd_listing *l =
		container_of(ctx, struct khttpd_listing, ctx);
	size_t need = ALIGN(sizeof(struct khttpd_name) + namelen + 1, 2);
	struct khttpd_name *n;

	if (name[0] == '.' &&
	    (namelen == 1 || (namelen == 2 && name[1] == '.')))
		return true;
	/* Full: stop here; iterate_dir resumes at this entry next time. */
	if (l->names_len + need > KHTTPD_NAMES_BUF)
		return false;
	n = (struct khttpd_name *)(l->names + l->names_len);
	n->len = namelen;
	memcpy(n->name, name, namelen);
	n->name[namelen] = '\0';
	l->names_len += need;
	return true;
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
	conn->out.mem = start;
	conn->out.mem_off = 0;
	conn->out.mem_len = n;
	conn->out.listing_last = last;
	l->reset_pending = true;
	l->finished = last;
}

int khttpd_listing_next(struct khttpd_conn *conn)
{
	struct khttpd_listing *l = conn->out.listing;
	int err;

	if (l->finished) {
		khttpd_listing_free(l);
		conn->out.listing = NULL;
		return 0;
	}
	if (l->reset_pending) {
		l->b.len = 0;
		l->reset_pending = false;
	}
	for (;;) {
		if (l->names_pos < l->names_len) {
			struct khttpd_name *n =
				(struct khttpd_name *)(l->names + l->names_pos);
			size_t size = ALIGN(sizeof(*n) + n->len + 1, 2);
			struct kstat st;

			if (khttpd_stat_in(&l->dir->f_path, n->name, &st) ==
				    0 &&
			    http_listing_entry(&l->b, n->name, n->len,
					       S_ISDIR(st.mode), st.size,
					       st.mtime.tv_sec) < 0) {
				/* Full: send it, render this row again next time. */
				khttpd_listing_emit(conn, l, false);
				return 0;
			}
			l->names_pos += size;
			continue;
		}
		if (!l->eof) {
			l->names_len = l->names_pos = 0;
			err = iterate_dir(l->dir, &l->ctx);
			if (err < 0)
				return err;
			if (!l->names_len)
				l->eof = true;
			continue;
		}
		if (http_listing_end(&l->b) < 0) {
			khttpd_listing_emit(conn, l, false);
			return 0;
		}
		khttpd_listing_emit(conn, l, true);
		return 0;
	}
}

struct khttpd_listing *khttpd_listing_open(const char *rel, size_t rel_len,
					   bool chunked)
{
	struct khttpd_listing *l;
	struct path path;
	struct file *dir;
	int err;

	err = khttpd_lookup_beneath(rel, &path);
	if (err < 0)
		return ERR_PTR(err);
	if (!d_is_dir(path.dentry)) {
		path_put(&path);
		return ERR_PTR(-ENOTDIR);
	}
	dir = dentry_open(&path, O_RDONLY | O_DIRECTORY, current_cred());
	path_put(&path);
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
	l->names = kmalloc(KHTTPD_NAMES_BUF, GFP_KERNEL);
	l->mem = kmalloc(HTTP_CHUNK_HEADER_MAX + HTTP_SERVER_LISTING_BUF +
				 KHTTPD_LISTING_TAIL,
			 GFP_KERNEL);
	if (!l->names || !l->mem) {
		khttpd_listing_free(l);
		return ERR_PTR(-ENOMEM);
	}
	http_buf_init(&l->b, l->mem + HTTP_CHUNK_HEADER_MAX,
		      HTTP_SERVER_LISTING_BUF);
	/* begin always fits an empty buffer */
	http_listing_begin(&l->b, rel, rel_len);
	return l;
}
