/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * khttpd.h — what the parts of khttpd.ko share: parameters, counters, the
 * connection, the content cache entry. All protocol logic lives in core/;
 * this module only moves bytes, files and pages.
 */
#ifndef KHTTPD_H
#define KHTTPD_H

#include <linux/file.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/fs.h>
#include <linux/list.h>
#include <linux/path.h>
#include <linux/percpu.h>
#include <linux/refcount.h>
#include <linux/timer.h>
#include <linux/types.h>
#include <linux/workqueue.h>

#include "http_core.h"
#include "ktcp_server.h"

struct sock;
struct socket;

/* ---- parameters (params.c), read-only after load ---- */
extern ulong khttpd_cache_bytes;
extern bool khttpd_dotfiles; /* serve and list names starting with '.' */
extern ulong khttpd_listing_bytes; /* listings' buffers and builds; 0: any */
extern uint khttpd_listing_max; /* listings in flight; 0: any */
/* a PROXY protocol header starts every connection (not adopted ones) */
extern bool khttpd_proxy_protocol;
extern struct http_access khttpd_access; /* acl=; n 0: every client */
extern struct http_rate_conf khttpd_rate_conf; /* rate=; rate 0: off */
/*
 * A site: the default one (root=, error_pages=, index=, fallback=, cors=
 * and the site= file's lines before any host), or one the site= file's
 * host blocks name (at most HTTP_VHOSTS_MAX). Read-only after load; freed
 * at unload, after every user.
 */
struct khttpd_site {
	struct path root; /* the served directory, referenced */
	u32 id; /* 0: the default, 1 + k: host k; part of the cache's key */
	struct http_error_page error_pages[HTTP_SERVER_ERROR_PAGES_MAX];
	size_t error_pages_n;
	const struct http_index_files *index; /* NULL: index.html */
	struct http_index_files index_files;
	char fallback[HTTP_ERROR_PAGE_PATH_MAX]; /* relative */
	size_t fallback_len; /* 0: no fallback */
	struct http_headers headers; /* the fields added to responses, CORS */
	/* The planner's settings (pointing into this site and at the module's
	 * parameters), made once at load when every table is read: requests
	 * point at it. The parameters are read-only (0444) and the sites are
	 * freed only after every connection is (khttpd_exit), so it never
	 * changes nor goes while a plan reads it.
	 */
	struct http_site_settings plan;
};

extern struct khttpd_site khttpd_default_site;
/* The site a request's Host names (core's http_vhosts_request): a host
 * block's, else the default (no request, no Host, an unknown name).
 */
const struct khttpd_site *khttpd_site_of(const struct http_request *req,
					 const char *buf);
/* Check every parameter and take the roots: 0, or -errno (nothing held).
 * p: the server's parameters; uid, gid: the server's user.
 */
int khttpd_params_load(struct ktcp_server_params *p, kuid_t *uid, kgid_t *gid);
/* What is served, where, how: one line in the kernel log. */
void khttpd_params_log(void);
/* Unload: drop every site's root. */
void khttpd_params_put(void);

/*
 * The layers, lowest first; each file calls only into those before it
 * (and core/, kernel/common):
 *   params.c   the module's parameters, checked at load
 *   stats.c    per-CPU counters
 *   rate.c     request rates per client address: the table, its locks
 *   trace.c    the request trace event
 *   tls.c      kTLS sockets: the adoption checks, records read, close_notify
 *   root.c     lookups and opens beneath the served root
 *   gzip.c     gzip of a whole file, in slices
 *   out.c      the output: head, memory and file pages sent as the socket
 *              takes them
 *   cache.c    metadata (core's struct http_resource), small bodies, gzip
 *   listing.c  a directory rendered piece by piece into the output
 *   respond.c  core's planner run for one request, its plan attached to
 *              the connection's output
 *   conn.c     the connection: read, parse, respond, send, drain, linger
 *   proc.c     /proc/net/khttpd
 *   adopt.c    /proc/net/khttpd_adopt: sockets a TLS agent hands over
 *   main.c     load and unload
 * Limits shared with the user-space server are core's (http_limits.h).
 */

/* ---- counters (stats.c) ---- */
/* What only HTTP counts; connections are counted by ktcp_server. */
struct khttpd_stats {
	u64 requests;
	u64 status[5]; /* 1xx .. 5xx */
	u64 bytes_out;
	u64 cache_hits;
	u64 cache_misses;
	u64 cache_evictions;
	u64 listings_refused; /* 503: beyond listing_max or listing_bytes */
	u64 denied; /* connections closed at accept by an address rule */
	u64 rate_limited; /* requests answered 429 (rate=, burst=) */
	u64 tls_adopted; /* kTLS sockets taken over from an agent */
	u64 tls_nondata; /* kTLS connections ended by a non-data record */
	u64 proxy_headers; /* PROXY protocol headers taken */
	u64 proxy_refused; /* closed: no, a bad or an unfinished header */
};

