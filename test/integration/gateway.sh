#!/usr/bin/env bash
# The gateway end to end on the simulated rack: ibgwd on gw1 (sim/rack starts it with
# sim/etc/rack-gw1.yaml) between the Ethernet hosts (veth, real kernels) and the IB hosts
# (ibgw-host TAPs over IPoIB on the simulated fabric, real kernels). Shows, with what an
# operator sees:
#   routed mode   ping IPv4/IPv6 both ways (a datagram-mode and a connected-mode host
#                 peer, both reached over UD), iperf3 TCP both ways with a byte count;
#                 MTU 1500 vs 2044: a DF ping too big gets "frag needed, mtu 1500", IPv6
#                 gets "packet too big, mtu 1500", the SYN crossing to the smaller MTU has
#                 its MSS clamped to 1460 (tshark on the receiving side); gwctl show
#                 links/routes/neighbours/paths/mcast/stats in text and -j; a capture of
#                 the IB side decoded by tshark with valid IP and ICMP checksums;
#   two partitions and two Ethernet networks at once (ib1 on P_Key 0x8001 with an IB
#                 host on gw2's port, eth1 to a third Ethernet namespace);
#   connected mode  ib0 with mode connected (MTU 65520): the connected-mode IB host over
#                 RC, pings v4/v6 and iperf3 both ways, show connections text/-j, RC
#                 counters, 60028-octet DF ping answered frag needed 1500, PTB, fragments;
#   proxy mode    one shared subnet, no routes on the hosts: proxy ARP/ND both ways,
#                 IPv4 and IPv6 pings and TCP.
# Needs root, ibsim, opensm, tshark, iperf3, jq; IBGW_BUILD (test/run sets it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
. "$top/test/lib/intact.sh"
suite_init gwt
rackcmd() { R "$@"; }
suite_cleanup_hook() { ip netns del "$rack-ethx" 2>/dev/null; }

tap_plan 98
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm tshark iperf3 jq ethtool
suite_ibhost_helpers
# --- the rack, with the gateway ------------------------------------------------------
if ! rackcmd up >"$work/up.log" 2>&1; then
	tap_not_ok "rack up with ibgwd on gw1" "$(tail -5 "$work/up.log")"
	exit 1
fi
tap_ok "rack up with ibgwd on gw1"
wait_up ib0 20
out=$(gwctl show links)
tap_like "show links: ib0 is UP with its IPoIB address" "$out" \
	"ib0: ipoib state UP mtu 2044 mode datagram pkey 0xffff dev gw1 port 1 backend verbs"
tap_like "show links: eth0 is UP" "$out" "eth0: ether state UP mtu 1500 dev eth0"
# A datagram link on a port of datagram buffers keeps 1024 UD receives posted and
# sends up to 1024 (docs/ipoib.md, "Queue depths"), all of them: the pool is sized for it.
tap_like "gw1's log: ib0's UD QP has all its 1024 receives posted, 1024 sends (datagram buffers)" \
	"$(grep -h 'ib0: UD QP' "$RACK_STATE/logs/ibgwd-gw1.log" | head -1)" \
	"info: ib0: UD QP 0x[0-9a-f]+: 1024 receives posted on each of 1 queue, up to 1024 sends$"
out=$("$top/sim/rack" exec gw1 --name "$rack" -- env IBGW_SOCKET= "$build/bin/gwctl" show links 2>&1 | head -1)
tap_like "gwctl finds the node's socket from the rack's environment" "$out" "^ib0: ipoib"

# --- least privilege, as the package runs it --------------------------------------------
# sim/rack starts ibgwd as root; sim/etc/rack-gw1.yaml has gateway.user nobody, as the
# package's config has ibgw: it made its control socket, then became nobody with three
# capabilities (bits 12-14: 0x7000) before it opened a port. Everything below runs so.
gpid=$(rack_pid ibgwd-gw1)
tap_like "ibgwd on gw1 runs as nobody:nogroup (gateway.user in sim/etc/rack-gw1.yaml)" \
	"$(grep -E '^(Uid|Gid):' "/proc/$gpid/status" | tr '\t\n' '  ')" \
	"^Uid: 65534 65534 65534 65534 Gid: 65534 65534 65534 65534 $"
tap_is "... keeping only CAP_NET_ADMIN, CAP_NET_RAW, CAP_IPC_LOCK, in every thread" \
	"$(cat /proc/"$gpid"/task/*/status | grep -E '^Cap(Inh|Prm|Eff|Amb):' | sort -u | tr '\t\n' '  ')" \
	"CapAmb: 0000000000000000 CapEff: 0000000000007000 CapInh: 0000000000000000 CapPrm: 0000000000007000 "
tap_is "... and opened its IB port as nobody (umad2sim's ./sys-PID is nobody's)" \
	"$(stat -c %U "$RACK_STATE/nodes/gw1/ibgwd/sys-$gpid" 2>&1)" nobody

