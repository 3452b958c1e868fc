#!/usr/bin/env bash
# Ethernet ports (port/eth_port.h) against real kernels: two network namespaces joined by
# a veth pair; test/tools/ethp_echo uses only the ethp_ ops. The backend is
# $ETHP_BACKEND: af_packet (the default) or af_xdp (test/integration/eth_port_afxdp.sh).
# af_xdp takes one port per device and leaves the kernel nothing of its VLAN, so there
# the VLAN ports take turns, a second port on the device must be refused, and instead of
# GRO (which XDP precedes) a UDP GSO burst from the peer must arrive in wire-sized
# frames with the checksums the peer left to offload completed.
#   - frames the tool builds reach the peer's kernel (its ARP request creates a
#     neighbour entry there; the kernel answers its pings), io_uring and mmsg engines
#   - frames the peer's kernel sends (ping) reach the tool with the right lengths
#   - VLAN: a kernel VLAN device on the peer reaches only the port of that VLAN
#   - link down/up on the peer is reported through netlink within a bounded time, and
#     a port whose link is down drops sends (counted)
#   - the port's counters match the peer's interface counters
#   - GRO turned on on the device is off once a port of wire-sized buffers is open: a
#     TCP stream arrives in wire-sized frames, none truncated; a port whose buffers hold
#     a merged frame (the gateway's) leaves GRO on and receives the stream merged, none
#     truncated
# Needs root (and iperf3 for the GRO part). Namespaces are ethp-*-$$, removed on exit.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/lib/tap.sh"
build=${IBGW_BUILD:-$top/build}
echo_bin=$build/tools/ethp_echo
G=ethp-g-$$
P=ethp-p-$$
work=$(mktemp -d /tmp/ibgw-ethp.XXXXXX)
pids=()
backend=${ETHP_BACKEND:-af_packet}
export ETHP_BACKEND=$backend

cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	ip netns del "$G" 2>/dev/null
	ip netns del "$P" 2>/dev/null
	[ -n "${ETHP_KEEP:-}" ] && cp -r "$work" "$ETHP_KEEP"
	rm -rf "$work"
}
trap cleanup EXIT

plan=32
[ "$backend" = af_xdp ] && plan=27
tap_plan $plan
echo "# backend $backend"
if [ "$(id -u)" -ne 0 ] || [ ! -x "$echo_bin" ]; then
	for i in $(seq $plan); do echo "ok $i - # SKIP needs root and $echo_bin"; done
	exit 0
fi

gx() { ip netns exec "$G" "$@"; }
px() { ip netns exec "$P" "$@"; }
ip netns add "$G" && ip netns add "$P" || exit 1
ip link add ethg0 netns "$G" type veth peer name ethp0 netns "$P" || exit 1
for ns in "$G" "$P"; do
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
	ip -n "$ns" link set lo up
done
gx sysctl -qw net.ipv6.conf.ethg0.disable_ipv6=1
px sysctl -qw net.ipv6.conf.ethp0.disable_ipv6=1
gx ip link set ethg0 up
px ip addr add 10.77.0.1/24 dev ethp0
px ip link set ethp0 up
# The peer's VLAN 100: a kernel VLAN device when the kernel has 802.1Q (CONFIG_VLAN_8021Q),
# else a raw AF_PACKET peer that sends tagged pings and counts tagged replies.
if px ip link add link ethp0 name ethp0.100 type vlan id 100 2>/dev/null; then
	kernel_vlan=1
	px ip addr add 10.77.100.1/24 dev ethp0.100
	px ip link set ethp0.100 up
else
	kernel_vlan=0
	echo "# this kernel has no 802.1Q devices: VLAN 100 peer is a raw AF_PACKET socket"
fi
cat >"$work/vlan_peer.py" <<'PY'
# vlan_peer.py DEV DSTMAC VID SRCIP DSTIP COUNT SIZE: tagged ICMP echo requests from
# an AF_PACKET socket; prints "tagged_replies N" (replies whose stripped tag is VID).
import select, socket, struct, sys, time
dev, dmac, vid, src, dst, count, size = sys.argv[1:8]
vid, count, size = int(vid), int(count), int(size)
dmac = bytes.fromhex(dmac.replace(':', ''))
smac = bytes.fromhex(open('/sys/class/net/%s/address' % dev).read().strip().replace(':', ''))
def csum(b):
    if len(b) % 2: b += b'\0'
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((dev, 0))
s.setsockopt(263, 8, 1)  # SOL_PACKET, PACKET_AUXDATA
for i in range(count):
    icmp = struct.pack('!BBHHH', 8, 0, 0, 0x77, i) + bytes(j & 255 for j in range(size))
    icmp = icmp[:2] + struct.pack('!H', csum(icmp)) + icmp[4:]
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(icmp), i, 0, 64, 1, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    ip = ip[:10] + struct.pack('!H', csum(ip)) + ip[12:]
    s.send(dmac + smac + struct.pack('!HHH', 0x8100, vid, 0x0800) + ip + icmp)
    time.sleep(0.02)
