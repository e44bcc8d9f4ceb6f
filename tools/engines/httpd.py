"""HTTP engines: ktcp-httpd in each model, khttpd.ko in each mode (in the
VM), and the reference servers the bench compares with: nginx, and lwan
when LWAN=/path/to/lwan is set or lwan is on PATH.

ktcp-httpd and khttpd take the same options, named after khttpd's module
parameters (cache_size is its cache_bytes):

  idle_timeout_ms  close idle connections and unfinished heads after this
  max_conns        refuse connections beyond this many
  max_conns_per_ip refuse connections beyond this many from one address
                   (the servers' default: a quarter of max_conns, at least 64)
  gzip             serve gzip copies of compressible files
  access_log       file to log requests to (ktcp-httpd only)
  threads          worker threads (ktcp-httpd only; khttpd ignores it)
  cache_size       content cache limit in bytes
  nofile           RLIMIT_NOFILE of the server process (ktcp-httpd only)
  expires_s        files get Cache-Control: max-age / Expires this far ahead
  gzip_static      serve file.gz beside file to clients accepting gzip
  error_pages      "404=/404.html,403=/403.html": custom error pages
  mime_types       a mime.types file read before the built-in table
                   (ktcp-httpd only: khttpd keeps the built-in table)
  status_path      where ktcp-httpd serves its counters (khttpd has
                   /proc/net/khttpd): counters() reads them
  user             the account files are read as: ktcp-httpd started as root
                   gets --user, khttpd the account's uid and gid
  dotfiles         "deny" or "allow": paths with a segment starting with '.'
  listings         False: a directory without index.html answers 403
  listing_max      listings in flight; beyond: 503 with Retry-After
  listing_bytes    memory of the listings in flight; beyond: the same
  index            "index.htm,index.html": a directory's index files
  fallback         "/index.html": a missing path is answered 200 with it
  cors             "*" or an origin: Access-Control-Allow-Origin and the
                   CORS preflight (ktcp-httpd --cors, khttpd cors=)
  site             the text of a settings file in the syntax both read
                   ("add-header /a/ X-A: 1", "cors *", host blocks: "host
                   a.example", "root /srv/a"; one a line): written
                   to a file given as ktcp-httpd's --config and khttpd's
                   site=
  proxy_protocol   a PROXY protocol header (v1 or v2) starts every
                   connection of the port the tests talk to: ktcp-httpd
                   --proxy-protocol (--tls-proxy-protocol for a TLS
                   engine), khttpd proxy_protocol=1
  mode             khttpd's mode (unbound, bound, kthread); ktcp-httpd
                   has models instead
  bind             the address ktcp-httpd listens on
  args             more ktcp-httpd arguments, last on its command line
  tls_handshake_timeout_ms  ktcp-httpd --tls-handshake-timeout-ms (a TLS
                   engine only)

A TLS engine (UserHttpd(model, tls=True)) serves HTTPS on self.port, the
port the tests talk to (their clients wrap sockets to it in ssl: see
tlscert.py), and plain HTTP on self.plain_port; its certificate is a test
CA's (tlscert.make_ca), made at start. In the VM, where the kernel has
the tls ULP: UserHttpdKtls (ktcp-httpd whose records the kernel writes and
reads) and KernelHttpdTls (khttpd behind the agent ktcp-tlsd, which hands
it each handshaken socket); both have ktls set.
"""
import http.client
import os
import pwd
import resource
import shutil
import signal
import tempfile

from . import tlscert
import subprocess
import time

from .base import (BUILD, Engine, EngineError, KernelModule, Unsupported, free_port,
                   parse_counters)

# KTCP_HTTPD_BIN runs the suite against another build (sanitizers, ...).
HTTPD_BIN = os.environ.get("KTCP_HTTPD_BIN", os.path.join(BUILD, "ktcp-httpd"))
TLSD_BIN = os.path.join(BUILD, "ktcp-tlsd")
HTTPD_MODELS = ("threads", "epoll", "mn")
FLOOR_BIN = os.path.join(BUILD, "floor")
# what the floor serves: fixed bytes (keep-alive, close) and sendfile
FLOOR_WORKLOADS = ("small-keepalive", "small-close", "1mib")
KHTTPD_MODES = ("unbound", "bound", "kthread")


def site_file(engine, text):
    """A settings file holding text, readable by the server's user; the
    engine removes it when it stops (the server reads it again on
    SIGHUP until then)."""
    fd, path = tempfile.mkstemp(prefix="ktcp-site-", suffix=".conf")
    engine.tmp_files.append(path)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)
    return path