# --- routed mode ---------------------------------------------------------------------
tap_is "ping IPv4 Ethernet host -> IB host (datagram host)" "$(pings ethhost1 10.10.0.13)" 3
tap_is "ping IPv4 Ethernet host -> IB host (connected-mode host, over UD)" \
	"$(pings ethhost1 10.10.0.11)" 3
tap_is "ping IPv4 IB host -> Ethernet host" "$(pings ibhost3 10.20.0.12)" 3
tap_is "ping IPv6 Ethernet host -> IB host" "$(pings ethhost1 -6 fd00:10::13)" 3
tap_is "ping IPv6 IB host -> Ethernet host" "$(pings ibhost3 -6 fd00:20::11)" 3
tap_is "ping the gateway's own address across it (echo from the slow path)" \
	"$(pings ethhost2 10.10.0.1)" 3

n=$(iperf_bytes ibhost3 10.10.0.13 ethhost1 20M)
tap_is "iperf3 TCP Ethernet -> IB: 20 MiB arrive" "$n" 20971520
n=$(iperf_bytes ibhost3 10.10.0.13 ethhost1 20M -R)
tap_is "iperf3 TCP IB -> Ethernet: 20 MiB arrive" "$n" 20971520
# The gateway's router advertisements (sim/etc/rack-gw1.yaml) give both sides' hosts an
# IPv6 default route through it, as the kernel shows it.
ra_default() {   # NODE DEV: the host's IPv6 default route, once it has one (5 s at most)
	local out i
	for i in $(seq 50); do
		out=$(in_ns "$1" ip -6 route show default dev "$2" 2>/dev/null)
		[ -n "$out" ] && break
		sleep 0.1
	done
	echo "$out"
}
tap_like "router advertisements: the Ethernet host's IPv6 default route is the gateway (proto ra)" \
	"$(ra_default ethhost1 eth0)" "^default via fe80::[0-9a-f:]+ proto ra "
tap_like "router advertisements: the IB host's IPv6 default route is the gateway, over ib0 (proto ra)" \
	"$(ra_default ibhost3 ib0)" "^default via fe80::[0-9a-f:]+ proto ra "
n=$(iperf_bytes ethhost2 fd00:20::12 ibhost3 8M)
tap_is "iperf3 TCP over IPv6 IB -> Ethernet: 8 MiB arrive" "$n" 8388608

# A sender with a Linux host's default offloads (TX checksum offload, TSO, GSO; the rack
# turns them off on its Ethernet hosts, sim/lib/roles.sh): its TCP reaches the gateway as
# super-frames of up to 64 KiB with partial checksums, which the gateway cuts in software
# into segments the IPoIB link carries (docs/ethernet-ports.md, "Frames bigger than the
# MTU").
offloads() { in_ns ethhost1 ethtool -K eth0 tx "$1" tso "$1" gso "$1" >/dev/null 2>&1; }
dd if=/dev/urandom of="$work/blob" bs=1M count=8 status=none
blob_sum=$(sha256sum <"$work/blob" | cut -d' ' -f1)
seg0=$(gwctl -j show stats | jq -r '.[0].gso_segmented')
gro0=$(stat_field ibhost3 gro_frames)
offloads on
tap_is "default offloads: 8 MiB TCP Ethernet -> datagram-mode IB host arrive intact (SHA-256)" \
	"$(intact "$rack-ibhost3" "$rack-ethhost1" 10.10.0.13 "$work/blob")" "$blob_sum"
offloads off
# ibgw-host merged the stream's segments into GSO frames for its TAP (docs/simulated-rack.md,
# "The IB host's TAP takes merged TCP segments"): the SHA-256 above went through them.
gro=$(($(stat_field ibhost3 gro_frames) - gro0))
echo "# ibhost3: $gro merged frames to its TAP ($(stat_field ibhost3 gro_segs) segments in all)"
tap_like "the IB host's TAP took the stream as merged frames (ibgw-host gro_frames grew)" "$gro" "^[1-9][0-9]*$"
seg=$(gwctl -j show stats | jq -r '.[0].gso_segmented')
echo "# GSO frames segmented in software: $((seg - seg0))"
tap_like "default offloads: the gateway segmented GSO frames for the IPoIB link" \
	"$((seg - seg0))" "^[1-9][0-9]*$"
# The other way: the IB host's stream reaches gw1 as datagrams of the IB link's MTU,
# which gw1 merges (receive coalescing, docs/dataplane.md) and hands its Ethernet port
# as GSO frames, segmented by the kernel on the way out.
m0=$(gwctl -j show stats | jq -r '.[0].gro_merged')
tso0=$(stat_field ibhost3 tso_frames)
tap_is "8 MiB TCP datagram-mode IB host -> Ethernet host arrive intact (SHA-256)" \
	"$(intact "$rack-ethhost1" "$rack-ibhost3" 10.20.0.11 "$work/blob")" "$blob_sum"
