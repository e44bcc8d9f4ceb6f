"""The per-test watchdog (tests/hang_watchdog.py), run on a throw-away suite
in a child pytest with a bound of 2 s: a stuck test is cut off, the dump
names it and holds its child's state, the sysrq letters are written (w, l three times, t) (to a
file here: the host's kernel is left alone), and the run fails and stops;
a test that cannot be interrupted ends pytest with the watchdog's status.
Inside the VM the same plugin writes to /proc/sysrq-trigger."""
import os
import subprocess
import sys
import time

import hang_watchdog
from testlib import ROOT

SUITE = '''
import signal
import subprocess
import time

import pytest


def test_passes_quickly():
    pass


def test_stuck_in_a_child():
    child = subprocess.Popen(["sleep", "600"])
    try:
        child.wait()
    finally:
        child.kill()
        child.wait()


def test_never_reached():
    pass


@pytest.mark.watchdog(seconds=60)
def test_with_its_own_bound():
    time.sleep(3)


def test_deaf_to_signals():
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
    subprocess.run(["sleep", "600"])
'''


def run_suite(tmp_path, *select):
    (tmp_path / "conftest.py").write_text(
        "import hang_watchdog\n\n\ndef pytest_configure(config):\n"
        "    hang_watchdog.configure(config)\n")
    (tmp_path / "test_suite.py").write_text(SUITE)
    dumps = tmp_path / "dumps"
    env = dict(os.environ, KTCP_TEST_WATCHDOG="2", KTCP_WATCHDOG_GRACE="3",
               KTCP_WATCHDOG_DIR=str(dumps), KTCP_WATCHDOG_SYSRQ=str(tmp_path / "sysrq"),
               PYTHONPATH=os.path.join(ROOT, "tests"))
    env.pop("KTCP_IN_VM", None)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "no:randomly", str(tmp_path / "test_suite.py"), *select],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    return r, time.monotonic() - t0, dumps


def test_stuck_test_is_cut_off_dumped_and_fails_the_run(tmp_path):
    r, took, dumps = run_suite(tmp_path, "-k", "not deaf and not own_bound")
    out = r.stdout + r.stderr
    assert r.returncode not in (0, hang_watchdog.EXIT_STATUS), out
    assert took < 60, f"took {took:.0f} s"
    assert "1 passed" in out and "1 failed" in out, out
    assert "watchdog: test_suite.py::test_stuck_in_a_child ran past its bound of 2 s" in out, out
    files = sorted(dumps.iterdir())
    assert len(files) == 1, files
    dump = files[0].read_text()
    assert "test_suite.py::test_stuck_in_a_child still running after" in dump
    # where pytest's main thread waits, and the child it waits for
    assert "test_suite.py:16 in test_stuck_in_a_child" in dump, dump
    assert "[sleep] state S" in dump and "cmdline: sleep 600" in dump, dump
    assert "== busiest tasks over one second" in dump
    assert (tmp_path / "sysrq").read_text() == "wlllt"
    assert "sysrq w l l l t written" in dump


def test_run_stops_after_the_stuck_test(tmp_path):
    r, _, _ = run_suite(tmp_path, "-k", "stuck or never")
    out = r.stdout + r.stderr
    assert "FAILED test_suite.py::test_stuck_in_a_child - Failed: watchdog" in out, out
    assert "Interrupted: watchdog: test_suite.py::test_stuck_in_a_child" in out, out
    assert "1 failed, 3 deselected in" in out, out  # test_never_reached was not run
    assert "test_never_reached" not in out, out


def test_marker_gives_a_longer_bound(tmp_path):
    r, _, dumps = run_suite(tmp_path, "-k", "own_bound or passes_quickly")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 passed" in r.stdout
    assert not dumps.exists() or not list(dumps.iterdir())


def test_uninterruptible_test_ends_pytest(tmp_path):
    r, took, dumps = run_suite(tmp_path, "-k", "deaf")
    out = r.stdout + r.stderr
    assert r.returncode == hang_watchdog.EXIT_STATUS, out
    assert took < 60, f"took {took:.0f} s"
    assert "did not unwind within 3 s" in out, out
    dump = next(dumps.iterdir()).read_text()
    assert "did not unwind within 3 s" in dump and dump.count("cmdline: sleep 600") == 2, dump


def test_off_outside_the_vm_by_default(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KTCP_TEST_WATCHDOG", "KTCP_IN_VM"))}
    env["PYTHONPATH"] = os.path.join(ROOT, "tests")
    code = ("import hang_watchdog, pytest\n"
            "class P:\n"
            "    def pytest_configure(self, config):\n"
            "        hang_watchdog.configure(config)\n"
            "        print('registered', config.pluginmanager.has_plugin('ktcp-hang-watchdog'))\n"
            "pytest.main(['-q', '-p', 'no:cacheprovider', 'test_one.py'], plugins=[P()])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path, env=env)
    assert "registered False" in r.stdout, r.stdout + r.stderr