class ServesTls:
    """For an engine whose port speaks TLS when self.tls: while it runs,
    the suite's clients find the test CA of its port in tlscert.TLS_PORTS
    (self.certs, made by the engine's start)."""

    def launch(self, o):
        if self.tls:
            tlscert.TLS_PORTS[self.port] = self.certs["ca"]
        super().launch(o)

    def stop(self, check=True):
        try:
            return super().stop(check)
        finally:
            if self.tls:
                tlscert.TLS_PORTS.pop(self.port, None)


class UserHttpd(ServesTls, Engine):
    """ktcp-httpd --model <model>. Defaults are the suite's."""
    family = "ktcp-httpd"
    stop_timeout = 15
    defaults = {"idle_timeout_ms": 30000, "max_conns": 0, "gzip": True, "threads": 2,
                "user": "nobody", "bind": "127.0.0.1"}

    def __init__(self, model, logdir=None, tls=False):
        super().__init__(f"ktcp-httpd-{model}" + ("-tls" if tls else ""), logdir)
        self.model = model
        self.tls = tls
        self.plain_port = None
        self.certs = None

    def start(self, root=None, port=None, **options):
        if self.tls:
            self.certs = tlscert.make_ca()
            self.plain_port = free_port()
            # its start line, not a probe connection (which would count as
            # a failed handshake)
            options.setdefault("ready", "ktcp-httpd: HTTPS on port")
        return super().start(root, port, **options)

    @property
    def stderr_path(self):
        return self.log_path

    def unavailable(self):
        if not os.access(HTTPD_BIN, os.X_OK):
            return f"{os.path.relpath(HTTPD_BIN, os.getcwd())} not built (run make)"
        return None

    def argv(self, port, o):
        if not os.path.exists(HTTPD_BIN):
            raise AssertionError(f"{HTTPD_BIN} is not built (run make)")
        if self.tls:
            cmd = [HTTPD_BIN, "--root", o["root"], "--port", str(self.plain_port),
                   "--tls-port", str(port), "--tls-cert", self.certs["cert"],
                   "--tls-key", self.certs["key"]]
            if o.get("tls_handshake_timeout_ms"):
                cmd += ["--tls-handshake-timeout-ms", str(o["tls_handshake_timeout_ms"])]
        else:
            cmd = [HTTPD_BIN, "--root", o["root"], "--port", str(port)]
        flags = (("bind", "--bind"), ("model", "--model"), ("threads", "--threads"),
                 ("idle_timeout_ms", "--idle-timeout-ms"), ("max_conns", "--max-conns"),
                 ("max_conns_per_ip", "--max-conns-per-ip"), ("access_log", "--access-log"), ("cache_size", "--cache-size"),
                 ("expires_s", "--expires"), ("listing_max", "--listing-max"),
                 ("listing_bytes", "--listing-bytes"))
        o = dict(o, model=self.model)
        for key, flag in flags:
            if o.get(key) is not None:
                cmd += [flag, str(o[key])]
        for key, flag in (("gzip", "gzip"), ("gzip_static", "gzip-static")):
            if o.get(key) is not None:
                cmd.append(f"--{flag}" if o[key] else f"--no-{flag}")
        for page in (o["error_pages"].split(",") if o.get("error_pages") else []):
            cmd += ["--error-page", page]
        for key, flag in (("mime_types", "--mime-types"), ("status_path", "--status-path"),
                          ("dotfiles", "--dotfiles"), ("index", "--index"),
                          ("fallback", "--fallback"), ("cors", "--cors")):
            if o.get(key):
                cmd += [flag, o[key]]
        if o.get("proxy_protocol"):
            cmd.append("--tls-proxy-protocol" if self.tls else "--proxy-protocol")
        if o.get("mode"):
            raise Unsupported("ktcp-httpd has models, not khttpd's modes")
        if o.get("listings") is not None:
            cmd += ["--listings", "on" if o["listings"] else "off"]
        if os.geteuid() == 0 and o.get("user"):
            cmd += ["--user", o["user"]]
        if o.get("site") is not None:
            cmd += ["--config", site_file(self, o["site"])]
        return cmd + list(o.get("args") or ())

    def counters(self):
        """The plain counters (started with status_path)."""
        c = http.client.HTTPConnection("127.0.0.1", self.plain_port or self.port, timeout=10)
        try:
            c.request("GET", self.opts["status_path"], headers={"Connection": "close"})
            r = c.getresponse()
            body = r.read()
        finally:
            c.close()
        assert r.status == 200, (r.status, body[:200])
        return parse_counters(body.decode())


