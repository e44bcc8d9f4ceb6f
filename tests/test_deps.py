"""scripts/deps, the one installer, as far as it can run without changing the
machine: it refuses any host but Debian 12 amd64 at once (before apt-get,
saying what `make user` needs elsewhere), and the boot links a package
install adds (nginx and keepalived enable their services) are removed again
while those that were there before stay (scripts/boot-links, on a fake root;
then scripts/deps itself with apt-get and dpkg-query stubbed, whose install
adds links under a fake root as the packages' maintainer scripts do)."""
import os
import re
import shutil
import subprocess
import time

import pytest

from testlib import ROOT

DEPS = os.path.join(ROOT, "scripts", "deps")
BOOT_LINKS = os.path.join(ROOT, "scripts", "boot-links")

OS_RELEASES = {
    "fedora-40": ('NAME="Fedora Linux"\nVERSION="40 (Workstation Edition)"\nID=fedora\n'
                  'VERSION_ID=40\nPRETTY_NAME="Fedora Linux 40 (Workstation Edition)"\n', "amd64"),
    "debian-11": ('PRETTY_NAME="Debian GNU/Linux 11 (bullseye)"\nVERSION_ID="11"\nID=debian\n', "amd64"),
    "ubuntu-24.04": ('NAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\nID_LIKE=debian\n', "amd64"),
    "debian-12-arm64": ('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_ID="12"\nID=debian\n', "arm64"),
}


def real(cmd):
    path = shutil.which(cmd)
    assert path, f"{cmd} not installed"
    return path


def stubs(tmp_path, arch="amd64", installed=None, on_install=""):
    """A folder of commands put first on PATH: apt-get, sudo and
    dpkg-query log their calls to calls.log; dpkg --print-architecture
    answers arch (anything else goes to the real dpkg); dpkg-query says every package is installed but those not
    in installed (None: all are); apt-get install runs on_install."""
    d = tmp_path / "bin"
    d.mkdir()
    log = tmp_path / "calls.log"
    scripts = {
        "dpkg": (f'#!/bin/sh\n[ "$1" = --print-architecture ] && {{ echo {arch}; exit 0; }}\n'
                 f'exec {real("dpkg")} "$@"\n'),
        "sudo": f'#!/bin/sh\necho "sudo $*" >>{log}\nexec "$@"\n',
        # scripts/kernels and scripts/arm64-libs download with apt states
        # of their own (into the project cache): those calls go through
        "apt-get": (f'#!/bin/sh\ncase "$*" in *Dir::Etc::SourceList=*) exec {real("apt-get")} "$@";; esac\n'
                    f'echo "apt-get $*" >>{log}\n'
                    f'case " $* " in *" install "*) {on_install} ;; esac\n'),
        "dpkg-query": (f'#!/bin/sh\necho "dpkg-query $*" >>{log}\n'
                       + ('for p; do :; done\n'
                          f'case " {" ".join(installed)} " in *" $p "*) printf "install ok installed";; '
                          '*) exit 1;; esac\n' if installed is not None
                          else 'printf "install ok installed"\n')),
    }
    for name, text in scripts.items():
        (d / name).write_text(text)
        (d / name).chmod(0o755)
    return d, log


