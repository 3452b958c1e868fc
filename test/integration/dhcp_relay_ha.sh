#!/usr/bin/env bash
# DHCP relay in a failover pair (docs/dhcp-relay.md, "Failover pairs"): gw1 and gw2
# (sim/rack up --ha) both relay for ib0, which carries the group svc's service addresses
# (10.10.0.1, fd00:10::1), to Debian's dnsmasq on ethhost1. A client's broadcast reaches
# both boxes through the IPoIB broadcast group. Shows:
#   - only the MASTER relays (gwctl show dhcp: gw1 relaying, gw2 standby), with the
#     service address as giaddr, not its own 10.10.0.2: busybox udhcpc on ibhost3 gets a
#     lease whose router (dnsmasq names the giaddr) is the service address, dnsmasq saw
#     each request once; gw2 counted the requests it left to gw1 (not_serving);
#   - gwctl ha switchover: gw2 relays now, with the same giaddr, and a second client run
#     gets its lease through it while gw1 leaves the requests alone.
# Needs root, ibsim, opensm, jq, dnsmasq (dnsmasq-base), busybox; IBGW_BUILD.
# Run under the rack lock: flock /tmp/ibgw-rack.lock bash test/integration/dhcp_relay_ha.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
. "$top/test/lib/udhcpc.sh"
suite_init dhha

tap_plan 17
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm jq dnsmasq busybox
suite_ibhost_helpers
. "$top/test/lib/ha.sh"

suite_cleanup_hook() {
	[ -f "$work/dnsmasq.pid" ] && kill "$(cat "$work/dnsmasq.pid")" 2>/dev/null
	return 0
}
dj() { g "$1" -j show dhcp | jq -r ".[] | select(.dev == \"ib0\") | $2"; }

ha_pair_up
# Both boxes relay for ib0, by a reload of the rendered configs.
ha_reload_with "dhcp_relay on ib0 (server 10.20.0.11)" \
	's#^(      - fd00:10::[23]/64)$#\1\n    dhcp_relay:\n      servers: 10.20.0.11#'
tap_is "show dhcp: gw1 relaying with the service address as giaddr, gw2 standby" \
	"$(dj gw1 '"\(.state) \(.giaddr)"')/$(dj gw2 .state)" "relaying 10.10.0.1/standby"

# The server (dnsmasq by hand, DHCP only) and the client (udhcpc on ibhost3's ib0 without
# its IPv4 address), as test/integration/dhcp_relay.sh has them. No router option: dnsmasq
# then names the relay's giaddr as the router.
in_ns ethhost1 dnsmasq --conf-file=/dev/null --port=0 --user=root --group=root \
	--interface=eth0 --bind-interfaces --pid-file="$work/dnsmasq.pid" \
	--dhcp-range=10.10.0.100,10.10.0.150,255.255.255.0,10m \
	--dhcp-leasefile="$work/leases" --log-dhcp --log-facility="$work/dnsmasq.log" \
	--dhcp-authoritative
for i in $(seq 30); do [ -s "$work/dnsmasq.pid" ] && break; sleep 0.1; done
in_ns ibhost3 ip -4 addr flush dev ib0
in_ns ibhost3 ip -4 route flush dev ib0
udhcpc_script
lease() {   # run udhcpc once with the BROADCAST flag; prints "ADDRESS NETMASK ROUTER"
	rm -f "$work/lease"
	in_ns ibhost3 timeout 30 busybox udhcpc -i ib0 -f -q -n -B -t 5 -T 2 -s "$work/udhcpc.sh" \
		>"$work/udhcpc.out" 2>&1
	cat "$work/lease" 2>/dev/null
}
n_req() { grep -cE 'DHCP(DISCOVER|REQUEST)\(eth0\)' "$work/dnsmasq.log"; }

tap_like "udhcpc on ibhost3 gets a lease through gw1, the router named is the service address" \
	"$(lease)" '^10\.10\.0\.1([0-4][0-9]|50) 255\.255\.255\.0 10\.10\.0\.1$'
r1=$(dj gw1 .relayed) s2=$(dj gw2 .not_serving)
tap_check "gw1 relayed the client's DISCOVER and REQUEST ($r1)" test "$r1" -ge 2
tap_is "gw2 relayed nothing" "$(dj gw2 .relayed)" 0
tap_is "and counted what it left to gw1 (not serving): as many as gw1 took" "$s2" "$(dj gw1 .requests)"
tap_is "dnsmasq saw each request once (not a copy from each box)" "$(n_req)" "$r1"
tap_check "no trace of gw1's own address (10.10.0.2) in dnsmasq's log" \
	eval '! grep -q "10\.10\.0\.2\b" "$work/dnsmasq.log"'

# --- switchover: gw2 relays --------------------------------------------------------------------
g gw1 ha switchover >/dev/null 2>&1
wait_state gw2 master 10
tap_is "after gwctl ha switchover: gw2 MASTER, gw1 BACKUP" "$(state gw2)/$(state gw1)" master/backup
tap_is "show dhcp: gw2 relaying with 10.10.0.1, gw1 standby" \
	"$(dj gw2 '"\(.state) \(.giaddr)"')/$(dj gw1 .state)" "relaying 10.10.0.1/standby"
before=$(n_req) g1=$(dj gw1 .relayed)
tap_like "a second udhcpc run gets its lease through gw2" "$(lease)" \
	'^10\.10\.0\.1([0-4][0-9]|50) 255\.255\.255\.0 10\.10\.0\.1$'
r2=$(dj gw2 .relayed)
tap_check "gw2 relayed it ($r2)" test "$r2" -ge 2
tap_is "gw1 relayed nothing more" "$(dj gw1 .relayed)" "$g1"
tap_is "dnsmasq saw each request once again" "$(($(n_req) - before))" "$r2"

tap_done
