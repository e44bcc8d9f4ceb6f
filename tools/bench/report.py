"""Merge the phases of one bench run (<out>/host.json, <out>/vm.json) into
results.json, results.md and PNG plots; publish a run to docs/bench/ and
BENCHMARKS.md.

Every figure gets its ratio to the peer measured in the same environment at
the same point (plan.PEERS): nginx for HTTP and memory, ktcp-echo for the
echo bench (nginx does not echo), the TCP loopback floor for lat.

A point measured in rounds (merge_rounds) keeps every round: its figure is
the median of the rounds that succeeded, its spread the largest distance
of a round from that median in % of it (shown as ±), its ratio the median
over the peer's median, and ratio_min/ratio_max the range of the per-round
ratios (each round against the peer's figure of the same round)."""
import json
import os
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plan  # noqa: E402

# matplotlib is imported by make_plots() only: the VM phase imports this
# module to merge its rounds, and the import costs seconds under emulation.
plt = None


def _pyplot():
    global plt
    if plt is None:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot
        plt = matplotlib.pyplot
    return plt

ENV_ORDER = ("host", "vm")
ENGINE_ORDER = ["nginx", "nginx-tls", "nginx-ktls", "floor", "lwan", "ktcp-httpd-threads",
                "ktcp-httpd-epoll", "ktcp-httpd-epoll-tls", "ktcp-httpd-mn", "ktcp-httpd-mn-tls",
                "khttpd-unbound", "khttpd-unbound-tls", "khttpd-bound", "khttpd-kthread",
                "ktcp-echo",
                "kecho-unbound", "kecho-bound", "kecho-highpri", "kecho-cpu_intensive",
                "pipe", "unix", "tcp-loopback"]
COLORS = {"nginx": "black", "floor": "tab:green", "lwan": "grey", "ktcp-httpd-threads": "tab:olive",
          "ktcp-httpd-epoll": "tab:blue", "ktcp-httpd-mn": "tab:cyan",
          "khttpd-unbound": "tab:red", "khttpd-bound": "tab:orange",
          "khttpd-kthread": "tab:brown", "ktcp-echo": "tab:blue", "kecho-unbound": "tab:red",
          "kecho-bound": "tab:orange", "kecho-highpri": "tab:purple",
          "kecho-cpu_intensive": "tab:pink"}


def order_key(name):
    base = name.split(":", 1)[-1]
    return (name.startswith("echo:"), ENGINE_ORDER.index(base) if base in ENGINE_ORDER else 99,
            name)


def point(r):
    return (r["env"], r["suite"], r["workload"], r["concurrency"])


# What a round's record holds beside the run's plan (kept per round).
ROUND_KEYS = ("status", "reason", "note", "value", "unit", "raw", "latency_us", "errors",
              "mib_per_s", "bytes_per_response", "samples", "time_wait_before",
              "time_wait_dropped", "elapsed_s", "aim_mib", "tls", "warmed_up_s")


def merge_rounds(records):
    """One record per point and engine from the records of its rounds, in
    the order each point first appears. by_round keeps every round (its
    status, figure, tool output), values the rounds' figures (None for a
    round that did not succeed). value is the median of the rounds that
    succeeded, min/max their range, spread_pct the largest distance of a
    round from the median in % of it; the fields a table shows besides
    (latency, errors, the tool's output) come from the round nearest the
    median. A crash, failure or error in any round is the point's result
    (status and reason of the first such round); skipped rounds (time
    budget) only lower rounds_ok. A record without a round is round 1 of 1."""
    groups = {}
    for r in records:
        key = (r["env"], r["suite"], r["workload"], r["engine"], r["concurrency"])
        groups.setdefault(key, []).append(r)
    out = []
    for rs in groups.values():
        rs = sorted(rs, key=lambda r: r.get("round", 1))
        agg = {k: v for k, v in rs[0].items() if k not in ROUND_KEYS and k != "round"}
        agg["rounds_planned"] = rs[0].get("rounds_planned", 1)
        agg["by_round"] = [dict({k: r[k] for k in ROUND_KEYS if k in r}, round=r.get("round", 1))
                           for r in rs]
        ok = [r for r in rs if r.get("status") == "ok"]
        bad = [r for r in rs if r.get("status") not in ("ok", "skipped")]
        agg["values"] = [r["value"] if r.get("status") == "ok" else None for r in rs]
        agg["rounds_ok"] = len(ok)
        agg["elapsed_s"] = round(sum(r.get("elapsed_s", 0) for r in rs), 3)
        if ok:
            vals = [r["value"] for r in ok]
            med = statistics.median(vals)
            rep = min(ok, key=lambda r: (abs(r["value"] - med), r["value"]))
            agg.update({k: rep[k] for k in ROUND_KEYS if k in rep and k != "elapsed_s"})
            agg.update(value=med, min=min(vals), max=max(vals),
                       spread_pct=100 * max(max(vals) - med, med - min(vals)) / med if med
                       else 0.0)
            if len(ok) > 1 and all("mib_per_s" in r for r in ok):
                agg["mib_per_s"] = statistics.median(r["mib_per_s"] for r in ok)
        else:
            agg.update(value=None, min=None, max=None, spread_pct=None,
                       unit=next((r["unit"] for r in rs if "unit" in r), ""))
        if bad:
            b = bad[0]
            why = b.get("reason", "")
            if len(rs) > 1:
                why = f"round {b.get('round', 1)} of {len(rs)}: {why}"
            agg.update(status=b["status"], reason=why)
        elif ok:
            agg["status"] = "ok"
            if len(ok) < len(rs):
                agg["note"] = (agg.get("note", "") + "; " if agg.get("note") else "") + \
                    f"{len(ok)} of {len(rs)} rounds (time budget)"
        else:
            agg.update(status="skipped", reason=rs[0].get("reason", "skipped"))
        out.append(agg)
    return out


