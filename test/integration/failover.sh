#!/usr/bin/env bash
# Failover pairs on the simulated rack (issue 8): sim/rack up --ha runs ibgwd on gw1
# (priority 150) and gw2 (100) with sim/etc/rack-ha-gw*.yaml; the hosts route through the
# service addresses 10.20.0.1 / 10.10.0.1 (and IPv6), held by the master. Every gap is
# the longest time between two replies of a 1 ms ping (test/lib/gap.sh), printed as a
# diagnostic line; the checks bound it.
#   roles          gw1 MASTER holding the addresses, gw2 BACKUP, both paths alive both
#                  ways, show ha in text and -j on both boxes, the pair's metrics
#   no false alarm the Ethernet heartbeat path cut at the switch (nftables drops UDP
#                  7789): no transition, the path shows dead, then alive again; 1% loss
#                  on both heartbeat paths (1% of the heartbeats at the switch, 1% of
#                  everything gw1 and gw2 send on the fabric) for 10 s: no transition
#   SIGKILL        of the master under ping floods Ethernet -> IB and IB -> Ethernet and
#                  iperf3 TCP streams both ways: gw2 takes over, every gap within what
#                  docs/failover.md reports plus a 60 ms margin, both streams complete; gw2 had gw1's neighbours and paths
#                  by state sync and asks the SA for no path when it takes over
#   failback       gw1 restarted preempts gw2 (handed over, no dead interval: the gap is
#                  small); with preempt off it stays BACKUP until `gwctl ha switchover`
#   links          the master's Ethernet link down: FAULT, gw2 takes over, and back; the
#                  master's HCA port down through ibsim: gw2 takes over
#   SM failover    the master OpenSM killed, the standby takes over: no failover, the
#                  traffic keeps flowing
#   active/active  the group split in two by per-group priorities (IPv4 on gw1, IPv6
#                  on gw2): both forward at once, the IB host's next hops are each box;
#                  gw2 SIGKILLed: gw1 MASTER of both (show ha says why), the IPv6 gaps
#                  bounded as a SIGKILL's, IPv4 through gw1 not interrupted (its gap
#                  under 60 ms, no svc4 transition); gw2 restarted:
#                  it preempts svc6 back, svc4 not interrupted, and for 3 s after both
#                  boxes hear each other on both paths and no group moves; neither box
#                  refused a record of the other's state sync (IPv6 link-local included)
#   neighbours     the heartbeats confirm each box's entries for the other's addresses;
#                  gw2's restart made gw1 resolve its entries for gw2 again
# Needs root, ibsim, opensm, jq, iperf3, nft, curl.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
suite_init fo
. "$top/test/lib/gap.sh"

tap_plan 56
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm jq iperf3 nft curl
suite_ibhost_helpers
. "$top/test/lib/ha.sh"
path_alive() { g "$1" -j show ha | jq -r --arg p "$2" '.[] | select(.kind == "path" and .path == $p) | .alive'; }
# Gap bounds: the largest gap docs/failover.md reports for each case ("Measured on the
# simulated rack"), plus a margin of 60 ms (three heartbeat intervals) for a loaded
# two-core machine. A bound is a promise the docs make, not a generous timeout.
# A SIGKILL's gap is bounded by what the timers promise, D + I (50 ms with the defaults:
# heartbeats every 10 ms, dead after 40 ms), plus 40 ms for the threads and the IB
# host's way to the new master on a loaded machine (measured 40-46 ms alone, 51-54 ms
# with two compilers beside the rack, 73.8 ms once IB -> Ethernet in a CI run:
# docs/failover.md, "Timers and bounds").
margin=60
bound() { echo $(($1 + margin)); }
kill_bound=90
gap_ok() { # NAME LIMIT_MS: the gap line, and whether it is under the limit
	local r
	r=$(gap_stop "$1")
	echo "# gap $1: ${r% * *} ms, lost ${r#* }" >&2
	awk -v r="${r%% *}" -v l="$2" 'BEGIN { exit !(r < l) }' && echo ok || echo "$r"
}
ethsw() { ip netns exec "$rack-ethsw" "$@"; }

if ! R up --ha >"$work/up.log" 2>&1; then
	tap_not_ok "rack up with a failover pair" "$(tail -5 "$work/up.log")"
	exit 1