extern struct khttpd_stats __percpu *khttpd_stats;
/* checkpatch: MACRO_ARG_PRECEDENCE: field is a member name, not an expression */
#define khttpd_count(field, n) this_cpu_add(khttpd_stats->field, (n))
void khttpd_count_status(int status);
int khttpd_counters_init(void);
void khttpd_counters_exit(void);
/* The counters of every CPU added up. */
void khttpd_stats_sum(struct khttpd_stats *sum);

/* ---- request rates (rate.c) ---- */
/* The table of rate_entries addresses, if rate= is set: 0 or -ENOMEM. */
int khttpd_rate_init(void);
void khttpd_rate_exit(void);
/* One request from addr (its key: IPv6 cut to v6_prefix bits): 0 when it
 * passes, else the seconds to wait (429 with Retry-After), counted.
 */
u32 khttpd_rate_take(const struct in6_addr *addr, unsigned int v6_prefix);
/* Addresses in the table now. */
u64 khttpd_rate_entries(void);

/* ---- /proc/net/khttpd (proc.c): the counters' files; they read the
 * counters and the connections, so they come after both and go first ----
 */
int khttpd_stats_init(void);
void khttpd_stats_exit(void);

/* ---- content cache (cache.c) ---- */
/*
 * One version of one file (device, inode, size, mtime): core's struct
 * http_cache_obj (its body when small enough, its gzip copy once built, a
 * directory's listed names once a listing built them) in core's object
 * table. Every path naming the file shares it, so aliases store the body
 * once. Found by (device, inode) and version; freed when no path entry,
 * reader or gzip build holds it, and counted against cache_bytes until
 * then.
 */
struct khttpd_obj {
	struct rcu_head rcu;
	struct http_cache_obj c;
};

/*
 * One path's entry in the path table: core's struct http_cache_entry, what
 * the planner reads (core's struct http_resource; its MIME type comes from
 * the path) and the file's object. Immutable once published, except the
 * stamps and the LRU link. Users hold a reference (khttpd_cache_get/put),
 * never a bare RCU pointer.
 */
struct khttpd_entry {
	struct hlist_node node; /* in the path table, under khttpd_cache_lock */
	struct http_cache_entry c; /* refs, stamps, LRU, body, meta, ... */
	struct rcu_head rcu;
	u32 hash;
	const struct khttpd_site *site; /* with the path, the key */
	size_t path_len;
	char path[];
};

static inline struct khttpd_obj *khttpd_obj_of(const struct khttpd_entry *e)
{
	return container_of(e->c.obj, struct khttpd_obj, c);
}

int khttpd_cache_init(void);
/* The cache's memory for bodies, copies and listings' names: kvmalloc'd
 * (GFP_KERNEL: never under a spinlock), kvfree'd (NULL too).
 */
void *khttpd_alloc(size_t size);
void khttpd_free(void *p);
/* The entry of rel beneath site's root (the site is part of the key). */
int khttpd_cache_get(const struct khttpd_site *site, const char *rel,
		     size_t len, struct khttpd_entry **out);
void khttpd_cache_put(struct khttpd_entry *e);
/* The gzip copy of e if it is built, else NULL (send identity): a small
 * cached body is compressed on the spot, a bigger one is queued for the
 * gzip workqueue once per file version. Never for an entry the cache could
 * not keep, so a copy is never made per request.
 */
const struct http_gz *khttpd_cache_gzip(struct khttpd_entry *e);
/* Publish t as the name table of e's object (a directory) and charge it
 * against cache_bytes: false (t not taken) when the object has one.
 */
bool khttpd_cache_set_names(struct khttpd_entry *e, struct http_name_table *t);
/* Is o this version (st) of its file? */
bool khttpd_obj_is(const struct http_cache_obj *o, const struct kstat *st);
void khttpd_cache_exit(void);
/* What the cache holds now: bytes charged and files (objects); what a
 * reader still holds stays counted until it lets go.
 */
void khttpd_cache_usage(size_t *bytes, size_t *entries);

