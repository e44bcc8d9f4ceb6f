// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * root.c — the served tree: every lookup and open of khttpd goes through
 * here, beneath the root, so no path (nor symlink) leads out of it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/build_bug.h>
#include <linux/cred.h>
#include <linux/errno.h>
#include <linux/fs.h>
#include <linux/namei.h>

#include "khttpd.h"

/*
 * Exported by fs/namei.c (EXPORT_SYMBOL) but no longer declared in a public
 * header on 6.1. It is the one lookup that takes both a starting point and
 * LOOKUP_BENEATH, the in-kernel twin of openat2(RESOLVE_BENEATH): "..",
 * absolute symlinks and relative ones that climb out of the root all fail
 * with -EXDEV instead of being resolved (file_open_root() would instead
 * treat the root as a chroot and serve a different file).
 */
int vfs_path_lookup(struct dentry *dentry, struct vfsmount *mnt,
		    const char *name, unsigned int flags, struct path *path);

/* core/ names the lookup errors it maps to statuses by their Linux numbers */
static_assert(HTTP_EPERM == EPERM && HTTP_ENOENT == ENOENT &&
	      HTTP_ENOMEM == ENOMEM && HTTP_EACCES == EACCES &&
	      HTTP_EXDEV == EXDEV && HTTP_ENOTDIR == ENOTDIR &&
	      HTTP_ENAMETOOLONG == ENAMETOOLONG && HTTP_ELOOP == ELOOP);

int khttpd_lookup_beneath(const char *rel, struct path *out)
{
	return vfs_path_lookup(
		khttpd_root.dentry, khttpd_root.mnt, rel,
		LOOKUP_FOLLOW | LOOKUP_BENEATH | LOOKUP_NO_MAGICLINKS, out);
}

struct file *khttpd_open_beneath(const char *rel)
{
	struct path path;
	struct file *f;
	int err = khttpd_lookup_beneath(rel, &path);

	if (err < 0)
		return ERR_PTR(err);
	if (!d_is_reg(path.dentry)) {
		path_put(&path);
		return ERR_PTR(-EACCES);
	}
	f = dentry_open(&path, O_RDONLY | O_LARGEFILE, current_cred());
	path_put(&path);
	return f;
}

int khttpd_read_whole(struct file *f, char *buf, size_t len)
{
	loff_t pos = 0;

	while (pos < len) {
		ssize_t n = kernel_read(f, buf + pos, len - pos, &pos);

		if (n <= 0)
			return n ? n : -EIO;
	}
	return 0;
}

/* A directory's entry, for its listing row: what a symlink points to, else
 * (a dangling link) the link itself. */
int khttpd_stat_in(const struct path *dir, const char *name, struct kstat *st)
{
	unsigned int flags[] = { LOOKUP_FOLLOW, 0 };
	int i, err = -ENOENT;

	for (i = 0; i < ARRAY_SIZE(flags); i++) {
		struct path p;

		err = vfs_path_lookup(dir->dentry, dir->mnt, name, flags[i],
				      &p);
		if (err < 0)
			continue;
		err = vfs_getattr(&p, st, STATX_BASIC_STATS,
				  AT_STATX_SYNC_AS_STAT);
		path_put(&p);
		if (!err)
			return 0;
	}
	return err;
}
