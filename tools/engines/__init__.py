"""ktcp's engines: every server the test suites and the bench start, stop
and wait for, on the host or in the VM (kernel modules only in the VM).

    import engines                      # tools/ on sys.path
    e = engines.UserHttpd("epoll", logdir).start(root)   # serves on e.port
    e.stop()

SUITE names the engines each conformance suite runs (its fixture ids);
http_engines() and echo_engines() those the bench compares."""
from .base import (BUILD, TOP, Engine, EngineError, KernelModule, Unsupported, exit_reason,
                   free_port, in_vm, module_path, parse_counters, raise_nofile, run,
                   stats_file_counters, wait_port)
from .echo import ECHO_BIN, KECHO_MODES, KernelEcho, UserEcho
from .httpd import (FLOOR_BIN, FLOOR_WORKLOADS, HTTPD_BIN, HTTPD_MODELS, KHTTPD_MODES, Floor,
                    KernelHttpd, Lwan, Nginx, UserHttpd, lwan_path, nginx_path)
from .msg import KCM_BIN, MSG_BIN, KcmServer, MsgServer

DROP_KO = module_path("drop_tcp_socket")

# The conformance suites' engines: fixture id -> factory(logdir).
SUITE = {
    "http": {
        "user-threads": lambda d: UserHttpd("threads", d),
        "user-epoll": lambda d: UserHttpd("epoll", d),
        "user-mn": lambda d: UserHttpd("mn", d),
        # the same over HTTPS (--tls-port; the clients wrap in ssl)
        "user-threads-tls": lambda d: UserHttpd("threads", d, tls=True),
        "user-epoll-tls": lambda d: UserHttpd("epoll", d, tls=True),
        "user-mn-tls": lambda d: UserHttpd("mn", d, tls=True),
        "khttpd": lambda d: KernelHttpd(),
    },
    "echo": {
        "user": lambda d: UserEcho(d),
        "user-mn": lambda d: UserEcho(d, "mn"),
        "user-threads": lambda d: UserEcho(d, "threads"),
        "kecho-unbound": lambda d: KernelEcho("unbound"),
        "kecho-bound": lambda d: KernelEcho("bound"),
    },
    "msg": {
        "msg": lambda d: MsgServer(d),
        "kcm": lambda d: KcmServer(d),
    },
}


def http_engines(where="host"):
    """What the bench compares: nginx, the floor (tools/floor.c, on its
    workloads only), ktcp-httpd in each model, lwan; in the VM khttpd in
    each mode too."""
    engines = [Nginx(), Floor()] + [UserHttpd(m) for m in HTTPD_MODELS] + [Lwan()]
    if where == "vm":
        engines += [KernelHttpd(m) for m in KHTTPD_MODES]
    return engines


def echo_engines(where="host"):
    engines = [UserEcho()]
    if where == "vm":
        engines += [KernelEcho(m) for m in KECHO_MODES]
    return engines