/* ---- the served root (root.c) ---- */
/* Every call below runs as the server's user (uid, gid): the credential. */
int khttpd_cred_init(kuid_t uid, kgid_t gid);
void khttpd_cred_exit(void);
/* Look rel up beneath the site's root: -EXDEV/-ELOOP when it leads out, -EACCES
 * when the server's user may not read it.
 */
int khttpd_lookup_beneath(const struct khttpd_site *site, const char *rel,
			  struct path *out);
struct kstat;
int khttpd_getattr(const struct path *path, struct kstat *st);
struct file *khttpd_open_path(const struct path *path);
struct file *khttpd_open_beneath(const struct khttpd_site *site,
				 const char *rel);
struct file *khttpd_open_dir_beneath(const struct khttpd_site *site,
				     const char *rel);
struct dir_context;
int khttpd_iterate_dir(struct file *dir, struct dir_context *ctx);
int khttpd_read_whole(struct file *f, char *buf, size_t len);
struct splice_desc;
struct pipe_inode_info;
/* splice_direct_to_actor() as the server's user (out.c's zero-copy send) */
ssize_t khttpd_splice_file(struct file *f, struct splice_desc *sd,
			   int (*actor)(struct pipe_inode_info *pipe,
					struct splice_desc *sd));
/* A listing row's metadata: rel is "dir/name" beneath the root. */
int khttpd_stat_beneath(const struct khttpd_site *site, const char *rel,
			struct kstat *st);

/* ---- gzip (gzip.c) ---- */
/* gzip in[0..len) into a fresh struct http_gz, in slices of
 * HTTP_SERVER_GZIP_SLICE with cond_resched between them; NULL on failure
 * or when *stop turns true.
 */
struct http_gz *khttpd_gzip(const char *in, size_t len, const bool *stop);

/* ---- the connection (conn.c) and its output (out.c) ---- */
enum khttpd_conn_state {
	KHTTPD_READ_HEAD, /* waiting for (the rest of) a request head */
	KHTTPD_SEND, /* a response is going out */
	KHTTPD_DRAIN_BODY, /* dropping the body of the request just answered */
	KHTTPD_LINGER, /* write side shut: reading until the peer closes */
};

struct khttpd_listing;

/* The response being sent: head, then one body source. */
struct khttpd_out {
	u32 head_off, head_len; /* in conn->hbuf */
	const char *mem; /* body in memory */
	size_t mem_off, mem_len;
	struct khttpd_entry *ref; /* keeps mem alive when it is cached data */
	struct file *file; /* body spliced from the page cache */
	loff_t pos;
	u64 file_left;
	struct khttpd_listing *listing; /* body rendered as it goes */
	bool listing_last; /* mem holds the listing's last piece */
	bool more; /* another request is already here: MSG_MORE at the end */
	/* kTLS: bytes of the record the kernel holds open (sent with
	 * MSG_MORE) that no send pushed yet
	 */
	u32 rec_open;
	/* multipart/byteranges: the plan naming the parts, the cached body
	 * they come from (NULL: the file), the next part head to build
	 * (ranges.n: the closing delimiter)
	 */
	const struct http_plan *parts;
	const char *parts_mem;
	unsigned int part_next;
};

/*
 * What a request needs only while it is parsed and answered: taken from a
 * slab cache of its own when the first byte of a request arrives (with the
 * request buffer), given back when its response is out and nothing more is
 * buffered — an idle keep-alive connection holds only struct khttpd_conn.
 */
struct khttpd_req {
	struct http_body_drain drain; /* the body of the request answered */
	struct http_parser parser;
	struct http_header headers[HTTP_SERVER_MAX_STORED_HEADERS];
	struct khttpd_out out;
	struct http_plan plan; /* the response going out (its error text) */
	struct khttpd_trace_req *trace; /* the request being traced, if any */
	/* Last: not cleared when taken, a response's head is built into it. */
	char hbuf[HTTP_SERVER_HEAD_BUF];
};

/*
 * A client's address: the socket's peer (a dual-stack listener's IPv4 peer
 * as IPv4), or the one a PROXY protocol header named.
 */
union khttpd_addr {
	struct sockaddr sa;
	struct sockaddr_in v4;
	struct sockaddr_in6 v6;
};

struct khttpd_conn {
	struct ktcp_conn c; /* the lifecycle's part: socket, timer, step */
	/* The client for the trace and per-request checks; the count per
	 * address made at accept (max_conns_per_ip) stays on the peer.
	 */
	union khttpd_addr client;
	/* proxy_protocol: the header's parse until it is whole, else NULL */
	struct http_proxy *proxy;

