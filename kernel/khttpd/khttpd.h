/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * khttpd.h — what the parts of khttpd.ko share: parameters, counters, the
 * connection, the content cache entry. All protocol logic lives in core/;
 * this module only moves bytes, files and pages.
 */
#ifndef KHTTPD_H
#define KHTTPD_H

#include <linux/file.h>
#include <linux/fs.h>
#include <linux/list.h>
#include <linux/path.h>
#include <linux/percpu.h>
#include <linux/refcount.h>
#include <linux/timer.h>
#include <linux/types.h>
#include <linux/workqueue.h>

#include "http_core.h"
#include "ktcp_sock.h"

struct seq_file;
struct sock;
struct socket;

/* ---- parameters (main.c), read-only after load ---- */
extern uint khttpd_idle_timeout_ms;
extern ulong khttpd_cache_bytes;
extern bool khttpd_gzip_enabled;
extern struct path khttpd_root; /* the served directory, referenced */

/* Files up to this size keep their body in the cache and leave with one
 * sendmsg; bigger ones are opened per request and spliced from the page
 * cache. The same limit as the user-space server, so both answer alike. */
#define KHTTPD_SMALL_FILE_MAX (64 * 1024)
/* gzip copies are made for compressible files up to this size. */
#define KHTTPD_GZIP_MAX (4 * 1024 * 1024)
/* Request bodies are read and dropped up to this size, else 413. */
#define KHTTPD_MAX_BODY (64 * 1024)
/* The request buffer grows to this; core answers 414/431 before. */
#define KHTTPD_REQ_BUF_MAX (32 * 1024)
#define KHTTPD_REQ_BUF_INITIAL 4096
#define KHTTPD_HEAD_BUF 2048
#define KHTTPD_MAX_STORED_HEADERS 32
/* Longest normalised path (NUL included). */
#define KHTTPD_PATH_MAX 4096

/* ---- counters (stats.c) ---- */
struct khttpd_stats {
	u64 accepted;
	u64 refused;
	u64 requests;
	u64 status[5]; /* 1xx .. 5xx */
	u64 bytes_out;
	u64 cache_hits;
	u64 cache_misses;
	u64 cache_evictions;
	u64 timeouts;
	u64 errors;
};
extern struct khttpd_stats __percpu *khttpd_stats;
#define khttpd_count(field, n) this_cpu_add(khttpd_stats->field, (n))
void khttpd_count_status(int status);
int khttpd_stats_init(void);
void khttpd_stats_exit(void);

/* ---- content cache (cache.c) ---- */
struct khttpd_gz {
	size_t len;
	bool worthless; /* compressed was not smaller: send identity */
	char etag[HTTP_ETAG_MAX + 4];
	char data[];
};

/*
 * One path's metadata, and its body and gzip copy when small enough.
 * Immutable once published, except gz (set once) and the stamps. Users
 * hold a reference (khttpd_cache_get/put), never a bare RCU pointer.
 */
struct khttpd_entry {
	struct hlist_node node; /* in the hash table, under khttpd_cache_lock */
	struct rcu_head rcu;
	refcount_t refs;
	bool in_table; /* under khttpd_cache_lock */
	u32 hash;
	bool is_dir;
	u64 size;
	s64 mtime;
	long mtime_nsec;
	u64 ino;
	dev_t dev;
	unsigned long checked; /* jiffies of the last revalidation */
	unsigned long used; /* jiffies of the last hit, for eviction */
	size_t charge; /* bytes counted against cache_bytes */
	char etag[HTTP_ETAG_MAX + 1];
	const struct http_mime_type *mime;
	char *body; /* whole file, or NULL */
	struct khttpd_gz *gz; /* made on the first gzip request */
	size_t path_len;
	char path[];
};

int khttpd_cache_get(const char *rel, size_t len, struct khttpd_entry **out);
void khttpd_cache_put(struct khttpd_entry *e);
const struct khttpd_gz *khttpd_cache_gzip(struct khttpd_entry *e);
void khttpd_cache_exit(void);
void khttpd_cache_show(struct seq_file *m);

/* ---- files (file.c) ---- */
/* Look rel up beneath the root: -EXDEV/-ELOOP when it leads out. */
int khttpd_lookup_beneath(const char *rel, struct path *out);
struct file *khttpd_open_beneath(const char *rel);
int khttpd_read_whole(struct file *f, char *buf, size_t len);

