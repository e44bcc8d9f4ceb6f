"""What every engine shares: where the builds are, ports, the VM test, and
the Engine class (start, wait for the port, stop) that each server fills in.

An engine is started with start(root=None, port=None, **options) and returns
itself, serving on self.port (a free loopback port unless one is given).
Options a server does not have are left out of its command line when given
as None; a kernel engine that cannot honour one raises Unsupported, which the
test suite reports as a skip and the bench as the engine's reason.

Options every process engine takes, beside its own:
  logdir         folder of the log (stdout and stderr), default the system's
  log            the log's path instead (appended to)
  nofile         RLIMIT_NOFILE of the process: a number, or "max" (the hard
                 limit); default inherited
  wrap           wrap(engine, argv) -> (argv, env): run under a tool
  start_timeout  seconds to wait for the port (default 20)
  ready          text the server logs once it listens: waited for in the
                 log instead of a probe connection (so its counters hold
                 only what the caller does)
"""
import collections
import os
import resource
import signal
import socket
import subprocess
import tempfile
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(TOP, "build")

PROCESS_OPTIONS = ("logdir", "log", "nofile", "wrap", "start_timeout", "ready")


class Unsupported(Exception):
    """This engine cannot run here, or cannot honour an option."""


class EngineError(RuntimeError):
    """An engine did not start, or did not stop as it should."""


def module_path(name):
    """The .ko of kernel/<name>/ built for the running kernel (make modules
    writes build/modules/<release>/kernel/<name>/<name>.ko); KTCP_KO_DIR
    names another folder holding <name>.ko (an older build, to show that a
    test fails without a fix)."""
    other = os.environ.get("KTCP_KO_DIR")
    if other:
        return os.path.join(other, name + ".ko")
    return os.path.join(BUILD, "modules", os.uname().release, "kernel", name, name + ".ko")


def in_vm():
    """Inside the project VM (scripts/vm sets KTCP_IN_VM=1): the only place
    kernel modules are loaded."""
    return os.environ.get("KTCP_IN_VM") == "1"


# The ports this process handed out last: the kernel may give a port back
# as soon as its probe socket closes, so two calls for one server (a plain
# and a TLS port) could otherwise name the same port.
RECENT_PORTS = 512
_given = collections.deque(maxlen=RECENT_PORTS)


def free_port():
    """A free TCP port on 127.0.0.1, none of the last RECENT_PORTS given."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _given:
            _given.append(port)
            return port
    raise RuntimeError("no free port outside the recently given ones")


def wait_port(port, host="127.0.0.1", timeout=20.0, proc=None):
    """Wait until something accepts on host:port; fail early if proc died.
    Raises RuntimeError (proc exited) or TimeoutError."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server {exit_reason(proc.returncode)} before listening on {port}")
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout:.0f}s")


def run(cmd, check=True, **kw):
    """Run a command; with check, a failure raises with its output."""
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def raise_nofile(at_least=None):
    """Soft RLIMIT_NOFILE up to the hard limit (inherited by children); as
    root, both up to at_least when that is more."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if at_least and hard < at_least and os.geteuid() == 0:
        hard = at_least
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def exit_reason(returncode):
    """How a child ended, in words: 'exited with status 3', 'killed by SIGSEGV'."""
    if returncode is None:
        return None
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


def parse_counters(text):
    """'name value' lines (a stats file, /proc/net/<module>) as a dict."""
    return {k: int(v) for k, v in (line.split()[:2] for line in text.splitlines() if line.strip())}


def stats_file_counters(proc, path, timeout=5.0):
    """The counters a user-space server writes to its --stats-file on
    SIGUSR1 (user/rt/rt-cli.c: "name value" lines, written aside and
    renamed), fresh: the old file is removed first."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"no counters in {path} after SIGUSR1"
        time.sleep(0.01)
    with open(path) as f:
        return parse_counters(f.read())


