#!/usr/bin/env bash
# The af_xdp Ethernet backend forwarding (issue 13): ibgwd in R of A - R - B (veth pairs,
# test/lib/arb.sh) with `backend: af_xdp` on both interfaces, each veth with two RX
# queues (every device queue has its AF_XDP socket). Shows, as a user sees it:
#   - ibgwd runs as nobody (gateway.user) with CAP_BPF kept besides the usual three;
#   - the XDP program is attached to both veths while ibgwd runs, and gone once it
#     exits; the hosts' veths lose TSO while it is attached (veth takes GSO away from a
#     peer whose other end runs XDP: the hosts segment in software) and get it back;
#   - ping and ping6 A -> B; TCP with the hosts' default offloads (checksum offload
#     on: partial checksums that the port completes), both directions and families,
#     every byte intact; UDP, 64 flows of numbered datagrams, none reordered;
#   - one worker drains both device queues (flows hashed onto either all arrive), and
#     with two workers (a reload) both receive, flows still in order, TCP intact;
#   - a device MTU raised past what a UMEM chunk holds is said in the log.
# Needs root, ethtool, jq, python3; IBGW_BUILD (test/run sets it). No timed assertions.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/daemon_suite.sh"
. "$top/test/lib/arb.sh"
. "$top/test/lib/intact.sh"
. "$top/test/lib/flows.sh"
arb_init afxdp 24 ethtool jq python3
export ARB_BACKEND=af_xdp

arb_up "$A" "$R" "$B" 65 66
chmod 755 "$work" # nobody reads the config again at the reload
# Two queues on each veth: R's RX queues 0 and 1, the hosts' TX queues picked by flow.
for d in ra rb; do ip netns exec "$R" ethtool -L "$d" rx 2 tx 2; done
for n in "$A" "$B"; do ip netns exec "$n" ethtool -L eth0 rx 2 tx 2; done
tso() { ip netns exec "$1" ethtool -k eth0 | sed -n 's/^tcp-segmentation-offload: //p'; }
xdp_on() { ip -n "$R" -d link show "$1" | grep -c 'prog/xdp'; }
tap_is "host A's veth has TSO on before the gateway starts" "$(tso "$A")" "on"

arb_config "$work/ibgwd.yaml" 65 66 "workers: 1" "user: nobody"
chmod 644 "$work/ibgwd.yaml"
arb_start "$work/ibgwd.yaml"
tap_check "ibgwd (af_xdp, one worker) answers on its control socket" wait_socket
tap_is "both Ethernet interfaces are up" "$("$gwctl" -S "$sock" show links | grep -c 'state UP')" 2
tap_is "the XDP program is attached to ra and rb" "$(xdp_on ra)$(xdp_on rb)" 11
tap_like "the log names the mode (copy, native XDP, 2 RX queues)" "$(cat "$work/log")" \
	"AF_XDP copy mode, XDP program in native mode, 2 RX queues"
tap_like "it runs as nobody, keeping CAP_BPF for the XDP program besides the usual three" \
	"$(cat "$work/log")" "running as user nobody .* with capabilities cap_net_admin,cap_net_raw,cap_ipc_lock,cap_bpf$"
tap_is "host A's veth has no TSO while ra runs XDP" "$(tso "$A")" "off"
ping_ok() { ip netns exec "$1" ping -c 2 -i 0.2 -W 2 "$2" >/dev/null 2>&1 && echo ok; }
tap_is "ping A -> B through the gateway" "$(ping_ok "$A" 10.66.0.2)" ok
tap_is "ping6 A -> B through the gateway" "$(ping_ok "$A" fd00:66::2)" ok

dd if=/dev/urandom of="$work/blob" bs=1M count=16 status=none
want=$(sha256sum <"$work/blob" | cut -d' ' -f1)
tap_is "16 MiB A -> B over TCP (IPv4, default offloads) arrive intact" \
	"$(intact "$B" "$A" 10.66.0.2 "$work/blob")" "$want"
tap_is "16 MiB B -> A over TCP (IPv6, default offloads) arrive intact" \
	"$(intact "$A" "$B" fd00:65::2 "$work/blob")" "$want"
