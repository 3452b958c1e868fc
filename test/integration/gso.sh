#!/usr/bin/env bash
# GSO super-frames through ibgwd between two Ethernet interfaces (issue 13): three
# namespaces A - R - B joined by veth pairs, ibgwd in R routing between its two
# af_packet ports, the hosts with their DEFAULT offloads (TSO and checksum offload on:
# the kernel hands R's AF_PACKET sockets TCP super-frames of up to 64 KiB with partial
# checksums). Shows, as a user sees it:
#   - the hosts' veths have TSO on (ETHTOOL_GTSO, as `ethtool -k` reads it);
#   - iperf3 TCP A -> B and B -> A, IPv4 and IPv6: every byte sent is received;
#   - the gateway received GSO frames (rx_gso) and sent them whole to the other veth
#     (tx_gso), with no metadata refused (rx_gso_invalid 0) and no GSO drop;
#   - with B's link at MTU 1400 (A's 1500), TCP A -> B still completes: the segments
#     are cut smaller (the kernel's GSO at the size the gateway gives it), none too big;
#   - every link raised to MTU 9000 while the gateway runs: 8000-octet DF pings cross,
#     also right after the gateway forgot B (the first big packet starts resolution).
# Needs root, iperf3, jq, python3; IBGW_BUILD (test/run sets it). No timed assertions:
# the throughput is printed as a comment.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/daemon_suite.sh"
. "$top/test/lib/arb.sh"
. "$top/test/lib/intact.sh"
arb_init gso 23 iperf3 jq python3

arb_up "$A" "$R" "$B" 61 62

# ETHTOOL_GTSO (0x1e) on a host's eth0: 1 when TSO is on.
tso() {
	ip netns exec "$1" python3 -c '
import ctypes, fcntl, socket, struct, sys
val = ctypes.create_string_buffer(struct.pack("II", 0x1e, 0))
ifr = struct.pack("16sP", b"eth0", ctypes.addressof(val))
fcntl.ioctl(socket.socket(), 0x8946, ifr)
print(struct.unpack("II", val.raw[:8])[1])'
}
tap_is "host A's veth has TSO on (the default)" "$(tso "$A")" 1
tap_is "host B's veth has TSO on (the default)" "$(tso "$B")" 1

ARB_MTU=9000 arb_config "$work/ibgwd.yaml" 61 62 # the devices' MTU rules (1500 at start)
arb_start "$work/ibgwd.yaml"
tap_check "ibgwd answers on its control socket" wait_socket
tap_is "both Ethernet interfaces are up" "$("$gwctl" -S "$sock" show links | grep -c 'state UP')" 2

# iperf3 NS_SERVER NS_CLIENT ADDR BYTES [ARGS]: the bytes iperf3 sent (as the rack suites
# count them); the rate the receiver saw goes to $work/rate.
xfer() {
	local s=$1 c=$2 addr=$3 n=$4
	shift 4
	ip netns exec "$s" iperf3 -s -1 -D -B "$addr" >/dev/null 2>&1
	sleep 0.3
	ip netns exec "$c" timeout 60 iperf3 -c "$addr" -n "$n" -J "$@" >"$work/iperf.json" 2>&1
	jq -r '"\(.end.sum_received.bits_per_second / 1e6 | floor) Mbit/s"' \
		"$work/iperf.json" >"$work/rate" 2>/dev/null
	jq -r --argjson want "$n" \
		'.end.sum_sent.bytes // 0 | if . > $want and . <= $want + 131072 then $want else . end' \
		"$work/iperf.json" 2>/dev/null
}
ping_ok() { ip netns exec "$1" ping -c 2 -i 0.2 -W 2 "$2" >/dev/null 2>&1 && echo ok; }
tap_is "ping A -> B through the gateway (resolves both neighbours)" "$(ping_ok "$A" 10.62.0.2)" ok
tap_is "ping6 A -> B through the gateway" "$(ping_ok "$A" fd00:62::2)" ok

dd if=/dev/urandom of="$work/blob" bs=1M count=32 status=none
want=$(sha256sum <"$work/blob" | cut -d' ' -f1)
tap_is "32 MiB A -> B over TCP (IPv4) arrive intact (SHA-256)" "$(intact "$B" "$A" 10.62.0.2 "$work/blob")" "$want"
tap_is "32 MiB B -> A over TCP (IPv6) arrive intact (SHA-256)" "$(intact "$A" "$B" fd00:61::2 "$work/blob")" "$want"
n=$((64 << 20))
tap_is "iperf3 TCP A -> B (IPv4): 64 MiB" "$(xfer "$B" "$A" 10.62.0.2 $n)" "$n"
echo "# $(cat "$work/rate")"
tap_is "iperf3 TCP B -> A (IPv4): 64 MiB" "$(xfer "$A" "$B" 10.61.0.2 $n)" "$n"
echo "# $(cat "$work/rate")"
tap_is "iperf3 TCP A -> B (IPv6): 64 MiB" "$(xfer "$B" "$A" fd00:62::2 $n)" "$n"
echo "# $(cat "$work/rate")"

