"""Memory check: N idle keep-alive connections held open against a server,
its resident memory read from /proc/<pid>/status (VmRSS, VmHWM) before and
while they are held; with kernel=True (the VM, where kernel modules serve)
also the kernel's slab memory (/proc/meminfo Slab, /proc/slabinfo), since a
kernel server's connections live there and in nobody's RSS.

Over TLS (tls: an ssl.SSLContext) each connection completes its handshake
first, without blocking (many in flight at once), then sends its GET
through TLS: what the server holds is then an idle TLS session too.

Each connection sends one keep-alive GET and reads the whole response (an
echo connection: one message and its echo), so what the server holds is a
served, idle connection (no request in progress). Every step is bounded by
the deadline; connections that did not complete are counted, never waited
for forever."""
import os
import selectors
import socket
import ssl
import time

REQUEST = b"GET /small.txt HTTP/1.1\r\nHost: bench\r\n\r\n"
ECHO_MESSAGE = b"idle echo connection\n"


def meminfo_slab_kib():
    """The Slab line of /proc/meminfo: every slab page, in KiB."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("Slab:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def slabinfo_kib():
    """Bytes of allocated slab objects (/proc/slabinfo, root only), in KiB;
    0 when it cannot be read."""
    total = 0
    try:
        with open("/proc/slabinfo") as f:
            for line in f.readlines()[2:]:
                fields = line.split()
                total += int(fields[1]) * int(fields[3])
    except (OSError, ValueError, IndexError):
        return 0
    return total // 1024


def proc_status_kib(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(rest.split()[0])
    except OSError:
        pass
    return out


def pss_kib(pid):
    """Proportional set size: shared pages split between the processes
    mapping them, so a multi-process server (nginx) is not counted twice."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory_kib(pids):
    rss = hwm = pss = 0
    for pid in pids:
        s = proc_status_kib(pid)
        rss += s.get("VmRSS", 0)
        hwm += s.get("VmHWM", 0)
        pss += pss_kib(pid)
    return rss, hwm, pss


def _response_complete(buf, echo=False):
    if echo:
        return len(buf) >= len(ECHO_MESSAGE)
    head_end = buf.find(b"\r\n\r\n")
    if head_end < 0:
        return False
    length = 0
    for line in buf[:head_end].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    return len(buf) >= head_end + 4 + length


def _tls_step(sel, s, state, tls):
    """The next step of a TLS connection whose socket is ready: wrap it
    once connected, drive its handshake, then send the request. Returns
    the socket (a new object once wrapped, registered in sel) and whether
    it is still going."""
    if not isinstance(s, ssl.SSLSocket):
        sel.unregister(s)
        s = tls.wrap_socket(s, server_hostname="localhost", do_handshake_on_connect=False)
        sel.register(s, selectors.EVENT_WRITE)
    try:
        s.do_handshake()
    except ssl.SSLWantReadError:
        sel.modify(s, selectors.EVENT_READ)
        return s, True
    except ssl.SSLWantWriteError:
        sel.modify(s, selectors.EVENT_WRITE)
        return s, True
    except (ssl.SSLError, OSError):
        return s, False
    s.send(REQUEST)
    state[1] = True
    sel.modify(s, selectors.EVENT_READ)
    return s, True


