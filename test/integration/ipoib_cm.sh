#!/usr/bin/env bash
# IPoIB connected mode (RFC 4755) between IB hosts of a real rack: ibsim + OpenSM, the
# simulated fabric, ibgw-host on ibhost1/ibhost2 in connected mode and ibhost3 in
# datagram mode (rack.topo), the kernel doing its own ARP, ND, ping and TCP on each TAP.
# Also the cm rack suite docs/connected-mode.md asked for: the CM MADs (cm_umad, carried
# by the verbs shim) ride the real fabric's QP1, and a capture decoded by tshark shows
# them.
# Shows: RC connections come up between the CM hosts (listed established, RC counters
# moving) and carry IPv4, IPv6 and link-local pings, 60000-octet pings with DF (MTU
# 65520) and iperf3 TCP; the datagram host is reached on UD with no REQ sent to it
# (counters and capture) and PMTU handled (ICMP fragmentation needed / packet too big
# from the host role, cached by the kernel); tshark decodes REQ/REP/RTU to QP1 with our
# service ID (0x10000000 00xxxxxx, not RDMA IP CM) and the private data (UD QPN +
# receive MTU 65524), and RC SEND packets; a peer killed and started again gets its
# connection rebuilt and traffic resumes; crossing REQs (both sides start at once, the
# fabric delaying ibhost2's packets) give exactly one connection; an idle connection is
# torn down after the configured idle time and rebuilt by the next packet; the same pair
# in datagram mode for the throughput comparison.
# Needs root, ibsim, opensm, tshark, iperf3; IBGW_BUILD (test/run sets it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
suite_init cm
rackcmd() { R "$@"; }

tap_plan 48
suite_need_built "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm tshark iperf3
suite_ibhost_helpers
n_established() { dump "$1" conns | grep -c 'state established .*up 1'; }
# Restart an IB host: NODE MODE [KILL]; extra ibgw-host options through $HOST_OPTS, its
# P_Key through $PKEY (default 0xffff).
addrs_of() { case $1 in ibhost1) echo 10.10.0.11/24 fd00:10::11/64;; ibhost2) echo 10.10.0.12/24 fd00:10::12/64;; ibhost3) echo 10.10.0.13/24 fd00:10::13/64;; esac; }
wrapper=$work/ibgw-host-opts
printf '#!/bin/sh\nexec "%s" $HOST_OPTS "$@"\n' "$host" >"$wrapper"
chmod +x "$wrapper"
restart_host() {
	local n=$1 mode=$2 sig=${3:-TERM}
	rack_stop "ibgw-host-$n" "$sig"
	# shellcheck disable=SC2046
	IBGW_HOST=$wrapper HOST_OPTS=${HOST_OPTS:-} role_start_ibhost_node "$n" "${PKEY:-0xffff}" "$mode" $(addrs_of "$n") >/dev/null
}
pin_arp() {   # HOST ADDR: the kernel's ARP entry for ADDR on ib0 made permanent
	local ll
	ll=$(in_ns "$1" ip neigh show to "$2" dev ib0 | awk '{ for (i = 1; i < NF; i++) if ($i == "lladdr") print $(i + 1) }')
	in_ns "$1" ip neigh replace "$2" lladdr "${ll:-none}" dev ib0 nud permanent
}
iperf_rate() {   # FROM TO-ADDR PORT -> "N Mbits/sec" (and the retransmits)
	local out
	in_ns "$(case $2 in *.12) echo ibhost2;; *.13) echo ibhost3;; *) echo ibhost1;; esac)" \
		iperf3 -s -1 -D -p "$3" >/dev/null 2>&1
	sleep 0.5
	out=$(in_ns "$1" timeout 30 iperf3 -c "$2" -p "$3" -t 5 -f m 2>&1)
	echo "$out" | awk '/sender/ { r = $9 } /receiver/ { print $7, $8, "retransmits " r }'
}

