/* httpd.h — the HTTP layer of ktcp-httpd: configuration, the connection
 * handler, file serving, the content cache, gzip and the access log. All
 * protocol work (parsing, paths, dates, validators, ranges, negotiation,
 * MIME, listings, response heads) is done by core/; this layer only moves
 * bytes and files. */
#ifndef KTCP_HTTPD_H
#define KTCP_HTTPD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <urcu/rculfhash.h>
#include <urcu/urcu-memb.h>

#include "http_core.h"
#include "rt.h"

/* Files up to this size keep their body in the cache and leave with one
 * writev; bigger ones are opened per request and sent with sendfile. */
#define HTTPD_SMALL_FILE_MAX (64 * 1024)
/* gzip copies are made for compressible files up to this size (bigger ones
 * go out as identity: compressing them would stall a worker too long). */
#define HTTPD_GZIP_MAX (4 * 1024 * 1024)
/* A cached entry is checked against the file system (stat) at most once
 * per this many milliseconds. */
#define HTTPD_REVALIDATE_MS 1000
/* Request bodies (GET with a body...) are read and discarded up to this
 * size; bigger ones are refused with 413. */
#define HTTPD_MAX_BODY (64 * 1024)
/* Request buffer grows to this; core's limits (8 KiB request line, 16 KiB
 * of header fields) answer 414/431 before it is full. */
#define HTTPD_REQ_BUF_MAX (32 * 1024)

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
};
extern struct httpd_config httpd_cfg;

/* ---- connection (httpd-conn.c) ---- */
enum rt_verdict httpd_conn_serve(struct rt_conn *c);
void httpd_conn_refuse(int fd);

/* What a request handler needs while answering one request. */
struct httpd_req {
    struct rt_conn *c;
    const struct http_request *req;
    const char *rb; /* buffer the request's slices point into */
    bool head;      /* HEAD: same head as GET, no body */
    bool keep_alive;
    bool more_pending; /* pipelined bytes follow: send with MSG_MORE */
    bool cork;         /* the caller sends a body after the head */
    int status;        /* for the access log */
    uint64_t sent;     /* body bytes, for the access log */
    bool uncounted;    /* the status page: kept out of the counters */
    char *hbuf;        /* response head buffer */
    size_t hcap;
};

/* Fill the common fields of a head (date, server, keep-alive). */
void httpd_head_init(struct httpd_req *r,
                     struct http_response_head *h,
                     int status);
/* Build h and send it, with body[0..body_len) (may be NULL). Returns false
 * if the connection must be closed. */
bool httpd_send_head(struct httpd_req *r,
                     const struct http_response_head *h,
                     const void *body,
                     size_t body_len);
/* A complete error response with a short text body. */
bool httpd_send_error(struct httpd_req *r, int status);

/* ---- files (httpd-file.c, httpd-listing.c) ---- */
bool httpd_file_serve(struct httpd_req *r,
                      const char *rel,
                      const struct http_path_info *info);
bool httpd_listing_serve(struct httpd_req *r, const char *rel, size_t rel_len);
/* openat2(root, rel, RESOLVE_BENEATH): -EXDEV/-ELOOP if it leads out. */
int httpd_open_beneath(const char *rel, int flags);

/* ---- content cache (httpd-cache.c) ---- */

struct httpd_gz {
    size_t len;
    bool worthless; /* compressed was not smaller: send identity */
    char etag[HTTP_ETAG_MAX + 4];
    char data[];
};

/* One file's metadata, and its body and gzip copy when small enough.
 * Immutable after publication except the atomics. Readers hold a
 * reference (httpd_cache_get/put), never a bare RCU pointer. */
struct httpd_file {
    struct cds_lfht_node node;
    struct rcu_head rcu;
    _Atomic int refs;
    _Atomic bool in_table;
    unsigned long hash;
    bool is_dir;
    uint64_t size;
    int64_t mtime;
    int64_t mtime_nsec;
    uint64_t ino, dev;
    _Atomic uint64_t checked_ms;
    _Atomic uint64_t used_ms;
    _Atomic size_t charge; /* bytes counted against --cache-size */
    char etag[HTTP_ETAG_MAX + 1];
    const struct http_mime_type *mime;
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
/* Answer it with the counters; false if the connection must close. */
bool httpd_status_serve(struct httpd_req *r);

#endif /* KTCP_HTTPD_H */
