"""The debug kernel's detectors fire: `scripts/vm --kernel debug` fails when
ktcp_fault.ko commits a fault in the guest and passes when it commits none.

One boot of the debug kernel (minutes under emulation) commits the three
faults one after the other, each in its own load of the module, and each
test checks its part of scripts/vm's verdict: the dmesg check (lockdep,
KASAN) and the kmemleak check (modules unloaded, two scans). That a run
with no fault passes both checks is what make check-debug's suite run,
right after, shows. Run by make check-debug, which
builds the module first (make kmod KERNEL=debug) and sets
KTCP_DEBUG_SELFTEST=1; skipped elsewhere.
"""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(
    os.environ.get("KTCP_DEBUG_SELFTEST") != "1",
    reason="boots the debug kernel: run by make check-debug",
)


def debug_release():
    r = subprocess.run([os.path.join(ROOT, "scripts/kernels"), "release", "debug"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


FAULTS = ("lock_inversion", "use_after_free", "leak")


@pytest.fixture(scope="module")
def faulted():
    """Boot the debug kernel, load ktcp_fault.ko with each fault in turn
    and unload it; scripts/vm's exit status, its whole output and the
    guest's kernel log."""
    ko = os.path.join(ROOT, "build", "kmod", debug_release(), "ktcp_fault.ko")
    assert os.path.exists(ko), f"{ko} missing: make kmod KERNEL=debug"
    cmd = " && ".join(f"insmod {ko} fault={f} && rmmod ktcp_fault" for f in FAULTS)
    r = subprocess.run([os.path.join(ROOT, "scripts/vm"), "--kernel", "debug",
                        "--timeout", "1500", "--", "sh", "-c", cmd],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout)
    m = re.search(r"logs in (\S+)", r.stdout)
    assert m, r.stdout
    with open(os.path.join(ROOT, m.group(1), "dmesg.log"), errors="replace") as f:
        dmesg = f.read()
    return r.returncode, r.stdout, dmesg


DMESG_BAD = "the guest kernel reported problems"
LEAK_BAD = "kmemleak found leaks"


def test_the_run_fails(faulted):
    rc, out, _ = faulted
    assert rc != 0, out
    assert DMESG_BAD in out and LEAK_BAD in out, out


def test_lock_inversion_is_reported(faulted):
    _, out, dmesg = faulted
    assert "possible circular locking dependency detected" in out, out
    # The report is about the module's two locks.
    assert "ktcp_fault_a" in dmesg and "ktcp_fault_b" in dmesg, dmesg


def test_use_after_free_is_reported(faulted):
    _, out, dmesg = faulted
    assert "BUG: KASAN: slab-use-after-free in fault_use_after_free" in out, out
    assert "Freed by task" in dmesg, dmesg


def test_leak_is_reported(faulted):
    _, out, _ = faulted
    # The leaked object itself: its size and the tag it starts with (the
    # report's hex dump shows the bytes as text).
    assert "unreferenced object" in out and "(size 1234)" in out, out
    assert "ktcp_fault leak" in out, out
