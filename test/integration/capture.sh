#!/usr/bin/env bash
# gwctl capture on the simulated rack (issue 18): ibgwd on gw1 captures what its IPoIB
# link and its Ethernet interface send and receive, and tshark reads the result.
#   ib0     a filter (icmp) and a count (4): an Ethernet host's two pings to an IB host
#           cross ib0 as two echo requests sent and two replies received; tshark reads
#           link type IPoIB (RFC 4391), the addresses, the received packets' source QPN
#           (the IB host's) and destination GID (the gateway's), the sent packets'
#           destination QPN (the IB host's)
#   eth0    `-w -` into `tshark -r -` (live, through a pipe): Ethernet frames, the MACs
#   limits  snaplen cuts packets but keeps their length; a filter that matches nothing
#           with a duration: an empty capture that ends on time; a filter libpcap cannot
#           compile, an unknown interface, a second capture of the same interface, a
#           terminal as the output: refused with the reason; a client killed mid-capture
#           ends it in the daemon (the interface can be captured again). (The read-only
#           socket's refusal: ctl_flood.sh.)
# Needs root, ibsim, opensm, jq, tshark.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
suite_init cap

tap_plan 17
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm jq tshark
suite_ibhost_helpers
sock=$RACK_STATE/nodes/gw1/ibgwd.sock
cap() { in_ns gw1 "$build/bin/gwctl" -S "$sock" capture "$@"; }
ts() { tshark -r "$@" 2>/dev/null; }
# gwctl capture in the background: its PID is gwctl's (ip netns exec execs it).
cap_bg() { ip netns exec "$rack-gw1" "$build/bin/gwctl" -S "$sock" capture "$@" & }
# finish PID: its exit status once it ends by itself within 10 s (killed after that).
finish() {
	for _ in $(seq 100); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill "$1" 2>/dev/null
	wait "$1"
}
wait_up() {
	for _ in $(seq 200); do
		gwctl show links 2>/dev/null | grep -q "^ib0: .* state UP" && return 0
		sleep 0.1
	done
	return 1
}

if ! R up >"$work/up.log" 2>&1; then
	tap_not_ok "rack up with ibgwd on gw1" "$(tail -5 "$work/up.log")"
	exit 1
fi
wait_up
in_ns ethhost1 ping -c 2 -i 0.2 -W 2 10.10.0.13 >/dev/null 2>&1 # neighbours resolved

# --- ib0 --------------------------------------------------------------------------------
cap_bg ib0 count 4 filter icmp -w "$work/ib0.pcap" 2>"$work/ib0.err"
cpid=$!
sleep 0.5
in_ns ethhost1 ping -c 2 -i 0.2 -W 2 10.10.0.13 >/dev/null 2>&1
finish "$cpid"
rc=$?
# (What the filter left out depends on the link's other traffic: the hosts' IPv6
# neighbour discovery after the gateway's router advertisements, at the rack's start.)
tap_like "ib0: the capture ends at its count (exit 0) and says so" "$rc $(cat "$work/ib0.err")" \
	"^0 4 packets captured on ib0 \(count\), [0-9]+ filtered out, 0 dropped by ibgwd$"
tap_is "ib0: tshark reads link type IPoIB, two echo requests out and two replies in" \
	"$(ts "$work/ib0.pcap" -T fields -e frame.protocols -e ip.src -e ip.dst -e icmp.type | sort | uniq -c | sed 's/^ *//')" \
	"2 ipoib:ip:icmp:data	10.10.0.13	10.20.0.11	0
2 ipoib:ip:icmp:data	10.20.0.11	10.10.0.13	8"
ibhost3_qpn=$(gwctl -j show neighbours dev ib0 | jq -r '.[] | select(.dst == "10.10.0.13") | .qpn')
gw_gid=$(gwctl -j show links | jq -r '.[] | select(.name == "ib0") | .gid')
hex() { while read -r v g; do printf '%d %s\n' "$v" "$g"; done; }
tap_is "ib0: a received reply names its source QPN (the IB host's) and the gateway's GID" \
	"$(ts "$work/ib0.pcap" -Y 'icmp.type == 0' -T fields -e ipoib.grh.sqpn -e ipoib.dgid | sort -u | hex)" \
	"$(printf '%d' "$ibhost3_qpn") $gw_gid"
tap_is "ib0: a sent request names its destination QPN (the IB host's)" \
	"$(ts "$work/ib0.pcap" -Y 'icmp.type == 8' -T fields -e ipoib.daddr.qpn | sort -u | hex)" \
	"$(printf '%d' "$ibhost3_qpn") "

# --- eth0, through a pipe ---------------------------------------------------------------
in_ns gw1 "$build/bin/gwctl" -S "$sock" capture eth0 count 4 icmp -w - 2>"$work/eth0.err" |
	tshark -r - -T fields -e frame.protocols -e eth.src -e eth.dst -e icmp.type \
		>"$work/eth0.txt" 2>/dev/null &