replies, end = 0, time.time() + 3
while time.time() < end and replies < count:
    if not select.select([s], [], [], 0.1)[0]: continue
    data, anc, flags, addr = s.recvmsg(65535, socket.CMSG_SPACE(20))
    if addr[2] == 4: continue  # our own
    for lvl, typ, d in anc:
        if lvl == 263 and typ == 8:
            st, ln, sn, mac, net, tci, tpid = struct.unpack('IIIHHHH', d[:20])
            if st & 0x10 and tci & 0xfff == vid and data[12:14] == b'\x08\x00' \
               and data[23] == 1 and data[34] == 0 and len(data) == 14 + 28 + size:
                replies += 1
print('tagged_replies', replies)
PY
gmac=$(gx cat /sys/class/net/ethg0/address)
pmac=$(px cat /sys/class/net/ethp0/address)
sleep 0.2

# wait_for FILE REGEX SECONDS: until FILE has a line matching REGEX.
wait_for() {
	local i
	for i in $(seq $(($3 * 50))); do
		grep -Eq -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.02
	done
	return 1
}
# start NAME ARGS...: ethp_echo in the gateway namespace, output in $work/NAME.
start() {
	local name=$1; shift
	ip netns exec "$G" timeout 30 "$echo_bin" "$@" >"$work/$name" 2>"$work/$name.err" &
	pids+=($!)
}
stat_of() { # FILE KEY: a counter from the last stats line
	grep '^stats' "$1" | tail -1 | tr ' ' '\n' | sed -n "s/^$2=//p"
}
link_stat() { # rx|tx packets|bytes of ethp0 in the peer
	px ip -s -j link show ethp0 | python3 -c "import json,sys; print(json.load(sys.stdin)[0]['stats64']['$1']['$2'])"
}

stop_all() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	wait 2>/dev/null
	pids=()
}

# 1. The tool's frames reach the peer's kernel, both engines (af_xdp: its one).
ios="uring mmsg"
[ "$backend" = af_xdp ] && ios=af_xdp
for io in $ios; do
	ioarg=()
	[ "$io" = af_xdp ] || ioarg=(-i "$io")
	out=$(gx timeout 20 "$echo_bin" "${ioarg[@]}" -t 5 ethg0 10.77.0.2 ping 10.77.0.1 5 100 2>&1)
	tap_like "$io: the tool's ARP request is answered by the peer's kernel" "$out" "arp 10.77.0.1 is at $pmac"
	tap_like "$io: the peer's kernel answers the tool's 5 pings" "$out" "^replies 5$"
	tap_like "$io: no drops counted" "$out" "rx_kernel=0 rx_truncated=0 rx_runt=0 rx_vlan=0 tx_full=0"
done
tap_like "the peer's kernel learned the tool's MAC from its ARP request (ip neigh)" \
	"$(px ip neigh show 10.77.0.2 dev ethp0)" "lladdr $gmac"

# 2. Frames from the peer's kernel reach the tool, with VLAN isolation: A on VLAN 100,
#    B untagged, C on VLAN 200 (claims VLAN 100's address: must never see its frames).
px ip neigh flush dev ethp0
[ "$kernel_vlan" = 1 ] && px ip neigh flush dev ethp0.100
if [ "$backend" = af_packet ]; then
rx0=$(link_stat rx packets); tx0=$(link_stat tx packets); rxb0=$(link_stat rx bytes)
start A -v 100 -t 10 ethg0 10.77.100.2 respond
start B -t 10 ethg0 10.77.0.2 respond
start C -v 200 -t 10 ethg0 10.77.100.2 respond
wait_for "$work/A" '^ready' 5 && wait_for "$work/B" '^ready' 5 && wait_for "$work/C" '^ready' 5
out=$(px ping -c 5 -i 0.05 -s 100 -W 2 10.77.0.2 2>&1)
tap_like "untagged: the peer's pings to the untagged port are answered" "$out" " 0% packet loss"
if [ "$kernel_vlan" = 1 ]; then
	out=$(px ping -c 5 -i 0.05 -s 1000 -W 2 10.77.100.2 2>&1)
	tap_like "VLAN 100: the peer's pings over its VLAN device are answered" "$out" " 0% packet loss"
	a_arp=1