	/* Below: touched only by the connection's step (work or thread). */
	enum khttpd_conn_state state;
	bool close_after; /* close (lingering) once the response is out */
	bool linger; /* closing: shut the write side and drop input first */
	bool tls; /* adopted: kTLS does the records (tls.c) */
	bool tls_notified; /* close_notify sent */
	bool tls_flushing; /* closing: kTLS still holds records */
	unsigned long head_deadline; /* 0: no partial head */
	unsigned long body_deadline;
	unsigned long linger_deadline;
	unsigned int linger_reads;

	/* Both NULL while idle with nothing buffered, both set otherwise. */
	char *rbuf;
	struct khttpd_req *req;
	size_t rstart, rlen, rcap; /* the current request: rbuf[rstart..rlen) */
	u64 sent; /* bytes sent on this connection */
};

/* ---- out.c ---- */
/* Send what the socket takes of the head, the bytes in memory and the
 * file's pages: 0 when they are out, -EAGAIN (wait for write_space),
 * -EINPROGRESS (*pieces file pieces sent: yield) or an error.
 */
int khttpd_out_flush(struct khttpd_conn *conn, int *pieces);

/* ---- tls.c: kTLS connections ---- */
/* 0 if sock is an established TCP socket with the tls ULP and kTLS set for
 * sending and receiving, else -EINVAL.
 */
int khttpd_tls_check(struct socket *sock);
/* kernel_recvmsg without blocking, of application data only: a record of
 * another type (alert, handshake) is counted and ends it (-ESHUTDOWN).
 */
int khttpd_tls_recv(struct socket *sock, char *buf, size_t len);
/* Send the close_notify alert, without blocking. */
int khttpd_tls_close_notify(struct socket *sock);
/* kTLS still holds bytes it has not handed to TCP. */
bool khttpd_tls_tx_pending(struct socket *sock);

/* ---- trace.c: the khttpd:khttpd_request trace event ---- */
/* Note the request just planned (req NULL: none parsed; base: the buffer
 * its slices point into) if the event is enabled.
 */
void khttpd_trace_begin(struct khttpd_conn *conn,
			const struct http_request *req, const char *base,
			int status);
/* Emit the noted request's record, if any: its response is out or the
 * connection ends.
 */
void khttpd_trace_end(struct khttpd_conn *conn);

/* ---- listing.c ---- */
/* The piece buffer each listing connection renders into (one bucket). */
#define KHTTPD_LISTING_MEM 8192
/* Open the directory rel for a listing (chunked: HTTP/1.1 framing) and
 * find or build its name table; an ERR_PTR on failure, -EBUSY beyond the
 * listing budget.
 */
struct khttpd_listing *khttpd_listing_open(const struct khttpd_site *site,
					   const char *rel, size_t rel_len,
					   bool chunked, bool dotfiles);
/* Render the next piece of a listing into out.mem; 0, or -errno. Sets
 * out.listing to NULL (and frees it) after the last piece.
 */
int khttpd_listing_next(struct khttpd_conn *conn);
void khttpd_listing_free(struct khttpd_listing *l);
/* Bytes charged against listing_bytes now, and listings in flight. */
void khttpd_listing_usage(size_t *bytes, size_t *active);

/* ---- respond.c ---- */
/* Plan the answer to the request in (core's planner) into conn->plan and
 * attach it to conn->out. False if no head could be built: close.
 */
bool khttpd_respond(struct khttpd_conn *conn, const struct http_plan_input *in);
/* An error for no request (parse error, 408), with its custom page if
 * there is one: then close.
 */
void khttpd_respond_error(struct khttpd_conn *conn, int status);
/* Drop what the output still holds (cache reference, file, listing). */
void khttpd_out_reset(struct khttpd_out *o);

/* ---- conn.c: the HTTP step on kernel/common's connection lifecycle ---- */
/* Listen and serve; the parameters are params.c's. */
int khttpd_conns_start(const struct ktcp_server_params *p);
/* Unload: stop accepting, close every connection, wait until all are freed. */
void khttpd_conns_stop(void);
bool khttpd_stopping(void);
unsigned int khttpd_conns_active(void);
/* The lifecycle's counters: accepted, refused, timeouts, errors. */
void khttpd_conns_sum(struct ktcp_server_stats *sum);
/* Serve a kTLS socket (checked) held by file: on 0 the connection owns the
 * caller's reference to file; -EBUSY over a limit.
 */
int khttpd_conns_adopt(struct file *file);

/* ---- adopt.c: /proc/net/khttpd_adopt ---- */
int khttpd_adopt_init(void);
void khttpd_adopt_exit(void);

#endif /* KHTTPD_H */