# The IB host's kernel sent them as TSO super-frames, cut by ibgw-host into datagrams
# (docs/simulated-rack.md, "The IB host's TAP offers TSO"): the SHA-256 went through it.
tap_like "... sent by the IB host's kernel as super-frames that ibgw-host cut (tso_frames grew)" \
	"$(($(stat_field ibhost3 tso_frames) - tso0))" "^[1-9][0-9]*$"
read -r m s < <(gwctl -j show stats | jq -r '.[0] | "\(.gro_merged) \(.gro_segments)"')
echo "# gw1 merged $((m - m0)) packets from IPoIB ($s segments in all)"
tap_like "... merged on the way by gw1 (gro_merged grew; two segments or more each)" \
	"$((m - m0)) $((s >= 2 * m))" "^[1-9][0-9]* 1$"

# MTU: the IB host's link is 2044, the Ethernet side 1500.
out=$(in_ns ibhost3 ping -c 2 -i 0.3 -W 2 -M do -s 1600 10.20.0.11 2>&1)
# ping prints the gateway's ICMP as "From <gateway> ... (mtu = 1500)"; the host's own
# refusal once it learned the PMTU ("message too long") is not ours and does not match.
tap_like "DF ping of 1628 octets IB -> Ethernet: the gateway answers fragmentation needed, mtu 1500" "$out" \
	"^From 10\.10\.0\.1 icmp_seq=[0-9]+ Frag needed and DF set \(mtu = 1500\)$"
out=$(in_ns ibhost3 ip route get 10.20.0.11)
tap_like "the IB host's kernel learned PMTU 1500 from our ICMP" "$out" "mtu 1500"
out=$(in_ns ibhost3 ping -6 -c 2 -i 0.3 -W 2 -s 1600 fd00:20::11 2>&1)
tap_like "IPv6 ping of 1648 octets IB -> Ethernet: the gateway answers packet too big, mtu 1500" "$out" \
	"^From fd00:10::1 icmp_seq=[0-9]+ Packet too big: mtu=1500$"
out=$(in_ns ibhost3 ip -6 route get fd00:20::11)
tap_like "the IB host's kernel learned IPv6 PMTU 1500 from our packet too big" "$out" "mtu 1500"
out=$(in_ns ethhost1 ping -c 2 -i 0.3 -W 2 -s 1400 10.10.0.13 2>&1 | awk '/received/ { print $4 }')
tap_is "1428-octet pings Ethernet -> IB fit the 2044 MTU" "$out" 2

# MSS clamping: a SYN from the IB host (MSS 2004 on its 2044 link) toward the Ethernet
# host; the gateway clamps it to 1460 for the 1500 side. The same SYN is captured as it
# leaves the IB host and as it reaches the Ethernet host. The PMTU the host learned
# above would make it send 1460 itself (then nothing is clamped): flush it first.
in_ns ibhost3 ip route flush cache
syn="tcp[tcpflags] & tcp-syn != 0 and src host 10.10.0.13"
in_ns ibhost3 timeout 20 tshark -ni ib0 -c 1 -f "$syn" -T fields -e tcp.options.mss_val \
	>"$work/mss_sent.txt" 2>"$work/mss_sent.err" &
tsh_sent=$!
in_ns ethhost1 timeout 20 tshark -ni eth0 -c 1 -f "$syn" -T fields -e tcp.options.mss_val \
	>"$work/mss.txt" 2>"$work/mss.err" &
tsh=$!
wait_capturing "$work/mss_sent.err" "$work/mss.err"
in_ns ethhost1 iperf3 -s -1 -D -B 10.20.0.11 >/dev/null 2>&1
sleep 0.3
in_ns ibhost3 timeout 20 iperf3 -c 10.20.0.11 -n 1M >/dev/null 2>&1
wait $tsh $tsh_sent
tap_is "the SYN leaves the IB host with MSS 2004 (its 2044 link)" "$(head -1 "$work/mss_sent.txt")" 2004
tap_is "MSS clamped on the SYN crossing to the smaller MTU (2004 -> 1460)" "$(head -1 "$work/mss.txt")" 1460

# What the traffic created, as the operator sees it.
out=$(gwctl show routes)
tap_like "show routes: the connected IB subnet like ip route" "$out" \
	"^10.10.0.0/24 dev ib0 proto kernel scope link src 10.10.0.1$"
tap_like "show routes: the IPv6 Ethernet subnet" "$out" \
	"^fd00:20::/64 dev eth0 proto kernel scope link src fd00:20::1$"
out=$(gwctl -j show routes)
tap_is "show routes -j: a JSON array with dst/dev/protocol" \
	"$(echo "$out" | jq -r '[.[] | select(.dst == "10.20.0.0/24")][0] | .dev + " " + .protocol + " " + .prefsrc')" \
	"eth0 kernel 10.20.0.1"
