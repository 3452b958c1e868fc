#!/usr/bin/env bash
# The README's first command: `make demo` runs sim/demo, the appliance end to end on the
# simulated rack. This suite runs sim/demo on the build under test and checks what it
# shows a new user: the gateway's ib0 UP, every ping answered both ways (IPv4, IPv6),
# iperf3 through the gateway both ways with a rate, the neighbours the traffic created,
# a clean exit, and no namespace of its rack left behind.
# Needs root, ibsim, opensm, iperf3; IBGW_BUILD (test/run sets it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
build=${IBGW_BUILD:-$top/build}
work=$(mktemp -d /tmp/ibgw-demo-test.XXXXXX)
trap 'rm -rf "$work"' EXIT

tap_plan 8
if [ "$(id -u)" != 0 ]; then
	tap_not_ok "runs as root" "the demo's rack needs network namespaces"
	exit 1
fi
timeout 300 "$top/sim/demo" "$build" >"$work/demo.txt" 2>&1
rc=$?
out=$(sed 's/\x1b\[[0-9;]*m//g' "$work/demo.txt")
tap_is "sim/demo exits 0" "$rc" 0
tap_like "the gateway's ib0 is UP in show links" "$out" \
	"^ib0: ipoib state UP mtu 2044 mode datagram pkey 0xffff dev gw1 port 1 backend verbs"
tap_is "every demo ping is answered (Ethernet -> IB, IB -> Ethernet, IPv6)" \
	"$(echo "$out" | grep -c '^3 packets transmitted, 3 received, 0% packet loss')" 3
tap_is "iperf3 Ethernet -> IB and back: a sender and a receiver rate each way" \
	"$(echo "$out" | grep -cE '[0-9.]+ Mbits/sec .*(sender|receiver)$')" 4
tap_like "show neighbours: the IB host, learned by the traffic" "$out" \
	"^10\.10\.0\.13 dev ib0 lladdr [0-9a-f:]{59} (REACHABLE|STALE|DELAY)"
tap_like "show neighbours: the Ethernet host" "$out" \
	"^10\.20\.0\.11 dev eth0 lladdr ([0-9a-f]{2}:){5}[0-9a-f]{2} (REACHABLE|STALE|DELAY)"
tap_like "the demo says it is done" "$out" "^Demo done\."
tap_is "the demo's rack is gone (no namespace left)" "$(ip netns list | grep -c '^demo[0-9]*-')" 0
[ "$tap_failed" -eq 0 ] || sed 's/^/# /' "$work/demo.txt" | tail -40
tap_done
