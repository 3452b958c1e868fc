#!/usr/bin/env bash
# IPoIB ARP and ND across IB subnets (issue 15; seed 004, "IB ARP Across Subnets"), on
# the two-subnets rack (sim/topologies/two-subnets.topo): one IP subnet, 10.10.0.0/24 and
# fd00:10::/64, over IB subnets A (gw1, ibhost1..3) and B (ibhostb1, ibhostb2) joined by
# the IB routers rt1 and rt2. The IB hosts (ibgw-host --mcast-hop-limit 2) and the
# gateway (ipoib_links[].mcast_hop_limit: 2) send their multicast with GRH hop limit 2;
# rt1 joined the IPv4 broadcast group on both subnets and takes the IPv6 solicited-node
# groups on demand (fabric mcast-proxy). Shows, with no static neighbour entry anywhere:
# ibhost1 pings ibhostb1 (IPv4 and IPv6), ibhostb2 pings ibhost2; the capture has the ARP request and the NS on
# A with hop limit 2 and on B, as rt1 sent them on, with 1 (SLID rt1's, B's MLID); the
# ARP reply and the NA come back unicast with a GRH (to rt1's LID on B, hop limit 255,
# then 254 on A); each host's link learned the other's GID (fec0:0:0:a:: / :b::) with a
# path through the router; ibhostb1 pings the gateway, an Ethernet host (ethhost1,
# routed through gw1) pings ibhostb1 in both families, and `gwctl show neighbours` holds
# ibhostb1's GID on subnet B with a path that needs a GRH.
# Needs root, ibsim, opensm, infiniband-diags, tshark, jq; IBGW_BUILD.
# Run alone, under the rack lock: flock /tmp/ibgw-rack.lock bash test/integration/xsubnet.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
. "$top/test/lib/intact.sh"
suite_init xsn

tap_plan 45
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm tshark jq
suite_ibhost_helpers
ctl() { fabric_ctl "$@"; }
# The value after key k in a line of words.
field() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' <<<"$1"; }
ping_ok() { in_ns "$1" ping -c 2 -i 0.3 -W 2 "$2" >/dev/null 2>&1; }

# --- the rack ----------------------------------------------------------------------
t0=$SECONDS
if ! out=$(RACK_QUIET=1 R up two-subnets 2>&1); then
	tap_not_ok "rack $rack (two-subnets) comes up" "$out"
	exit 1
fi
tap_ok "rack $rack (two-subnets) comes up in $((SECONDS - t0)) s"
up=ok
for n in ibhost1 ibhostb1; do wait_link "$n" up 20 || up="$n down"; done
wait_up ib0 20 || up="gw1's ib0 down"
tap_is "ibhost1's, ibhostb1's and the gateway's IPoIB links are up" "$up" ok
wait_dad ibhost1
wait_dad ibhostb1
tap_is "no static neighbour entry on ibhost1, ibhostb1 or ethhost1" \
	"$(for n in ibhost1 ibhostb1 ethhost1; do in_ns "$n" ip neigh show nud permanent; done)" ""

st=$(ctl stats)
rt_lid() { jq -r --arg n "$1" --argjson p "$2" '.routers[] | select(.node == $n) | .ports[] | select(.port == $p) | .lid' <<<"$st"; }
RT1_A=$(rt_lid rt1 1) RT1_B=$(rt_lid rt1 2)
tap_is "rt1 takes the solicited-node groups on demand (mcast-proxy)" \
	"$(jq -c '.routers[] | select(.node == "rt1") | .mcast_proxy' <<<"$st")" \
	'["ff12:601b:ffff::1:ff00:0/104"]'

# --- ibhost1 -> ibhostb1, both families ----------------------------------------------------
cap=$work/xsubnet.pcap
ctl capture start "$cap" >/dev/null
tap_check "ibhost1 pings ibhostb1 (10.10.0.21) through rt1" ping_ok ibhost1 10.10.0.21
tap_check "ibhost1 pings ibhostb1 (fd00:10::21)" ping_ok ibhost1 fd00:10::21
tap_like "ibhost1's kernel resolved both itself (dynamic entries)" \
	"$(in_ns ibhost1 ip neigh show dev ib0 | grep -E '^(10\.10\.0\.21|fd00:10::21) ' | awk '{ print $1, $NF }' | sort | tr '\n' ' ')" \
	'^10\.10\.0\.21 (REACHABLE|STALE|DELAY) fd00:10::21 (REACHABLE|STALE|DELAY) $'
n4=$(dump ibhost1 neigh | grep '^neigh 10.10.0.21 ')
n6=$(dump ibhost1 neigh | grep '^neigh fd00:10::21 ')
GID_B1=$(field "$n4" gid)
tap_like "ibhost1's link learned ibhostb1's GID, on subnet B" "$GID_B1" '^fec0::b:'
tap_is "for both its addresses, with a path through rt1 (its LID on A)" \
	"$(field "$n4" dlid) $(field "$n4" usable) $(field "$n6" gid) $(field "$n6" dlid) $(field "$n6" usable)" \
	"$RT1_A 1 $GID_B1 $RT1_A 1"
