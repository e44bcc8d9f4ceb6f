/* httpd-check.c — what every start checks, and --test-config (-t) only
 * checks: the trees as the user that will serve them, openat2(2), the
 * access log's file. Each problem is a line of its own. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "httpd-start.h"

static int problem(const char *flag, const char *arg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int problem(const char *flag, const char *arg, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "ktcp-httpd: %s%s%s: ", flag, arg ? " " : "",
            arg ? arg : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

/* What the serving user needs of the tree, checked as that user and as the
 * server reaches it, from the descriptor of the root opened before (the
 * directories above it are not its business): a directory it may enter
 * and list, and openat2(2), by which every file is opened
 * (RESOLVE_BENEATH). The number of problems, each named on a line of its
 * own. */
static int check_tree(int root_fd, const char *root, const char *who)
{
    int problems = 0;
    if (faccessat(root_fd, "", X_OK, AT_EMPTY_PATH | AT_EACCESS) < 0)
        problems += problem("--root", root, "%s may not enter it: %s", who,
                            strerror(errno));
    int fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno != EACCES)
        problems += problem("--root", root, "%s", strerror(errno));
    else if (fd < 0)
        problems += problem("--root", root, "%s may not list it: %s", who,
                            strerror(errno));
    else
        close(fd);
    struct open_how how = {
        .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    long r = syscall(SYS_openat2, root_fd, ".", &how, sizeof(how));
    if (r < 0 && (errno == ENOSYS || errno == EPERM))
        problems += problem("openat2", NULL,
                            "%s: every file is opened by it (Linux 5.6 or "
                            "later, and no seccomp filter refusing it)",
                            strerror(errno));
    if (r >= 0)
        close((int) r);
    return problems;
}

/* check_tree as the user that will serve: a child that drops to it first
 * when root changes user. */
static int check_tree_as_server(const char *root)
{
    int root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        return problem("--root", root, "%s", strerror(errno));
    const char *serve_user = httpd_user_name();
    if (!serve_user) {
        int n =
            check_tree(root_fd, root, geteuid() == 0 ? "root" : "this user");
        close(root_fd);
        return n;
    }
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(root_fd);
        return problem("--user", serve_user, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        char who[96];
        const char *step;
        if (httpd_user_become(&step) < 0)
            _exit(problem("--user", serve_user, "cannot become it: %s: %s",
                          step, strerror(errno)));
        snprintf(who, sizeof(who), "user %s", serve_user);
        int n = check_tree(root_fd, root, who);
        fflush(stderr);
        _exit(n);
    }
    close(root_fd);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return problem("--user", serve_user, "waitpid: %s",
                           strerror(errno));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int httpd_check(const struct settings *s)
{
    int problems = check_tree_as_server(s->site.root);
    for (uint32_t k = 0; k < s->names.n; k++)
        problems += check_tree_as_server(s->hosts[k].root);
    if (s->access_log && strcmp(s->access_log, "-") != 0) {
        int fd = httpd_open_log_file(s->access_log);
        if (fd < 0)
            problems +=
                problem("--access-log", s->access_log, "%s", strerror(-fd));
        else
            close(fd);
    }
    return problems;
}
