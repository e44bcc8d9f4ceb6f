// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * respond.c — one request answered: core's planner decides, this file
 * fetches what it asks for (metadata and gzip copies from the cache) and
 * attaches the plan to the request's output: the head in req->hbuf, then
 * one body source — bytes in memory (a cached body or gzip copy, held by a
 * cache reference until sent; an error text in req->plan),
 * page-cache pages of an open file, or a listing rendered piece by piece.
 * conn.c sends it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/err.h>
#include <linux/fs.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "khttpd.h"

void khttpd_out_reset(struct khttpd_out *o)
{
	if (o->ref)
		khttpd_cache_put(o->ref);
	if (o->file)
		fput(o->file);
	if (o->listing)
		khttpd_listing_free(o->listing);
	memset(o, 0, sizeof(*o));
}

/*
 * The body's source, opened into src before the head is built so that a
 * failure can still change the answer; src->ref holds the cache entry.
 */
static void khttpd_source_open(const struct khttpd_site *site,
			       struct http_plan *p, struct khttpd_out *src)
{
	if (p->body == HTTP_PLAN_BODY_FILE ||
	    (p->body == HTTP_PLAN_BODY_PARTS && !p->parts_cached)) {
		src->file = khttpd_open_beneath(site, p->path);
		if (IS_ERR(src->file)) {
			http_plan_fail(p, PTR_ERR(src->file));
			src->file = NULL;
		}
	} else if (p->body == HTTP_PLAN_BODY_LISTING) {
		src->listing = khttpd_listing_open(site, p->path, p->path_len,
						   p->head.chunked,
						   khttpd_dotfiles);
		if (PTR_ERR_OR_ZERO(src->listing) == -EBUSY) {
			/* beyond the listing budget: come back in a second */
			khttpd_count(listings_refused, 1);
			http_plan_busy(p, 1);
			src->listing = NULL;
		} else if (IS_ERR(src->listing)) {
			http_plan_fail(p, PTR_ERR(src->listing));
			src->listing = NULL;
		}
	}
}

/* Hand the body to the output; what it does not take stays in src. */
static void khttpd_source_attach(struct khttpd_conn *conn,
				 const struct http_plan *p,
				 struct khttpd_out *src,
				 const struct http_gz *gz)
{
	struct khttpd_out *o = &conn->req->out;

	if (p->head_only)
		return;
	switch (p->body) {
	case HTTP_PLAN_BODY_TEXT:
		o->mem = p->text;
		break;
	case HTTP_PLAN_BODY_CACHED:
		o->mem = src->ref->c.body + p->body_off;
		/* the reference keeps the bytes alive until they are out */
		swap(o->ref, src->ref);
		break;
	case HTTP_PLAN_BODY_GZIP:
		o->mem = gz->data; /* lives as long as its entry */
		swap(o->ref, src->ref);
		break;
	case HTTP_PLAN_BODY_FILE:
		o->pos = p->body_off;
		o->file_left = p->body_len;
		swap(o->file, src->file);
		return;
	case HTTP_PLAN_BODY_LISTING:
		swap(o->listing, src->listing);
		return;
	case HTTP_PLAN_BODY_PARTS:
		/* out.c builds each part's head as the last one is out */
		o->parts = p;
		if (p->parts_cached) {
			o->parts_mem = src->ref->c.body;
			swap(o->ref, src->ref);
		} else {
			swap(o->file, src->file);
		}
		return;
	case HTTP_PLAN_BODY_NONE:
	default:
		return;
	}
	o->mem_len = p->body_len;
}

/*
 * The planned head into conn->req->hbuf, counted by its status. No planned
 * head is longer than the buffer (http_plan.h); should one be, the plan
 * becomes a 500 and a close rather than no answer at all.
 */
static bool khttpd_head(struct khttpd_conn *conn, struct http_plan *p)
{
	int n = http_plan_head(p, conn->req->hbuf, sizeof(conn->req->hbuf));

	if (n < 0) {
		http_plan_head_failed(p);
		n = http_plan_head(p, conn->req->hbuf, sizeof(conn->req->hbuf));
	}
	if (n < 0)
		return false;
	conn->req->out.head_off = 0;
	conn->req->out.head_len = n;
	/* kTLS would keep a record open for more: every response ends one. */
	conn->req->out.more = p->more && !conn->tls;
	khttpd_count_status(p->status);
	return true;
}

/*
 * Run the planner's remaining steps against the cache and attach the plan
 * to the output; the entry of the last lookup is the body's. False if no
 * head could be built.
 */
static bool khttpd_finish(struct khttpd_conn *conn,
			  const struct khttpd_site *site,
			  enum http_plan_step step)
{
	struct http_plan *p = &conn->req->plan;
	const struct http_gz *gz = NULL;
	struct khttpd_out src = {};
	bool ok;

	while (step == HTTP_PLAN_LOOKUP) {
		int err;

		khttpd_out_reset(&src);
		err = khttpd_cache_get(site, p->path, p->path_len, &src.ref);
		if (err < 0)
			src.ref = NULL;
		step = http_plan_resource(p, err,
					  err ? NULL : &src.ref->c.meta);
	}
	if (step == HTTP_PLAN_GZIP) {
		gz = khttpd_cache_gzip(src.ref);
		http_plan_gzip(p, gz && !gz->worthless, gz ? gz->len : 0);
	}
	khttpd_source_open(site, p, &src);
	ok = khttpd_head(conn, p);
	if (ok)
		khttpd_source_attach(conn, p, &src, gz);
	khttpd_out_reset(&src);
	return ok;
}

bool khttpd_respond(struct khttpd_conn *conn, const struct http_plan_input *in)
{
	/* too big for a kernel stack; NULL makes the plan a 500 */
	struct http_plan_work *w = kmalloc(sizeof(*w), GFP_KERNEL);
	struct http_plan_input full = *in;
	const struct khttpd_site *site = khttpd_site_of(in->req, in->buf);
	enum http_plan_step step;
	bool ok;

	full.site = &site->plan; /* by reference: made at load, never changed */
	/* a multipart answer's boundary: only a Range request can need one */
	if (in->req && (in->req->seen & HTTP_SEEN_RANGE))
		full.random = get_random_u64();
	step = http_plan_start(&conn->req->plan, &full, w);
	if (step == HTTP_PLAN_LOOKUP && !conn->req->plan.error_page) {
		/* rate=: every request that would be looked up is charged to
		 * its client's address (conn->c.addr)
		 */
		u32 wait = khttpd_rate_take(&conn->c.addr,
					    conn->c.srv->p.per_ip_v6_prefix);

		if (wait)
			step = http_plan_limited(&conn->req->plan, wait);
	}
	ok = khttpd_finish(conn, site, step);
	kfree(w);
	return ok;
}

void khttpd_respond_error(struct khttpd_conn *conn, int status)
{
	struct http_plan_input in = { .now = ktime_get_real_seconds() };
	/* no request: no Host, the default site */
	const struct khttpd_site *site = &khttpd_default_site;
	/* NULL: the built-in text */
	struct http_plan_work *w =
		site->error_pages_n ? kmalloc(sizeof(*w), GFP_KERNEL) : NULL;

	in.site = &site->plan;
	khttpd_finish(conn, site,
		      http_plan_no_request_page(&conn->req->plan, &in, w,
						status));
	kfree(w);
}
