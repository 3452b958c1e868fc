#!/usr/bin/env bash
# IP multicast across the gateway on the simulated rack (docs/multicast.md), with the
# rack's own gateway config (sim/etc/rack-gw1.yaml: ip_multicast on ib0 and eth0) and
# the hosts' kernels as members, through sockets (sim/mcast-peer):
#   - Ethernet -> IB: ibhost3 joins 239.1.2.3 (its kernel's IGMPv3 report crosses IPoIB
#     to 224.0.0.22's MGID; ibgw-host joined the group's MGID from /proc/net/igmp);
#     ethhost1 sends 100 datagrams with TTL 8: ibhost3 receives all 100, and ibhost2,
#     which did not join, sees none of them on its TAP (the fabric delivers the MGID to
#     members only); 50 more with TTL 1 are not forwarded (counted ttl_expired);
#   - the same for IPv6: ff0e::1:2, hop limit 8, MLDv2 on both sides;
#   - IB -> Ethernet: ethhost1 joins 239.2.2.2 and ff0e::2:2, ibhost3 sends 100 of each:
#     all arrive; the gateway joined those MGIDs full (show mcast, ib_joins);
#   - gwctl show mcast -j counts them per group; after the receivers leave, the groups
#     go (leave, group-specific queries, last member query time) and ibhost3's
#     ibgw-host leaves the MGID.
# Needs root, ibsim, opensm, jq, python3; IBGW_BUILD (test/run sets it).
# Run under the rack lock: flock /tmp/ibgw-rack.lock bash test/integration/mcast.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
suite_init mct
rackcmd() { R "$@"; }

tap_plan 24
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm jq python3
suite_ibhost_helpers
peer=$top/sim/mcast-peer

mc_json() { gwctl -j show mcast; }
group_field() {   # DEV GROUP JQ-EXPR ("" when no such group)
	mc_json | jq -r --arg d "$1" --arg g "$2" ".[] | select(.dev == \$d and .group == \$g) | $3"
}
if_field() {   # DEV JQ-EXPR
	mc_json | jq -r --arg d "$1" ".[] | select(.interface == \$d) | $2"
}
wait_group() {   # DEV GROUP SECONDS [absent]
	local i g
	for i in $(seq $(($3 * 10))); do
		g=$(group_field "$1" "$2" .group)
		if [ "${4:-}" = absent ]; then [ -z "$g" ] && return 0
		else [ -n "$g" ] && return 0
		fi
		sleep 0.1
	done
	return 1
}
# recv NODE GROUP PORT DEV COUNT: a receiver in the background, its count the first
# line of $work/recv-NODE-GROUP-PORT once it has it (COUNT, or what came in 30 s); it
# stays a member until leave GROUP PORT; returns once it joined
recv() {
	local f=$work/recv-$1-$2-$3
	(cd "$work" && in_ns "$1" python3 "$peer" recv "$2" "$3" "$4" "$5" 30 >"$f" 2>&1) &
	for _ in $(seq 50); do [ -e "$work/READY-$2-$3" ] && break; sleep 0.1; done
	rm -f "$work/READY-$2-$3"
}
result() {   # NODE GROUP PORT: the receiver's count
	local f=$work/recv-$1-$2-$3
	for _ in $(seq 400); do [ -s "$f" ] && break; sleep 0.1; done
	head -n1 "$f" 2>/dev/null
}
leave() { touch "$work/LEAVE-$1-$2"; }
# wait_joined MGID: until the gateway's ib0 is a member of MGID (send-only or full), so
# that what it forwards there does not wait for the join
wait_joined() {
	for _ in $(seq 100); do
		gwctl show mcast | grep -q "^$1 dev ib0 .* joined\$" && return 0
		sleep 0.1
	done
	return 1
}
# host_joined NODE MGID: until NODE's ibgw-host is a full member of MGID (it follows its
# kernel's groups)
host_joined() {
	for _ in $(seq 100); do
		dump "$1" groups | grep -q "^group $2 full joined" && return 0
		sleep 0.1
	done
	return 1
}
send() { in_ns "$1" python3 "$peer" send "$2" "$3" "$4" "$5" "$6"; }
tap_unlike() {
	if printf '%s' "$2" | grep -Eq -- "$3"; then tap_not_ok "$1" "/$3/ matches in:" "$2"; else tap_ok "$1"; fi
}

# The rack's own config, copied so that the reload at the end can take the sections out.
cp "$top/sim/etc/rack-gw1.yaml" "$work/gw.yaml"
chmod 0644 "$work/gw.yaml"
if ! IBGW_GW_CONFIG=$work/gw.yaml rackcmd up >"$work/up.log" 2>&1; then
	tap_not_ok "rack up" "$(tail -5 "$work/up.log")"
	exit 1
fi
tap_ok "rack up with ip_multicast on ib0 and eth0 (sim/etc/rack-gw1.yaml)"
wait_up ib0 20
tap_is "show mcast -j: ib0 and eth0 forward multicast" \
	"$(mc_json | jq -r '[.[] | select(.interface) | .interface] | sort | join(",")')" "eth0,ib0"

# --- Ethernet -> IB, IPv4 --------------------------------------------------------------
recv ibhost3 239.1.2.3 5001 ib0 100
wait_group ib0 239.1.2.3 10
tap_is "ibhost3's IGMP report heard: 239.1.2.3 has members on ib0" \
	"$(group_field ib0 239.1.2.3 .side)" ipoib
