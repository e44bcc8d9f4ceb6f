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
#include <urcu/list.h>
#include <urcu/rculfhash.h>
#include <urcu/urcu-memb.h>

#include "http_core.h"
#include "rt.h"

/* A served tree: its directory (O_PATH|O_DIRECTORY) and that directory's
 * identity, which keys the cache (two sites of one directory share
 * entries; a file cached for one root is never served for another). */
struct httpd_root {
    int fd;
    uint64_t dev, ino;
};

/* The settings that shape a request's answer and a SIGHUP may change
 * together: one per site (the default, and each --host). */
struct httpd_site {
    struct httpd_root root;
    struct http_error_page error_pages[HTTP_SERVER_ERROR_PAGES_MAX];
    size_t error_pages_n;
    bool index_given; /* else index.html */
    struct http_index_files index;
    char fallback[HTTP_ERROR_PAGE_PATH_MAX]; /* relative, NUL-terminated */
    size_t fallback_len;                     /* 0: none */
    struct http_headers headers;             /* --add-header, --cors */
    /* the planner's settings of this site (pointing into it), made with
     * it: a request's input points here (httpd-respond.c), read until
     * the request's head is built, inside its RCU read-side section */
    struct http_site_settings settings;
};

/* The sites: [0] the default, [1 + k] the host names[k] names. */
struct httpd_sites {
    struct http_vhosts names;
    size_t n;
    struct httpd_site site[];
};

/* The settings a SIGHUP may change, as one object: built whole from the
 * command line and --config (httpd-settings.c), immutable once published
 * in httpd_cfg.live, replaced whole by a reload and freed a grace period
 * after (call_rcu; the sites' trees closed then). A reader uses it inside
 * an RCU read-side section: a request from its plan's start until its
 * head is built, before its first wait (httpd_live_enter/leave). */
struct httpd_live {
    struct rcu_head rcu;
    uint32_t rate_limit; /* --limit-req's rate (0: off) and burst; the */
    uint32_t rate_burst; /* table's size is fixed at start */
    /* the default site and each --host's, their planner's settings made
     * (--gzip, --gzip-static, --expires and --listings are in them) */
    struct httpd_sites *sites;
    struct http_access access; /* --allow, --deny in their order */
};

/* Settings, written before the runtime starts and read-only after,
 * except the live ones, which a reload (SIGHUP) replaces whole while
 * workers read them. */

struct httpd_config {
    const char *root_path;
    int root_fd; /* O_PATH|O_DIRECTORY of --root */
    size_t cache_size;
    /* --open-files: descriptors the cache's objects of files whose body
     * it does not keep may hold open at once (0: none, each request
     * opens its file) */
    size_t open_files;
    int idle_timeout_ms;
    _Atomic int access_log_fd;          /* -1: off */
    const char *status_path;            /* NULL: no status page */
    const struct http_mime_table *mime; /* --mime-types, NULL: core's */
    bool dotfiles; /* serve and list names starting with '.' */
    /* the settings a SIGHUP may change (never NULL once serving), and
     * whether they have address rules (accept skips the section without) */
    struct httpd_live *_Atomic live;
    _Atomic bool access_rules;
    unsigned per_ip_v6_prefix; /* an IPv6 client's bits in its rate key */
    /* --tls-port's context (user/tls), NULL: no HTTPS; a reload swaps
     * its certificate inside it */
    struct ktcp_tls_ctx *tls;
    int tls_handshake_timeout_ms;
    /* --proxy-protocol, --tls-proxy-protocol: a PROXY header starts
     * each connection of the port (0) or of --tls-port (1) */
    bool proxy_protocol[2];
    unsigned listing_max; /* --listing-max, 0: any */
    size_t listing_bytes; /* --listing-bytes, 0: any */
    /* How httpd_log_open opens a file: fd or -errno (main sets it: started
     * as root, through the opener that kept root) */
    int (*open_log)(const char *path);
};
extern struct httpd_config httpd_cfg;

