#!/usr/bin/env bash
# Forwarding paths of ibgwd that only unit tests covered, on the simulated rack with real
# peers (IB hosts: ibgw-host TAPs with real kernels; Ethernet hosts: namespaces on the
# rack's bridge). gw1 runs sim/etc/rack-gw1-fwd.yaml. Shows, as a user sees it:
#   send-only join  the gateway resolving an IPv6 IB host sends its NS to the host's
#                   solicited-node group, which it is not a member of: the link joins it
#                   send-only (ipoib/xmit.c); `gwctl show mcast` says sendonly and
#                   OpenSM's MCMemberRecords (saquery -m from the SM node) hold gw1's
#                   port GID in that group with JoinState 0x8 (SendOnlyFullMember);
#   ECMP            10.30.0.0/24 and fd00:30::/64 via both Ethernet hosts (each has
#                   10.30.0.1 and fd00:30::1 on its loopback): 64 UDP flows (source
#                   ports 40000-40063) from an IB host, 4 datagrams each; every datagram
#                   arrives, each host receives 16-48 of the flows (counted by a UDP
#                   receiver in each host) and no flow is split between them;
#   VLAN            an Ethernet interface with vlan 100 on the same device as eth0 and a
#                   host whose only address is on its VLAN device eth0.100 (a kernel
#                   VLAN device, or a TAP with a user-space 802.1Q relay where the
#                   kernel has no 802.1Q):
#                   ping IPv4/IPv6 both ways, 1500-octet DF packets both ways, iperf3
#                   TCP both ways with a byte count; tshark on the bridge's port to gw1
#                   sees every frame of that host tagged 802.1Q VLAN 100.
# Needs root, ibsim, opensm, saquery, tshark, iperf3, jq, python3; IBGW_BUILD (test/run
# sets it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
suite_init fwd
suite_cleanup_hook() { ip netns del "$rack-ethv" 2>/dev/null; }

tap_plan 27
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm saquery tshark iperf3 jq python3 ethtool
suite_ibhost_helpers
if ! IBGW_GW_CONFIG=$top/sim/etc/rack-gw1-fwd.yaml R up >"$work/up.log" 2>&1; then
	tap_not_ok "rack up with ibgwd on gw1 (rack-gw1-fwd.yaml)" "$(tail -5 "$work/up.log")"
	exit 1
fi
tap_ok "rack up with ibgwd on gw1 (rack-gw1-fwd.yaml)"
wait_up ib0 20
wait_up vlan100 5
out=$(gwctl show links)
tap_like "show links: vlan100 is UP on eth0 with VLAN 100" "$out" \
	"^vlan100: ether state UP mtu 1500 dev eth0 vlan 100"

# --- send-only join ------------------------------------------------------------------
# The gateway has no neighbour entry for ibhost2's global address yet: the Ethernet
# host's ping makes it solicit fd00:10::12 at ff02::1:ff00:12, i.e. the IPoIB group
# ff12:601b:ffff::1:ff00:12, which only ibhost2 joined (full). gw1's port GID is
# fe80::2:c903:a1:3 (rack.topo: the second HCA, port GUID 0x0002c90300a10003).
sogrp=ff12:601b:ffff::1:ff00:12
gwgid=fe80::2:c903:a1:3
h2gid=fe80::2:c903:a1:9
tap_is "ping IPv6 Ethernet host -> ibhost2 (the gateway solicits it first)" \
	"$(pings ethhost1 -6 fd00:10::12)" 3
out=$(gwctl show mcast)
tap_like "show mcast: the solicited-node group joined send-only" "$out" \
	"^$sogrp dev ib0 mlid 0xc[0-9a-f]{3} qkey 0xb1b sendonly joined$"
# OpenSM's MCMemberRecords of that group: `saquery MCMR --mgid` (the SA filters on the
# MGID; `saquery -m` would list only the first three records of the fabric: no RMPP
# under umad2sim), --smkey 1 (the rack's OpenSM key) so no port GID is blanked. One line
# per member: PortGid JoinState.
members() {
	R exec sm -- saquery --smkey 1 MCMR --mgid "$1" 2>/dev/null | awk '
		/PortGid\.\.\./ { sub(/.*\.\.\./, ""); p = $0 }
		/JoinState\.\.\./ { sub(/.*\.\.\./, ""); print p, $0 }' | sort
}
tap_is "OpenSM: $sogrp has gw1 as SendOnlyFullMember (JoinState 0x8) and ibhost2, whose address it is, as full member (0x1)" \
	"$(members "$sogrp" | tr '\n' ' ')" "$gwgid 0x8 $h2gid 0x1 "