m4=$(dump ibhostb1 neigh | grep '^neigh 10.10.0.11 ')
GID_A1=$(field "$m4" gid)
tap_like "and ibhostb1's link ibhost1's, on subnet A, through rt1 (its LID on B)" \
	"$GID_A1 $(field "$m4" dlid) $(field "$m4" usable)" "^fec0::a:[0-9a-f:]+ $RT1_B 1$"

# From B this time: ibhostb2 resolves ibhost2 (a connected-mode host on A) by itself.
tap_check "ibhostb2 pings ibhost2 (10.10.0.12), resolving it from B" ping_ok ibhostb2 10.10.0.12
tap_check "ibhostb2 pings ibhost2 (fd00:10::12)" ping_ok ibhostb2 fd00:10::12
# Both are connected-mode hosts: an RC connection across rt1 (seed 004, "CM across
# subnets"). The passive side (ibhost2, on A) answers along its own path back to rt1's LID
# on A, not to the LIDs in the REQ, which are subnet B's.
conn() { dump "$1" conns | grep "^conn .* gid $2 "; }
GID_H2=$(field "$(dump ibhostb2 neigh | grep '^neigh 10.10.0.12 ')" gid)
GID_HB2=$(field "$(dump ibhost2 neigh | grep '^neigh 10.10.0.22 ')" gid)
c_b2=$(conn ibhostb2 "$GID_H2") c_h2=$(conn ibhost2 "$GID_HB2")
role() { grep -o ' active \| passive ' <<<"$1" | tr -d ' '; }
tap_is "ibhostb2 <-> ibhost2: one RC connection across rt1, established at both ends, one of them passive" \
	"$(field "$c_b2" state) $(field "$c_h2" state) $( (role "$c_b2"; role "$c_h2") | sort | tr '\n' ' ')" \
	"established established active passive "
tap_is "each end sends to rt1's LID on its own subnet (the passive end along its return path)" \
	"$(field "$c_b2" dlid) $(field "$c_h2" dlid)" "$RT1_B $RT1_A"
tap_like "and the pings went over it, both ways" \
	"$(field "$c_h2" tx_packets) $(field "$c_h2" rx_packets)" '^[1-9][0-9]* [1-9][0-9]*$'

# --- the gateway ----------------------------------------------------------------------------
# ethhost1 first: the gateway resolves ibhostb1 itself (its own ARP request and NS).
tap_check "ethhost1 pings ibhostb1 through gw1 (10.10.0.21)" ping_ok ethhost1 10.10.0.21
tap_check "ethhost1 pings ibhostb1 through gw1 (fd00:10::21)" ping_ok ethhost1 fd00:10::21
tap_check "ibhostb1 pings the gateway (10.10.0.1)" ping_ok ibhostb1 10.10.0.1
tap_check "ibhostb1 pings the gateway (fd00:10::1)" ping_ok ibhostb1 fd00:10::1
# Connected mode through the gateway (its link is connected, ibhostb2 too): 4 MiB over
# TCP from ethhost1 to ibhostb2 cross gw1 and rt1 on an RC connection.
head -c 4194304 /dev/urandom >"$work/4m"
tap_is "ethhost1 -> ibhostb2 over TCP through gw1 and rt1, connected mode: 4 MiB intact" \
	"$(intact "$rack-ibhostb2" "$rack-ethhost1" 10.10.0.22 "$work/4m")" \
	"$(sha256sum <"$work/4m" | cut -d' ' -f1)"
tap_check "ethhost1 pings ibhostb2 through gw1 (fd00:10::22), connected mode" ping_ok ethhost1 fd00:10::22
HW_B2=$(field "$(dump ibhostb2 link)" hwaddr)
gc=$(gwctl -j show connections |
	jq -c --arg p "$HW_B2" '.[] | select(.peer == $p) | [.state, .role, .dlid, .tx_packets > 100]')
GID_GW=$(gwctl -j show links | jq -r '.[] | select(.name == "ib0") | .gid')
c_gw=$(conn ibhostb2 "$GID_GW")
tap_like "gwctl show connections: gw1 <-> ibhostb2 established, to rt1's LID on A, carrying it" \
	"$gc" "^\\[\"established\",\"(active|passive)\",\"$(printf '0x%x' "$RT1_A")\",true\\]$"
tap_is "ibhostb2's end: established, the other role, to rt1's LID on B" \
	"$(field "$c_gw" state) $( (role "$c_gw"; jq -r '.[1]' <<<"$gc") | sort | tr '\n' ' ')$(field "$c_gw" dlid)" \
	"established active passive $RT1_B"
