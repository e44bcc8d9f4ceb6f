/* httpd-user.c — --user: the account ktcp-httpd serves as, looked up
 * before anything is bound, and root dropped for good once the listeners
 * are open.
 *
 * Started as root with a --user to serve as, the access log stays
 * reopenable after the drop: a small process forked before it, which
 * keeps root and nothing else, opens the log at each reopen and passes the
 * descriptor back (SCM_RIGHTS), as nginx's master process reopens the logs
 * for its workers. It opens the file of the start, or the one the settings
 * name when it reads them itself (the --config file, as root, at the
 * request): a server that asks for any other path is refused, so the
 * serving user cannot have root open a file of its choosing. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "httpd-start.h"

/* The account --user names, looked up before anything is bound so that a
 * wrong name fails at once; dropped to once the listeners are open. */
static uid_t serve_uid;
static gid_t serve_gid;
static const char *serve_user;

bool httpd_user_resolve(const char *name)
{
    errno = 0;
    struct passwd *pw = getpwnam(name);
    if (!pw) {
        rt_cli_bad("--user", name, errno ? strerror(errno) : "no such user");
        return false;
    }
    if (pw->pw_uid == 0) {
        /* asked for by name: keep root (nginx's "user root") */
        fprintf(stderr,
                "ktcp-httpd: --user %s: keeping root's privileges: "
                "every file root may read is served\n",
                name);
        return true;
    }
    if (pw->pw_gid == 0) {
        rt_cli_bad("--user", name, "has group root: name an unprivileged user");
        return false;
    }
    serve_uid = pw->pw_uid;
    serve_gid = pw->pw_gid;
    serve_user = name;
    return true;
}

const char *httpd_user_name(void)
{
    return serve_user;
}

int httpd_user_become(const char **step)
{
    *step = "setgroups";
    if (setgroups(0, NULL) < 0)
        return -1;
    *step = "setgid";
    if (setgid(serve_gid) < 0)
        return -1;
    *step = "setuid";
    return setuid(serve_uid);
}

/* Root's groups, then its gid, then its uid (after setuid nothing else
 * could be changed); each failure is fatal, and root must be gone for
 * good. Runs before any thread serves. */
int httpd_user_drop(void)
{
    if (!serve_user)
        return 0;
    const char *step;
    if (httpd_user_become(&step) < 0)
        goto fail;
    if (setuid(0) == 0 || getegid() != serve_gid) {
        errno = EPERM;
        step = "root regained";
        goto fail;
    }
    return 0;
fail:
    fprintf(stderr,
            "ktcp-httpd: --user %s: cannot drop root's privileges: "
            "%s: %s\n",
            serve_user, step, strerror(errno));
    return -EPERM;
}

/* ---- the access log's opener, kept as root ---- */

static int opener_sock = -1; /* to the opener, or -1: none */
static char *opener_path;    /* the file it opens; NULL: none yet */
static int main_argc;        /* the command line, read again by the */
static char **main_argv;     /* opener when asked for another file */

int httpd_open_log_file(const char *path)
{
    int fd =
        open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0644);
    return fd < 0 ? -errno : fd;
}

/* In the opener: whether path may be opened, the file of the start or
 * the access log of the settings as root reads them now (a SIGHUP's new
 * --config); the latter becomes opener_path. */
static bool opener_may_open(const char *path)
{
    if (opener_path && strcmp(path, opener_path) == 0)
        return true;
    struct settings n;
    bool ok = httpd_load_settings(main_argc, main_argv, &n) == RT_CLI_OK &&
              n.access_log && strcmp(n.access_log, "-") != 0 &&
              strcmp(n.access_log, path) == 0;
    httpd_settings_release(&n);
    if (ok) {
        char *p = strdup(path);
        if (!p)
            return false;
        free(opener_path);
        opener_path = p;
    }
    return ok;
}

/* The opener: root's privileges and nothing else to do but open the path
 * each request names when opener_may_open allows it, answering errno (0)
 * with the descriptor attached. It ends with the server
 * (PR_SET_PDEATHSIG, or the socket's end); the signals an operator sends
 * the server are not its own. */
static __attribute__((noreturn)) void opener_main(int sock, pid_t server)
{
    static const int sigs[] = {SIGTERM, SIGINT,  SIGQUIT,
                               SIGHUP,  SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        signal(sigs[i], SIG_IGN);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != server)
        _exit(0);
    prctl(PR_SET_NAME, "ktcp-httpd-log");
    for (;;) {
        char req[PATH_MAX + 1];
        ssize_t n = recv(sock, req, sizeof(req) - 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            _exit(0);
        req[n] = '\0';
        int fd = strlen(req) == (size_t) n && opener_may_open(req)
                     ? httpd_open_log_file(req)
                     : -EPERM;
        int err = fd < 0 ? -fd : 0;
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int))];
        } u;
        struct iovec iov = {&err, sizeof(err)};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        if (fd >= 0) {
            m.msg_control = u.buf;
            m.msg_controllen = sizeof(u.buf);
            struct cmsghdr *c = CMSG_FIRSTHDR(&m);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &fd, sizeof(int));
        }
        if (sendmsg(sock, &m, MSG_NOSIGNAL) < 0 && errno != EINTR)
            _exit(0);
        if (fd >= 0)
            close(fd);
    }
}

/* Fork the opener, path its first file (or NULL); before any thread
 * exists. */
int httpd_opener_start(const char *path, int argc, char **argv)
{
    int sv[2];
    pid_t server = getpid();

    main_argc = argc;
    main_argv = argv;
    opener_path = path ? strdup(path) : NULL;
    if ((path && !opener_path) ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int err = -errno;
        close(sv[0]);
        close(sv[1]);
        return err;
    }
    if (pid == 0) {
        close(sv[0]);
        opener_main(sv[1], server);
    }
    close(sv[1]);
    opener_sock = sv[0];
    return 0;
}

/* Main thread only. */
int httpd_open_log(const char *path)
{
    if (opener_sock < 0)
        return httpd_open_log_file(path);
    size_t len = strlen(path);
    if (len >= PATH_MAX)
        return -ENAMETOOLONG;
    if (send(opener_sock, path, len, MSG_NOSIGNAL) < 0)
        return -errno;
    int err = 0;
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct iovec iov = {&err, sizeof(err)};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = u.buf,
                       .msg_controllen = sizeof(u.buf)};
    ssize_t n;
    do
        n = recvmsg(opener_sock, &m, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    if (n != (ssize_t) sizeof(err))
        return -EPIPE; /* the opener is gone */
    if (err)
        return -err;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
        return -EPROTO;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof(fd));
    return fd;
}
