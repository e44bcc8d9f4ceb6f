/* httpd-respond.c — one request answered: core's planner decides, this
 * file fetches what it asks for (metadata and gzip copies from the cache)
 * and carries the plan out. Bodies in memory (cached small files, gzip
 * copies, error texts) leave in one writev with the head; large files
 * follow the head by sendfile, from the descriptor their cache object
 * keeps (--open-files) or one opened for the request; listings are
 * streamed. */
#define _LGPL_SOURCE /* liburcu's read-side lock inline */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "httpd.h"

/* A descriptor of the plan's file: the one f's object keeps (*own
 * false: never closed here, nor its position used: every read has its
 * offset), else opened now (*own true). -errno if it cannot be opened. */
static int file_open(struct httpd_req *r,
                     const struct http_plan *p,
                     const struct httpd_file *f,
                     bool *own)
{
    int fd = httpd_cache_file_fd(f, p->path, p->path_len);
    *own = fd < 0;
    if (fd < 0)
        fd = httpd_open_beneath(r->root.fd, p->path, O_RDONLY | O_NONBLOCK);
    return fd;
}

/* The body named by the plan, from the file the plan was made from (f,
 * whose object may keep it open). */
static bool send_file(struct httpd_req *r,
                      struct http_plan *p,
                      const struct httpd_file *f)
{
    bool own;
    int fd = file_open(r, p, f, &own);
    if (fd < 0) {
        http_plan_fail(p, fd);
        return httpd_send_head(r, p, p->text, p->body_len, p->more);
    }
    /* the body's first bytes join the head's segment (TCP) or record
     * (kTLS), unless the transport sends the head alone */
    bool alone =
        !p->head_only && rt_head_alone(r->c, (off_t) p->body_off, p->body_len);
    bool ok =
        httpd_send_head(r, p, NULL, 0, !alone && (!p->head_only || p->more));
    if (ok && !p->head_only) {
        ssize_t n = rt_sendfile(r->c, fd, (off_t) p->body_off, p->body_len,
                                httpd_cfg.idle_timeout_ms);
        if (n > 0)
            r->sent += (uint64_t) n;
        ok = n == (ssize_t) p->body_len;
    }
    if (own)
        close(fd);
    return ok;
}

/* multipart/byteranges: each part's head from the planner, its bytes
 * gathered with it from the cached body or sent by sendfile after it. */
static bool send_parts(struct httpd_req *r,
                       struct http_plan *p,
                       const struct httpd_file *f)
{
    int fd = -1;
    bool own = false;
    if (!p->parts_cached) {
        fd = file_open(r, p, f, &own);
        if (fd < 0) {
            http_plan_fail(p, fd);
            return httpd_send_head(r, p, p->text, p->body_len, p->more);
        }
    }
    bool ok = httpd_send_head(r, p, NULL, 0, !p->head_only || p->more);
    for (unsigned i = 0; ok && !p->head_only && i <= p->ranges.n; i++) {
        uint64_t off, len;
        int n = http_plan_part(p, i, r->hbuf, r->hcap, &off, &len);
        if (n < 0) {
            ok = false;
            break;
        }
        struct iovec iov[2] = {
            {.iov_base = r->hbuf, .iov_len = (size_t) n},
            {.iov_base = p->parts_cached ? f->c.body + off : NULL,
             .iov_len = len},
        };
        int cnt = p->parts_cached ? 2 : 1;
        bool last = i == p->ranges.n;
        ok = rt_sendv(r->c, iov, cnt, !last || p->more,
                      httpd_cfg.idle_timeout_ms) >= 0;
        if (ok)
            r->sent += (uint64_t) n + (cnt == 2 ? len : 0);
        if (ok && fd >= 0 && len) {
            ssize_t s = rt_sendfile(r->c, fd, (off_t) off, len,
                                    httpd_cfg.idle_timeout_ms);
            if (s > 0)
                r->sent += (uint64_t) s;
            ok = s == (ssize_t) len;
        }
    }
    if (own)
        close(fd);
    return ok;
}

static bool send_listing(struct httpd_req *r, struct http_plan *p)
{
    int dfd = httpd_open_beneath(r->root.fd, p->path, O_RDONLY | O_DIRECTORY);
    DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        http_plan_fail(p, dfd < 0 ? dfd : -HTTP_ENOMEM);
        return httpd_send_head(r, p, p->text, p->body_len, p->more);
    }
    if (p->head_only) { /* the head alone: no names to read */
        closedir(d);
        return httpd_send_head(r, p, NULL, 0, p->more);
    }
    /* the names are read before the head, so that a listing beyond the
     * budget can still be a 503 */
    struct httpd_listing *l;
    int err = httpd_listing_open(p, &r->root, d, &l);
    if (err == -EBUSY) {
        rt_count(HTTPD_C_LISTINGS_REFUSED, 1);
        http_plan_busy(p, 1);
    } else if (err < 0) {
        http_plan_fail(p, err);
    }
    if (err < 0)
        return httpd_send_head(r, p, p->text, p->body_len, p->more);
    if (!httpd_send_head(r, p, NULL, 0, true)) {
        httpd_listing_free(l);
        return false;
    }
    return httpd_listing_send(r, p, l);
}

