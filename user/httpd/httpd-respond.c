/* httpd-respond.c — one request answered: core's planner decides, this
 * file fetches what it asks for (metadata and gzip copies from the cache)
 * and carries the plan out. Bodies in memory (cached small files, gzip
 * copies, error texts) leave in one writev with the head; large files
 * follow the head by sendfile; listings are streamed. */
#include <fcntl.h>
#include <unistd.h>

#include "httpd.h"

/* The body named by the plan, from the file the plan was made from. */
static bool send_file(struct httpd_req *r, struct http_plan *p)
{
    int fd = httpd_open_beneath(p->path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        http_plan_fail(p, fd);
        return httpd_send_head(r, p, p->text, p->body_len, p->more);
    }
    bool ok = httpd_send_head(r, p, NULL, 0, !p->head_only || p->more);
    if (ok && !p->head_only) {
        ssize_t n = rt_sendfile(r->c, fd, (off_t) p->body_off, p->body_len,
                                httpd_cfg.idle_timeout_ms);
        if (n > 0)
            r->sent += (uint64_t) n;
        ok = n == (ssize_t) p->body_len;
    }
    close(fd);
    return ok;
}

static bool send_listing(struct httpd_req *r, struct http_plan *p)
{
    int dfd = httpd_open_beneath(p->path, O_RDONLY | O_DIRECTORY);
    DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        http_plan_fail(p, dfd < 0 ? dfd : -HTTP_ENOMEM);
        return httpd_send_head(r, p, p->text, p->body_len, p->more);
    }
    bool ok = httpd_send_head(r, p, NULL, 0, !p->head_only || p->more);
    if (!ok || p->head_only) {
        closedir(d);
        return ok;
    }
    return httpd_listing_send(r, p, d);
}

/* Carry the plan out; f is the entry it was made from (or NULL). */
static bool carry_out(struct httpd_req *r,
                      struct http_plan *p,
                      struct httpd_file *f,
                      const struct httpd_gz *gz)
{
    switch (p->body) {
    case HTTP_PLAN_BODY_TEXT:
        return httpd_send_head(r, p, p->text, p->body_len, p->more);
    case HTTP_PLAN_BODY_CACHED:
        return httpd_send_head(r, p, f->body + p->body_off, p->body_len,
                               p->more);
    case HTTP_PLAN_BODY_GZIP:
        return httpd_send_head(r, p, gz->data, gz->len, p->more);
    case HTTP_PLAN_BODY_FILE:
        return send_file(r, p);
    case HTTP_PLAN_BODY_LISTING:
        return send_listing(r, p);
    case HTTP_PLAN_BODY_NONE:
    default:
        return httpd_send_head(r, p, NULL, 0, p->more);
    }
}

/* The operator's settings the planner takes, as they are now (a SIGHUP
 * may change expires, gzip_static and listings between two requests). */
static void add_settings(struct http_plan_input *in)
{
    in->expires =
        atomic_load_explicit(&httpd_cfg.expires, memory_order_relaxed);
    in->gzip_static =
        atomic_load_explicit(&httpd_cfg.gzip_static, memory_order_relaxed);
    in->error_pages = httpd_cfg.error_pages;
    in->error_pages_n = httpd_cfg.error_pages_n;
    in->mime = httpd_cfg.mime;
    in->dotfiles = httpd_cfg.dotfiles;
    in->no_listings =
        !atomic_load_explicit(&httpd_cfg.listings, memory_order_relaxed);
}

/* Run the planner's remaining steps against the cache, carry the plan
 * out. The entry of the last lookup is the one the body comes from. */
static bool finish(struct httpd_req *r,
                   struct http_plan *p,
                   enum http_plan_step step)
{
    struct httpd_file *f = NULL;
    const struct httpd_gz *gz = NULL;

    while (step == HTTP_PLAN_LOOKUP) {
        if (f)
            httpd_cache_put(f);
        f = NULL;
        int err = httpd_cache_get(r->w, p->path, p->path_len, &f);
        step = http_plan_resource(p, err, err ? NULL : &f->meta);
    }
    if (step == HTTP_PLAN_GZIP) {
        gz = httpd_cache_gzip(f);
        step = http_plan_gzip(p, gz && !gz->worthless, gz ? gz->len : 0);
    }
    r->file = f;
    bool ok = carry_out(r, p, f, gz);
    r->file = NULL;
    if (f)
        httpd_cache_put(f);
    return ok;
}

bool httpd_respond(struct httpd_req *r,
                   struct http_plan_input *in,
                   struct http_plan *p)
{
    struct http_plan_work work;

    add_settings(in);
    enum http_plan_step step = http_plan_start(p, in, &work);
    if (step == HTTP_PLAN_LOOKUP && !p->error_page && httpd_status_wanted(r))
        return httpd_status_serve(r, p); /* --status-path: the counters */
    return finish(r, p, step);
}

void httpd_respond_error(struct httpd_req *r,
                         const struct http_plan_input *in,
                         int status)
{
    struct http_plan_work work;
    struct http_plan_input full = *in;
    struct http_plan p;

    add_settings(&full);
    finish(r, &p, http_plan_no_request_page(&p, &full, &work, status));
}
