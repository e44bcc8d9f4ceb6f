"""The DKMS package, in the VM (KTCP_ENGINES=kernel): Debian's dkms adds the
package `ktcp` and installs kecho, khttpd and drop_tcp_socket for the running
guest kernel, `modprobe khttpd root=...` serves a file, `modprobe -r` unloads
it, and `make dkms-remove` leaves nothing behind.

The compile step of `dkms build` ran before the boot, on the host, with the
same dkms and the guest kernel's headers (`make dkms-prebuild`, part of
`make check-vm`): under software emulation it takes 12-20 minutes. The guest
adds the package from its own /usr/src, takes those built modules into its
dkms tree and does everything else with dkms itself.

The guest sees the host's files read-only and its /lib/modules/<release> is a
link into the project's kernel cache, so the test gives DKMS the places it
writes (/usr/src, /var/lib/dkms, the module tree) as tmpfs folders that vanish
with the guest: the host and the cache are never written.
"""
import glob
import http.client
import os
import shutil
import subprocess

import pytest

from testlib import ROOT, free_port, require_kind, run, wait_port

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
        for d in ("/usr/src", "/var/lib/dkms"):
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
        sh("modprobe -r khttpd kecho drop_tcp_socket", check=False)
        for d in reversed(mounts):
            sh(f"umount {d}", check=False)
        if os.path.isdir(moddir) and not os.path.islink(moddir):
            shutil.rmtree(moddir)
            os.symlink(lower, moddir)


def test_dkms_install_modprobe_serve_remove(scratch_module_tree, tmp_path):
    rel, moddir = scratch_module_tree
    prebuilt = os.path.join(ROOT, "build", "dkms", rel, "tree", "ktcp", VERSION, rel)
    if not os.path.isdir(os.path.join(prebuilt, "x86_64", "module")):
        pytest.fail(f"no modules built by dkms for {rel} in {prebuilt}: run make dkms-prebuild KERNEL=...")
    sh(f"make -C {ROOT} --no-print-directory dkms-source")
    sh(f"dkms add ktcp/{VERSION}")
    shutil.copytree(prebuilt, f"/var/lib/dkms/ktcp/{VERSION}/{rel}", symlinks=True)
    assert f"ktcp/{VERSION}, {rel}, x86_64: built" in sh("dkms status").stdout
    sh(f"dkms install ktcp/{VERSION} -k {rel}")
    status = sh("dkms status").stdout
    assert f"ktcp/{VERSION}, {rel}, x86_64: installed" in status, status
    installed = sorted(os.path.basename(p) for p in glob.glob(f"{moddir}/updates/dkms/*.ko*"))
    assert [p.split(".")[0] for p in installed] == ["drop_tcp_socket", "kecho", "khttpd"], installed

    docroot = tmp_path / "www"
    docroot.mkdir()
    (docroot / "hello.txt").write_text("served by the dkms-built khttpd\n")
    os.chmod(tmp_path, 0o755)
    port = free_port()
    sh(f"modprobe khttpd root={docroot} port={port}")
    try:
        # modprobe found the DKMS build, not the project's own build tree.
        modinfo = sh("modinfo -n khttpd").stdout.strip()
        assert modinfo.startswith(f"{moddir}/updates/dkms/"), modinfo
        wait_port(port)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/hello.txt")
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.read() == b"served by the dkms-built khttpd\n"
        conn.close()
    finally:
        sh("modprobe -r khttpd")
    assert not os.path.exists("/sys/module/khttpd")

    sh(f"make -C {ROOT} --no-print-directory dkms-remove")
    assert "ktcp" not in sh("dkms status").stdout
    assert glob.glob(f"{moddir}/updates/dkms/*") == []
    assert glob.glob("/usr/src/ktcp-*") == []
    assert not os.path.exists("/var/lib/dkms/ktcp")
    assert sh("modinfo -n khttpd", check=False).returncode != 0