class UserHttpdKtls(UserHttpd):
    """ktcp-httpd over HTTPS in the VM, where the kernel has the tls ULP: the
    kernel writes and reads the records (kTLS TX and RX). Its clients speak
    TLS 1.2 (tlscert.TLS_MAX), the version whose receive keys Debian 12's
    OpenSSL 3.0 moves into the kernel (a TLS 1.3 session gets kTLS TX
    only), so both directions are the kernel's. A user-space server, but
    selected with the kernel engines (KTCP_ENGINES=kernel: the VM runs)."""
    select = "kernel"
    ktls = True

    def __init__(self, model, logdir=None):
        super().__init__(model, logdir, tls=True)
        self.name = f"ktcp-httpd-{model}-ktls"

    def launch(self, o):
        tlscert.TLS_MAX[self.port] = "1.2"
        super().launch(o)

    def stop(self, check=True):
        try:
            super().stop(check)
        finally:
            tlscert.TLS_MAX.pop(self.port, None)


class KernelHttpd(KernelModule):
    """khttpd.ko, loaded inside the project VM. One instance at a time."""
    family = module = "khttpd"
    # option -> module parameter
    params_of = {"idle_timeout_ms": "idle_timeout_ms", "max_conns": "max_conns",
                 "max_conns_per_ip": "max_conns_per_ip",
                 "gzip": "gzip", "cache_size": "cache_bytes",
                 "expires_s": "expires_s", "gzip_static": "gzip_static",
                 "error_pages": "error_pages", "dotfiles": "dotfiles",
                 "listings": "listings", "listing_max": "listing_max",
                 "listing_bytes": "listing_bytes", "index": "index",
                 "fallback": "fallback", "cors": "cors", "proxy_protocol": "proxy_protocol"}

    def __init__(self, mode=None):
        super().__init__(f"khttpd-{mode}" if mode else "khttpd")
        self.mode = mode  # None: the module's default (unbound CMWQ)

    def launch(self, o):
        if o.get("nofile"):
            raise Unsupported("a module has no descriptor limit")
        if not os.path.exists(self.ko):
            raise Unsupported(f"khttpd.ko is not built ({self.ko} missing)")
        if o.get("access_log"):
            raise Unsupported("khttpd has no access log")
        if o.get("args"):
            raise Unsupported("khttpd takes module parameters, not arguments")
        super().launch(o)

    def params(self, o):
        args = [f"root={o['root']}"]
        if o.get("mode") or self.mode:
            args.append(f"mode={o.get('mode') or self.mode}")
        if o.get("user"):  # else the module's default, nobody/nogroup
            pw = pwd.getpwnam(o["user"])
            args += [f"uid={pw.pw_uid}", f"gid={pw.pw_gid}"]
        for k, v in o.items():
            if k in ("root", "user", "threads", "status_path", "access_log", "nofile", "mode",
                     "start_timeout") or v is None:
                continue
            if k == "site":
                args.append(f"site={site_file(self, v)}")
                continue
            if k not in self.params_of:
                raise Unsupported(f"khttpd has no parameter for {k}")
            args.append(f"{self.params_of[k]}={int(v) if isinstance(v, bool) else v}")
        return args