/* The layers, lowest first; each file calls only into the ones above it
 * in this list (and core/, rt); scripts/check-layers holds them to it:
 *   config    httpd-config.c   httpd_cfg, read by every layer
 *   root      httpd-root.c     files beneath --root
 *   output    httpd-send.c     a planned head and a body in memory
 *   cache     httpd-gzip.c     gzip and its threads
 *             httpd-cache.c    metadata, small bodies
 *             httpd-cache-gz.c gzip copies of cached files
 *   listing   httpd-listing.c  a directory streamed as its body
 *   log       httpd-log.c      Date, counters, access log
 *   access    httpd-access.c   address rules, request rates
 *   status    httpd-status.c   the counters as a page (--status-path)
 *   respond   httpd-respond.c  core's planner run for one request, its
 *                              plan carried out
 *   conn      httpd-conn.c     read, parse, answer, drain, linger, close
 *   proxy     httpd-proxy.c    a listener's PROXY protocol header
 *   tls       httpd-tls.c      --tls-port's connections: plain HTTP
 *                              refused, the handshake, then conn over
 *                              TLS records (user/tls) */

/* ---- root (httpd-root.c) ---- */
/* openat2(root, rel, RESOLVE_BENEATH): -EXDEV/-ELOOP if it leads out. */
int httpd_open_beneath(int root, const char *rel, int flags);
int httpd_open_resource(int root, const char *rel);

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
    struct httpd_file *file; /* the entry the body comes from, or NULL */
    /* the tree of the Host's site, copied when the request began (a
     * reload may replace the site while the body goes out) */
    struct httpd_root root;
    /* the thread's data, got when the request began: valid until the
     * first wait, so for the plan's lookups (made before any send) */
    struct httpd_worker *w;
    /* the live settings while the request is planned (inside a read-side
     * section), NULL before and once its head is built */
    const struct httpd_live *live;
};

/* Enter the read-side section of r's planning and take the live
 * settings; leave it (no-op when left) before the first wait: a
 * coroutine may resume on another thread. A file that calls them defines
 * _LGPL_SOURCE first, for liburcu's inline read side. */
static inline const struct httpd_live *httpd_live_enter(struct httpd_req *r)
{
    urcu_memb_read_lock();
    r->live = atomic_load_explicit(&httpd_cfg.live, memory_order_acquire);
    return r->live;
}
static inline void httpd_live_leave(struct httpd_req *r)
{
    if (r->live) {
        r->live = NULL;
        urcu_memb_read_unlock();
    }
}

/* Build p's head and send it, with body[0..body_len) unless p is
 * head-only. more: MSG_MORE (a body or another response follows). False
 * if the connection must be closed. */
bool httpd_send_head(struct httpd_req *r,
                     const struct http_plan *p,
                     const void *body,
                     size_t body_len,
                     bool more);

/* ---- content cache (httpd-cache.c) ---- */

/* One version of one file (device, inode, size, mtime): core's struct
 * http_cache_obj (its body when small enough, its gzip copy once built, a
 * directory's listed names once a listing built them) in core's object
 * table. Every path that names the file shares it, so aliases store the
 * body once. Found by (device, inode) and version; freed when no path
 * entry, reader or gzip build holds it, and counted against --cache-size
 * until then. */
struct httpd_obj {
    struct rcu_head rcu;
    struct http_cache_obj c;
    /* a regular file whose body is not kept: its descriptor, read-only,
     * opened beneath the root by the load that made the object, within
     * --open-files; -1 when none (requests open the file). Read with an
     * explicit offset only; closed when the object is freed */
    int fd;
};

/* One path's entry in the path index: core's struct http_cache_entry,
 * core's struct http_resource (what the planner reads: its MIME type
 * comes from the path) and the file's object. Immutable after
 * publication except the atomics and the LRU link. Readers hold a
 * reference (httpd_cache_get/put), never a bare RCU pointer. */
struct httpd_file {
    struct cds_lfht_node node;
    struct rcu_head rcu;
    struct http_cache_entry c; /* refs, stamps, LRU, body, meta, ... */
    unsigned long hash;
    struct httpd_root root; /* the tree it was found in */
    /* the heads of its plain answers (core's http_head_memo), one per
     * kind and disposition, [kind][keep_alive]: NULL until the first
     * response of that kind makes it, freed with the entry */
    struct http_head_memo *_Atomic memo[HTTP_HEAD_MEMO_KINDS][2];
    size_t path_len;
    char path[];
};

static inline struct httpd_obj *httpd_obj_of(const struct httpd_file *f)
{
    return caa_container_of(f->c.obj, struct httpd_obj, c);
}


int httpd_cache_init(void);
struct httpd_worker;
/* 0 with *out referenced, or -errno (-ENOENT, -EXDEV/-ELOOP: leads out of
 * the root, -EACCES, ...). w: the calling thread's (rt_worker_data(), got
 * since its last wait), whose lookup memo it reads and fills, or NULL. */
int httpd_cache_get(struct httpd_worker *w,
                    const struct httpd_root *root,
                    const char *rel,
                    size_t len,
                    struct httpd_file **out);
