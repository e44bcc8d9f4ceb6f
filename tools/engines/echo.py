"""Echo engines: ktcp-echo in each model, kecho.ko in each mode (in the
VM). Options, named after kecho's module parameters: idle_timeout_ms,
max_conns, max_conns_per_ip; ktcp-echo also threads, nofile, bind; settle (default True):
start() returns once the readiness probe's connection is gone, so callers
count connections from zero."""
import os
import time

from .base import BUILD, Engine, KernelModule, stats_file_counters

# KTCP_ECHO_BIN runs the suite against another build (as KTCP_HTTPD_BIN).
ECHO_BIN = os.environ.get("KTCP_ECHO_BIN", os.path.join(BUILD, "ktcp-echo"))
KECHO_MODES = ("unbound", "bound", "highpri", "cpu_intensive")


class EchoEngine:
    proto = "echo"

    def settle(self, timeout=10):
        """Wait until the readiness probe's connection is gone: accepted
        (the server may take it from its backlog after the probe closed)
        and released."""
        deadline = time.monotonic() + timeout
        while True:
            c = self.counters()
            if c["accepted"] >= 1 and c["active"] == 0:
                return self
            assert time.monotonic() < deadline, "readiness probe never closed"
            time.sleep(0.02)

    def start(self, root=None, port=None, **options):
        super().start(root, port, **options)
        return self.settle() if self.opts.get("settle") else self


class StatsFile:
    """A process that writes its counters to --stats-file on SIGUSR1."""

    def counters(self):
        """Ask for a fresh snapshot (SIGUSR1) and read it."""
        return stats_file_counters(self.proc, self.stats_file)


class UserEcho(EchoEngine, StatsFile, Engine):
    """ktcp-echo --model <model>. Defaults are the suite's."""
    family = "ktcp-echo"
    check_dead_exit = False
    defaults = {"idle_timeout_ms": 30000, "max_conns": 10000, "threads": 2,
                "bind": "127.0.0.1", "settle": True}

    def __init__(self, logdir=None, model="epoll"):
        super().__init__("ktcp-echo" if model == "epoll" else f"ktcp-echo-{model}", logdir)
        self.model = model

    def unavailable(self):
        if not os.access(ECHO_BIN, os.X_OK):
            return "build/ktcp-echo not built (run make)"
        return None

    def argv(self, port, o):
        self.stats_file = os.path.join(o.get("logdir") or self.logdir or "/tmp",
                                       f"{self.name}-{port}.stats")
        cmd = [ECHO_BIN, "--port", str(port)]
        for key, flag in (("bind", "--bind"), ("threads", "--threads"),
                          ("idle_timeout_ms", "--idle-timeout-ms"), ("max_conns", "--max-conns"),
                          ("max_conns_per_ip", "--max-conns-per-ip")):
            if o.get(key) is not None:
                cmd += [flag, str(o[key])]
        return cmd + ["--model", self.model, "--stats-file", self.stats_file] + list(o.get("args") or ())


class KernelEcho(EchoEngine, KernelModule):
    """kecho.ko with mode=<mode>, loaded inside the project VM."""
    family = module = "kecho"
    defaults = {"idle_timeout_ms": 30000, "max_conns": 10000, "settle": True}

    def __init__(self, mode="unbound"):
        super().__init__(f"kecho-{mode}")
        self.mode = mode

    def params(self, o):
        args = [f"mode={self.mode}"]
        for key in ("idle_timeout_ms", "max_conns", "max_conns_per_ip"):
            if o.get(key) is not None:
                args.append(f"{key}={o[key]}")
        return args
