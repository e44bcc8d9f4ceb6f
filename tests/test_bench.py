"""The comparison harness (tools/bench) in its smoke profile: host only,
ktcp-httpd-epoll beside a private nginx, one keep-alive workload for half a
second, and 200 idle connections for the memory check. Checks that
results.json, results.md and the PNGs are written and agree with each other:
every ratio is recomputed from the figures in the JSON."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BENCH = os.path.join(TOP, "tools", "bench", "bench.py")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

sys.path.insert(0, os.path.join(TOP, "tools", "bench"))


def _nginx():
    return shutil.which("nginx", path=os.environ.get("PATH", "") + ":/usr/sbin")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    if not os.access(os.path.join(TOP, "build", "ktcp-httpd"), os.X_OK) or \
            not os.access(os.path.join(TOP, "build", "htstress"), os.X_OK):
        pytest.skip("build/ktcp-httpd or build/htstress not built (run make)")
    if not _nginx():
        pytest.skip("nginx not installed (scripts/deps installs it)")
    out = tmp_path_factory.mktemp("bench")
    r = subprocess.run([sys.executable, BENCH, "--profile", "smoke", "--out", str(out)],
                       capture_output=True, text=True, timeout=40, cwd=TOP)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(out / "results.json") as f:
        doc = json.load(f)
    return out, doc, r.stdout


def test_progress_line_per_run(smoke):
    _, doc, stdout = smoke
    lines = [line for line in stdout.splitlines() if line.startswith("bench [")]
    assert len(lines) == len(doc["runs"])
    assert all("ETA" in line or "skipped" in line for line in lines)


def test_json_runs_and_ratios(smoke):
    _, doc, _ = smoke
    assert doc["conditions"]["host"]["kernel"] == os.uname().release
    assert doc["conditions"]["host"]["cores"] == os.cpu_count()
    http = {r["engine"]: r for r in doc["runs"] if r["suite"] == "http"}
    assert set(http) == {"nginx", "ktcp-httpd-epoll"}
    for r in http.values():
        assert r["status"] == "ok", r
        assert r["workload"] == "small-keepalive" and r["keep_alive"] and r["file_size"] == 13
        raw = r["raw"]
        assert r["value"] == raw["req_per_s"] > 0
        assert raw["good"] > 0 and raw["mode"] == "keep-alive"
        assert raw["requests"] == raw["good"] + raw["bad"] + raw["errors"]["total"]
        assert r["bytes_per_response"] == pytest.approx(raw["bytes_read"] / raw["good"])
    nginx = http["nginx"]["value"]
    for r in doc["runs"]:
        if r["status"] != "ok":
            continue
        peer = next(p for p in doc["runs"] if p["engine"] == doc["peers"][r["suite"]] and
                    p["suite"] == r["suite"] and p["workload"] == r["workload"] and
                    p["concurrency"] == r["concurrency"] and p["env"] == r["env"])
        assert r["peer_value"] == peer["value"]
        assert r["ratio"] == pytest.approx(r["value"] / peer["value"], rel=1e-9)
    assert http["ktcp-httpd-epoll"]["ratio"] == pytest.approx(
        http["ktcp-httpd-epoll"]["value"] / nginx)
    assert http["nginx"]["ratio"] == 1.0


def test_memory_check(smoke):
    _, doc, _ = smoke
    mem = {r["engine"]: r for r in doc["runs"] if r["suite"] == "memory"}
    assert set(mem) == {"nginx", "ktcp-httpd-epoll"}
    for r in mem.values():
        m = r["raw"]
        assert r["status"] == "ok"
        assert m["connections_asked"] == 200 and m["connections_idle"] == 200, m
        assert r["value"] == pytest.approx(m["rss_kib"] / 1024)
        assert m["rss_kib"] > 0 and m["hwm_kib"] >= m["rss_kib"]
    assert mem["nginx"]["raw"]["processes"] >= 2  # master and workers counted
    assert mem["ktcp-httpd-epoll"]["raw"]["processes"] == 1


def test_markdown_carries_figures_ratios_and_conditions(smoke):
    out, doc, _ = smoke
    md = (out / "results.md").read_text()
    cond = doc["conditions"]["host"]
    assert cond["kernel"] in md and f"{cond['cores']} cores" in md
    assert cond["loadavg_start"] in md
    for r in doc["runs"]:
        if r["suite"] == "http":
            v = f"{r['value']:,.0f}"
            if r["engine"] == "nginx":
                assert f"| nginx | {v} |" in md
            else:
                assert f"| {r['engine']} | {v} (×{r['ratio']:.2f}) |" in md
        # the every-run table: environment, workload, concurrency, ratio
        row = re.search(rf"\| {r['env']} \| {r['suite']} \| {r['workload']} \| "
                        rf"{re.escape(r['engine'])} \| {r['concurrency']} \|[^\n]*"
                        rf"\| {r['ratio']:.3f} {r['peer']} \|", md)
        assert row, (r["engine"], r["suite"])
    assert "lwan" in md  # skipped with its reason, or measured


def test_pngs_written_and_linked(smoke):
    out, _, _ = smoke
    md = (out / "results.md").read_text()
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", md)
    assert {"latency-http.png", "memory.png"} <= set(linked)
    for name in linked:
        data = (out / name).read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 5000, name


def test_ratio_needs_a_peer_in_the_same_environment():
    import report
    runs = [
        {"env": "host", "suite": "http", "workload": "w", "concurrency": 1, "engine": "nginx",
         "status": "ok", "value": 100.0},
        {"env": "host", "suite": "http", "workload": "w", "concurrency": 1, "engine": "x",
         "status": "ok", "value": 150.0},
        {"env": "vm", "suite": "http", "workload": "w", "concurrency": 1, "engine": "x",
         "status": "ok", "value": 10.0},
        {"env": "host", "suite": "http", "workload": "w", "concurrency": 10, "engine": "nginx",
         "status": "failed", "value": None},
        {"env": "host", "suite": "http", "workload": "w", "concurrency": 10, "engine": "x",
         "status": "ok", "value": 5.0},
    ]
    report.add_ratios(runs)
    assert [r["ratio"] for r in runs] == [1.0, 1.5, None, None, None]