# --- up ------------------------------------------------------------------------
out=$(rackcmd up 2>&1)
if [ $? -ne 0 ] || ! rack_is_up; then
	tap_not_ok "rack up with IB hosts" "$out"
	exit 1
fi
ok=1
for n in ibhost1 ibhost2 ibhost3; do wait_link $n up 20 || ok=; done
if [ -n "$ok" ]; then tap_ok "ibgw-host on ibhost1..3: links up"
else tap_not_ok "links up" "$(for n in ibhost1 ibhost2 ibhost3; do tail -n 5 "$RACK_STATE/logs/ibgw-host-$n.log"; done)"; fi
st=$(rackcmd status)
tap_like "status: ibhost1 connected, ibhost3 datagram" "$st" "ibhost1 +P_Key 0xffff connected .*link up"
tap_like "ibhost1 advertises the RC flag (0x80) with its UD QPN" "$(dump ibhost1 link)" "hwaddr 80:00:[0-9a-f:]+ mac .* mode connected conn_mtu 65520"
tap_like "ibhost3 (datagram) advertises flags 0" "$(dump ibhost3 link)" "hwaddr 00:00:[0-9a-f:]+ mac .* mode datagram"
tap_like "TAP MTU of a CM host = the connected MTU 65520" "$(in_ns ibhost1 ip link show ib0)" "mtu 65520 "
tap_like "TAP MTU of the datagram host = 2044" "$(in_ns ibhost3 ip link show ib0)" "mtu 2044 "
for n in ibhost1 ibhost2 ibhost3; do wait_dad $n; done
ll2=$(in_ns ibhost2 ip -6 -o addr show dev ib0 scope link | awk '{ print $4 }' | cut -d/ -f1)
qpn1=$(dump ibhost1 link | awk '{ print $10 }')
qpn2=$(dump ibhost2 link | awk '{ print $10 }')
lid3=$(dump ibhost1 neigh >/dev/null; rackcmd ibsim Attached 2>/dev/null | awk '/"ibhost3"/ { for (i = 1; i <= NF; i++) if ($i == "lid") print $(i + 1) }' | tr -d ,)

# --- capture: CM hosts over RC, the datagram host over UD ---------------------------
cap=$work/cm.pcap
rackcmd capture "$cap" >/dev/null 2>&1
tap_check "ping IPv4 ibhost1 -> ibhost2" in_ns ibhost1 ping -c 3 -i 0.2 -W 2 10.10.0.12
sleep 0.3
c1=$(dump ibhost1 conns)
tap_like "ibhost1 lists one established connection to ibhost2 (MTU 65520)" "$c1" \
	"^conn peer 80:00:00:${qpn2#0x}:.* state established (active|passive) up 1 local_qpn 0x[0-9a-f]+ remote_qpn 0x[0-9a-f]+ mtu 65520"
tap_is "exactly one connection each side" "$(n_established ibhost1) $(n_established ibhost2)" "1 1"
rc0=$(stat_field ibhost1 rc_tx_packets)
tap_check "ping IPv6 global ibhost1 -> ibhost2" in_ns ibhost1 ping -c 3 -i 0.2 -W 2 fd00:10::12
tap_check "ping IPv6 link-local ibhost1 -> ibhost2" in_ns ibhost1 ping -c 3 -i 0.2 -W 2 "$ll2%ib0"
tap_check "ping -s 60000 -M do IPv4 (one 60028-octet RC message each way)" \
	in_ns ibhost1 ping -c 2 -i 0.3 -W 2 -s 60000 -M do 10.10.0.12
tap_check "ping -s 60000 -M do IPv6" in_ns ibhost1 ping -6 -c 2 -i 0.3 -W 2 -s 60000 -M do fd00:10::12
rc1=$(stat_field ibhost1 rc_tx_packets)
rx1=$(stat_field ibhost2 rc_rx_packets)
if [ "$((rc1 - rc0))" -ge 10 ] && [ "${rx1:-0}" -ge 10 ]; then
	tap_ok "RC counters move: ibhost1 rc_tx_packets +$((rc1 - rc0)), ibhost2 rc_rx_packets $rx1"
