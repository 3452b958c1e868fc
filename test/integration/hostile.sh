#!/usr/bin/env bash
# Hostile and broken neighbours (issue 20): one Ethernet host floods the gateway while
# two bystanders keep pinging an IB host across it, every 20 ms, IPv4 and IPv6. The
# gateway must keep serving them: at most 1% of their pings lost during each flood,
# and answered again within 1 s of its end; ibgwd's memory bounded across all floods.
# ibgwd runs on gw1 with the rack's default config (sim/etc/rack-gw1.yaml); the flooding
# host is ethhost1 (test/tools/flood, at RATE frames/s, COUNT frames), the bystanders
# ethhost2 -> ibhost3. The floods:
#   scan6  echo requests to COUNT random addresses of the IB side's /64 (a scanner or
#          a worm: every packet a destination the gateway must try to resolve)
#   scan4  echo requests to random addresses of the IB side's /24
#   ns6    Neighbor Solicitations for the gateway from COUNT random sources
#   arp4   ARP requests for the gateway from COUNT random MACs and unused addresses
#          (10.20.0.128/25: a sender claiming a bystander's address is ARP spoofing,
#          which no router without static entries withstands)
# Needs root, ibsim, opensm; IBGW_BUILD (test/run sets it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
suite_init hst

RATE=${HOSTILE_RATE:-10000}
COUNT=${HOSTILE_COUNT:-50000}
MAX_LOSS_PERMILLE=10 # 1%

tap_plan 19
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" \
	"$build/bin/ibgw-fabric" "$build/tools/flood"
suite_need_root
suite_need_cmds ibsim opensm jq
suite_ibhost_helpers
# ibgwd's own memory: anonymous pages (heap, tables, buffers). Not VmRSS, which also
# counts the simulated HCA's shared rings (sim/verbs: 1024 slots of 8 KiB each way,
# 16 MiB a port) as a flood first fills their slots: the device's, bounded by its size.
rss_kib() { awk '/^RssAnon:/ { print $2 }' "/proc/$(rack_pid ibgwd-gw1)/status"; }
. "$top/test/lib/flood.sh"

if ! R up >"$work/up.log" 2>&1; then
	tap_not_ok "rack up with ibgwd on gw1" "$(tail -5 "$work/up.log")"
	exit 1
fi
wait_up ib0 20
wait_dad ibhost3
# Resolve the bystanders' way first: their pings must find the neighbour in place.
in_ns ethhost2 ping -c 2 -i 0.2 -W 2 10.10.0.13 >/dev/null 2>&1
in_ns ethhost2 ping -6 -c 2 -i 0.2 -W 2 fd00:10::13 >/dev/null 2>&1
if in_ns ethhost2 ping -c 3 -i 0.2 -W 2 10.10.0.13 >/dev/null 2>&1 &&
	in_ns ethhost2 ping -6 -c 3 -i 0.2 -W 2 fd00:10::13 >/dev/null 2>&1; then
	tap_ok "rack up; the bystander reaches the IB host across the gateway (IPv4, IPv6)"
else
	tap_not_ok "rack up; the bystander reaches the IB host across the gateway (IPv4, IPv6)"
	exit 1
fi
gw_mac=$(in_ns gw1 cat /sys/class/net/eth0/address)
rss0=$(rss_kib)

# flood_case NAME FLOOD-ARGS...: the flood from ethhost1 with the bystanders on
# ethhost2 pinging ibhost3 through it; four checks.
flood_case() {
	flood_rack_checks "$@"
	sleep 1
	tap_is "$1: 1 s after the flood, the bystander's pings are all answered" \
		"$(in_ns ethhost2 ping -c 5 -i 0.1 -W 1 10.10.0.13 2>&1 | awk '/received/ { print $4 }')" 5
}

flood_case scan6 --mode scan6 --src6 fd00:20::11 --prefix6 fd00:10::/64
flood_case scan4 --mode scan4 --src4 10.20.0.11 --prefix4 10.10.0.0/24
flood_case ns6 --mode ns6 --target6 fd00:20::1 --prefix6 fd00:20::/64
flood_case arp4 --mode arp4 --target4 10.20.0.1 --prefix4 10.20.0.128/25

rss1=$(rss_kib)
echo "# ibgwd RssAnon: $rss0 KiB before the floods, $rss1 KiB after"
tap_is "memory bounded: ibgwd grew by less than 16 MiB across the floods ($rss0 -> $rss1 KiB)" \
	"$([ $((rss1 - rss0)) -lt 16384 ] && echo yes || echo "grew $((rss1 - rss0)) KiB")" yes
tap_like "ibgwd still answers gwctl" "$(gwctl show version 2>&1)" "^ibgwd "
gwctl show stats 2>&1 | sed 's/^/# /' | head -40
tap_done
