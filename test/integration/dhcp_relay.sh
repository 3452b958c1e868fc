#!/usr/bin/env bash
# DHCPv4 relay on the simulated rack (gateway/dp_dhcp.h, docs/dhcp-relay.md): ibgwd on gw1
# relays for ib0 to a real DHCP server, Debian's dnsmasq, run by hand on ethhost1 (no
# DNS, a range in 10.10.0.0/24, the gateway as router option). A real client, busybox
# udhcpc, runs on ibhost3's ib0 with its static IPv4 address removed. The kernel there
# sees IPoIB through ibgw-host's TAP, an Ethernet-type device: udhcpc sends htype 1 with
# its MAC, which ibgw-host rewrites into RFC 4390's form (htype 32, hlen 0, chaddr empty,
# client identifier 32 + the 20-octet IPoIB address) and back for replies. Shows:
#   - with the BROADCAST flag (udhcpc -B), DISCOVER/OFFER/REQUEST/ACK cross the relay:
#     the host gets an address in the range and the gateway as its router, the reply
#     reaches it through the IPoIB broadcast group, and the host pings ethhost1 with no
#     static route;
#   - the server saw the relay's giaddr (10.10.0.1) and, with option82 on, the
#     circuit id ib0 and the remote id (dnsmasq's log of the request's option 82);
#   - without the flag, the relay unicasts the replies to yiaddr at the IPoIB address
#     the client identifier carries (no ARP: the client has no address yet);
#   - gwctl show dhcp (text and -j) and the metrics count it;
#   - DHCPv6 (RFC 8415): ISC dhclient -6 on ibhost3 gets an fd00:10:: address from the
#     same dnsmasq, its Solicit to ff02::1:2 wrapped in a Relay-Forward by the gateway;
#   - a reload without the sections stops the relay (no lease), one with them back
#     relays again;
#   - the other way, relayed by eth0: ethhost2 (busybox udhcpc, its address removed) gets
#     a lease in 10.20.0.0/24 from dnsmasq on ibhost2, the replies unicast to its MAC
#     (chaddr) without the flag and broadcast with it, and pings ibhost2.
# Needs root, ibsim, opensm, jq, dnsmasq (dnsmasq-base), busybox, dhclient
# (isc-dhcp-client), curl; IBGW_BUILD.
# Run under the rack lock: flock /tmp/ibgw-rack.lock bash test/integration/dhcp_relay.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
. "$top/test/lib/udhcpc.sh"
suite_init dhcp
rackcmd() { R "$@"; }

tap_plan 30
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm jq dnsmasq busybox dhclient curl
suite_ibhost_helpers

suite_cleanup_hook() {
	[ -f "$work/dnsmasq.pid" ] && kill "$(cat "$work/dnsmasq.pid")" 2>/dev/null
	[ -f "$work/dnsmasq2.pid" ] && kill "$(cat "$work/dnsmasq2.pid")" 2>/dev/null
	[ -f "$work/dh6.pid" ] && kill "$(cat "$work/dh6.pid")" 2>/dev/null
	return 0
}

sed -e '/^ipoib_links:/,$d' "$top/sim/etc/rack-gw1.yaml" >"$work/gw.yaml"
cat >>"$work/gw.yaml" <<'EOF'
metrics:
  listen: "127.0.0.1:9464"

ipoib_links:
  - name: ib0
    backend: verbs
    device: gw1
    port: 1
    pkey: 0xffff
    mode: datagram
    mtu: 2044
    addresses:
      - 10.10.0.1/24
      - fd00:10::1/64
    dhcp_relay:
      servers: [@SERVER@, @SERVER6@]
      option82: true
      remote_id: rack-gw1

ethernet_interfaces:
  - name: eth0
    device: eth0
    mtu: 1500
    addresses:
      - 10.20.0.1/24
      - fd00:20::1/64
    dhcp_relay:
      servers: 10.10.0.12
      max_hops: 2
EOF

t0=$(date +%s)
# The rack's addresses first (ethhost1's decides the server address in the config).
if ! IBGW_GW_NODES= rackcmd up >"$work/up.log" 2>&1; then
	tap_not_ok "rack up" "$(tail -5 "$work/up.log")"
	exit 1
