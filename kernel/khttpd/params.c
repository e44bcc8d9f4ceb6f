// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * params.c — the module's parameters: declared, checked once at load
 * (before anything is allocated), and read-only after. The lowest layer:
 * every other file may read what is here, and this file calls none of
 * them.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/fs_struct.h>
#include <linux/log2.h>
#include <linux/fs.h>
#include <linux/namei.h>
#include <linux/path.h>
#include <linux/string.h>
#include <linux/uidgid.h>
#include <linux/user_namespace.h>
#include <linux/mm.h>
#include <linux/workqueue.h>

#include "khttpd.h"

enum khttpd_mode {
	KHTTPD_MODE_UNBOUND, /* CMWQ, WQ_UNBOUND */
	KHTTPD_MODE_BOUND, /* CMWQ, per-CPU workers */
	KHTTPD_MODE_KTHREAD, /* a kthread per connection */
};

static char *root;
module_param(root, charp, 0444);
MODULE_PARM_DESC(root, "directory to serve, an absolute path (required)");

/* Each description on one line: user-visible strings are not split. */
/* clang-format off */
KTCP_SERVER_PARAMS(8081,
		   "connections served at once; more get 503 and are closed; 0 = no limit (mode=kthread: at most 1024 whatever this says) (default 10000)",
		   "close a connection idle this long, and answer 408 to a request head not complete this long after its first byte, in ms; 0 = never (default 30000)");

static char *mode = "unbound";
module_param(mode, charp, 0444);
MODULE_PARM_DESC(mode,
		 "unbound (CMWQ, default), bound (per-CPU CMWQ) or kthread (a thread per connection, for comparison only)");

ulong khttpd_cache_bytes = 64UL << 20;
module_param_named(cache_bytes, khttpd_cache_bytes, ulong, 0444);
MODULE_PARM_DESC(cache_bytes,
		 "content cache bound in bytes (metadata, small bodies, gzip copies); 0 = no caching (default 64 MiB)");

static bool khttpd_gzip_enabled = true;
module_param_named(gzip, khttpd_gzip_enabled, bool, 0444);
MODULE_PARM_DESC(gzip,
		 "serve gzip copies of compressible files to clients that accept them (default Y)");

static uint khttpd_expires_s;
module_param_named(expires_s, khttpd_expires_s, uint, 0444);
MODULE_PARM_DESC(expires_s,
		 "files' 200, 206 and 304 carry Cache-Control: max-age and Expires this many seconds ahead; 0 = off (default 0)");

static bool khttpd_gzip_static;
module_param_named(gzip_static, khttpd_gzip_static, bool, 0444);
MODULE_PARM_DESC(gzip_static,
		 "serve file.gz beside a file, when not older, to clients that accept gzip (default N)");

static char *error_pages;
module_param(error_pages, charp, 0444);
MODULE_PARM_DESC(error_pages,
		 "custom error pages beneath the root, served with the original status: \"404=/404.html,403=/403.html\" (default none: the built-in text)");

static uint uid = 65534;
module_param(uid, uint, 0444);
MODULE_PARM_DESC(uid,
		 "user every file is looked up, opened and read as, with the normal permission checks and no capabilities; not 0 (default 65534, nobody)");

static uint gid = 65534;
module_param(gid, uint, 0444);
MODULE_PARM_DESC(gid,
		 "group of that user, the only one (no supplementary groups); not 0 (default 65534, nogroup)");

static char *dotfiles = "deny";
module_param(dotfiles, charp, 0444);
MODULE_PARM_DESC(dotfiles,
		 "deny (default): a path with a segment starting with '.' answers 404 and such names are not listed, /.well-known/ excepted; allow: serve and list them");

static bool khttpd_listings = true;
module_param_named(listings, khttpd_listings, bool, 0444);
MODULE_PARM_DESC(listings,
		 "list a directory without index.html; N: answer 403 instead (default Y)");

