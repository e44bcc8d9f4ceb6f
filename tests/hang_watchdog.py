"""A per-test watchdog for the kernel suites (registered by tests/conftest.py).

Inside the project VM a test that hangs in the kernel (an rmmod that never
returns, a write to tracefs stuck behind a work item that keeps re-queueing
itself) would otherwise wait for scripts/vm's outer timeout, 25 minutes or
more, and leave nothing but a silent dmesg. Here each test gets a bound
(setup, call and teardown together). When a test passes it:

1. a report: the Python stack of every thread of pytest; every process
   pytest started (rmmod, insmod, ...) with its state, wchan, command line
   and kernel stack (/proc/<pid>/stack); every task in D state with its
   kernel stack; the tasks that used the most CPU over one second (a
   spinning kworker shows there, named after its workqueue);
2. in the guest, that report into the kernel log ("ktcp-watchdog:" lines),
   then the kernel's own view: sysrq w (blocked tasks), l (a backtrace of
   every CPU, taken three times), t (every task, then the busy workqueues
   and worker pools). scripts/vm-guest streams the kernel log to
   dmesg.log. All of this is done before anything touches the shared
   folder (9p), in case that is what hangs;
   then, from a thread of its own, watchdog-<pid>-<n>.log in the VM's log
   folder: the report, /proc/net/khttpd and kecho's counters, the TCP
   sockets (ss), whether the kernel's hung-task and lockup detectors were
   on, and the kernel log from the report on;
3. the test fails ("Failed: watchdog: ...", raised in pytest's main thread
   by a signal) and the run stops after it: the kernel is not trusted
   after that. If the main thread does not come back within the grace
   period (it waits in the kernel, uninterruptibly), pytest exits at once
   with status 70 after saying so; scripts/vm then fails the run.

Configuration (environment):
  KTCP_TEST_WATCHDOG        the bound in seconds; 0 turns the watchdog off.
                            Default inside the VM: 300 (a test marked
                            watchdog(seconds=N) gets N), times 4 on the
                            debug kernel; outside the VM the watchdog is
                            off unless this is set.
  KTCP_WATCHDOG_GRACE       seconds the failed test gets to unwind
                            (default 60).
  KTCP_WATCHDOG_DIR         where dumps go (default: scripts/vm's log
                            folder, KTCP_VM_LOGDIR, else the system's
                            temporary folder).
  KTCP_WATCHDOG_SYSRQ       the file the sysrq letters are written to
                            (default /proc/sysrq-trigger inside the VM,
                            none outside: the host's kernel is left alone).

Passing tests pay one condition-variable notify at start and end.
"""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

DEFAULT_BOUND = 300
DEBUG_KERNEL_FACTOR = 4
EXIT_STATUS = 70
KMSG_TAG = "ktcp-watchdog"


def _in_vm():
    return os.environ.get("KTCP_IN_VM") == "1"


def _bound_from_env():
    """The base bound in seconds, 0 when off, None when unset."""
    v = os.environ.get("KTCP_TEST_WATCHDOG")
    if v is None or v == "":
        return None
    return float(v)


def _read(path, limit=1 << 16):
    try:
        with open(path, errors="replace") as f:
            return f.read(limit)
    except OSError as e:
        return f"({e.strerror})"