tap_is "show routes PREFIX: only that prefix" "$(gwctl show routes 10.10.0.0/24 | wc -l)" 1
out=$(gwctl show neighbours)
tap_like "show neighbours: the Ethernet host like ip neigh" "$out" \
	"^10.20.0.11 dev eth0 lladdr 02:1b:00:00:00:[0-9a-f]{2} (REACHABLE|STALE|DELAY|PROBE)"
tap_like "show neighbours: the IB host with QPN+GID, path and mode" "$out" \
	"^10.10.0.13 dev ib0 lladdr 00:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:00:0b (REACHABLE|STALE|DELAY|PROBE) path dlid 0x[0-9a-f]+ sl 0 mtu 2048 mode ud"
tap_like "show neighbours: an IPv6 neighbour" "$out" "^fd00:10::13 dev ib0 lladdr"
out=$(gwctl -j show neighbours dev ib0)
tap_is "show neighbours dev ib0 -j: only ib0, with path and qpn" \
	"$(echo "$out" | jq -r '[.[] | select(.dst == "10.10.0.13")][0] | .dev + " " + .qpn + " " + (.path.mtu|tostring) + " " + (.state[0] != null|tostring)')" \
	"ib0 0x48 2048 true"
out=$(gwctl show paths)
tap_like "show paths: the SA's path to the IB host" "$out" "fe80::2:c903:a1:b dlid 0x[0-9a-f]+ sl 0 mtu 2048"
out=$(gwctl show mcast)
tap_like "show mcast: the broadcast group joined" "$out" \
	"^ff12:401b:ffff::ffff:ffff dev ib0 mlid 0xc000 qkey 0xb1b full joined"
# The IPoIB link's transmit counters include what the workers forward onto it.
ib0_tx() { gwctl -j -s show links | jq -r '.[] | select(.name == "ib0") | "\(.stats.tx_packets) \(.stats.tx_bytes)"'; }
read -r p0 b0 < <(ib0_tx)
in_ns ethhost1 ping -q -c 50 -i 0.01 -s 100 10.10.0.13 >/dev/null 2>&1
read -r p1 b1 < <(ib0_tx)
tap_is "show links -s: ib0 counts the 50 echo requests forwarded onto it (128 octets each)" \
	"$([ $((p1 - p0)) -ge 50 ] && [ $((b1 - b0)) -ge $((50 * 132)) ] && echo yes || echo "$((p1 - p0)) packets $((b1 - b0)) bytes")" yes
out=$(gwctl -j show stats)
tap_like "show stats: packets forwarded both families, frag-needed drops counted" \
	"$(echo "$out" | jq -r '.[0] | "\(.forwarded4 > 1000) \(.forwarded6 > 100) \(.drops.too_big > 0) \(.mss_clamped > 0)"')" \
	"true true true true"

# A capture of the IB side, decoded by tshark: forwarded ICMP with valid checksums.
rackcmd capture "$work/ib.pcap" >/dev/null 2>&1
pings ethhost2 10.10.0.12 >/dev/null
pings ibhost3 10.20.0.11 >/dev/null
rackcmd capture stop >/dev/null 2>&1
sleep 0.5
dec=$(tshark -r "$work/ib.pcap" -o ip.check_checksum:TRUE -Y icmp -T fields \
	-e ip.src -e ip.dst -e ip.checksum.status -e icmp.checksum.status 2>/dev/null | sort -u)
tap_like "tshark: forwarded echo requests Ethernet -> IB on the IB wire" "$dec" \
	"10.20.0.12	10.10.0.12	1	1"
tap_like "tshark: forwarded echo requests IB -> Ethernet on the IB wire" "$dec" \
	"10.10.0.13	10.20.0.11	1	1"
tap_is "tshark: no forwarded packet with a bad IP or ICMP checksum" \
	"$(echo "$dec" | awk -F'\t' '$3 != 1 || $4 != 1' | wc -l)" 0

# --- two partitions and two Ethernet networks at once -------------------------------
# ib1: P_Key 0x8001 (OpenSM's "Storage" partition) with an IB host on gw2's port;
# eth1: a veth to a third Ethernet namespace.
ip netns add "$rack-ethx"
ip link add eth1 netns "$rack-gw1" type veth peer name eth0 netns "$rack-ethx"
in_ns gw1 ip link set eth1 up
ip -n "$rack-ethx" link set lo up
ip -n "$rack-ethx" link set eth0 up
ip -n "$rack-ethx" addr add 10.21.0.11/24 dev eth0
ip -n "$rack-ethx" route add default via 10.21.0.1
veth_tx_csum_off "$rack-ethx" eth0
# The veth at 9000 (the gateway's eth1 runs at its configured 1500 until the reload
# into connected mode below raises it): the Ethernet port learns its device's MTU when
# it opens.
in_ns gw1 ip link set eth1 mtu 9000
ip -n "$rack-ethx" link set eth0 mtu 9000
in_ns gw1 sysctl -qw net.ipv6.conf.eth1.disable_ipv6=1
role_start_ibhost_node gw2 0x8001 datagram 10.11.0.12/24 >/dev/null 2>&1
in_ns gw2 ip route replace default via 10.11.0.1 dev ib0 2>/dev/null
in_ns ibhost3 ip route replace 10.21.0.0/24 via 10.10.0.1 dev ib0
cat "$top/sim/etc/rack-gw1.yaml" >"$work/two.yaml"
cat >>"$work/two.yaml" <<'EOF'
  - name: eth1
    device: eth1
    addresses: [10.21.0.1/24]
