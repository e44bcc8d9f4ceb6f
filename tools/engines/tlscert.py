"""A test certificate authority and a server certificate for 127.0.0.1 and
localhost, made with the openssl command into a temporary folder when first
asked for (nothing secret is kept in the tree), and which ports speak TLS:
an engine started with tls registers its port here, and the test clients
(tests/http/rawhttp.py, tests/testlib.py) wrap their sockets to those ports
in Python's ssl, trusting the test CA."""
import os
import ssl
import subprocess
import tempfile
import threading

_lock = threading.Lock()
_made = {}
# port -> the CA file its server's certificate chains to
TLS_PORTS = {}
# port -> "1.2": the clients of that port speak TLS 1.2 at most (a server
# in the VM whose kTLS reads only TLS 1.2 records: see UserHttpdKtls)
TLS_MAX = {}


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(folder=None, name="server"):
    """{ca, cert, key, folder}: a test CA (ca.pem) and a P-256 server key
    and certificate (NAME.pem, NAME.key) it signed for localhost,
    127.0.0.1 and ::1. One set per folder (the default: one temporary
    folder per process)."""
    with _lock:
        key = (folder, name)
        if key in _made:
            return _made[key]
        d = folder or _made.get("tmp") or tempfile.mkdtemp(prefix="ktcp-tls-")
        _made["tmp"] = _made.get("tmp") or (d if folder is None else None)
        os.makedirs(d, exist_ok=True)
        if not os.path.exists(os.path.join(d, "ca.pem")):
            _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                     "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
                     "-subj", "/CN=ktcp test CA", "-addext", "basicConstraints=critical,CA:TRUE",
                     "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
        ext = os.path.join(d, f"{name}.ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n"
                    "extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n")
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", "/CN=localhost", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", f"{name}.pem", cwd=d)
        out = {"ca": os.path.join(d, "ca.pem"), "cert": os.path.join(d, f"{name}.pem"),
               "key": os.path.join(d, f"{name}.key"), "folder": d}
        _made[key] = out
        return out


def client_context(ca, tls12=False):
    """A client context trusting only the test CA (TLS 1.2 at least; with
    tls12, exactly)."""
    ctx = ssl.create_default_context(cafile=ca)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls12:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def context_for(port):
    """The client context for a TLS port, or None for a plain one."""
    ca = TLS_PORTS.get(port)
    return client_context(ca, TLS_MAX.get(port) == "1.2") if ca else None


def wrap(sock, port):
    """sock (connected to 127.0.0.1:port) wrapped in TLS when port is a
    TLS engine's; the handshake is done before this returns."""
    ctx = context_for(port)
    if ctx is None:
        return sock
    return ctx.wrap_socket(sock, server_hostname="localhost")


def url(port, path):
    """The URL of path on the engine at port: https://localhost for a TLS
    engine's port, http://127.0.0.1 otherwise."""
    if port in TLS_PORTS:
        return f"https://localhost:{port}{path}"
    return f"http://127.0.0.1:{port}{path}"


def curl_args(port):
    """What curl needs to trust the engine at port (--cacert for TLS)."""
    if port not in TLS_PORTS:
        return []
    return ["--cacert", TLS_PORTS[port]] + (["--tls-max", "1.2"] if port in TLS_MAX else [])
