"""The HTTP conformance suite's plumbing: an engine is a fixture.

http_engine is parametrised over every HTTP engine (engines.SUITE["http"], tools/engines):
the three models of ktcp-httpd on the host (KTCP_ENGINES=user), each also
over HTTPS (user-*-tls: ktcp-httpd --tls-port, the test clients wrapping
their sockets in Python's ssl, tools/engines/tlscert.py, OpenSSL writing
the records), and khttpd.ko inside the VM (KTCP_ENGINES=kernel). With
KTCP_VM_HTTPS=1 (make check-vm, VM_HTTPS=1 by default), inside the VM the suite
also runs over HTTPS with the kernel writing and reading the records
(kTLS): khttpd behind the agent ktcp-tlsd (khttpd-*-tls) and ktcp-httpd
with kTLS TX and RX (user-*-ktls), one khttpd mode and one ktcp-httpd
model per kernel (engines.VM_KERNEL: unbound and epoll on 6.12, kthread
and mn on 6.1), on the files of KTLS_FILES only (for time;
KTCP_VM_HTTPS=all: every file; docs/tls.md). One instance per engine serves the
shared docroot for the whole session; a test that needs other options
(a short idle timeout, max_conns...) asks http_engine.spawn(...) for its own.
"""
import contextlib
import os

import pytest

from docroot import build_docroot
from testlib import require_kind
from engines import SUITE, VM_KERNEL, runs_here

ENGINES = {name: f for name, f in SUITE["http"].items() if runs_here(name)}

# The files the kTLS engines (engines.VM_KERNEL) run with KTCP_VM_HTTPS=1: what
# the transport changes (records the kernel reads and writes, keep-alive,
# pipelining, timeouts, refusals, a stalled reader, sendfile bodies,
# ranges), for the suite's time; the other files exercise the HTTP core
# the plain khttpd run covers. KTCP_VM_HTTPS=all runs every file.
KTLS_FILES = {"test_http_ktls.py", "test_http_conn.py", "test_http_files.py",
              "test_http_ranges.py"}


def pytest_collection_modifyitems(config, items):
    if os.environ.get("KTCP_VM_HTTPS") == "all":
        return
    keep, drop = [], []
    for item in items:
        engine = getattr(getattr(item, "callspec", None), "params", {}).get("http_engine")
        if engine in VM_KERNEL and item.path.name not in KTLS_FILES:
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class Served:
    """An engine serving a root; what tests see as http_engine."""

    def __init__(self, name, engine, root, factory, tmpdir):
        self.name = name
        self.engine = engine
        self.root = root
        self.kind = engine.kind
        # HTTPS (a TLS engine): the clients wrap their sockets in ssl
        self.tls = getattr(engine, "tls", False)
        self._factory = factory
        self._tmpdir = tmpdir

    @property
    def port(self):
        return self.engine.port

    @contextlib.contextmanager
    def spawn(self, **options):
        """A second instance with other options, stopped on exit. Engines
        that exist once per machine (a module) swap the shared one out."""
        single = self.engine.kind == "kernel"
        if single:
            self.engine.stop()
        other = self._factory(self._tmpdir)
        try:
            other.start(self.root, **options)
            yield other
        finally:
            other.stop()
            if single:
                self.engine.start(self.root)


@pytest.fixture(params=[None, "kthread"], ids=["default", "kthread"])
def khttpd_modes(request, http_engine):
    """http_engine.spawn()'s arguments for each mode a test also runs in:
    the engine's own, and khttpd's kthread mode (the suite's khttpd runs
    on the workqueue), the latter on the plain khttpd engine only."""
    if request.param and (http_engine.kind != "kernel" or http_engine.tls):
        pytest.skip("khttpd's kthread mode: on the plain khttpd engine")
    return {"mode": request.param} if request.param else {}


@pytest.fixture(scope="session")
def docroot(tmp_path_factory):
    return build_docroot(str(tmp_path_factory.mktemp("http")))


@pytest.fixture(scope="session", params=sorted(ENGINES))
def http_engine(request, docroot, tmp_path_factory):
    name = request.param
    factory = ENGINES[name]
    tmpdir = str(tmp_path_factory.mktemp(name))
    engine = factory(tmpdir)
    # a user-space server over kTLS runs with the kernel engines (the VM)
    require_kind(getattr(engine, "select", engine.kind))
    engine.start(docroot.root)
    try:
        yield Served(name, engine, docroot.root, factory, tmpdir)
    finally:
        engine.stop()
