"""ktcp's engines: every server the test suites and the bench start, stop
and wait for, on the host or in the VM (kernel modules only in the VM).

    import engines                      # tools/ on sys.path
    e = engines.UserHttpd("epoll", logdir).start(root)   # serves on e.port
    e.stop()

SUITE names the engines each conformance suite runs (its fixture ids);
http_engines() and echo_engines() those the bench compares."""
import os

from .base import (BUILD, TOP, Engine, EngineError, KernelModule, Unsupported, exit_reason,
                   free_port, in_vm, module_path, parse_counters, raise_nofile, run,
                   stats_file_counters, wait_port)
from .echo import ECHO_BIN, KECHO_MODES, KernelEcho, UserEcho
from .httpd import (FLOOR_BIN, FLOOR_WORKLOADS, HTTPD_BIN, HTTPD_MODELS, KHTTPD_MODES, TLSD_BIN,
                    Floor, FloorHttp, KernelHttpd, KernelHttpdTls, Lwan, Nginx, UserHttpd, UserHttpdKtls,
                    lwan_path, nginx_path)
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
        # HTTPS in the VM, the records the kernel's (kTLS): khttpd behind
        # ktcp-tlsd, ktcp-httpd with kTLS TX and RX; one variant of each
        # per kernel (VM_KERNEL)
        "khttpd-unbound-tls": lambda d: KernelHttpdTls("unbound", d),
        "khttpd-kthread-tls": lambda d: KernelHttpdTls("kthread", d),
        "user-epoll-ktls": lambda d: UserHttpdKtls("epoll", d),
        "user-mn-ktls": lambda d: UserHttpdKtls("mn", d),
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


# HTTPS over kTLS in the guests: khttpd behind ktcp-tlsd and ktcp-httpd
# with kTLS TX and RX, each engine in one guest kernel only (the series its
# release starts with): the whole suite a variant costs minutes, so khttpd
# unbound and ktcp-httpd epoll on 6.12, khttpd kthread and ktcp-httpd mn on
# 6.1. KTCP_VM_HTTPS=1 adds them (make check-vm, on by default; docs/tls.md),
# on the files of tests/http/conftest.py's KTLS_FILES; KTCP_VM_HTTPS=all on
# every file.
VM_KERNEL = {
    "khttpd-unbound-tls": "6.12",
    "user-epoll-ktls": "6.12",
    "khttpd-kthread-tls": "6.1",
    "user-mn-ktls": "6.1",
}


def runs_here(name):
    """Whether the suite engine name runs in this run: a VM_KERNEL engine
    only with KTCP_VM_HTTPS=1 (or all) and, in a guest, on its own
    series."""
    series = VM_KERNEL.get(name)
    if not series:
        return True
    if os.environ.get("KTCP_VM_HTTPS") not in ("1", "all"):
        return False
    return not in_vm() or os.uname().release.startswith(series + ".")


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
