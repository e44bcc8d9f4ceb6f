/* httpd.h — the HTTP layer of ktcp-httpd: configuration, the connection
 * handler, the content cache, gzip, listings and the access log. All
 * protocol work (parsing, paths, every decision about a response, dates,
 * validators, ranges, negotiation, MIME, listing rows, response heads) is
 * done by core/ — its planner (http_plan.h) says what to answer; this
 * layer fetches metadata, moves bytes and files, and keeps connections. */
#ifndef KTCP_HTTPD_H
#define KTCP_HTTPD_H

#include <dirent.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <urcu/rculfhash.h>
#include <urcu/urcu-memb.h>

#include "http_core.h"
#include "rt.h"

/* A cached entry is checked against the file system (stat) at most once
 * per this many milliseconds. */
#define HTTPD_REVALIDATE_MS 1000

/* Settings, written by main() before the runtime starts and read-only
 * after, except the atomics, which a reload (SIGHUP) may change while
 * workers read them. */
struct httpd_config {
    const char *root_path;
    int root_fd; /* O_PATH|O_DIRECTORY of --root */
    _Atomic bool gzip;
    size_t cache_size;
    int idle_timeout_ms;
    _Atomic int access_log_fd; /* -1: off */
    const char *status_path;   /* NULL: no status page */
    bool dotfiles;             /* serve and list names starting with '.' */
};
extern struct httpd_config httpd_cfg;

/* The layers, lowest first; each file calls only into the ones above it
 * in this list (and core/, rt):
 *   root      httpd-root.c     files beneath --root
 *   output    httpd-send.c     a planned head and a body in memory
 *   cache     httpd-cache.c    metadata, small bodies, gzip copies
 *             httpd-gzip.c
 *   listing   httpd-listing.c  a directory streamed as its body
 *   log       httpd-log.c      Date, counters, access log
 *   status    httpd-status.c   the counters as a page (--status-path)
 *   respond   httpd-respond.c  core's planner run for one request, its
 *                              plan carried out
 *   conn      httpd-conn.c     read, parse, answer, drain, linger, close */

/* ---- root (httpd-root.c) ---- */
/* openat2(root, rel, RESOLVE_BENEATH): -EXDEV/-ELOOP if it leads out. */
int httpd_open_beneath(const char *rel, int flags);

/* ---- output (httpd-send.c) ---- */

/* One response on a connection, for the output and the access log. */
struct httpd_req {
    struct rt_conn *c;
    const struct http_request *req; /* NULL: no request was parsed */
    const char *rb;                 /* buffer the request's slices point into */
    int status;                     /* for the access log */
    uint64_t sent;                  /* body bytes, for the access log */
    bool uncounted;                 /* the status page: not counted */
    char *hbuf;                     /* response head buffer */
    size_t hcap;
};

/* Build p's head and send it, with body[0..body_len) unless p is
 * head-only. more: MSG_MORE (a body or another response follows). False
 * if the connection must be closed. */
bool httpd_send_head(struct httpd_req *r,
                     const struct http_plan *p,
                     const void *body,
                     size_t body_len,
                     bool more);

/* ---- content cache (httpd-cache.c) ---- */

struct httpd_gz {
    size_t len;
    bool worthless; /* compressed was not smaller: send identity */
    char data[];
};

/* One file's metadata (core's struct http_resource: what the planner
 * reads), and its body and gzip copy when small enough. Immutable after
 * publication except the atomics. Readers hold a reference
 * (httpd_cache_get/put), never a bare RCU pointer. */
struct httpd_file {
    struct cds_lfht_node node;
    struct rcu_head rcu;
    _Atomic int refs;
    _Atomic bool in_table;
    unsigned long hash;
    struct http_resource meta;
    int64_t mtime_nsec;
    uint64_t ino, dev;
    _Atomic uint64_t checked_ms;
    _Atomic uint64_t used_ms;
    _Atomic size_t charge;       /* bytes counted against --cache-size */
    char *body;                  /* whole file, or NULL */
    struct httpd_gz *_Atomic gz; /* made on first gzip request */
    size_t path_len;
    char path[];
};

int httpd_cache_init(void);
/* 0 with *out referenced, or -errno (-ENOENT, -EXDEV/-ELOOP: leads out of
 * the root, -EACCES, ...). */
int httpd_cache_get(const char *rel, size_t len, struct httpd_file **out);
void httpd_cache_put(struct httpd_file *f);
/* Bytes charged against --cache-size, and entries, right now. */
void httpd_cache_usage(size_t *bytes, size_t *entries);
/* The gzip copy of f, made once; NULL if it cannot be made or f is not in
 * the cache (too big for it), so a copy is never made per request. */
const struct httpd_gz *httpd_cache_gzip(struct httpd_file *f);

/* ---- gzip (httpd-gzip.c) ---- */
/* gzip in[0..len) into a fresh httpd_gz; NULL on failure. */
struct httpd_gz *httpd_gzip(const char *in, size_t len);

/* ---- listing (httpd-listing.c) ---- */
/* Stream the listing of the open directory d (p->path names it) as p's
 * body; closes d. False if the connection must be closed. */
bool httpd_listing_send(struct httpd_req *r, const struct http_plan *p, DIR *d);

/* ---- date and access log (httpd-log.c) ---- */
const char *httpd_date_now(struct rt_worker_pub *w, int64_t *now);
/* Count one answered request (unless r->uncounted) and log it. */
void httpd_log_request(struct httpd_req *r);
/* Open path ("-": stdout) as the access log, or turn it off (NULL); the
 * descriptor workers write to changes atomically (dup2), so a rename and a
 * reopen lose no line. Main thread only. 0 or -errno. */
int httpd_log_open(const char *path);

/* ---- status page (httpd-status.c) ---- */
/* Is r a request for --status-path (or its /metrics)? */
bool httpd_status_wanted(const struct httpd_req *r);
/* Answer it with the counters, planned in p (a GET or HEAD the planner
 * has dispatched); false if the connection must close. */
bool httpd_status_serve(struct httpd_req *r, struct http_plan *p);

/* ---- respond (httpd-respond.c) ---- */
/* Plan the answer to one parsed request and carry it out; the plan (its
 * connection disposition) is left in p. False if the connection must be
 * closed at once (a send failed). */
bool httpd_respond(struct httpd_req *r,
                   const struct http_plan_input *in,
                   struct http_plan *p);

/* ---- connection (httpd-conn.c) ---- */
enum rt_verdict httpd_conn_serve(struct rt_conn *c);
void httpd_conn_refuse(int fd);

#endif /* KTCP_HTTPD_H */
