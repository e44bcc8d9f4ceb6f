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
