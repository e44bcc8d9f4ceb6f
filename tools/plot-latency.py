#!/usr/bin/env python3
"""Plot a latency distribution written by echo-bench --samples.

Input: one latency in nanoseconds per line, or CSV with a header
'length_bytes,latency_ns'. Output: a PNG with the histogram (log-spaced bins)
and the CDF of the latencies in microseconds, with p50/p90/p99 marked.
"""
import argparse
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import numpy as np  # noqa: E402


def read_latencies_us(path):
    values = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0].isalpha():
                continue  # blank or the CSV header
            field = line.split(",")[-1]
            values.append(int(field) / 1000.0)
    return np.array(values)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("samples", help="samples file from echo-bench --samples")
    ap.add_argument("png", help="PNG file to write")
    ap.add_argument("--title", default="latency", help="plot title")
    args = ap.parse_args()

    lat = read_latencies_us(args.samples)
    if lat.size == 0:
        print(f"plot-latency: {args.samples}: no samples", file=sys.stderr)
        return 1
    fig, (hist_ax, cdf_ax) = plt.subplots(1, 2, figsize=(12, 4.5))
    low = max(lat.min(), 0.1)
    high = max(lat.max(), low * 1.01)
    bins = np.logspace(np.log10(low), np.log10(high), 60)
    hist_ax.hist(lat, bins=bins, color="tab:blue")
    hist_ax.set_xscale("log")
    hist_ax.set_xlabel("latency (µs)")
    hist_ax.set_ylabel("requests")
    hist_ax.set_title("distribution")

    ordered = np.sort(lat)
    cdf = np.arange(1, ordered.size + 1) / ordered.size
    cdf_ax.plot(ordered, cdf, color="tab:blue")
    cdf_ax.set_xscale("log")
    cdf_ax.set_xlabel("latency (µs)")
    cdf_ax.set_ylabel("fraction of requests ≤ x")
    cdf_ax.set_title("CDF")
    cdf_ax.grid(True, which="both", alpha=0.3)
    for p, style in ((50, ":"), (90, "--"), (99, "-.")):
        v = np.percentile(lat, p)
        for ax in (hist_ax, cdf_ax):
            ax.axvline(v, color="tab:red", linestyle=style, linewidth=1)
        cdf_ax.annotate(f"p{p} {v:.0f} µs", (v, p / 100.0), fontsize=8,
                        xytext=(4, -10), textcoords="offset points")
    fig.suptitle(f"{args.title} ({lat.size} requests)")
    fig.tight_layout()
    fig.savefig(args.png, dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
