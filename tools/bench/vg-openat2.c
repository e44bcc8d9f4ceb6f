/* vg-openat2.c — preloaded into ktcp-httpd for the instruction counts of
 * make bench-cost only. Valgrind 3.19 (Debian 12) does not know openat2(2)
 * and fails it with ENOSYS, so ktcp-httpd would answer every file with 500.
 * This library replaces libc's syscall() so that SYS_openat2 becomes
 * openat(dirfd, path, how->flags, how->mode), which Valgrind handles; every
 * other number is passed on unchanged. The RESOLVE_BENEATH check is lost,
 * which a benchmark on its own document root does not need. System calls
 * are counted on a run without Valgrind, where nothing is preloaded.
 *
 * Every other call through syscall() must cost what libc's does, or the
 * counts would charge the server for the shim: on x86-64 it is libc's
 * sequence (move the arguments down one register, the syscall
 * instruction, the errno check) plus one compare and branch for openat2.
 * (The runtime's per-request calls use the syscall instruction directly,
 * not syscall().) */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)

long vg_shim_errno(long ret) __attribute__((visibility("hidden")));
long vg_shim_openat2(long nr, long dirfd, long path, long how)
    __attribute__((visibility("hidden")));

long vg_shim_errno(long ret)
{
    errno = (int) -ret;
    return -1;
}

long vg_shim_openat2(long nr, long dirfd, long path, long how)
{
    const struct open_how *h = (const struct open_how *) how;
    (void) nr;
    return syscall(SYS_openat, dirfd, path, (long) h->flags, (long) h->mode);
}

#define STR_(x) #x
#define STR(x) STR_(x)

__asm__(".text\n"
        ".globl syscall\n"
        ".type syscall, @function\n"
        "syscall:\n"
        "    cmpq $" STR(SYS_openat2) ", %rdi\n"
        "    je vg_shim_openat2\n"
        "    movq %rdi, %rax\n"
        "    movq %rsi, %rdi\n"
        "    movq %rdx, %rsi\n"
        "    movq %rcx, %rdx\n"
        "    movq %r8, %r10\n"
        "    movq %r9, %r8\n"
        "    movq 8(%rsp), %r9\n"
        "    syscall\n"
        "    cmpq $-4095, %rax\n"
        "    jae 1f\n"
        "    ret\n"
        "1:  movq %rax, %rdi\n"
        "    jmp vg_shim_errno\n"
        ".size syscall, .-syscall\n");

#else /* any other machine: portable, at the price of a few instructions */

#include <dlfcn.h>

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

#endif
