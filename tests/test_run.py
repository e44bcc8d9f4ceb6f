"""README's first command, `make run`, as a user runs it: the VM boots with
khttpd.ko and kecho.ko, their ports forwarded to this machine's loopback,
and the commands README gives then answer from the host — on both
kernels, the first from a cache with no kernel release recorded yet. The
"try ..." lines are printed only once the servers answer, so
the test talks to them as soon as the line appears, with no retry. A
forwarded port already taken on the host makes `make run` stop at once,
saying so, with no VM booted."""
import filecmp
import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from testlib import ROOT, in_vm

pytestmark = pytest.mark.skipif(in_vm(), reason="make run boots the VM from the host")

README = open(os.path.join(ROOT, "README.md")).read()
KERNELS = os.environ.get("KERNELS", "6.1 6.12").split()


def readme_command(prefix):
    """The README's command line that starts with prefix, exactly as written
    (the comment after it dropped)."""
    for line in README.splitlines():
        if line.startswith(prefix):
            return line.split("#")[0].strip()
    raise AssertionError(f"README.md shows no command starting with {prefix!r}")


def user_env(**extra):
    """The environment of a user's shell: no make variables of a make
    check this test may run under."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    env.update(extra)
    return env


def sh(cmd, timeout=30):
    return subprocess.run(["bash", "-c", cmd], capture_output=True, timeout=timeout,
                          cwd=ROOT)


def interruptible():
    """As at a terminal: SIGINT and SIGQUIT at their defaults. A test run
    started in the background of a shell without job control inherits
    them ignored, and a shell cannot trap a signal ignored at its start,
    so Ctrl-C would never reach scripts/vm's handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


class Run:
    """`make run` in the background, its output collected line by line."""

    def __init__(self, env):
        self.lines = []
        self.proc = subprocess.Popen(["bash", "-c", readme_command("make run")], cwd=ROOT,
                                     env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True, preexec_fn=interruptible)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, pattern, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for line in self.lines:
                if re.search(pattern, line):
                    return line
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.2)
        raise AssertionError(f"make run (status {self.proc.poll()}) printed no line matching {pattern!r}:\n"
                             + "\n".join(self.lines[-40:]))

    def stop(self):
        """The whole run, VM included (as Ctrl-C at a terminal would)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        # QEMU runs in a process group of its own (timeout's): a run killed
        # before its trap could stop the guest leaves it, holding the
        # forwarded ports the next test needs.
        subprocess.run(["pkill", "-KILL", "-f", f"qemu-system.*path={ROOT},"])


def project_cache():
    """The cache scripts/deps fills (scripts/kernels' $cache)."""
    if os.environ.get("KTCP_CACHE"):
        return os.environ["KTCP_CACHE"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "ktcp")


def fresh_cache(tmp_path):
    """A cache as make run finds it on a fresh machine, or on one where
    Debian has published a newer kernel ABI since the last scripts/deps:
    no kernel release recorded yet (the <series>.current files
    scripts/kernels reads), so a make that read the kernel's release
    before its own scripts/deps ran has none, or the old one. The
    kernels' folders, the apt states and the arm64 libraries are the real
    cache's, linked, so nothing is downloaded again."""
    real = project_cache()
    fresh = tmp_path / "cache"
    (fresh / "kernels").mkdir(parents=True)
    for name in os.listdir(real):
        if name != "kernels":
            os.symlink(os.path.join(real, name), fresh / name)
    for name in os.listdir(os.path.join(real, "kernels")):
        if not name.endswith(".current") and not name.startswith("."):
            os.symlink(os.path.join(real, "kernels", name), fresh / "kernels" / name)
    return str(fresh)


@pytest.mark.parametrize("kernel", KERNELS)
def test_make_run_serves_on_the_host(kernel, tmp_path):
    env = user_env(KERNEL=kernel,
                   KTCP_RUN_SECONDS="40" if kernel == KERNELS[0] else "600")
    if kernel == KERNELS[0]:
        # make run reads the kernel's release only after scripts/deps has
        # fetched it (a make of its own).
        env["KTCP_CACHE"] = fresh_cache(tmp_path)
    served = os.path.join(ROOT, "docs")
    if kernel != KERNELS[0]:
        # README's KTCP_ROOT: another directory, under the clone (the VM
        # has its own /tmp).
        served = os.path.join(ROOT, "build", "run-root")
        os.makedirs(os.path.join(served, "sub"), exist_ok=True)
        with open(os.path.join(served, "page.html"), "wb") as f:
            f.write(os.urandom(50000))
        open(os.path.join(served, "sub", "x.txt"), "w").write("x\n")
        env["KTCP_ROOT"] = served
    run = Run(env)
    try:
        # Builds the modules for this kernel when needed, then boots.
        run.wait_line(r"kecho\s+listening: try", timeout=900)
        run.wait_line(r"khttpd serving .*: try", timeout=30)

        # The commands of README, exactly as written.
        curl = sh(readme_command("curl http://127.0.0.1:8081/"))
        assert curl.returncode == 0, curl.stderr
        listing = curl.stdout.decode()
        assert "Index of /" in listing
        names = sorted(n for n in os.listdir(served) if not n.startswith("."))
        for name in names:
            assert re.search(rf">{re.escape(name)}/?</a>", listing), f"{name} not listed"

        echo = sh(readme_command("echo hello | nc -q1 127.0.0.1 12345"))
        assert echo.returncode == 0, echo.stderr
        assert echo.stdout == b"hello\n"

        # A file, byte for byte.
        name = next(n for n in names if os.path.isfile(os.path.join(served, n)))
        got = tmp_path / "got"
        r = sh(f"curl -fsS -o {got} http://127.0.0.1:8081/{name}")
        assert r.returncode == 0, r.stderr
        assert filecmp.cmp(got, os.path.join(served, name), shallow=False)

        if kernel == KERNELS[0]:
            # KTCP_RUN_SECONDS: it stops by itself, successfully.
            run.proc.wait(timeout=300)
            want = 0
        else:
            # Ctrl-C at the terminal (SIGINT to the foreground process
            # group) stops it at once, QEMU included.
            os.killpg(run.proc.pid, signal.SIGINT)
            run.proc.wait(timeout=90)  # a loaded machine: QEMU's exit is slow
            want = -signal.SIGINT  # make ends itself by the signal
            assert any("scripts/vm: stopped (interrupted)" in line for line in run.lines)
        run.reader.join(timeout=10)
        assert run.proc.returncode == want, "\n".join(run.lines[-40:])
        assert any("guest dmesg clean" in line for line in run.lines)
        qemu = subprocess.run(["pgrep", "-f", f"qemu-system.*path={ROOT},"],
                              capture_output=True, text=True)
        assert qemu.stdout == "", "QEMU still runs after make run ended"
    finally:
        run.stop()


@pytest.mark.parametrize("port", [8081, 12345])
def test_make_run_refuses_a_taken_port(port):
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", port))
    holder.listen(1)
    try:
        t0 = time.monotonic()
        r = subprocess.run([os.path.join(ROOT, "scripts", "run")], cwd=ROOT,
                           env=user_env(KTCP_RUN_SECONDS="5"), capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"127.0.0.1:{port} is already in use" in r.stderr
        assert "scripts/vm" not in r.stderr + r.stdout  # nothing booted
        assert time.monotonic() - t0 < 10
    finally:
        holder.close()
