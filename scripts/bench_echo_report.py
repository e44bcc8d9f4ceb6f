"""Tabulate and plot an echo-bench run: results.md, results.json and
latency.png (CDF per engine) in the run's folder."""
import argparse
import glob
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--conditions", default="")
    a = ap.parse_args()
    rows = {}
    for path in sorted(glob.glob(os.path.join(a.out, "*.json"))):
        if os.path.basename(path) == "results.json":
            continue
        name = os.path.basename(path)[:-5]
        rows[name] = json.load(open(path))
    peer = rows.get("ktcp-echo")
    lines = [f"# Echo bench\n", f"Conditions: {a.conditions}\n",
             "| engine | req/s | × ktcp-echo | p50 µs | p90 µs | p99 µs | max µs | ok | mismatches | failed clients | errors by kind |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        lat = r["latency_us"]
        ratio = f"{r['req_per_s'] / peer['req_per_s']:.2f}" if peer and peer["req_per_s"] else "-"
        errors = ", ".join(f"{k} {v}" for k, v in r["errors"].items() if v) or "0"
        lines.append(f"| {name} | {r['req_per_s']:.0f} | {ratio} | {lat['p50']:.0f} | {lat['p90']:.0f} | "
                     f"{lat['p99']:.0f} | {lat['max']:.0f} | {r['ok']} | {r['mismatches']} | {r['failed_clients']} | {errors} |")
    open(os.path.join(a.out, "results.md"), "w").write("\n".join(lines) + "\n")
    json.dump({"conditions": a.conditions, "runs": rows}, open(os.path.join(a.out, "results.json"), "w"), indent=1)

    fig, ax = plt.subplots(figsize=(8, 5))
    for name in rows:
        samples = os.path.join(a.out, name + ".samples")
        if not os.path.exists(samples):
            continue
        vals = []
        for line in open(samples):
            tok = line.strip().split(",")[0]
            if tok.isdigit():
                vals.append(int(tok) / 1000.0)
        vals.sort()
        if vals:
            n = len(vals)
            ax.plot(vals, [(i + 1) / n for i in range(n)], label=name)
    ax.set_xscale("log")
    ax.set_xlabel("round-trip latency (µs, log scale)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("echo bench: latency CDF\n" + a.conditions, fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "latency.png"), dpi=110)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