links=$("$gwctl" -S "$sock" -j -s show links)
stat() { echo "$links" | jq -r --arg l "$1" '.[] | select(.name == $l) | .stats.'"$2"; }
echo "# ra: $(echo "$links" | jq -c '.[] | select(.name == "ra") | .stats')"
echo "# rb: $(echo "$links" | jq -c '.[] | select(.name == "rb") | .stats')"
tap_like "ra received GSO frames (rx_gso $(stat ra rx_gso))" "$(stat ra rx_gso)" "^[1-9][0-9]*$"
tap_like "rb sent GSO frames whole (tx_gso $(stat rb tx_gso))" "$(stat rb tx_gso)" "^[1-9][0-9]*$"
tap_is "no frame's offload metadata was refused (rx_gso_invalid on ra and rb)" \
	"$(stat ra 'drops.rx_gso_invalid') $(stat rb 'drops.rx_gso_invalid')" "0 0"
st=$("$gwctl" -S "$sock" -j show stats | jq '.[0]')
echo "# stats: $(echo "$st" | jq -c '{gso_whole, gso_segmented, gso_segments, drops: (.drops | with_entries(select(.value > 0)))}' 2>/dev/null)"
tap_is "no GSO drop, nothing too big" "$(echo "$st" | jq -r '"\(.drops.gso) \(.drops.too_big)"')" "0 0"

# B's link at MTU 1400: A's segments of 1448 octets no longer fit; TCP is cut smaller.
ip -n "$B" link set eth0 mtu 1400
ip -n "$R" link set rb mtu 1400
sleep 1
n=$((16 << 20))
tap_is "B at MTU 1400: 32 MiB A -> B over TCP (IPv4) arrive intact" \
	"$(intact "$B" "$A" 10.62.0.2 "$work/blob")" "$want"
tap_is "B at MTU 1400: 32 MiB A -> B over TCP (IPv6) arrive intact" \
	"$(intact "$B" "$A" fd00:62::2 "$work/blob")" "$want"
# rb takes GSO frames at its new MTU too (the kernel cuts them to 1400): nothing was
# segmented in software, every GSO packet went out whole (show stats; the same counters
# are ibgw_worker_gso_sent_whole_total and ibgw_worker_gso_segmented_total).
seg=$("$gwctl" -S "$sock" -j show stats | jq -r '.[0] | "\(.gso_whole) \(.gso_segmented)"')
echo "# sent whole, segmented: $seg"
tap_like "GSO packets went out whole, none segmented in software (both veths take them)" \
	"$seg" "^[1-9][0-9]* 0$"

# Jumbo frames: every link of the path at MTU 9000, the gateway's two after it opened
# its ports. The gateway follows each device (netlink; its port's own send check too):
# a DF ping of 8000 octets of data crosses, IPv4 and IPv6. The hosts forget the path
# MTU of 1400 that B's link taught them above.
for ns in "$A" "$B"; do ip -n "$ns" link set eth0 mtu 9000; done
ip -n "$R" link set ra mtu 9000
ip -n "$R" link set rb mtu 9000
ip -n "$A" route flush cache
ip -n "$A" -6 route flush cache
sleep 1
tap_like "show links: ra and rb follow their devices to MTU 9000" \
	"$("$gwctl" -S "$sock" show links | grep -c ': ether state UP mtu 9000 ')" "^2$"
big_ping() { ip netns exec "$1" ping -c 2 -i 0.2 -W 2 -M do -s 8000 "$2" >/dev/null 2>&1 && echo ok; }
tap_is "all at MTU 9000: DF pings of 8028 octets A -> B and back cross the gateway" \
	"$(big_ping "$A" 10.62.0.2)" ok
tap_is "all at MTU 9000: IPv6 pings of 8048 octets A -> B and back cross the gateway" \
	"$(big_ping "$A" fd00:62::2)" ok

# A big packet toward a neighbour not yet resolved is too big to park (over 4,200
# octets): dropped, but its next hop's resolution starts, so the pings after it cross.
"$gwctl" -S "$sock" neigh flush dev rb >/dev/null
ip netns exec "$A" ping -c 4 -i 0.5 -W 2 -M do -s 8000 10.62.0.2 >"$work/ping" 2>&1
tap_like "gateway's neighbours on rb flushed: of 4 DF pings of 8028 octets, the later ones cross" \
	"$(grep -o '[0-9]* received' "$work/ping")" "^[1-4] received$"
tap_is "... and B's neighbour entry on rb is REACHABLE again" \
	"$("$gwctl" -S "$sock" neigh show dev rb | grep -c '^10\.62\.0\.2 .*REACHABLE')" 1

kill -TERM "$pid"
wait "$pid"
pid=
tap_done