else
	tap_not_ok "RC counters move" "tx $rc0 -> $rc1, ibhost2 rx $rx1"
fi
tap_like "ibhost1's neighbour 10.10.0.12: mode RC, MTU 65520" "$(dump ibhost1 neigh)" \
	"^neigh 10\.10\.0\.12 [A-Z]+ .*mtu 65520 mode RC usable 1"

req0=$(stat_field ibhost1 tx_req)
tap_check "ping IPv4 CM host ibhost1 -> datagram host ibhost3 (UD)" in_ns ibhost1 ping -c 3 -i 0.2 -W 2 10.10.0.13
tap_check "ping IPv6 datagram host ibhost3 -> CM host ibhost1 (UD)" in_ns ibhost3 ping -c 3 -i 0.2 -W 2 fd00:10::11
tap_is "no REQ sent to the datagram host (ibhost1's cm tx_req unchanged)" "$(stat_field ibhost1 tx_req)" "$req0"
tap_like "ibhost1's neighbour 10.10.0.13: mode UD, MTU 2044" "$(dump ibhost1 neigh)" \
	"^neigh 10\.10\.0\.13 [A-Z]+ .*hwaddr 00:.* mtu 2044 mode UD usable 1"
pm=$(in_ns ibhost1 ping -c 2 -i 0.3 -W 2 -s 3000 -M do 10.10.0.13 2>&1)
tap_like "PMTU to the datagram host: ping -s 3000 -M do told mtu 2044 (ICMP from the host role)" "$pm" "mtu ?= ?2044"
tap_like "the kernel caches PMTU 2044 for 10.10.0.13" "$(in_ns ibhost1 ip route get 10.10.0.13)" "mtu 2044"
tap_check "ping -s 3000 without DF to the datagram host works (kernel fragments)" \
	in_ns ibhost1 ping -c 2 -i 0.3 -W 2 -s 3000 10.10.0.13
in_ns ibhost1 ping -6 -c 1 -W 1 -s 3000 fd00:10::13 >/dev/null 2>&1
tap_check "IPv6 -s 3000 to the datagram host after packet too big (kernel fragments)" \
	in_ns ibhost1 ping -6 -c 2 -i 0.3 -W 2 -s 3000 fd00:10::13
tap_like "IPv6 PMTU 2044 cached for fd00:10::13" "$(in_ns ibhost1 ip -6 route get fd00:10::13)" "mtu 2044"
rackcmd capture stop >/dev/null 2>&1
sleep 0.5

# The connection was set up during the first ping, inside the capture window.
ncm() { tshark -r "$cap" -Y "$1 && infiniband.bth.destqp == 1" 2>/dev/null | wc -l; }
cms="REQ $(ncm infiniband.cm.req) REP $(ncm infiniband.cm.rep) RTU $(ncm infiniband.cm.rtu.localcommid)"
tap_like "tshark: CM REQ, REP and RTU to QP1 ($cms)" "$cms" "^REQ [1-9][0-9]* REP [1-9][0-9]* RTU [1-9]"
sid=$(tshark -r "$cap" -Y 'infiniband.cm.req' -T fields -e infiniband.cm.req.serviceid \
	-e infiniband.cm.req.private -e infiniband.cm.req.ip_cm 2>/dev/null | head -n1)
tap_like "tshark: REQ service ID 0x1000000000xxxxxx (the target's UD QPN), not RDMA IP CM" "$sid" \
	"^0x1000000000(0000)?(${qpn1#0x}|${qpn2#0x}|0*${qpn1#0x}|0*${qpn2#0x})	"
pd=$(echo "$sid" | cut -f2 | tr -d :)
tap_like "tshark: REQ private data = reserved octet + sender's UD QPN, receive MTU 65524 (0xfff4)" \
	"$pd" "^000000(${qpn1#0x}|${qpn2#0x})0000fff4"
