/* httpd-root.c — the served tree: every file the server opens is opened
 * here, beneath --root, so no path (nor symlink) leads out of it. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "httpd.h"

/* core/ names the lookup errors it maps to statuses by their Linux numbers */
_Static_assert(HTTP_EPERM == EPERM && HTTP_ENOENT == ENOENT &&
                   HTTP_ENOMEM == ENOMEM && HTTP_EACCES == EACCES &&
                   HTTP_EXDEV == EXDEV && HTTP_ENOTDIR == ENOTDIR &&
                   HTTP_ENAMETOOLONG == ENAMETOOLONG && HTTP_ELOOP == ELOOP,
               "core's errno numbers are Linux's");

int httpd_open_beneath(const char *rel, int flags)
{
    struct open_how how = {
        .flags = (uint64_t) (flags | O_CLOEXEC | O_NOCTTY),
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    /* errno is read right after the syscall, before anything can yield */
    long fd = syscall(SYS_openat2, httpd_cfg.root_fd, rel, &how, sizeof(how));
    return fd < 0 ? -errno : (int) fd;
}
