"""Message servers (docs/kcm.md): ktcp-msg-server on plain TCP, host or VM,
and ktcp-kcm-server on AF_KCM, which needs the guest kernel's kcm module
and so runs only inside the VM. Options: threads, max_msg, stats_file
(default <logdir>/<name>.stats), bind, args (more arguments, last)."""
import os
import socket
import subprocess

from .base import BUILD, Engine, in_vm
from .echo import StatsFile

MSG_BIN = os.path.join(BUILD, "ktcp-msg-server")
KCM_BIN = os.path.join(BUILD, "ktcp-kcm-server")
AF_KCM = 41


class MsgServer(StatsFile, Engine):
    """ktcp-msg-server: answers each connection's frames in order."""
    proto = "msg"
    family = "ktcp-msg-server"
    stop_timeout = 20
    check_dead_exit = False
    defaults = {"threads": 2, "bind": "127.0.0.1", "max_msg": None}

    def __init__(self, logdir=None, exe=MSG_BIN, name=None):
        super().__init__(name or os.path.basename(exe), logdir)
        self.exe = exe

    def argv(self, port, o):
        self.threads = o.get("threads")
        self.stats_file = o.get("stats_file") or os.path.join(
            o.get("logdir") or self.logdir or "/tmp", f"{self.name}.stats")
        cmd = [self.exe, "--port", str(port)]
        for key, flag in (("bind", "--bind"), ("threads", "--threads"), ("max_msg", "--max-msg")):
            if o.get(key) is not None:
                cmd += [flag, str(o[key])]
        return cmd + ["--stats-file", self.stats_file] + list(o.get("args") or ())

    def ordered(self):
        """Does this engine answer one connection's requests in order?"""
        return self.kind == "user" or self.threads == 1


class KcmServer(MsgServer):
    """ktcp-kcm-server: one connection's messages spread over its workers
    (with more than one, pipelined answers may come in another order)."""
    kind = "kernel"
    family = "ktcp-kcm-server"

    def __init__(self, logdir=None, exe=KCM_BIN, name=None):
        super().__init__(logdir, exe, name)

    def unavailable(self):
        if not in_vm():
            return "AF_KCM is used only inside the project VM (scripts/vm)"
        subprocess.run(["modprobe", "kcm"], capture_output=True)
        try:
            socket.socket(AF_KCM, socket.SOCK_SEQPACKET, 0).close()
        except OSError as e:
            return f"socket(AF_KCM) fails in this guest: {e}"
        return None