rep=$(tshark -r "$cap" -Y 'infiniband.cm.rep' -T fields -e infiniband.cm.rep.private 2>/dev/null | head -n1 | tr -d :)
tap_like "tshark: REP private data carries the other UD QPN and 65524" "$rep" "^000000(${qpn1#0x}|${qpn2#0x})0000fff4"
sends=$(tshark -r "$cap" -Y 'infiniband.bth.opcode <= 5' -T fields -e infiniband.bth.opcode 2>/dev/null | sort | uniq -c | tr '\n' ' ')
tap_like "tshark: RC SEND First/Middle/Last (the 60000-octet pings) and RC SEND Only" "$sends" "[0-9]+ 0 .*[0-9]+ 1 .*[0-9]+ 2 .*[0-9]+ 4"
if [ -n "$lid3" ]; then
	n3=$(tshark -r "$cap" -Y "infiniband.cm.req && infiniband.lrh.dlid == $lid3" 2>/dev/null | wc -l)
	tap_is "tshark: no REQ to the datagram host (LID $lid3)" "$n3" "0"
else
	n3=$(tshark -r "$cap" -Y 'infiniband.cm.req' -T fields -e infiniband.cm.req.serviceid 2>/dev/null | grep -vc -e "${qpn1#0x}\$" -e "${qpn2#0x}\$")
	tap_is "tshark: every REQ is for a CM host's service ID" "$n3" "0"
fi

# --- TCP -------------------------------------------------------------------------
r_cm=$(iperf_rate ibhost1 10.10.0.12 5301)
if [ -n "$r_cm" ]; then tap_ok "iperf3 TCP ibhost1 -> ibhost2 over RC: $r_cm"
else tap_not_ok "iperf3 TCP over RC"; fi
r_mix=$(iperf_rate ibhost1 10.10.0.13 5302)
if [ -n "$r_mix" ]; then tap_ok "iperf3 TCP CM host -> datagram host (UD, MSS from 2044): $r_mix"
else tap_not_ok "iperf3 TCP CM -> datagram host"; fi

# --- the peer restarts -------------------------------------------------------------
# The restarted ibhost2 gets the same UD and RC QPNs from the fabric; ibhost1's side of
# the rebuilt connection is a new RC QP.
lqpn() { dump "$1" conns | awk '/state established/ { for (i = 1; i < NF; i++) if ($i == "local_qpn") print $(i + 1) }'; }
old=$(lqpn ibhost1)
restart_host ibhost2 connected KILL
wait_link ibhost2 up 20
wait_dad ibhost2
t0=$(date +%s%N)
tap_check "ibhost2 killed and started again: ping ibhost2 -> ibhost1 (its REQ replaces the stale connection)" \
	in_ns ibhost2 ping -c 1 -w 20 10.10.0.11
echo "# traffic resumed after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
tap_check "and ibhost1 -> ibhost2" in_ns ibhost1 ping -c 1 -w 20 10.10.0.12
sleep 0.5
new=$(lqpn ibhost1)
if [ "$(n_established ibhost1)" = 1 ] && [ -n "$new" ] && [ "$new" != "$old" ]; then
	tap_ok "connection rebuilt: one established, ibhost1's RC QPN $old -> $new"
else
	tap_not_ok "connection rebuilt" "old $old new $new; $(dump ibhost1 conns)"
fi
tap_check "ping -s 60000 -M do over the rebuilt connection" in_ns ibhost1 ping -c 2 -i 0.3 -W 2 -s 60000 -M do 10.10.0.12