class KernelHttpdTls(KernelHttpd):
    """khttpd over HTTPS in the VM: khttpd.ko on a plain port
    (self.plain_port) and the agent ktcp-tlsd on self.port, the port the
    tests talk to. The agent does each handshake (TLS 1.2: its ceiling on
    OpenSSL 3.0), turns kTLS on both ways and hands the socket to khttpd,
    which reads and writes the records in the kernel (docs/tls.md).
    Option tls_handshake_timeout_ms: the agent's --handshake-timeout-ms."""
    ktls = True
    tls = True
    # the handshake is the agent's, before khttpd sees the socket: a
    # refusal (max_conns) follows a completed handshake, and no byte may
    # come before the ClientHello (no PROXY protocol header)
    tls_agent = True

    def __init__(self, mode, logdir=None):
        super().__init__(mode)
        self.name = f"khttpd-{mode}-tls"
        self.logdir = logdir
        self.plain_port = None
        self.certs = None
        self.agent = None
        self.agent_log = None

    def unavailable(self):
        if not os.access(TLSD_BIN, os.X_OK):
            return f"{os.path.relpath(TLSD_BIN, os.getcwd())} not built (run make)"
        return super().unavailable()

    def start(self, root=None, port=None, **options):
        if not os.access(TLSD_BIN, os.X_OK):
            raise EngineError(f"{TLSD_BIN} is not built (run make)")
        hs = options.pop("tls_handshake_timeout_ms", None)
        self.certs = tlscert.make_ca()
        tls_port = port or free_port()
        super().start(root, free_port(), **options)
        self.plain_port, self.port = self.port, tls_port
        logdir = self.logdir or tempfile.gettempdir()
        self.agent_log = os.path.join(logdir, f"{self.name}-tlsd-{tls_port}.log")
        argv = [TLSD_BIN, "--port", str(tls_port), "--bind", "127.0.0.1",
                "--cert", self.certs["cert"], "--key", self.certs["key"]]
        if hs:
            argv += ["--handshake-timeout-ms", str(hs)]
        with open(self.agent_log, "ab") as log:
            self.agent_log_start = log.tell()  # a reused port's log goes on
            self.agent = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL)
        # its start line, not a probe connection (a failed handshake); in
        # a fresh guest the agent's start loads the kernel's kTLS ciphers
        # (11.5 s measured on 6.12 under emulation)
        deadline = time.monotonic() + 60
        while "ktcp-tlsd: port" not in self._agent_text():
            if self.agent.poll() is not None or time.monotonic() > deadline:
                text = self._agent_text()
                self.stop(check=False)
                raise EngineError(f"{self.name}: ktcp-tlsd did not start: {text[-400:]}")
            time.sleep(0.02)
        tlscert.TLS_PORTS[tls_port] = self.certs["ca"]
        return self

    def _agent_text(self):
        with open(self.agent_log, "rb") as f:
            f.seek(self.agent_log_start)
            return f.read().decode(errors="replace")

    def stop(self, check=True):
        tlscert.TLS_PORTS.pop(self.port, None)
        agent, self.agent = self.agent, None
        if agent is not None:
            if agent.poll() is None:
                agent.terminate()
            try:
                rc = agent.wait(timeout=15)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
                rc = "killed: no exit within 15 s of SIGTERM"
            if check:
                assert rc == 0, f"ktcp-tlsd exited {rc}: {self._agent_text()[-2000:]}"
        return super().stop(check)


def nginx_path():
    return shutil.which("nginx", path=os.environ.get("PATH", "") + ":/usr/sbin")