@pytest.mark.parametrize("host", sorted(OS_RELEASES))
def test_other_host_refused_at_once(tmp_path, host):
    text, arch = OS_RELEASES[host]
    osr = tmp_path / "os-release"
    osr.write_text(text)
    bindir, log = stubs(tmp_path, arch=arch)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", KTCP_OS_RELEASE=str(osr))
    t0 = time.monotonic()
    r = subprocess.run([DEPS], env=env, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    assert r.returncode == 1, r.stdout + r.stderr
    assert took < 5, took
    assert not log.exists(), log.read_text()  # no apt-get, sudo or dpkg-query
    assert r.stdout == ""
    err = r.stderr
    assert "Debian 12 (bookworm) on amd64 only" in err and "Nothing was installed" in err
    assert f"on {arch}" in err
    for need in ("C11 compiler", "liburcu", "zlib", "libbpf", "clang", "OpenSSL 3", "RT_CORO=ucontext"):
        assert need in err, need


def link(root, path, target):
    p = root / path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    if not os.path.islink(p):
        os.symlink(target, p)


def enable(root, name, rc="S01", wants="multi-user.target.wants"):
    """What the package's postinst does: update-rc.d defaults and
    deb-systemd-helper enable."""
    for lvl in "2345":
        link(root, f"/etc/rc{lvl}.d/{rc}{name}", f"../init.d/{name}")
    for lvl in "016":
        link(root, f"/etc/rc{lvl}.d/K01{name}", f"../init.d/{name}")
    link(root, f"/etc/systemd/system/{wants}/{name}.service", f"/lib/systemd/system/{name}.service")


def links_under(root):
    return sorted("/" + os.path.relpath(os.path.join(d, f), root)
                  for d, dirs, fs in os.walk(root) for f in fs + dirs
                  if os.path.islink(os.path.join(d, f)))


def boot_links(*args):
    r = subprocess.run([BOOT_LINKS, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_boot_links_prune_only_what_was_added(tmp_path):
    root = tmp_path / "root"
    # before: keepalived enabled by the machine's owner (systemd only, and
    # one SysV link), another service, and a plain file named like a link
    link(root, "/etc/systemd/system/multi-user.target.wants/keepalived.service",
         "/lib/systemd/system/keepalived.service")
    link(root, "/etc/rc3.d/S02keepalived", "../init.d/keepalived")
    link(root, "/etc/systemd/system/multi-user.target.wants/dbus.service", "/lib/systemd/system/dbus.service")
    (root / "etc/rc2.d").mkdir(parents=True)
    (root / "etc/rc2.d/S99nginx").write_text("not a link\n")
    services = ["nginx", "keepalived"]
    before = boot_links("list", str(root), *services)
    assert before == [f"{root}/etc/rc3.d/S02keepalived",
                      f"{root}/etc/systemd/system/multi-user.target.wants/keepalived.service"]
    (tmp_path / "before").write_text("\n".join(before) + "\n")
    kept = links_under(root)

    # the install: both packages enable their services; an unrelated link
    enable(root, "nginx")
    enable(root, "keepalived")  # the wants link exists already: kept as it was
    link(root, "/etc/systemd/system/sockets.target.wants/nginx.socket", "/lib/systemd/system/nginx.socket")
    link(root, "/etc/systemd/system/multi-user.target.wants/postgresql.service",
         "/lib/systemd/system/postgresql.service")
    added = set(links_under(root)) - set(kept)
    assert len(added) == 8 + 7 + 2  # nginx's, keepalived's new ones, the socket and postgresql

    removed = boot_links("prune", str(root), str(tmp_path / "before"), *services)
    assert len(removed) == 8 + 7 + 1 and all(os.path.isabs(p) for p in removed)
    assert links_under(root) == sorted(kept + ["/etc/systemd/system/multi-user.target.wants/postgresql.service"])
    assert (root / "etc/rc2.d/S99nginx").read_text() == "not a link\n"
    assert os.readlink(root / "etc/systemd/system/multi-user.target.wants/keepalived.service") == \
        "/lib/systemd/system/keepalived.service"
    # a second prune finds nothing more
    assert boot_links("prune", str(root), str(tmp_path / "before"), *services) == []


def test_deps_install_leaves_boot_links_as_they_were(tmp_path):
    """scripts/deps with nginx and keepalived missing: its (stubbed)
    apt-get install enables both under a fake root, as their packages do,
    checking that service starts are refused meanwhile; afterwards only the
    links that were there before remain, and the policy-rc.d is gone."""
    root = tmp_path / "root"
    (root / "usr/sbin").mkdir(parents=True)
    link(root, "/etc/systemd/system/multi-user.target.wants/keepalived.service",
         "/lib/systemd/system/keepalived.service")
    link(root, "/etc/systemd/system/multi-user.target.wants/ssh.service", "/lib/systemd/system/ssh.service")
    kept = links_under(root)
    osr = tmp_path / "os-release"
    osr.write_text('VERSION_ID="12"\nID=debian\n')
    on_install = (f'test -x {root}/usr/sbin/policy-rc.d && {root}/usr/sbin/policy-rc.d nginx start; '
                  f'echo "policy-rc.d $?" >>{tmp_path}/calls.log; '
                  f'for s in nginx keepalived; do for l in 2 3 4 5; do mkdir -p {root}/etc/rc$l.d; '
                  f'ln -sf ../init.d/$s {root}/etc/rc$l.d/S01$s; done; '
                  f'ln -sf /lib/systemd/system/$s.service {root}/etc/systemd/system/multi-user.target.wants/; '
                  'done')
    debs = re.search(r"DEBS=\((.*?)\n\)", open(DEPS).read(), re.S).group(1)
    names = [w for line in debs.splitlines() for w in line.split("#")[0].split()]
    installed = [n for n in names if n not in ("nginx", "keepalived")]
    bindir, log = stubs(tmp_path, installed=installed, on_install=on_install)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", KTCP_OS_RELEASE=str(osr),
               KTCP_DEPS_ROOT=str(root))
    r = subprocess.run([DEPS], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    calls = log.read_text()
    assert "install -y -q --no-install-recommends nginx keepalived" in calls
    assert "policy-rc.d 101" in calls  # starts refused during the install
    assert not (root / "usr/sbin/policy-rc.d").exists()
    assert links_under(root) == kept
    # nginx's five, keepalived's four SysV ones (its wants link was there)
    assert r.stdout.count("removed the boot link the install added:") == 5 + 4