else
	out=$(px python3 "$work/vlan_peer.py" ethp0 "$gmac" 100 10.77.100.1 10.77.100.2 5 1000 2>&1)
	tap_like "VLAN 100: tagged pings from the raw peer are answered, tagged 100" "$out" "tagged_replies 5"
	a_arp=0
fi
out=$(px ping -c 3 -i 0.05 -s 1472 -M do -W 2 10.77.0.2 2>&1)
tap_like "untagged: full-MTU pings (1500-byte IP packets) are answered" "$out" " 0% packet loss"
sleep 0.2
stop_all
rx1=$(link_stat rx packets); tx1=$(link_stat tx packets); rxb1=$(link_stat rx bytes)
else
	# One af_xdp port per device: B, then A, then C; the peer sends each only what is
	# its own (C: VLAN 100's pings, which it must not see). The counters cover B and A.
	rx0=$(link_stat rx packets); tx0=$(link_stat tx packets); rxb0=$(link_stat rx bytes)
	start B -t 10 ethg0 10.77.0.2 respond
	wait_for "$work/B" '^ready' 5
	out=$(px ping -c 5 -i 0.05 -s 100 -W 2 10.77.0.2 2>&1)
	tap_like "untagged: the peer's pings to the untagged port are answered" "$out" " 0% packet loss"
	out=$(px ping -c 3 -i 0.05 -s 1472 -M do -W 2 10.77.0.2 2>&1)
	tap_like "untagged: full-MTU pings (1500-byte IP packets) are answered" "$out" " 0% packet loss"
	sleep 0.2
	stop_all
	start A -v 100 -t 10 ethg0 10.77.100.2 respond
	wait_for "$work/A" '^ready' 5
	if [ "$kernel_vlan" = 1 ]; then
		out=$(px ping -c 5 -i 0.05 -s 1000 -W 2 10.77.100.2 2>&1)
		tap_like "VLAN 100: the peer's pings over its VLAN device are answered" "$out" " 0% packet loss"
		a_arp=1
	else
		out=$(px python3 "$work/vlan_peer.py" ethp0 "$gmac" 100 10.77.100.1 10.77.100.2 5 1000 2>&1)
		tap_like "VLAN 100: tagged pings from the raw peer are answered, tagged 100" "$out" "tagged_replies 5"
		a_arp=0
	fi
	sleep 0.2
	stop_all
	rx1=$(link_stat rx packets); tx1=$(link_stat tx packets); rxb1=$(link_stat rx bytes)
	start C -v 200 -t 10 ethg0 10.77.100.2 respond
	wait_for "$work/C" '^ready' 5
	if [ "$kernel_vlan" = 1 ]; then
		px ping -c 5 -i 0.05 -s 1000 -W 1 10.77.100.2 >/dev/null 2>&1
	else
		px python3 "$work/vlan_peer.py" ethp0 "$gmac" 100 10.77.100.1 10.77.100.2 5 1000 >/dev/null 2>&1
	fi
	stop_all
fi
tap_is "B saw the 100-byte pings as 142-byte frames and the full-MTU ones as 1514" \
	"$(grep '^echo' "$work/B" | sort | uniq -c | awk '{print $1 "x" $3}' | tr '\n' ' ')" \
	"5xlen=142 3xlen=1514 "
tap_is "A saw the 1000-byte pings of VLAN 100 as untagged 1042-byte frames, tag 100" \
	"$(grep '^echo' "$work/A" | sort | uniq -c | awk '{print $1 "x" $3 $4}')" "5xlen=1042vlan=100"
tap_is "A received nothing untagged (arp+icmp = all it received)" \
	"$(( $(stat_of "$work/A" arp) + $(stat_of "$work/A" icmp) ))/$(stat_of "$work/A" other)" \
	"$(stat_of "$work/A" rx_packets)/0"
tap_is "B received no frame of VLAN 100 (1 ARP + 8 pings)" \
	"$(stat_of "$work/B" arp)/$(stat_of "$work/B" icmp)/$(stat_of "$work/B" other)" "1/8/0"
