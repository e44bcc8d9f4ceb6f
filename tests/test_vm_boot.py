"""scripts/vm's handling of boots and runs that stall, with a stand-in for
virtme-ng (KTCP_VM_VNG) that plays the guest: a boot that never reaches the
command is stopped through QEMU's monitor after KTCP_VM_BOOT seconds (at
once when its kernel reports BUG:, an Oops or a panic) and booted again,
its console's end printed; three such boots fail the run;
a run that hits the hard timeout says how far the guest got (heartbeat,
output, kernel log, console); with every guest slot of the machine taken a
run waits for one."""
import fcntl
import os
import subprocess
import threading
import sys
import time

import pytest

from testlib import ROOT

# The stand-in: boot N of a run follows the plan in $FAKE_VNG_PLAN (one
# word per boot): "hang" prints a console line and waits for "quit" on the
# monitor socket named in --qemu-opts; "oops" does so after a kernel report; "run" plays scripts/vm-guest (the
# started mark, a heartbeat, the command's output, its status); "stall"
# starts like "run", then keeps beating without finishing.
FAKE_VNG = r'''
import os, re, socket, sys, time
args = sys.argv[1:]
opts = " ".join(a for a in args if a.startswith("--qemu-opts="))
monitor = re.search(r"-monitor unix:([^,]+)", opts).group(1)
logdir = args[args.index("--exec") + 1].split()[1]
count_file = os.environ["FAKE_VNG_COUNT"]
n = int(open(count_file).read() or 0) + 1 if os.path.exists(count_file) else 1
open(count_file, "w").write(str(n))
plan = os.environ["FAKE_VNG_PLAN"].split()
step = plan[min(n, len(plan)) - 1]
print(f"[    0.000000] fake console: boot {n} ({step})", flush=True)
if step == "oops":
    print("[    0.003550] BUG: KASAN: wild-memory-access in do_raw_spin_lock+0x122/0x270",
          flush=True)
if step in ("hang", "oops"):
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(monitor)
    srv.listen(1)
    conn, _ = srv.accept()
    conn.sendall(b"(qemu) ")
    buf = b""
    while b"quit" not in buf:
        data = conn.recv(4096)
        if not data:
            break
        buf += data
    srv.close()
    os.unlink(monitor)
    sys.exit(0)
open(os.path.join(logdir, "started"), "w").close()
open(os.path.join(logdir, "heartbeat"), "w").close()
with open(os.path.join(logdir, "dmesg.log"), "w") as f:
    f.write("[    1.000000] fake kernel: last words\n")
with open(os.path.join(logdir, "out"), "a") as f:
    f.write("hello from the guest\n")
if step == "stall":
    while True:
        os.utime(os.path.join(logdir, "heartbeat"))
        time.sleep(1)
open(os.path.join(logdir, "rc"), "w").write("0\n")
'''


def run_vm(tmp_path, plan, timeout_arg="60", limit=120, boot_s="5", extra_env=None):
    kver = subprocess.run([os.path.join(ROOT, "scripts/kernels"), "release", "6.1"],
                          capture_output=True, text=True)
    if kver.returncode != 0:
        pytest.skip("no cached 6.1 kernel (scripts/deps)")
    fake = tmp_path / "fake-vng"
    fake.write_text(f"#!{sys.executable}\n{FAKE_VNG}")
    fake.chmod(0o755)
    env = dict(os.environ, KTCP_VM_VNG=str(fake), KTCP_VM_KVM="0", KTCP_VM_BOOT=boot_s,
               FAKE_VNG_PLAN=plan, FAKE_VNG_COUNT=str(tmp_path / "count"),
               TMPDIR=str(tmp_path), **(extra_env or {}))
    r = subprocess.run([os.path.join(ROOT, "scripts/vm"), "--kernel", "6.1", "--timeout", timeout_arg,
                        "--", "true"], env=env, capture_output=True, text=True, timeout=limit)
    boots = int((tmp_path / "count").read_text())
    return r, boots


def test_hung_boot_is_stopped_and_booted_again(tmp_path):
    r, boots = run_vm(tmp_path, "hang run")
    assert r.returncode == 0, r.stderr
    assert boots == 2
    assert "boot 1 stopped: it did not reach the command within 5s" in r.stderr
    assert "fake console: boot 1 (hang)" in r.stderr  # the console's end
    assert "hello from the guest" in r.stdout


def test_boot_with_kernel_report_is_stopped_at_once(tmp_path):
    t0 = time.monotonic()
    r, boots = run_vm(tmp_path, "oops run", boot_s="120")
    assert r.returncode == 0, r.stderr
    assert boots == 2
    assert time.monotonic() - t0 < 60  # not the boot deadline
    assert "boot 1 stopped: its kernel reported a problem before the command started" in r.stderr
    assert "BUG: KASAN: wild-memory-access" in r.stderr  # the console's end
    assert "hello from the guest" in r.stdout


def test_three_hung_boots_fail_the_run(tmp_path):
    r, boots = run_vm(tmp_path, "hang hang hang run")
    assert r.returncode == 1, r.stderr
    assert boots == 3
    assert "no boot reached the command (3 boots)" in r.stderr
    assert "hello from the guest" not in r.stdout


def test_timed_out_run_says_how_far_it_got(tmp_path):
    r, boots = run_vm(tmp_path, "stall", timeout_arg="8")
    assert r.returncode == 124, r.stderr
    assert boots == 1
    assert "guest timed out after 8s" in r.stderr
    assert "the guest's last heartbeat was" in r.stderr
    assert "the command had written 21 bytes" in r.stderr
    assert "fake kernel: last words" in r.stderr
    assert "fake console: boot 1 (stall)" in r.stderr


def test_run_waits_for_a_free_guest_slot(tmp_path):
    """KTCP_VM_SLOTS=1 and the one slot held (as a running guest holds it):
    the run says it waits and boots only once the slot is let go."""
    slot = open(tmp_path / "ktcp-vm-slot.0", "w")
    fcntl.flock(slot, fcntl.LOCK_EX)
    released = []

    def release():
        time.sleep(4)
        released.append(time.time())
        slot.close()

    t = threading.Thread(target=release)
    t.start()
    r, boots = run_vm(tmp_path, "run", extra_env={"KTCP_VM_SLOTS": "1"})
    t.join()
    assert r.returncode == 0, r.stderr
    assert boots == 1
    assert "1 guests run here already; waiting for one to end" in r.stderr
    assert "hello from the guest" in r.stdout
    # the stand-in booted after the release: its count file is newer
    assert os.stat(tmp_path / "count").st_mtime >= released[0]
