"""Echo engines: the user-space ktcp-echo on the host (its epoll model, and
its mn and threads models), kecho.ko in the VM.

Every engine has the same face: start(**options), counters(), stop(), and
port. Options use the module parameter names (idle_timeout_ms, max_conns,
wq_mode).
"""
import os
import resource
import signal
import subprocess
import time

from testlib import BUILD, ROOT, free_port, run, wait_port, module_path

KECHO_KO = module_path("kecho")


class EchoEngine:
    def settle(self, timeout=10):
        """Wait until the readiness probe's connection is gone, so tests can
        count connections from zero."""
        deadline = time.monotonic() + timeout
        while self.counters()["active"] != 0:
            assert time.monotonic() < deadline, "readiness probe never closed"
            time.sleep(0.02)
        return self


class UserEcho(EchoEngine):
    kind = "user"

    def __init__(self, tmpdir, model="epoll"):
        self.tmpdir = tmpdir
        self.model = model
        self.proc = None

    def start(self, idle_timeout_ms=30000, max_conns=10000, threads=2, nofile=None, **_):
        self.port = free_port()
        self.stats_file = os.path.join(self.tmpdir, "echo-stats")
        self.proc = subprocess.Popen(
            [os.path.join(BUILD, "ktcp-echo"), "--port", str(self.port),
             "--bind", "127.0.0.1", "--threads", str(threads), "--model", self.model,
             "--idle-timeout-ms", str(idle_timeout_ms),
             "--max-conns", str(max_conns), "--stats-file", self.stats_file],
            stderr=subprocess.PIPE, text=True,
            preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) if nofile else None)
        wait_port(self.port, proc=self.proc)
        return self.settle()

    def counters(self):
        """Ask for a fresh snapshot (SIGUSR1) and read it."""
        try:
            os.unlink(self.stats_file)
        except FileNotFoundError:
            pass
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while not os.path.exists(self.stats_file):
            assert time.monotonic() < deadline, "ktcp-echo wrote no counters after SIGUSR1"
            time.sleep(0.01)
        return parse_counters(open(self.stats_file).read())

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise AssertionError("ktcp-echo did not exit within 10 s of SIGTERM")
            assert rc == 0, f"ktcp-echo exited {rc}: {self.proc.stderr.read()}"
        self.proc = None


class KernelEcho(EchoEngine):
    kind = "kernel"

    def __init__(self, wq_mode="unbound"):
        self.wq_mode = wq_mode
        self.loaded = False

    def start(self, idle_timeout_ms=30000, max_conns=10000, **_):
        self.port = free_port()
        run(["insmod", KECHO_KO, f"port={self.port}", f"wq_mode={self.wq_mode}",
             f"idle_timeout_ms={idle_timeout_ms}", f"max_conns={max_conns}"])
        self.loaded = True
        wait_port(self.port)
        return self.settle()

    def counters(self):
        with open("/proc/net/kecho") as f:
            return parse_counters(f.read())

    def stop(self):
        if self.loaded:
            t0 = time.monotonic()
            run(["rmmod", "kecho"], timeout=30)
            self.loaded = False
            assert time.monotonic() - t0 < 20, "rmmod kecho took too long"


def parse_counters(text):
    out = {}
    for line in text.splitlines():
        k, v = line.split()
        out[k] = int(v)
    return out


ENGINES = {
    "user": lambda tmp: UserEcho(tmp),
    "user-mn": lambda tmp: UserEcho(tmp, "mn"),
    "user-threads": lambda tmp: UserEcho(tmp, "threads"),
    "kecho-unbound": lambda tmp: KernelEcho("unbound"),
    "kecho-bound": lambda tmp: KernelEcho("bound"),
}