fi
wait_state gw1 master 10
wait_state gw2 backup 10
tap_is "roles: gw1 (priority 150) MASTER, gw2 BACKUP" "$(state gw1) $(state gw2)" "master backup"
out=$(g gw1 show ha)
tap_like "show ha on gw1: the group, its reason and the peer's view" "$out" \
	"group svc MASTER priority 150 since [0-9.]+m?s: .*
    peer BACKUP priority 100"
tap_like "show ha on gw1: the service addresses held" "$out" "10\.20\.0\.1/24 dev eth0 held"
tap_like "show ha on gw2: both heartbeat paths alive and heard" "$(g gw2 show ha)" \
	"path ib0 peer 10\.10\.0\.2 UP alive heard .*
path eth0 peer 10\.20\.0\.2 UP alive heard"
tap_is "show ha -j on gw2: the peer by name, alive" \
	"$(g gw2 -j show ha | jq -r '.[] | select(.kind == "node") | "\(.peer) \(.peer_alive)"')" "gw1 true"
page=$(in_ns gw1 curl -s --max-time 5 http://127.0.0.1:9464/metrics)
tap_like "metrics on gw1: the group's state and both paths alive (Prometheus text)" \
	"$(echo "$page" | grep -E '^ibgw_failover_(group_state\{group="svc",state="master"\}|path_alive)' | tr '\n' ' ')" \
	'group_state\{group="svc",state="master"\} 1 .*path_alive\{path="ib0"\} 1 .*path_alive\{path="eth0"\} 1'
# Neighbours resolved first (one ping each, not counted): right after a rack starts, the
# first IPv6 packets from an IB host to an Ethernet host are often lost while the gateway
# resolves (single gateway or pair alike, also with the build of 2026-11-25: a known
# issue, not this suite's subject), which made the count flaky.
in_ns ibhost3 ping -6 -c 1 -W 5 fd00:20::11 >/dev/null 2>&1
in_ns ethhost1 ping -c 1 -W 5 10.10.0.13 >/dev/null 2>&1
tap_is "traffic through the pair: Ethernet -> IB" "$(pings ethhost1 10.10.0.13)" 3
tap_is "traffic through the pair: IB -> Ethernet (IPv6)" "$(pings ibhost3 -6 fd00:20::11)" 3

# --- no false failover -------------------------------------------------------------------
t1=$(transitions gw1)
t2=$(transitions gw2)
# The backup's process stopped for 0.4 s (SIGSTOP: a stall, a swap-in, a VM pause): on
# resuming it must not take the master for dead because it heard nothing meanwhile.
stalls() { in_ns gw2 curl -s --max-time 5 http://127.0.0.1:9464/metrics |
	awk '/^ibgw_failover_stalls_total/ { print $2 }'; }
s0=$(stalls)
l0=$(wc -l <"$RACK_STATE/logs/ibgwd-gw2.log")
kill -STOP "$(rack_pid ibgwd-gw2)"
sleep 0.4
kill -CONT "$(rack_pid ibgwd-gw2)"
sleep 1
# The log says so at once (a stall as long as the dead interval is never held back): the
# heartbeat timer came at least 0.4 s less one interval late.
stall_logged=$(tail -n +"$((l0 + 1))" "$RACK_STATE/logs/ibgwd-gw2.log" |
	grep -oE 'heartbeat thread ran [0-9]+ ms late' | awk '$4 >= 390 { n++ } END { print n + 0 }')
tap_is "backup stopped 0.4 s: no transition on either box, the stall counted and logged" \
	"$(state gw1) $(($(transitions gw1) - t1)) $(state gw2) $(($(transitions gw2) - t2)) $(($(stalls) > ${s0:-0})) $stall_logged" \
	"master 0 backup 0 1 1"
t1=$(transitions gw1)
t2=$(transitions gw2)
# Heartbeats dropped at the Ethernet switch (nftables, bridge family): all, or 1%.
hb_rule() { # RULE...: replace the switch's heartbeat rule (none: no rule)
	ethsw nft flush chain bridge ibgwtest hb 2>/dev/null
	[ $# -eq 0 ] || ethsw nft add rule bridge ibgwtest hb udp dport 7789 "$@"
}
if ethsw nft -f - <<'EOF'
table bridge ibgwtest {
	chain hb {
		type filter hook forward priority 0;
	}
}
EOF
then
	hb_rule drop
	sleep 1
	tap_is "Ethernet heartbeat path cut: gw2 sees it dead, ib0 alive" \
		"$(path_alive gw2 eth0) $(path_alive gw2 ib0)" "false true"
	sleep 2
	tap_is "... and in 3 s no transition on either box" "$(transitions gw1) $(transitions gw2)" "$t1 $t2"
	tap_is "... gw1 still MASTER" "$(state gw1) $(state gw2)" "master backup"
	hb_rule
	sleep 0.5
	tap_is "path restored: alive again" "$(path_alive gw2 eth0)" true
	hb_rule numgen random mod 100 "<" 1 drop
	R loss 1 gw1 >/dev/null
	R loss 1 gw2 >/dev/null
	sleep 10
	tap_is "1% loss on both heartbeat paths for 10 s: no transition" \
		"$(transitions gw1) $(transitions gw2)" "$t1 $t2"
	hb_rule
	R loss 0 gw1 >/dev/null
	R loss 0 gw2 >/dev/null
else
	for i in 1 2 3 4 5; do tap_ok "heartbeat path cut and loss # SKIP no nftables bridge support"; done
fi

# --- the master killed -------------------------------------------------------------------
tap_like "state sync: gw2 (BACKUP) learned gw1's neighbours and paths" \
	"$(g gw2 -j show ha | jq -r '.[] | select(.kind == "node") | "\(.sync_neighbours_learned > 0) \(.sync_paths_learned > 0)"')" \
	"^true true$"
q0=$(g gw2 -j show stats | jq '.[0].paths.queries')
in_ns ibhost3 iperf3 -s -1 -D -B 10.10.0.13 --logfile "$work/iperf.log" >/dev/null 2>&1
in_ns ibhost3 iperf3 -s -1 -D -B 10.10.0.13 -p 5202 --logfile "$work/iperf-r.log" >/dev/null 2>&1
sleep 0.3
# Two TCP streams across the kill: Ethernet -> IB, and IB -> Ethernet (-R: the server
# on the IB host sends), each at 150 Mbit/s: unpaced, the two filled both CPUs, and the
# pings below then measured how late each wake-up of the takeover's chain ran on a
# saturated machine (gw2's threads, ibgw-host, the kernel, OpenSM's SA), not the
# failover: IB -> Ethernet gaps of 44.7-137.6 ms on the AMD EPYC VM (docs/failover.md).
in_ns ethhost1 timeout 60 iperf3 -c 10.10.0.13 -t 6 -b 150M -J >"$work/iperf.json" 2>/dev/null &
iperf=$!
in_ns ethhost1 timeout 60 iperf3 -c 10.10.0.13 -p 5202 -R -t 6 -b 150M -J >"$work/iperf-r.json" 2>/dev/null &
iperf_r=$!
gap_start e2i "$rack-ethhost1" 10.10.0.13
gap_start i2e "$rack-ibhost3" 10.20.0.11
sleep 2
kill -9 "$(rack_pid ibgwd-gw1)"
wait_state gw2 master 5
tap_like "SIGKILL of the master: gw2 takes over, and says why" "$(g gw2 show ha | grep '^group')" \
	"MASTER priority 100 .*: peer dead on all paths"
sleep 2
tap_is "SIGKILL: the gap Ethernet -> IB is under $kill_bound ms (D + I + 40)" \
	"$(gap_ok e2i "$kill_bound")" ok
tap_is "SIGKILL: the gap IB -> Ethernet is under $kill_bound ms (D + I + 40)" \
	"$(gap_ok i2e "$kill_bound")" ok
wait "$iperf" "$iperf_r"
tap_is "state sync: taking over, gw2 asked the SA for no path (it had gw1's)" \
	"$(g gw2 -j show stats | jq '.[0].paths.queries')" "$q0"
tap_like "SIGKILL: the TCP stream Ethernet -> IB across the failover completes" \
	"$(jq -r '"\(.end.sum_received.bytes > 0) \(.error // "none")"' "$work/iperf.json")" "^true none$"
tap_like "SIGKILL: the TCP stream IB -> Ethernet across the failover completes" \
	"$(jq -r '"\(.end.sum_received.bytes > 0) \(.error // "none")"' "$work/iperf-r.json")" "^true none$"
for f in iperf iperf-r; do
	echo "# iperf3 ($f) across the failover: $(jq -r '.end.sum_received.bits_per_second / 1e6 | floor' "$work/$f.json") Mbit/s, $(jq -r '.end.sum_sent.retransmits' "$work/$f.json") retransmits" >&2
done

# --- failback ----------------------------------------------------------------------------
gap_start back "$rack-ethhost1" 10.10.0.13
gateway_start gw1 >/dev/null 2>&1
wait_state gw1 master 10
tap_like "failback with preemption: gw1 takes the group back" "$(g gw1 show ha | grep '^group')" \
	"MASTER priority 150 .*: preemption: peer gw2 handed over"
sleep 1
tap_is "failback: the gap is under $(bound 12) ms (12 measured + margin)" "$(gap_ok back "$(bound 12)")" ok
tap_is "failback: gw2 BACKUP again" "$(state gw2)" backup

# Without preemption: gw1 comes back as BACKUP and stays; a switchover moves the group.
sed 's/preempt: true/preempt: false/' "$RACK_STATE/nodes/gw1/ibgwd.yaml" >"$work/gw1-nopreempt.yaml"
kill -9 "$(rack_pid ibgwd-gw1)"
wait_state gw2 master 5
gateway_start gw1 "$work/gw1-nopreempt.yaml" >/dev/null 2>&1
wait_state gw1 backup 10 # up (its port open, the peer heard): a slow start is no failure
sleep 2                  # ... and it stays BACKUP
tap_is "failback without preemption: gw1 stays BACKUP, gw2 MASTER" "$(state gw1) $(state gw2)" \
	"backup master"
gap_start sw "$rack-ethhost1" 10.10.0.13
g gw1 ha switchover
wait_state gw1 master 5
tap_like "gwctl ha switchover on gw1: gw1 MASTER" "$(g gw1 show ha | grep '^group')" \
	"MASTER .*manual switchover"
sleep 1
tap_is "switchover: the gap is under $(bound 9) ms (9 measured + margin)" "$(gap_ok sw "$(bound 9)")" ok
tap_like "gwctl ha switchover with an unknown group: a precise error" \
	"$(g gw1 ha switchover nosuch 2>&1)" "no failover group 'nosuch'"

# --- links -------------------------------------------------------------------------------
gap_start eth "$rack-ibhost3" 10.20.0.11
in_ns gw1 ip link set eth0 down
wait_state gw2 master 5
tap_like "the master's Ethernet link down: gw1 FAULT" "$(g gw1 show ha | grep '^group')" \
	"FAULT .*tracked path 1 is down"
sleep 1
tap_is "Ethernet link down: the gap IB -> Ethernet is under $(bound 13) ms (13 measured + margin)" \
	"$(gap_ok eth "$(bound 13)")" ok
in_ns gw1 ip link set eth0 up
wait_state gw1 backup 5
g gw1 ha switchover >/dev/null
wait_state gw1 master 5
tap_is "link back, switchover: gw1 MASTER again" "$(state gw1)" master

gap_start hca "$rack-ethhost1" 10.10.0.13
R link gw1 down >/dev/null
wait_state gw2 master 10
tap_like "the master's HCA port down (ibsim): gw2 takes over, told by gw1's FAULT" \
	"$(g gw2 show ha | grep '^group')" "MASTER priority 100 .*: peer gw1 is in FAULT"
sleep 1
# The fabric tells the port at once, as an HCA raises PORT_ERR.
tap_is "HCA port down: the gap Ethernet -> IB is under $(bound 15) ms (15 measured + margin)" \
	"$(gap_ok hca "$(bound 15)")" ok
tap_is "HCA port down: traffic flows through gw2" "$(pings ethhost1 10.10.0.13)" 3
R link gw1 up >/dev/null
wait_state gw1 backup 20

# --- SM failover --------------------------------------------------------------------------
R sm standby start >/dev/null 2>&1
sleep 3
t1=$(transitions gw1)
t2=$(transitions gw2)
gap_start sm "$rack-ethhost1" 10.10.0.13
R sm kill >/dev/null 2>&1
sleep 12
r=$(gap_stop sm)
echo "# gap across the SM failover: ${r% * *} ms, lost ${r#* }" >&2
tap_is "SM failover: no failover of the pair" "$(transitions gw1) $(transitions gw2)" "$t1 $t2"
tap_is "SM failover: traffic kept flowing (gap under $(bound 35) ms: 35 measured + margin)" \
	"$(awk -v r="${r%% *}" -v l="$(bound 35)" 'BEGIN { print (r < l) ? "yes" : r }')" yes

# --- active/active -------------------------------------------------------------------------
# The one group split in two by per-group priorities: svc4 (the IPv4 service addresses)
# MASTER on gw1, svc6 (the IPv6 ones) on gw2. Both boxes forward at once.
split_groups() { # NODE PRIO4 PRIO6: its running config with the groups split
	sed '/^  groups:$/,$d' "$RACK_STATE/nodes/$1/ibgwd.yaml"
	cat <<EOF
  groups:
    - name: svc4
      priority: $2
      addresses:
        - {address: 10.10.0.1/24, dev: ib0}
        - {address: 10.20.0.1/24, dev: eth0}
    - name: svc6
      priority: $3
      addresses:
        - {address: fd00:10::1/64, dev: ib0}
        - {address: fd00:20::1/64, dev: eth0}
EOF
}
group_state() { # NODE GROUP
	g "$1" -j show ha 2>/dev/null |
		jq -r --arg n "$2" '.[] | select(.kind == "group" and .group == $n) | .state'
}
# One sample: each box's svc4 and svc6 states and alive paths, one gwctl and one jq per
# box (a gwctl and a jq per value before: the sampler's own processes kept the pair's
# workers off the two CPUs, and took 0.4 s a sample). Sets S ("gw1-svc4 gw1-svc6
# gw2-svc4 gw2-svc6") and P ("gw1-paths/gw2-paths").
ha_view() { g "$1" -j show ha 2>/dev/null | jq -r '[([.[] | select(.kind == "group" and .group == "svc4")][0].state // "none"),
	([.[] | select(.kind == "group" and .group == "svc6")][0].state // "none"),
	([.[] | select(.kind == "path" and .alive) | .path] | join(",") | if . == "" then "none" else . end)] | join(" ")'; }
sample() {
	local a b p1 c d p2
	read -r a b p1 <<<"$(ha_view gw1)"
	read -r c d p2 <<<"$(ha_view gw2)"
	S="$a $b $c $d"
	P="$p1/$p2"
}
aa_states() {
	sample
	echo "$S"
}
split_groups gw1 150 100 >"$work/gw1-aa.yaml"
split_groups gw2 100 150 >"$work/gw2-aa.yaml"
gateway_stop gw1
gateway_stop gw2
started=$(gateway_start gw1 "$work/gw1-aa.yaml" 2>&1; gateway_start gw2 "$work/gw2-aa.yaml" 2>&1)
for _ in $(seq 150); do [ "$(aa_states)" = "master backup backup master" ] && break; sleep 0.1; done
st=$(aa_states)
if [ "$st" = "master backup backup master" ]; then
	tap_ok "active/active: svc4 MASTER on gw1, svc6 MASTER on gw2 (each BACKUP on the other)"
else
	tap_not_ok "active/active: svc4 MASTER on gw1, svc6 MASTER on gw2 (each BACKUP on the other)" \
		"got '$st'; $started; gw1: $(tail -n 15 "$RACK_STATE/logs/ibgwd-gw1.log"); gw2: $(tail -n 5 "$RACK_STATE/logs/ibgwd-gw2.log")"
fi
tap_is "active/active: IPv4 and IPv6 both flow, Ethernet -> IB and IB -> Ethernet" \
	"$(pings ethhost1 10.10.0.13) $(pings ethhost1 -6 fd00:10::13) $(pings ibhost3 10.20.0.11) $(pings ibhost3 -6 fd00:20::11)" \
	"3 3 3 3"
# The IB host reaches 10.10.0.1 at gw1 and fd00:10::1 at gw2: its neighbour entries (a
# MAC ending in the GUID's low 40 bits: hl2_mac_from_guid) match each box's ib0.
guid40() {
	g "$1" -j show links | jq -r '.[] | select(.name == "ib0") | .address[-14:]'
}
nmac40() {
	in_ns ibhost3 ip "$1" neigh show "$2" dev ib0 |
		awk '{ for (i = 1; i < NF; i++) if ($i == "lladdr") print substr($(i + 1), 4) }'
}
tap_is "active/active: the IB host's IPv4 next hop is gw1, its IPv6 next hop gw2" \
	"$(nmac40 -4 10.10.0.1) $(nmac40 -6 fd00:10::1)" "$(guid40 gw1) $(guid40 gw2)"

# --- active/active: takeover and failback of one group -------------------------------------
# gw2, MASTER of svc6, killed: gw1 takes svc6 over as it would the whole group, while
# svc4, already on gw1, must not move: its IPv4 traffic is not interrupted (a gap well
# under the dead interval) and show ha lists no svc4 transition.
group_line() { g "$1" show ha | grep "^group $2 "; }
svc4_mark() { # NODE: svc4's state, reason and number of transitions listed
	g "$1" -j show ha | jq -r '"\([.[] | select(.kind == "group" and .group == "svc4")][0] |
		"\(.state) \(.reason)") \([.[] | select(.kind == "transition" and .group == "svc4")] |
		length)"'
}
wait_group() { # NODE GROUP STATE SECONDS
	local i
	for i in $(seq $(($4 * 20))); do
		[ "$(group_state "$1" "$2")" = "$3" ] && return 0
		sleep 0.05
	done
	return 1
}
aa_gaps_start() { # PHASE: 1 ms pings both ways, IPv4 (through gw1 all along) and IPv6
	gap_start "$1-e2i4" "$rack-ethhost1" 10.10.0.13
	gap_start "$1-i2e4" "$rack-ibhost3" 10.20.0.11
	gap_start "$1-e2i6" "$rack-ethhost1" fd00:10::13 -6
	gap_start "$1-i2e6" "$rack-ibhost3" fd00:20::11 -6
}
aa_gap_checks() { # PHASE LIMIT_MS WHY: four checks, the IPv6 gaps bounded by LIMIT_MS
	# (WHY says where it comes from), IPv4 through gw1 by $keep
	tap_is "... IPv6 Ethernet -> IB resumes: gap under $2 ms ($3)" \
		"$(gap_ok "$1-e2i6" "$2")" ok
	tap_is "... IPv6 IB -> Ethernet resumes: gap under $2 ms ($3)" \
		"$(gap_ok "$1-i2e6" "$2")" ok
	tap_is "... IPv4 Ethernet -> IB through gw1 not interrupted: gap under $keep ms" \
		"$(gap_ok "$1-e2i4" "$keep")" ok
	tap_is "... IPv4 IB -> Ethernet through gw1 not interrupted: gap under $keep ms" \
		"$(gap_ok "$1-i2e4" "$keep")" ok
}
# IPv4 through gw1 while svc6 moves: docs/failover.md reports 6-23 ms (23 under load),
# and 66-92 ms with a second rack running on the same two CPUs. What proves that svc4
# did not move is show ha (no svc4 transition, checked beside); the gap bound is the
# room for a loaded machine.
keep=60
m4=$(svc4_mark gw1)
aa_gaps_start aak
sleep 1
kill -9 "$(rack_pid ibgwd-gw2)"
wait_group gw1 svc6 master 5
tap_like "active/active, gw2 killed: gw1 takes svc6 over, and says why" "$(group_line gw1 svc6)" \
	"^group svc6 MASTER priority 100 since [0-9.]+m?s: peer dead on all paths$"
sleep 2
tap_is "... svc4 stays MASTER on gw1: same reason, no transition (show ha)" \
	"$(svc4_mark gw1)" "$m4"
aa_gap_checks aak "$kill_bound" "a SIGKILL's bound"
tap_is "... the IB host's IPv4 and IPv6 next hops are both gw1" \
	"$(nmac40 -4 10.10.0.1) $(nmac40 -6 fd00:10::1)" "$(guid40 gw1) $(guid40 gw1)"

# gw2 restarted: it preempts svc6 back (priority 150), svc4 stays on gw1, and the pair
# stays so: once the start-up has settled (both boxes hear each other on both paths and
# hold their groups; a box that starts alone may be MASTER for a moment, the start-up
# race docs/failover.md describes), sampled for 3 s (0.1 s between samples, ha_view),
# no group moves. The paths seen alive are printed. Before the heartbeats confirmed the
# peer's neighbour entries, this failed in most runs: gw1's entry for gw2, probed while
# gw2 was down, failed about 0.9 s after gw2 was back, and the heartbeats it held back
# made both boxes MASTER of both groups for up to 0.7 s (docs/failover.md, "Heartbeat
# neighbours").
aa_gaps_start aab
sleep 0.5
l1=$(wc -l <"$RACK_STATE/logs/ibgwd-gw1.log")
gateway_start gw2 "$work/gw2-aa.yaml" >/dev/null 2>&1
wait_group gw2 svc6 master 10
settled() { sample; [ "$S $P" = "master backup backup master ib0,eth0/ib0,eth0" ]; }
for _ in $(seq 100); do settled && break; sleep 0.1; done
states_seen=
paths_seen=
t_end=$((${EPOCHREALTIME/./} + 3000000))
i=0
while [ "${EPOCHREALTIME/./}" -lt "$t_end" ]; do
	i=$((i + 1))
	sample
	case " $states_seen " in *" ${S// /_} "*) ;; *) states_seen="$states_seen ${S// /_}" ;; esac
	paths_seen="$paths_seen $i:$P"
	sleep 0.1
done
echo "after gw2's restart, alive paths gw1/gw2 sampled for 3 s:$paths_seen" | fold -w 100 | sed 's/^/# /'
for n in gw1 gw2; do g $n show ha | grep '^transition' | tail -4 | sed "s/^/# $n: /"; done
tap_is "active/active, gw2 restarted: it takes svc6 back and then no group moves for 3 s" \
	"${states_seen# }" "master_backup_backup_master"
sample
tap_is "... then both boxes hear each other on both paths" "$P" "ib0,eth0/ib0,eth0"
aa_gap_checks aab "$(bound 33)" "33 measured + margin"
tap_is "... the IB host's IPv4 next hop is gw1, its IPv6 next hop gw2 again" \
	"$(nmac40 -4 10.10.0.1) $(nmac40 -6 fd00:10::1)" "$(guid40 gw1) $(guid40 gw2)"

# The heartbeats confirm each box's neighbour entries for the other's path addresses (the
# peer says it hears us there), as a TCP ACK confirms one in Linux: REACHABLE, confirmed
# within the last 0.5 s (an ARP or ND answer alone confirms one every 15-45 s or more).
peer_neigh() { # NODE ADDR DEV: its entry's state and whether it was confirmed in 0.5 s
	g "$1" -j show neighbours dev "$3" | jq -r --arg a "$2" \
		'.[] | select(.dst == $a) | "\(.state[0]) \((.confirmed_ms // 1e9) < 500)"'
}
tap_is "heartbeats confirm the peer's neighbour entries on both paths, on both boxes" \
	"$(peer_neigh gw1 10.10.0.3 ib0), $(peer_neigh gw1 10.20.0.3 eth0), $(peer_neigh gw2 10.10.0.2 ib0), $(peer_neigh gw2 10.20.0.2 eth0)" \
	"REACHABLE true, REACHABLE true, REACHABLE true, REACHABLE true"
# A peer heard from a new boot may have new link addresses (an HCA gives its QP a new
# number): gw1 resolved gw2's entries again after its restart, one per path.
tap_is "gw2's restart: gw1 resolved its neighbour entries for gw2 again on both paths" \
	"$(tail -n +"$((l1 + 1))" "$RACK_STATE/logs/ibgwd-gw1.log" |
		grep -oE 'neighbour 10\.[12]0\.0\.3 on (ib0|eth0) \([A-Z]+\) resolved again: the peer restarted' |
		awk '{ print $4 }' | sort -u | tr '\n' ' ')" "eth0 ib0 "

# Two boxes of one rack refuse nothing of each other's state sync: the hosts' IPv6
# link-local neighbours (their first addresses, learned on both links above) are on
# every link, as are the subnets' hosts.
refused() { g "$1" -j show ha | jq -r '.[] | select(.kind == "node") |
	"\(.sync_rx_messages > 0) \(.sync_neighbours_refused) \(.sync_routes_refused)"'; }
tap_is "state sync: each box took the other's dumps and refused no record (link-local included)" \
	"$(refused gw1), $(refused gw2)" "true 0 0, true 0 0"

tap_done
