"""scripts/check-layers: the file-level dependency graph read from object
files. Small components compiled here show that it finds an import circle
(naming the files and the symbols), passes a layered one, and holds the
runtime to itself, its allowed neighbour and its libraries; then the real
user-space build passes it."""
import os
import subprocess
import sys

import pytest

from testlib import BUILD, ROOT

CHECK = os.path.join(ROOT, "scripts", "check-layers")


def compile_component(d, files):
    """files: name -> C source; objects go to d/<name>.o."""
    os.makedirs(d, exist_ok=True)
    for name, src in files.items():
        c = os.path.join(d, name + ".c")
        with open(c, "w") as f:
            f.write(src)
        subprocess.run(["cc", "-c", "-O0", "-o", os.path.join(d, name + ".o"), c], check=True)


def check(*args):
    return subprocess.run([sys.executable, CHECK, *args], capture_output=True, text=True)


LAYERED = {
    "low": "int low(int x) { return x + 1; }\n",
    "mid": "int low(int); int mid(int x) { return low(x) * 2; }\n",
    "top": "int mid(int); int low(int); int top(void) { return mid(1) + low(2); }\n",
}


def test_layered_component_passes(tmp_path):
    compile_component(tmp_path / "app", LAYERED)
    r = check("--component", f"app={tmp_path / 'app'}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "app: 3 files, 3 dependencies, 0 cycles" in r.stdout


def test_cycle_through_three_files_fails(tmp_path):
    files = dict(LAYERED)
    files["low"] = "int top(void); int low(int x) { return x ? top() : 0; }\n"
    compile_component(tmp_path / "app", files)
    r = check("--component", f"app={tmp_path / 'app'}")
    assert r.returncode == 1, r.stdout
    assert "import circle between low, mid, top" in r.stdout
    assert "low -> top: top" in r.stdout
    assert "mid -> low: low" in r.stdout


def test_a_shared_variable_is_a_dependency(tmp_path):
    """A global defined in the top file and read below it (the httpd_cfg
    that made every ktcp-httpd file depend on httpd-conn.c) closes a
    circle."""
    compile_component(tmp_path / "app", {
        "conn": "int cfg; int respond(void); int serve(void) { return respond(); }\n",
        "respond": "extern int cfg; int respond(void) { return cfg; }\n",
    })
    r = check("--component", f"app={tmp_path / 'app'}")
    assert r.returncode == 1
    assert "respond -> conn: cfg" in r.stdout


def test_runtime_uses_only_itself_its_neighbour_and_libraries(tmp_path):
    compile_component(tmp_path / "rt", {
        "core": "#include <string.h>\nint helper(void); "
                "int rt(const char *s) { return (int) strlen(s) + helper(); }\n",
    })
    compile_component(tmp_path / "common", {"net": "int helper(void) { return 1; }\n"})
    compile_component(tmp_path / "app", {"main": "int app_only(void) { return 2; }\n"})
    base = ["--component", f"rt={tmp_path / 'rt'}", "--component", f"common={tmp_path / 'common'}",
            "--component", f"app={tmp_path / 'app'}", "--runtime", "rt", "--lib", "libc.so.6"]
    r = check(*base, "--allow", "common")
    assert r.returncode == 0, r.stdout + r.stderr
    # without its neighbour allowed, helper comes from a component it may not use
    r = check(*base)
    assert r.returncode == 1
    assert "rt: core uses helper from common" in r.stdout
    # a symbol nobody known defines
    compile_component(tmp_path / "rt", {
        "core": "int nowhere(void); int rt(void) { return nowhere(); }\n",
    })
    r = check(*base, "--allow", "common")
    assert r.returncode == 1
    assert "rt: core uses nowhere, which neither rt, common nor libc.so.6 defines" in r.stdout
    # a symbol of an application above it
    compile_component(tmp_path / "rt", {
        "core": "int app_only(void); int rt(void) { return app_only(); }\n",
    })
    r = check(*base, "--allow", "common")
    assert r.returncode == 1
    assert "rt: core uses app_only from app" in r.stdout


def test_user_space_build_is_layered():
    if not os.path.isdir(os.path.join(BUILD, "user", "rt")):
        pytest.fail("build/user is not built (run make)")
    r = check("--no-kernel")
    assert r.returncode == 0, r.stdout + r.stderr
    for comp in ("user/httpd", "user/rt", "user/tls", "user/echo", "user/kcm", "core"):
        assert f"{comp}: " in r.stdout and "0 cycles" in r.stdout