def _stat(pid):
    """(comm, state, ppid, utime+stime ticks) of a task, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    comm = s[s.index("(") + 1:s.rindex(")")]
    fields = s[s.rindex(")") + 2:].split()
    return comm, fields[0], int(fields[1]), int(fields[11]) + int(fields[12])


def _pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _task_block(pid, why=""):
    st = _stat(pid)
    if st is None:
        return f"--- pid {pid}: gone\n"
    comm, state, ppid, _ = st
    cmdline = _read(f"/proc/{pid}/cmdline").replace("\0", " ").strip()
    return (f"--- pid {pid} ppid {ppid} [{comm}] state {state}{why} "
            f"wchan {_read(f'/proc/{pid}/wchan').strip() or '-'}\n"
            f"    cmdline: {cmdline or '-'}\n"
            f"{_read(f'/proc/{pid}/stack')}")


def process_report(root_pid):
    """Descendants of root_pid, tasks in D state and the top CPU users."""
    out = []
    stats = {p: _stat(p) for p in _pids()}
    stats = {p: s for p, s in stats.items() if s}
    children = {}
    for p, s in stats.items():
        children.setdefault(s[2], []).append(p)
    desc, todo = [], list(children.get(root_pid, []))
    while todo:
        p = todo.pop()
        desc.append(p)
        todo.extend(children.get(p, []))
    out.append(f"== processes started by pytest (pid {root_pid}): {len(desc)}\n")
    out += [_task_block(p) for p in sorted(desc)]
    dstate = [p for p, s in stats.items() if s[1] == "D" and p not in desc]
    out.append(f"== other tasks in D state: {len(dstate)}\n")
    out += [_task_block(p) for p in sorted(dstate)]
    # Who is running: CPU ticks over one second, per task (threads of a
    # process are folded into it; kernel threads are single tasks).
    time.sleep(1)
    hz = os.sysconf("SC_CLK_TCK")
    busy = []
    for p, s in stats.items():
        now = _stat(p)
        if now and now[3] > s[3]:
            busy.append((now[3] - s[3], p))
    busy.sort(reverse=True)
    out.append("== busiest tasks over one second (CPU %)\n")
    for ticks, p in busy[:8]:
        out.append(_task_block(p, f" cpu {100 * ticks / hz:.0f}%"))
    return "".join(out)


def python_threads():
    """Every thread's Python stack, innermost last, pytest's and pluggy's
    own frames left out; no source lines (reading them is file I/O)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    out = ["== Python threads of pytest\n"]
    for ident, frame in sys._current_frames().items():
        frames = []
        while frame is not None:
            code = frame.f_code
            if "/_pytest/" not in code.co_filename and "/pluggy/" not in code.co_filename:
                frames.append(f"  {code.co_filename}:{frame.f_lineno} in {code.co_name}\n")
            frame = frame.f_back
        out.append(f"-- thread {names.get(ident, ident)}\n" + "".join(reversed(frames)))
    return "".join(out)