ctl capture stop >/dev/null
nb=$(gwctl -j show neighbours dev ib0)
sel() { jq -c --arg d "$1" '.[] | select(.dst == $d) | [.gid, .path.dlid, .path.grh]' <<<"$nb"; }
tap_is "gwctl show neighbours: ibhostb1 (10.10.0.21) with its GID on B, a path to rt1 with a GRH" \
	"$(sel 10.10.0.21)" "[\"$GID_B1\",\"$(printf '0x%x' "$RT1_A")\",true]"
tap_is "and fd00:10::21 likewise" "$(sel fd00:10::21)" "[\"$GID_B1\",\"$(printf '0x%x' "$RT1_A")\",true]"
tap_like "the gateway's neighbour is not permanent (learned)" \
	"$(jq -c '.[] | select(.dst == "10.10.0.21") | .state' <<<"$nb")" '^\["(REACHABLE|STALE|DELAY|PROBE)"\]$'

# --- the capture: multicast across with its hop limit, answers unicast with a GRH ----------
tsh() {
	tshark -r "$cap" -Y "$1" -T fields -E separator=' ' -e infiniband.lrh.dlid \
		-e infiniband.lrh.slid -e infiniband.grh.hoplmt -e infiniband.grh.sgid \
		-e infiniband.grh.dgid -e erf.flags.rxe 2>/dev/null
}
areq=$(tsh 'arp.opcode == 1 && arp.src.proto_ipv4 == 10.10.0.11 && arp.dst.proto_ipv4 == 10.10.0.21' | head -n2)
tap_like "ibhost1's ARP request on A: to the broadcast group, hop limit 2" "$(sed -n 1p <<<"$areq")" \
	"^[0-9]+ [0-9]+ 2 $GID_A1 ff12:401b:ffff::ffff:ffff 0$"
tap_like "on B, as rt1 sent it on: B's MLID, from rt1's LID on B, hop limit 1" "$(sed -n 2p <<<"$areq")" \
	"^[0-9]+ $RT1_B 1 $GID_A1 ff12:401b:ffff::ffff:ffff 0$"
tap_check "(both DLIDs are multicast LIDs)" test "$(awk '$1 >= 49152' <<<"$areq" | wc -l)" = 2
arep=$(tsh 'arp.opcode == 2 && arp.src.proto_ipv4 == 10.10.0.21 && arp.dst.proto_ipv4 == 10.10.0.11' | head -n2)
tap_is "ibhostb1's ARP reply: unicast to rt1's LID on B with a GRH (hop limit 255), then on A (254)" \
	"$(awk '{ print $1 == '"$RT1_B"' || $2 == '"$RT1_A"', $3, $4, $5 }' <<<"$arep" | tr '\n' ' ')" \
	"1 255 $GID_B1 $GID_A1 1 254 $GID_B1 $GID_A1 "
ns=$(tsh "icmpv6.type == 135 && icmpv6.nd.ns.target_address == fd00:10::21 && infiniband.grh.sgid == $GID_A1" | head -n2)
tap_like "ibhost1's NS on A: to the solicited-node group, hop limit 2" "$(sed -n 1p <<<"$ns")" \
	"^[0-9]+ [0-9]+ 2 $GID_A1 ff12:601b:ffff::1:ff00:21 0$"
tap_like "on B, as rt1 sent it on (its LID on B, hop limit 1)" "$(sed -n 2p <<<"$ns")" \
	"^[0-9]+ $RT1_B 1 $GID_A1 ff12:601b:ffff::1:ff00:21 0$"
na=$(tsh "icmpv6.type == 136 && icmpv6.nd.na.target_address == fd00:10::21 && infiniband.grh.dgid == $GID_A1" | head -n2)
tap_is "ibhostb1's NA: unicast with a GRH to rt1 on B (255), then on A (254)" \
	"$(awk '{ print $3, $4, $5 }' <<<"$na" | tr '\n' ' ')" \
	"255 $GID_B1 $GID_A1 254 $GID_B1 $GID_A1 "
tap_is "(the NA on B goes to rt1's LID there)" "$(sed -n 1p <<<"$na" | awk '{ print $1 }')" "$RT1_B"
gwreq=$(tsh 'arp.opcode == 1 && arp.src.proto_ipv4 == 10.10.0.1 && arp.dst.proto_ipv4 == 10.10.0.21' | head -n1)
tap_like "the gateway's own ARP request (mcast_hop_limit: 2) leaves with hop limit 2" \
	"$gwreq" "^[0-9]+ [0-9]+ 2 fec0::a:[0-9a-f:]+ ff12:401b:ffff::ffff:ffff 0$"
