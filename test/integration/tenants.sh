#!/usr/bin/env bash
# Tenants on the simulated rack (docs/tenants.md): ibgwd on gw1 carries the default tenant
# (ib0 on P_Key 0xffff, eth0 untagged) and tenant blue (ib1 on P_Key 0x8001, eth20 on
# VLAN 20 of the same eth0), with the SAME subnets in both: 10.10.0.0/24 and fd00:10::/64
# on IB, 10.20.0.0/24 and fd00:20::/64 on Ethernet. Blue's hosts: an IB host on gw2's
# port in partition 0x8001 (ibgw-host, 10.10.0.12 like ibhost2, plus 10.50.0.12) and an
# Ethernet host "ethb" on the rack's switch sending in VLAN 20 (10.20.0.11 like
# ethhost1). Each host runs a small TCP server that answers with its own name. Shows:
#   - gwctl: links and routes per tenant (show routes tenant blue / all), route add/del
#     in a tenant, an unknown tenant refused;
#   - the same address reaches a different host in each tenant, both ways, IPv4 and
#     IPv6 (the servers' names);
#   - nothing crosses tenants: blue's Ethernet host gets "net unreachable" from blue's
#     gateway address for a prefix only the default tenant routes, and no answer from
#     10.10.0.13 (ibhost3 is the default tenant's); a blue IB host cannot reach a
#     default Ethernet host;
#   - a route says so and it crosses: a reload adds a route in blue to ethhost2 through
#     eth0 (default) and one in the default tenant back to 10.50.0.0/24 through ib1;
#     blue's IB host and ethhost2 ping each other;
#   - kernel export: blue's routes in its own table (102), not in the default's (100);
#   - metrics carry the tenant label;
#   - a reload without the tenant removes it (and its links), the default still forwards.
# Needs root, ibsim, opensm, jq, curl, python3, tc; IBGW_BUILD (with its tools).
# Run under the rack lock: flock /tmp/ibgw-rack.lock bash test/integration/tenants.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
. "$top/test/lib/vlan_host.sh"
suite_init tenant
rackcmd() { R "$@"; }

tap_plan 31
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
vlan_host_need_built
suite_need_root
suite_need_cmds ibsim opensm jq curl python3 tc
suite_ibhost_helpers