EOF
sed -i 's|^ethernet_interfaces:|  - name: ib1\n    backend: verbs\n    device: gw1\n    pkey: 0x8001\n    addresses: [10.11.0.1/24]\n\nethernet_interfaces:|' "$work/two.yaml"
gateway_stop gw1
gateway_start gw1 "$work/two.yaml" >/dev/null 2>&1
wait_up ib1 20
wait_up ib0 20
out=$(gwctl show links | grep '^[a-z]' | awk '{ print $1, $4 }' | tr '\n' ' ')
tap_is "two IPoIB links and two Ethernet interfaces are UP" "$out" "ib0: UP ib1: UP eth0: UP eth1: UP "
tap_is "eth1 -> ib1 (P_Key 0x8001)" "$(pings ethx 10.11.0.12)" 3
tap_is "eth1 -> ib0 (P_Key 0xffff)" "$(pings ethx 10.10.0.13)" 3
in_ns ethhost1 ip route replace 10.11.0.0/24 via 10.20.0.1
tap_is "ib1 -> eth0 once eth0's host routes 10.11.0.0/24 back" \
	"$(in_ns gw2 timeout 15 ping -c 3 -i 0.2 -W 3 10.20.0.11 2>&1 | awk '/received/ { print $4 }')" 3
n=$(iperf_bytes gw2 10.11.0.12 ethx 8M)
tap_is "iperf3 TCP eth1 -> ib1: 8 MiB arrive" "$n" 8388608

# --- a reload into connected mode, and back -----------------------------------------------
# The gateway started in datagram mode (two.yaml: ib0 and ib1 on one IB port, one
# worker) reloads the connected-mode config below (both links connected, two workers):
# the port, opened with datagram-sized buffers and one queue, is closed and opened
# again for whole RC messages and two queues, ib0 and ib1 rebuilt on it. For this part
# eth1 runs at MTU 9000 (its veth is at 9000 already), so that an 8028-octet DF ping crosses every hop whole,
# both ways (the IB hop at the datagram buffers' 4196 would refuse it). The reload back
# to datagram keeps the port as it is (and eth1 at 1500).
sed -e 's/mode: datagram/mode: connected/' -e 's/mtu: 2044/mtu: 65520/' -e 's/workers: 1/workers: 2/' \
	-e 's/^    pkey: 0x8001$/    pkey: 0x8001\n    mode: connected/' "$work/two.yaml" >"$work/cm.yaml"
cp -p "$work/two.yaml" "$work/dg.yaml"
sed 's/^    device: eth1$/    device: eth1\n    mtu: 9000/' "$work/cm.yaml" >"$work/two.yaml"
in_ns ibhost1 ip route replace 10.21.0.0/24 via 10.10.0.1 dev ib0
out=$(gwctl reload 2>&1)
tap_like "reload into connected mode: the IB port is reopened for RC-sized buffers and two queues" \
	"$?|$(echo "$out" | tr '\n' '|')" \
	"^0\|.*\|    eth1: MTU 9000\|(.*\|)?    IB port gw1/1: reopened for connected-mode buffers and 2 queues; links ib0, ib1 rebuilt\|"
wait_up ib0 20
wait_up ib1 20
tap_like "after the reload: ib0 and ib1 UP in connected mode, MTU 65520" "$(gwctl show links | tr '\n' ' ')" \
	"ib0: ipoib state UP mtu 65520 mode connected .*ib1: ipoib state UP mtu 65520 mode connected pkey 0x8001"
tap_is "after the reload: the port has two queues, two workers run" \
	"$(gwctl -j show links | jq -r '.[] | select(.name == "ib0") | .queues') $(gwctl -j show stats | jq -r '.[0].workers')" "2 2"
tap_is "the log says it once (notice)" \
	"$(grep -c 'notice: IB port gw1/1: reopened for connected-mode buffers and 2 queues (.*); links ib0, ib1 rebuilt' "$RACK_STATE/logs/ibgwd-gw1.log")" 1
tap_like "... and rebuilt on RC-sized buffers, ib0's UD QP keeps 256 receives on each queue" \
	"$(grep -h 'ib0: UD QP' "$RACK_STATE/logs/ibgwd-gw1.log" | tail -1)" \
	"info: ib0: UD QP 0x[0-9a-f]+: 256 receives posted on each of 2 queues, up to 256 sends$"
