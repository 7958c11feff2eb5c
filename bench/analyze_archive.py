#!/usr/bin/env python3
"""Same-run benchmark of `flowsteer analyze` over many files.

Generates one capture with `flowsteer bench analyze --keep`, cuts it into
--files files (bench/split_pcap.py), then alternates, --rounds times: the
whole capture as one file on one thread (`--threads 1`), and the files on
--threads threads. Prints each round's packets/s and the ratio, then the
medians and the largest maximum resident set size of each side.

    bench/analyze_archive.py target/release/flowsteer --packets 16000000 --flows 100000
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(cmd):
    """Wall seconds and max RSS (KiB) of `cmd`, output discarded. The RSS is
    GNU time's: a child forked from this interpreter would report the
    interpreter's own size (ru_maxrss survives exec)."""
    start = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "maxrss %M"] + cmd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - start
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit status {p.returncode}: {p.stderr}")
    rss = [int(line.split()[1]) for line in p.stderr.splitlines() if line.startswith("maxrss ")]
    return wall, rss[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("flowsteer")
    ap.add_argument("--packets", type=int, default=16_000_000)
    ap.add_argument("--flows", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dir", help="work directory (default: a temporary one)")
    a = ap.parse_args()
    work = a.dir or tempfile.mkdtemp(prefix="flowsteer-archive-")
    whole = os.path.join(work, "whole.pcap")
    parts = os.path.join(work, "parts")
    if not os.path.exists(whole):
        subprocess.run([a.flowsteer, "bench", "analyze", "--packets", str(a.packets), "--flows", str(a.flows),
                        "--keep", whole], check=True, stdout=subprocess.DEVNULL)
    if not os.path.isdir(parts):
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run([sys.executable, os.path.join(here, "split_pcap.py"), whole, str(a.files), parts], check=True)
    for f in [whole] + [os.path.join(parts, p) for p in os.listdir(parts)]:
        with open(f, "rb") as h:  # into the page cache
            while h.read(1 << 24):
                pass
    one = [a.flowsteer, "analyze", whole, "--threads", "1", "--quiet", "--json"]
    many = [a.flowsteer, "analyze", parts, "--threads", str(a.threads), "--quiet", "--json"]
    out = subprocess.run(one, check=True, capture_output=True).stdout
    packets = json.loads(out)["packets_read"]
    rows = []
    print(f"{packets} packets; one file on 1 thread vs {a.files} files on {a.threads} threads")
    for r in range(a.rounds):
        w1, m1 = run(one)
        w2, m2 = run(many)
        rows.append((packets / w1, packets / w2, m1, m2))
        print(f"round {r + 1}: {packets / w1 / 1e6:.2f} vs {packets / w2 / 1e6:.2f} Mpps, ratio {w1 / w2:.2f}")
    p1 = statistics.median(x[0] for x in rows)
    p2 = statistics.median(x[1] for x in rows)
    ratio = statistics.median(x[1] / x[0] for x in rows)
    lo, hi = min(x[1] / x[0] for x in rows), max(x[1] / x[0] for x in rows)
    print(f"median: {p1 / 1e6:.2f} Mpps (1 file, 1 thread), {p2 / 1e6:.2f} Mpps ({a.files} files, {a.threads} threads), "
          f"ratio {ratio:.2f} (min {lo:.2f}, max {hi:.2f})")
    print(f"max RSS: {max(x[2] for x in rows) / 1024:.0f} MiB (1 thread), {max(x[3] for x in rows) / 1024:.0f} MiB "
          f"({a.threads} threads)")


if __name__ == "__main__":
    main()
