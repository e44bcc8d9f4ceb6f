"""The DKMS package, in the VM (KTCP_ENGINES=kernel): README's "Install on
your own machine" lines, run exactly as written from the top of the tree,
in order: `make dkms-install` adds the package `ktcp` and installs kecho,
khttpd and drop_tcp_socket for the running guest kernel, `modprobe khttpd
root=/var/www/html port=8080 ...` serves a file, /proc/net/khttpd counts it,
`modprobe -r` unloads it, `modprobe kecho` echoes, and `make dkms-remove`
leaves nothing behind.

The compile step of `dkms build` ran before the boot, on the host, with the
same dkms and the guest kernel's headers (`make dkms-prebuild`, part of
`make check-vm`): under software emulation it takes 12-20 minutes. The test
puts those built modules where dkms keeps them (/var/lib/dkms/ktcp/<VERSION>/
<release>), as on a machine where dkms built them already; dkms's `build`
then says "already built, skip" and everything else is dkms itself.

The first line, `sudo apt-get install dkms linux-headers-$(uname -r)`, is not
run: the guest is offline and its kernel's headers come from the project's
kernel cache, not from the Debian package of that name (installing that on
the host would pull in the kernel image and its boot hooks). The test checks
that dkms is installed (`dpkg -s dkms`) and that the headers are there.

The guest sees the host's files read-only and its /lib/modules/<release> is a
link into the project's kernel cache, so the test gives DKMS the places it
writes (/usr/src, /var/lib/dkms, the module tree) and the document root
/var/www/html as tmpfs folders that vanish with the guest: the host and the
cache are never written.
"""
import glob
import os
import shutil
import socket
import subprocess

import pytest

from testlib import ROOT, module_loaded, port_free, readme_commands, require_kind, run, wait_port
from engines.base import parse_counters

VERSION = open(os.path.join(ROOT, "VERSION")).read().strip()

# packaging, not the modules' code paths: on the release kernels only
pytestmark = pytest.mark.release_kernel


def sh(cmd, check=True):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=1200)
    if check and r.returncode != 0:
        pytest.fail(f"{cmd!r} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


@pytest.fixture
def scratch_module_tree():
    require_kind("kernel")
    rel = os.uname().release
    moddir = f"/lib/modules/{rel}"
    lower = os.path.realpath(moddir)
    if not os.path.islink(moddir) or not os.path.ismount("/lib/modules"):
        pytest.skip(f"{moddir} is not virtme's link into the kernel cache; refusing to write it")
    mounts = []
    try:
        for d in ("/usr/src", "/var/lib/dkms", "/var/www/html"):
            sh(f"mount -t tmpfs ktcp-dkms-test {d}")
            mounts.append(d)
        # /lib/modules is the guest's own tmpfs: the module tree becomes a
        # folder there with copies of the index files and the build link,
        # which depmod and dkms may rewrite and add to. The distribution's
        # own modules (kernel/) are left out: depmod would read every one of
        # them over 9p under emulation, minutes for nothing this test needs.
        os.unlink(moddir)
        os.mkdir(moddir)
        for name in os.listdir(lower):
            src, dst = os.path.join(lower, name), os.path.join(moddir, name)
            if name == "build":
                os.symlink(os.readlink(src) if os.path.islink(src) else src, dst)
            elif name.startswith("modules.") and os.path.isfile(src):
                shutil.copyfile(src, dst)
        yield rel, moddir
    finally:
        sh("rmmod khttpd kecho drop_tcp_socket", check=False)
        for d in reversed(mounts):
            sh(f"umount {d}", check=False)
        if os.path.isdir(moddir) and not os.path.islink(moddir):
            shutil.rmtree(moddir)
            os.symlink(lower, moddir)


def test_readme_dkms_install_commands(scratch_module_tree):
    rel, moddir = scratch_module_tree
    apt, install, load, curl, cat, unload, kecho, remove = readme_commands("## Install on your own machine", 8)
    assert apt == "sudo apt-get install dkms linux-headers-$(uname -r)", apt
    sh("dpkg -s dkms")
    assert os.path.isfile(f"{moddir}/build/Makefile"), "no headers for the running kernel"
    prebuilt = os.path.join(ROOT, "build", "dkms", rel, "tree", "ktcp", VERSION, rel)
    if not os.path.isdir(os.path.join(prebuilt, "x86_64", "module")):
        pytest.fail(f"no modules built by dkms for {rel} in {prebuilt}: run make dkms-prebuild KERNEL=...")
    shutil.copytree(prebuilt, f"/var/lib/dkms/ktcp/{VERSION}/{rel}", symlinks=True)
    body = "<h1>served by the dkms-built khttpd</h1>\n"
    with open("/var/www/html/index.html", "w") as f:
        f.write(body)
    assert port_free(8080) and port_free(12345)
    assert not module_loaded("khttpd") and not module_loaded("kecho")

    def readme(line):
        return sh(f"cd {ROOT} && {line}").stdout

    out = readme(install)
    assert "already built" in out, out  # the prebuilt modules, not a 15-min compile
    status = sh("dkms status").stdout
    assert f"ktcp/{VERSION}, {rel}, x86_64: installed" in status, status
    installed = sorted(os.path.basename(p) for p in glob.glob(f"{moddir}/updates/dkms/*.ko*"))
    assert [p.split(".")[0] for p in installed] == ["drop_tcp_socket", "kecho", "khttpd"], installed

    readme(load)
    # modprobe found the DKMS build, not the project's own build tree.
    assert sh("modinfo -n khttpd").stdout.strip().startswith(f"{moddir}/updates/dkms/")
    params = "/sys/module/khttpd/parameters"
    for name, want in (("port", "8080"), ("idle_timeout_ms", "30000"), ("max_conns", "10000")):
        assert open(f"{params}/{name}").read().strip() == want, name
    wait_port(8080)
    assert readme(curl) == body
    counters = parse_counters(readme(cat))
    assert counters["accepted"] >= 1 and counters["requests"] >= 1, counters

    readme(unload)
    assert not module_loaded("khttpd")

    readme(kecho)
    try:
        assert open("/sys/module/kecho/parameters/port").read().strip() == "12345"
        wait_port(12345)
        with socket.create_connection(("127.0.0.1", 12345), timeout=20) as s:
            s.sendall(b"hello dkms")
            got = b""
            while len(got) < 10:
                chunk = s.recv(64)
                assert chunk, got
                got += chunk
        assert got == b"hello dkms"
    finally:
        run(["rmmod", "kecho"])

    readme(remove)
    assert "ktcp" not in sh("dkms status").stdout
    assert glob.glob(f"{moddir}/updates/dkms/*") == []
    assert glob.glob("/usr/src/ktcp-*") == []
    assert not os.path.exists("/var/lib/dkms/ktcp")
    assert sh("modinfo -n khttpd", check=False).returncode != 0