suite_cleanup_hook() {
	local f
	for f in "$work"/srv-*.pid; do
		[ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	ip netns del "$rack-ethb" 2>/dev/null
	return 0
}

# serve NODE NAME: a TCP server on port 7777 (both families) answering NAME.
serve() {
	# Not through in_ns: a function in the background is a subshell, and killing it
	# would leave the server (and the rack lock's fd it inherited) behind.
	ip netns exec "$rack-$1" python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET6)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", 7777))
s.listen(8)
while True:
    c, _ = s.accept()
    c.sendall(sys.argv[1].encode() + b"\n")
    c.close()' "$2" >/dev/null 2>&1 &
	echo $! >"$work/srv-$1.pid"
}
# ask NODE ADDR: the name the server at ADDR answers, tried for up to 6 s (a first
# packet may wait for neighbour resolution), or "none".
ask() {
	local i out
	for i in 1 2 3; do
		out=$(in_ns "$1" timeout 2 bash -c "exec 3<>/dev/tcp/$2/7777 && cat <&3" 2>/dev/null)
		[ -n "$out" ] && { echo "$out"; return; }
		sleep 0.5
	done
	echo none
}
metric() { in_ns gw1 curl -s http://127.0.0.1:9464/metrics | grep -F "$1" | awk '{ print $2 }'; }

cat >"$work/gw.yaml" <<'EOF'
gateway:
  name: gw1
  workers: 1
  user: nobody
  group: nogroup
logging:
  level: info
  target: stderr
metrics:
  listen: "127.0.0.1:9464"
kernel_routes:
  export_table: 100
tenants:
  - name: blue
    export_table: 102
ipoib_links:
  - name: ib0
    device: gw1
    addresses: [10.10.0.1/24, "fd00:10::1/64"]
  - name: ib1
    tenant: blue
    device: gw1
    pkey: 0x8001
    addresses: [10.10.0.1/24, "fd00:10::1/64", 10.50.0.1/24]
ethernet_interfaces:
  - name: eth0
    device: eth0
    addresses: [10.20.0.1/24, "fd00:20::1/64"]
  - name: eth20
    tenant: blue
    device: eth0
    vlan: 20
    addresses: [10.20.0.1/24, "fd00:20::1/64"]
routes:
  - prefix: 10.70.0.0/24
    via: 10.10.0.13
EOF
# The leak, for a reload: blue reaches ethhost2 through the default tenant's eth0, and
# the default tenant reaches blue's 10.50.0.0/24 through ib1.
cp "$work/gw.yaml" "$work/leak.yaml"
cat >>"$work/leak.yaml" <<'EOF'
  - prefix: 10.20.0.12/32
    dev: eth0
    tenant: blue
  - prefix: 10.50.0.0/24
    dev: ib1
EOF
# Without the tenant: ib1, eth20 and the tenant gone.
sed -e '/^tenants:/,/^ipoib_links:/{/^ipoib_links:/!d}' -e '/^  - name: ib1/,/^ethernet_interfaces:/{/^ethernet_interfaces:/!d}' \
	-e '/^  - name: eth20/,/^routes:/{/^routes:/!d}' "$work/gw.yaml" >"$work/none.yaml"
chmod 0644 "$work"/*.yaml

if ! IBGW_GW_NODES= rackcmd up >"$work/up.log" 2>&1; then
	tap_not_ok "rack up" "$(tail -5 "$work/up.log")"
	exit 1
fi
# Blue's IB host: ibgw-host on gw2's port in partition 0x8001.
role_start_ibhost_node gw2 0x8001 datagram 10.10.0.12/24 fd00:10::12/64 >"$work/gw2.log" 2>&1
# Its second address (ibgw-host takes one per family) and its routes to blue's Ethernet
# side, once its TAP has its addresses.
for i in $(seq 100); do
	in_ns gw2 ip route replace 10.20.0.0/24 via 10.10.0.1 dev ib0 2>/dev/null && break
	sleep 0.1
done
in_ns gw2 ip addr add 10.50.0.12/24 dev ib0
wait_dad gw2
in_ns gw2 ip -6 route replace fd00:20::/64 via fd00:10::1 dev ib0
# Blue's Ethernet host: a namespace on the rack's switch, its frames in VLAN 20.
vlan_host_up ethb 10.20.0.11/24 10.20.0.1 fd00:20::11/64 fd00:20::1
if ! gateway_start gw1 "$work/gw.yaml" >"$work/gw.log" 2>&1; then
	tap_not_ok "ibgwd on gw1 with tenant blue" "$(tail -5 "$work/gw.log")"
	exit 1
fi
hosts_for_gateway routed
in_ns ethhost2 ip route replace 10.50.0.0/24 via 10.20.0.1
wait_up ib0 20
wait_up ib1 20
wait_up eth20 10
tap_ok "rack up: ibgwd on gw1 with the default tenant and tenant blue (same subnets)"
serve ibhost2 default-ib
serve gw2 blue-ib
serve ethhost1 default-eth
serve ethb blue-eth
sleep 0.5

# --- gwctl --------------------------------------------------------------------------------
links=$(gwctl show links)
tap_like "gwctl show links: ib1 (P_Key 0x8001) in tenant blue" "$links" \
	'ib1: ipoib state UP .*pkey 0x8001 .* tenant blue'
tap_like "gwctl show links: eth20 (VLAN 20) in tenant blue" "$links" \
	'eth20: ether state UP .* vlan 20 backend af_packet tenant blue'
tap_like "gwctl show links: ib0 in the default tenant (no tenant word)" \
	"$(echo "$links" | grep '^ib0:')" 'backend verbs$'
tap_is "gwctl show links tenant blue: ib1 and eth20 only" \
	"$(gwctl show links tenant blue | grep -o '^[a-z0-9]*:' | tr '\n' ' ')" "ib1: eth20: "
blue=$(gwctl show routes tenant blue)
tap_like "gwctl show routes tenant blue: the IB subnet on ib1" "$blue" \
	'^10\.10\.0\.0/24 dev ib1 proto kernel scope link src 10\.10\.0\.1 tenant blue'
tap_is "gwctl show routes (the default tenant): nothing through blue's links" \
	"$(gwctl show routes | grep -cE 'dev (ib1|eth20)')" 0
tap_is "gwctl -j show routes tenant all: both tenants, 10.10.0.0/24 once in each" \
	"$(gwctl -j show routes tenant all | jq -r '.[] | select(.dst == "10.10.0.0/24") | .tenant' | sort | tr '\n' ' ')" \
	"blue default "
tap_like "gwctl show routes tenant nosuch: refused, naming it" \
	"$(gwctl show routes tenant nosuch 2>&1 | tr '\n' ' '; echo "rc=${PIPESTATUS[0]}")" \
	"no tenant 'nosuch' rc=[1-9]"
gwctl route add 10.60.0.0/24 via 10.10.0.12 tenant blue >/dev/null 2>&1
tap_like "gwctl route add ... tenant blue: resolved through blue's ib1" \
	"$(gwctl show routes tenant blue 10.60.0.0/24)" '^10\.60\.0\.0/24 via 10\.10\.0\.12 dev ib1 proto static'
tap_is "... and not in the default tenant" "$(gwctl show routes 10.60.0.0/24)" ""
gwctl route del 10.60.0.0/24 tenant blue >/dev/null 2>&1
tap_is "gwctl route del ... tenant blue" "$(gwctl show routes tenant blue 10.60.0.0/24)" ""

# --- the same addresses, two tenants ----------------------------------------------------
tap_is "ethhost1 (default) -> 10.10.0.12: the default tenant's IB host" \
	"$(ask ethhost1 10.10.0.12)" default-ib
tap_is "ethb (blue, VLAN 20) -> 10.10.0.12: blue's IB host (P_Key 0x8001)" \
	"$(ask ethb 10.10.0.12)" blue-ib
tap_is "ethb -> fd00:10::12 (IPv6): blue's IB host" "$(ask ethb fd00:10::12)" blue-ib
tap_is "ethhost1 -> fd00:10::12 (IPv6): the default tenant's IB host" \
	"$(ask ethhost1 fd00:10::12)" default-ib
tap_is "blue's IB host -> 10.20.0.11: blue's Ethernet host" "$(ask gw2 10.20.0.11)" blue-eth
tap_is "ibhost2 (default) -> 10.20.0.11: the default tenant's Ethernet host" \
	"$(ask ibhost2 10.20.0.11)" default-eth

# --- nothing crosses unless a route says so ------------------------------------------------
out=$(in_ns ethb timeout 10 ping -c 2 -i 0.3 -W 2 10.70.0.1 2>&1)
tap_like "ethb -> 10.70.0.1 (routed by the default tenant only): net unreachable from blue's gateway" \
	"$out" 'From 10\.20\.0\.1 icmp_seq=1 Destination Net Unreachable'
tap_is "ethb -> 10.10.0.13 (ibhost3, the default tenant's): no answer (blue has no such host)" \
	"$(pings ethb 10.10.0.13)" 0
tap_is "blue's IB host -> ethhost2 (default Ethernet): nothing" \
	"$(pings gw2 -I 10.50.0.12 10.20.0.12)" 0
tap_like "kernel export: blue's 10.50.0.0/24 in its table 102" \
	"$(in_ns gw1 ip route show table 102 proto 250)" 'unreachable 10\.50\.0\.0/24'
tap_is "kernel export: ... not in the default tenant's table 100" \
	"$(in_ns gw1 ip route show table 100 proto 250 | grep -c '10\.50\.0\.0')" 0

# The daemon reloads the file it started with (-f): the leak's version goes there.
cp "$work/leak.yaml" "$work/gw.yaml"
out=$(gwctl reload 2>&1)
tap_like "reload with a route in blue through eth0 and one back through ib1" "$out" \
	'tenant blue: static routes: 1 added, 0 removed'
tap_is "blue's IB host (10.50.0.12) -> ethhost2 through the leak: 3 of 3" \
	"$(pings gw2 -I 10.50.0.12 10.20.0.12)" 3
tap_is "ethhost2 -> blue's 10.50.0.12 back through ib1: 3 of 3" "$(pings ethhost2 10.50.0.12)" 3

# --- metrics --------------------------------------------------------------------------------
tap_is "metrics: ibgw_link_up{link=\"ib1\",tenant=\"blue\"} 1" \
	"$(metric 'ibgw_link_up{link="ib1",tenant="blue"}')" 1
tap_like "metrics: ibgw_routes per tenant" \
	"$(metric 'ibgw_routes{tenant="blue"}') $(metric 'ibgw_routes{tenant="default"}')" \
	'^[1-9][0-9]* [1-9][0-9]*$'

# --- the tenant removed -------------------------------------------------------------------------
cp "$work/none.yaml" "$work/gw.yaml"
out=$(gwctl reload 2>&1)
tap_like "reload without the tenant: removed" "$out" 'tenant blue: removed'
tap_like "gwctl show routes tenant blue: no such tenant now" \
	"$(gwctl show routes tenant blue 2>&1)" "no tenant 'blue'"
tap_is "the default tenant still forwards: ethhost1 -> 10.10.0.12" \
	"$(ask ethhost1 10.10.0.12)" default-ib