class Nginx(ServesTls, Engine):
    """A private nginx configured as ktcp-httpd behaves: sendfile, keep-alive
    with no per-connection request limit, access log off, one worker per core
    each with its own SO_REUSEPORT listener (ktcp-httpd's epoll model), an open
    file cache standing for ktcp-httpd's metadata cache, directory listings,
    gzip at zlib level 6 for the same text types.

    Options: threads (1: no master, the one process serves, for the cost
    bench; else one worker per core), gzip_static (send page.html.gz when it
    exists: the cost bench's cached gzip), keepalive_s (keepalive_timeout,
    default 60).

    Nginx(tls="user") serves HTTPS instead (`listen ... ssl`, the test CA's
    certificate from tlscert.make_ca, TLS 1.2 and 1.3, nginx's defaults
    otherwise: session tickets on), its records written by OpenSSL;
    Nginx(tls="ktls") hands them to the kernel where it has the tls ULP
    (`ssl_conf_command Options KTLS;`, with sendfile on: nginx >= 1.21.4 on
    OpenSSL 3)."""
    family = name = "nginx"
    defaults = {"threads": None, "gzip_static": False, "keepalive_s": 60}

    def __init__(self, logdir=None, tls=None):
        assert tls in (None, "user", "ktls"), tls
        super().__init__({None: "nginx", "user": "nginx-tls", "ktls": "nginx-ktls"}[tls],
                         logdir)
        self.prefix = None
        self.tls = tls
        self.certs = None

    def start(self, root=None, port=None, **options):
        if self.tls:
            self.certs = tlscert.make_ca()
        return super().start(root, port, **options)

    def listen(self, port):
        """The server block's listener and, over TLS, its settings."""
        if not self.tls:
            return f"listen 127.0.0.1:{port} reuseport;"
        ktls = "\n        ssl_conf_command Options KTLS;" if self.tls == "ktls" else ""
        return f"""listen 127.0.0.1:{port} ssl reuseport;
        ssl_certificate {self.certs["cert"]};
        ssl_certificate_key {self.certs["key"]};
        ssl_protocols TLSv1.2 TLSv1.3;{ktls}"""

    def unavailable(self):
        if not nginx_path():
            return "nginx not installed (scripts/deps installs it)"
        return None

    def config(self, port, docroot, prefix, single=False, gzip_static=False, keepalive_s=60):
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
    keepalive_timeout {keepalive_s}s;
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
        {self.listen(port)}
        root {docroot};
    }}
}}
"""

    def argv(self, port, o):
        self.prefix = tempfile.mkdtemp(prefix="nginx-", dir=o.get("logdir") or self.logdir)
        conf = os.path.join(self.prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write(self.config(port, o["root"], self.prefix, single=o.get("threads") == 1,
                                gzip_static=o.get("gzip_static"),
                                keepalive_s=o.get("keepalive_s") or 60))
        return [nginx_path(), "-c", conf, "-p", self.prefix, "-e", self.prefix + "/error.log",
                "-g", "daemon off;"]

    def terminate(self):
        self.proc.send_signal(signal.SIGQUIT)  # graceful: workers exit too

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


class Floor(Engine):
    """build/floor (tools/floor.c): the least an HTTP server can do for the
    bench's small-file and 1 MiB workloads (find the end of the head,
    answer fixed bytes or sendfile, one epoll loop and SO_REUSEPORT
    listener per thread), the reference every engine's CPU per request
    and throughput are divided by. It serves only FLOOR_WORKLOADS.

    Options: threads (default one per core), bind."""
    family = name = "floor"
    workloads = FLOOR_WORKLOADS
    defaults = {"threads": None, "bind": "127.0.0.1"}

    def __init__(self, logdir=None):
        super().__init__("floor", logdir)

    def unavailable(self):
        if not os.access(FLOOR_BIN, os.X_OK):
            return f"{os.path.relpath(FLOOR_BIN, os.getcwd())} not built (run make)"
        return None

    def argv(self, port, o):
        cmd = [FLOOR_BIN, "--root", o["root"], "--port", str(port), "--bind", o["bind"]]
        if o.get("threads"):
            cmd += ["--threads", str(o["threads"])]
        return cmd


class FloorHttp(Floor):
    """The floor with what ktcp-httpd does beyond it on the wire: the write
    side shut before the close after an HTTP/1.0 answer (floor --shutdown)
    and heads as long as ktcp-httpd's for the bench's 13-byte file
    (--pad FLOOR_HTTP_PAD: its connection-per-request answer is 290 bytes,
    the floor's 71). What is left between it and ktcp-httpd is user-space
    work: parsing, checks, the file's lookup, the head's making."""
    name = "floor-http"

    def __init__(self, logdir=None):
        Engine.__init__(self, "floor-http", logdir)

    def argv(self, port, o):
        return super().argv(port, o) + ["--shutdown", "--pad", str(FLOOR_HTTP_PAD)]


FLOOR_HTTP_PAD = 219


def lwan_path():
    """LWAN=/path/to/lwan, else lwan on PATH, else None."""
    return os.environ.get("LWAN") or shutil.which("lwan")


class Lwan(Engine):
    """lwan (not in Debian; BENCHMARKS.md says how to build it), given as
    LWAN=/path/to/lwan or found on PATH. Its configuration is ours, in the
    log folder: the listener on 127.0.0.1 only, serve_files on the root with
    pre-compressed files (page.html.gz when present) and directory listings,
    file metadata cached 60 s (nginx's open_file_cache inactive=60s; lwan's
    default is 5 s), keep-alive 60 s, `threads` I/O threads."""
    family = name = "lwan"
    defaults = {"threads": None}

    def __init__(self, logdir=None):
        super().__init__("lwan", logdir)
        self.conf = None

    def unavailable(self):
        p = lwan_path()
        if not p:
            return "lwan not given (LWAN=/path/to/lwan) and not on PATH"
        if not os.access(p, os.X_OK):
            return f"LWAN={p} is not an executable file"
        return None

    def config(self, port, o):
        return f"""keep_alive_timeout = 60
quiet = true
threads = {o.get("threads") or os.cpu_count()}
listener 127.0.0.1:{port}
site {{
    serve_files / {{
        path = {o["root"]}
        serve precompressed files = true
        auto index = true
        cache for = 60s
    }}
}}
"""

    def argv(self, port, o):
        d = tempfile.mkdtemp(prefix="lwan-", dir=o.get("logdir") or self.logdir)
        self.conf = os.path.join(d, "lwan.conf")
        with open(self.conf, "w") as f:
            f.write(self.config(port, o))
        return [os.path.abspath(lwan_path()), "-c", self.conf]
