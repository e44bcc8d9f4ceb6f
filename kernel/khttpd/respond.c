// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * respond.c — one request answered: core's planner decides, this file
 * fetches what it asks for (metadata and gzip copies from the cache) and
 * attaches the plan to the connection's output: the head in conn->hbuf,
 * then one body source — bytes in memory (a cached body or gzip copy,
 * held by a cache reference until sent; an error text in conn->plan),
 * page-cache pages of an open file, or a listing rendered piece by piece.
 * conn.c sends it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/err.h>
#include <linux/fs.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "khttpd.h"

/* The body's source, opened before the head is built so that a failure
 * can still change the answer. */
struct khttpd_source {
	struct khttpd_entry *e; /* reference, or NULL */
	const struct khttpd_gz *gz;
	struct file *file;
	struct khttpd_listing *listing;
};

static void khttpd_source_open(struct http_plan *p, struct khttpd_source *s)
{
	if (p->body == HTTP_PLAN_BODY_FILE) {
		s->file = khttpd_open_beneath(p->path);
		if (IS_ERR(s->file)) {
			http_plan_fail(p, PTR_ERR(s->file));
			s->file = NULL;
		}
	} else if (p->body == HTTP_PLAN_BODY_LISTING) {
		s->listing = khttpd_listing_open(p->path, p->path_len,
						 p->head.chunked);
		if (IS_ERR(s->listing)) {
			http_plan_fail(p, PTR_ERR(s->listing));
			s->listing = NULL;
		}
	}
}

static void khttpd_source_close(struct khttpd_source *s)
{
	if (s->e)
		khttpd_cache_put(s->e);
	if (s->file)
		fput(s->file);
	if (s->listing)
		khttpd_listing_free(s->listing);
	memset(s, 0, sizeof(*s));
}

/* Hand the body to the output; what it does not take is closed after. */
static void khttpd_source_attach(struct khttpd_conn *conn,
				 const struct http_plan *p,
				 struct khttpd_source *s)
{
	struct khttpd_out *o = &conn->out;

	if (p->head_only)
		return;
	switch (p->body) {
	case HTTP_PLAN_BODY_TEXT:
		o->mem = p->text;
		o->mem_len = p->body_len;
		break;
	case HTTP_PLAN_BODY_CACHED:
		o->mem = s->e->body + p->body_off;
		o->mem_len = p->body_len;
		o->ref = s->e; /* keeps the bytes alive until they are out */
		s->e = NULL;
		break;
	case HTTP_PLAN_BODY_GZIP:
		o->mem = s->gz->data; /* lives as long as its entry */
		o->mem_len = p->body_len;
		o->ref = s->e;
		s->e = NULL;
		break;
	case HTTP_PLAN_BODY_FILE:
		o->file = s->file;
		o->pos = p->body_off;
		o->file_left = p->body_len;
		s->file = NULL;
		break;
	case HTTP_PLAN_BODY_LISTING:
		o->listing = s->listing;
		s->listing = NULL;
		break;
	case HTTP_PLAN_BODY_NONE:
	default:
		break;
	}
}

/* The planned head into conn->hbuf, counted by its status. */
static bool khttpd_head(struct khttpd_conn *conn, const struct http_plan *p)
{
	int n = http_plan_head(p, conn->hbuf, sizeof(conn->hbuf));

	if (n < 0)
		return false;
	conn->out.head_off = 0;
	conn->out.head_len = n;
	conn->out.more = p->more;
	khttpd_count_status(p->status);
	return true;
}

bool khttpd_respond(struct khttpd_conn *conn, const struct http_plan_input *in)
{
	/* too big for a kernel stack; NULL makes the plan a 500 */
	struct http_plan_work *w = kmalloc(sizeof(*w), GFP_KERNEL);
	struct http_plan *p = &conn->plan;
	struct khttpd_source s = {};
	enum http_plan_step step;
	bool ok;

	step = http_plan_start(p, in, w);
	while (step == HTTP_PLAN_LOOKUP) {
		int err;

		if (s.e)
			khttpd_cache_put(s.e);
		s.e = NULL;
		err = khttpd_cache_get(p->path, p->path_len, &s.e);
		step = http_plan_resource(p, err, err ? NULL : &s.e->meta);
	}
	if (step == HTTP_PLAN_GZIP) {
		s.gz = khttpd_cache_gzip(s.e);
		http_plan_gzip(p, s.gz && !s.gz->worthless,
			       s.gz ? s.gz->len : 0);
	}
	khttpd_source_open(p, &s);
	ok = khttpd_head(conn, p);
	if (ok)
		khttpd_source_attach(conn, p, &s);
	khttpd_source_close(&s);
	kfree(w);
	return ok;
}

void khttpd_respond_error(struct khttpd_conn *conn, int status)
{
	struct http_plan_input in = { .now = ktime_get_real_seconds() };
	struct http_plan *p = &conn->plan;

	http_plan_no_request(p, &in, status);
	if (khttpd_head(conn, p)) {
		conn->out.mem = p->text;
		conn->out.mem_len = p->body_len;
	}
}