static char *index_files;
module_param_named(index, index_files, charp, 0444);
MODULE_PARM_DESC(index,
		 "a directory's index: the first of these files in it, comma separated, at most 8 (default index.html)");

static char *fallback;
module_param(fallback, charp, 0444);
MODULE_PARM_DESC(fallback,
		 "a missing path (not a dotfile, not under /.well-known/) is answered 200 with this file beneath the root, as a single-page application needs: \"/index.html\" (default none: 404)");

static char *site;
module_param(site, charp, 0444);
MODULE_PARM_DESC(site,
		 "a file of settings read at load, one a line as ktcp-httpd's --config: add-header [/PREFIX ]NAME: VALUE (at most 32), cors ORIGIN|*, and virtual hosts: host NAME|*.NAME (at most 64), each followed by its root DIR and its error-page, index, fallback, add-header and cors lines; a bad line fails the load (default none)");

static char *cors;
module_param(cors, charp, 0444);
MODULE_PARM_DESC(cors,
		 "Access-Control-Allow-Origin: ORIGIN (with Vary: Origin) or * on every response, and CORS preflights answered 204 (default off)");

ulong khttpd_listing_bytes = 64UL << 20;
module_param_named(listing_bytes, khttpd_listing_bytes, ulong, 0444);
MODULE_PARM_DESC(listing_bytes,
		 "bytes of listing buffers and name tables being built at once; a listing beyond gets 503 with Retry-After; 0 = no limit (default 64 MiB)");

bool khttpd_proxy_protocol;
module_param_named(proxy_protocol, khttpd_proxy_protocol, bool, 0444);
MODULE_PARM_DESC(proxy_protocol,
		 "Y: every connection starts with a PROXY protocol header (v1 or v2, from a load balancer) naming the client; a connection without one, or with a malformed one, is closed (default N)");

uint khttpd_listing_max = 1024;
module_param_named(listing_max, khttpd_listing_max, uint, 0444);
MODULE_PARM_DESC(listing_max,
		 "directory listings in flight at once; the next gets 503 with Retry-After; 0 = no limit (default 1024)");

static char *acl;
module_param(acl, charp, 0444);
MODULE_PARM_DESC(acl,
		 "address rules, the first matching a client decides, none matching: served; a client denied is closed at accept: \"allow:10.0.0.0/8,allow:::1,deny:all\", at most 256 (default none: every client served)");

static char *rate;
module_param(rate, charp, 0444);
MODULE_PARM_DESC(rate,
		 "requests per client address (IPv6: per per_ip_v6_prefix), nginx's limit_req: \"10r/s\" or \"600r/m\"; beyond the rate and burst, 429 with Retry-After (default none: no limit)");

static uint burst;
module_param(burst, uint, 0444);
MODULE_PARM_DESC(burst,
		 "requests beyond the rate an address may send at once, 0..100000 (default 0)");

static uint rate_entries = HTTP_RATE_ENTRIES_DEFAULT;
module_param(rate_entries, uint, 0444);
MODULE_PARM_DESC(rate_entries,
		 "client addresses the rate table holds, 64..4194304, rounded up to a power of two; the least recently served is forgotten first (default 16384)");
/* clang-format on */

struct http_rate_conf khttpd_rate_conf;
struct http_access khttpd_access;
bool khttpd_dotfiles;
struct khttpd_site khttpd_default_site;
/* site='s host blocks: names.h[k] is served by khttpd_hosts[k] */
static struct http_vhosts khttpd_vhosts;
static struct khttpd_site *khttpd_hosts; /* HTTP_VHOSTS_MAX, or NULL */

/* Longest idle timeout accepted: a day, as the user-space server. */
#define KHTTPD_IDLE_TIMEOUT_MAX (24U * 3600 * 1000)
/*
 * mode=kthread makes a thread (a stack, a task) per connection: never more
 * than this many, whatever max_conns says (0 included). The mode is there
 * to be measured against the workqueue, not to serve crowds.
 */
#define KHTTPD_KTHREAD_MAX_CONNS 1024