in_ns ethx ping -c 2 -i 0.5 -W 1 10.10.0.11 >/dev/null 2>&1
tap_like "after the reload: the connection to ibhost1 comes up, MTU 65520" "$(gwctl show connections)" \
	"dev ib0 .*mtu 65520 .* UP"
tap_like "8028-octet DF ping Ethernet (MTU 9000) -> connected IB host, whole over RC both ways" \
	"$(in_ns ethx timeout 15 ping -c 3 -i 0.2 -W 3 -s 8000 -M do 10.10.0.11 2>&1)" " 3 received"
tap_like "8028-octet DF ping connected IB host -> Ethernet (MTU 9000), whole over RC both ways" \
	"$(in_ns ibhost1 timeout 15 ping -c 3 -i 0.2 -W 3 -s 8000 -M do 10.21.0.11 2>&1)" " 3 received"
# Toward a neighbour not resolved, a packet over 4,200 octets is too big to park: it is
# dropped, but the next hop's resolution starts (ARP on ib0), so the pings after it cross.
gwctl neigh flush dev ib0 >/dev/null
tap_like "gateway's neighbours on ib0 flushed: of 4 DF pings of 8028 octets, the later ones cross" \
	"$(in_ns ethx timeout 15 ping -c 4 -i 0.5 -W 2 -s 8000 -M do 10.10.0.11 2>&1 | grep -o '[0-9]* received')" \
	"^[1-3] received$"
tap_is "... and ibhost1's neighbour entry on ib0 is REACHABLE again" \
	"$(gwctl neigh show dev ib0 | grep -c '^10\.10\.0\.11 .*REACHABLE')" 1
cp "$work/dg.yaml" "$work/two.yaml"
out=$(gwctl reload 2>&1)
rc=$?
tap_is "reload back to datagram: the links rebuilt, the port kept as it is (exit, reopened, rebuilt)" \
	"$rc $(echo "$out" | grep -c reopened) $(echo "$out" | grep -c 'ib[01]: taken down: mode changed')" "0 0 2"
wait_up ib0 20
wait_up ib1 20
tap_is "after the reload back: ib0 in datagram mode, MTU 2044, the port's two queues kept" \
	"$(gwctl -j show links | jq -r '.[] | select(.name == "ib0") | "\(.mode) \(.mtu) \(.queues)"')" "datagram 2044 2"
tap_is "after the reload back: Ethernet host -> datagram-mode IB host" "$(pings ethhost1 10.10.0.13)" 3
tap_is "after the reload back: connected-mode IB host (now over UD) -> Ethernet host" "$(pings ibhost1 10.20.0.11)" 3

# --- connected mode ----------------------------------------------------------------------
# ib0 in connected mode (RFC 4755): the connected-mode IB host (ibhost1) gets an RC
# connection to the gateway; its IP MTU is 65520 on the IB side, 1500 on Ethernet.
gateway_stop gw1
# Two workers: the IB port and the Ethernet port are owned by different workers, so RC
# sends toward the IB host are posted across workers (under the port's lock).
# Both partitions' links connected (one CM agent for the port, shared); gw2's host on
# P_Key 0x8001 runs datagram mode: reached over UD with the UD MTU.
# The CM is cm/cm_umad.c, as on an HCA, its MADs carried on the fabric's QP1 by the
# verbs shim's libibumad (docs/verbs-sim.md, "CM MADs"), on the gateway and the IB
# hosts alike.
gateway_start gw1 "$work/cm.yaml" >/dev/null 2>&1
wait_up ib0 20
tap_like "connected mode: ib0 is UP with mode connected and MTU 65520" "$(gwctl show links)" \
	"ib0: ipoib state UP mtu 65520 mode connected"
tap_is "connected mode: two workers" "$(gwctl -j show stats | jq -r '.[0].workers')" 2
wait_up ib1 20
tap_like "connected mode: ib1 (P_Key 0x8001, same port) is UP in connected mode too" \
	"$(gwctl show links)" "ib1: ipoib state UP mtu 65520 mode connected pkey 0x8001"
tap_is "connected mode: eth1 -> ib1's datagram-mode host (over UD)" "$(pings ethx 10.11.0.12)" 3
out=$(gwctl -j show neighbours dev ib1 | jq -r '.[] | select(.dst == "10.11.0.12") | "\(.peer_mode) \(.mode) \(.mtu)"')
tap_is "connected mode: the datagram-mode peer's entry stays UD with the UD MTU" "$out" "ud ud 2044"
in_ns ibhost1 ip neigh flush dev ib0 2>/dev/null
in_ns ethhost1 ping -c 2 -i 0.5 -W 1 10.10.0.11 >/dev/null 2>&1
tap_is "connected mode: ping Ethernet host -> connected IB host" "$(pings ethhost1 10.10.0.11)" 3
tap_is "connected mode: ping connected IB host -> Ethernet host" "$(pings ibhost1 10.20.0.11)" 3
in_ns ethhost1 ping -6 -c 2 -i 0.5 -W 1 fd00:10::11 >/dev/null 2>&1
tap_is "connected mode: ping IPv6 Ethernet host -> connected IB host" "$(pings ethhost1 -6 fd00:10::11)" 3
tap_is "connected mode: ping IPv6 connected IB host -> Ethernet host" "$(pings ibhost1 -6 fd00:20::11)" 3
out=$(gwctl show connections)
tap_like "show connections: the connection to ibhost1 is up on ib0" "$out" \
	"dev ib0 .*mtu 65520 .* UP"