(cd "$work" && in_ns ibhost2 python3 "$peer" sniff 239.1.2.3 ib0 8 >"$work/sniff2" 2>&1) &
sniff_pid=$!
for _ in $(seq 50); do [ -e "$work/READY-sniff-239.1.2.3" ] && break; sleep 0.1; done
wait_joined ff12:401b:ffff::f01:203
host_joined ibhost3 ff12:401b:ffff::f01:203
send ethhost1 239.1.2.3 5001 eth0 100 8
tap_is "ethhost1 -> 239.1.2.3 (TTL 8): ibhost3 received all 100" "$(result ibhost3 239.1.2.3 5001)" 100
wait "$sniff_pid"
tap_is "ibhost2 (not a member) saw none of them on its TAP" "$(cat "$work/sniff2")" 0
tap_is "show mcast: 100 packets forwarded into ib0 for 239.1.2.3" \
	"$(group_field ib0 239.1.2.3 .packets)" 100
ttl0=$(if_field eth0 .ttl_expired)
recv ibhost3 239.1.2.3 5002 ib0 50
send ethhost1 239.1.2.3 5002 eth0 50 1
sleep 1
tap_is "TTL 1: the gateway counted 50 not forwarded" "$(( $(if_field eth0 .ttl_expired) - ttl0 ))" 50
tap_is "TTL 1: ibhost3 received none" "$(result ibhost3 239.1.2.3 5002)" 0

# --- Ethernet -> IB, IPv6 --------------------------------------------------------------
recv ibhost3 ff0e::1:2 5003 ib0 100
wait_group ib0 ff0e::1:2 10
tap_is "ibhost3's MLD report heard: ff0e::1:2 has members on ib0" \
	"$(group_field ib0 ff0e::1:2 .side)" ipoib
wait_joined ff12:601b:ffff::1:2
host_joined ibhost3 ff12:601b:ffff::1:2
send ethhost1 ff0e::1:2 5003 eth0 100 8
tap_is "ethhost1 -> ff0e::1:2 (hop limit 8): ibhost3 received all 100" \
	"$(result ibhost3 ff0e::1:2 5003)" 100

# --- IB -> Ethernet ------------------------------------------------------------------------
recv ethhost1 239.2.2.2 5004 eth0 100
recv ethhost1 ff0e::2:2 5005 eth0 100
wait_group eth0 239.2.2.2 10
wait_group eth0 ff0e::2:2 10
tap_is "ethhost1's reports heard: 239.2.2.2 and ff0e::2:2 have members on eth0" \
	"$(group_field eth0 239.2.2.2 .side)/$(group_field eth0 ff0e::2:2 .side)" ethernet/ethernet
wait_joined ff12:401b:ffff::f02:202
wait_joined ff12:601b:ffff::2:2
tap_is "the gateway joined their MGIDs full on ib0 (IB senders heard)" \
	"$(gwctl show mcast | grep -Ec '^(ff12:401b:ffff::f02:202|ff12:601b:ffff::2:2) dev ib0 mlid 0x[0-9a-f]+ qkey 0x[0-9a-f]+ full joined$')" 2
send ibhost3 239.2.2.2 5004 ib0 100 8
send ibhost3 ff0e::2:2 5005 ib0 100 8
tap_is "ibhost3 -> 239.2.2.2: ethhost1 received all 100" "$(result ethhost1 239.2.2.2 5004)" 100
tap_is "ibhost3 -> ff0e::2:2: ethhost1 received all 100" "$(result ethhost1 ff0e::2:2 5005)" 100
tap_is "show mcast: 100 and 100 forwarded into eth0" \
	"$(group_field eth0 239.2.2.2 .packets)/$(group_field eth0 ff0e::2:2 .packets)" 100/100
tap_like "show mcast (text): the interface line and its counters" \
	"$(gwctl show mcast | tr '\n' ' ')" \
	"ip multicast dev eth0 ethernet querier igmp mld groups 2 rate_limit 1000pps .* group 239.2.2.2 dev eth0 members ethernet expires [0-9]+ms packets 100 bytes [0-9]+"

# --- leaving ---------------------------------------------------------------------------
# The receivers close their sockets: the kernels send leaves / dones.
for g in "239.1.2.3 5001" "239.1.2.3 5002" "ff0e::1:2 5003" "239.2.2.2 5004" "ff0e::2:2 5005"; do
	leave $g
done
wait
wait_group ib0 239.1.2.3 10 absent
tap_is "ibhost3 left 239.1.2.3: the group is gone from ib0" "$(group_field ib0 239.1.2.3 .group)" ""
wait_group eth0 239.2.2.2 10 absent
tap_is "ethhost1 left 239.2.2.2: the group is gone from eth0" "$(group_field eth0 239.2.2.2 .group)" ""
for _ in $(seq 50); do
	dump ibhost3 groups | grep -q "group ff12:401b:ffff::f01:203 full" || break
	sleep 0.1
done
tap_unlike "ibhost3's ibgw-host left the MGID of 239.1.2.3 (the kernel left the group)" \
	"$(dump ibhost3 groups)" "group ff12:401b:ffff::f01:203 full"
tap_unlike "the gateway left 239.2.2.2's MGID on ib0" "$(gwctl show mcast)" "ff12:401b:ffff::f02:202 dev ib0 .* full"
tap_is "show mcast -j: ib0 forwarded 200 copies (100 IPv4 + 100 IPv6 from ethhost1; the 50 with TTL 1 not)" \
	"$(if_field ib0 .forwarded)" 200

# --- reload without ip_multicast --------------------------------------------------------
sed -i '/ip_multicast/d' "$work/gw.yaml"
tap_check "reload without the ip_multicast sections" gwctl reload
tap_is "show mcast -j: no multicast interface any more" \
	"$(mc_json | jq -r '[.[] | select(.interface)] | length')" 0
tap_unlike "ib0 left the report groups' MGIDs (224.0.0.22, ff02::16)" "$(gwctl show mcast)" \
	"^ff12:(401b:ffff::16|601b:ffff::16) dev ib0"
tap_done