def open_idle(port, count, deadline, batch=500, echo=False, tls=None):
    """Open `count` keep-alive connections, one request (echo: one message)
    each, over TLS with the context tls when given; returns (sockets that
    completed their response, failures by kind). Over TLS at most 100 at
    a time: what is measured is idle sessions, not how many handshakes a
    server takes at once (ktcp-tlsd's --max-handshakes is 256)."""
    if tls is not None:
        batch = min(batch, 100)
    sel = selectors.DefaultSelector()
    done, failed = [], {"connect": 0, "handshake": 0, "closed": 0, "timeout": 0}
    opened = 0
    while opened < count and time.monotonic() < deadline:
        pending = {}
        for _ in range(min(batch, count - opened)):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            err = s.connect_ex(("127.0.0.1", port))
            if err not in (0, 115):  # EINPROGRESS
                failed["connect"] += 1
                s.close()
                continue
            pending[s] = [b"", False]
            sel.register(s, selectors.EVENT_WRITE)
        opened += batch
        while pending and time.monotonic() < deadline:
            for key, ev in sel.select(timeout=0.5):
                s = key.fileobj
                state = pending[s]
                if tls is not None and not state[1]:
                    if not isinstance(s, ssl.SSLSocket) and \
                            s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        failed["connect"] += 1
                        sel.unregister(s)
                        s.close()
                        del pending[s]
                        continue
                    t, going = _tls_step(sel, s, state, tls)
                    del pending[s]
                    if going:
                        pending[t] = state
                    else:
                        failed["handshake"] += 1
                        sel.unregister(t)
                        t.close()
                    continue
                if ev & selectors.EVENT_WRITE and not state[1]:
                    if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        failed["connect"] += 1
                        sel.unregister(s)
                        s.close()
                        del pending[s]
                        continue
                    s.send(ECHO_MESSAGE if echo else REQUEST)
                    state[1] = True
                    sel.modify(s, selectors.EVENT_READ)
                    continue
                try:
                    data = s.recv(4096)
                except ssl.SSLWantReadError:
                    continue  # a record not whole yet, or no data in it
                except OSError:
                    data = b""
                if not data:
                    failed["closed"] += 1
                    sel.unregister(s)
                    s.close()
                    del pending[s]
                    continue
                state[0] += data
                if _response_complete(state[0], echo):
                    sel.unregister(s)
                    done.append(s)
                    del pending[s]
        for s in pending:
            failed["timeout"] += 1
            sel.unregister(s)
            s.close()
    sel.close()
    return done, failed


def still_open(socks):
    """Connections the server has not closed (no EOF waiting to be read)."""
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    readable = len(sel.select(timeout=0))
    sel.close()
    return len(socks) - readable


def measure(engine, count, budget_s, settle_s=1.0, kernel=False, echo=False, tls=None):
    """Returns the record for one engine (already started). kernel: the
    slab growth too, and the kernel's and the processes' growth per
    connection together. tls: an ssl.SSLContext, the connections' TLS."""
    deadline = time.monotonic() + budget_s
    pids = engine.pids()
    time.sleep(settle_s if kernel else 0)
    base_rss, _, base_pss = memory_kib(pids)
    base_slab, base_objs = meminfo_slab_kib(), slabinfo_kib()
    t0 = time.monotonic()
    socks, failed = open_idle(engine.port, count, deadline, echo=echo, tls=tls)
    open_s = time.monotonic() - t0
    time.sleep(settle_s)
    pids = engine.pids()
    rss, hwm, pss = memory_kib(pids)
    slab, objs = meminfo_slab_kib(), slabinfo_kib()
    alive = still_open(socks)
    for s in socks:
        s.close()
    held = max(1, len(socks))
    per_conn = (rss - base_rss) / held
    rec = {
        "connections_asked": count,
        "connections_idle": alive,
        "failed": failed,
        "open_seconds": round(open_s, 3),
        "processes": len(pids),
        "rss_before_kib": base_rss,
        "rss_kib": rss,
        "hwm_kib": hwm,
        "pss_before_kib": base_pss,
        "pss_kib": pss,
        "rss_per_conn_kib": round(per_conn, 3),
    }
    if kernel:
        # Per connection still held: one the server closed freed its part.
        held = max(1, alive)
        rec.update({
            "slab_before_kib": base_slab,
            "slab_kib": slab,
            "slab_per_conn_kib": round((slab - base_slab) / held, 3),
            "slabinfo_before_kib": base_objs,
            "slabinfo_kib": objs,
            "slabinfo_per_conn_kib": round((objs - base_objs) / held, 3),
            # What a connection costs the machine: the server's kernel
            # objects and the client's (the same for every engine), and the
            # server processes' resident growth.
            "total_per_conn_kib": round((slab - base_slab + rss - base_rss) / held, 3),
        })
    return rec
