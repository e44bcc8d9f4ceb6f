"""tools/twins.py, the count of the functions both engines write: it finds
every function it lists (a renamed one fails here, so the list stays
true), and it refuses a tree where one is missing."""
import json
import os
import shutil
import subprocess
import sys

from testlib import ROOT

TWINS = os.path.join(ROOT, "tools", "twins.py")


def twins(*args):
    return subprocess.run([sys.executable, TWINS, *args], capture_output=True,
                          text=True, timeout=60)


def test_every_listed_function_is_found():
    r = twins("--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for p in out["pairs"]:  # a folded pair counts 0 on both sides
        assert (p["kernel"] > 0 and p["user"] > 0) or \
            (p["kernel"] == 0 and p["user"] == 0), p
    assert out["kernel"] == sum(p["kernel"] for p in out["pairs"])
    assert out["user"] == sum(p["user"] for p in out["pairs"])
    table = twins()
    assert table.returncode == 0
    assert table.stdout.split("\n")[-2].split() == [
        "total", str(out["kernel"]), str(out["user"])]


def test_a_renamed_function_is_an_error(tmp_path):
    for d in ("core", "kernel/khttpd", "user/httpd"):
        shutil.copytree(os.path.join(ROOT, d), tmp_path / d)
    conn = tmp_path / "user/httpd/httpd-conn.c"
    text = conn.read_text()
    assert "static int drain_body(" in text
    conn.write_text(text.replace("static int drain_body(",
                                 "static int body_drain(", 1))
    r = twins("--root", str(tmp_path))
    assert r.returncode == 1
    assert "drain_body not found" in r.stderr
    # a folded pair's core function is looked for too
    conn.write_text(text)
    assert twins("--root", str(tmp_path)).returncode == 0
    cache = tmp_path / "core/http_cache.c"
    cache.write_text(cache.read_text().replace(
        "http_cache_acct_published(", "http_cache_acct_free_bytes("))
    r = twins("--root", str(tmp_path))
    assert r.returncode == 1
    assert "http_cache_acct_published not found" in r.stderr


def test_mirrored_lines_are_at_most_half_the_first_count():
    """tools/twins.py's first count (git cdbbd99) was 1,064 lines, kernel
    567 and user 497; the engines now write at most 498 of them twice,
    under half, the rest being core's. A change that writes policy into
    both engines again shows here."""
    out = json.loads(twins("--json").stdout)
    assert out["kernel"] + out["user"] <= 498, (out["kernel"], out["user"])
