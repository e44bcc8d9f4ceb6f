"""openssl s_client driven as a person types into it: its connected
commands (a line of one letter) are what Python's ssl cannot do, such as a
TLS 1.3 KeyUpdate from the client ("k": update the client's sending keys;
"K": that, and ask the server to update its own) or a TLS 1.2
renegotiation ("R"). Every wait is bounded.

    with SClient(port, ca, "-tls1_3") as c:
        c.send("GET / HTTP/1.1\\nHost: x\\n\\n")   # -crlf: LF goes as CRLF
        c.wait_for("HTTP/1.1 200", count=1)
        c.command("K")
"""
import subprocess
import threading
import time


class SClient:
    def __init__(self, port, ca, *args, host="127.0.0.1", servername="localhost"):
        # interactive (no -quiet, no -ign_eof), so that a line "k" or "K"
        # is a command; -crlf sends each typed LF as CRLF
        self.p = subprocess.Popen(["openssl", "s_client", "-connect", f"{host}:{port}",
                                   "-servername", servername, "-CAfile", ca,
                                   "-verify_return_error", "-crlf", *args],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT)
        self._out = b""
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        while True:
            b = self.p.stdout.read1(65536)
            if not b:
                return
            with self._lock:
                self._out += b

    @property
    def output(self):
        with self._lock:
            return self._out.decode(errors="replace")

    def send(self, text):
        """Type text into s_client; False when it had already ended (the
        server closed first), which a caller may expect."""
        try:
            self.p.stdin.write(text.encode())
            self.p.stdin.flush()
        except BrokenPipeError:
            self.p.wait(timeout=10)
            return False
        return True

    def command(self, letter, timeout=20):
        """A connected command: "k", "K" (TLS 1.3 KeyUpdate), "R" (TLS 1.2
        renegotiation). s_client
        takes a whole read of its input as the command and drops the rest,
        so this waits until it says it did it (KEYUPDATE) before anything
        more is sent."""
        marks = {"k": "KEYUPDATE", "K": "KEYUPDATE", "R": "RENEGOTIATING"}
        mark = marks[letter]
        seen = self.output.count(mark)
        self.send(letter + "\n")
        assert self.wait_for(mark, seen + 1, timeout), self.output[-2000:]

    def wait_for(self, text, count=1, timeout=20):
        """Wait until text appears count times in the output; False when
        s_client exits or the time runs out first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.output.count(text) >= count:
                return True
            if self.p.poll() is not None:
                self._reader.join(timeout=5)
                return self.output.count(text) >= count
            time.sleep(0.02)
        return False

    def exited_within(self, timeout):
        """True when s_client ends (the server closed) within timeout."""
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        self._reader.join(timeout=5)
        return True

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.close()
            except OSError:
                pass
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self._reader.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