const struct khttpd_site *khttpd_site_of(const struct http_request *req,
					 const char *buf)
{
	int k = http_vhosts_request(&khttpd_vhosts, req, buf);

	return k < 0 ? &khttpd_default_site : &khttpd_hosts[k];
}

/* p resolves to the loader's "/" (also as "//", "/.", a symlink). */
static bool khttpd_is_fs_root(const struct path *p)
{
	struct path fs_root;
	bool same;

	get_fs_root(current->fs, &fs_root);
	same = path_equal(p, &fs_root);
	path_put(&fs_root);
	return same;
}

/*
 * A site's root: an absolute path to a directory, not the whole file
 * system, taken (referenced) into out; what names it (root=, or the
 * site= file's line) prefixes the message.
 */
static int khttpd_root_take(const char *what, const char *dir, struct path *out)
{
	int err;

	if (!dir || dir[0] != '/') {
		pr_err("%s%s: an absolute path to a directory is required\n",
		       what, dir ? dir : "(unset)");
		return -EINVAL;
	}
	err = kern_path(dir, LOOKUP_FOLLOW | LOOKUP_DIRECTORY, out);
	if (err < 0) {
		pr_err("%s%s: %s (%d)\n", what, dir,
		       err == -ENOENT  ? "no such directory" :
		       err == -ENOTDIR ? "not a directory" :
					 "cannot be looked up",
		       err);
		return err;
	}
	if (khttpd_is_fs_root(out)) {
		pr_err("%s%s: the whole file system is not served; name the directory of the site\n",
		       what, dir);
		path_put(out);
		out->dentry = NULL;
		return -EINVAL;
	}
	return 0;
}

/* Drop the host blocks' roots and the hosts. */
static void khttpd_hosts_put(void)
{
	u32 k;

	for (k = 0; khttpd_hosts && k < khttpd_vhosts.n; k++)
		if (khttpd_hosts[k].root.dentry)
			path_put(&khttpd_hosts[k].root);
	kvfree(khttpd_hosts);
	khttpd_hosts = NULL;
	khttpd_vhosts.n = 0;
}

static bool khttpd_is(const struct http_conf_line *l, const char *name)
{
	return l->name_len == strlen(name) &&
	       !memcmp(l->name, name, l->name_len);
}

/* "host NAME": a new block, whose lines follow; *h is it. */
static int khttpd_site_host(const struct http_conf_line *l,
			    struct khttpd_site **h, const char **why)
{
	int k;

	if (!khttpd_hosts) {
		khttpd_hosts = kvcalloc(HTTP_VHOSTS_MAX, sizeof(*khttpd_hosts),
					GFP_KERNEL);
		if (!khttpd_hosts) {
			*why = "out of memory";
			return -1;
		}
	}
	k = http_vhosts_add(&khttpd_vhosts, l->value, l->value_len, why);
	if (k < 0)
		return -1;
	*h = &khttpd_hosts[k];
	(*h)->id = 1 + k;
	return 0;
}

/* "root DIR" of a host block: the value copied for kern_path(). */
static int khttpd_site_root(const struct http_conf_line *l,
			    struct khttpd_site *h)
{
	char *dir = kmemdup_nul(l->value, l->value_len, GFP_KERNEL);
	char *what = kasprintf(GFP_KERNEL, "site=%s: line %u: root ", site,
			       l->number);
	struct path p;
	int err = -ENOMEM;

	if (dir && what)
		err = khttpd_root_take(what, dir, &p);
	kfree(what);
	kfree(dir);
	if (err < 0)
		return err;
	if (h->root.dentry)
		path_put(&h->root); /* the last root line wins */
	h->root = p;
	return 0;
}

static const char khttpd_site_settings[] =
	"unknown setting (add-header, cors, host, root, error-page, index or fallback)";

/*
 * One line of the site= file into the settings of *h (the default site
 * before any host line, then each host's); -EINVAL said why.
 */