cpid=$!
sleep 0.5
in_ns ethhost1 ping -c 2 -i 0.2 -W 2 10.10.0.13 >/dev/null 2>&1
finish "$cpid" >/dev/null
gw_mac=$(in_ns gw1 cat /sys/class/net/eth0/address)
h_mac=$(in_ns ethhost1 cat /sys/class/net/eth0/address)
tap_is "eth0: -w - piped into tshark -r -: Ethernet frames with the hosts' MACs" \
	"$(sort "$work/eth0.txt" | uniq -c | sed 's/^ *//')" \
	"2 eth:ethertype:ip:icmp:data	$gw_mac	$h_mac	0
2 eth:ethertype:ip:icmp:data	$h_mac	$gw_mac	8"
tap_like "eth0: and gwctl's summary on stderr" "$(cat "$work/eth0.err")" \
	"^4 packets captured on eth0 \(count\)"

# --- limits and refusals ----------------------------------------------------------------
cap_bg eth0 count 2 snaplen 60 icmp -w "$work/snap.pcap" 2>/dev/null
cpid=$!
sleep 0.5
in_ns ethhost1 ping -c 1 -s 500 -W 2 10.10.0.13 >/dev/null 2>&1
finish "$cpid" >/dev/null
tap_is "snaplen 60: packets cut to 60 octets, their length kept" \
	"$(ts "$work/snap.pcap" -T fields -e frame.cap_len -e frame.len | sort -u)" "60	542"
t0=$(date +%s%N)
out=$(cap ib0 duration 1 udp port 9 -w "$work/none.pcap" 2>&1)
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
tap_like "a filter that matches nothing, duration 1: ends on time with nothing captured" \
	"$rc $out $([ "$ms" -ge 1000 ] && [ "$ms" -lt 3000 ] && echo in-time || echo "after $ms ms")" \
	"^0 0 packets captured on ib0 \(duration\), [0-9]+ filtered out, 0 dropped by ibgwd in-time$"
tap_is "... and tshark reads its file as empty (the header alone)" \
	"$(ts "$work/none.pcap" | wc -l) $(stat -c %s "$work/none.pcap")" "0 24"
out=$(cap ib0 'icmp and port' -w "$work/bad.pcap" 2>&1)
tap_is "a filter libpcap cannot compile: refused with libpcap's reason (exit 1)" \
	"$? $out" "1 gwctl: filter: can't parse filter expression: syntax error"
out=$(cap ib9 -w "$work/bad.pcap" 2>&1)
tap_is "an unknown interface: refused" "$? $out" "1 gwctl: no interface 'ib9' in the data plane"
out=$(cap ib0 count 1 2>&1)
tap_like "no -w: a usage error before anything is sent (exit 2)" "$? $out" \
	"^2 gwctl: capture: needs -w FILE"
cap_bg ib0 -w "$work/long.pcap" 2>/dev/null
cpid=$!
sleep 0.5
out=$(cap ib0 -w "$work/second.pcap" 2>&1)
tap_is "a second capture of ib0 while one runs: refused (exit 1)" "$? $out" \
	"1 gwctl: a capture runs on ib0 already (one at a time)"
n_ended=$(grep -c 'capture on ib0 ended' "$RACK_STATE/logs/ibgwd-gw1.log")
kill "$cpid"
wait "$cpid" 2>/dev/null
sleep 0.3
tap_is "the client killed: the daemon ends the capture (logged once more)" \
	"$(grep -c 'capture on ib0 ended' "$RACK_STATE/logs/ibgwd-gw1.log")" "$((n_ended + 1))"
out=$(cap ib0 duration 0.2 -w "$work/again.pcap" 2>&1)
# (Whatever crossed ib0 meanwhile is in it: the gateway's router advertisements too.)
tap_like "... and ib0 can be captured again" "$? $out" "^0 [0-9]+ packets captured on ib0 \(duration\)"
out=$(in_ns gw1 script -qc "$build/bin/gwctl -S $sock capture ib0 duration 1 -w -" /dev/null 2>&1 |
	tr -d '\r')
tap_like "-w - to a terminal: refused (binary data is not for a terminal)" "$out" \
	"standard output is a terminal"
# Every capture above ended in the daemon: both interfaces are free again.
# (What crosses meanwhile is captured: multicast queries and reports, advertisements.)
tap_like "no capture left running: gwctl capture can start on both interfaces" \
	"$(cap ib0 duration 0.1 -w /dev/null 2>&1 | cut -d' ' -f1-5) | $(cap eth0 duration 0.1 -w /dev/null 2>&1 | cut -d' ' -f1-5)" \
	"^[0-9]+ packets captured on ib0 \\| [0-9]+ packets captured on eth0$"
tap_done
