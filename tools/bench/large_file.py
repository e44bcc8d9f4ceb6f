#!/usr/bin/env python3
"""khttpd against nginx on a 1 MiB file, in one guest (run inside the VM).

    scripts/vm --kernel 6.12 -- .venv/bin/python tools/bench/large_file.py --out FILE.json

Keep-alive GETs of one 1 MiB file over --connections connections with
htstress, alternating nginx and each khttpd mode for --rounds rounds of
--seconds each; reports every round, the median req/s and the median of the
per-round ratios to nginx (with their spread), and the guest's kernel and
accelerator beside them. Bounded: rounds x engines x seconds.

--ko LABEL=PATH (repeatable) runs another build of khttpd.ko in mode
unbound beside them, as engine khttpd-LABEL: two ways of sending a file
compared side by side in the same rounds."""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (puts tools/ on sys.path)
import engines as eng  # noqa: E402


class Ctx:
    pass


class KhttpdBuild(eng.KernelHttpd):
    """khttpd.ko from another path (a variant build), in mode unbound."""

    def __init__(self, label, path):
        super().__init__("unbound")
        self.name = f"khttpd-{label}"
        self._ko = os.path.abspath(path)

    @property
    def ko(self):
        return self._ko


def run_round(engine, ctx, args):
    port = eng.free_port()
    bench.start_engine(engine, port, ctx)
    try:
        url = f"http://127.0.0.1:{port}/big.bin"
        # Warm the page cache and khttpd's metadata cache first.
        subprocess.run([ctx.htstress, "-k", "-n", "20", url], capture_output=True, timeout=60)
        r = subprocess.run([ctx.htstress, "-k", "-c", str(args.connections), "-d", str(args.seconds),
                            "--json", url], capture_output=True, text=True,
                           timeout=args.seconds + 60)
        out = json.loads(r.stdout)
        bad = out["bad"] + out["errors"]["total"]
        return {"req_per_s": out["req_per_s"], "good": out["good"], "failed": bad,
                "bytes_read": out["bytes_read"]}
    finally:
        engine.stop(check=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--connections", type=int, default=10)
    ap.add_argument("--modes", default="unbound,kthread",
                    help="khttpd modes to run (empty: none)")
    ap.add_argument("--ko", action="append", default=[], metavar="LABEL=PATH",
                    help="another khttpd.ko to run in mode unbound")
    args = ap.parse_args()
    if not eng.in_vm():
        sys.exit("large_file.py runs inside the VM (scripts/vm)")

    ctx = Ctx()
    ctx.tmp = tempfile.mkdtemp(prefix="ktcp-large-")
    ctx.docroot = os.path.join(ctx.tmp, "www")
    os.makedirs(ctx.docroot)
    os.chmod(ctx.tmp, 0o755)
    with open(os.path.join(ctx.docroot, "big.bin"), "wb") as f:
        f.write(os.urandom(1 << 20))
    ctx.htstress = os.path.join(eng.BUILD, "htstress")

    engines = [eng.Nginx()] + [eng.KernelHttpd(m) for m in args.modes.split(",") if m]
    for spec in args.ko:
        label, _, path = spec.partition("=")
        if not label or not path:
            sys.exit(f"--ko {spec}: expected LABEL=PATH")
        engines.append(KhttpdBuild(label, path))
    rounds = {e.name: [] for e in engines}
    for i in range(args.rounds):
        order = engines if i % 2 == 0 else engines[::-1]
        for e in order:
            try:
                rounds[e.name].append(run_round(e, ctx, args))
            except Exception as exc:  # a failing engine is a result
                rounds[e.name].append({"error": str(exc)})
            time.sleep(1)

    def rate(r):
        return r.get("req_per_s") if "error" not in r and r.get("failed", 1) == 0 else None

    summary = {}
    base = [rate(r) for r in rounds["nginx"]]
    for name, rs in rounds.items():
        rates = [rate(r) for r in rs]
        ok = [x for x in rates if x]
        ratios = [a / b for a, b in zip(rates, base) if a and b]
        summary[name] = {
            "median_req_per_s": statistics.median(ok) if ok else None,
            "median_ratio_to_nginx": statistics.median(ratios) if ratios else None,
            "ratio_min": min(ratios) if ratios else None,
            "ratio_max": max(ratios) if ratios else None,
            "failed_rounds": len(rates) - len(ok),
        }
    result = {
        "builds": dict(spec.partition("=")[::2] for spec in args.ko),
        "workload": f"keep-alive GET of a 1 MiB file, {args.connections} connections, "
                    f"htstress, {args.seconds} s per round, {args.rounds} alternating rounds",
        "kernel": platform.release(),
        "accel": os.environ.get("KTCP_VM_ACCEL", "unknown"),
        "cpus": os.cpu_count(),
        "rounds": rounds,
        "summary": summary,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    for name, s in summary.items():
        print(f"{name:16} {s['median_req_per_s'] or 0:9.0f} req/s  x{s['median_ratio_to_nginx'] or 0:.2f} "
              f"(x{s['ratio_min'] or 0:.2f}-{s['ratio_max'] or 0:.2f}) failed rounds {s['failed_rounds']}")


if __name__ == "__main__":
    main()
