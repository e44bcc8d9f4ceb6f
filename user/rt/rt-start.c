/* rt-start.c — the runtime's top: start (the listeners, systemd's socket,
 * then the model's threads), stop and finish, and the counters of every
 * thread summed. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ktcp-net.h"
#include "rt-internal.h"

void rt_counters_sum(uint64_t out[RT_NCOUNTERS])
{
    memset(out, 0, RT_NCOUNTERS * sizeof(out[0]));
    rt_counters_add_shared(out);
    if (rt_g.cfg && rt_g.cfg->model != RT_MODEL_THREADS)
        rt_counters_add_workers(out);
}

/* systemd's socket activation (the sd_listen_fds(3) protocol, read without
 * libsystemd): when LISTEN_PID is this process, descriptor 3 is a socket
 * already bound and listening, and it is served instead of --bind/--port.
 * -ENOENT when there is none; more than one: the first is served. */
static int inherited_listener(const struct rt_config *cfg)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    if (!pid || !fds || strtol(pid, NULL, 10) != (long) getpid())
        return -ENOENT;
    long n = strtol(fds, NULL, 10);
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    if (n < 1)
        return -ENOENT;
    if (n > 1)
        fprintf(stderr,
                "%s: %ld sockets passed by systemd; serving the "
                "first\n",
                rt_name(), n);
    int fd = 3, type = 0, listening = 0;
    socklen_t l = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 ||
        type != SOCK_STREAM ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening,
                   &(socklen_t){sizeof(listening)}) < 0 ||
        !listening) {
        fprintf(stderr,
                "%s: the socket passed by systemd is not a "
                "listening stream socket\n",
                rt_name());
        return -EINVAL;
    }
    /* accepted sockets inherit both (ktcp-net.c); not a TCP socket: moot */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ktcp_set_notsent_lowat(fd);
    int fl = fcntl(fd, F_GETFL);
    if (cfg->model == RT_MODEL_THREADS)
        fl &= ~O_NONBLOCK;
    else
        fl |= O_NONBLOCK;
    if (fl < 0 || fcntl(fd, F_SETFL, fl) < 0 ||
        fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return -errno;
    return fd;
}

bool rt_socket_activated(void)
{
    return rt_g.inherited;
}

/* ---- start, stop, finish ---- */

int rt_start(const struct rt_config *cfg)
{
    rt_g.cfg = cfg;
    rt_g.poll_max_ns = (uint64_t) cfg->busy_poll_us * 1000u;
    int err = rt_admit_init(cfg);
    if (err < 0)
        return err;
    rt_g.stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (rt_g.stop_fd < 0)
        return -errno;
    /* a listener per epoll or mn worker, SO_REUSEPORT; threads: one */
    bool per_worker = cfg->model != RT_MODEL_THREADS;
    int n = per_worker ? cfg->workers : 1;
    if (n > (int) (sizeof(rt_g.listen_fds) / sizeof(rt_g.listen_fds[0])))
        n = sizeof(rt_g.listen_fds) / sizeof(rt_g.listen_fds[0]);
    int inherited = inherited_listener(cfg);
    if (inherited == -EINVAL)
        return inherited;
    if (inherited >= 0) {
        /* one socket: every worker waits on it (EPOLLEXCLUSIVE) */
        rt_g.inherited = true;
        for (int i = 0; i < n; i++)
            rt_g.listen_fds[rt_g.nlisten++] = inherited;
    }
    /* one server per port: a second one would join the first's
     * SO_REUSEPORT group and take half its connections */
    err = rt_g.inherited ? 0 : ktcp_port_free(cfg->bind, cfg->port);
    if (err == -EADDRINUSE) {
        fprintf(stderr,
                "%s: --bind %s --port %d: %s: another process listens "
                "there (one server per port)\n",
                rt_name(), cfg->bind ? cfg->bind : "(any)", cfg->port,
                strerror(EADDRINUSE));
        return err;
    }
    for (int i = 0; i < n && !rt_g.inherited; i++) {
        int fd = rt_open_listener(cfg, cfg->port, per_worker);
        if (fd < 0)
            return fd;
        rt_g.listen_fds[rt_g.nlisten++] = fd;
    }
    for (int i = 0; i < n && cfg->second_port; i++) {
        int fd = rt_open_listener(cfg, cfg->second_port, per_worker);
        if (fd < 0)
            return fd;
        rt_g.listen_fds2[rt_g.nlisten2++] = fd;
    }
    if (cfg->listening) {
        err = cfg->listening();
        if (err)
            return err < 0 ? err : -EPERM;
    }
    if (cfg->model == RT_MODEL_THREADS) {
        return rt_run_threads();
    }
    return rt_run_coro(cfg);
}

void rt_stop(void)
{
    if (atomic_exchange(&rt_g.stopping, true))
        return;
    uint64_t one = 1;
    if (write(rt_g.stop_fd, &one, sizeof(one)) < 0) {
        /* cannot fail for a fresh eventfd; stopping is polled anyway */
    }
    /* shutdown, not close: a worker may still hold the fd number, and a
     * closed number could be reused by an accept. Blocked accepts return. */
    for (int i = 0; i < rt_g.nlisten && !rt_g.inherited; i++)
        shutdown(rt_g.listen_fds[i], SHUT_RDWR);
    for (int i = 0; i < rt_g.nlisten2; i++)
        shutdown(rt_g.listen_fds2[i], SHUT_RDWR);
    if (rt_g.cfg->model == RT_MODEL_THREADS)
        rt_threads_wake_all(); /* threads waiting for a connection exit */
    if (rt_g.cfg->model != RT_MODEL_THREADS)
        rt_wake_all();
}

void rt_stop_now(void)
{
    atomic_store(&rt_g.cutting, true);
    rt_stop();
    if (rt_g.cfg->model != RT_MODEL_THREADS)
        rt_wake_all(); /* threads-model waits look every 50 ms */
}

void rt_finish(void)
{
    /* in-flight responses finish; each wait is bounded by the timeouts */
    while (rt_live_conns() > 0)
        usleep(10000);
    atomic_store(&rt_g.exiting, true);
    if (rt_g.cfg->model == RT_MODEL_THREADS) {
        rt_join_threads();
    } else {
        rt_wake_all();
        rt_join_coro();
    }
    for (int i = 0; i < (rt_g.inherited ? 1 : rt_g.nlisten); i++)
        close(rt_g.listen_fds[i]);
    for (int i = 0; i < rt_g.nlisten2; i++)
        close(rt_g.listen_fds2[i]);
    urcu_memb_barrier(); /* run pending call_rcu callbacks */
}