void httpd_cache_put(struct httpd_file *f);
/* Bytes charged against --cache-size, and files (objects) held, right
 * now; an entry a reader still holds stays counted until it lets go. */
void httpd_cache_usage(size_t *bytes, size_t *entries);
/* Descriptors the cache's objects hold open now (--open-files). */
size_t httpd_cache_open_files(void);
/* The descriptor to send f's body from: its object's when it has one
 * and f names rel (the plan's path), else -1 (open the file). Valid
 * while the caller holds f. */
int httpd_cache_file_fd(const struct httpd_file *f,
                        const char *rel,
                        size_t len);
/* The gzip copy of f if it is built. Otherwise NULL (identity is sent):
 * a small cached body is compressed on the spot, a bigger one is queued
 * for the gzip threads (once per file version) and later requests get
 * the copy. Never for an entry the cache could not keep, so a copy is
 * never made per request. */
const struct http_gz *httpd_cache_gzip(struct httpd_file *f);

/* What httpd-cache-gz.c and httpd-listing.c use of the cache: core's
 * state of it (the LRU list, the counters, the primitives); is o the file
 * whose status is st (device, inode, size, mtime, type). */
struct stat;
extern struct http_cache httpd_cache_core;
bool httpd_obj_is(const struct http_cache_obj *o, const struct stat *st);

/* ---- gzip (httpd-gzip.c) ---- */
/* gzip in[0..len) into a fresh struct http_gz; NULL on failure. */
struct http_gz *httpd_gzip(const char *in, size_t len);

/* A gzip build off the request path, run by one of the gzip threads. */
struct httpd_gzip_job {
    struct httpd_gzip_job *next;
    void (*run)(struct httpd_gzip_job *job);
};
/* Start the gzip threads; 0 or -errno. */
int httpd_gzip_start(void);
/* Queue job; false when the queue is full (the caller drops it). */
bool httpd_gzip_queue(struct httpd_gzip_job *job);

/* ---- listing (httpd-listing.c) ---- */
struct httpd_listing;
/* The listing of the open directory d (p->path names it), its names read
 * and sorted, within the listing budget (--listing-max, --listing-bytes):
 * 0 and *out; -EBUSY beyond the budget, -ENOMEM. d is the listing's (closed
 * on failure). */
int httpd_listing_open(const struct http_plan *p,
                       const struct httpd_root *root,
                       DIR *d,
                       struct httpd_listing **out);
/* Stream l as p's body and free it. False if the connection must be
 * closed. */
bool httpd_listing_send(struct httpd_req *r,
                        const struct http_plan *p,
                        struct httpd_listing *l);
void httpd_listing_free(struct httpd_listing *l);
/* Bytes charged against --listing-bytes now. */
size_t httpd_listing_bytes(void);

/* ---- per-thread state, date and access log (httpd-log.c) ---- */

/* The counters a request adds to, after the runtime's own (rt.h); the
 * same set and meanings as khttpd's /proc/net/khttpd. */
enum httpd_counter {
    HTTPD_C_REQUESTS = RT_C_APP,
    HTTPD_C_STATUS_1XX, /* .. HTTPD_C_STATUS_1XX + 4 for 5xx */
    HTTPD_C_STATUS_2XX,
    HTTPD_C_STATUS_3XX,
    HTTPD_C_STATUS_4XX,
    HTTPD_C_STATUS_5XX,
    HTTPD_C_CACHE_HITS,
    HTTPD_C_CACHE_MISSES,
    HTTPD_C_CACHE_EVICTIONS,
    /* --tls-port: handshakes completed, failed (refused, garbage, plain
     * HTTP, timed out, closed), and of the completed those whose records
     * the kernel writes (kTLS TX) and reads (kTLS RX) */
    HTTPD_C_TLS_HANDSHAKES,
    HTTPD_C_TLS_HANDSHAKE_FAILURES,
    HTTPD_C_TLS_KTLS_TX,
    HTTPD_C_TLS_KTLS_RX,
    HTTPD_C_LISTINGS_REFUSED,
    HTTPD_C_LOG_REOPEN_FAILED, /* a reopen of the access log failed */
    HTTPD_C_DENIED,            /* connections closed by an address rule */
    HTTPD_C_RATE_LIMITED,      /* requests answered 429 (--limit-req) */
    /* PROXY protocol headers taken, and connections closed for a missing,
     * malformed, oversized or unfinished one */
    HTTPD_C_PROXY_HEADERS,
    HTTPD_C_PROXY_REFUSED,
    HTTPD_C_END
};
_Static_assert(HTTPD_C_END <= RT_NCOUNTERS, "more counters than rt.h has");