tap_like "OpenSM: gw1 is a full member (JoinState 0x1) of the broadcast group" \
	"$(members ff12:401b:ffff::ffff:ffff | tr '\n' ' ')" "(^| )$gwgid 0x1 "

# --- ECMP ----------------------------------------------------------------------------
for n in ethhost1 ethhost2; do
	in_ns "$n" ip addr add 10.30.0.1/32 dev lo
	in_ns "$n" ip -6 addr add fd00:30::1/128 dev lo
done
in_ns ibhost3 ip route replace 10.30.0.0/24 via 10.10.0.1 dev ib0
in_ns ibhost3 ip -6 route replace fd00:30::/64 via fd00:10::1 dev ib0
out=$(gwctl -j show routes 10.30.0.0/24)
tap_is "show routes -j: 10.30.0.0/24 has the two next hops (static)" \
	"$(echo "$out" | jq -r '.[0] | .protocol + " " + ([.nexthops[].gateway] | sort | join(" "))')" \
	"static 10.20.0.11 10.20.0.12"
# The gateway resolves both next hops (and the IB host the gateway) before the count.
for a in 10.20.0.11 10.20.0.12 -6\ fd00:20::11 -6\ fd00:20::12; do
	# shellcheck disable=SC2086
	pings ibhost3 $a >/dev/null
done
# A UDP receiver per Ethernet host: one line per datagram, its source port.
cat >"$work/recv.py" <<'EOF'
import select, socket, sys
s4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s4.bind(("10.30.0.1", 5001))
s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s6.bind(("fd00:30::1", 5001))
out = open(sys.argv[1], "w", buffering=1)
while True:
    for s in select.select([s4, s6], [], [])[0]:
        _, a = s.recvfrom(2048)
        out.write("%d %d\n" % (4 if s is s4 else 6, a[1]))
EOF
# The sender on the IB host: 64 flows (one socket per source port), 4 rounds.
cat >"$work/send.py" <<'EOF'
import socket, sys, time
fam = socket.AF_INET if sys.argv[1] == "4" else socket.AF_INET6
socks = []
for i in range(64):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind(("", 40000 + i))
    socks.append(s)
for r in range(4):
    for i, s in enumerate(socks):
        s.sendto(b"flow %d round %d" % (i, r), (sys.argv[2], 5001))
        time.sleep(0.002)
    time.sleep(0.25)
EOF
for n in ethhost1 ethhost2; do
	in_ns "$n" timeout 60 python3 "$work/recv.py" "$work/recv-$n.txt" &
done
sleep 1
in_ns ibhost3 timeout 30 python3 "$work/send.py" 4 10.30.0.1
in_ns ibhost3 timeout 30 python3 "$work/send.py" 6 fd00:30::1
sleep 1
for f in 4 6; do
	for n in ethhost1 ethhost2; do
		awk -v f=$f '$1 == f { print $2 }' "$work/recv-$n.txt" | sort | uniq -c >"$work/flows$f-$n.txt"
	done
	d1=$(grep -c . "$work/flows$f-ethhost1.txt")
	d2=$(grep -c . "$work/flows$f-ethhost2.txt")
	total=$(cat "$work/recv-ethhost1.txt" "$work/recv-ethhost2.txt" | awk -v f=$f '$1 == f' | wc -l)
	tap_is "ECMP IPv$f: all 256 datagrams of the 64 flows arrive" "$total" 256
	tap_is "ECMP IPv$f: each next hop gets 16-48 of the 64 flows (ethhost1 $d1, ethhost2 $d2)" \
		"$([ "$d1" -ge 16 ] && [ "$d1" -le 48 ] && [ "$d2" -ge 16 ] && [ "$d2" -le 48 ] && echo spread)" spread
	both=$(cat "$work/flows$f-ethhost1.txt" "$work/flows$f-ethhost2.txt" | awk '{ print $2 }' | sort | uniq -d | wc -l)
	partial=$(cat "$work/flows$f-ethhost1.txt" "$work/flows$f-ethhost2.txt" | awk '$1 != 4' | wc -l)
	tap_is "ECMP IPv$f: each flow stays on one next hop (flows on both: $both, with fewer than 4 datagrams on one: $partial)" \
		"$both $partial" "0 0"
