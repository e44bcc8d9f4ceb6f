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
                   HTTP_ENAMETOOLONG == ENAMETOOLONG && HTTP_ELOOP == ELOOP &&
                   HTTP_EAGAIN == EWOULDBLOCK && HTTP_EBUSY == EBUSY &&
                   HTTP_ENOSPC == ENOSPC,
               "core's errno numbers are Linux's");

int httpd_open_beneath(int root, const char *rel, int flags)
{
    /* openat2 refuses O_PATH with any flag beyond O_DIRECTORY, O_NOFOLLOW
     * and O_CLOEXEC */
    if (!(flags & O_PATH))
        flags |= O_NOCTTY;
    struct open_how how = {
        .flags = (uint64_t) (flags | O_CLOEXEC),
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    /* errno is read right after the syscall, before anything can yield */
    long fd = syscall(SYS_openat2, root, rel, &how, sizeof(how));
    return fd < 0 ? -errno : (int) fd;
}

/* A resource the server's user may serve: a file it may read, or a
 * directory it may read or only enter (mode 0711: its index and files are
 * served; its listing, opened for reading on its own, is refused). The
 * second kind comes back as an O_PATH descriptor. */
int httpd_open_resource(int root, const char *rel)
{
    int fd = httpd_open_beneath(root, rel, O_RDONLY | O_NONBLOCK);
    if (fd != -EACCES)
        return fd;
    fd = httpd_open_beneath(root, rel, O_PATH | O_DIRECTORY);
    if (fd < 0)
        return -EACCES;
    if (faccessat(fd, "", X_OK, AT_EMPTY_PATH | AT_EACCESS) < 0) {
        close(fd);
        return -EACCES;
    }
    return fd;
}