echo "$out" | sed 's/^/# /'
cj0=$(gwctl -j show connections)
n=$(iperf_bytes ibhost1 10.10.0.11 ethhost1 8M)
tap_is "connected mode: iperf3 TCP Ethernet -> connected IB host, 8 MiB" "$n" 8388608
n=$(iperf_bytes ibhost1 10.10.0.11 ethhost1 8M -R)
tap_is "connected mode: iperf3 TCP connected IB host -> Ethernet, 8 MiB" "$n" 8388608
offloads on
tap_is "connected mode, default offloads: 8 MiB TCP Ethernet -> connected IB host intact" \
	"$(intact "$rack-ibhost1" "$rack-ethhost1" 10.10.0.11 "$work/blob")" "$blob_sum"
offloads off
# GRO on gw1's port, as a NIC has it (docs/ethernet-ports.md, "GRO and LRO"): ethhost1
# sends wire-sized segments, gw1's kernel merges them, the port receives the merged
# frames whole and gw1 sends each over the RC connection as one message. A veth merges
# only what its peer could not have sent merged: the switch's port toward gw1 without
# TSO, a wire.
in_ns ethsw ethtool -K gw1 tso off gso off >/dev/null 2>&1
in_ns gw1 ethtool -K eth0 gro on >/dev/null 2>&1
w0=$(gwctl -j show stats | jq -r '.[0].gso_whole')
tap_is "connected mode, GRO on gw1's port: 8 MiB TCP from a wire-sized sender intact" \
	"$(intact "$rack-ibhost1" "$rack-ethhost1" 10.10.0.11 "$work/blob")" "$blob_sum"
w=$(($(gwctl -j show stats | jq -r '.[0].gso_whole') - w0))
echo "# merged frames sent whole over RC: $w"
tap_like "... received merged and sent whole over the connection (gso_whole grew)" "$w" "^[1-9][0-9]*$"
in_ns gw1 ethtool -K eth0 gro off >/dev/null 2>&1
in_ns ethsw ethtool -K gw1 tso on gso on >/dev/null 2>&1
cj=$(gwctl -j show connections)
nj=$(gwctl -j show neighbours dev ib0 | jq -c '.[] | select(.dst == "10.10.0.11")')
peer=$(echo "$nj" | jq -r '.lladdr')
tap_is "show neighbours -j: ibhost1's entry goes over RC with MTU 65520" \
	"$(echo "$nj" | jq -r '"\(.peer_mode) \(.mode) \(.mtu)"')" "rc rc 65520"
tap_is "show connections -j: ibhost1's connection, up, MTU 65520, with its QPNs and state" \
	"$(echo "$cj" | jq -r --arg p "$peer" 'map(select(.dev == "ib0" and .peer == $p and .up)) | length as $n | .[0] | "\($n) \(.mtu) \(.local_qpn != null) \(.remote_qpn != null) \(.state != null)"')" \
	"1 65520 true true true"
tx0=$(echo "$cj0" | jq '[.[] | .tx_packets] | add // 0')
rx0=$(echo "$cj0" | jq '[.[] | .rx_packets] | add // 0')
tx1=$(echo "$cj" | jq '[.[] | .tx_packets] | add // 0')
rx1=$(echo "$cj" | jq '[.[] | .rx_packets] | add // 0')
rc=$(gwctl -j -s show links | jq -r '.[] | select(.name == "ib0") | .stats | "\(.rc_tx_packets) \(.rc_rx_packets)"')
tap_like "RC counters move with the iperf3 runs (connection tx $tx0 -> $tx1, rx $rx0 -> $rx1; link rc tx/rx $rc)" \
	"$([ "$tx1" -gt $((tx0 + 1000)) ] && [ "$rx1" -gt $((rx0 + 1000)) ] && echo moved || echo "tx $tx0->$tx1 rx $rx0->$rx1")" "^moved$"
in_ns ibhost1 ip route flush cache 2>/dev/null
out=$(in_ns ibhost1 ping -c 2 -i 0.3 -W 2 -M do -s 60000 10.20.0.11 2>&1)
tap_like "60028-octet DF ping from the connected IB host crosses RC; the gateway answers frag needed, mtu 1500" \
	"$out" "^From 10\.10\.0\.1 icmp_seq=[0-9]+ Frag needed and DF set \(mtu = 1500\)$"
