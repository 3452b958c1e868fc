#!/usr/bin/env bash
# bench/arb.sh: routing between two veths, A - R - B, the Linux kernel forwarding in R
# against ibgwd in R (af_packet on both veths: 1 and 2 workers, and 1 worker that never
# sleeps: gateway.busy_poll_us 1000000; af_xdp on both veths: 1 and 2 workers, and 1
# that never sleeps), in one
# run, printed as ratios ibgwd / kernel (above 1: ibgwd is faster; for the RTT, below 1
# is better). Every veth has two queues (ethtool -L rx 2 tx 2), so that af_xdp's two
# workers each drain a device queue; the kernel and af_packet run on the same veths.
# Root. Figures, not pass/fail (issue 13's comparison).
#
#   bench/arb.sh [BUILD_DIR] [SECONDS]
#
# Per router, IPv4 and IPv6:
#   tcp      iperf3 A -> B, one stream, the hosts with their default offloads (TSO,
#            GSO, checksum offload on: the kernel hands R super-frames of up to 64 KiB)
#   tcp-off  the same with TSO, GSO and GRO off on both hosts (1500-octet frames)
#   tcp-gro  tcp-off with GRO on R's veth from A, as a NIC has it: R receives A's
#            segments merged (both routers; ibgwd's af_packet port leaves GRO on)
#   udp      4 iperf3 UDP streams of 18-octet payloads A -> B, unlimited rate: the
#            packets per second B received
#   rtt      the mean of 500 pings A -> B, 2 ms apart, in microseconds
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
case $build in /*) ;; *) build=$PWD/$build ;; esac
secs=${2:-5}
A=arb-a-$$ R=arb-r-$$ B=arb-b-$$
work=$(mktemp -d /tmp/ibgw-arb.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	for n in $A $R $B; do ip netns del "$n" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
for c in iperf3 jq ethtool; do
	command -v "$c" >/dev/null || { echo "needs $c (make deps)" >&2; exit 1; }
done
[ -x "$build/bin/ibgwd" ] || { echo "no $build/bin/ibgwd (make)" >&2; exit 1; }

for n in $A $R $B; do ip netns add "$n"; ip -n "$n" link set lo up; done
ip link add eth0 netns "$A" type veth peer name ra netns "$R"
ip link add eth0 netns "$B" type veth peer name rb netns "$R"
ip -n "$A" addr add 10.71.0.2/24 dev eth0
ip -n "$A" addr add fd00:71::2/64 dev eth0 nodad
ip -n "$B" addr add 10.72.0.2/24 dev eth0
ip -n "$B" addr add fd00:72::2/64 dev eth0 nodad
for n in $A $B; do ip netns exec "$n" ethtool -L eth0 rx 2 tx 2; done
for d in ra rb; do ip netns exec "$R" ethtool -L "$d" rx 2 tx 2; done
for n in $A $B; do ip -n "$n" link set eth0 up; done
for d in ra rb; do ip -n "$R" link set "$d" up; done
ip -n "$A" route add 10.72.0.0/24 via 10.71.0.1
ip -n "$A" -6 route add fd00:72::/64 via fd00:71::1
ip -n "$B" route add 10.71.0.0/24 via 10.72.0.1
ip -n "$B" -6 route add fd00:71::/64 via fd00:72::1

in_ns() { local n=$1; shift; ip netns exec "$n" "$@"; }
offloads() { # on|off: TSO, GSO, GRO of both hosts' veths
	for n in $A $B; do in_ns "$n" ethtool -K eth0 tso "$1" gso "$1" gro "$1" >/dev/null 2>&1; done
}
r_gro() { in_ns "$R" ethtool -K ra gro "$1" >/dev/null 2>&1; } # on|off: GRO of R's veth from A
tcp() { # ADDR: Mbit/s B received
	in_ns "$B" iperf3 -s -1 -D -B "$1" >/dev/null 2>&1
	sleep 0.3
	in_ns "$A" timeout $((secs + 20)) iperf3 -c "$1" -t "$secs" -J 2>/dev/null |
		jq -r '(.end.sum_received.bits_per_second // 0) / 1e6 | floor'
}
udp() { # ADDR: packets per second B received, 4 streams of 18-octet payloads
	in_ns "$B" iperf3 -s -1 -D -B "$1" >/dev/null 2>&1
	sleep 0.3
	in_ns "$A" timeout $((secs + 20)) iperf3 -c "$1" -u -l 18 -b 0 -P 4 -t "$secs" -J \
		2>/dev/null |
		jq -r --argjson s "$secs" \
			'((.end.sum.packets // 0) - (.end.sum.lost_packets // 0)) / $s | floor'
}
rtt() { # ADDR: mean RTT in microseconds
	in_ns "$A" ping -q -c 500 -i 0.002 "$1" 2>/dev/null |
		awk -F/ '/rtt/ { printf "%d", $5 * 1000 }'
}
# measure NAME: every figure of one router into $work/NAME.
measure() {
	local f=$work/$1 fam a
	: >"$f"
	in_ns "$A" ping -c 2 -W 2 10.72.0.2 >/dev/null 2>&1 # neighbours resolved
	in_ns "$A" ping -6 -c 2 -W 2 fd00:72::2 >/dev/null 2>&1
	for fam in 4 6; do
		[ "$fam" = 4 ] && a=10.72.0.2 || a=fd00:72::2
		offloads on
		echo "tcp$fam $(tcp "$a")" >>"$f"
		offloads off
		echo "tcp-off$fam $(tcp "$a")" >>"$f"
		r_gro on
		echo "tcp-gro$fam $(tcp "$a")" >>"$f"
		r_gro off
		offloads on
		echo "udp$fam $(udp "$a")" >>"$f"
		echo "rtt$fam $(rtt "$a")" >>"$f"
	done
}

# --- the kernel in R -------------------------------------------------------------------
in_ns "$R" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
ip -n "$R" addr add 10.71.0.1/24 dev ra
ip -n "$R" addr add fd00:71::1/64 dev ra nodad
ip -n "$R" addr add 10.72.0.1/24 dev rb
ip -n "$R" addr add fd00:72::1/64 dev rb nodad
sleep 1
measure kernel

# --- ibgwd in R ------------------------------------------------------------------------
ip -n "$R" addr flush dev ra
ip -n "$R" addr flush dev rb
in_ns "$R" sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0 \
	net.ipv6.conf.ra.disable_ipv6=1 net.ipv6.conf.rb.disable_ipv6=1
for run in 1 2 1bp x1 x2 x1bp; do
	w=${run%bp}
	w=${w#x}
	bp=50
	[ "${run%bp}" != "$run" ] && bp=1000000
	be=af_packet
	[ "${run#x}" != "$run" ] && be=af_xdp
	cat >"$work/ibgwd.yaml" <<EOF
gateway:
  name: arb
  workers: $w
  busy_poll_us: $bp
control:
  socket: $work/ibgwd.sock
logging:
  level: warning
ethernet_interfaces:
  - name: ra
    device: ra
    backend: $be
    addresses: [10.71.0.1/24, "fd00:71::1/64"]
  - name: rb
    device: rb
    backend: $be
    addresses: [10.72.0.1/24, "fd00:72::1/64"]
EOF
	# Not through in_ns: $! must be ibgwd's PID (ip netns exec execs it), not a subshell's.
	ip netns exec "$R" "$build/bin/ibgwd" -d -f "$work/ibgwd.yaml" >/dev/null \
		2>"$work/ibgwd-$run.log" &
	pid=$!
	for _ in $(seq 100); do
		[ "$("$build/bin/gwctl" -S "$work/ibgwd.sock" show links 2>/dev/null |
			grep -c 'state UP')" = 2 ] && break
		sleep 0.1
	done
	measure "ibgwd$run"
	kill "$pid"
	wait "$pid" 2>/dev/null
	pid=
done

# --- the table -------------------------------------------------------------------------
val() { awk -v k="$2" '$1 == k { print $2 }' "$work/$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
printf '%-9s %8s %8s %8s %8s %8s %8s %8s %6s %6s %6s %6s %6s %6s\n' case kernel apk-1w \
	apk-2w apk-1wbp xdp-1w xdp-2w xdp-1wbp "a1/k" "a2/k" "a1bp/k" "x1/k" "x2/k" "x1bp/k"
for k in tcp4 tcp-off4 tcp-gro4 udp4 rtt4 tcp6 tcp-off6 tcp-gro6 udp6 rtt6; do
	kv=$(val kernel "$k")
	i1=$(val ibgwd1 "$k")
	i2=$(val ibgwd2 "$k")
	ib=$(val ibgwd1bp "$k")
	x1=$(val ibgwdx1 "$k")
	x2=$(val ibgwdx2 "$k")
	xb=$(val ibgwdx1bp "$k")
	printf '%-9s %8s %8s %8s %8s %8s %8s %8s %6s %6s %6s %6s %6s %6s\n' "$k" "$kv" "$i1" "$i2" \
		"$ib" "$x1" "$x2" "$xb" "$(ratio "$i1" "$kv")" "$(ratio "$i2" "$kv")" \
		"$(ratio "$ib" "$kv")" "$(ratio "$x1" "$kv")" "$(ratio "$x2" "$kv")" "$(ratio "$xb" "$kv")"
done
echo "(tcp, tcp-off, tcp-gro: Mbit/s; udp: packets/s received; rtt: microseconds, lower is better;"
echo " apk: ibgwd with af_packet, xdp: with af_xdp; 1w/2w: workers; bp: never sleeps)"