/* A thread's memo of its recent cache lookups, in front of the shared
 * table: the entry a path hash last led to, and the table's generation
 * then (httpd-cache.c). */
#define HTTPD_LOOKUP_MEMO 16
struct httpd_lookup_memo {
    uint64_t gen;
    unsigned long hash;
    struct httpd_file *f;
};

/* What each runtime thread keeps for the handler (rt_worker_data): the
 * Date header of the current second, the access-log buffer and the lookup
 * memo. */
struct httpd_worker {
    int64_t date_second;
    char date[32]; /* HTTP-date of date_second, NUL-terminated */
    char *log_buf;
    size_t log_len, log_cap;
    struct httpd_lookup_memo memo[HTTPD_LOOKUP_MEMO];
};
const char *httpd_date_now(struct httpd_worker *w, int64_t *now);
/* The runtime's worker_flush and worker_exit hooks (struct rt_config). */
void httpd_worker_flush(void *data);
void httpd_worker_exit(void *data);
/* Count one answered request (unless r->uncounted) and log it. */
void httpd_log_request(struct httpd_req *r);
/* Open path ("-": stdout) as the access log, or turn it off (NULL); the
 * descriptor workers write to changes atomically (dup2), so a rename and a
 * reopen lose no line. Main thread only. 0 or -errno. */
int httpd_log_open(const char *path);

/* ---- address rules and request rates (httpd-access.c) ---- */
/* The client address every check reads is the connection's peer_family
 * and peer_addr (rt.h), set at accept; a PROXY protocol header replaces
 * them with the address it carries, before the checks below run for it.
 *
 * The runtime's admit hook: false (counted as denied) when the first
 * --allow/--deny rule matching c's address denies it; the connection is
 * then closed at accept, before any byte is read. On a listener whose
 * clients arrive through a PROXY header the address at accept is the
 * balancer's: the rules are then checked (with this function) once the
 * header has set the client's address, and a denied client closed. */
bool httpd_client_allowed(const struct rt_conn *c);

/* --limit-req: the table of entries addresses (core's http_rate.h), set
 * up once (later calls keep the first table); 0 or -ENOMEM. */
int httpd_rate_setup(uint32_t entries);
/* One request from c's address against --limit-req (l's rate and burst):
 * 0 when it passes, else the seconds it should wait (429 with
 * Retry-After), counted. */
uint32_t httpd_rate_take(const struct rt_conn *c, const struct httpd_live *l);
/* Addresses in the rate table now. */
uint64_t httpd_rate_entries(void);

/* ---- status page (httpd-status.c) ---- */
/* Is r a request for --status-path (or its /metrics)? */
bool httpd_status_wanted(const struct httpd_req *r);
/* Answer it with the counters, planned in p (a GET or HEAD the planner
 * has dispatched); false if the connection must close. */
bool httpd_status_serve(struct httpd_req *r, struct http_plan *p);

/* ---- respond (httpd-respond.c) ---- */
/* Plan the answer to one parsed request and carry it out; the plan (its
 * connection disposition) is left in p. False if the connection must be
 * closed at once (a send failed). The operator's settings (expires,
 * gzip_static, error pages, MIME table) are added to in here. */
bool httpd_respond(struct httpd_req *r,
                   struct http_plan_input *in,
                   struct http_plan *p);
/* Answer status outside a parsed request (parse errors, 408), with its
 * custom page if there is one; the connection closes after it. */
void httpd_respond_error(struct httpd_req *r,
                         const struct http_plan_input *in,
                         int status);

/* ---- connection (httpd-conn.c) ---- */
enum rt_verdict httpd_conn_serve(struct rt_conn *c);
void httpd_conn_refuse(int fd);

/* ---- proxy (httpd-proxy.c) ---- */
/* Read c's PROXY protocol header (its listener has --proxy-protocol or
 * --tls-proxy-protocol): true when it was whole and valid (the client it
 * names is c's peer from now on), false when c must close (counted). */
bool httpd_proxy_read(struct rt_conn *c);

/* ---- tls (httpd-tls.c) ---- */
/* The runtime's handler: the port's connections to httpd_conn_serve,
 * --tls-port's through TLS first. */
enum rt_verdict httpd_serve(struct rt_conn *c);

#endif /* KTCP_HTTPD_H */