/* Carry the plan out; f is the entry it was made from (or NULL). */
static bool carry_out(struct httpd_req *r,
                      struct http_plan *p,
                      struct httpd_file *f,
                      const struct http_gz *gz)
{
    switch (p->body) {
    case HTTP_PLAN_BODY_TEXT:
        return httpd_send_head(r, p, p->text, p->body_len, p->more);
    case HTTP_PLAN_BODY_CACHED:
        return httpd_send_head(r, p, f->c.body + p->body_off, p->body_len,
                               p->more);
    case HTTP_PLAN_BODY_GZIP:
        return httpd_send_head(r, p, gz->data, gz->len, p->more);
    case HTTP_PLAN_BODY_FILE:
        return send_file(r, p, f);
    case HTTP_PLAN_BODY_LISTING:
        return send_listing(r, p);
    case HTTP_PLAN_BODY_PARTS:
        return send_parts(r, p, f);
    case HTTP_PLAN_BODY_NONE:
    default:
        return httpd_send_head(r, p, NULL, 0, p->more);
    }
}

/* The live settings of the request's site into the planner's input (a
 * pointer, read inside the section r entered: a SIGHUP replaces them
 * whole, freed only a grace period after), and the tree of the request's
 * site into r->root. */
static void add_settings(struct httpd_req *r, struct http_plan_input *in)
{
    const struct httpd_live *l = httpd_live_enter(r);
    const struct httpd_sites *sites = l->sites;
    /* one site (no --host): no name to look up */
    const struct httpd_site *site =
        sites->n == 1
            ? &sites->site[0]
            : &sites
                   ->site[http_vhosts_request(&sites->names, in->req, in->buf) +
                          1];
    /* by reference: the section is left once the head is built, when the
     * plan has read the settings for the last time */
    in->site = &site->settings;
    r->root = site->root;
}

/* Run the planner's remaining steps against the cache, carry the plan
 * out. The entry of the last lookup is the one the body comes from. */
static bool finish(struct httpd_req *r,
                   struct http_plan *p,
                   enum http_plan_step step)
{
    struct httpd_file *f = NULL;
    const struct http_gz *gz = NULL;

    while (step == HTTP_PLAN_LOOKUP) {
        if (f)
            httpd_cache_put(f);
        f = NULL;
        int err = httpd_cache_get(r->w, &r->root, p->path, p->path_len, &f);
        step = http_plan_resource(p, err, err ? NULL : &f->c.meta);
    }
    if (step == HTTP_PLAN_GZIP) {
        gz = httpd_cache_gzip(f);
        step = http_plan_gzip(p, gz && !gz->worthless, gz ? gz->len : 0);
    }
    r->file = f;
    bool ok = carry_out(r, p, f, gz);
    httpd_live_leave(r); /* left when the head was built, or now */
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

    add_settings(r, in);
    /* a multipart answer's boundary: only a Range request can need one */
    if (in->req && (in->req->seen & HTTP_SEEN_RANGE) &&
        getrandom(&in->random, sizeof(in->random), GRND_NONBLOCK) !=
            sizeof(in->random))
        in->random = (uint64_t) (uintptr_t) r ^ (uint64_t) time(NULL);
    enum http_plan_step step = http_plan_start(p, in, &work);
    if (step == HTTP_PLAN_LOOKUP && !p->error_page) {
        /* --limit-req: every request that would be looked up is charged
         * to its client's address, the status page's too */
        uint32_t wait = httpd_rate_take(r->c, r->live);
        if (wait)
            step = http_plan_limited(p, wait);
    }
    if (step == HTTP_PLAN_LOOKUP && !p->error_page && httpd_status_wanted(r)) {
        bool ok = httpd_status_serve(r, p); /* --status-path: the counters */
        httpd_live_leave(r);
        return ok;
    }
    return finish(r, p, step);
}

void httpd_respond_error(struct httpd_req *r,
                         const struct http_plan_input *in,
                         int status)
{
    struct http_plan_work work;
    struct http_plan_input full = *in;
    struct http_plan p;

    add_settings(r, &full);
    finish(r, &p, http_plan_no_request_page(&p, &full, &work, status));
}
