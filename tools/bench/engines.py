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

    def start(self, port, ctx):
        raise NotImplementedError

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
        self.log = open(os.path.join(ctx.tmp, f"{self.name}.log"), "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=raise_nofile)
        err = wait_port(self.port, proc=self.proc)
        if err:
            self.stop()
            raise RuntimeError(f"{self.name}: {err} (log: {self.log.name})")


class KtcpHttpd(Engine):
    def __init__(self, model):
        super().__init__(f"ktcp-httpd-{model}")
        self.model = model

    def unavailable(self):
        if not os.access(os.path.join(BUILD, "ktcp-httpd"), os.X_OK):
            return "build/ktcp-httpd not built (run make)"
        return None

    def start(self, port, ctx):
        self.port = port
        self._spawn([os.path.join(BUILD, "ktcp-httpd"), "--root", ctx.docroot,
                     "--port", str(port), "--model", self.model,
                     "--threads", str(os.cpu_count()), "--idle-timeout", "60000"], ctx)


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

    def config(self, port, docroot, prefix):
        user = "user root;" if os.geteuid() == 0 else ""
        temps = "\n".join(f"    {k}_temp_path {prefix}/{k};"
                          for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        return f"""{user}
worker_processes {os.cpu_count()};
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
    types {{ text/html html; text/plain txt; application/octet-stream bin; }}
{temps}
    server {{
        listen 127.0.0.1:{port} reuseport;
        root {docroot};
    }}
}}
"""

    def start(self, port, ctx):
        self.port = port
        self.prefix = tempfile.mkdtemp(prefix="nginx-", dir=ctx.tmp)
        conf = os.path.join(self.prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write(self.config(port, ctx.docroot, self.prefix))
        nginx = shutil.which("nginx", path=os.environ.get("PATH", "") + ":/usr/sbin")
        self._spawn([nginx, "-c", conf, "-p", self.prefix, "-e", self.prefix + "/error.log",
                     "-g", "daemon off;"], ctx)

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


class Lwan(Engine):
    def __init__(self):
        super().__init__("lwan")

    def unavailable(self):
        if not shutil.which("lwan"):
            return "lwan is not on PATH"
        return None

    def start(self, port, ctx):
        self.port = port
        self._spawn([shutil.which("lwan"), "-r", ctx.docroot, "-l", f"127.0.0.1:{port}"], ctx)


class KtcpEcho(Engine):
    kind = "echo"

    def __init__(self):
        super().__init__("ktcp-echo")

    def unavailable(self):
        if not os.access(os.path.join(BUILD, "ktcp-echo"), os.X_OK):
            return "build/ktcp-echo not built (run make)"
        return None

    def start(self, port, ctx):
        self.port = port
        self._spawn([os.path.join(BUILD, "ktcp-echo"), "--port", str(port),
                     "--threads", str(os.cpu_count())], ctx)


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
