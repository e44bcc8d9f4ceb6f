// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * root.c — the served tree: every lookup, open, getattr and read of khttpd
 * goes through here, beneath the root, so no path (nor symlink) leads out
 * of it, and under khttpd's own credential (module parameters uid and gid,
 * no supplementary groups, no capabilities), so the normal permission
 * checks decide what is served: exactly what that user may read.
 *
 * Work items run on kworkers whose credential is the kernel's (root with
 * every capability); the credential is overridden only around each VFS
 * call and reverted before the function returns, on every path.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/build_bug.h>
#include <linux/cred.h>
#include <linux/errno.h>
#include <linux/fs.h>
#include <linux/namei.h>
#include <linux/sched/task.h>
#include <linux/splice.h>
#include <linux/version.h>

#include "khttpd.h"

/* checkpatch: LINUX_VERSION_CODE: built for 6.1 and 6.12; checkpatch: CONSTANT_COMPARISON: idiom */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 2, 0)
/*
 * Exported by fs/namei.c (EXPORT_SYMBOL) since long, but declared only in
 * fs/internal.h before 6.2, which moved the prototype to linux/namei.h
 * (6.1: absent from the header; 6.12: there). It is the one lookup that
 * takes both a starting point and LOOKUP_BENEATH, the in-kernel twin of
 * openat2(RESOLVE_BENEATH): "..", absolute symlinks and relative ones that
 * climb out of the root all fail with -EXDEV instead of being resolved
 * (file_open_root() would instead treat the root as a chroot and serve a
 * different file).
 */
int vfs_path_lookup(struct dentry *dentry, struct vfsmount *mnt,
		    const char *name, unsigned int flags, struct path *path);
#endif

/* core/ names the lookup errors it maps to statuses by their Linux numbers */
static_assert(HTTP_EPERM == EPERM && HTTP_ENOENT == ENOENT &&
	      HTTP_ENOMEM == ENOMEM && HTTP_EACCES == EACCES &&
	      HTTP_EXDEV == EXDEV && HTTP_ENOTDIR == ENOTDIR &&
	      HTTP_ENAMETOOLONG == ENAMETOOLONG && HTTP_ELOOP == ELOOP &&
	      HTTP_EAGAIN == EWOULDBLOCK && HTTP_EBUSY == EBUSY &&
	      HTTP_ENOSPC == ENOSPC);

#define KHTTPD_BENEATH (LOOKUP_BENEATH | LOOKUP_NO_MAGICLINKS)

/* The credential every file system access runs under. */
static const struct cred *khttpd_cred;

int khttpd_cred_init(kuid_t uid, kgid_t gid)
{
	struct group_info *groups;
	struct cred *c;

	/* a copy of init's credential, made the server's user below */
	c = prepare_kernel_cred(&init_task);
	if (!c)
		return -ENOMEM;
	groups = groups_alloc(0);
	if (!groups) {
		abort_creds(c);
		return -ENOMEM;
	}
	set_groups(c, groups); /* takes its own reference */
	put_group_info(groups);
	c->uid = uid;
	c->euid = uid;
	c->suid = uid;
	c->fsuid = uid;
	c->gid = gid;
	c->egid = gid;
	c->sgid = gid;
	c->fsgid = gid;
	/* no CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER...: nothing */
	c->cap_inheritable = CAP_EMPTY_SET;
	c->cap_permitted = CAP_EMPTY_SET;
	c->cap_effective = CAP_EMPTY_SET;
	c->cap_bset = CAP_EMPTY_SET;
	c->cap_ambient = CAP_EMPTY_SET;
	khttpd_cred = c;
	return 0;
}

void khttpd_cred_exit(void)
{
	if (khttpd_cred)
		put_cred(khttpd_cred);
	khttpd_cred = NULL;
}

/*
 * A LOOKUP_BENEATH walk answers -EAGAIN when a rename or a mount anywhere
 * ran during it (it cannot prove it stayed beneath the root): tried again
 * this many times in all before the -EAGAIN stands (a 503).
 */
#define KHTTPD_LOOKUP_TRIES 3

/* Look rel up beneath site's root as the server's user; the caller holds
 * the credential.
 */
static int khttpd_lookup(const struct khttpd_site *site, const char *rel,
			 unsigned int follow, struct path *out)
{
	int i, err = -EAGAIN;

	for (i = 0; i < KHTTPD_LOOKUP_TRIES && err == -EAGAIN; i++)
		err = vfs_path_lookup(site->root.dentry, site->root.mnt, rel,
				      follow | KHTTPD_BENEATH, out);
	return err;
}

/*
 * A file or directory the server's user may read: searching every
 * directory on the way and reading the target are checked, as an open()
 * by that user would. Unreadable: -EACCES (403).
 */
int khttpd_lookup_beneath(const struct khttpd_site *site, const char *rel,
			  struct path *out)
{
	const struct cred *old = override_creds(khttpd_cred);
	int err = khttpd_lookup(site, rel, LOOKUP_FOLLOW, out);