done
if [ "$(wc -l <"$work/flows4-ethhost1.txt")" = 0 ]; then cat "$work"/recv-*.txt | head -5 | sed 's/^/# /'; fi

# --- VLAN ----------------------------------------------------------------------------
# A host on the bridge whose only address is on its VLAN device eth0.100. A kernel
# VLAN device where the kernel has 802.1Q (CONFIG_VLAN_8021Q); where it has not (this
# VM's kernel has neither that, nor bridge VLAN filtering, nor tc's vlan action), a TAP
# named eth0.100 with the tag pushed and popped by a relay on eth0 (below): the host's
# IP stack is the kernel's either way, and the tags on the wire are checked by tshark.
cat >"$work/vlan_relay.py" <<'EOF'
# vlan_relay.py DEV TAP VID: an 802.1Q sub-interface in user space. Frames from the TAP
# leave DEV with tag VID; frames arriving on DEV with VID (the tag stripped by the
# kernel into the packet's auxdata, or still in-band) go to the TAP untagged.
import fcntl, os, select, socket, struct, sys
dev, name, vid = sys.argv[1], sys.argv[2], int(sys.argv[3])
tap = os.open("/dev/net/tun", os.O_RDWR)
fcntl.ioctl(tap, 0x400454CA, struct.pack("16sH", name.encode(), 0x0002 | 0x1000))  # TUNSETIFF, IFF_TAP | IFF_NO_PI
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
s.setsockopt(263, 8, 1)  # SOL_PACKET, PACKET_AUXDATA
s.bind((dev, 0))
tag = struct.pack("!HH", 0x8100, vid)
open(sys.argv[4], "w").close()  # ready
while True:
    for r in select.select([s, tap], [], [])[0]:
        if r is tap:
            f = os.read(tap, 65536)
            s.send(f[:12] + tag + f[12:])
            continue
        f, anc, _, addr = s.recvmsg(65536, socket.CMSG_SPACE(20))
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        tci = None
        for lvl, typ, data in anc:
            if lvl == 263 and typ == 8:  # struct tpacket_auxdata
                st, _, _, _, _, t, _ = struct.unpack("IIIHHHH", data[:20])
                if st & 0x10:  # TP_STATUS_VLAN_VALID
                    tci = t
        if tci is None and f[12:14] == b"\x81\x00":
            tci = struct.unpack("!H", f[14:16])[0]
            f = f[:12] + f[16:]
        if tci is not None and tci & 0x0fff == vid:
            os.write(tap, f)
EOF
ip netns add "$rack-ethv"
ip link add ethv netns "$rack-ethsw" type veth peer name eth0 netns "$rack-ethv"
ip -n "$rack-ethsw" link set ethv master br0 up
ip -n "$rack-ethv" link set lo up
in_ns ethv sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1
ip -n "$rack-ethv" link set eth0 up
veth_tx_csum_off "$rack-ethv" eth0
if ip -n "$rack-ethv" link add link eth0 name eth0.100 type vlan id 100 2>/dev/null; then
	vlandev="kernel VLAN device"
else
	vlandev="TAP with a user-space 802.1Q relay (no 802.1Q in this kernel)"
	# The relay reads frames as they come off the veth: a GSO frame the gateway sends
	# whole (its receive coalescing merges an IB host's TCP) would reach it as one
	# super-frame that its TAP refuses. A kernel VLAN device takes those; for the relay
	# the switch's port cuts them (and completes their checksums) in software.
	ip netns exec "$rack-ethsw" ethtool -K ethv tx off tso off gso off >/dev/null
	in_ns ethv python3 "$work/vlan_relay.py" eth0 eth0.100 100 "$work/relay.ready" >"$work/relay.log" 2>&1 &
	for _ in $(seq 50); do [ -e "$work/relay.ready" ] && break; sleep 0.1; done