def add_ratios(runs):
    """ratio = value / value of the peer at the same point, both ok: for
    points in rounds, the median over the peer's median. ratio_rounds are
    the per-round ratios (a round against the peer's same round, both ok),
    ratio_min/ratio_max their range."""
    peers = {}
    for r in runs:
        if r.get("status") == "ok" and r["engine"] == plan.PEERS[r["suite"]]:
            peers[point(r)] = r
    for r in runs:
        peer = plan.PEERS[r["suite"]]
        r["peer"] = peer
        p = peers.get(point(r))
        pv = p["value"] if p else None
        r["ratio_rounds"], r["ratio_min"], r["ratio_max"] = [], None, None
        if r.get("status") == "ok" and pv:
            r["peer_value"] = pv
            r["ratio"] = r["value"] / pv
            mine = {x["round"]: x for x in r.get("by_round", [])}
            for x in p.get("by_round", []):
                y = mine.get(x["round"])
                if y and x.get("status") == y.get("status") == "ok" and x["value"]:
                    r["ratio_rounds"].append(y["value"] / x["value"])
            if r["ratio_rounds"]:
                r["ratio_min"], r["ratio_max"] = min(r["ratio_rounds"]), max(r["ratio_rounds"])
        else:
            r["peer_value"] = None
            r["ratio"] = None


def add_floor_ratios(runs):
    """floor_ratio = value / the floor's value at the same HTTP point (the
    medians), for the workloads the floor serves: how far each engine's
    throughput is from the least a server can do."""
    floors = {point(r): r for r in runs if r["suite"] == "http" and
              r["engine"] == plan.FLOOR and r.get("status") == "ok"}
    for r in runs:
        f = floors.get(point(r)) if r["suite"] == "http" else None
        r["floor_ratio"] = (r["value"] / f["value"] if f and f["value"] and
                            r.get("status") == "ok" and r["engine"] != plan.FLOOR else None)


def fmt_v(v):
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def status_text(r, width=60):
    """A run that is not ok, as its table cell: 'skipped', 'crashed', or
    'error: <reason>' (an engine's crash or error is a result, shown where
    its figure would be)."""
    st = r.get("status", "?")
    if st in ("skipped", "crashed"):
        return st
    why = " ".join(str(r.get("reason", "")).split()).replace("|", "/")
    if len(why) > width:
        why = why[:width - 1] + "…"
    return f"error: {why}" if why else "error"


def spread_text(r):
    """' ±4%' for a figure from two rounds or more, else ''."""
    if r.get("rounds_ok", 1) > 1 and r.get("spread_pct") is not None:
        return f" ±{r['spread_pct']:.0f}%"
    return ""


def ratio_text(r):
    """'×1.23' and, from two rounds or more, the per-round range: '×1.23, 1.10–1.31'."""
    s = f"×{r['ratio']:.2f}"
    if len(r.get("ratio_rounds") or []) > 1:
        s += f", {r['ratio_min']:.2f}–{r['ratio_max']:.2f}"
    return s


def cell(r, with_ratio=True):
    if r is None:
        return "-"
    if r.get("status") != "ok":
        return status_text(r)
    s = fmt_v(r["value"]) + spread_text(r)
    if with_ratio and r.get("ratio") is not None and r["engine"] != r["peer"]:
        s += f" ({ratio_text(r)})"
    if with_ratio and r.get("floor_ratio") is not None:
        s += f" [floor ×{r['floor_ratio']:.2f}]"
    return s


def cond_line(c):
    where = c["where"]
    if c.get("vm_mode"):
        where += f", {c['vm_mode']}"
    load = f"load average {c['loadavg_start']} → {c.get('loadavg_end', '?')}"
    if c.get("host_loadavg_start"):
        load = (f"guest {load}, host load average {c['host_loadavg_start']} → "
                f"{c.get('host_loadavg_end', '?')} meanwhile")
    return (f"{where}; kernel {c['kernel']}; {c['cores']} cores ({c['cpu']}); {load}; "
            f"{c.get('nginx', 'nginx ?')}")


def write(out, meta):
    docs = {}
    for env in ENV_ORDER:
        p = os.path.join(out, f"{env}.json")
        if os.path.exists(p):
            with open(p) as f:
                docs[env] = json.load(f)
    runs = [r for env in docs for r in docs[env]["runs"]]
    add_ratios(runs)
    add_floor_ratios(runs)
    result = {"schema": 1, "meta": meta,
              "conditions": {env: d["conditions"] for env, d in docs.items()},
              "skipped_engines": {env: d["skipped"] for env, d in docs.items()},
              "peers": plan.PEERS, "runs": runs}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    plots = make_plots(out, docs, runs)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(markdown(result, docs, runs, plots))
    return result


# ---------------------------------------------------------------- Markdown

HOW_TO_READ = (
    "Ratios (×) compare with the peer measured in the same environment at the same point, "
    "seconds apart: HTTP and memory against **nginx**, the echo bench against **ktcp-echo** "
    "(nginx does not echo), lat against the **TCP loopback** floor. An HTTP figure on the "
    "floor server's workloads (13 B keep-alive and close, 1 MiB) also has [floor ×r]: its "
    "throughput over that of tools/floor.c, the least a server can do, at the same point. "
    "An HTTP or echo point "
    "runs in rounds, the engines alternating within each round (the order rotated by one "
    "each round); a figure is the median of its rounds ± the largest distance of a round "
    "from that median (in % of it), its ratio the median over the peer's median, followed "
    "by the range of the per-round ratios (each round against the peer's same round). "
    "lat and memory points run once. Throughput: higher is better; latency and memory: "
    "lower is better. Load generators run on the same cores as the servers (127.0.0.1).")


def rounds_of(rs):
    """', median of 3 rounds' when the records ran in rounds."""
    n = max((r.get("rounds_planned", 1) for r in rs), default=1)
    return f", median of {n} rounds" if n > 1 else ""


