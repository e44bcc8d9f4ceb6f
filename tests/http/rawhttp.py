"""A strict little HTTP/1.1 client over a raw socket, for the tests that
must control or see every byte: pipelining, malformed requests, framing.
Every read is bounded by a deadline."""
import socket
import ssl
import time

from engines import tlscert


class Response:
    def __init__(self, version, status, reason, headers, body, head):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # [(name, value)] in order, as sent
        self.body = body
        self.head = head  # the raw head bytes, CRLFs included

    def header(self, name):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def header_names(self):
        return [k.lower() for k, _ in self.headers]

    def __repr__(self):
        return f"<Response {self.status} {self.headers} body={len(self.body)}B>"


# SO_RCVBUF (the kernel doubles it, and offers about half as the window)
# that lets one full TLS record (16 KiB of data, 5 bytes of header, a
# 16-byte tag) into the socket at once.
TLS_RECORD_RCVBUF = 32768


class Closed(Exception):
    pass


class Conn:
    def __init__(self, port, timeout=10.0, rcvbuf=None, pace=None):
        """pace=(bytes_per_s, free): after the first free bytes, reads at
        no more than bytes_per_s on average (a slow but steady reader)."""
        self.pace = pace
        self.got = 0
        self.t0 = None
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf and not pace:
            if port in tlscert.TLS_PORTS:
                # a TLS reader's buffer holds one record, as below
                rcvbuf = max(rcvbuf, TLS_RECORD_RCVBUF)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        # a TLS engine's port: the same client over TLS (the handshake here)
        self.sock = tlscert.wrap(self.sock, port)
        self.tls = self.sock is not None and hasattr(self.sock, "cipher")
        if rcvbuf and pace:
            # A slow client that shrinks its buffer once connected: the
            # window it offers then opens in small steps, and the server
            # can wait longer than an idle timeout for room while the
            # client still reads.
            if self.tls:
                # A TLS reader gets nothing of a record until the whole of
                # it is in: a buffer whose window cannot take one 16 KiB
                # record (and its header and tag) makes every record wait
                # for TCP's window probes (8 MiB at 1 MB/s: 38 s instead
                # of 6 on the host). So it holds one record at least, and
                # the pace, not the record size, sets how long the server
                # waits for room, as for a plain reader.
                rcvbuf = max(rcvbuf, TLS_RECORD_RCVBUF)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.timeout = timeout
        # What came and was not taken yet. A bytearray grows in place: a
        # bytes object rebuilt for every read copies the whole body so far
        # (quadratic), and in a fresh process each copy is new memory from
        # mmap, faulted in page by page: 8 MiB read that way cost a kTLS
        # test's client over 10 s of system time in the guests, enough to
        # make the server look slow.
        self.buf = bytearray()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no response in time")
        self.sock.settimeout(left)
        try:
            # A paced reader takes 16 KiB at a time, as a slow client's
            # small reads do.
            chunk = self.sock.recv(16384 if self.pace else 65536)
        except socket.timeout:
            raise TimeoutError("no response in time")
        except (ConnectionResetError, ssl.SSLEOFError):
            chunk = b""
        if not chunk:
            raise Closed("connection closed by the server")
        self.buf += chunk
        if self.pace:
            rate, free = self.pace
            if self.t0 is None:
                self.t0 = time.monotonic()
            self.got += len(chunk)
            ahead = (self.got - free) / rate - (time.monotonic() - self.t0)
            if ahead > 0:
                time.sleep(min(ahead, max(0.0, deadline - time.monotonic())))

    def _take_until(self, sep, deadline, limit=1 << 20):
        while sep not in self.buf:
            if len(self.buf) > limit:
                raise AssertionError("unterminated line")
            self._fill(deadline)
        i = self.buf.index(sep) + len(sep)
        out = bytes(self.buf[:i])
        del self.buf[:i]
        return out

    def _take(self, n, deadline):
        while len(self.buf) < n:
            self._fill(deadline)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_response(self, method="GET", timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        head = self._take_until(b"\r\n\r\n", deadline)
        lines = head[:-4].split(b"\r\n")
        version, status, reason = lines[0].decode("latin-1").split(" ", 2)
        headers = []
        for line in lines[1:]:
            k, v = line.decode("latin-1").split(":", 1)
            assert k == k.strip(), f"space in header name: {line!r}"
            headers.append((k, v.strip()))
        r = Response(version, int(status), reason, headers, b"", head)
        if method == "HEAD" or r.status in (204, 304) or 100 <= r.status < 200:
            return r
        te = r.header("Transfer-Encoding")
        cl = r.header("Content-Length")
        if te is not None:
            assert te.lower() == "chunked", te
            assert cl is None, "Content-Length together with chunked"
            body = []
            while True:
                size_line = self._take_until(b"\r\n", deadline)
                size = int(size_line[:-2], 16)
                if size == 0:
                    assert self._take(2, deadline) == b"\r\n", "trailers unexpected"
                    break
                body.append(self._take(size, deadline))
                assert self._take(2, deadline) == b"\r\n", "chunk not ended by CRLF"
            r.body = b"".join(body)
            r.chunked = True
        elif cl is not None:
            r.body = self._take(int(cl), deadline)
        else:
            while True:  # until close
                try:
                    self._fill(deadline)
                except Closed:
                    break
            r.body, self.buf = bytes(self.buf), bytearray()
        return r

    def closed_within(self, seconds):
        """True if the server closes (EOF or reset) within seconds, with no
        bytes beyond what was already read."""
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                self._fill(deadline)
        except Closed:
            return True
        except TimeoutError:
            return False
        return False


def request(port, data, method="GET", timeout=10.0):
    """Send data on a fresh connection and read one response."""
    with Conn(port, timeout=timeout) as c:
        c.send(data)
        return c.read_response(method)


def get(port, target, headers=(), method="GET", version="1.1"):
    lines = [f"{method} {target} HTTP/{version}", "Host: localhost"]
    lines += [f"{k}: {v}" for k, v in headers]
    return request(port, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"),
                   method=method)
