"""The engines the bench drives: each knows how to start on a port, prove it
answers, and stop, and says why it cannot run when it cannot.

User-space servers (ktcp-httpd in each model, ktcp-echo, nginx, lwan) are
child processes; kernel engines (khttpd.ko in each mode, kecho.ko in each
wq_mode) are insmod/rmmod pairs and exist only inside the VM."""
import os
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(TOP, "build")
# make modules builds into build/modules/<release>/; the VM's running kernel picks.
MODDIR = os.path.join(TOP, "build", "modules", os.uname().release, "kernel")
KHTTPD_KO = os.path.join(MODDIR, "khttpd", "khttpd.ko")
KECHO_KO = os.path.join(MODDIR, "kecho", "kecho.ko")
DROP_KO = os.path.join(MODDIR, "drop_tcp_socket", "drop_tcp_socket.ko")

HTTPD_MODELS = ("threads", "epoll", "mn")
KHTTPD_MODES = ("unbound", "bound", "kthread")
KECHO_MODES = ("unbound", "bound", "highpri", "cpu_intensive")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raise_nofile():
    """Soft RLIMIT_NOFILE up to the hard limit (inherited by children)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def wait_port(port, deadline_s=10.0, proc=None):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            return f"exited with status {proc.returncode} before listening"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return None
        except OSError:
            time.sleep(0.05)
    return f"nothing listening on 127.0.0.1:{port} after {deadline_s:.0f} s"


def in_vm():
    return os.environ.get("KTCP_IN_VM") == "1"


def workers(ctx):
    """Worker threads or processes an engine runs: one per core for make
    bench; the cost bench (cost.py) sets ctx.workers = 1."""
    return getattr(ctx, "workers", None) or os.cpu_count()


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


class Engine:
    """name: as it appears in tables; kind: 'http' or 'echo'."""
    kind = "http"
    kernel = False

    def __init__(self, name):
        self.name = name
        self.port = None
        self.proc = None
        self.log = None

    def unavailable(self):
        """None when the engine can run here, else the reason it cannot."""
        return None

    def argv(self, port, ctx):
        """The command line of a user-space engine."""
        raise NotImplementedError

    def start(self, port, ctx):
        self.port = port
        self._spawn(self.argv(port, ctx), ctx)

    def died(self):
        """None while the engine runs (or was never started), else how its
        process ended: a crash between two runs is a result, not a harness
        failure."""
        if self.proc is None:
            return None
        return exit_reason(self.proc.poll())

    def log_tail(self, n=400):
        if self.log is None:
            return ""
        try:
            with open(self.log.name, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - n))
                return f.read().decode(errors="replace").strip()
        except OSError:
            return ""

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=5)
            self.proc = None

    def pids(self):
        """Processes whose memory is the engine's (for the RSS check)."""
        if self.proc is None:
            return []
        return [self.proc.pid]

    def _spawn(self, argv, ctx):
        """Start argv; ctx.wrap(engine, argv) -> (argv, env) may put it under
        a tool (the cost bench: valgrind), ctx.start_timeout_s bounds the
        wait for its port."""
        env = None
        wrap = getattr(ctx, "wrap", None)
        if wrap is not None:
            argv, env = wrap(self, argv)
        self.log = open(os.path.join(ctx.tmp, f"{self.name}.log"), "ab")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=raise_nofile, env=env)
        err = wait_port(self.port, deadline_s=getattr(ctx, "start_timeout_s", 10.0),
                        proc=self.proc)
        if err:
            tail = self.log_tail(300)
            self.stop()
            raise RuntimeError(f"{self.name}: {err} (log: {self.log.name}"
                               + (f": {tail}" if tail else "") + ")")


