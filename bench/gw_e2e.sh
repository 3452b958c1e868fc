#!/usr/bin/env bash
# bench/gw_e2e.sh: TCP throughput (iperf3) and ping latency through ibgwd on the
# simulated rack (Ethernet host -> gateway -> IB host: veth, AF_PACKET/io_uring, the
# forwarding engine, IPoIB datagram mode on the simulated fabric, ibgw-host's TAP),
# next to the Linux kernel forwarding the same traffic between the same kind of
# namespaces (a router namespace with ip_forward=1 between two veths), measured in the
# same run and printed as ratios. Then the gateway reloaded with ib0 in connected mode
# (MTU 65520, its IB port reopened for RC-sized buffers; the IB host connected too):
# TCP Ethernet -> IB with the Ethernet host's veth as the rack
# sets it (tx checksumming off: a wire's 1500-octet frames) and with its default
# offloads (TSO: 64 KiB super-frames, which leave over the RC connection whole). Both
# modes also with GRO on gw1's port, as on a NIC (the switch's port toward gw1 without
# TSO, so that the veth merges: docs/ethernet-ports.md, "GRO and LRO"). Root.
# Figures, not pass/fail.
#
#   bench/gw_e2e.sh [BUILD_DIR] [SECONDS]
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
case $build in /*) ;; *) build=$PWD/$build ;; esac
secs=${2:-5}
rack=gwb$(($$ % 10000))
k=kfw$(($$ % 10000))
export IBGW_BUILD=$build
work=$(mktemp -d /tmp/ibgw-bench.XXXXXX)
chmod 0711 "$work" # ibgwd runs as nobody and reads gw1.yaml again at the reload
cleanup() {
	for n in a r b; do ip netns del "$k-$n" 2>/dev/null; done
	RACK_QUIET=1 "$top/sim/rack" down --name "$rack" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
cd "$work" || exit 1
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }

on() { local n=$1; shift; "$top/sim/rack" exec "$n" --name "$rack" -- "$@"; }
kn() { local n=$1; shift; ip netns exec "$k-$n" "$@"; }
tput() {   # RUNNER(server-ns-cmd) RUNNER(client) ADDR [-R]: Mbit/s received
	local srv=$1 cli=$2 addr=$3 rev=${4:-}
	$srv iperf3 -s -1 -D >/dev/null 2>&1; sleep 0.3
	$cli iperf3 -c "$addr" -t "$secs" -J $rev 2>/dev/null |
		jq -r '(.end.sum_received.bits_per_second // 0) / 1e6 | floor'
}
lat() {    # RUNNER ADDR: average RTT in microseconds over 200 pings
	$1 ping -q -c 200 -i 0.005 "$2" 2>/dev/null |
		awk -F/ '/rtt/ { printf "%d", $5 * 1000 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# --- the kernel forwarding between veths -----------------------------------------------
for n in a r b; do ip netns add "$k-$n"; ip -n "$k-$n" link set lo up; done
ip link add eth0 netns "$k-a" type veth peer name ra netns "$k-r"
ip link add eth0 netns "$k-b" type veth peer name rb netns "$k-r"
ip -n "$k-a" addr add 10.20.0.11/24 dev eth0; ip -n "$k-a" link set eth0 up
ip -n "$k-b" addr add 10.10.0.13/24 dev eth0; ip -n "$k-b" link set eth0 up
ip -n "$k-r" addr add 10.20.0.1/24 dev ra; ip -n "$k-r" link set ra up
ip -n "$k-r" addr add 10.10.0.1/24 dev rb; ip -n "$k-r" link set rb up
ip -n "$k-a" route add 10.10.0.0/24 via 10.20.0.1
ip -n "$k-b" route add 10.20.0.0/24 via 10.10.0.1
kn r sysctl -qw net.ipv4.ip_forward=1

# --- the rack with the gateway -----------------------------------------------------------
ib0_up() { # WANT: until gw1's show links has "ib0: ... state UP$WANT" (10 s at most)
	for _ in $(seq 100); do
		on gw1 "$build/bin/gwctl" show links 2>/dev/null | grep -q "^ib0: .*state UP$1" && break
		sleep 0.1
	done
}
cp "$top/sim/etc/rack-gw1.yaml" "$work/gw1.yaml"
chmod 0644 "$work/gw1.yaml"
IBGW_GW_CONFIG=$work/gw1.yaml "$top/sim/rack" up --name "$rack" >/dev/null 2>&1 ||
	{ echo "rack up failed" >&2; exit 1; }
ib0_up ""
on ethhost1 ping -c 2 10.10.0.13 >/dev/null 2>&1
kn a ping -c 2 10.10.0.13 >/dev/null 2>&1

echo "gw_e2e: $(date -u +%F), $(nproc) CPUs, iperf3 ${secs}s, 200 pings at 5 ms; Ethernet host -> IB host"
gw_up=$(tput "on ibhost3" "on ethhost1" 10.10.0.13)
k_up=$(tput "kn b" "kn a" 10.10.0.13)
gw_down=$(tput "on ibhost3" "on ethhost1" 10.10.0.13 -R)
k_down=$(tput "kn b" "kn a" 10.10.0.13 -R)
gw_rtt=$(lat "on ethhost1" 10.10.0.13)
k_rtt=$(lat "kn a" 10.10.0.13)
# GRO on gw1's port: the switch's port toward gw1 a wire (no TSO), gw1's veth merging.
gro() { # on|off
	local tso=on
	[ "$1" = on ] && tso=off
	ip netns exec "$rack-ethsw" ethtool -K gw1 tso "$tso" gso "$tso" >/dev/null 2>&1
	on gw1 ethtool -K eth0 gro "$1" >/dev/null 2>&1
}
gro on
gw_gro=$(tput "on ibhost3" "on ethhost1" 10.10.0.13)
gro off
printf '%-34s %12s %12s %8s\n' "" "ibgwd" "kernel" "ratio"
printf '%-34s %9s Mb %9s Mb %8s\n' "TCP Ethernet -> IB (Mbit/s)" "$gw_up" "$k_up" "$(ratio "$gw_up" "$k_up")"
printf '%-34s %9s Mb %9s Mb %8s\n' "TCP IB -> Ethernet (Mbit/s)" "$gw_down" "$k_down" "$(ratio "$gw_down" "$k_down")"
printf '%-34s %9s us %9s us %8s\n' "ping RTT, average (us)" "$gw_rtt" "$k_rtt" "$(ratio "$gw_rtt" "$k_rtt")"
printf '%-34s %9s Mb %9s Mb %8s\n' "  Ethernet -> IB, GRO on gw1's port" "$gw_gro" "$k_up" "$(ratio "$gw_gro" "$k_up")"
echo "(ratio = ibgwd / kernel; the gateway's path adds the simulated IB fabric and the IB"
echo " host's TAP, which the kernel's veth path does not have)"

# --- connected mode ----------------------------------------------------------------------
# The same rack, the gateway reloaded: its IB port is reopened with buffers for whole RC
# messages (docs/connected-mode.md, "The port's buffers").
sed -i -e 's/mode: datagram/mode: connected/' -e 's/mtu: 2044/mtu: 65520/' "$work/gw1.yaml"
on gw1 "$build/bin/gwctl" reload | grep -q "IB port gw1/1: reopened for connected-mode buffers" ||
	{ echo "reload into connected mode: the IB port was not reopened" >&2; exit 1; }
ib0_up " mtu 65520"
for _ in $(seq 50); do # the gateway's connection to ibhost1 up before the runs
	on ethhost1 ping -c 1 -W 1 10.10.0.11 >/dev/null 2>&1
	on gw1 "$build/bin/gwctl" show connections 2>/dev/null | grep -q "UP$" && break
	sleep 0.1
done
cm_wire=$(tput "on ibhost1" "on ethhost1" 10.10.0.11)
gro on
cm_gro=$(tput "on ibhost1" "on ethhost1" 10.10.0.11)
gro off
on ethhost1 ethtool -K eth0 tx on tso on gso on >/dev/null 2>&1
cm_tso=$(tput "on ibhost1" "on ethhost1" 10.10.0.11)
on ethhost1 ethtool -K eth0 tx off >/dev/null 2>&1
echo "connected mode (ib0 MTU 65520, ibhost1 connected), TCP Ethernet -> IB:"
printf '%-34s %9s Mb %9s Mb %8s\n' "  Ethernet host as a wire" "$cm_wire" "$k_up" "$(ratio "$cm_wire" "$k_up")"
printf '%-34s %9s Mb %9s Mb %8s\n' "  as a wire, GRO on gw1's port" "$cm_gro" "$k_up" "$(ratio "$cm_gro" "$k_up")"
printf '%-34s %9s Mb %9s Mb %8s\n' "  Ethernet host's default offloads" "$cm_tso" "$k_up" "$(ratio "$cm_tso" "$k_up")"
on gw1 "$build/bin/gwctl" -j show stats |
	jq -r '.[0] | "  (super-frames sent whole \(.gso_whole), segmented \(.gso_segmented))"'