class Engine:
    """A server the suite or the bench drives.

    name: as in tables and logs; family: the server whatever its model or
    mode (ktcp-httpd, khttpd, nginx...); proto: http, echo or msg; kind:
    user or kernel (what KTCP_ENGINES selects); kernel: a module, loaded
    by start and unloaded by stop (else a child process)."""
    name = family = "engine"
    proto = "http"
    kind = "user"
    kernel = False
    defaults = {}          # options start() uses when not given them
    stop_timeout = 10      # seconds from SIGTERM to exit
    check_dead_exit = True  # stop() checks the status of a process already gone

    def __init__(self, name=None, logdir=None):
        if name:
            self.name = name
        self.logdir = logdir
        self.port = None
        self.proc = None
        self.log = None
        self.log_path = None
        self.opts = {}
        self.tmp_files = []  # made for a launch, removed by stop

    def remove_tmp_files(self):
        while self.tmp_files:
            try:
                os.unlink(self.tmp_files.pop())
            except FileNotFoundError:
                pass

    def unavailable(self):
        """None when the engine can run here, else the reason it cannot."""
        return None

    def argv(self, port, o):
        """The command line of a process engine; o holds the options merged
        over the defaults, and root."""
        raise NotImplementedError

    def start(self, root=None, port=None, **options):
        o = dict(self.defaults)
        o.update(options)
        o["root"] = root
        self.opts = o
        self.port = port or free_port()
        self.launch(o)
        return self

    def launch(self, o):
        argv = self.argv(self.port, o)
        env = None
        if o.get("wrap"):
            argv, env = o["wrap"](self, argv)
        logdir = o.get("logdir") or self.logdir or tempfile.gettempdir()
        self.log_path = o.get("log") or os.path.join(logdir, f"{self.name}-{self.port}.log")
        self.log = open(self.log_path, "ab")
        # a port comes back in a later launch with the same log path: what
        # this launch logs starts here (a ready line from before is not
        # this server's)
        self.log_start = self.log.tell()
        nofile = o.get("nofile")
        if nofile == "max":
            pre = raise_nofile
        elif nofile:
            def pre():
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        else:
            pre = None
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=pre, env=env)
        try:
            if o.get("ready"):
                self.wait_log(o["ready"], o.get("start_timeout") or 20.0)
            else:
                wait_port(self.port, timeout=o.get("start_timeout") or 20.0, proc=self.proc)
        except (RuntimeError, TimeoutError) as e:
            tail = self.log_tail(300)
            self.stop(check=False)
            raise EngineError(f"{self.name}: {e} (log: {self.log_path}"
                              + (f": {tail}" if tail else "") + ")") from None

    def wait_log(self, text, timeout):
        """Wait until the log holds text; fail early if the process died."""
        deadline = time.monotonic() + timeout
        while text not in self.log_text():
            if self.proc.poll() is not None:
                raise RuntimeError(f"server {exit_reason(self.proc.returncode)} before "
                                   f"logging {text!r}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {text!r} in the log after {timeout:.0f}s")
            time.sleep(0.02)

    def log_text(self):
        """What this launch has logged so far."""
        with open(self.log_path, "rb") as f:
            f.seek(getattr(self, "log_start", 0))
            return f.read().decode(errors="replace")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def died(self):
        """None while the engine runs (or was never started), else how its
        process ended."""
        if self.proc is None:
            return None
        return exit_reason(self.proc.poll())

    def signal(self, sig):
        self.proc.send_signal(sig)

    def log_tail(self, n=400):
        if not self.log_path:
            return ""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - n))
                return f.read().decode(errors="replace").strip()
        except OSError:
            return ""

    def pids(self):
        """Processes whose memory is the engine's (the bench's RSS check)."""
        return [self.proc.pid] if self.proc is not None else []

    def wait_exit(self, timeout=None):
        """Wait for the process to exit (after a signal); its exit status."""
        timeout = timeout or self.stop_timeout
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"{self.name} did not exit within {timeout} s of SIGTERM")

    def terminate(self):
        self.proc.send_signal(signal.SIGTERM)

    def stop(self, check=True):
        """Stop the engine. With check (the suite), a process must exit with
        status 0 within stop_timeout of SIGTERM; without (the bench), it is
        killed when it does not."""
        if self.proc is None:
            self.remove_tmp_files()
            return
        try:
            if self.proc.poll() is None:
                self.terminate()
            elif not (check and self.check_dead_exit):
                return
            try:
                rc = self.wait_exit(self.stop_timeout)
            except AssertionError:
                if check:
                    raise
                return
            if check:
                assert rc == 0, f"{self.name} exited {rc}:\n{self.log_tail(4000)}"
        finally:
            self.proc = None
            self.remove_tmp_files()
            if self.log is not None:
                self.log.close()
                self.log = None


class KernelModule(Engine):
    """An engine that is a module: insmod by start, rmmod by stop; only
    inside the VM."""
    kind = "kernel"
    kernel = True
    module = None

    def __init__(self, name=None):
        super().__init__(name)
        self.loaded = False

    @property
    def ko(self):
        return module_path(self.module)

    def unavailable(self):
        if not in_vm():
            return "kernel modules run only inside the VM"
        if not os.path.exists(self.ko):
            return f"{os.path.relpath(self.ko, TOP)} not built (make modules)"
        return None

    def params(self, o):
        """insmod's parameters after port=."""
        raise NotImplementedError

    def launch(self, o):
        try:
            params = self.params(o)
            r = run(["insmod", self.ko, f"port={self.port}", *params], check=False, timeout=60)
        except BaseException:
            self.remove_tmp_files()
            raise
        if r.returncode:
            self.remove_tmp_files()
            raise EngineError(f"{self.name}: insmod {' '.join(params)} failed: {r.stderr.strip()}")
        self.loaded = True
        try:
            wait_port(self.port, timeout=o.get("start_timeout") or 20.0)
        except TimeoutError as e:
            self.stop(check=False)
            raise EngineError(f"{self.name}: {e}") from None

    def alive(self):
        return self.loaded

    def died(self):
        return None

    def pids(self):
        return []

    def signal(self, sig):
        raise Unsupported("signals do not apply to a kernel module")

    def counters(self):
        with open(f"/proc/net/{self.module}") as f:
            return parse_counters(f.read())

    def stop(self, check=True):
        if not self.loaded:
            self.remove_tmp_files()
            return
        t0 = time.monotonic()
        self.loaded = False
        try:
            r = run(["rmmod", self.module], check=check, timeout=60 if not check else 30)
        finally:
            self.remove_tmp_files()
        if check:
            assert time.monotonic() - t0 < 20, f"rmmod {self.module} took too long"
        return r

    def unload_stale(self):
        """rmmod a copy left loaded by an earlier run (the bench starts
        clean; the suite would rather see it fail)."""
        subprocess.run(["rmmod", self.module], stderr=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, timeout=30)