static int khttpd_site_line(const struct http_conf_line *l,
			    struct khttpd_site **h)
{
	const char *why = khttpd_site_settings;
	struct khttpd_site *s = *h;
	bool host = s != &khttpd_default_site;
	int err = -1;

	if (khttpd_is(l, "add-header")) {
		err = http_headers_add(&s->headers, l->value, l->value_len,
				       &why);
	} else if (khttpd_is(l, "cors")) {
		err = http_headers_cors(&s->headers, l->value, l->value_len,
					&why);
	} else if (khttpd_is(l, "host")) {
		err = khttpd_site_host(l, h, &why);
	} else if (!host &&
		   (khttpd_is(l, "root") || khttpd_is(l, "error-page") ||
		    khttpd_is(l, "index") || khttpd_is(l, "fallback"))) {
		why = "only after a host line (the default's is a module parameter)";
	} else if (khttpd_is(l, "root")) {
		return khttpd_site_root(l, s);
	} else if (khttpd_is(l, "error-page")) {
		err = http_error_pages_parse(l->value, l->value_len,
					     s->error_pages,
					     HTTP_SERVER_ERROR_PAGES_MAX,
					     &s->error_pages_n, &why);
	} else if (khttpd_is(l, "index")) {
		err = http_index_files_parse(l->value, l->value_len,
					     &s->index_files, &why);
		if (err >= 0)
			s->index = &s->index_files;
	} else if (khttpd_is(l, "fallback")) {
		s->fallback_len = 0;
		err = l->value_len ?
			      http_fallback_parse(l->value, l->value_len,
						  s->fallback, &s->fallback_len,
						  &why) :
			      0;
	}
	if (err < 0) {
		pr_err("site=%s: line %u: %.*s: %s\n", site, l->number,
		       (int)l->name_len, l->name, why);
		return -EINVAL;
	}
	return 0;
}

/*
 * site=: the file read whole (at most HTTP_CONF_FILE_MAX bytes) with
 * kernel_read(): kernel_read_file() would name it to the LSMs as an
 * unknown kind of file, which some (IPE) warn about.
 */
static int khttpd_site_load(void)
{
	struct khttpd_site *h = &khttpd_default_site;
	struct http_conf_line l = {};
	struct file *f;
	char *text;
	loff_t pos = 0;
	size_t at = 0, cur = 0;
	ssize_t n = 0;
	int err = 0;
	u32 k;

	f = filp_open(site, O_RDONLY, 0);
	if (IS_ERR(f)) {
		pr_err("site=%s: cannot be opened (%ld)\n", site, PTR_ERR(f));
		return PTR_ERR(f);
	}
	if (!S_ISREG(file_inode(f)->i_mode) ||
	    i_size_read(file_inode(f)) > HTTP_CONF_FILE_MAX) {
		pr_err("site=%s: not a regular file of at most 64 KiB\n", site);
		filp_close(f, NULL);
		return -EINVAL;
	}
	text = kvmalloc(HTTP_CONF_FILE_MAX + 1, GFP_KERNEL);
	if (!text) {
		filp_close(f, NULL);
		return -ENOMEM;
	}
	/* bounded: the buffer fills, or the file ends or fails */
	while (at <= HTTP_CONF_FILE_MAX) {
		n = kernel_read(f, text + at, HTTP_CONF_FILE_MAX + 1 - at,
				&pos);
		if (n <= 0)
			break;
		at += n;
	}
	filp_close(f, NULL);
	if (n < 0 || at > HTTP_CONF_FILE_MAX) {
		pr_err("site=%s: cannot be read (%zd)\n", site,
		       n < 0 ? n : (ssize_t)-EFBIG);
		kvfree(text);
		return n < 0 ? n : -EFBIG;
	}
	while (!err && http_conf_next(text, at, &cur, &l))
		err = khttpd_site_line(&l, &h);
	kvfree(text);
	for (k = 0; !err && k < khttpd_vhosts.n; k++) {
		if (!khttpd_hosts[k].root.dentry) {
			pr_err("site=%s: host %s: needs a root line after it\n",
			       site, khttpd_vhosts.h[k].name);
			err = -EINVAL;
		}
	}
	return err;
}