def kernel_state_report():
    out = []
    for path in ("/proc/net/khttpd", "/proc/net/kecho"):
        if os.path.exists(path):
            out.append(f"== {path}\n{_read(path)}")
    # Whether the kernel's own detectors were watching (a hang they did
    # not report may be one they could not see).
    knobs = ("hung_task_timeout_secs", "watchdog", "soft_watchdog", "nmi_watchdog",
             "watchdog_thresh")
    out.append("== detectors: " + ", ".join(
        f"{k}={_read('/proc/sys/kernel/' + k).strip()}" for k in knobs) + "\n")
    out.append(f"== loadavg: {_read('/proc/loadavg')}")
    mods = [line for line in _read("/proc/modules").splitlines() if "(O" in line]
    out.append("== out-of-tree modules loaded\n" + "\n".join(mods) + "\n")
    try:
        cmd = ["ss", "-tanoiemp", "state", "all", "exclude", "time-wait"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        lines = [line.rstrip() for line in r.stdout.splitlines() if line.strip()]
        out.append(f"== {' '.join(cmd)}\n" + "\n".join(lines)[-200_000:] + "\n")
    except (OSError, subprocess.TimeoutExpired) as e:
        out.append(f"== ss: {e}\n")
    return "".join(out)


class HangWatchdog:
    def __init__(self, config, base_bound, sysrq, dump_dir, grace):
        self.config = config
        self.base_bound = base_bound
        self.sysrq = sysrq
        self.dump_dir = dump_dir
        self.grace = grace
        self.pid = os.getpid()
        self.main_ident = threading.main_thread().ident
        # The terminal (or scripts/vm's log) as it was before any capture:
        # what the watchdog says must survive a test's captured output.
        self.err = os.fdopen(os.dup(2), "w", buffering=1)
        self.cond = threading.Condition()
        self.item = None
        self.bound = self.started = 0.0
        self.deadline = None
        self.last_dump = None
        self.fired = None  # the item whose bound passed, until it ends
        self.dumps = 0
        signal.signal(signal.SIGALRM, self._on_signal)
        self.thread = threading.Thread(target=self._run, name="hang-watchdog", daemon=True)
        self.thread.start()

    # ---- pytest's side

    def bound_for(self, item):
        m = item.get_closest_marker("watchdog")
        bound = float(m.kwargs.get("seconds", m.args[0] if m.args else self.base_bound)) if m \
            else self.base_bound
        if "ktcp-debug" in os.uname().release:
            bound *= DEBUG_KERNEL_FACTOR
        return bound

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        bound = self.bound_for(item)
        with self.cond:
            self.item, self.bound, self.started = item, bound, time.monotonic()
            self.deadline = self.started + bound
            self.cond.notify()
        try:
            return (yield)
        finally:
            self.fired = None  # first: a late signal then raises nothing
            with self.cond:
                self.item = self.deadline = None
                self.fired = None
                self.cond.notify()

    def _on_signal(self, signum, frame):
        item = self.fired
        if item is not None and self.item is item:
            pytest.fail(f"watchdog: {item.nodeid} ran past its bound of {self.bound:.0f} s; "
                        f"kernel and process state in {self.last_dump}", pytrace=True)

    # ---- the watchdog thread

    def _run(self):
        with self.cond:
            while True:
                if self.deadline is None:
                    self.cond.wait()
                    continue
                left = self.deadline - time.monotonic()
                if left > 0:
                    self.cond.wait(left)
                    continue
                item, bound, started = self.item, self.bound, self.started
                self.deadline = None
                self.cond.release()
                try:
                    self._fire(item, bound, started)
                finally:
                    self.cond.acquire()

    def say(self, text):
        try:
            self.err.write(text)
            self.err.flush()
        except (OSError, ValueError):
            pass

    def kernel_log(self):
        """In the guest: the dump goes into the kernel log as well."""
        return self.sysrq == "/proc/sysrq-trigger"

    def kmsg(self, text):
        """Lines into the kernel log; nothing outside the guest."""
        if not self.kernel_log():
            return
        # The rate limit of /dev/kmsg counts per open file: one open for
        # every line, in case printk_devkmsg could not be turned on.
        for line in text.splitlines():
            try:
                with open("/dev/kmsg", "w") as f:
                    f.write(f"{KMSG_TAG}: {line[:900]}\n")
            except OSError:
                pass

    def devkmsg(self, value):
        """Set printk_devkmsg (on, off, ratelimit); returns the old value
        (None: unknown). Writes to /dev/kmsg are rate-limited to a few
        lines by default, which would drop most of the report."""
        try:
            with open("/proc/sys/kernel/printk_devkmsg") as f:
                old = f.read().strip()
            with open("/proc/sys/kernel/printk_devkmsg", "w") as f:
                f.write(value)
            return old
        except OSError:
            return None

    def trigger(self, letter):
        try:
            with open(self.sysrq, "a") as f:
                f.write(letter)
            return True
        except OSError as e:
            self.say(f"watchdog: sysrq {letter}: {e}\n")
            return False

    def _fire(self, item, bound, started):
        # First what needs nothing from the shared folder (the guest's
        # files, logs and Python's sources are on 9p, which may be what
        # hangs): the report in memory, into the kernel log with the
        # kernel's own; then the files, from a thread of their own.
        self.dumps += 1
        path = os.path.join(self.dump_dir, f"watchdog-{self.pid}-{self.dumps}.log")
        self.last_dump = path
        what = (f"{item.nodeid} still running after {time.monotonic() - started:.0f} s "
                f"(bound {bound:.0f} s)")
        report = f"watchdog: {what}\nkernel {os.uname().release}\n\n" + python_threads()
        try:
            report += process_report(self.pid)
        except Exception as e:  # noqa: BLE001 — a dump must not stop the rest
            report += f"(process report failed: {e!r})\n"
        done = []
        if self.sysrq:
            old = self.devkmsg("on") if self.kernel_log() else None
            self.kmsg(report[:48_000] + f"\nsysrq w, l, l, l, t follow; the dump: {path}")
            for letter in "wlllt":
                if self.trigger(letter):
                    done.append(letter)
                    if self.kernel_log():
                        time.sleep(1)  # let dmesg -w keep up with the ring buffer
            self.kmsg(f"end of the dump for {item.nodeid}")
            if old is not None:
                self.devkmsg(old)
        writer = threading.Thread(target=self._write_dump, args=(path, what, report, done),
                                  name="hang-watchdog-writer", daemon=True)
        writer.start()
        writer.join(60)
        if writer.is_alive():
            self.kmsg(f"the dump's file could not be written within 60 s: {path}")
        item.session.shouldstop = f"watchdog: {item.nodeid} ran past its bound of {bound:.0f} s"
        with self.cond:
            if self.item is not item:
                return  # it ended while we dumped
            self.fired = item
        signal.pthread_kill(self.main_ident, signal.SIGALRM)
        end = time.monotonic() + self.grace
        with self.cond:
            while self.item is item and time.monotonic() < end:
                self.cond.wait(end - time.monotonic())
            if self.item is not item:
                return
        late = (f"{item.nodeid} did not unwind within {self.grace:.0f} s of its failure "
                f"(stuck in the kernel?); pytest exits with status {EXIT_STATUS}")
        again = python_threads() + process_report(self.pid)
        old = self.devkmsg("on") if self.kernel_log() else None
        self.kmsg(f"{late}\n{again[:16_000]}")
        if old is not None:
            self.devkmsg(old)
        self.say(f"watchdog: {late}. State: {path}\n")
        try:
            with open(path, "a") as f:
                f.write(f"\n== {late}\n{again}")
        except OSError:
            pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(EXIT_STATUS)

    def _write_dump(self, path, what, report, done):
        self.say(f"\nwatchdog: {what}: dumping state to {path}\n")
        os.makedirs(self.dump_dir, exist_ok=True)
        with open(path, "w") as f:
            f.write(f"{report}")
            try:
                f.write(kernel_state_report())
            except Exception as e:  # noqa: BLE001
                f.write(f"(kernel state report failed: {e!r})\n")
            if done:
                f.write(f"\n== sysrq {' '.join(done)} written to {self.sysrq}; "
                        "the kernel's output is in the kernel log (dmesg.log)\n")
            if self.kernel_log():
                r = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=30)
                mark = f"{KMSG_TAG}: watchdog: {what}"
                tail = r.stdout[r.stdout.rfind(mark):] if mark in r.stdout else r.stdout[-400_000:]
                f.write("\n== dmesg from the dump's start\n" + tail)
        self.say(f"watchdog: dump written to {path}; failing the test and stopping the run\n")


def configure(config):
    """Register the watchdog when it is on (see the module's docstring)."""
    config.addinivalue_line(
        "markers", "watchdog(seconds): this test's bound for the per-test watchdog "
        "(tests/hang_watchdog.py), instead of KTCP_TEST_WATCHDOG or its default")
    base = _bound_from_env()
    if base is None:
        base = DEFAULT_BOUND if _in_vm() else 0
    if base <= 0 or threading.current_thread() is not threading.main_thread():
        return
    sysrq = os.environ.get("KTCP_WATCHDOG_SYSRQ")
    if sysrq is None:
        sysrq = "/proc/sysrq-trigger" if _in_vm() else ""
    dump_dir = (os.environ.get("KTCP_WATCHDOG_DIR") or os.environ.get("KTCP_VM_LOGDIR")
                or tempfile.gettempdir())
    grace = float(os.environ.get("KTCP_WATCHDOG_GRACE", "60"))
    config.pluginmanager.register(HangWatchdog(config, base, sysrq, dump_dir, grace),
                                  "ktcp-hang-watchdog")
