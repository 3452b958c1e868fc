#!/usr/bin/env bash
# routers.sh (root): IPoIB across an IB router against the same path inside one subnet,
# and the gap when a router dies, on the two-subnets rack (sim/topologies/two-subnets.topo),
# in one run:
#   - iperf3 TCP and ping RTT from ethhost1 through gw1 to an IB host on subnet A (no
#     router) and to one on subnet B (through rt1): datagram mode (ibhost3 / ibhostb1)
#     and connected mode (ibhost1 / ibhostb2); ratios B/A;
#   - RUNS times (default 3), for rt1 then rt2: with a 1 ms ping from ethhost1 to
#     ibhostb1 (datagram) and to ibhostb2 (connected), the router dies; the longest
#     silence of each ping (of those whose path went through it), and the same when it
#     returns (failback). The router watch polls every 1 s (the default).
# SECONDS_PER_RUN (default 5), RUNS (default 3). IBGW_BUILD: the build dir (default build/).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
export IBGW_BUILD=${IBGW_BUILD:-$top/build}
secs=${SECONDS_PER_RUN:-5}
runs=${RUNS:-3}
rack=rtb$(($$ % 100000))
work=$(mktemp -d /tmp/routers-bench.XXXXXX)
cleanup() {
	RACK_QUIET=1 "$top/sim/rack" down --name "$rack" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
[ "$(id -u)" = 0 ] || { echo "routers.sh: needs root" >&2; exit 1; }
R() { RACK_QUIET=1 "$top/sim/rack" "$@" --name "$rack"; }
in_ns() { local n=$1; shift; ip netns exec "$rack-$n" "$@"; }
mbps() { awk '/receiver/ { v = $7; u = $8 } END { if (u == "Gbits/sec") v *= 1000; print v + 0 }'; }
rtt() { awk -F/ '/^rtt/ { print $5 }'; }

R up two-subnets >/dev/null 2>&1 || { echo "routers.sh: rack up failed" >&2; exit 1; }
for a in 10.10.0.11 10.10.0.13 10.10.0.21 10.10.0.22; do
	for i in $(seq 50); do in_ns ethhost1 ping -c1 -W1 "$a" >/dev/null 2>&1 && break; sleep 0.2; done
done
tcp() {   # NODE ADDR -> Mbit/s ethhost1 -> NODE
	in_ns "$1" iperf3 -s -1 -D >/dev/null
	sleep 0.3
	in_ns ethhost1 iperf3 -c "$2" -t "$secs" -f m 2>/dev/null | mbps
}
lat() { in_ns ethhost1 ping -c 200 -i 0.005 -q "$1" | rtt; }
dg_a=$(tcp ibhost3 10.10.0.13) dg_b=$(tcp ibhostb1 10.10.0.21)
cm_a=$(tcp ibhost1 10.10.0.11) cm_b=$(tcp ibhostb2 10.10.0.22)
rtt_dg_a=$(lat 10.10.0.13) rtt_dg_b=$(lat 10.10.0.21)
rtt_cm_a=$(lat 10.10.0.11) rtt_cm_b=$(lat 10.10.0.22)

gap() {   # FILE FROM TO -> longest silence (ms) between replies in [FROM, TO]
	python3 - "$@" <<'EOF'
import re, sys
f, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
rx = [float(m.group(1)) for m in re.finditer(r'^\[(\d+\.\d+)\].*icmp_seq', open(f).read(), re.M)]
rx = [t for t in rx if t0 <= t <= t1]
print(round(max((b - a for a, b in zip(rx, rx[1:])), default=t1 - t0) * 1000))
EOF
}
# Which router carries the gateway's path to ADDR (its LID on A: rt1 or rt2).
gwctl() { in_ns gw1 "$IBGW_BUILD/bin/gwctl" -S "/run/ibgw-sim/$rack/nodes/gw1/ibgwd.sock" "$@"; }
st=$("$top/sim/rack" fabric stats --name "$rack")
rt1_a=$(jq -r '.routers[] | select(.node == "rt1") | .ports[] | select(.port == 1) | .lid' <<<"$st")
carrier() {   # datagram|connected -> rt1|rt2
	local d
	if [ "$1" = datagram ]; then
		d=$(gwctl -j show neighbours | jq -r '.[] | select(.dst == "10.10.0.21") | .path.dlid')
	else
		d=$(gwctl -j show connections | jq -r '.[] | select(.state == "established") | .dlid' | head -n1)
	fi
	[ "$((d))" = "$rt1_a" ] && echo rt1 || echo rt2
}
fo=()
for r in $(seq "$runs"); do
	for rt in rt1 rt2; do
		c_ud=$(carrier datagram) c_cm=$(carrier connected)
		in_ns ethhost1 ping -D -i 0.001 -w 10 -W 1 10.10.0.21 >"$work/ud" 2>&1 &
		p1=$!
		in_ns ethhost1 ping -D -i 0.001 -w 10 -W 1 10.10.0.22 >"$work/cm" 2>&1 &
		p2=$!
		sleep 1.5
		td=$(date +%s.%N)
		R link "$rt" down >/dev/null
		sleep 4
		tu=$(date +%s.%N)
		R link "$rt" up >/dev/null
		sleep 4
		te=$(date +%s.%N)
		wait $p1 $p2
		g_ud=$(gap "$work/ud" "$td" "$tu") g_cm=$(gap "$work/cm" "$td" "$tu")
		[ "$c_ud" = "$rt" ] || g_ud="($g_ud)"
		[ "$c_cm" = "$rt" ] || g_cm="($g_cm)"
		fo+=("$r $rt $g_ud $g_cm $(gap "$work/ud" "$tu" "$te") $(gap "$work/cm" "$tu" "$te")")
		sleep 2
	done
done

printf 'two-subnets rack, ethhost1 -> gw1 -> IB host, iperf3 TCP %s s each, same run (%s cores, load %s)\n' \
	"$secs" "$(nproc)" "$(cut -d' ' -f1 /proc/loadavg)"
printf '                          subnet A (no router)   subnet B (through rt1)   B/A\n'
printf '  TCP datagram   Mbit/s   %20.1f   %22.1f   %5.2f\n' "$dg_a" "$dg_b" "$(awk -v a="$dg_a" -v b="$dg_b" 'BEGIN { print b / a }')"
printf '  TCP connected  Mbit/s   %20.1f   %22.1f   %5.2f\n' "$cm_a" "$cm_b" "$(awk -v a="$cm_a" -v b="$cm_b" 'BEGIN { print b / a }')"
printf '  RTT datagram   ms       %20.3f   %22.3f   %5.2f\n' "$rtt_dg_a" "$rtt_dg_b" "$(awk -v a="$rtt_dg_a" -v b="$rtt_dg_b" 'BEGIN { print b / a }')"
printf '  RTT connected  ms       %20.3f   %22.3f   %5.2f\n' "$rtt_cm_a" "$rtt_cm_b" "$(awk -v a="$rtt_cm_a" -v b="$rtt_cm_b" 'BEGIN { print b / a }')"
printf 'a router dies under a 1 ms ping (router watch every 1000 ms): longest silence, ms\n'
printf '(in parentheses: that ping did not go through the router that died)\n'
printf '  run  router   datagram   connected   | back: datagram   connected\n'
for l in "${fo[@]}"; do
	# shellcheck disable=SC2086
	printf '  %3s  %6s   %8s   %9s   |       %8s   %9s\n' $l
done
