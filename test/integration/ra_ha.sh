#!/usr/bin/env bash
# Router advertisements in a failover pair (docs/router-advertisements.md, "Failover"):
# gw1 and gw2 (sim/rack up --ha) both configured to advertise on ib0 and eth0, which
# carry the group svc's service addresses; the hosts have no IPv6 route of their own
# (IBGW_GW_MODE=none). Shows:
#   - only the MASTER (gw1) advertises: the hosts' kernels have one default router, gw1's
#     link-local, on each side; gw2 shows its interfaces idle;
#   - gwctl ha switchover: gw1, stepping down, sends final RAs (router lifetime 0) and
#     the hosts drop it at once; gw2 advertises at once and the hosts take it instead.
# Needs root, ibsim, opensm, jq; IBGW_BUILD (test/run sets it).
# Run under the rack lock: flock /tmp/ibgw-rack.lock bash test/integration/ra_ha.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
suite_init rah

tap_plan 13
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm jq
suite_ibhost_helpers
. "$top/test/lib/ha.sh"

routers() {   # NODE DEV: the kernel's default routers there, sorted, one line
	in_ns "$1" ip -6 route show default dev "$2" 2>/dev/null |
		grep -oE 'via fe80::[0-9a-f:]+' | awk '{ print $2 }' | sort | paste -sd' ' -
}
wait_routers() {   # NODE DEV WANT SECONDS
	local i
	for i in $(seq $(($4 * 10))); do
		[ "$(routers "$1" "$2")" = "$3" ] && return 0
		sleep 0.1
	done
	return 1
}
ra() { g "$1" -j show ra | jq -r --arg d "$2" ".[] | select(.dev == \$d) | $3"; }

t0=$(date +%s)
IBGW_GW_MODE=none ha_pair_up "hosts without IPv6 routes"
# Router advertisements on both boxes' ib0 and eth0, by a reload of the rendered configs.
ha_reload_with "router_advertisements on ib0 and eth0" \
	's#^(      - fd00:(10|20)::[23]/64)$#\1\n    router_advertisements:\n      max_interval_ms: 4000\n      router_lifetime_s: 600#'
for i in $(seq 50); do
	[ "$(ra gw1 eth0 .state)/$(ra gw1 ib0 .state)" = advertising/advertising ] && break
	sleep 0.1
done
tap_is "gw1 (MASTER) advertises on eth0 and ib0" "$(ra gw1 eth0 .state)/$(ra gw1 ib0 .state)" \
	advertising/advertising
tap_is "gw2 (BACKUP) does not" "$(ra gw2 eth0 .state)/$(ra gw2 ib0 .state)" idle/idle
g1e=$(ra gw1 eth0 .source)
g1i=$(ra gw1 ib0 .source)
wait_routers ethhost1 eth0 "$g1e" 10
tap_is "ethhost1: one default router, gw1's eth0 link-local" "$(routers ethhost1 eth0)" "$g1e"
wait_routers ibhost3 ib0 "$g1i" 10
tap_is "ibhost3: one default router, gw1's ib0 link-local" "$(routers ibhost3 ib0)" "$g1i"

# --- switchover: gw1 steps down ------------------------------------------------------------
g gw1 ha switchover >/dev/null 2>&1
wait_state gw2 master 5
tap_is "after switchover: gw2 MASTER" "$(state gw2)" master
for i in $(seq 30); do
	[ -n "$(ra gw2 eth0 .source)" ] && [ "$(ra gw2 eth0 .state)" = advertising ] && break
	sleep 0.1
done
g2e=$(ra gw2 eth0 .source)
g2i=$(ra gw2 ib0 .source)
tap_like "gw1 sent final RAs (router lifetime 0) on both" \
	"$(ra gw1 eth0 .ra_sent_final) $(ra gw1 ib0 .ra_sent_final)" '^[1-9][0-9]* [1-9]'
wait_routers ethhost1 eth0 "$g2e" 5
tap_is "ethhost1: gw1 dropped at once, gw2 the default router" "$(routers ethhost1 eth0)" "$g2e"
wait_routers ibhost3 ib0 "$g2i" 5
tap_is "ibhost3: the same on IPoIB" "$(routers ibhost3 ib0)" "$g2i"
tap_is "gw2 advertises now, gw1 does not" \
	"$(ra gw2 eth0 .state)/$(ra gw1 eth0 .state | sed 's/retracting/idle/')" advertising/idle
t=$(( $(date +%s) - t0 ))
echo "# the suite ran in ${t} s"
tap_done