/* ---- gzip (gzip.c) ---- */
struct khttpd_gz *khttpd_gzip(const char *in, size_t len);

/* ---- connections (conn.c) ---- */
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
};

struct khttpd_conn {
	struct socket *sock;
	struct work_struct work; /* runs on events: data, space, state, timer */
	struct work_struct release; /* frees the connection, off its own work */
	struct task_struct *thread; /* mode=kthread: the connection's thread */
	bool kicked; /* mode=kthread: run the step again */
	struct timer_list timer; /* idle, head, body and linger deadlines */
	struct list_head node; /* in khttpd_conns */
	struct ktcp_sock_callbacks saved; /* the socket's own */

	/* Below: touched only by the connection's step (work or thread). */
	enum khttpd_conn_state state;
	bool dead; /* closed; later runs return at once */
	bool close_after; /* close (lingering) once the response is out */
	unsigned long last_active; /* jiffies of the last read or write */
	unsigned long head_deadline; /* 0: no partial head */
	unsigned long body_deadline;
	unsigned long linger_deadline;
	unsigned int linger_reads;

	char *rbuf;
	u32 rstart, rlen, rcap; /* the current request is rbuf[rstart..rlen) */
	u64 body_left; /* Content-Length body still to drop */
	bool body_chunked;
	struct http_chunked_decoder chunked;
	struct http_parser parser;
	struct http_header headers[KHTTPD_MAX_STORED_HEADERS];

	struct khttpd_out out;
	char ebuf[64]; /* short error bodies */
	char hbuf[KHTTPD_HEAD_BUF];
};

/* What a request handler needs while answering one request. */
struct khttpd_req {
	struct khttpd_conn *conn;
	const struct http_request *req;
	const char *rb; /* buffer the request's slices point into */
	bool head; /* HEAD: same head as GET, no body */
	bool keep_alive;
	int status;
};

void khttpd_head_init(struct khttpd_req *r, struct http_response_head *h,
		      int status);
/* Build h into the connection's head buffer; the body is attached after.
 * False if the head could not be built (the connection is then closed). */
bool khttpd_send_head(struct khttpd_req *r, const struct http_response_head *h);
/* Attach a body in memory; ref (may be NULL) is a cache reference the
 * connection drops once the bytes are out. */
void khttpd_send_mem(struct khttpd_req *r, const char *mem, size_t len,
		     struct khttpd_entry *ref);
/* Head plus a short text body; false when the connection must close. */
bool khttpd_send_error(struct khttpd_req *r, int status);
void khttpd_send_file(struct khttpd_req *r, struct file *f, loff_t pos,
		      u64 len);

/* file.c: answer a GET/HEAD for a normalised path. */
bool khttpd_file_serve(struct khttpd_req *r, const char *rel,
		       const struct http_path_info *info);
/* listing.c */
bool khttpd_listing_serve(struct khttpd_req *r, const char *rel,
			  size_t rel_len);
/* Render the next piece of a listing into out.mem; 0, or -errno. Sets
 * out.listing to NULL (and frees it) after the last piece. */
int khttpd_listing_next(struct khttpd_conn *conn);
void khttpd_listing_free(struct khttpd_listing *l);

/* conn.c: the connections, their registry and their executor. */
enum khttpd_mode {
	KHTTPD_MODE_UNBOUND, /* CMWQ, WQ_UNBOUND */
	KHTTPD_MODE_BOUND, /* CMWQ, per-CPU workers */
	KHTTPD_MODE_KTHREAD, /* a kthread per connection */
};
int khttpd_conns_init(enum khttpd_mode mode);
/* Unload, first step: no new work starts, live connections close. */
void khttpd_conns_stop(void);
/* Unload, last step: wait until every connection is freed. */
void khttpd_conns_exit(void);
bool khttpd_stopping(void);
unsigned int khttpd_conns_active(void);
/* Take over an accepted socket; on error the caller still owns it. */
int khttpd_conn_start(struct socket *sock);
/* Answer 503 and close a socket over max_conns. */
void khttpd_refuse(struct socket *sock);

#endif /* KHTTPD_H */
