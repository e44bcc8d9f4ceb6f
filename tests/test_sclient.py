"""The openssl s_client driver (sclient.py) against a Python TLS server
on 127.0.0.1 that answers one request and closes: typing into an s_client
the server already ended is an outcome a test may expect, not an error."""
import socket
import ssl
import threading

from engines import tlscert
from sclient import SClient


def one_answer_server():
    """(port, thread): a TLS server that reads one request head, answers
    it and closes the connection."""
    made = tlscert.make_ca()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(made["cert"], made["key"])
    ls = socket.create_server(("127.0.0.1", 0))
    ls.settimeout(20)

    def serve():
        with ls:
            conn, _ = ls.accept()
            with ctx.wrap_socket(conn, server_side=True) as s:
                s.settimeout(20)
                head = b""
                while b"\r\n\r\n" not in head:
                    b = s.recv(4096)
                    if not b:
                        return
                    head += b
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return ls.getsockname()[1], made["ca"], t


def test_typing_after_the_server_closed_returns_false():
    port, ca, t = one_answer_server()
    with SClient(port, ca, "-tls1_3") as c:
        assert c.send("GET / HTTP/1.1\nHost: x\n\n")
        assert c.wait_for("\r\n\r\nhello\n", 1, timeout=20), c.output[-2000:]
        assert c.exited_within(20), c.output[-2000:]
        assert c.send("GET / HTTP/1.1\nHost: x\n\n") is False
    t.join(timeout=20)
    assert not t.is_alive()
