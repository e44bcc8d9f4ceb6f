"""A release kernel's own memory detectors fire: scripts/vm boots 6.1 and
6.12 with slub_debug=FZPU and page_poison=1 (and KFENCE sampling on 6.12),
and fails the run when ktcp_fault.ko commits a slab fault in the guest.

One boot of the release kernel (KTCP_RELEASE_SELFTEST names it: 6.1 or
6.12) writes into a freed 64-byte object, has the cache checked
(/sys/kernel/slab/kmalloc-64/validate) and frees another object twice, each
in its own load of the module; the tests check scripts/vm's verdict and the
reports. That a run with no fault passes the same check is what every
make check-vm boot shows. Run by make check-detectors (make check runs it
on 6.1), which builds the module first (make kmod); skipped elsewhere.
"""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERIES = os.environ.get("KTCP_RELEASE_SELFTEST", "")

pytestmark = pytest.mark.skipif(
    SERIES not in ("6.1", "6.12"),
    reason="boots a release kernel with its detectors: run by make check-detectors",
)


@pytest.fixture(scope="module")
def faulted():
    r = subprocess.run([os.path.join(ROOT, "scripts/kernels"), "release", SERIES],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ko = os.path.join(ROOT, "build", "kmod", r.stdout.strip(), "ktcp_fault.ko")
    assert os.path.exists(ko), f"{ko} missing: make kmod KERNEL={SERIES}"
    cmd = (f"insmod {ko} fault=write_after_free && rmmod ktcp_fault && "
           "echo 1 > /sys/kernel/slab/kmalloc-64/validate && "
           f"insmod {ko} fault=double_free && rmmod ktcp_fault")
    r = subprocess.run([os.path.join(ROOT, "scripts/vm"), "--kernel", SERIES,
                        "--timeout", "900", "--", "sh", "-c", cmd],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout)
    m = re.search(r"logs in (\S+)", r.stdout)
    assert m, r.stdout
    with open(os.path.join(ROOT, m.group(1), "dmesg.log"), errors="replace") as f:
        dmesg = f.read()
    return r.returncode, r.stdout, dmesg


def test_detectors_are_on(faulted):
    _, _, dmesg = faulted
    line = next((l for l in dmesg.splitlines() if "Kernel command line:" in l), "")
    assert "slub_debug=FZPU" in line and "page_poison=1" in line, line


def test_the_run_fails(faulted):
    rc, out, _ = faulted
    assert rc == 3, out
    assert "the guest kernel reported problems" in out, out


def test_write_after_free_is_reported(faulted):
    _, out, _ = faulted
    # slub_debug's poison check, or KFENCE's report if it sampled the object
    assert (re.search(r"BUG kmalloc-64 \(.*\): Poison overwritten", out)
            or "KFENCE: use-after-free write" in out), out


def test_double_free_is_reported(faulted):
    _, out, _ = faulted
    assert (re.search(r"BUG kmalloc-64 \(.*\): Object already free", out)
            or "KFENCE: invalid free" in out), out
