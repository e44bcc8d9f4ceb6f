"""Many clients at once, a tiny cache, and stop signals: the paths where
workers share state (the run queue in mn, the cache, timers)."""
import gzip
import random
import signal
import threading
import time

import pytest

from rawhttp import Conn


def mixed_client(port, docroot, seed, rounds, errors):
    rng = random.Random(seed)
    names = [f"p{i}.txt" for i in range(10)] + ["a.txt", "bytes.bin", "text.txt", "mib.bin"]
    try:
        with Conn(port, timeout=20) as c:
            for _ in range(rounds):
                name = rng.choice(names)
                kind = rng.randrange(4)
                hdrs = "Host: x\r\n"
                if kind == 1:
                    hdrs += "Accept-Encoding: gzip\r\n"
                elif kind == 2:
                    hdrs += "Range: bytes=1-3\r\n"
                c.send(f"GET /{name} HTTP/1.1\r\n{hdrs}\r\n".encode())
                r = c.read_response()
                data = docroot.read(name)
                body = r.body
                if r.header("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if kind == 2:
                    assert r.status == 206 and body == data[1:4], name
                else:
                    assert r.status == 200 and body == data, name
    except Exception as e:  # reported by the test thread
        errors.append(f"client {seed}: {e!r}")


def run_clients(port, docroot, n, rounds):
    errors = []
    threads = [threading.Thread(target=mixed_client, args=(port, docroot, i, rounds, errors))
               for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "clients hung"
    assert not errors, errors[:5]


def test_concurrent_clients(http_engine, docroot):
    run_clients(http_engine.port, docroot, n=24, rounds=25)


def test_tiny_cache_evicts_and_stays_correct(http_engine, docroot):
    with http_engine.spawn(cache_size=20000) as srv:
        run_clients(srv.port, docroot, n=8, rounds=40)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stop_signal_exits_cleanly(http_engine, sig):
    if http_engine.kind != "user":
        pytest.skip("signals apply to a process; khttpd is stopped by rmmod")
    with http_engine.spawn() as srv:
        with Conn(srv.port) as c:
            c.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            assert c.read_response().status == 200
            t0 = time.monotonic()
            srv.signal(sig)
            assert c.closed_within(5)
        assert srv.wait_exit(timeout=10) == 0
        assert time.monotonic() - t0 < 5