tap_is "no packet dropped for its hop limit at a router" "$(ctl stats | jq .drops.hop_limit)" 0
# The gateway's own unicast across (ethhost1's echo request, routed by gw1): its GRH from
# the gateway's GID to ibhostb1's with the SA path's hop limit (255), traffic class and
# flow label (0), to rt1's LID on A; on B from rt1's LID there with the hop limit 254.
echo_rq=$(tshark -r "$cap" -Y "icmp.type == 8 && ip.dst == 10.10.0.21 && infiniband.grh.sgid == $GID_GW" \
	-T fields -E separator=' ' -e infiniband.lrh.dlid -e infiniband.lrh.slid -e infiniband.grh.hoplmt \
	-e infiniband.grh.tclass -e infiniband.grh.flowlabel -e infiniband.grh.dgid 2>/dev/null | head -n2)
GW_LID=$(printf '%d' "$(gwctl -j show links | jq -r '.[] | select(.name == "ib0") | .lid')")
tap_like "the gateway's echo request to ibhostb1: GRH to its GID, hop limit 255, class 0, flow 0, via rt1; on B 254" \
	"$(tr '\n' ' ' <<<"$echo_rq")" \
	"^$RT1_A $GW_LID 255 0 0 $GID_B1 [0-9]+ $RT1_B 254 0 0 $GID_B1 $"

# --- the path MTU across a router ------------------------------------------------------
# rt1's port on B now carries at most 1024 octets of IB payload (the fabric drops more,
# counted). The SA cannot tell: its path to the router says 2048 (the local links).
GUID_RT1_B=$(awk '$1 == "#@router" && $2 == "rt1" { print $4 }' "$RACK_STATE/topology")
ctl router rt1 2 "$RT1_B" "$GUID_RT1_B" 0xfec000000000000b 1024 >/dev/null
mtu_drops() { ctl stats | jq '.drops.mtu'; }
d0=$(mtu_drops)
tap_check "with rt1's B side at 1024 and the SA's path MTU (2048), a 1428-octet packet is lost" \
	eval '! in_ns ethhost1 ping -M do -c 2 -i 0.3 -W 1 -s 1400 10.10.0.21 >/dev/null 2>&1'
tap_check "(dropped at rt1 for its MTU)" test "$(mtu_drops)" -gt "$d0"
# The operator says so with a GID route (source local, the router's MTU): the gateway's
# path to B then has MTU 1024, its datagram MTU towards ibhostb1 1020, and it answers
# bigger packets with "fragmentation needed" / "packet too big" (PMTU discovery).
gateway_stop gw1
{
	cat "$top/sim/etc/rack-gw1-two-subnets.yaml"
	cat <<EOF

gid_routes:
  - prefix: "fec0:0:0:b::/64"
    source: local
    routers:
      - lid: $RT1_A
        mtu: 1024
EOF
} >"$work/gw1-mtu.yaml"
if gateway_start gw1 "$work/gw1-mtu.yaml" >"$work/gw.log" 2>&1 && wait_up ib0 20; then
	tap_ok "gw1 restarted with gid_routes fec0:0:0:b::/64 via rt1, mtu 1024"
else
	tap_not_ok "gw1 restarted with gid_routes fec0:0:0:b::/64 via rt1, mtu 1024" "$(cat "$work/gw.log")"
fi
ping_ok ethhost1 10.10.0.21
ping_ok ethhost1 fd00:10::21
tap_is "gwctl show neighbours: ibhostb1's path MTU 1024, datagram MTU 1020 (both families)" \
	"$(gwctl -j show neighbours | jq -c '[.[] | select(.dst == "10.10.0.21" or .dst == "fd00:10::21") | [.path.mtu, .mtu]]')" \
	'[[1024,1020],[1024,1020]]'
tap_like "a 1428-octet IPv4 packet with DF: fragmentation needed, MTU 1020, from the gateway" \
	"$(in_ns ethhost1 ping -M do -c 1 -W 2 -s 1400 10.10.0.21 2>&1)" 'From 10\.20\.0\.1 .*mtu = 1020'
tap_check "1020 octets go through" in_ns ethhost1 ping -M do -c 2 -i 0.3 -W 2 -s 992 10.10.0.21
tap_like "a 1448-octet IPv6 packet: packet too big, MTU 1020" \
	"$(in_ns ethhost1 ping -M do -c 1 -W 2 -s 1400 fd00:10::21 2>&1)" 'Packet too big: mtu=1020'
head -c 1048576 /dev/urandom >"$work/1m"
tap_is "1 MiB over TCP from ethhost1 to ibhostb1 intact (PMTU discovery through the gateway)" \
	"$(intact "$rack-ibhostb1" "$rack-ethhost1" 10.10.0.21 "$work/1m")" \
	"$(sha256sum <"$work/1m" | cut -d' ' -f1)"

echo "# the suite took $((SECONDS - t0)) s"
tap_done
