"""pytest's entry for tests/: puts tests/ on sys.path (rootdir conftest), so
every suite, tests/http included, imports the shared helpers as `testlib`,
and testlib puts tools/ there for the engines package (tools/engines).
The helpers live there, not here: a second conftest.py (tests/http/) would
shadow this module under the name "conftest".

An engine that cannot run here or cannot honour an option a test asks for
raises engines.Unsupported: the test is skipped with that reason.

Inside the VM every test runs under a watchdog (tests/hang_watchdog.py)
that dumps the kernel's state and fails the run when a test hangs."""
import os
import subprocess

import pytest

import hang_watchdog
import testlib  # (tools/ on sys.path)
from engines import Unsupported


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "release_kernel: a kernel test for the release kernels only (slab "
        "figures, packaging, struct layouts from BTF): make check CHECK_DEBUG=1 runs these on release 6.12 "
        "when the rest of 6.12's kernel suites run on the debug kernel (make check-debug deselects them)")
    hang_watchdog.configure(config)
    if testlib.in_vm():
        _no_cmdline_recording()


def _no_cmdline_recording():
    """In the VM, switching a trace event on or off does not touch the
    scheduler: with record-cmd on (the default) the first event enabled
    hooks sched_switch and sched_wakeup to record task names, and the last
    one disabled unhooks them, patching __schedule() and try_to_wake_up()
    while every CPU runs them. Under QEMU's software emulation a vCPU
    running such an instruction as it is patched can keep a stale int3
    there and trap on it forever (seen: one CPU in __schedule() with its
    run queue locked, the other waiting for it in text_poke_bp()). The
    records then show <...> for the task's name."""
    tracing = "/sys/kernel/tracing"
    if not os.path.isdir(os.path.join(tracing, "events")):
        subprocess.run(["mount", "-t", "tracefs", "nodev", tracing], capture_output=True)
    try:
        with open(os.path.join(tracing, "options/record-cmd"), "w") as f:
            f.write("0")
    except OSError:
        pass


def _unsupported_is_a_skip():
    try:
        return (yield)
    except Unsupported as e:
        pytest.skip(str(e))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _unsupported_is_a_skip())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _unsupported_is_a_skip())


# The per-test watchdog (tests/hang_watchdog.py): on inside the VM, where a
# test stuck in the kernel would otherwise wait for scripts/vm's timeout.
# The tests that take long by design get a bound of their own: the DKMS
# package (over 5 minutes under emulation) and the soak (its traffic plus
# the reloads).
def _long_test_bounds():
    soak = min(int(os.environ.get("KTCP_SOAK_SECONDS", "120")), 600)
    return {"tests/test_dkms.py": 1200, "tests/soak/": 2 * soak + 900}


def pytest_collection_modifyitems(config, items):
    bounds = _long_test_bounds()
    for item in items:
        path = os.path.relpath(str(item.path), testlib.ROOT)
        for prefix, seconds in bounds.items():
            if path.startswith(prefix) and not item.get_closest_marker("watchdog"):
                item.add_marker(pytest.mark.watchdog(seconds=seconds))
