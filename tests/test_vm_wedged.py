"""scripts/vm-wedged, which scripts/vm runs when the guest's heartbeat stops,
against a stand-in for QEMU's human monitor on a Unix socket (the same
prompt, command echo and output layout as QEMU 7.2's): every vCPU's
instruction pointer and the text addresses on its stack come out named
through System.map shifted by the guest's KASLR offset and through a
module's load address, the kernel log buffer's text is read from guest
memory, the report lands in wedged.log, and QEMU is told to quit."""
import os
import socket
import subprocess
import threading

from testlib import ROOT

MAP_TEXT = 0xffffffff81000000
KASLR = 0x1e00000  # the guest's _text is this far above System.map's
MOD_BASE = 0xffffffffc0800000
LOG_BUF = 0xffffffff83000000  # __log_buf in the map
LOG_TEXT = b"watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [kworker/u4:2:96]"
REGS = """CPU#{n}
RAX=0000000000000000 RBX=0000000000000001 RCX=0000000000000000 RDX=0000000000000000
RSI=0000000000000000 RDI=0000000000000000 RBP=0000000000000000 RSP={rsp:016x}
RIP={rip:016x} RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=0
"""


def fake_monitor(path, cpus, log):
    """Answer like QEMU's HMP until 'quit': info status, info registers -a,
    cpu N, x/Ngx ADDR (each CPU's stack holds one module and one kernel
    return address)."""
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        conn.sendall(b"QEMU 7.2.22 monitor - type 'help' for more information\r\n(qemu) ")
        cur = 0
        buf = b""
        while True:
            data = conn.recv(4096)
            if not data:
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                cmd = line.decode()
                log.append(cmd)
                echo = "".join(f"{cmd[:i]}\x1b[K" + "\x1b[D" * i for i in range(1, len(cmd) + 1))
                if cmd == "quit":
                    conn.close()
                    srv.close()
                    return
                if cmd == "info status":
                    out = "VM status: running\r\n"
                elif cmd == "info registers -a":
                    out = "\r\n".join(REGS.format(n=n, **c).replace("\n", "\r\n") for n, c in enumerate(cpus))
                elif cmd.startswith("cpu "):
                    cur = int(cmd.split()[1])
                    out = ""
                elif cmd.startswith("x/") and int(cmd.split()[1], 16) == LOG_BUF + KASLR:
                    n = int(cmd[2:cmd.index("g")])
                    mem = (b"\0" * 64 + LOG_TEXT).ljust(n * 8, b"\0")
                    words = [int.from_bytes(mem[i:i + 8], "little") for i in range(0, n * 8, 8)]
                    out = "".join(f"{LOG_BUF + KASLR + i * 8:016x}: 0x{words[i]:016x} 0x{words[i + 1]:016x}\r\n"
                                  for i in range(0, n, 2))
                elif cmd.startswith("x/"):
                    c = cpus[cur]
                    out = (f"{c['rsp']:016x}: 0x{c['stack'][0]:016x} 0x0000000000000001\r\n"
                           f"{c['rsp'] + 16:016x}: 0x{c['stack'][1]:016x} 0xffff888000000000\r\n")
                else:
                    out = "unknown command\r\n"
                conn.sendall((echo + "\r\n" + out + "(qemu) ").encode())

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def test_wedged_guest_cpus_named(tmp_path):
    system_map = tmp_path / "System.map-testrel"
    (tmp_path / "config-testrel").write_text("CONFIG_LOG_BUF_SHIFT=12\n")
    system_map.write_text(f"{LOG_BUF:016x} b __log_buf\n"
                          f"{MAP_TEXT:016x} T _text\n"
                          f"{MAP_TEXT + 0x1000:016x} T native_queued_spin_lock_slowpath\n"
                          f"{MAP_TEXT + 0x2000:016x} T smp_call_function_many_cond\n"
                          f"{MAP_TEXT + 0x3000:016x} T process_one_work\n"
                          f"{MAP_TEXT + 0x4000:016x} D some_data\n")
    logdir = tmp_path / "log"
    logdir.mkdir()
    (logdir / "kaslr").write_text(f"{MAP_TEXT + KASLR:016x} T _text\n")
    (logdir / "heartbeat").write_text(f"khttpd 155648 0 - Live 0x{MOD_BASE:x} (OE)\n")
    k = MAP_TEXT + KASLR
    cpus = [dict(rip=k + 0x1010, rsp=0xffffc90000083e90, stack=[MOD_BASE + 0x1234, k + 0x3020]),
            dict(rip=k + 0x2044, rsp=0xffffc900000a3e00, stack=[MOD_BASE + 0x40, k + 0x3020])]
    sock = str(tmp_path / "mon")
    log = []
    t = fake_monitor(sock, cpus, log)
    r = subprocess.run([os.path.join(ROOT, "scripts/vm-wedged"), sock, str(logdir), str(system_map),
                        str(tmp_path / "no-modules")], capture_output=True, text=True, timeout=60)
    t.join(timeout=10)
    assert r.returncode == 0, r.stderr
    assert log.count("info registers -a") == 3 and log[-1] == "quit", log
    assert "CPU#0 RIP %#x native_queued_spin_lock_slowpath+0x10" % (k + 0x1010) in r.stderr, r.stderr
    assert "CPU#1 RIP %#x smp_call_function_many_cond+0x44" % (k + 0x2044) in r.stderr, r.stderr
    report = (logdir / "wedged.log").read_text()
    assert "[khttpd]+0x1234" in report and "[khttpd]+0x40" in report, report
    assert "process_one_work+0x20" in report, report
    assert "some_data" not in report and "0xffff888000000000" not in report.split("== sample 1")[0]
    # the kernel's own report, which no user space copied out, from its log buffer
    assert LOG_TEXT.decode() in report.split("== the kernel's log buffer")[1], report