class KtcpHttpd(Engine):
    def __init__(self, model):
        super().__init__(f"ktcp-httpd-{model}")
        self.model = model

    def unavailable(self):
        if not os.access(os.path.join(BUILD, "ktcp-httpd"), os.X_OK):
            return "build/ktcp-httpd not built (run make)"
        return None

    def argv(self, port, ctx):
        # as nginx here ("user root;"): stays root when run as root, so
        # valgrind and perf can write their files in root's private tmp
        as_root = ["--user", "root"] if os.geteuid() == 0 else []
        return [os.path.join(BUILD, "ktcp-httpd"), "--root", ctx.docroot,
                "--port", str(port), "--model", self.model,
                "--threads", str(workers(ctx)), "--idle-timeout-ms", "60000",
                *as_root]


class Nginx(Engine):
    """A private nginx configured as ktcp-httpd behaves: sendfile, keep-alive
    with no per-connection request limit, access log off, one worker per core
    each with its own SO_REUSEPORT listener (ktcp-httpd's epoll model), an open
    file cache standing for ktcp-httpd's metadata cache, directory listings,
    gzip at zlib level 6 for the same text types."""

    def __init__(self):
        super().__init__("nginx")
        self.prefix = None

    def unavailable(self):
        if not shutil.which("nginx", path=os.environ.get("PATH", "") + ":/usr/sbin"):
            return "nginx not installed (scripts/deps installs it)"
        return None

    def config(self, port, docroot, prefix, single=False, gzip_static=False):
        """single: no master, the one process serves (master_process off),
        for the cost bench; gzip_static: send page.html.gz when it exists
        (the cost bench's cached gzip; make bench compresses per request)."""
        user = "user root;" if os.geteuid() == 0 else ""
        temps = "\n".join(f"    {k}_temp_path {prefix}/{k};"
                          for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        head = "master_process off;\nworker_processes 1;" if single else \
            f"worker_processes {os.cpu_count()};"
        # with gzip_vary on, gzip_static looks for FILE.gz on every request
        # (to decide on Vary); open_file_cache_errors keeps the miss cached
        static = "    gzip_static on;\n    open_file_cache_errors on;\n" if gzip_static else ""
        return f"""{user}
{head}
worker_rlimit_nofile {resource.getrlimit(resource.RLIMIT_NOFILE)[1]};
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{ worker_connections 16384; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 60s;
    keepalive_requests 1000000000;
    open_file_cache max=10000 inactive=60s;
    autoindex on;
    gzip on;
    gzip_comp_level 6;
    gzip_vary on;
    gzip_min_length 1;
    gzip_types text/plain text/css text/javascript application/json application/xml image/svg+xml;
{static}    types {{ text/html html; text/plain txt; application/octet-stream bin; }}
{temps}
    server {{
        listen 127.0.0.1:{port} reuseport;
        root {docroot};
    }}
}}
"""

    def argv(self, port, ctx):
        self.prefix = tempfile.mkdtemp(prefix="nginx-", dir=ctx.tmp)
        conf = os.path.join(self.prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write(self.config(port, ctx.docroot, self.prefix,
                                single=getattr(ctx, "workers", None) == 1,
                                gzip_static=getattr(ctx, "gzip_static", False)))
        nginx = shutil.which("nginx", path=os.environ.get("PATH", "") + ":/usr/sbin")
        return [nginx, "-c", conf, "-p", self.prefix, "-e", self.prefix + "/error.log",
                "-g", "daemon off;"]

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: workers exit too
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        super().stop()

    def pids(self):
        if self.proc is None:
            return []
        pids = [self.proc.pid]
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
        return pids


def lwan_path():
    """LWAN=/path/to/lwan, else lwan on PATH, else None."""
    p = os.environ.get("LWAN")
    if p:
        return p
    return shutil.which("lwan")


class Lwan(Engine):
    """lwan (not in Debian; BENCHMARKS.md says how to build it), given as
    LWAN=/path/to/lwan or found on PATH. Its configuration is ours, in the
    run's temporary folder: the listener on 127.0.0.1 only, serve_files on
    the bench's document root with pre-compressed files (page.html.gz when
    present) and directory listings, file metadata cached 60 s (nginx's
    open_file_cache inactive=60s; lwan's default is 5 s), keep-alive 60 s,
    one I/O thread per worker of the other engines."""

    def __init__(self):
        super().__init__("lwan")
        self.conf = None

    def unavailable(self):
        p = lwan_path()
        if not p:
            return "lwan not given (LWAN=/path/to/lwan) and not on PATH"
        if not os.access(p, os.X_OK):
            return f"LWAN={p} is not an executable file"
        return None

    def config(self, port, ctx):
        return f"""keep_alive_timeout = 60
quiet = true
threads = {workers(ctx)}
listener 127.0.0.1:{port}
site {{
    serve_files / {{
        path = {ctx.docroot}
        serve precompressed files = true
        auto index = true
        cache for = 60s
    }}
}}
"""

    def argv(self, port, ctx):
        d = tempfile.mkdtemp(prefix="lwan-", dir=ctx.tmp)
        self.conf = os.path.join(d, "lwan.conf")
        with open(self.conf, "w") as f:
            f.write(self.config(port, ctx))
        return [os.path.abspath(lwan_path()), "-c", self.conf]


class KtcpEcho(Engine):
    kind = "echo"

    def __init__(self):
        super().__init__("ktcp-echo")

    def unavailable(self):
        if not os.access(os.path.join(BUILD, "ktcp-echo"), os.X_OK):
            return "build/ktcp-echo not built (run make)"
        return None

    def argv(self, port, ctx):
        return [os.path.join(BUILD, "ktcp-echo"), "--port", str(port),
                "--threads", str(workers(ctx))]


class KernelModule(Engine):
    """An engine that is a module: loaded for its runs, unloaded after."""
    kernel = True
    ko = None
    module = None

    def unavailable(self):
        if not in_vm():
            return "kernel modules run only inside the VM"
        if not os.path.exists(self.ko):
            return f"{os.path.relpath(self.ko, TOP)} not built (make modules)"
        return None

    def params(self, port, ctx):
        raise NotImplementedError

    def start(self, port, ctx):
        self.port = port
        subprocess.run(["rmmod", self.module], stderr=subprocess.DEVNULL, timeout=30)
        r = subprocess.run(["insmod", self.ko] + self.params(port, ctx),
                           capture_output=True, text=True, timeout=30)
        if r.returncode:
            raise RuntimeError(f"{self.name}: insmod failed: {r.stderr.strip()}")
        err = wait_port(port)
        if err:
            self.stop()
            raise RuntimeError(f"{self.name}: {err}")

    def stop(self):
        if self.port is not None:
            subprocess.run(["rmmod", self.module], stderr=subprocess.DEVNULL, timeout=60)
            self.port = None


class Khttpd(KernelModule):
    ko = KHTTPD_KO
    module = "khttpd"

    def __init__(self, mode):
        super().__init__(f"khttpd-{mode}")
        self.mode = mode

    def params(self, port, ctx):
        return [f"root={ctx.docroot}", f"port={port}", f"mode={self.mode}",
                "idle_timeout_ms=60000", "max_conns=20000"]


class Kecho(KernelModule):
    kind = "echo"
    ko = KECHO_KO
    module = "kecho"

    def __init__(self, mode):
        super().__init__(f"kecho-{mode}")
        self.mode = mode

    def params(self, port, ctx):
        return [f"port={port}", f"wq_mode={self.mode}", "max_conns=20000"]


def http_engines(env):
    engines = [Nginx()] + [KtcpHttpd(m) for m in HTTPD_MODELS] + [Lwan()]
    if env == "vm":
        engines += [Khttpd(m) for m in KHTTPD_MODES]
    return engines


def echo_engines(env):
    engines = [KtcpEcho()]
    if env == "vm":
        engines += [Kecho(m) for m in KECHO_MODES]
    return engines
