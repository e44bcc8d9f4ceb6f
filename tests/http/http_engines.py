"""HTTP engines: ktcp-httpd in each model on the host, khttpd.ko in the VM.

Every engine has the same face: start(root, **options) -> self (serving
root on self.port), stop() -> None (asserts a clean exit), and kind.
Options use khttpd's module parameter names (cache_size is its cache_bytes):

  idle_timeout_ms  close idle connections and unfinished heads after this
  max_conns        refuse connections beyond this many
  gzip             serve gzip copies of compressible files (default True)
  access_log       file to log requests to (user engines only)
  cache_size       content cache limit in bytes
  nofile           RLIMIT_NOFILE of the server process (user engines only)
  expires_s        files get Cache-Control: max-age / Expires this far ahead
  gzip_static      serve file.gz beside file to clients accepting gzip
  error_pages      "404=/404.html,403=/403.html": custom error pages
  mime_types       a mime.types file read before the built-in table
                   (user engines only: khttpd keeps the built-in table)
  status_path      where ktcp-httpd serves its counters (khttpd has
                   /proc/net/khttpd): counters() reads them
  user             the account files are read as: ktcp-httpd started as root
                   gets --user (default nobody; not root: it serves as the
                   test's user), khttpd the account's uid and gid
  dotfiles         "deny" (default) or "allow": paths with a segment
                   starting with '.'

An engine that cannot honour an option skips the test that asked for it.
"""
import os
import pwd
import resource
import signal
import subprocess
import time

import pytest

from rawhttp import get as http_get
from testlib import BUILD, ROOT, free_port, run, wait_port, module_path

# KTCP_HTTPD_BIN runs the suite against another build (sanitizers, ...).
HTTPD_BIN = os.environ.get("KTCP_HTTPD_BIN", os.path.join(BUILD, "ktcp-httpd"))
KHTTPD_KO = module_path("khttpd")


class UserHttpd:
    kind = "user"

    def __init__(self, model, logdir):
        self.model = model
        self.logdir = logdir
        self.proc = None
        self.port = None

    def start(self, root, idle_timeout_ms=30000, max_conns=0, gzip=True,
              access_log=None, threads=2, cache_size=None, nofile=None,
              expires_s=None, gzip_static=None, error_pages=None,
              mime_types=None, status_path=None, user="nobody", dotfiles=None):
        if not os.path.exists(HTTPD_BIN):
            pytest.fail(f"{HTTPD_BIN} is not built (run make)")
        self.port = free_port()
        cmd = [HTTPD_BIN, "--root", root, "--port", str(self.port),
               "--bind", "127.0.0.1", "--model", self.model,
               "--threads", str(threads),
               "--idle-timeout-ms", str(idle_timeout_ms),
               "--max-conns", str(max_conns),
               "--gzip" if gzip else "--no-gzip"]
        if access_log:
            cmd += ["--access-log", access_log]
        if cache_size is not None:
            cmd += ["--cache-size", str(cache_size)]
        if expires_s is not None:
            cmd += ["--expires", str(expires_s)]
        if gzip_static is not None:
            cmd.append("--gzip-static" if gzip_static else "--no-gzip-static")
        for page in (error_pages.split(",") if error_pages else []):
            cmd += ["--error-page", page]
        if mime_types is not None:
            cmd += ["--mime-types", mime_types]
        self.status_path = status_path
        if status_path:
            cmd += ["--status-path", status_path]
        if os.geteuid() == 0:
            cmd += ["--user", user]
        if dotfiles:
            cmd += ["--dotfiles", dotfiles]
        self.stderr_path = os.path.join(self.logdir, f"httpd-{self.model}-{self.port}.err")
        self.stderr = open(self.stderr_path, "w")
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) if nofile else None
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.stderr,
                                     preexec_fn=limit)
        wait_port(self.port, proc=self.proc)
        return self

    def signal(self, sig):
        self.proc.send_signal(sig)

    def counters(self):
        """The plain counters (started with status_path)."""
        r = http_get(self.port, self.status_path, [("Connection", "close")])
        assert r.status == 200, r
        return {k: int(v) for k, v in
                (line.split(" ") for line in r.body.decode().splitlines())}

    def wait_exit(self, timeout=15):
        """Wait for the process to exit; returns its exit status."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"ktcp-httpd --model {self.model} did not exit "
                                 f"within {timeout} s of SIGTERM")

    def stop(self):
        if self.proc is None:
            return
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            rc = self.wait_exit()
            assert rc == 0, (f"ktcp-httpd exited {rc}:\n"
                             + open(self.stderr_path).read())
        finally:
            self.proc = None
            self.stderr.close()


class KernelHttpd:
    """khttpd.ko, loaded inside the project VM. One instance at a time."""
    kind = "kernel"
    # suite option -> module parameter
    params = {"idle_timeout_ms": "idle_timeout_ms", "max_conns": "max_conns",
              "gzip": "gzip", "cache_size": "cache_bytes",
              "expires_s": "expires_s", "gzip_static": "gzip_static",
              "error_pages": "error_pages", "dotfiles": "dotfiles"}

    def __init__(self, mode=None):
        self.mode = mode  # None: the module's default (unbound CMWQ)
        self.loaded = False
        self.port = None

    def start(self, root, access_log=None, threads=None, nofile=None,
              status_path=None, user=None, **options):
        if nofile:
            pytest.skip("a module has no descriptor limit")
        if not os.path.exists(KHTTPD_KO):
            pytest.skip(f"khttpd.ko is not built ({KHTTPD_KO} missing)")
        if access_log:
            pytest.skip("khttpd has no access log")
        self.port = free_port()
        args = [f"root={root}", f"port={self.port}"]
        if self.mode:
            args.append(f"mode={self.mode}")
        if user:  # else the module's default, nobody/nogroup
            pw = pwd.getpwnam(user)
            args += [f"uid={pw.pw_uid}", f"gid={pw.pw_gid}"]
        for k, v in options.items():
            if k not in self.params:
                pytest.skip(f"khttpd has no parameter for {k}")
            args.append(f"{self.params[k]}={int(v) if isinstance(v, bool) else v}")
        run(["insmod", KHTTPD_KO, *args])
        self.loaded = True
        wait_port(self.port)
        return self

    def signal(self, sig):
        pytest.skip("signals do not apply to a kernel module")

    def counters(self):
        with open("/proc/net/khttpd") as f:
            return {k: int(v) for k, v in (line.split() for line in f)}

    def stop(self):
        if self.loaded:
            t0 = time.monotonic()
            run(["rmmod", "khttpd"], timeout=30)
            self.loaded = False
            assert time.monotonic() - t0 < 20, "rmmod khttpd took too long"


ENGINES = {
    "user-threads": lambda tmp: UserHttpd("threads", tmp),
    "user-epoll": lambda tmp: UserHttpd("epoll", tmp),
    "user-mn": lambda tmp: UserHttpd("mn", tmp),
    "khttpd": lambda tmp: KernelHttpd(),
}