# --- idle teardown, then crossing REQs, on the second partition ----------------------------
# Both CM hosts restarted with an idle time of 1.5 s, on P_Key 0x8001 (rack.topo's second
# partition, every port a full member): the CM's MADs go out on that P_Key's index
# (cm_umad, umad_set_pkey) and the RC QPs are made on it, so the connections and their
# traffic stay in the partition, which the capture of this part checks at its end.
# (Not a section of its own: ibsim serves at most 10 clients (IBSIM_MAX_CLIENTS), and
# with two more hosts started, the last start of this suite was refused: "sim_init:
# connect failed".)
export HOST_OPTS="--conn-idle-ms 1500" PKEY=0x8001
restart_host ibhost1 connected
restart_host ibhost2 connected
unset HOST_OPTS PKEY
wait_link ibhost1 up 20 && wait_link ibhost2 up 20
wait_dad ibhost1; wait_dad ibhost2
tap_like "ibhost1 and ibhost2 restarted on P_Key 0x8001, connected mode" \
	"$(dump ibhost1 link | tr '\n' ' ')|$(dump ibhost2 link | tr '\n' ' ')" \
	"^link ib0 node ibhost1 state up pkey 0x8001 .* mode connected conn_mtu 65520 \|link ib0 node ibhost2 state up pkey 0x8001 .* mode connected conn_mtu 65520 $"
cap2=$work/cm8001.pcap
rackcmd capture "$cap2" >/dev/null 2>&1
in_ns ibhost1 ping -c 2 -i 0.3 -w 6 10.10.0.12 >/dev/null 2>&1
t_used=$(date +%s%N)
# A neighbour entry used 5 s ago is confirmed by a unicast ARP probe
# (delay_first_probe_time), by the kernels and by ibgw-host's own table alike, and that
# ARP, like any unicast through IPoIB, starts a connection (as in the Linux driver). So
# the teardown is watched for (polled), and the crossing REQs start right after it,
# well before the probes. The kernels' entries are pinned besides (fewer probes).
pin_arp ibhost1 10.10.0.12; pin_arp ibhost2 10.10.0.11
tap_is "connection up before the idle wait" "$(n_established ibhost1) $(n_established ibhost2)" "1 1"
for _ in $(seq 50); do
	[ "$(n_established ibhost1) $(n_established ibhost2)" = "0 0" ] && break
	sleep 0.1
done
t_idle=$(( ($(date +%s%N) - t_used) / 1000000 ))
tap_is "idle 1.5 s: the connection is torn down on both sides (seen after $t_idle ms)" \
	"$(n_established ibhost1) $(n_established ibhost2) $((t_idle >= 1500))" "0 0 1"
idle=$(( $(stat_field ibhost1 closed_idle) + $(stat_field ibhost2 closed_idle) ))
peer=$(( $(stat_field ibhost1 closed_peer) + $(stat_field ibhost2 closed_peer) ))
# Both sides last used it at the same moment (the ping both ways), so both idle timers
# may fire before either DREQ arrives: the DREQs cross (each side answers the other's),
# and both count it idle (seen in CI: idle 2, peer 0).
if [ "$idle" -ge 1 ] && [ $((idle + peer)) -ge 2 ]; then
	tap_ok "closed as idle on one side or both ($idle), by its DREQ on the other ($peer)"
else tap_not_ok "closed as idle on one side or both, by its DREQ on the other" "$(dump ibhost1 stats | grep cm_stats; dump ibhost2 stats | grep cm_stats)"; fi
tap_like "after the idle teardown the neighbour falls back to UD (MTU 2044)" "$(dump ibhost1 neigh)" \
	"^neigh 10\.10\.0\.12 [A-Z]+ .*mtu 2044 mode UD"

# Both sides know each other's paths now; the fabric holds ibhost2's packets 400 ms, so
# both REQs are in flight at once when both kernels start pinging together.
rackcmd delay 400 ibhost2 >/dev/null 2>&1
in_ns ibhost1 ping -c 3 -i 0.3 -w 10 10.10.0.12 >/dev/null 2>&1 &
p1=$!
in_ns ibhost2 ping -c 3 -i 0.3 -w 10 10.10.0.11 >/dev/null 2>&1 &
p2=$!
wait $p1; s1=$?
wait $p2; s2=$?
rackcmd delay 0 ibhost2 >/dev/null 2>&1
tap_is "both sides pinging at once: both pings answered" "$s1 $s2" "0 0"
ca=$(( $(stat_field ibhost1 crossing_accepted) + $(stat_field ibhost2 crossing_accepted) ))
cr=$(( $(stat_field ibhost1 crossing_rejected) + $(stat_field ibhost2 crossing_rejected) ))
echo "# crossing: accepted $ca rejected $cr (tx_req ibhost1 $(stat_field ibhost1 tx_req), ibhost2 $(stat_field ibhost2 tx_req))"
if [ "$ca" -ge 1 ] && [ "$cr" -ge 1 ] && [ "$(n_established ibhost1) $(n_established ibhost2)" = "1 1" ]; then
	tap_ok "crossing REQs ($ca accepted, $cr rejected): exactly one connection each side"
