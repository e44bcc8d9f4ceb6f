// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * file.c — a static file or directory for one request: metadata from the
 * cache, validators, ranges and negotiation decided by core/, the head
 * gathered with the body for small files and gzip copies, or followed by
 * page-cache pages (conn.c splices them) for large files.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/namei.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "khttpd.h"

/*
 * Exported by fs/namei.c (EXPORT_SYMBOL) but no longer declared in a public
 * header on 6.1. It is the one lookup that takes both a starting point and
 * LOOKUP_BENEATH, the in-kernel twin of openat2(RESOLVE_BENEATH): "..",
 * absolute symlinks and relative ones that climb out of the root all fail
 * with -EXDEV instead of being resolved (file_open_root() would instead
 * treat the root as a chroot and serve a different file).
 */
int vfs_path_lookup(struct dentry *dentry, struct vfsmount *mnt,
		    const char *name, unsigned int flags, struct path *path);

int khttpd_lookup_beneath(const char *rel, struct path *out)
{
	return vfs_path_lookup(
		khttpd_root.dentry, khttpd_root.mnt, rel,
		LOOKUP_FOLLOW | LOOKUP_BENEATH | LOOKUP_NO_MAGICLINKS, out);
}

struct file *khttpd_open_beneath(const char *rel)
{
	struct path path;
	struct file *f;
	int err = khttpd_lookup_beneath(rel, &path);

	if (err < 0)
		return ERR_PTR(err);
	if (!d_is_reg(path.dentry)) {
		path_put(&path);
		return ERR_PTR(-EACCES);
	}
	f = dentry_open(&path, O_RDONLY | O_LARGEFILE, current_cred());
	path_put(&path);
	return f;
}

int khttpd_read_whole(struct file *f, char *buf, size_t len)
{
	loff_t pos = 0;

	while (pos < len) {
		ssize_t n = kernel_read(f, buf + pos, len - pos, &pos);

		if (n <= 0)
			return n ? n : -EIO;
	}
	return 0;
}

static int khttpd_errno_status(int err)
{
	switch (err) {
	case -ENOENT:
	case -ENOTDIR:
	case -ENAMETOOLONG:
		return 404;
	case -EXDEV: /* a symlink (or "..") leads out of the root */
	case -ELOOP:
	case -EACCES:
	case -EPERM:
		return 403;
	default:
		return 500;
	}
}

/* 301 to the same path with a slash, query kept. */
static bool khttpd_redirect_slash(struct khttpd_req *r, const char *rel,
				  size_t len)
{
	const struct http_request *req = r->req;
	size_t cap = 3 * len + 3 * req->path.len + 16;
	char *loc = kmalloc(cap, GFP_KERNEL);
	struct http_response_head h;
	const char *p, *q;
	struct http_buf b;
	bool ok;

	if (!loc)
		return khttpd_send_error(r, 500);
	http_buf_init(&b, loc, cap);
	http_buf_append_char(&b, '/');
	http_url_encode(&b, rel, len, true);
	http_buf_append_char(&b, '/');
	/* the query, as sent (the parser has vetted its bytes) */
	p = r->rb + req->path.off;
	q = memchr(p, '?', req->path.len);
	if (q)
		http_buf_append(&b, q, req->path.len - (size_t)(q - p));
	http_buf_append_char(&b, '\0');

	if (b.overflow) {
		ok = khttpd_send_error(r, 414);
	} else {
		khttpd_head_init(r, &h, 301);
		h.location = loc;
		h.content_type = "text/plain; charset=utf-8";
		h.content_length = 0;
		ok = khttpd_send_head(r, &h);
	}
	kfree(loc);
	return ok;
}

/* Takes over the caller's reference on e. */
static bool khttpd_send_regular(struct khttpd_req *r, const char *rel,
				struct khttpd_entry *e)
{
	const struct http_request *req = r->req;
	const char *rb = r->rb;
	bool compressible = khttpd_gzip_enabled && e->mime->compressible &&
			    e->size <= KHTTPD_GZIP_MAX && e->size > 0;
	const char *inm = req->seen & HTTP_SEEN_IF_NONE_MATCH ?
				  rb + req->if_none_match.off :
				  NULL;
	const char *ims = req->seen & HTTP_SEEN_IF_MODIFIED_SINCE ?
				  rb + req->if_modified_since.off :
				  NULL;
	bool want_range = (req->seen & HTTP_SEEN_RANGE) &&
			  !(req->repeated & HTTP_SEEN_RANGE);
	const struct khttpd_gz *gz = NULL;
	struct http_response_head h;
	u64 first = 0, last = e->size ? e->size - 1 : 0, len = e->size;
	const char *etag;
	struct file *f;
	bool ok;
	int cond;

	/* Representation: gzip when accepted and worth it; Range applies to
     * identity only (as nginx does), so a Range request gets identity. */
	if (compressible && !want_range) {
		const char *ae = req->seen & HTTP_SEEN_ACCEPT_ENCODING ?
					 rb + req->accept_encoding.off :
					 NULL;

		if (http_accept_encoding_negotiate(ae, req->accept_encoding.len,
						   true) ==
		    HTTP_ENCODING_GZIP) {
			gz = khttpd_cache_gzip(e);
			if (gz && gz->worthless)
				gz = NULL;
		}
	}
	etag = gz ? gz->etag : e->etag;

