#!/usr/bin/env bash
# ipoib_tcp.sh (root): iperf3 TCP between two IB hosts of the simulated rack in IPoIB
# datagram mode and in connected mode (RFC 4755) (ibgw-host on ibhost1/ibhost2: TAP ->
# IPoIB link -> sim port -> fabric; UD with MTU 2044, or an RC connection with MTU
# 65520), from ethhost1 through ibgwd on gw1 to ibhost2 and from ibhost2 back to
# ethhost1 on the same racks, next to two namespaces joined by a plain veth pair, in the
# same run; prints all of them and the ratios. SECONDS_PER_RUN (default 8). IBGW_BUILD:
# the build dir (default build/): run it once per build, back to back, to compare two
# builds (bench/README.md).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
export IBGW_BUILD=${IBGW_BUILD:-$top/build}
secs=${SECONDS_PER_RUN:-8}
rack=ipb$(($$ % 100000))
v1=ipbv1$$ v2=ipbv2$$
cleanup() {
	RACK_QUIET=1 "$top/sim/rack" down --name "$rack" >/dev/null 2>&1
	ip netns del "$v1" 2>/dev/null
	ip netns del "$v2" 2>/dev/null
}
trap cleanup EXIT
[ "$(id -u)" = 0 ] || { echo "ipoib_tcp.sh: needs root" >&2; exit 1; }

mbps() { awk '/receiver/ { v = $7; u = $8 } END { if (u == "Gbits/sec") v *= 1000; print v }'; }

# veth peer
ip netns add "$v1" && ip netns add "$v2"
ip link add veth0 netns "$v1" type veth peer name veth0 netns "$v2"
ip -n "$v1" addr add 10.99.0.1/24 dev veth0 && ip -n "$v1" link set veth0 up
ip -n "$v2" addr add 10.99.0.2/24 dev veth0 && ip -n "$v2" link set veth0 up
ip -n "$v1" link set lo up && ip -n "$v2" link set lo up
ip netns exec "$v2" iperf3 -s -1 -D >/dev/null
sleep 0.3
veth=$(ip netns exec "$v1" iperf3 -c 10.99.0.2 -t "$secs" -f m | mbps)

# IPoIB: one rack per mode (rack.topo runs ibhost1/2 connected; a copy all datagram).
ipoib_run() {   # TOPOLOGY -> Mbit/s "ibhost1 -> ibhost2" "ethhost1 -> gw1 -> ibhost2" "ibhost2 -> gw1 -> ethhost1"
	local ib eth rev
	RACK_QUIET=1 "$top/sim/rack" up "$1" --name "$rack" >/dev/null 2>&1 || { echo "rack up failed" >&2; exit 1; }
	for n in ibhost1 ethhost1; do
		for i in $(seq 100); do
			ip netns exec "$rack-$n" ping -c1 -W1 10.10.0.12 >/dev/null 2>&1 && break
			sleep 0.2
		done
	done
	ip netns exec "$rack-ibhost2" iperf3 -s -1 -D >/dev/null
	sleep 0.3
	ib=$(ip netns exec "$rack-ibhost1" iperf3 -c 10.10.0.12 -t "$secs" -f m | mbps)
	ip netns exec "$rack-ibhost2" iperf3 -s -1 -D >/dev/null
	sleep 0.3
	eth=$(ip netns exec "$rack-ethhost1" iperf3 -c 10.10.0.12 -t "$secs" -f m | mbps)
	ip netns exec "$rack-ethhost1" iperf3 -s -1 -D >/dev/null
	sleep 0.3
	rev=$(ip netns exec "$rack-ibhost2" iperf3 -c 10.20.0.11 -t "$secs" -f m | mbps)
	RACK_QUIET=1 "$top/sim/rack" down --name "$rack" >/dev/null 2>&1
	echo "$ib $eth $rev"
}
dgtopo=$(mktemp /tmp/ipoib_tcp.XXXXXX.topo)
sed 's/^\(#@ipoib [^ ]* [^ ]*\) connected /\1 datagram /' "$top/sim/topologies/rack.topo" >"$dgtopo"
read -r ipoib eth_dg rev_dg <<<"$(ipoib_run "$dgtopo")"
rm -f "$dgtopo"
read -r cm eth_cm rev_cm <<<"$(ipoib_run "$top/sim/topologies/rack.topo")"

printf 'iperf3 TCP, %s s each, same run (%s cores, load %s, %s)\n' "$secs" "$(nproc)" \
	"$(cut -d' ' -f1 /proc/loadavg)" "$IBGW_BUILD"
printf '  veth pair (two namespaces)      %10.1f Mbit/s\n' "$veth"
printf '  IPoIB datagram (ibhost1->2)     %10.1f Mbit/s  (UD, MTU 2044)\n' "$ipoib"
printf '  IPoIB connected (ibhost1->2)    %10.1f Mbit/s  (RC, MTU 65520)\n' "$cm"
printf '  ethhost1->gw1->ibhost2 datagram %10.1f Mbit/s\n' "$eth_dg"
printf '  ethhost1->gw1->ibhost2 connected%10.1f Mbit/s\n' "$eth_cm"
printf '  ibhost2->gw1->ethhost1 datagram %10.1f Mbit/s\n' "$rev_dg"
printf '  ibhost2->gw1->ethhost1 connected%10.1f Mbit/s\n' "$rev_cm"
awk -v a="$ipoib" -v b="$veth" 'BEGIN { printf "  ratio datagram/veth             %10.4f\n", a / b }'
awk -v a="$cm" -v b="$veth" 'BEGIN { printf "  ratio connected/veth            %10.4f\n", a / b }'
awk -v a="$cm" -v b="$ipoib" 'BEGIN { printf "  ratio connected/datagram        %10.2f\n", a / b }'