else
	tap_not_ok "crossing REQs give one connection" "accepted $ca rejected $cr; $(dump ibhost1 conns; dump ibhost2 conns)"
fi
lq1=$(lqpn ibhost1)
rq2=$(dump ibhost2 conns | awk '/established/ { for (i = 1; i < NF; i++) if ($i == "remote_qpn") print $(i + 1) }')
tap_is "the two sides name the same connection (RC QPNs cross-matched)" "$rq2" "$lq1"
sleep 4
tap_check "a 60000-octet ping after another idle teardown (waits for the new connection)" \
	in_ns ibhost1 ping -c 2 -i 0.5 -w 6 -s 60000 -M do 10.10.0.12
rackcmd capture stop >/dev/null 2>&1
sleep 0.5
# Every CM MAD (to QP1) and every RC SEND of the capture on P_Key 0x8001, the REQs naming it.
npk() { tshark -r "$cap2" -Y "$1" 2>/dev/null | wc -l; }
pk="mads $(npk 'infiniband.bth.destqp == 1 && infiniband.bth.p_key == 0x8001') other $(npk 'infiniband.bth.destqp == 1 && infiniband.bth.p_key != 0x8001')"
pk+=", RC SENDs $(npk 'infiniband.bth.opcode <= 5 && infiniband.bth.p_key == 0x8001') other $(npk 'infiniband.bth.opcode <= 5 && infiniband.bth.p_key != 0x8001')"
pk+=", REQ P_Key $(tshark -r "$cap2" -Y 'infiniband.cm.req' -T fields -e infiniband.cm.req.pkey 2>/dev/null | sort -u | tr '\n' ' ')"
tap_like "tshark: on P_Key 0x8001 the CM MADs (REQ to DREP), the RC SENDs and the REQs ($pk)" "$pk" \
	"^mads [1-9][0-9]+ other 0, RC SENDs [1-9][0-9]* other 0, REQ P_Key 0x8001 $"

in_ns ibhost1 ip neigh del 10.10.0.12 dev ib0; in_ns ibhost2 ip neigh del 10.10.0.11 dev ib0

# --- the same pair in datagram mode -----------------------------------------------------
restart_host ibhost1 datagram
restart_host ibhost2 datagram
wait_link ibhost1 up 20 && wait_link ibhost2 up 20
wait_dad ibhost1; wait_dad ibhost2
out=$(in_ns ibhost1 ip link show ib0 2>&1)
if [[ $out =~ "mtu 2044 " ]]; then tap_ok "ibhost1 restarted in datagram mode: TAP MTU 2044"
else tap_not_ok "ibhost1 restarted in datagram mode: TAP MTU 2044" "$out" \
	"$(tail -n 15 "$RACK_STATE/logs/ibgw-host-ibhost1.log" 2>&1)"; fi
in_ns ibhost1 ping -c 1 -w 5 10.10.0.12 >/dev/null 2>&1
r_ud=$(iperf_rate ibhost1 10.10.0.12 5303)
if [ -n "$r_ud" ]; then tap_ok "iperf3 TCP ibhost1 -> ibhost2 in datagram mode: $r_ud"
else tap_not_ok "iperf3 TCP in datagram mode"; fi
echo "# iperf3 TCP ibhost1 -> ibhost2: connected mode $r_cm; datagram mode $r_ud; CM -> datagram host $r_mix"

tap_done