fi
ip -n "$rack-ethv" link set eth0.100 up
ip -n "$rack-ethv" addr add 10.22.0.11/24 dev eth0.100
ip -n "$rack-ethv" -6 addr add fd00:22::11/64 dev eth0.100 nodad
ip -n "$rack-ethv" route add 10.10.0.0/24 via 10.22.0.1
ip -n "$rack-ethv" -6 route add fd00:10::/64 via fd00:22::1
tap_is "VLAN: the host's eth0.100 is up with 10.22.0.11/24 ($vlandev)" \
	"$(ip -n "$rack-ethv" -4 -o addr show dev eth0.100 | awk '{ print $4 }')" 10.22.0.11/24
in_ns ibhost3 ip route replace 10.22.0.0/24 via 10.10.0.1 dev ib0
in_ns ibhost3 ip -6 route replace fd00:22::/64 via fd00:10::1 dev ib0
# Everything between the bridge and gw1 while the VLAN host talks.
ip netns exec "$rack-ethsw" timeout 120 tshark -ni gw1 -w "$work/vlan.pcap" >/dev/null \
	2>"$work/vlan.err" &
tsh=$!
wait_capturing "$work/vlan.err"
tap_is "VLAN: ping IPv4 VLAN host -> IB host" "$(pings ethv 10.10.0.13)" 3
tap_is "VLAN: ping IPv4 IB host -> VLAN host" "$(pings ibhost3 10.22.0.11)" 3
tap_is "VLAN: ping IPv6 VLAN host -> IB host" "$(pings ethv -6 fd00:10::13)" 3
tap_is "VLAN: ping IPv6 IB host -> VLAN host" "$(pings ibhost3 -6 fd00:22::11)" 3
tap_is "VLAN: 1500-octet DF pings IB host -> VLAN host (1518-octet tagged frames)" \
	"$(pings ibhost3 -M "do" -s 1472 10.22.0.11)" 3
tap_is "VLAN: 1500-octet DF pings VLAN host -> IB host" "$(pings ethv -M "do" -s 1472 10.10.0.13)" 3
n=$(iperf_bytes ibhost3 10.10.0.13 ethv 8M)
tap_is "VLAN: iperf3 TCP VLAN host -> IB host: 8 MiB arrive" "$n" 8388608
n=$(iperf_bytes ibhost3 10.10.0.13 ethv 8M -R)
tap_is "VLAN: iperf3 TCP IB host -> VLAN host: 8 MiB arrive" "$n" 8388608
n=$(iperf_bytes ibhost3 fd00:10::13 ethv 4M)
tap_is "VLAN: iperf3 TCP over IPv6 VLAN host -> IB host: 4 MiB arrive" "$n" 4194304
kill "$tsh" 2>/dev/null
wait "$tsh" 2>/dev/null
out=$(gwctl show neighbours dev vlan100)
mac=$(ip -n "$rack-ethv" -o link show eth0.100 | awk '{ for (i = 1; i < NF; i++) if ($i == "link/ether") print $(i + 1) }')
tap_like "show neighbours dev vlan100: the VLAN host at its MAC" "$out" \
	"^10.22.0.11 dev vlan100 lladdr $mac (REACHABLE|STALE|DELAY|PROBE)"
dec=$(tshark -r "$work/vlan.pcap" -Y 'ip.addr == 10.22.0.11 || ipv6.addr == fd00:22::11 || arp.dst.proto_ipv4 == 10.22.0.11 || arp.src.proto_ipv4 == 10.22.0.11' \
	-T fields -e vlan.id -e ip.src -e ip.dst -e _ws.col.Protocol 2>/dev/null)
tap_like "tshark on the bridge: echo requests IB -> VLAN host leave gw1 tagged VLAN 100" "$dec" \
	"^100	10\.10\.0\.13	10\.22\.0\.11	ICMP$"
tap_like "tshark on the bridge: echo replies VLAN host -> IB host reach gw1 tagged VLAN 100" "$dec" \
	"^100	10\.22\.0\.11	10\.10\.0\.13	ICMP$"
tap_is "tshark on the bridge: every frame of the VLAN host is tagged 100 ($(echo "$dec" | grep -c .) frames)" \
	"$(echo "$dec" | awk -F'\t' '$1 != "100"' | wc -l) $([ "$(echo "$dec" | grep -c .)" -gt 1000 ] && echo many)" "0 many"

tap_done