def markdown(result, docs, runs, plots):
    meta = result["meta"]
    L = [f"# ktcp bench — {meta['started']} (profile `{meta['profile']}`)", ""]
    L.append(f"Command: `{meta['command']}` (git `{meta.get('git', '?')}`), "
             f"{meta['seconds']:.0f} s wall clock; host load average "
             f"{meta['host_loadavg_start']} at the start, {meta['host_loadavg_end']} at the end.")
    L.append("")
    L.append(HOW_TO_READ)
    L.append("")
    L.append("## Conditions")
    L.append("")
    for env, d in docs.items():
        L.append(f"- **{env}**: {cond_line(d['conditions'])}; phase took "
                 f"{d['conditions'].get('seconds', '?')} s")
    for env, why in meta.get("envs_skipped", {}).items():
        L.append(f"- **{env}**: not run — {why}")
    L.append("")
    for env, d in docs.items():
        c = d["conditions"]
        er = [r for r in runs if r["env"] == env]
        tag = f"{env}, kernel {c['kernel']}, {c['cores']} cores"
        L.append(f"## {env}")
        L.append("")
        L += http_tables(er, tag)
        L += https_table(er, tag)
        L += echo_table(er, tag)
        L += lat_table(er, tag)
        L += memory_table(er, tag)
        checks = c.get("checks") or {}
        for name, bad in checks.items():
            for wl, why in bad.items():
                L.append(f"- {name} does not serve `{wl}` correctly, its runs are not counted: "
                         f"{why}")
        if checks:
            L.append("")
    skipped = [(env, s) for env, d in docs.items() for s in d["skipped"]]
    notok = [r for r in runs if r.get("status") != "ok"]
    if skipped or notok:
        L.append("## Not measured")
        L.append("")
        for env, s in skipped:
            L.append(f"- {env}: **{s['engine']}** skipped: {s['reason']}")
        for r in notok:
            L.append(f"- {r['env']}: {r['suite']} {r['workload']} c={r['concurrency']} "
                     f"**{r['engine']}**: {r.get('status')}: {r.get('reason', '')}")
        L.append("")
    if plots:
        L.append("## Plots")
        L.append("")
        for p, title in plots:
            L.append(f"![{title}]({p})")
            L.append("")
    L.append("## Every run")
    L.append("")
    L.append("| env | suite | workload | engine | conc. | keep-alive | file | value (median) | "
             "rounds | unit | × peer | per-round × | p50 µs | p99 µs | errors | seconds |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        lat = r.get("latency_us") or {}
        ka = {True: "yes", False: "no"}.get(r.get("keep_alive"), "")
        size = r.get("file_size")
        size = "" if size is None else (f"{size} B" if size < 1024 else
                                         f"{size // 1024} KiB" if size < 1 << 20 else
                                         f"{size >> 20} MiB")
        ratio = f"{r['ratio']:.3f} {r['peer']}" if r.get("ratio") is not None else "-"
        val = fmt_v(r.get("value")) if r.get("status") == "ok" else status_text(r)
        vals = ", ".join("-" if v is None else fmt_v(v) for v in r.get("values", []))
        per = ", ".join(f"{x:.2f}" for x in r.get("ratio_rounds") or [])
        L.append(f"| {r['env']} | {r['suite']} | {r['workload']} | {r['engine']} | "
                 f"{r['concurrency']} | {ka} | {size} | {val} | {vals} | {r.get('unit', '')} | "
                 f"{ratio} | {per} | "
                 f"{fmt_v(lat.get('p50'))} | {fmt_v(lat.get('p99'))} | {r.get('errors', '')} | "
                 f"{r.get('elapsed_s', '')} |")
    L.append("")
    return "\n".join(L)


def engines_of(rs):
    return sorted({r["engine"] for r in rs}, key=order_key)


def http_tables(er, tag):
    L = []
    hr = [r for r in er if r["suite"] == "http"]
    for wl in ("small-keepalive", "small-close"):
        rs = [r for r in hr if r["workload"] == wl]
        if not rs:
            continue
        levels = sorted({r["concurrency"] for r in rs})
        label = plan.HTTP_WORKLOADS[wl][4]
        L.append(f"### HTTP {label}: req/s (× nginx) [× floor] — {tag}, {rs[0]['duration']} s per "
                 f"run{rounds_of(rs)}")
        L.append("")
        L.append("| engine | " + " | ".join(f"{c} conn." for c in levels) + " | p99 µs at "
                 f"{levels[-1]} |")
        L.append("|---|" + "---|" * (len(levels) + 1))
        for name in engines_of(rs):
            by_c = {r["concurrency"]: r for r in rs if r["engine"] == name}
            last = by_c.get(levels[-1])
            p99 = fmt_v(last["latency_us"]["p99"]) if last and last.get("status") == "ok" else "-"
            L.append(f"| {name} | " + " | ".join(cell(by_c.get(c)) for c in levels) +
                     f" | {p99} |")
        L.append("")
    rs = [r for r in hr if r["workload"] not in ("small-keepalive", "small-close")]
    if rs:
        c = rs[0]["concurrency"]
        wls = [w for w in plan.HTTP_WORKLOADS if any(r["workload"] == w for r in rs)]
        L.append(f"### HTTP other workloads: req/s (× nginx) [× floor] — {tag}, keep-alive, {c} "
                 f"connections, {rs[0]['duration']} s per run{rounds_of(rs)}")
        L.append("")
        L.append("| engine | " + " | ".join(plan.HTTP_WORKLOADS[w][4] for w in wls) + " |")
        L.append("|---|" + "---|" * len(wls))
        for name in engines_of(rs):
            cells = []
            for w in wls:
                r = next((x for x in rs if x["engine"] == name and x["workload"] == w), None)
                s = cell(r)
                if r and r.get("status") == "ok" and w in ("1mib", "gzip", "listing"):
                    s += (f"; {r['mib_per_s']:.0f} MiB/s" if w == "1mib" else
                          f"; {r['bytes_per_response']:.0f} B/resp")
                cells.append(s)
            L.append(f"| {name} | " + " | ".join(cells) + " |")
        L.append("")
    return L


def _https_ratio(r, ref):
    """' ×1.23 nginx-ktls': r's median over ref's median at the same point."""
    if not r or not ref or r.get("status") != "ok" or ref.get("status") != "ok" or \
            r["engine"] == ref["engine"] or not ref["value"]:
        return ""
    return f"×{r['value'] / ref['value']:.2f} {ref['engine']}"


# (what is compared, engines, workloads, the reference, the target ratio):
# the HTTPS targets, each checked at every point where both were measured
HTTPS_TARGETS = (
    ("ktcp-httpd on keep-alive", ("ktcp-httpd-epoll-tls", "ktcp-httpd-mn-tls"),
     ("https-small-keepalive",), "nginx-tls", 1.2),
    ("ktcp-httpd on 1 MiB", ("ktcp-httpd-epoll-tls", "ktcp-httpd-mn-tls"),
     ("https-1mib",), "nginx-ktls", 1.0),
    ("ktcp-httpd on new connections", ("ktcp-httpd-epoll-tls", "ktcp-httpd-mn-tls"),
     ("https-handshake",), "nginx-tls", 1.0),
    ("khttpd on keep-alive", ("khttpd-unbound-tls",), ("https-small-keepalive",),
     "nginx-ktls", 1.3),
)
# (what, engines, the references, first found): KiB per idle TLS
# connection, at most the reference's (lower is better)
HTTPS_MEMORY_TARGETS = (
    ("ktcp-httpd idle TLS memory", ("ktcp-httpd-epoll-tls", "ktcp-httpd-mn-tls"),
     ("nginx-ktls", "nginx-tls")),
)


def https_targets(rs):
    """The HTTPS targets at each point: 'holds' or 'misses', with the ratio.
    Where the guest's nginx-ktls is absent (the host: no tls ULP, every
    record OpenSSL's) nginx-tls stands in for it."""
    L = []
    for what, names, wls, ref_name, want in HTTPS_TARGETS:
        for wl in wls:
            for r in [x for x in rs if x["workload"] == wl and x["engine"] in names]:
                pts = [x for x in rs if x["workload"] == wl and
                       x["concurrency"] == r["concurrency"]]
                ref = next((x for x in pts if x["engine"] == ref_name), None) or \
                    next((x for x in pts if x["engine"] == "nginx-tls"), None)
                if not ref or r.get("status") != "ok" or ref.get("status") != "ok":
                    continue
                ratio = r["value"] / ref["value"]
                L.append(f"- {what}, {r['engine']} at {r['concurrency']} conn.: "
                         f"×{ratio:.2f} {ref['engine']} (target ≥ {want}): "
                         f"**{'holds' if ratio >= want else 'misses'}**")
    mem = [x for x in rs if x["suite"] == "https-memory" and x.get("status") == "ok"]
    for what, names, ref_names in HTTPS_MEMORY_TARGETS:
        ref = next((x for n in ref_names for x in mem if x["engine"] == n), None)
        for r in (x for x in mem if x["engine"] in names and ref):
            # the host's slab is the whole shared machine's: RSS alone there
            key = "rss_per_conn_kib" if r["env"] == "host" else "total_per_conn_kib"
            v, rv = r["raw"][key], ref["raw"][key]
            L.append(f"- {what}, {r['engine']}: {v:.1f} KiB/conn against {rv:.1f} of "
                     f"{ref['engine']} ({'RSS' if r['env'] == 'host' else 'RSS + slab'}; "
                     f"target ≤): **{'holds' if v <= rv else 'misses'}**")
    return L


def https_table(er, tag, targets_inline=False):
    """The HTTPS points: one row per engine, one column per point, each a
    median ± spread with its ratio to nginx-tls (records by OpenSSL) and,
    in the guest, to nginx-ktls (records by the kernel); then the targets,
    a list or (targets_inline) one paragraph."""
    rs = [r for r in er if r["suite"] == "https"]
    if not rs and not any(r["suite"] == "https-memory" for r in er):
        return []
    cols = [(w, c) for w in plan.HTTPS_WORKLOADS
            for c in sorted({r["concurrency"] for r in rs if r["workload"] == w})]
    tls = next((x["tls"] for r in rs if r["workload"] == "https-handshake"
                for x in r.get("by_round", []) if x.get("tls", {}).get("version")), None)
    per_run = f"{rs[0]['duration'] if rs else '-'} s per run"
    # points that run longer than the rest (plan.HTTPS_LONGER) are named in
    # the head
    kinds = {}
    for r in rs:
        kinds.setdefault(plan.https_point_kind(r["workload"], r["concurrency"]),
                         set()).add(r["duration"])
    rest = kinds.pop(None, set())
    longer = [(n, next(iter(kinds[k]))) for k, (_, n) in plan.HTTPS_LONGER.items()
              if len(kinds.get(k, ())) == 1 and kinds[k] != rest]
    if len(rest) == 1 and longer:
        if len({d for _, d in longer}) == 1:
            names = [n for n, _ in longer]
            names = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
            what = f"{longer[0][1]} s for {names}"
        else:
            what = ", ".join(f"{d} s for {n}" for n, d in longer)
        per_run = f"{next(iter(rest))} s per run ({what})"
    L = [f"### HTTPS: req/s (× nginx over TLS) — {tag}, "
         f"{per_run}{rounds_of(rs) if rs else ''}", ""]
    heads = {"https-small-keepalive": "13 B keep-alive, {c} conn.",
             "https-1mib": "1 MiB keep-alive, {c} conn.",
             "https-handshake": "new connections/s (full handshake), {c} conn."}
    mem = [r for r in er if r["suite"] == "https-memory"]
    # Idle memory is one more column (RSS + slab = together, held), not a
    # table of its own: a table per environment stays short.
    mem_head = [f"idle KiB/conn, RSS + slab, {mem[0]['concurrency']:,} conn."] if mem else []
    L.append("| engine | " + " | ".join([heads[w].format(c=c) for w, c in cols] + mem_head)
             + " |")
    L.append("|---|" + "---|" * (len(cols) + len(mem_head)))
    for name in engines_of(rs + mem):
        cells = []
        for w, c in cols:
            pts = [r for r in rs if r["workload"] == w and r["concurrency"] == c]
            r = next((x for x in pts if x["engine"] == name), None)
            s = cell(r, with_ratio=False)
            if r and r.get("status") == "ok":
                ratios = [ratio_text(r) + f" {r['peer']}"] \
                    if r.get("ratio") is not None and r["engine"] != r["peer"] else []
                kt = _https_ratio(r, next((x for x in pts
                                           if x["engine"] == plan.HTTPS_KTLS_PEER), None))
                ratios += [kt] if kt else []
                s += f" ({'; '.join(ratios)})" if ratios else ""
            if r and r.get("status") == "ok" and w == "https-1mib":
                s += f"; {r['mib_per_s']:.0f} MiB/s"
            if r and r.get("status") == "ok" and r.get("tls_version") != \
                    plan.HTTPS_WORKLOADS[w][3]:
                s += f"; TLS {r['tls_version']}"
            cells.append(s)
        if mem:
            r = next((x for x in mem if x["engine"] == name), None)
            if r is None:
                cells.append("-")
            elif r.get("status") != "ok":
                cells.append(status_text(r))
            else:
                m = r["raw"]
                cells.append(f"{m['rss_per_conn_kib']:.1f} + {m['slab_per_conn_kib']:.1f} = "
                             f"{cell(r)}; {m['connections_idle']:,} held")
        L.append(f"| {name} | " + " | ".join(cells) + " |")
    L.append("")
    first = any(x.get("raw", {}).get("connect_first") for r in er
                for x in r.get("by_round", []))
    warm = next((x["warmed_up_s"] for r in er for x in r.get("by_round", [])
                 if x.get("warmed_up_s")), None)
    if tls:
        L.append(f"New connections: {tls['version']}, {tls['cipher']}, key exchange "
                 f"{tls['group']}, no session resumed (htstress counts them: 0). Keep-alive "
                 f"and 1 MiB: TLS 1.2 (both directions in kTLS where the kernel has it)"
                 + (", every connection open and its handshake done before the clock "
                    "starts (htstress --connect-first)" if first else "")
                 + (f"; each engine's first HTTPS run after an untimed {warm:g} s one."
                    if warm else ".")
                 + (" Idle: TLS 1.2 keep-alive connections that each served one request,"
                    " KiB per connection (the server's RSS growth + the kernel's slab"
                    " growth) and how many stayed open." if mem else ""))
        L.append("")
    targets = https_targets(rs + mem)
    if targets and targets_inline:
        L += ["HTTPS targets (median of the rounds): "
              + "; ".join(t[2:] for t in targets) + ".", ""]
    elif targets:
        L += ["HTTPS targets (median of the rounds):", ""] + targets + [""]
    return L


def echo_table(er, tag):
    rs = [r for r in er if r["suite"] == "echo"]
    if not rs:
        return []
    levels = sorted({r["concurrency"] for r in rs})
    L = [f"### Echo bench: req/s (× ktcp-echo) — {tag}, clients released together, "
         f"1..1024-byte messages{rounds_of(rs)}", "",
         "| engine | " + " | ".join(f"{c} clients × {next(r['rounds'] for r in rs if r['concurrency'] == c)} messages"
                                   for c in levels) + f" | p99 µs at {levels[-1]} |",
         "|---|" + "---|" * (len(levels) + 1)]
    for name in engines_of(rs):
        by_c = {r["concurrency"]: r for r in rs if r["engine"] == name}
        last = by_c.get(levels[-1])
        p99 = fmt_v(last["latency_us"]["p99"]) if last and last.get("status") == "ok" else "-"
        L.append(f"| {name} | " + " | ".join(cell(by_c.get(c)) for c in levels) + f" | {p99} |")
    L.append("")
    return L


def lat_table(er, tag):
    rs = [r for r in er if r["suite"] == "lat"]
    if not rs:
        return []
    L = [f"### Round-trip floors (lat, 1 byte): µs (p50 × TCP loopback p50) — {tag}", "",
         "| path | pinning | count | p50 µs | p99 µs | min µs |", "|---|---|---|---|---|---|"]
    for r in sorted(rs, key=lambda r: order_key(r["engine"])):
        if r.get("status") != "ok":
            L.append(f"| {r['engine']} | | | {status_text(r)} | | |")
            continue
        lat = r["latency_us"]
        L.append(f"| {r['engine']} | {r['raw']['pinning']} | {r['raw']['count']} | {cell(r)} | "
                 f"{fmt_v(lat['p99'])} | {fmt_v(lat['min'])} |")
    L.append("")
    return L


def mem_cell(r):
    s = f"{r['value']:.1f} MiB"
    if r.get("ratio") is not None and r["engine"] != r["peer"]:
        s += f" (×{r['ratio']:.2f})"
    return s


def kernel_memory_table(rs, tag):
    """The VM's memory runs: kernel and user servers, slab and RSS."""
    n = rs[0]["concurrency"]
    L = [f"### Memory: {n} idle connections, kernel slab + server RSS — {tag}", "",
         "Per connection held: the guest's /proc/meminfo Slab growth (the server's and the "
         "client's sockets, a kernel server's connections) plus the server processes' VmRSS "
         "growth; the client runs in the same guest, so its sockets count for every engine "
         "alike. kecho: echo connections after one message each.", "",
         "| engine | idle conns held | Slab growth | RSS growth | slab / conn | RSS / conn | "
         "slab + RSS / conn (× nginx) | slabinfo objects / conn |",
         "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rs, key=lambda r: order_key(r["engine"])):
        if r.get("status") != "ok":
            L.append(f"| {r['engine']} | {status_text(r)} | | | | | | |")
            continue
        m = r["raw"]
        ratio = f" (×{r['ratio']:.2f})" if r.get("ratio") is not None and \
            r["engine"] != r["peer"] else ""
        L.append(f"| {r['engine']} | {m['connections_idle']} | "
                 f"{(m['slab_kib'] - m['slab_before_kib']) / 1024:.1f} MiB | "
                 f"{(m['rss_kib'] - m['rss_before_kib']) / 1024:.1f} MiB | "
                 f"{m['slab_per_conn_kib']:.2f} KiB | {m['rss_per_conn_kib']:.2f} KiB | "
                 f"{r['value']:.2f} KiB{ratio} | {m['slabinfo_per_conn_kib']:.2f} KiB |")
    L.append("")
    return L


def memory_table(er, tag):
    rs = [r for r in er if r["suite"] == "memory"]
    kernel = [r for r in rs if r["workload"] == "idle"]
    rs = [r for r in rs if r["workload"] != "idle"]
    if kernel:
        return kernel_memory_table(kernel, tag)
    if not rs:
        return []
    n = rs[0]["concurrency"]
    L = [f"### Memory: {n} idle keep-alive connections — {tag}; aim: at most 64 MiB RSS", "",
         "| engine | processes | idle conns held | VmRSS before | VmRSS with them (× nginx) | "
         "VmHWM | PSS with them | per connection (RSS) | within 64 MiB |",
         "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rs, key=lambda r: order_key(r["engine"])):
        if r.get("status") != "ok":
            L.append(f"| {r['engine']} | {status_text(r)} | | | | | | | |")
            continue
        m = r["raw"]
        L.append(f"| {r['engine']} | {m['processes']} | {m['connections_idle']} | "
                 f"{m['rss_before_kib'] / 1024:.1f} MiB | {mem_cell(r)} | "
                 f"{m['hwm_kib'] / 1024:.1f} MiB | {m.get('pss_kib', 0) / 1024:.1f} MiB | "
                 f"{m['rss_per_conn_kib']:.2f} KiB | "
                 f"{'yes' if r['value'] <= 64 else 'no'} |")
    L.append("")
    return L


# ---------------------------------------------------------------- plots

def panels(docs, rs):
    """One panel per environment that has data in rs."""
    envs = [e for e in ENV_ORDER if e in docs and any(r["env"] == e for r in rs)]
    fig, axes = plt.subplots(1, len(envs), figsize=(6.2 * len(envs), 4.6), squeeze=False)
    return envs, fig, axes[0]


def env_title(docs, env):
    c = docs[env]["conditions"]
    where = "host" if env == "host" else f"VM ({c.get('vm_mode', 'QEMU')})"
    return f"{where}, kernel {c['kernel']}, {c['cores']} cores, load {c['loadavg_start'].split()[0]}"


def save(fig, out, name, title, plots):
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=100)
    plt.close(fig)
    plots.append((name, title))


def sweep_plot(out, docs, runs, suite, workload, name, title, ylabel, plots,
               xlabel="concurrency (connections, log)"):
    rs = [r for r in runs if r["suite"] == suite and r["workload"] == workload and
          r.get("status") == "ok"]
    # a sweep needs two points in some environment
    rs = [r for r in rs if len({x["concurrency"] for x in rs if x["env"] == r["env"]}) > 1]
    if not rs:
        return
    envs, fig, axes = panels(docs, rs)
    for ax, env in zip(axes, envs):
        er = [r for r in rs if r["env"] == env]
        for eng in engines_of(er):
            pts = sorted((r["concurrency"], r["value"], r.get("min"), r.get("max"))
                         for r in er if r["engine"] == eng)
            if all(p[2] is not None and p[3] is not None for p in pts):
                # the rounds' range around the median
                ax.errorbar([p[0] for p in pts], [p[1] for p in pts],
                            yerr=[[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]],
                            fmt="none", ecolor=COLORS.get(eng), capsize=3, alpha=0.6)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=eng,
                    color=COLORS.get(eng), linewidth=2.4 if eng == "nginx" else 1.5,
                    linestyle="--" if eng == "nginx" else "-")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(env_title(docs, env), fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        if er:
            ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    save(fig, out, name, title, plots)


def ratio_bars(out, docs, runs, plots):
    rs = [r for r in runs if r["suite"] == "http" and r.get("status") == "ok" and
          r["workload"] not in ("small-keepalive", "small-close")]
    if not rs:
        return
    envs, fig, axes = panels(docs, rs)
    for ax, env in zip(axes, envs):
        er = [r for r in rs if r["env"] == env]
        wls = [w for w in plan.HTTP_WORKLOADS if any(r["workload"] == w for r in er)]
        names = [n for n in engines_of(er)]
        width = 0.8 / max(1, len(names))
        for j, n in enumerate(names):
            xs, ys = [], []
            for i, w in enumerate(wls):
                r = next((x for x in er if x["engine"] == n and x["workload"] == w), None)
                if r and r.get("ratio") is not None:
                    xs.append(i + (j - (len(names) - 1) / 2) * width)
                    ys.append(r["ratio"])
            bars = ax.bar(xs, ys, width, label=n, color=COLORS.get(n))
            for b, y in zip(bars, ys):
                ax.text(b.get_x() + b.get_width() / 2, y, f"{y:.2f}" if y < 10 else f"{y:.0f}",
                        ha="center", va="bottom", fontsize=6)
        labels = []
        for w in wls:
            ng = next((x for x in er if x["engine"] == "nginx" and x["workload"] == w), None)
            labels.append(plan.HTTP_WORKLOADS[w][4].split(",")[0] +
                          (f"\nnginx {fmt_v(ng['value'])} req/s" if ng else ""))
        ax.set_xticks(range(len(wls)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.axhline(1.0, color="black", linewidth=1)
        ax.set_yscale("log")
        ax.set_ylabel("throughput ÷ nginx (same run, log)")
        ax.set_title(env_title(docs, env) + f", keep-alive, {er[0]['concurrency'] if er else '?'} "
                     "conn.", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        if names:
            ax.legend(fontsize=7)
    title = "1 MiB file, directory listing, gzip: throughput relative to nginx"
    save(fig, out, "throughput-other.png", title, plots)


def latency_bars(out, docs, runs, plots):
    rs = [r for r in runs if r["suite"] == "http" and r["workload"] == "small-keepalive" and
          r.get("status") == "ok"]
    if not rs:
        return
    envs, fig, axes = panels(docs, rs)
    for ax, env in zip(axes, envs):
        er = [r for r in rs if r["env"] == env]
        if not er:
            continue
        c = max(x for x in {r["concurrency"] for r in er} if x <= 100) if any(
            r["concurrency"] <= 100 for r in er) else min(r["concurrency"] for r in er)
        er = [r for r in er if r["concurrency"] == c]
        names = engines_of(er)
        pcts = ("p50", "p90", "p99", "p99_9")
        width = 0.8 / len(pcts)
        for j, p in enumerate(pcts):
            ax.bar([i + (j - 1.5) * width for i in range(len(names))],
                   [next(r for r in er if r["engine"] == n)["latency_us"][p] for n in names],
                   width, label=p.replace("_", "."))
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, fontsize=8, rotation=20)
        ax.set_yscale("log")
        ax.set_ylabel("request latency (µs, log)")
        ax.set_title(env_title(docs, env) + f", {c} conn.", fontsize=9)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
    title = "HTTP 13-byte file, keep-alive: latency percentiles"
    save(fig, out, "latency-http.png", title, plots)


def echo_cdf(out, docs, runs, plots):
    rs = [r for r in runs if r["suite"] == "echo" and r.get("status") == "ok" and
          r.get("samples")]
    if not rs:
        return
    envs, fig, axes = panels(docs, rs)
    for ax, env in zip(axes, envs):
        er = [r for r in rs if r["env"] == env]
        if not er:
            continue
        c = max(r["concurrency"] for r in er)
        for r in sorted((r for r in er if r["concurrency"] == c),
                        key=lambda r: order_key(r["engine"])):
            vals = []
            with open(os.path.join(out, r["samples"])) as f:
                for line in f:
                    tok = line.split(",")[0].strip()
                    if tok.isdigit():
                        vals.append(int(tok) / 1000.0)
            vals.sort()
            if vals:
                n = len(vals)
                ax.plot(vals, [(i + 1) / n for i in range(n)], label=r["engine"],
                        color=COLORS.get(r["engine"]))
        ax.set_xscale("log")
        ax.set_xlabel("echo round trip (µs, log)")
        ax.set_ylabel("fraction of requests")
        ax.set_title(env_title(docs, env) + f", {c} clients", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    title = "Echo bench: latency CDF at the largest client count"
    save(fig, out, "latency-echo-cdf.png", title, plots)


def memory_plot(out, docs, runs, plots):
    rs = [r for r in runs if r["suite"] == "memory" and r.get("status") == "ok" and
          r["workload"] != "idle"]
    if not rs:
        return
    fig, ax = plt.subplots(figsize=(6.2, 4.2))
    rs = sorted(rs, key=lambda r: order_key(r["engine"]))
    ax.bar([r["engine"] for r in rs], [r["value"] for r in rs],
           color=[COLORS.get(r["engine"], "tab:blue") for r in rs])
    for i, r in enumerate(rs):
        ax.text(i, r["value"], f"{r['value']:.1f} MiB", ha="center", va="bottom", fontsize=9)
    ax.axhline(64, color="tab:red", linestyle="--", label="aim: 64 MiB")
    ax.set_ylabel("VmRSS with the connections held (MiB)")
    n = rs[0]["concurrency"]
    ax.set_title(f"{n} idle keep-alive connections — " + env_title(docs, rs[0]["env"]),
                 fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    save(fig, out, "memory.png", f"Memory: {n} idle keep-alive connections", plots)


def make_plots(out, docs, runs):
    _pyplot()
    plots = []
    sweep_plot(out, docs, runs, "http", "small-keepalive", "throughput-small-keepalive.png",
               "HTTP 13-byte file, keep-alive: req/s against concurrency", "req/s (log)", plots)
    sweep_plot(out, docs, runs, "http", "small-close", "throughput-small-close.png",
               "HTTP 13-byte file, connection per request: req/s against concurrency",
               "req/s (log)", plots)
    ratio_bars(out, docs, runs, plots)
    latency_bars(out, docs, runs, plots)
    sweep_plot(out, docs, runs, "echo", "echo", "throughput-echo.png",
               "Echo bench: req/s against clients released together", "req/s (log)", plots,
               xlabel="clients, each its own connection (log)")
    echo_cdf(out, docs, runs, plots)
    memory_plot(out, docs, runs, plots)
    return plots


# ---------------------------------------------------------------- publish

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"
PLOT_NAMES = ("throughput-small-keepalive.png", "throughput-small-close.png",
              "throughput-other.png", "throughput-echo.png", "latency-http.png",
              "latency-echo-cdf.png", "memory.png")
# What a published point keeps of a merged record (the tools' raw output
# stays in results/, except lat's and the memory check's, which are small
# and which their tables show).
POINT_KEYS = ("env", "kernel", "suite", "workload", "label", "engine", "concurrency",
              "keep_alive", "file_size", "duration", "rounds", "count", "unit", "status",
              "reason", "note", "rounds_planned", "rounds_ok", "values", "value", "min", "max",
              "spread_pct", "peer", "peer_value", "ratio", "ratio_rounds", "ratio_min",
              "ratio_max", "floor_ratio", "errors", "mib_per_s", "bytes_per_response",
              "elapsed_s", "aim_mib", "tls_version")
LATENCY_KEYS = ("min", "p50", "p90", "p99", "p99_9", "max")


def _round(v):
    if isinstance(v, float):
        return float(f"{v:.6g}")
    if isinstance(v, list):
        return [_round(x) for x in v]
    if isinstance(v, dict):
        return {k: _round(x) for k, x in v.items()}
    return v


def slim(r, kernel):
    """A merged record as published: the figures of every round, the
    median, spread and ratio, without the tools' output."""
    p = {k: r[k] for k in POINT_KEYS if k in r}
    p["kernel"] = kernel
    p["by_round"] = [{k: x[k] for k in ("round", "status", "value", "reason", "tls") if k in x}
                     for x in r.get("by_round", [])]
    if r.get("latency_us"):
        p["latency_us"] = {k: r["latency_us"][k] for k in LATENCY_KEYS if k in r["latency_us"]}
    if r["suite"] in ("memory", "https-memory", "lat") and r.get("raw"):
        p["raw"] = r["raw"]
    return _round(p)


def dump_published(doc):
    """JSON with one point per line: small, and a new run's diff reads
    point by point."""
    head = {k: v for k, v in doc.items() if k != "points"}
    text = json.dumps(head, indent=1)[:-2]
    pts = ",\n".join("  " + json.dumps(p, ensure_ascii=False) for p in doc["points"])
    return text + ',\n "points": [\n' + pts + "\n ]\n}\n"


def published_docs(docs_dir):
    docs = {}
    for env in ENV_ORDER:
        path = os.path.join(docs_dir, f"bench-{env}.json")
        if os.path.exists(path):
            with open(path) as f:
                docs[env] = json.load(f)
    return docs


# The profiles of the HTTPS points alone: published beside the full run's
# documents, not over them, one per environment and guest kernel
HTTPS_PROFILES = ("https", "smoke-https")


def https_doc_name(env, kernel):
    """https-host.json, https-vm-6.1.json: a guest's by its kernel series."""
    if env == "host":
        return "https-host.json"
    return f"https-{env}-{'.'.join(kernel.split('.')[:2])}.json"


def published_https_docs(docs_dir):
    """name -> document of every published HTTPS run, the host's first."""
    docs = {}
    names = sorted((n for n in os.listdir(docs_dir) if n.startswith("https-") and
                    n.endswith(".json")) if os.path.isdir(docs_dir) else [],
                   key=lambda n: (n != "https-host.json", n))
    for name in names:
        with open(os.path.join(docs_dir, name)) as f:
            docs[name] = json.load(f)
    return docs


def https_section(docs):
    """The HTTPS tables of BENCHMARKS.md: one per published HTTPS run."""
    L = []
    for name, d in docs.items():
        c, m = d["conditions"], d["meta"]
        where = c["where"] + (f", {c['vm_mode']}" if c.get("vm_mode") else "")
        where += f"; {plan.client_note(c)}"
        load = f"load average {c['loadavg_start']} → {c.get('loadavg_end', '?')}"
        if c.get("host_loadavg_start"):
            load += (f" (host {c['host_loadavg_start']} → "
                     f"{c.get('host_loadavg_end', '?')})")
        tag = f"{d['env']}, kernel {c['kernel']}, {c['cores']} cores"
        L += https_table(d["points"], tag, targets_inline=True)
        L.append(f"Run `results/{d['source']}` (git `{m.get('git', '?')}`, {m['started']}, "
                 f"profile {m['profile']}): {where}; {c['cpu']}; {load}; {c.get('nginx', '?')}.")
        L.append("")
        notok = [r for r in d["points"] if r.get("status") != "ok"]
        skipped = d.get("skipped_engines") or []
        for sk in skipped:
            if sk["engine"].endswith("-tls") or sk["engine"].endswith("-ktls"):
                L.append(f"- **{sk['engine']}** skipped: {sk['reason']}")
        for r in notok:
            why = " ".join(str(r.get("reason", "")).split())
            L.append(f"- {r['workload']} c={r['concurrency']} **{r['engine']}**: "
                     f"{r['status']}" + (f": {why[:200]}" if why else ""))
        if notok or skipped:
            L.append("")
    return L


def bench_section(docs, https_docs=None):
    """The tables of BENCHMARKS.md's make-bench section, from the published
    documents (env -> bench-<env>.json) and the HTTPS runs' (https-*.json,
    which replace the HTTPS points of a full run)."""
    L = [BEGIN,
         "<!-- Generated by tools/bench/bench.py --publish (make bench-publish) from "
         "docs/bench/bench-<env>.json; edit the prose outside the bench markers. -->", ""]
    if not docs and not https_docs:
        L += ["No run published yet: `make bench`, then "
              "`make bench-publish RESULTS=results/<timestamp>`.", "", END]
        return "\n".join(L)
    L += [HOW_TO_READ, ""]
    L.append("| env | run | git | started | profile | wall clock | where | kernel | cores | "
             "memory | nginx | load average, start → end |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for env, d in docs.items():
        m, c = d["meta"], d["conditions"]
        where = c["where"] + (f", {c['vm_mode']}" if c.get("vm_mode") else "")
        where += f"; {plan.client_note(c)}"
        load = f"{c['loadavg_start']} → {c.get('loadavg_end', '?')}"
        if c.get("host_loadavg_start"):
            load += (f" (host {c['host_loadavg_start']} → "
                     f"{c.get('host_loadavg_end', '?')})")
        L.append(f"| {env} | `results/{d['source']}` | `{m.get('git', '?')}` | {m['started']} | "
                 f"{m['profile']} | {m['seconds']:.0f} s | {where} | {c['kernel']} | "
                 f"{c['cores']} ({c['cpu']}) | {c['memory_mib']:,} MiB | "
                 f"{c.get('nginx', '?')} | {load} |")
    L.append("")
    for env, d in docs.items():
        c = d["conditions"]
        er = d["points"]
        tag = f"{env}, kernel {c['kernel']}, {c['cores']} cores"
        L += http_tables(er, tag)
        if not https_docs:
            L += https_table(er, tag, targets_inline=True)
        L += echo_table(er, tag)
        L += lat_table(er, tag)
        L += memory_table(er, tag)
        notok = [r for r in er if r.get("status") != "ok"]
        skipped = d.get("skipped_engines") or []
        checks = [(name, wl, why) for name, bad in (d.get("checks") or {}).items()
                  for wl, why in bad.items()]
        if notok or skipped or checks:
            # one paragraph: every point not measured, in the run's order
            items = [f"**{s['engine']}** skipped: {s['reason']}" for s in skipped]
            for r in notok:
                why = " ".join(str(r.get("reason", "")).split())
                items.append(f"{r['suite']} {r['workload']} c={r['concurrency']} "
                             f"**{r['engine']}**: {r['status']}" + (f": {why}" if why else ""))
            items += [f"**{name}** does not serve `{wl}` correctly, its runs are not "
                      f"counted: {why}" for name, wl, why in checks]
            L += [f"Not measured ({env}): " + "; ".join(items) + ".", ""]
    L += https_section(https_docs or {})
    L.append(END)
    # a table follows its heading at once (one block per line: valid
    # Markdown), and one blank line parts blocks
    L = [x for i, x in enumerate(L)
         if not (x == "" and 0 < i < len(L) - 1 and (L[i - 1] == "" or (
             L[i - 1].startswith("### ") and L[i + 1].startswith("|"))))]
    return "\n".join(L)


def fill_markers(path, section):
    with open(path) as f:
        text = f.read()
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < i:
        raise SystemExit(f"{path}: no {BEGIN} ... {END} markers")
    with open(path, "w") as f:
        f.write(text[:i] + section + text[j + len(END):])


def publish(results_dir, docs_dir, bench_md):
    """Write results_dir's figures to docs_dir/bench-<env>.json (one per
    environment the run measured), copy its plots to docs_dir and fill
    bench_md's markers from every docs_dir/bench-<env>.json. Returns the
    paths written."""
    with open(os.path.join(results_dir, "results.json")) as f:
        result = json.load(f)
    runs = result["runs"]
    add_ratios(runs)
    add_floor_ratios(runs)
    meta = result["meta"]
    os.makedirs(docs_dir, exist_ok=True)
    written = []
    for env, cond in result["conditions"].items():
        cond = {k: v for k, v in cond.items() if k != "checks"}
        doc = {"schema": "ktcp-bench-published/1", "env": env,
               "source": os.path.basename(os.path.normpath(results_dir)),
               "meta": {k: meta.get(k) for k in ("profile", "command", "git", "started",
                                                  "seconds", "host_loadavg_start",
                                                  "host_loadavg_end")},
               "conditions": cond, "peers": plan.PEERS,
               "checks": result["conditions"][env].get("checks") or {},
               "skipped_engines": result.get("skipped_engines", {}).get(env, []),
               "points": [slim(r, cond["kernel"]) for r in runs if r["env"] == env]}
        path = os.path.join(docs_dir, https_doc_name(env, cond["kernel"])
                            if meta.get("profile") in HTTPS_PROFILES else f"bench-{env}.json")
        with open(path, "w") as f:
            f.write(dump_published(doc))
        written.append(path)
    for name in PLOT_NAMES:
        src = os.path.join(results_dir, name)
        if os.path.exists(src):
            shutil.copy(src, os.path.join(docs_dir, name))
            written.append(os.path.join(docs_dir, name))
    fill_markers(bench_md, bench_section(published_docs(docs_dir),
                                         published_https_docs(docs_dir)))
    written.append(bench_md)
    return written

if __name__ == "__main__":
    out = sys.argv[1]
    with open(os.path.join(out, "results.json")) as f:
        meta = json.load(f)["meta"]
    write(out, meta)
