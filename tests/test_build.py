"""The build: an object depends on the compiler and flags it was built
with (build/gen/flags), so switching LTO off or on, or another CFLAGS,
rebuilds it instead of linking objects built the other way."""
import os
import subprocess

from testlib import ROOT


def make(build, *args):
    r = subprocess.run(["make", "-C", ROOT, "--no-print-directory", f"BUILD={build}", *args],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout


def test_objects_rebuilt_when_flags_change(tmp_path):
    build = str(tmp_path / "build")
    obj = f"{build}/core/http_mime.o"
    compiles = lambda out: [l for l in out.splitlines() if " -c " in l and "http_mime.c" in l]
    assert compiles(make(build, obj))  # first build
    assert not compiles(make(build, obj))  # nothing changed
    out = make(build, obj, "LTO=")
    assert compiles(out) and "-flto" not in compiles(out)[0]
    assert not compiles(make(build, obj, "LTO="))
    assert "-flto" in compiles(make(build, obj))[0]  # back to the default
    assert compiles(make(build, obj, "CFLAGS=-O1 -g"))
    with open(f"{build}/gen/flags") as f:
        assert "-O1" in f.read()


# The coroutine switch (user/rt/rt-switch.c) is hand-written for x86-64 and
# aarch64; elsewhere the build stops and names the ucontext fallback, and
# make RT_CORO=ucontext builds that one. (make check-portable runs the
# runtime's tests and the HTTP suite on the fallback, and the aarch64
# switch under qemu.)
def compile_switch(*flags):
    return subprocess.run(["gcc", "-fsyntax-only", "-Iuser/rt", *flags, "user/rt/rt-switch.c"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_switch_other_architecture_stops_with_the_fallback_named():
    # as a compiler for neither architecture sees the file
    r = compile_switch("-U__x86_64__", "-U__aarch64__")
    assert r.returncode != 0
    assert "#error" in r.stderr and "x86-64 and aarch64" in r.stderr
    assert "make RT_CORO=ucontext" in r.stderr
    # asking for the fallback passes the check (the host's headers then
    # stop the compile: they are x86-64's)
    r = compile_switch("-U__x86_64__", "-U__aarch64__", "-DRT_CORO_UCONTEXT")
    assert "#error" not in r.stderr


def test_unknown_rt_coro_refused(tmp_path):
    r = subprocess.run(["make", "-C", ROOT, "--no-print-directory", f"BUILD={tmp_path}",
                        "RT_CORO=setjmp", f"{tmp_path}/test-rt-switch"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "RT_CORO=setjmp: asm (x86-64, aarch64) or ucontext" in r.stderr


def test_ucontext_switch_builds_and_runs(tmp_path):
    build = str(tmp_path / "build")
    make(build, "RT_CORO=ucontext", f"{build}/test-rt-switch")
    out = subprocess.run([f"{build}/test-rt-switch"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "test-rt-switch: ucontext: 3 coroutines x 2000 rounds\n" in out
    assert ", 0 failed\n" in out, out


def test_aarch64_switch_runs_under_qemu(tmp_path):
    """The cross build (make aarch64-build) of the switch's test and the
    runtime's, with either switch, run under qemu-aarch64."""
    for coro, kind in (("asm", "aarch64"), ("ucontext", "ucontext")):
        build = str(tmp_path / coro)
        r = subprocess.run(["make", "-C", ROOT, "--no-print-directory", "aarch64-build",
                            f"AARCH64_BUILD={build}", f"RT_CORO={coro}", "AARCH64_BINS=test-rt-switch test-rt"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        for name, want in (("test-rt-switch", f"test-rt-switch: {kind}: 3 coroutines x 2000 rounds\n"),
                           ("test-rt", ", 0 failed\n")):
            path = f"{build}/{name}"
            with open(path, "rb") as f:
                assert f.read(20)[18] == 183  # ELF e_machine: EM_AARCH64
            r = subprocess.run(["qemu-aarch64", path], capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stdout + r.stderr
            assert want in r.stdout and ", 0 failed\n" in r.stdout, r.stdout


# make check boots the release kernels only, whatever the cache holds: a
# debug kernel left there (scripts/debug-kernel) must not turn make check
# into the hour-longer check-debug run. CHECK_DEBUG=1 asks for it, and
# asking without the debug kernel built is an error, not a fallback.
def check_plan(cache, *args):
    env = dict(os.environ, KTCP_CACHE=str(cache))
    return subprocess.run(["make", "-C", ROOT, "-s", "--no-print-directory", "check-plan", *args],
                          capture_output=True, text=True, timeout=60, env=env)


def test_check_runs_the_release_kernels_even_with_a_debug_kernel_cached(tmp_path):
    kernels = tmp_path / "kernels"
    (kernels / "debug-6.12.117-ktcp-debug").mkdir(parents=True)
    (kernels / "debug-6.12.117-ktcp-debug" / ".complete").touch()
    (kernels / "debug.current").write_text("6.12.117-ktcp-debug\n")
    r = check_plan(tmp_path)
    assert r.returncode == 0 and r.stdout.split() == ["6.1", "6.12"], r.stdout + r.stderr
    r = check_plan(tmp_path, "CHECK_DEBUG=1")
    assert r.returncode == 0 and r.stdout.split() == ["6.1", "debug", "release:6.12"], r.stdout + r.stderr
    r = check_plan(tmp_path, "CHECK_DEBUG=1", "KERNELS=6.1")
    assert r.returncode == 0 and r.stdout.split() == ["6.1"], r.stdout + r.stderr


def test_check_debug_without_the_debug_kernel_is_an_error(tmp_path):
    r = check_plan(tmp_path, "CHECK_DEBUG=1")
    assert r.returncode != 0 and "scripts/debug-kernel" in r.stderr, r.stdout + r.stderr
    assert check_plan(tmp_path).stdout.split() == ["6.1", "6.12"]
    r = check_plan(tmp_path, "CHECK_DEBUG=yes")
    assert r.returncode != 0 and "0 or 1" in r.stderr, r.stdout + r.stderr