/* Parameters are checked before anything is allocated. */
static int khttpd_check_params(enum khttpd_mode *m, kuid_t *kuid, kgid_t *kgid)
{
	int err;

	if (!strcmp(mode, "unbound")) {
		*m = KHTTPD_MODE_UNBOUND;
	} else if (!strcmp(mode, "bound")) {
		*m = KHTTPD_MODE_BOUND;
	} else if (!strcmp(mode, "kthread")) {
		*m = KHTTPD_MODE_KTHREAD;
	} else {
		pr_err("mode=%s: expected unbound, bound or kthread\n", mode);
		return -EINVAL;
	}
	if (!port || !backlog) {
		pr_err("port and backlog must be non-zero\n");
		return -EINVAL;
	}
	if (idle_timeout_ms > KHTTPD_IDLE_TIMEOUT_MAX) {
		pr_err("idle_timeout_ms=%u: at most %u\n", idle_timeout_ms,
		       KHTTPD_IDLE_TIMEOUT_MAX);
		return -EINVAL;
	}
	/* the cache counts in long: a bigger bound would read as negative */
	if (khttpd_cache_bytes > LONG_MAX) {
		pr_err("cache_bytes=%lu: at most %ld\n", khttpd_cache_bytes,
		       LONG_MAX);
		return -EINVAL;
	}
	if (khttpd_expires_s > HTTP_SERVER_EXPIRES_MAX) {
		pr_err("expires_s=%u: at most %u\n", khttpd_expires_s,
		       HTTP_SERVER_EXPIRES_MAX);
		return -EINVAL;
	}
	if (error_pages) {
		const char *why = NULL;

		if (http_error_pages_parse(error_pages, strlen(error_pages),
					   khttpd_default_site.error_pages,
					   HTTP_SERVER_ERROR_PAGES_MAX,
					   &khttpd_default_site.error_pages_n,
					   &why) < 0) {
			pr_err("error_pages=%s: %s\n", error_pages, why);
			return -EINVAL;
		}
	}
	if (index_files) {
		const char *why = NULL;

		if (http_index_files_parse(index_files, strlen(index_files),
					   &khttpd_default_site.index_files,
					   &why) < 0) {
			pr_err("index=%s: %s\n", index_files, why);
			return -EINVAL;
		}
		khttpd_default_site.index = &khttpd_default_site.index_files;
	}
	if (fallback && fallback[0]) {
		const char *why = NULL;

		if (http_fallback_parse(fallback, strlen(fallback),
					khttpd_default_site.fallback,
					&khttpd_default_site.fallback_len,
					&why) < 0) {
			pr_err("fallback=%s: %s\n", fallback, why);
			return -EINVAL;
		}
	}
	if (site && site[0]) {
		err = khttpd_site_load();
		if (err < 0)
			return err;
	}
	if (cors && cors[0]) {
		const char *why = NULL;

		if (http_headers_cors(&khttpd_default_site.headers, cors,
				      strlen(cors), &why) < 0) {
			pr_err("cors=%s: %s\n", cors, why);
			return -EINVAL;
		}
	}
	if (acl && acl[0]) {
		const char *why = NULL;

		if (http_access_parse(&khttpd_access, acl, strlen(acl), &why) <
		    0) {
			pr_err("acl=%s: %s\n", acl, why);
			return -EINVAL;
		}
	}
	if (rate && rate[0]) {
		const char *why = NULL;

		if (http_rate_parse(rate, strlen(rate), &khttpd_rate_conf.rate,
				    &why) < 0) {
			pr_err("rate=%s: %s\n", rate, why);
			return -EINVAL;
		}
	}
	if (burst > HTTP_RATE_BURST_MAX ||
	    rate_entries < HTTP_RATE_ENTRIES_MIN ||
	    rate_entries > HTTP_RATE_ENTRIES_MAX) {
		pr_err("burst=%u rate_entries=%u: burst is 0..%u, rate_entries %u..%u\n",
		       burst, rate_entries, HTTP_RATE_BURST_MAX,
		       HTTP_RATE_ENTRIES_MIN, HTTP_RATE_ENTRIES_MAX);
		return -EINVAL;
	}
	khttpd_rate_conf.burst = burst;
	khttpd_rate_conf.entries = roundup_pow_of_two(rate_entries);
	if (!strcmp(dotfiles, "deny")) {
		khttpd_dotfiles = false;
	} else if (!strcmp(dotfiles, "allow")) {
		khttpd_dotfiles = true;
	} else {
		pr_err("dotfiles=%s: expected deny or allow\n", dotfiles);
		return -EINVAL;
	}
	*kuid = make_kuid(&init_user_ns, uid);
	*kgid = make_kgid(&init_user_ns, gid);
	if (!uid_valid(*kuid) || !gid_valid(*kgid) || !uid || !gid) {
		pr_err("uid=%u gid=%u: expected a user and a group other than root (0) and -1\n",
		       uid, gid);
		return -EINVAL;
	}
	/* last: nothing after it fails */
	return khttpd_root_take("root=", root, &khttpd_default_site.root);
}