	if (!err) {
		/*
		 * A directory needs only search: one the user may enter but
		 * not read (0711) has its index and files served; its listing,
		 * opened for reading on its own, is refused.
		 */
		err = path_permission(out, d_is_dir(out->dentry) ? MAY_EXEC :
								   MAY_READ);
		if (err)
			path_put(out);
	}
	revert_creds(old);
	return err;
}

int khttpd_getattr(const struct path *path, struct kstat *st)
{
	const struct cred *old = override_creds(khttpd_cred);
	int err =
		vfs_getattr(path, st, STATX_BASIC_STATS, AT_STATX_SYNC_AS_STAT);

	revert_creds(old);
	return err;
}

/*
 * Open what a lookup found: dentry_open() does not check permissions
 * itself, so the read permission is checked here, as the server's user.
 * Non-blocking: a file under a write lease answers -EWOULDBLOCK (a 503
 * with Retry-After) at once, where a blocking open would sleep up to
 * lease-break-time (45 s) in a shared worker; the lease break is still
 * started. Reads stay blocking-mode reads (the flag is dropped after).
 */
static struct file *khttpd_open_checked(const struct path *path, int flags)
{
	int err = path_permission(path, MAY_READ);
	struct file *f;

	if (err)
		return ERR_PTR(err);
	f = dentry_open(path, flags | O_NONBLOCK, khttpd_cred);
	if (!IS_ERR(f)) {
		spin_lock(&f->f_lock);
		f->f_flags &= ~O_NONBLOCK;
		spin_unlock(&f->f_lock);
	}
	return f;
}

struct file *khttpd_open_path(const struct path *path)
{
	const struct cred *old = override_creds(khttpd_cred);
	struct file *f = khttpd_open_checked(path, O_RDONLY | O_LARGEFILE);

	revert_creds(old);
	return f;
}

/* Open rel beneath site's root: a regular file, or with dir a directory. */
static struct file *khttpd_open_kind(const struct khttpd_site *site,
				     const char *rel, bool dir)
{
	const struct cred *old = override_creds(khttpd_cred);
	struct path path;
	struct file *f;
	int err = khttpd_lookup(site, rel, LOOKUP_FOLLOW, &path);

	if (err < 0) {
		f = ERR_PTR(err);
	} else {
		if (dir && !d_is_dir(path.dentry))
			f = ERR_PTR(-ENOTDIR);
		else if (!dir && !d_is_reg(path.dentry))
			f = ERR_PTR(-EACCES);
		else
			f = khttpd_open_checked(&path,
						dir ? O_RDONLY | O_DIRECTORY :
						      O_RDONLY | O_LARGEFILE);
		path_put(&path);
	}
	revert_creds(old);
	return f;
}

struct file *khttpd_open_beneath(const struct khttpd_site *site,
				 const char *rel)
{
	return khttpd_open_kind(site, rel, false);
}

struct file *khttpd_open_dir_beneath(const struct khttpd_site *site,
				     const char *rel)
{
	return khttpd_open_kind(site, rel, true);
}

int khttpd_iterate_dir(struct file *dir, struct dir_context *ctx)
{
	const struct cred *old = override_creds(khttpd_cred);
	int err = iterate_dir(dir, ctx);

	revert_creds(old);
	return err;
}

int khttpd_read_whole(struct file *f, char *buf, size_t len)
{
	const struct cred *old = override_creds(khttpd_cred);
	loff_t pos = 0;
	int err = 0;

	while (pos < len) {
		ssize_t n = kernel_read(f, buf + pos, len - pos, &pos);

		if (n <= 0) {
			err = n ? n : -EIO;
			break;
		}
	}
	revert_creds(old);
	return err;
}

ssize_t khttpd_splice_file(struct file *f, struct splice_desc *sd,
			   int (*actor)(struct pipe_inode_info *pipe,
					struct splice_desc *sd))
{
	const struct cred *old = override_creds(khttpd_cred);
	ssize_t ret = splice_direct_to_actor(f, sd, actor);

	revert_creds(old);
	return ret;
}

/*
 * A listing row's metadata, rel being "dir/name" beneath the root: what a
 * symlink points to when that stays beneath the root, else (dangling, or
 * leading out) the link itself, never what lies outside.
 */
int khttpd_stat_beneath(const struct khttpd_site *site, const char *rel,
			struct kstat *st)
{
	const struct cred *old = override_creds(khttpd_cred);
	unsigned int follow[] = { LOOKUP_FOLLOW, 0 };
	int i, err = -ENOENT;

	for (i = 0; i < ARRAY_SIZE(follow); i++) {
		struct path p;

		err = khttpd_lookup(site, rel, follow[i], &p);
		if (err < 0)
			continue;
		err = vfs_getattr(&p, st, STATX_BASIC_STATS,
				  AT_STATX_SYNC_AS_STAT);
		path_put(&p);
		if (!err)
			break;
	}
	revert_creds(old);
	return err;
}
