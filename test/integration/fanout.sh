#!/usr/bin/env bash
# One Ethernet port served by every worker (issue 13): ibgwd with two workers in R of
# A - R - B (veth pairs, test/lib/arb.sh), each worker with its own queue of each port
# (PACKET_FANOUT: the kernel hands a flow's frames to one queue). Shows, as a user sees
# it:
#   - 64 UDP flows A -> B, 300 numbered datagrams each: every flow arrives in order
#     (none of its datagrams overtakes another), in both families;
#   - both workers received from the one port A sends to (show stats, per_worker);
#   - TCP with the hosts' default offloads, A -> B and B -> A: every byte intact;
#   - a reload to one worker and back to two: traffic keeps flowing, in order.
# Needs root, jq, python3; IBGW_BUILD (test/run sets it). No timed assertions.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/daemon_suite.sh"
. "$top/test/lib/arb.sh"
. "$top/test/lib/intact.sh"
. "$top/test/lib/flows.sh"
arb_init fanout 17 jq python3

arb_up "$A" "$R" "$B" 63 64
arb_config "$work/ibgwd.yaml" 63 64 "workers: 2"
arb_start "$work/ibgwd.yaml"
tap_check "ibgwd (two workers) answers on its control socket" wait_socket
tap_is "both Ethernet interfaces are up" "$("$gwctl" -S "$sock" show links | grep -c 'state UP')" 2
ping_ok() { ip netns exec "$1" ping -c 2 -i 0.2 -W 2 "$2" >/dev/null 2>&1 && echo ok; }
tap_is "ping A -> B through the gateway (resolves both neighbours)" "$(ping_ok "$A" 10.64.0.2)" ok
tap_is "ping6 A -> B through the gateway" "$(ping_ok "$A" fd00:64::2)" ok

got=$(flows "$A" "$B" 10.64.0.2)
echo "# IPv4: $got (of 19200)"
tap_like "IPv4: all 64 flows arrive, none reordered" "$got" "^received [0-9]+ flows 64 reordered 0 last [0-9]+$"
got=$(flows "$A" "$B" fd00:64::2)
echo "# IPv6: $got (of 19200)"
tap_like "IPv6: all 64 flows arrive, none reordered" "$got" "^received [0-9]+ flows 64 reordered 0 last [0-9]+$"

# What each worker received: with both queues of ra in use, both took frames of it.
workers() { "$gwctl" -S "$sock" -j show stats | jq -r '.[0].per_worker | to_entries | map("\(.key)=\(.value.rx_packets)") | join(" ")'; }
w=$(workers)
echo "# rx_packets per worker: $w"
tap_like "both workers received frames (each above 1000 of the 38,400 datagrams)" "$w" \
	"^0=[0-9]{4,} 1=[0-9]{4,}$"

dd if=/dev/urandom of="$work/blob" bs=1M count=16 status=none
want=$(sha256sum <"$work/blob" | cut -d' ' -f1)
tap_is "16 MiB A -> B over TCP (IPv4, default offloads) arrive intact" \
	"$(intact "$B" "$A" 10.64.0.2 "$work/blob")" "$want"
tap_is "16 MiB B -> A over TCP (IPv6, default offloads) arrive intact" \
	"$(intact "$A" "$B" fd00:63::2 "$work/blob")" "$want"

# One worker, then two again, by reload: the ports' queues follow.
arb_config "$work/ibgwd.yaml" 63 64 "workers: 1"
tap_check "reload to one worker" "$gwctl" -S "$sock" reload
tap_is "show stats: one worker" "$("$gwctl" -S "$sock" -j show stats | jq -r '.[0].workers')" 1
got=$(flows "$A" "$B" 10.64.0.2)
echo "# one worker: $got"
tap_like "one worker: all 64 flows arrive, none reordered" "$got" "^received [0-9]+ flows 64 reordered 0 last [0-9]+$"
arb_config "$work/ibgwd.yaml" 63 64 "workers: 2"
tap_check "reload to two workers" "$gwctl" -S "$sock" reload
got=$(flows "$A" "$B" 10.64.0.2)
echo "# two workers again: $got"
tap_like "two workers again: all 64 flows arrive, none reordered" "$got" \
	"^received [0-9]+ flows 64 reordered 0 last [0-9]+$"

# gateway.busy_poll_us: how long an idle worker polls before it sleeps. At the default
# (50 us) the pauses between pings 20 ms apart put the workers that carry them to
# sleep; at one second they keep polling through them. (A worker that carries none
# of the pings sleeps after its second either way: only those that do are counted.)
pw() { "$gwctl" -S "$sock" -j show stats | jq -c '.[0].per_worker'; }
pings20() { ip netns exec "$A" ping -q -c 20 -i 0.02 -W 1 10.64.0.2 >/dev/null 2>&1; }
# slept BEFORE AFTER: the sleeps of the workers that received 20 packets or more between
slept() {
	jq -n --argjson a "$1" --argjson b "$2" \
		'[$b | to_entries[] | select(.value.rx_packets - $a[.key].rx_packets >= 20)
		  | .value.sleeps - $a[.key].sleeps] | if length == 0 then "none" else add end'
}
p0=$(pw)
pings20
p1=$(pw)
n=$(slept "$p0" "$p1")
echo "# busy_poll_us 50: the workers carrying the pings slept $n times"
tap_like "busy_poll_us 50: the workers carrying 20 pings 20 ms apart sleep in at least 10 of the pauses" \
	"$n" "^([1-9][0-9]+)$"
arb_config "$work/ibgwd.yaml" 63 64 "workers: 2" "busy_poll_us: 1000000"
out=$("$gwctl" -S "$sock" reload 2>&1)
tap_like "reload: busy_poll_us applied live" "$out" "^    workers: busy poll 1000000 us$"
pings20
p2=$(pw)
pings20
p3=$(pw)
n=$(slept "$p2" "$p3")
echo "# busy_poll_us 1000000: the workers carrying the pings slept $n times"
tap_is "busy_poll_us 1000000: the workers carrying them never sleep" "$n" 0

kill -TERM "$pid"
wait "$pid"
pid=
tap_done
