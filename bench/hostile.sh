#!/usr/bin/env bash
# bench/hostile.sh: what one hostile host's flood costs the others, through ibgwd and
# through a Linux kernel router doing the same job, in the same run. Root. Figures, not
# pass/fail (test/integration/hostile.sh holds the promise: at most 1%).
#
#   bench/hostile.sh [BUILD_DIR] [RATE] [COUNT]
#
# One host sends COUNT frames (default 50000) at RATE per second (default 10000) with
# test/tools/flood while a bystander on the same Ethernet segment pings a host on the
# far side every 20 ms, IPv4 and IPv6 (test/lib/flood.sh). The floods:
#   scan6  echo requests to random addresses of the far side's /64
#   scan4  echo requests to random addresses of the far side's /24
#   ns6    Neighbor Solicitations for the router from random sources
#   arp4   ARP requests for the router from random MACs and unused addresses
#          (10.20.0.128/25: one claiming a bystander's address would be ARP spoofing)
# ibgwd: the simulated rack with sim/etc/rack-gw1.yaml (flooder ethhost1, bystander
# ethhost2, far host the IB host ibhost3). The kernel: namespaces with the same
# addresses (flooder, bystander and router on a bridge, the far host on a veth behind
# the router, forwarding on, the kernel's default neighbour settings).
# Printed: each flood's bystander loss through each router, IPv4 and IPv6.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
case $build in /*) ;; *) build=$PWD/$build ;; esac
rate=${2:-10000}
count=${3:-50000}
rack=hob$(($$ % 10000))
k=kho$(($$ % 10000))
export IBGW_BUILD=$build
work=$(mktemp -d /tmp/ibgw-hobench.XXXXXX)
cleanup() {
	local n
	for n in sw r a b c; do ip netns del "$k-$n" 2>/dev/null; done
	RACK_QUIET=1 "$top/sim/rack" down --name "$rack" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
cd "$work" || exit 1
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
[ -x "$build/tools/flood" ] || { echo "build $build/tools/flood first (make)" >&2; exit 1; }
. "$top/test/lib/flood.sh"

floods=(
	"scan6 --mode scan6 --src6 fd00:20::11 --prefix6 fd00:10::/64"
	"scan4 --mode scan4 --src4 10.20.0.11 --prefix4 10.10.0.0/24"
	"ns6 --mode ns6 --target6 fd00:20::1 --prefix6 fd00:20::/64"
	"arp4 --mode arp4 --target4 10.20.0.1 --prefix4 10.20.0.128/25"
)
declare -A result

# run_all WHO RUN_FLOODER RUN_BYSTANDER ROUTER_MAC
run_all() {
	local who=$1 fl=$2 by=$3 mac=$4 f name
	for f in "${floods[@]}"; do
		name=${f%% *}
		# shellcheck disable=SC2086 # the flood's arguments are words
		result[$who-$name]=$(flood_run "$who-$name" "$fl" "$by" 10.10.0.13 fd00:10::13 \
			"$mac" "$rate" "$count" ${f#* })
		echo "  $who $name: ${result[$who-$name]}" >&2
		sleep 2 # the router settles (neighbour entries fail and go)
	done
}

# ---- the kernel router ---------------------------------------------------------------------
kn() { local n=$1; shift; ip netns exec "$k-$n" "$@"; }
for n in sw r a b c; do ip netns add "$k-$n"; done
kn sw ip link add br0 type bridge
kn sw ip link set br0 up
for n in r a b; do
	ip link add "$n"0 netns "$k-sw" type veth peer name eth0 netns "$k-$n"
	kn sw ip link set "$n"0 master br0 up
	kn "$n" ip link set eth0 up
	kn "$n" ip link set lo up
done
ip link add eth1 netns "$k-r" type veth peer name eth0 netns "$k-c"
kn c ip link set eth0 up
kn c ip link set lo up
kn r ip link set eth1 up
kn r sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
kn r ip addr add 10.20.0.1/24 dev eth0
kn r ip addr add fd00:20::1/64 dev eth0 nodad
kn r ip addr add 10.10.0.1/24 dev eth1
kn r ip addr add fd00:10::1/64 dev eth1 nodad
for h in a:11 b:12; do
	kn "${h%%:*}" ip addr add "10.20.0.${h#*:}/24" dev eth0
	kn "${h%%:*}" ip addr add "fd00:20::${h#*:}/64" dev eth0 nodad
	kn "${h%%:*}" ip route add 10.10.0.0/24 via 10.20.0.1
	kn "${h%%:*}" ip -6 route add fd00:10::/64 via fd00:20::1
done
kn c ip addr add 10.10.0.13/24 dev eth0
kn c ip addr add fd00:10::13/64 dev eth0 nodad
kn c ip route add default via 10.10.0.1
kn c ip -6 route add default via fd00:10::1
kn b ping -c 2 -i 0.2 -W 2 10.10.0.13 >/dev/null
kn b ping -6 -c 2 -i 0.2 -W 2 fd00:10::13 >/dev/null
echo "kernel router:" >&2
run_all kernel "kn a" "kn b" "$(kn r cat /sys/class/net/eth0/address)"
for n in sw r a b c; do ip netns del "$k-$n"; done

# ---- ibgwd on the rack ---------------------------------------------------------------------
"$top/sim/rack" --name "$rack" up >"$work/up.log" 2>&1 || { tail -5 "$work/up.log"; exit 1; }
in_ns() { local n=$1; shift; ip netns exec "$rack-$n" "$@"; }
for i in $(seq 100); do
	in_ns ethhost2 ping -c 1 -W 1 10.10.0.13 >/dev/null 2>&1 &&
		in_ns ethhost2 ping -6 -c 1 -W 1 fd00:10::13 >/dev/null 2>&1 && break
	sleep 0.2
done
echo "ibgwd:" >&2
run_all ibgwd "in_ns ethhost1" "in_ns ethhost2" "$(in_ns gw1 cat /sys/class/net/eth0/address)"

# ---- the figures ---------------------------------------------------------------------------
pct() { awk -v p="$1" 'BEGIN { printf "%.1f%%", p / 10 }'; }
printf '\n%d frames at %d/s from one host; a bystander pings across every 20 ms\n' "$count" "$rate"
printf '%-6s  %-28s  %-28s\n' flood "kernel: loss IPv4 / IPv6" "ibgwd: loss IPv4 / IPv6"
for f in "${floods[@]}"; do
	name=${f%% *}
	IFS='|' read -r _ k4 k6 <<<"${result[kernel-$name]}"
	IFS='|' read -r _ g4 g6 <<<"${result[ibgwd-$name]}"
	printf '%-6s  %-28s  %-28s\n' "$name" "$(pct "$k4") / $(pct "$k6")" "$(pct "$g4") / $(pct "$g6")"
done