tap_is "C (VLAN 200) received nothing" "$(stat_of "$work/C" rx_packets)" "0"
tap_is "no frame of another VLAN reached user space (kernel filter)" \
	"$(stat_of "$work/A" rx_vlan)$(stat_of "$work/B" rx_vlan)$(stat_of "$work/C" rx_vlan)" "000"
sent=$(( $(stat_of "$work/A" tx_packets) + $(stat_of "$work/B" tx_packets) ))
tap_is "frames the ports sent = frames the peer's ethp0 received" "$sent" "$((rx1 - rx0))"
tap_is "bytes the ports sent = bytes the peer's ethp0 received" \
	"$(( $(stat_of "$work/A" tx_bytes) + $(stat_of "$work/B" tx_bytes) ))" "$((rxb1 - rxb0))"
tap_is "frames the peer sent = frames A and B received" \
	"$(( $(stat_of "$work/A" rx_packets) + $(stat_of "$work/B" rx_packets) ))" "$((tx1 - tx0))"
tap_is "the ports counted the replies they sent ($a_arp ARP + 5 pings for A; 1 + 8 for B)" \
	"$(stat_of "$work/A" tx_packets)/$(stat_of "$work/B" tx_packets)" "$((a_arp + 5))/9"
tap_is "tx bytes include the inserted tag on VLAN 100 (42+4 per ARP, 5 x (1042+4))" \
	"$(stat_of "$work/A" tx_bytes)" "$((a_arp * 46 + 5 * 1046))"

if [ "$backend" = af_packet ]; then
	# 3. mmsg engine receives too.
	start M -i mmsg -t 10 ethg0 10.77.0.2 respond
	wait_for "$work/M" '^ready' 5
	out=$(px ping -c 5 -i 0.05 -s 200 -W 2 10.77.0.2 2>&1)
	tap_like "mmsg: the peer's pings are answered" "$out" " 0% packet loss"
	stop_all
	tap_is "mmsg: echo requests seen with their lengths" \
		"$(grep -c '^echo len=242 vlan=0' "$work/M")" 5
else
	# 3. A second af_xdp port on the device is refused, with the reason.
	start M -t 10 ethg0 10.77.0.2 respond
	wait_for "$work/M" '^ready' 5
	out=$(gx timeout 10 "$echo_bin" -v 100 -t 2 ethg0 10.77.100.2 respond 2>&1)
	tap_like "af_xdp: a second port on the device is refused, saying why" "$out" \
		"has an XDP program already .*one af_xdp port per device"
	stop_all
fi

# 4. Link down/up on the peer, through netlink, bounded.
start L -t 15 ethg0 - link
wait_for "$work/L" '^ready up=1' 5
tap_like "link: starts up" "$(cat "$work/L")" "^ready up=1 mtu=1500"
t0=$(date +%s%N)
px ip link set ethp0 down
if wait_for "$work/L" '^link up=0' 2; then
	tap_ok "link: peer down reported within 2 s ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
else
	tap_not_ok "link: peer down reported within 2 s" "$(cat "$work/L" "$work/L.err")"
fi
wait_for "$work/L" '^tx_while_down' 2
tap_like "link: a send while down is consumed and counted as dropped, not sent" \
	"$(cat "$work/L")" "tx_while_down accepted=1 dropped=1 sent=0"
t0=$(date +%s%N)
px ip link set ethp0 up
if wait_for "$work/L" '^link up=1' 3; then
	tap_ok "link: peer up reported within 3 s ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
else
	tap_not_ok "link: peer up reported within 3 s" "$(cat "$work/L" "$work/L.err")"
fi
gx ip link set ethg0 mtu 1400
wait_for "$work/L" 'mtu=1400' 2
tap_like "link: an MTU change is reported" "$(cat "$work/L")" "^link up=1 mtu=1400"
stop_all