fi
server=$(in_ns ethhost1 ip -4 -o addr show dev eth0 | awk '{ sub("/.*", "", $4); print $4; exit }')
server6=fd00:20::${server##*.} # what hosts_for_gateway gives it (sim/lib/roles.sh)
sed -i "s/@SERVER@/$server/; s/@SERVER6@/$server6/" "$work/gw.yaml"
chmod 0644 "$work/gw.yaml"
if ! IBGW_GW_CONFIG=$work/gw.yaml gateway_start gw1 "$work/gw.yaml" >"$work/gw.log" 2>&1; then
	tap_not_ok "ibgwd on gw1 with dhcp_relay on ib0" "$(tail -5 "$work/gw.log")"
	exit 1
fi
hosts_for_gateway routed
tap_ok "rack up, ibgwd on gw1 relaying DHCP for ib0 to $server (ethhost1)"
wait_up ib0 20

# The server: dnsmasq by hand, DHCP only (--port=0), a range in the IB hosts' subnet,
# which it serves for relayed requests with giaddr in it.
in_ns ethhost1 dnsmasq --conf-file=/dev/null --port=0 --user=root --group=root \
	--interface=eth0 --bind-interfaces --pid-file="$work/dnsmasq.pid" \
	--dhcp-range=10.10.0.100,10.10.0.150,255.255.255.0,10m --dhcp-option=3,10.10.0.1 \
	--dhcp-range=fd00:10::100,fd00:10::1ff,64,10m \
	--dhcp-leasefile="$work/leases" --log-dhcp --log-facility="$work/dnsmasq.log" \
	--dhcp-authoritative
for i in $(seq 30); do [ -s "$work/dnsmasq.pid" ] && break; sleep 0.1; done
tap_ok "dnsmasq serving 10.10.0.100-150 on ethhost1 (pid $(cat "$work/dnsmasq.pid" 2>/dev/null))"

# The client: ibhost3's ib0 without its IPv4 address; udhcpc's script sets what it gets.
in_ns ibhost3 ip -4 addr flush dev ib0
in_ns ibhost3 ip -4 route flush dev ib0
udhcpc_script
tap_is "ibhost3: no IPv4 address on ib0 before" "$(in_ns ibhost3 ip -4 -o addr show dev ib0)" ""

s=$(date +%s.%N)
out=$(in_ns ibhost3 timeout 30 busybox udhcpc -i ib0 -f -q -n -B -t 5 -T 2 -s "$work/udhcpc.sh" 2>&1)
rc=$?
echo "# udhcpc -B took $(echo "$(date +%s.%N) - $s" | bc 2>/dev/null || echo '?') s"
tap_is "udhcpc -B on ibhost3 got a lease" "$rc" 0
if [ "$rc" != 0 ]; then
	{ echo "$out"; tail -20 "$work/dnsmasq.log"
	  in_ns gw1 curl -s http://127.0.0.1:9464/metrics | grep -E '^ibgw_dhcp|^ibgw_sp|punt'
	  dump ibhost3 stats; gwctl show stats; in_ns ethhost1 ip route; } | sed 's/^/# /'
fi
addr=$(in_ns ibhost3 ip -4 -o addr show dev ib0 | awk '{ sub("/.*", "", $4); print $4; exit }')
tap_like "ibhost3: its ib0 address is in dnsmasq's range" "$addr" '^10\.10\.0\.1([0-4][0-9]|50)$'
tap_like "ibhost3: default route via the gateway (router option)" \
	"$(in_ns ibhost3 ip -4 route show default)" '^default via 10\.10\.0\.1 dev ib0'
# dnsmasq's own interface is in 10.20.0.0/24: it answers from 10.10.0.0/24 only for a
# relayed request whose giaddr is in it (10.10.0.1).
tap_like "dnsmasq acknowledged the address, chosen by the relay's giaddr" \
	"$(cat "$work/dnsmasq.log")" "DHCPACK\(eth0\) $addr "
# dnsmasq echoes option 82 in its replies (RFC 3046 2.2) and logs it: sub-option 1, 3
# octets "ib0", sub-option 2, 8 octets "rack-gw1" (the log cuts it after 14 octets).
tap_like "dnsmasq got option 82: circuit id ib0, remote id rack-gw1" \
	"$(grep -m1 'option: 82' "$work/dnsmasq.log")" \
	'option: 82 agent-id +01:03:69:62:30:02:08:72:61:63:6b:2d:67:77'
tap_like "dnsmasq's lease names ibhost3's address" "$(cat "$work/leases")" " $addr "
tap_is "ibhost3 (DHCP address) pings ethhost1 through the gateway" "$(pings ibhost3 "$server")" 3
tap_is "ethhost1 pings ibhost3's DHCP address" "$(pings ethhost1 "$addr")" 3

dj() { gwctl -j show dhcp | jq -r ".[] | select(.dev == \"ib0\") | $1"; }
tap_is "show dhcp -j: ib0 relaying, giaddr 10.10.0.1, servers $server,$server6" \
	"$(dj '"\(.state) \(.giaddr) \(.servers | join(","))"')" "relaying 10.10.0.1 $server,$server6"
# DISCOVER and REQUEST at least (udhcpc may send one again): each relayed with option
# 82; OFFER and ACK at least, each broadcast (the flag).
tap_is "show dhcp -j: every request relayed with option 82, every reply broadcast" \
	"$(dj '"\(.requests >= 2) \(.relayed == .requests) \(.option82_added == .requests) \(.replies >= 2) \(.replies_broadcast == .replies) \(.send_failed)"')" \
	"true true true true true 0"
tap_like "ibgw-host rewrote the DHCP messages (RFC 4390 form)" \
	"$(dump ibhost3 stats)" 'dhcp_rewritten [1-9]'

# Without the BROADCAST flag: the relay unicasts OFFER and ACK to yiaddr at the IPoIB
# address the request's client identifier carried (dnsmasq does not echo option 61).
in_ns ibhost3 ip -4 addr flush dev ib0
rm -f "$work/lease"
u0=$(dj .replies_unicast)
out=$(in_ns ibhost3 timeout 30 busybox udhcpc -i ib0 -f -q -n -t 5 -T 2 -s "$work/udhcpc.sh" 2>&1)
rc=$?
tap_is "udhcpc without -B got a lease too" "$rc" 0
[ "$rc" = 0 ] || echo "$out" | sed 's/^/# /'
tap_like "... in the range, the gateway as router" "$(cat "$work/lease" 2>/dev/null)" \
	'^10\.10\.0\.1[0-9]+ 255\.255\.255\.0 10\.10\.0\.1$'
tap_is "show dhcp -j: OFFER and ACK unicast to the client's IPoIB address, none lost" \
	"$(dj '"\(.replies_unicast - '"$u0"' >= 2) \(.replies == .replies_broadcast + .replies_unicast) \(.ib_no_client_hw) \(.send_failed)"')" \
	"true true 0 0"
tap_like "show dhcp (text)" "$(gwctl show dhcp | tr -s ' \n' ' ')" \
	"^ib0 relaying giaddr 10\.10\.0\.1 servers $server,$server6 option82 remote_id rack-gw1 max_hops 4 requests [0-9]+ relayed [0-9]+ .* replies [0-9]+ broadcast [0-9]+ unicast [1-9]"
tap_is "metrics: ibgw_dhcp_relay_relayed_total for ib0 as show dhcp counts" \
	"$(in_ns gw1 curl -s http://127.0.0.1:9464/metrics | grep '^ibgw_dhcp_relay_relayed_total{dev="ib0"}')" \
	"ibgw_dhcp_relay_relayed_total{dev=\"ib0\"} $(dj .relayed)"
# DHCPv6 (RFC 8415): ISC dhclient -6 on ibhost3's ib0 solicits ff02::1:2 (the gateway
# joined its MGID), the gateway wraps it in a Relay-Forward (link-address fd00:10::1,
# Interface-ID ib0) to dnsmasq, and unwraps the Relay-Reply to the client's link-local
# address: the lease file holds an address of dnsmasq's fd00:10::100-1ff range.
wait_dad ibhost3
r6=$(dj .relayed)
s=$(date +%s.%N)
in_ns ibhost3 timeout 40 dhclient -6 -1 -v -lf "$work/lease6" -pf "$work/dh6.pid" \
	-sf /bin/true ib0 >"$work/dh6.log" 2>&1
rc=$?
echo "# dhclient -6 took $(echo "$(date +%s.%N) - $s" | bc 2>/dev/null || echo '?') s"
tap_is "dhclient -6 on ibhost3 got a lease through the relay" "$rc" 0
[ "$rc" = 0 ] || { cat "$work/dh6.log"; grep -i dhcpv6 "$work/dnsmasq.log" | tail -5; gwctl show dhcp; } | sed 's/^/# /'
tap_like "... an address of fd00:10::100-1ff" "$(grep -m1 iaaddr "$work/lease6" 2>/dev/null)" \
	'iaaddr fd00:10::1[0-9a-f][0-9a-f] '
tap_is "show dhcp -j: the Solicit and the Request relayed" "$(dj ".relayed - $r6 >= 2")" true
[ -f "$work/dh6.pid" ] && kill "$(cat "$work/dh6.pid")" 2>/dev/null

# A reload without the section: no relay (the broadcasts are martians again); with it
# back, a lease again.
cp "$work/gw.yaml" "$work/gw-relay.yaml"
sed -i '/dhcp_relay:/,/\(remote_id\|max_hops\):/d' "$work/gw.yaml"
gwctl reload >/dev/null 2>&1
tap_is "reload without dhcp_relay: show dhcp -j lists nothing" "$(gwctl -j show dhcp | jq length)" 0
in_ns ibhost3 ip -4 addr flush dev ib0
r0=$(in_ns gw1 curl -s http://127.0.0.1:9464/metrics | grep -c '^ibgw_dhcp_relay_requests_total')
in_ns ibhost3 timeout 20 busybox udhcpc -i ib0 -f -q -n -B -t 2 -T 1 -s "$work/udhcpc.sh" >/dev/null 2>&1
tap_is "... udhcpc gets no lease, the metrics have no relay families" "$?/$r0" "1/0"
cp "$work/gw-relay.yaml" "$work/gw.yaml"
gwctl reload >/dev/null 2>&1
in_ns ibhost3 timeout 30 busybox udhcpc -i ib0 -f -q -n -B -t 5 -T 2 -s "$work/udhcpc.sh" >/dev/null 2>&1
tap_is "reload with dhcp_relay back: a lease again" "$?" 0
# The other way: clients on Ethernet (ethhost2, its address removed), the server on the
# IB side (dnsmasq on ibhost2, a range in 10.20.0.0/24), relayed by eth0. Replies go
# to ff:ff:ff:ff:ff:ff with the flag, else to the client's MAC (chaddr).
in_ns ibhost2 dnsmasq --conf-file=/dev/null --port=0 --user=root --group=root \
	--interface=ib0 --bind-interfaces --pid-file="$work/dnsmasq2.pid" \
	--dhcp-range=10.20.0.100,10.20.0.150,255.255.255.0,10m --dhcp-option=3,10.20.0.1 \
	--dhcp-leasefile="$work/leases2" --log-dhcp --log-facility="$work/dnsmasq2.log"
for i in $(seq 30); do [ -s "$work/dnsmasq2.pid" ] && break; sleep 0.1; done
in_ns ethhost2 ip -4 addr flush dev eth0
ej() { gwctl -j show dhcp | jq -r ".[] | select(.dev == \"eth0\") | $1"; }
rm -f "$work/lease"
in_ns ethhost2 timeout 30 busybox udhcpc -i eth0 -f -q -n -t 5 -T 2 -s "$work/udhcpc.sh" >"$work/u2.log" 2>&1
rc=$?
tap_is "ethhost2 (udhcpc, no flag) got a lease from dnsmasq on ibhost2 through eth0's relay" "$rc" 0
[ "$rc" = 0 ] || sed 's/^/# /' "$work/u2.log" "$work/dnsmasq2.log"
eaddr=$(in_ns ethhost2 ip -4 -o addr show dev eth0 | awk '{ sub("/.*", "", $4); print $4; exit }')
tap_like "... in 10.20.0.100-150, the gateway as router" "$(cat "$work/lease" 2>/dev/null)" \
	'^10\.20\.0\.1([0-4][0-9]|50) 255\.255\.255\.0 10\.20\.0\.1$'
tap_is "show dhcp -j: eth0 relayed, replies unicast to chaddr, none broadcast, none lost" \
	"$(ej '"\(.relayed >= 2) \(.replies_unicast >= 2) \(.replies_broadcast) \(.send_failed)"')" \
	"true true 0 0"
in_ns ethhost2 ip -4 addr flush dev eth0
in_ns ethhost2 timeout 30 busybox udhcpc -i eth0 -f -q -n -B -t 5 -T 2 -s "$work/udhcpc.sh" >/dev/null 2>&1
tap_is "ethhost2 with the flag: a lease, the replies broadcast" "$?/$(ej '.replies_broadcast >= 2')" "0/true"
tap_is "ethhost2 ($eaddr) pings ibhost2 through the gateway" \
	"$(pings ethhost2 10.10.0.12)" 3
echo "# the suite ran in $(( $(date +%s) - t0 )) s"
tap_done
