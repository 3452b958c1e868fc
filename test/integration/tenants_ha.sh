#!/usr/bin/env bash
# Tenants in a failover pair (docs/tenants.md, docs/failover.md): gw1 and gw2 (sim/rack up
# --ha) carry the default tenant (ib0, eth0, group svc) and tenant blue (ib1 on P_Key
# 0x8001, eth20 on VLAN 20 of eth0) with a failover group of its own, blue, holding blue's
# service addresses 10.10.0.1 and 10.20.0.1: the same addresses as svc's, in the other
# tenant. Blue's hosts: ibhost3's IPoIB endpoint moved to partition 0x8001 (10.10.0.13)
# and an Ethernet host "ethb" on the rack's switch in VLAN 20 (10.20.0.11, like ethhost1;
# tc BPF tags its frames: these kernels have no 802.1Q). Shows:
#   - both groups MASTER on gw1 and BACKUP on gw2; blue's hosts reach each other through
#     blue's service addresses, the default tenant's ethhost1 gets no answer from
#     10.10.0.13 (ibhost3 is blue's now);
#   - gw1 stops: gw2 takes both groups, and ethb and ibhost3 reach each other through it
#     with the same addresses; gw2's blue table has its subnets.
# Needs root, ibsim, opensm, jq, python3, tc; IBGW_BUILD (with its tools).
# Run under the rack lock: flock /tmp/ibgw-rack.lock bash test/integration/tenants_ha.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
. "$top/test/lib/vlan_host.sh"
suite_init tenha

tap_plan 10
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
vlan_host_need_built
suite_need_root
suite_need_cmds ibsim opensm jq python3 tc
suite_ibhost_helpers
. "$top/test/lib/ha.sh"

suite_cleanup_hook() {
	ip netns del "$rack-ethb" 2>/dev/null
	return 0
}
gstate() { # NODE GROUP
	g "$1" -j show ha 2>/dev/null | jq -r ".[] | select(.kind == \"group\" and .group == \"$2\") | .state"
}
wait_group() { # NODE GROUP STATE SECONDS (ha.sh's wait_state knows one group only)
	local i
	for i in $(seq $(($4 * 10))); do
		[ "$(gstate "$1" "$2")" = "$3" ] && return 0
		sleep 0.1
	done
	return 1
}

ha_pair_up
# Tenant blue on both boxes (own addresses .2 on gw1, .3 on gw2) with its group; a
# restart, not a reload: a failover group is made at start.
for n in gw1 gw2; do
	x=$([ "$n" = gw1 ] && echo 2 || echo 3)
	python3 - "$RACK_STATE/nodes/$n/ibgwd.yaml" "$x" <<'EOF'
import sys
f, x = sys.argv[1], sys.argv[2]
s = open(f).read()
s = s.replace("ipoib_links:\n", "tenants:\n  - name: blue\nipoib_links:\n  - name: ib1\n"
              "    tenant: blue\n    device: %s\n    pkey: 0x8001\n    addresses: [10.10.0.%s/24]\n"
              % ("gw1" if x == "2" else "gw2", x), 1)
s = s.replace("ethernet_interfaces:\n", "ethernet_interfaces:\n  - name: eth20\n    tenant: blue\n"
              "    device: eth0\n    vlan: 20\n    addresses: [10.20.0.%s/24]\n" % x, 1)
s = s.rstrip("\n") + ("\n    - name: blue\n      addresses:\n"
                      "        - {address: 10.10.0.1/24, dev: ib1}\n"
                      "        - {address: 10.20.0.1/24, dev: eth20}\n")
open(f, "w").write(s)
EOF
done
gateway_stop gw2
gateway_stop gw1
gateway_start gw1 "$RACK_STATE/nodes/gw1/ibgwd.yaml" >"$work/gw1.log" 2>&1
wait_group gw1 blue master 20
gateway_start gw2 "$RACK_STATE/nodes/gw2/ibgwd.yaml" >"$work/gw2.log" 2>&1
wait_group gw2 blue backup 20
wait_group gw2 svc backup 5
tap_is "group blue: MASTER on gw1, BACKUP on gw2 (svc too)" \
	"$(gstate gw1 blue)/$(gstate gw2 blue) $(gstate gw1 svc)/$(gstate gw2 svc)" \
	"master/backup master/backup"

# Blue's IB host: ibhost3's endpoint moved to partition 0x8001, same address.
rack_stop ibgw-host-ibhost3 TERM
role_start_ibhost_node ibhost3 0x8001 datagram 10.10.0.13/24 >"$work/ibhost3.log" 2>&1
for i in $(seq 100); do
	in_ns ibhost3 ip route replace 10.20.0.0/24 via 10.10.0.1 dev ib0 2>/dev/null && break
	sleep 0.1
done
# Blue's Ethernet host, VLAN 20 (test/lib/vlan_host.sh).
vlan_host_up ethb 10.20.0.11/24 10.20.0.1

tap_is "ethb (blue) -> ibhost3 (blue, 10.10.0.13) through gw1: 3 of 3" "$(pings ethb 10.10.0.13)" 3
tap_is "ibhost3 -> ethb (10.20.0.11 in blue): 3 of 3" "$(pings ibhost3 10.20.0.11)" 3
tap_is "ethhost1 (default) -> 10.10.0.13: no answer (that host is blue's now)" \
	"$(pings ethhost1 10.10.0.13)" 0
tap_like "gw1: blue's table holds its subnet on ib1" "$(g gw1 show routes tenant blue)" \
	'10\.10\.0\.0/24 dev ib1 proto kernel'

# gw1 goes away: gw2 takes both groups.
gateway_stop gw1
wait_group gw2 blue master 10
wait_group gw2 svc master 5
tap_is "gw1 stopped: gw2 MASTER of blue and svc" "$(gstate gw2 blue) $(gstate gw2 svc)" \
	"master master"
tap_is "ethb -> ibhost3 through gw2, the same addresses: 3 of 3" "$(pings ethb 10.10.0.13)" 3
tap_is "ibhost3 -> ethb through gw2: 3 of 3" "$(pings ibhost3 10.20.0.11)" 3
tap_like "gw2: blue's table holds its subnet on ib1" "$(g gw2 show routes tenant blue)" \
	'10\.10\.0\.0/24 dev ib1 proto kernel'