	cond = http_conditional_status(inm, req->if_none_match.len, ims,
				       req->if_modified_since.len, etag,
				       strlen(etag), e->mtime);
	khttpd_head_init(r, &h, 200);
	h.content_type = e->mime->content_type;
	h.has_last_modified = true;
	h.last_modified = e->mtime;
	h.etag = etag;
	h.vary_accept_encoding = compressible;
	if (cond == 304) {
		h.status = 304;
		h.content_type = NULL;
		goto head_only;
	}
	if (gz) {
		h.content_encoding = "gzip";
		h.content_length = (int64_t)gz->len;
		if (!khttpd_send_head(r, &h))
			goto fail;
		/* gz lives as long as e; the connection keeps e until sent. */
		khttpd_send_mem(r, gz->data, gz->len, e);
		return true;
	}

	h.accept_ranges = true;
	if (want_range) {
		int rr = http_range_parse(rb + req->range.off, req->range.len,
					  e->size, &first, &last);

		/* If-Range: the range only holds for the validator it names */
		if (rr != HTTP_RANGE_IGNORE &&
		    (req->seen & HTTP_SEEN_IF_RANGE)) {
			const char *ir = rb + req->if_range.off;
			size_t irl = req->if_range.len;
			bool same = irl == strlen(e->etag) &&
				    !memcmp(ir, e->etag, irl);
			int64_t t;

			if (!same && http_date_parse(ir, irl, &t))
				same = t == e->mtime;
			if (!same)
				rr = HTTP_RANGE_IGNORE;
		}
		if (rr == HTTP_RANGE_UNSATISFIABLE) {
			h.status = 416;
			h.content_range_unsatisfied = true;
			h.range_size = e->size;
			h.content_type = NULL;
			h.content_length = 0;
			goto head_only;
		}
		if (rr == HTTP_RANGE_SATISFIABLE) {
			h.status = 206;
			h.has_content_range = true;
			h.range_first = first;
			h.range_last = last;
			h.range_size = e->size;
			len = last - first + 1;
		} else {
			first = 0;
		}
	}
	h.content_length = (int64_t)len;
	if (e->body || len == 0) {
		if (!khttpd_send_head(r, &h))
			goto fail;
		if (e->body)
			khttpd_send_mem(r, e->body + first, len, e);
		else
			khttpd_cache_put(e);
		return true;
	}

	/* Large file: head with MSG_MORE, then page-cache pages. */
	f = khttpd_open_beneath(rel);
	if (IS_ERR(f)) {
		khttpd_cache_put(e);
		return khttpd_send_error(r, khttpd_errno_status(PTR_ERR(f)));
	}
	if (!khttpd_send_head(r, &h)) {
		fput(f);
		goto fail;
	}
	khttpd_cache_put(e); /* h.etag pointed into e: only now */
	khttpd_send_file(r, f, first, len);
	return true;

head_only:
	/* The head is built from e (its ETag) before e may go. */
	ok = khttpd_send_head(r, &h);
	khttpd_cache_put(e);
	return ok;
fail:
	khttpd_cache_put(e);
	return false;
}

bool khttpd_file_serve(struct khttpd_req *r, const char *rel,
		       const struct http_path_info *info)
{
	size_t len = info->len;
	struct khttpd_entry *e;
	char *idx;
	size_t n;
	bool ok;
	int err;

	err = khttpd_cache_get(rel, len, &e);
	if (err < 0)
		return khttpd_send_error(r, khttpd_errno_status(err));
	if (!e->is_dir) {
		if (info->trailing_slash && !info->is_root) {
			khttpd_cache_put(e);
			return khttpd_send_error(
				r, 404); /* "file/" names no file */
		}
		return khttpd_send_regular(r, rel, e);
	}
	khttpd_cache_put(e);
	if (!info->trailing_slash && !info->is_root)
		return khttpd_redirect_slash(r, rel, len);

	/* index.html, else a listing */
	n = info->is_root ? 0 : len;
	if (n + sizeof("/index.html") > KHTTPD_PATH_MAX + 16)
		return khttpd_send_error(r, 414);
	idx = kmalloc(KHTTPD_PATH_MAX + 16, GFP_KERNEL);
	if (!idx)
		return khttpd_send_error(r, 500);
	memcpy(idx, rel, n);
	if (n)
		idx[n++] = '/';
	memcpy(idx + n, "index.html", sizeof("index.html"));
	n += sizeof("index.html") - 1;
	err = khttpd_cache_get(idx, n, &e);
	if (err == 0 && !e->is_dir) {
		ok = khttpd_send_regular(r, idx, e);
		kfree(idx);
		return ok;
	}
	if (err == 0)
		khttpd_cache_put(e);
	kfree(idx);
	return khttpd_listing_serve(r, rel, len);
}
