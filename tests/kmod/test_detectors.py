"""The debug kernel's detectors fire: `scripts/vm --kernel debug` fails when
ktcp_fault.ko commits a fault in the guest and passes when it commits none.

Each case boots the debug kernel once (a few minutes under emulation) and
checks scripts/vm's own verdict: its dmesg check (lockdep, KASAN) and its
kmemleak check (modules unloaded, two scans). Run by make check-debug, which
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


def boot(fault):
    """Boot the debug kernel, load ktcp_fault.ko with fault=FAULT and unload
    it; return scripts/vm's exit status, its whole output and the guest's
    kernel log."""
    ko = os.path.join(ROOT, "build", "kmod", debug_release(), "ktcp_fault.ko")
    assert os.path.exists(ko), f"{ko} missing: make kmod KERNEL=debug"
    cmd = f"insmod {ko} fault={fault} && rmmod ktcp_fault"
    r = subprocess.run([os.path.join(ROOT, "scripts/vm"), "--kernel", "debug",
                        "--timeout", "1500", "--", "sh", "-c", cmd],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout)
    m = re.search(r"logs in (\S+)", r.stdout)
    assert m, r.stdout
    with open(os.path.join(ROOT, m.group(1), "dmesg.log"), errors="replace") as f:
        dmesg = f.read()
    return r.returncode, r.stdout, dmesg


DMESG_CLEAN = "guest dmesg clean"
DMESG_BAD = "the guest kernel reported problems"
LEAK_CLEAN = "kmemleak clean"
LEAK_BAD = "kmemleak found leaks"


def test_no_fault_passes_both_checks():
    rc, out, dmesg = boot("none")
    assert rc == 0, out
    assert DMESG_CLEAN in out and LEAK_CLEAN in out, out


def test_lock_inversion_fails_the_dmesg_check():
    rc, out, dmesg = boot("lock_inversion")
    assert rc == 3, out
    assert DMESG_BAD in out, out
    assert "possible circular locking dependency detected" in out, out
    # The report is about the module's two locks.
    assert "ktcp_fault_a" in dmesg and "ktcp_fault_b" in dmesg, dmesg
    assert LEAK_CLEAN in out, out


def test_leak_fails_the_kmemleak_check():
    rc, out, dmesg = boot("leak")
    assert rc != 0, out
    assert LEAK_BAD in out, out
    # The leaked object itself: its size and the tag it starts with (the
    # report's hex dump shows the bytes as text).
    assert "unreferenced object" in out and "(size 1234)" in out, out
    assert "ktcp_fault leak" in out, out


def test_use_after_free_fails_the_dmesg_check():
    rc, out, dmesg = boot("use_after_free")
    assert rc == 3, out
    assert "BUG: KASAN: slab-use-after-free in fault_use_after_free" in out, out
    assert "Freed by task" in dmesg, dmesg
    assert LEAK_CLEAN in out, out