if [ "$backend" = af_packet ]; then
	# 5. GRO: with it on, the device hands every packet tap TCP segments merged into frames
	# of up to 64 KiB, which a port of 2048-octet buffers cannot hold. Opening such a port
	# turns it off; a fast TCP stream from the peer (its own segmentation in software:
	# wire-sized frames, as from a NIC) to the gateway namespace's kernel then reaches the
	# port in frames no larger than the wire's, none truncated. A port of ETHP_BUF_MAX
	# buffers (the gateway's) leaves it on and gets the stream merged.
	ethtool_value() { # NS DEV CMD [VALUE]: an ETHTOOL_G*/S* of one value; prints it
		ip netns exec "$1" python3 -c '
import ctypes, fcntl, socket, struct, sys
dev, cmd = sys.argv[1], int(sys.argv[2], 0)
v = int(sys.argv[3]) if len(sys.argv) > 3 else 0
val = ctypes.create_string_buffer(struct.pack("II", cmd, v), 8)
ifr = struct.pack("16sP", dev.encode(), ctypes.addressof(val))
fcntl.ioctl(socket.socket(), 0x8946, ifr)
print(struct.unpack("II", val.raw[:8])[1])' "${@:2}"
	}
	ethtool_value "$P" ethp0 0x17 0 >/dev/null # ETHTOOL_STXCSUM off (TSO, GSO with it)
	gx ip link set ethg0 mtu 1500
	gx ip addr add 10.77.0.3/24 dev ethg0
	# gro_port NAME ARGS...: GRO turned on, the tool started as NAME on ethg0 (ARGS: its
	# options), ready (not in a subshell: start keeps its PID).
	gro_port() {
		local name=$1; shift
		ethtool_value "$G" ethg0 0x2c 1 >/dev/null # ETHTOOL_SGRO on
		gx iperf3 -s -1 -D -B 10.77.0.3 >/dev/null 2>&1
		start "$name" -t 15 "$@" ethg0 10.77.0.2 respond
		wait_for "$work/$name" '^ready' 5
	}
	# gro_stream: a 2 s TCP stream from the peer into the gateway namespace's kernel,
	# then the tool (the last started) stopped: its final stats line written.
	gro_stream() {
		px timeout 10 iperf3 -c 10.77.0.3 -t 2 >/dev/null 2>&1
		kill -TERM "${pids[-1]}" 2>/dev/null
		wait "${pids[-1]}" 2>/dev/null
	}
	gro_port R
	tap_is "GRO: opening the port turned GRO off on the device" "$(ethtool_value "$G" ethg0 0x2b)" 0
	gro_stream
	rx=$(stat_of "$work/R" rx_packets)
	tap_is "GRO: a TCP stream from the peer reaches the port in wire-sized frames, none truncated" \
		"$([ "${rx:-0}" -gt 10000 ] && echo "many $(stat_of "$work/R" rx_truncated)")" "many 0"
	# With buffers that hold a merged frame and the vnet header (the gateway's port), GRO
	# is left on: the same stream reaches the port in GRO frames with their metadata
	# (rx_gso, each counted once in rx_packets), none truncated. The peer's veth must not
	# offer TSO for the veth to merge (it had tx checksumming, and so TSO, off above).
	gro_port R2 -G
	tap_is "GRO: a port whose buffers hold a merged frame leaves GRO on" \
		"$(ethtool_value "$G" ethg0 0x2b)" 1
	gro_stream
	gso=$(stat_of "$work/R2" rx_gso)
	tap_is "GRO: the stream reaches that port merged (GSO frames), none truncated" \
		"$([ "${gso:-0}" -gt 100 ] && echo "merged $(stat_of "$work/R2" rx_truncated)")" "merged 0"
else
	# 5. af_xdp: XDP sees frames before GRO, and a veth whose other end runs XDP takes
	# TSO/USO from the peer, which segments in software, leaving the checksums to
	# offload. 10 UDP_SEGMENT sends of 8 x 1000 octets from the peer reach the port as
	# 80 wire-sized frames, each with its checksum completed by the port.
	gx ip link set ethg0 mtu 1500
	start R -t 15 ethg0 10.77.0.2 respond
	wait_for "$work/R" '^ready' 5
	px python3 -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_UDP, 103, 1000)  # UDP_SEGMENT
for i in range(10):
    s.sendto(bytes(8000), ("10.77.0.2", 9))
    time.sleep(0.05)'
	sleep 0.3
	stop_all
	tap_is "af_xdp: the peer's UDP GSO sends arrive as 80 wire-sized frames, none dropped" \
		"$(stat_of "$work/R" other) $(stat_of "$work/R" rx_kernel) $(stat_of "$work/R" rx_truncated)" "80 0 0"
	tap_is "af_xdp: the port completed their partial UDP checksums" \
		"$(stat_of "$work/R" rx_csum_completed)" 80
	tap_is "af_xdp: no XDP program left on the device once the ports closed" \
		"$(gx ip -d link show ethg0 | grep -c 'prog/xdp')" 0
fi
tap_done