/* The planner's settings of site s, from its tables and the parameters. */
static void khttpd_site_plan(struct khttpd_site *s)
{
	s->plan = (struct http_site_settings){
		.gzip = khttpd_gzip_enabled,
		.dotfiles = khttpd_dotfiles,
		.expires = khttpd_expires_s,
		.gzip_static = khttpd_gzip_static,
		.no_listings = !khttpd_listings,
		.index = s->index,
		.fallback = s->fallback_len ? s->fallback : NULL,
		.fallback_len = s->fallback_len,
		.error_pages = s->error_pages,
		.error_pages_n = s->error_pages_n,
		.headers = &s->headers,
	};
}

int khttpd_params_load(struct ktcp_server_params *p, kuid_t *kuid, kgid_t *kgid)
{
	enum khttpd_mode m;
	u32 k;
	int err;

	err = khttpd_check_params(&m, kuid, kgid);
	if (err < 0) {
		khttpd_hosts_put(); /* the site= file's, if it got that far */
		return err;
	}
	/* every table is read: the sites' settings, before any request */
	khttpd_site_plan(&khttpd_default_site);
	for (k = 0; khttpd_hosts && k < khttpd_vhosts.n; k++)
		khttpd_site_plan(&khttpd_hosts[k]);
	*p = ktcp_server_params("khttpd", max_conns);
	/*
	 * unbound: workers not tied to the CPU that queued the work, so the
	 * scheduler spreads connections over every core — the right default,
	 * since the accept thread and the softirqs of one NIC queue would
	 * otherwise pile all work on one CPU. bound: per-CPU workers, best
	 * cache locality, CMWQ concurrency management (a worker blocked on a
	 * page-cache miss lets another run). kthread: a thread per connection,
	 * bounded.
	 */
	p->wq_flags = m == KHTTPD_MODE_BOUND ? 0 : WQ_UNBOUND;
	p->defer_accept_s = KTCP_DEFER_ACCEPT_S; /* the client speaks first */
	if (m == KHTTPD_MODE_KTHREAD) {
		p->kthread = true;
		if (!p->max_conns || p->max_conns > KHTTPD_KTHREAD_MAX_CONNS)
			p->max_conns = KHTTPD_KTHREAD_MAX_CONNS;
	}
	return 0;
}

void khttpd_params_log(void)
{
	pr_info("serving %s on %s port %u as uid %u gid %u (mode=%s, idle_timeout_ms=%u, dotfiles=%s, %u address rules, %u hosts)\n",
		root, bind && *bind ? bind : "*", port, uid, gid, mode,
		idle_timeout_ms, dotfiles, khttpd_access.n, khttpd_vhosts.n);
}

void khttpd_params_put(void)
{
	khttpd_hosts_put();
	path_put(&khttpd_default_site.root);
}
