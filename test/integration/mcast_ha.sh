#!/usr/bin/env bash
# IP multicast in a failover pair (docs/multicast.md, "Failover pairs: no loops"): gw1
# and gw2 (sim/rack up --ha) both with ip_multicast on ib0 and eth0, which carry the
# group svc's service addresses. Both hear the hosts' reports; only the MASTER forwards:
#   - ibhost3 joins 239.1.2.3, ethhost1 sends 100 datagrams: ibhost3 receives 100, gw1
#     (MASTER) forwarded them into ib0, gw2 (BACKUP) none, counting them not_served;
#   - gwctl ha switchover: the next 100 go through gw2, and gw1 forwards none.
# Needs root, ibsim, opensm, jq, python3; IBGW_BUILD (test/run sets it).
# Run under the rack lock: flock /tmp/ibgw-rack.lock bash test/integration/mcast_ha.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
suite_init mch

tap_plan 13
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm jq python3
suite_ibhost_helpers
. "$top/test/lib/ha.sh"
peer=$top/sim/mcast-peer

mc() { g "$1" -j show mcast | jq -r "$2"; }
group_packets() { mc "$1" '.[] | select(.dev == "ib0" and .group == "239.1.2.3") | .packets'; }
if_field() { mc "$1" ".[] | select(.interface == \"$2\") | .$3"; }
recv() {   # PORT: ibhost3 joins 239.1.2.3 and counts 100 datagrams to PORT
	(cd "$work" && in_ns ibhost3 python3 "$peer" recv 239.1.2.3 "$1" ib0 100 30 >"$work/recv-$1" 2>&1) &
	for _ in $(seq 50); do [ -e "$work/READY-239.1.2.3-$1" ] && break; sleep 0.1; done
}
result() {
	for _ in $(seq 400); do [ -s "$work/recv-$1" ] && break; sleep 0.1; done
	head -n1 "$work/recv-$1"
}
ready() {   # NODE: NODE knows the group on ib0 and is a member of its MGID
	for _ in $(seq 100); do
		g "$1" show mcast | grep -q "^ff12:401b:ffff::f01:203 dev ib0 .* joined$" &&
			[ -n "$(group_packets "$1")" ] && return 0
		sleep 0.1
	done
	return 1
}

ha_pair_up
ha_reload_with "ip_multicast on ib0 and eth0" 's#^(      - fd00:(10|20)::[23]/64)$#\1\n    ip_multicast: {}#'

recv 5001
ready gw1
ready gw2
tap_is "both gateways heard ibhost3's report for 239.1.2.3 on ib0" \
	"$(group_packets gw1)/$(group_packets gw2)" 0/0
for _ in $(seq 100); do
	dump ibhost3 groups | grep -q "^group ff12:401b:ffff::f01:203 full joined" && break
	sleep 0.1
done
in_ns ethhost1 python3 "$peer" send 239.1.2.3 5001 eth0 100 8
tap_is "ethhost1 -> 239.1.2.3: ibhost3 received 100" "$(result 5001)" 100
tap_is "gw1 (MASTER) forwarded the 100 into ib0" "$(group_packets gw1)" 100
tap_is "gw2 (BACKUP) forwarded none" "$(group_packets gw2)/$(if_field gw2 ib0 forwarded)" 0/0
tap_is "gw2 counted them not served" "$(if_field gw2 eth0 not_served)" 100

g gw1 ha switchover >/dev/null 2>&1
wait_state gw2 master 5
tap_is "after switchover: gw2 MASTER" "$(state gw2)" master
touch "$work/LEAVE-239.1.2.3-5001"
wait
recv 5002
ready gw2
in_ns ethhost1 python3 "$peer" send 239.1.2.3 5002 eth0 100 8
tap_is "ethhost1 -> 239.1.2.3 again: ibhost3 received 100" "$(result 5002)" 100
tap_is "gw2 (MASTER now) forwarded them" "$(group_packets gw2)" 100
tap_is "gw1 forwarded no more (still 100), counting them not served" \
	"$(group_packets gw1)/$(if_field gw1 eth0 not_served)" 100/100
touch "$work/LEAVE-239.1.2.3-5002"
wait
tap_done
