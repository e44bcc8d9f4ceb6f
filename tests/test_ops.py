"""ktcp-echo under the signals an operator sends: SIGHUP (a closed terminal,
a service manager's reload) neither ends it nor drops a connection. The
HTTP server's signals are in tests/http/test_http_ops.py."""
import signal

import pytest

from testlib import connect, recv_exact, require_kind
from engines import UserEcho


@pytest.fixture
def echo(tmp_path):
    require_kind("user")
    e = UserEcho(str(tmp_path)).start()
    yield e
    e.stop()  # asserts exit status 0 after SIGTERM


def roundtrip(s, data):
    s.sendall(data)
    assert recv_exact(s, len(data)) == data


def test_echo_survives_sighup_keeping_connections(echo):
    s = connect(echo.port)
    try:
        roundtrip(s, b"before\n")
        for _ in range(3):
            echo.proc.send_signal(signal.SIGHUP)
        # SIGUSR1 is answered by the same sigwait loop, after any pending
        # SIGHUP (lower signals first): fresh counters prove it was taken
        assert echo.counters()["active"] == 1
        assert echo.proc.poll() is None, "ktcp-echo died of SIGHUP"
        roundtrip(s, b"after\n")
        with connect(echo.port) as s2:
            roundtrip(s2, b"new connection\n")
    finally:
        s.close()
