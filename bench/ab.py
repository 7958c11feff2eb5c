#!/usr/bin/env python3
"""Paired wall-clock A/B of two flowsteer binaries: `bench hash`, `bench steer`
and `bench reasm`, alternating A and B in every round (ABBA order, so drift in
the host's speed falls on both alike).

Each round yields one ratio per bench, B's rate over A's (above 1: B is
faster); the rate of a run is the geometric mean over its result rows, so
every row weighs the same. Printed per bench: the median ratio and its 95 %
sign-test interval (k-th smallest to k-th largest ratio, k from the binomial
distribution; it assumes independent rounds and needs 6 or more).

    bench/ab.py OLD_BINARY NEW_BINARY [--rounds 9] [--cpu 1] [--only hash,steer,reasm]
"""

import argparse
import json
import math
import subprocess
import sys

BENCHES = {
    # name: (arguments, rows -> list of rates, higher is faster)
    "hash": (
        ["bench", "hash", "--seconds", "0.05", "--reps", "3", "--json"],
        lambda doc: [1.0 / r["ns_per_hash"] for r in doc["results"] if r["impl"] != "reference"],
    ),
    "steer": (
        ["bench", "steer", "--seconds", "0.3", "--reps", "1", "--flows", "1000", "--ring-items", "2000000", "--json"],
        lambda doc: [r["mpps"] for r in doc["results"] if r.get("mpps")],
    ),
    "reasm": (
        ["bench", "reasm", "--set", "warm", "--seconds", "0.05", "--json"],
        lambda doc: [r["dgrams_per_s"] for r in doc["results"] if r.get("impl") == "flowsteer"],
    ),
}


def rate(binary, bench, cpu):
    args, rows = BENCHES[bench]
    cmd = [binary] + args
    if cpu is not None and bench == "reasm":
        cmd += ["--cpu", str(cpu)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rates = rows(json.loads(out))
    if not rates:
        sys.exit(f"{bench}: no result rows from {binary}")
    return math.exp(sum(math.log(r) for r in rates) / len(rates))


def sign_test_ci(ratios):
    """95 % interval of the median: ranks k..n-k+1 with P(Bin(n, 1/2) < k) <= 2.5 %."""
    n = len(ratios)
    if n < 6:
        return None
    s = sorted(ratios)
    k, cum = 0, 0.0
    while True:
        p = math.comb(n, k) / 2**n
        if cum + p > 0.025:
            break
        cum += p
        k += 1
    if k == 0:
        return None
    return s[k - 1], s[n - k]


def median(v):
    s = sorted(v)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", help="the baseline binary")
    p.add_argument("b", help="the binary under test")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--cpu", type=int, default=None, help="pin bench reasm to this CPU")
    p.add_argument("--only", default="hash,steer,reasm")
    args = p.parse_args()
    benches = args.only.split(",")
    ratios = {b: [] for b in benches}
    for i in range(args.rounds):
        for bench in benches:
            order = [0, 1] if i % 2 == 0 else [1, 0]
            r = {}
            for side in order:
                r[side] = rate([args.a, args.b][side], bench, args.cpu)
            ratios[bench].append(r[1] / r[0])
        print(f"round {i + 1}/{args.rounds}: " + ", ".join(f"{b} {ratios[b][-1]:.3f}" for b in benches), file=sys.stderr)
    print(f"{'bench':<6} {'rounds':>6} {'median B/A':>10} {'95% interval':>16}")
    for bench in benches:
        ci = sign_test_ci(ratios[bench])
        ci_text = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"
        print(f"{bench:<6} {len(ratios[bench]):>6} {median(ratios[bench]):>10.3f} {ci_text:>16}")


if __name__ == "__main__":
    main()