links=$("$gwctl" -S "$sock" -j -s show links)
cc=$(echo "$links" | jq -r '[.[] | .stats.rx_csum_completed] | add')
echo "# checksums completed by the ports: $cc"
tap_like "the ports completed the hosts' partial TCP checksums (rx_csum_completed)" "$cc" \
	"^[1-9][0-9]*$"

# ethtool -S of veth: per-queue XDP counters of R's veth.
rxq() { ip netns exec "$R" ethtool -S ra | awk -v q="rx_queue_$1_xdp_redirect:" '$1 == q {print $2}'; }
r0=$(rxq 0) r1=$(rxq 1)
got=$(flows "$A" "$B" 10.66.0.2)
echo "# IPv4, one worker: $got (of 19200); ra's queues redirected $(($(rxq 0) - r0)) and $(($(rxq 1) - r1))"
tap_like "IPv4, one worker: every datagram of the 64 flows arrives, none reordered" "$got" \
	"^received 19200 flows 64 reordered 0 last 299$"
tap_like "the flows came in on both of ra's RX queues" "$(($(rxq 0) - r0)) $(($(rxq 1) - r1))" \
	"^[1-9][0-9]{2,} [1-9][0-9]{2,}$"
got=$(flows "$A" "$B" fd00:66::2)
echo "# IPv6, one worker: $got (of 19200)"
tap_like "IPv6, one worker: every datagram of the 64 flows arrives, none reordered" "$got" \
	"^received 19200 flows 64 reordered 0 last 299$"

arb_config "$work/ibgwd.yaml" 65 66 "workers: 2" "user: nobody"
chmod 644 "$work/ibgwd.yaml"
tap_check "reload to two workers" "$gwctl" -S "$sock" reload
workers() { "$gwctl" -S "$sock" -j show stats | jq -r '.[0].per_worker | to_entries | map("\(.key)=\(.value.rx_packets)") | join(" ")'; }
w0=$(workers)
got=$(flows "$A" "$B" 10.66.0.2)
echo "# IPv4, two workers: $got (of 19200)"
tap_like "IPv4, two workers: every datagram of the 64 flows arrives, none reordered" "$got" \
	"^received 19200 flows 64 reordered 0 last 299$"
got=$(flows "$A" "$B" fd00:66::2)
echo "# IPv6, two workers: $got (of 19200)"
tap_like "IPv6, two workers: every datagram of the 64 flows arrives, none reordered" "$got" \
	"^received 19200 flows 64 reordered 0 last 299$"
w=$(workers)
echo "# rx_packets per worker: before $w0, after $w"
tap_like "both workers received frames (each above 1000)" "$w" "^0=[0-9]{4,} 1=[0-9]{4,}$"
tap_is "two workers: 16 MiB A -> B over TCP (IPv4) arrive intact" \
	"$(intact "$B" "$A" 10.66.0.2 "$work/blob")" "$want"
tap_is "two workers: 16 MiB B -> A over TCP (IPv6) arrive intact" \
	"$(intact "$A" "$B" fd00:65::2 "$work/blob")" "$want"

# A device MTU whose frames do not fit a UMEM chunk is said in the log, at open (not
# at 1500) and when a change makes it so: the kernel drops such frames (rx_kernel).
fits=$(grep -c 'do not fit' "$work/log")
ip -n "$R" link set rb mtu 5000
for _ in $(seq 30); do grep -q 'eth rb: MTU 5000: frames over' "$work/log" && break; sleep 0.1; done
tap_like "rb raised to MTU 5000: the log says its frames no longer fit a UMEM chunk (none before)" \
	"$fits $(grep 'do not fit' "$work/log")" \
	"^0 .*eth rb: MTU 5000: frames over [0-9]+ octets do not fit a [0-9]+-byte UMEM chunk and are dropped \(rx_kernel\)$"

kill -TERM "$pid"
wait "$pid"
pid=
tap_is "ibgwd gone: no XDP program on ra or rb" "$(xdp_on ra)$(xdp_on rb)" 00
tap_is "ibgwd gone: host A's veth has TSO again" "$(tso "$A")" "on"
tap_done