out=$(in_ns ibhost1 ip route get 10.20.0.11)
tap_like "the connected IB host's kernel learned PMTU 1500 from our ICMP" "$out" "mtu 1500"
out=$(in_ns ibhost1 ping -6 -c 2 -i 0.3 -W 2 -s 20000 fd00:20::11 2>&1)
tap_like "IPv6 ping of 20048 octets from the connected IB host: the gateway answers packet too big, mtu 1500" "$out" \
	"^From fd00:10::1 icmp_seq=[0-9]+ Packet too big: mtu=1500$"
out=$(in_ns ibhost1 ip -6 route get fd00:20::11)
tap_like "the connected IB host's kernel learned IPv6 PMTU 1500 from our packet too big" "$out" "mtu 1500"
out=$(in_ns ibhost1 ping -c 2 -i 0.3 -W 2 -s 30000 10.20.0.11 2>&1 | awk '/received/ { print $4 }')
tap_is "30028-octet pings (no DF) connected IB host -> Ethernet: fragmented by the gateway, answered" "$out" 2

# --- proxy mode ------------------------------------------------------------------------
gateway_stop gw1
ip netns del "$rack-ethx"
for n in ethhost1 ethhost2; do
	in_ns "$n" ip route del 10.10.0.0/24 via 10.20.0.1 2>/dev/null
	in_ns "$n" ip -6 route del fd00:10::/64 via fd00:20::1 2>/dev/null
done
for n in ibhost1 ibhost2 ibhost3; do
	in_ns "$n" ip route del 10.20.0.0/24 via 10.10.0.1 2>/dev/null
	in_ns "$n" ip -6 route del fd00:20::/64 via fd00:10::1 2>/dev/null
	in_ns "$n" ip neigh flush dev ib0 2>/dev/null
done
# The SLAAC addresses the routed gateway's RAs gave (valid for days: RFC 4862 keeps a
# shorter lifetime from cutting them) would be the hosts' IPv6 sources in the proxy
# subnet, outside its proxied range: the proxy part starts from the hosts' own.
for n in ethhost1 ethhost2; do in_ns "$n" ip -6 addr flush dev eth0 scope global dynamic; done
for n in ibhost1 ibhost2 ibhost3; do in_ns "$n" ip -6 addr flush dev ib0 scope global dynamic; done
gateway_start gw1 "$top/sim/etc/rack-gw1-proxy.yaml" >/dev/null 2>&1
hosts_for_gateway proxy
wait_up ib0 20
out=$(in_ns ethhost1 ip route show 10.10.0.0/24)
tap_like "proxy mode: the Ethernet host has only its on-link route to the shared subnet" \
	"$out" "^10.10.0.0/24 dev eth0 proto kernel scope link src 10.10.0.201 $"
# The first ARP is resolved on the other side first; ping retries meanwhile.
in_ns ethhost1 ping -c 2 -i 0.5 -W 1 10.10.0.13 >/dev/null 2>&1
tap_is "proxy ARP: Ethernet host -> IB host in the same subnet" "$(pings ethhost1 10.10.0.13)" 3
out=$(in_ns ethhost1 ip neigh show 10.10.0.13)
mac=$(in_ns gw1 cat /sys/class/net/eth0/address)
tap_like "the Ethernet host's kernel resolved the IB host to the gateway's MAC" "$out" "lladdr $mac"
in_ns ibhost3 ping -c 2 -i 0.5 -W 1 10.10.0.202 >/dev/null 2>&1
tap_is "proxy ARP: IB host -> Ethernet host" "$(pings ibhost3 10.10.0.202)" 3
# Proxy ND on IPoIB: the IB host's NS for the Ethernet host reaches the gateway through
# the solicited-node group it joined; the proxied NA goes back through the link.
in_ns ethhost1 ping -6 -c 2 -i 0.5 -W 1 fd00:10::13 >/dev/null 2>&1
tap_is "proxy ND: IPv6 Ethernet host -> IB host" "$(pings ethhost1 -6 fd00:10::13)" 3
in_ns ibhost3 ping -6 -c 2 -i 0.5 -W 1 fd00:10::202 >/dev/null 2>&1
tap_is "proxy ND: IPv6 IB host -> Ethernet host" "$(pings ibhost3 -6 fd00:10::202)" 3
out=$(in_ns ibhost3 ip -6 neigh show fd00:10::202)
# (the host role's TAP shows IPoIB addresses as MACs; the router flag is the proxy's NA)
tap_like "the IB host's kernel learned the Ethernet host from the gateway's proxied NA" "$out" "lladdr [0-9a-f:]+ router"
n=$(iperf_bytes ibhost3 10.10.0.13 ethhost1 8M)
tap_is "proxy mode: iperf3 TCP Ethernet -> IB, 8 MiB" "$n" 8388608
n=$(iperf_bytes ibhost3 10.10.0.13 ethhost1 8M -R)
tap_is "proxy mode: iperf3 TCP IB -> Ethernet, 8 MiB" "$n" 8388608

tap_done
