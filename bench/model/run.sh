#!/bin/bash
# A cycle model of one block of IPv4 reassembly (64 datagrams in flight),
# flowsteer against DPDK's rte_ip_frag (when bench/dpdk/reasm-dpdk is
# built): the executed instructions of one call of each side's timed loop,
# traced with gdb, then simulated by llvm-mca (Zen 3 model, the newest in
# LLVM 14) as straight-line code. Needs gdb and llvm-mca-14 (Debian:
# gdb, llvm-14). Uses the repository's release build (`cargo build
# --release` first).
#
#   [SHAPE=bkt64x2] bench/model/run.sh [in-order|reversed|shuffled ...]
#
# DPDK's table shape defaults to bkt256x1, one of the two tight shapes
# `bench reasm --dpdk` compares at 64 in flight (DPDK_SHAPES_64 in
# crates/bench/harness/src/reasm.rs) and the faster of the two in the
# side-by-side runs.
#
# The model has perfect branch prediction and every load hitting L1; see
# BENCHMARKS.md (Reassembly, the cycle model) for what it explains and what
# it does not.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
orders=${*:-in-order reversed shuffled}
shape=${SHAPE:-bkt256x1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for tool in gdb llvm-mca-14; do
    command -v $tool >/dev/null || { echo "run.sh: $tool not found (Debian: apt install gdb llvm-14)" >&2; exit 1; }
done
fs=$root/target/release/flowsteer
dpdk=$root/bench/dpdk/reasm-dpdk
[ -x "$fs" ] || { echo "run.sh: build first: cargo build --release" >&2; exit 1; }
model() {
    llvm-mca-14 -mcpu=znver3 -iterations=1 "$1" 2>/dev/null |
        awk '/^Total Cycles/{c=$3} /Block RThroughput/{r=$3} END{printf "model cycles %.1f (resources alone %.1f) per datagram", c/64, r/64}'
}
for o in $orders; do
    TFN=flowsteer_bench::reasm::chain_pushes TOUT=$work/fs.$o gdb -batch -x "$here/trace.py" --args \
        "$fs" bench reasm --set warm --delivery chain --family 4 --in-flight 64 --order "$o" --seconds 0.05 --json >/dev/null 2>&1
    echo "flowsteer $o: $(python3 "$here/to_mca.py" $work/fs.$o 64 $work/fs.$o.s)"
    echo "flowsteer $o: $(model $work/fs.$o.s)"
    if [ -x "$dpdk" ]; then
        TFN=reasm_block_v4 TOUT=$work/dp.$o gdb -batch -x "$here/trace.py" --args \
            "$dpdk" --family 4 --in-flight 64 --order "$o" --payload 4416 --shape "$shape" --seconds 0.05 >/dev/null 2>&1
        echo "dpdk      $o: $(python3 "$here/to_mca.py" $work/dp.$o 64 $work/dp.$o.s)"
        echo "dpdk      $o: $(model $work/dp.$o.s)"
    fi
done
