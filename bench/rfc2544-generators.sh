#!/bin/sh
# The AF_XDP generator of `flowsteer rfc2544` against `udp-gen` (kernel
# sockets) and trafgen (AF_PACKET, netsniff-ng), in one run, on the same
# CPU, each sending 64-byte frames (60 bytes handed to the veth, 18 bytes
# of UDP payload; udp-gen's smallest datagram is 32 bytes: 78-byte frames)
# into a namespace that drops them (the rfc2544 generator into its own
# AF_XDP receiver, on the same CPU). Root. Usage: bench/rfc2544-generators.sh [SECONDS] [CPU]
set -eu
secs=${1:-5}
cpu=${2:-0}
bin=${FLOWSTEER:-target/release/flowsteer}
a=fsgenbench-a-$$
b=fsgenbench-b-$$
cleanup() { ip netns del "$a" 2>/dev/null || true; ip netns del "$b" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
ip netns add "$a"
ip netns add "$b"
ip link add gba netns "$a" type veth peer name gbb netns "$b"
ip -n "$a" addr add 10.254.0.1/24 dev gba
ip -n "$b" addr add 10.254.0.2/24 dev gbb
ip -n "$a" link set gba up
ip -n "$b" link set gbb up
macb=$(ip -n "$b" -br link show gbb | awk '{print $3}')
maca=$(ip -n "$a" -br link show gba | awk '{print $3}')
ip -n "$a" neigh replace 10.254.0.2 lladdr "$macb" dev gba nud permanent
# The kernel senders' sink: every frame redirected at tc ingress to a veth
# that is down, which drops it (counted in gbb's rx_packets first; this
# kernel has no gact `drop` action). Cheaper than the AF_XDP receiver the
# rfc2544 generator is measured into.
ip -n "$b" link add gbs0 type veth peer name gbs1
ip netns exec "$b" tc qdisc add dev gbb ingress
ip netns exec "$b" tc filter add dev gbb parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev gbs0

rx_packets() { ip -n "$b" -s -j link show gbb | sed 's/.*"rx":{"bytes":[0-9]*,"packets":\([0-9]*\).*/\1/'; }

echo "# udp-gen, kernel UDP sockets, 32-byte datagrams, CPU $cpu, $secs s"
before=$(rx_packets)
ip netns exec "$a" taskset -c "$cpu" "$bin" udp-gen -r 10.254.0.2 -p 9 --size 32 --duration "$secs" --flows 16 >/dev/null
after=$(rx_packets)
echo "udp-gen: $(( (after - before) / secs )) frames/s received"

if command -v trafgen >/dev/null; then
    echo "# trafgen, AF_PACKET, 60-byte frames, CPU $cpu, $secs s"
    cfg=$(mktemp)
    m() { echo "$1" | sed 's/^/0x/; s/:/, 0x/g'; }
    cat > "$cfg" <<CFG
{ $(m "$macb"), $(m "$maca"), 0x08, 0x00,
  0x45, 0x00, 0x00, 46, 0x00, 0x00, 0x00, 0x00, 64, 17, csumip(14, 33),
  10, 254, 0, 1, 10, 254, 0, 2,
  0x04, 0x00, 0x00, 0x09, 0x00, 26, 0x00, 0x00,
  fill(0x00, 18) }
CFG
    before=$(rx_packets)
    ip netns exec "$a" timeout -s INT "$secs" taskset -c "$cpu" trafgen --dev gba --conf "$cfg" --cpus 1 --qdisc-path -q >/dev/null 2>&1 || true
    after=$(rx_packets)
    rm -f "$cfg"
    echo "trafgen: $(( (after - before) / secs )) frames/s received"
fi
echo "# flowsteer rfc2544 AF_XDP generator: its ceiling at 64 bytes (--dut none), CPU $cpu"
"$bin" rfc2544 --ceiling --sizes 64 --trial "$secs" --wait 0.5 --gen-cpus "$cpu" --json 2>/dev/null |
    sed -n 's/.*"generator_max_fps": \([0-9.]*\).*/rfc2544 generator sent: \1 frames\/s/p; s/.*"received_fps": \([0-9.]*\).*/rfc2544 receiver got: \1 frames\/s/p; s/.*"\(gen_[a-z]*_ns_per_frame\)": \([0-9.]*\).*/rfc2544 \1: \2/p; s/.*"\(rx_thread_ns_per_frame\)": \([0-9.]*\).*/rfc2544 \1: \2/p' | head -6
