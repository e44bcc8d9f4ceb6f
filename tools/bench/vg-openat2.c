/* vg-openat2.c — preloaded into ktcp-httpd for the instruction counts of
 * make bench-cost only. Valgrind 3.19 (Debian 12) does not know openat2(2)
 * and fails it with ENOSYS, so ktcp-httpd would answer every file with 500.
 * This library replaces libc's syscall() so that SYS_openat2 becomes
 * openat(dirfd, path, how->flags, how->mode), which Valgrind handles; every
 * other number is passed on unchanged. The RESOLVE_BENEATH check is lost,
 * which a benchmark on its own document root does not need. System calls
 * are counted on a run without Valgrind, where nothing is preloaded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

long syscall(long nr, ...)
{
    static long (*real)(long, ...);
    va_list ap;
    long a[6];

    va_start(ap, nr);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (!real)
        real = (long (*)(long, ...)) dlsym(RTLD_NEXT, "syscall");
    if (nr == SYS_openat2) {
        const struct open_how *how = (const struct open_how *) a[2];
        return real(SYS_openat, a[0], a[1], (long) how->flags,
                    (long) how->mode);
    }
    return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
