#!/usr/bin/env bash
# The verbs IB port backend (port/ib_port_verbs.c, what ships for real HCAs) on a real
# rack, through libibverbs2sim.so (sim/verbs, docs/verbs-sim.md) LD_PRELOADed after
# libumad2sim, so the code that ships is the code tested. ibsim + OpenSM assign the
# identities, ibgw-fabric carries the packets, ibp_pingpong drives ports on ibhost1
# and ibhost2 through the ibp_ops API only. Shows: query reads what OpenSM assigned;
# a device that is not there is refused, naming the one present; UD datagrams both
# ways; multicast to an attached QP (GRH present); RC with 1000 messages of mixed
# sizes up to 65520 octets both ways, every byte in order exactly once; the same under
# 5% loss; a peer that dies makes the sender's retries run out (RETRY_EXCEEDED after
# 8 x 67 ms). The verbs backend has no transport counters (an HCA keeps them in its
# firmware), so the loss is shown by the fabric's drop count, not by retransmissions.
# Needs root, ibsim, opensm, infiniband-diags; IBGW_BUILD (test/run sets it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
pp=$build/tools/ibp_pingpong
fabric=$build/bin/ibgw-fabric
vsim=$build/sim/verbs/libibverbs2sim.so
suite_init ibpv

tap_plan 23
suite_need_built "$pp" "$fabric" "$vsim"
suite_need_root

export IBGW_BUILD=$build
RACK_SIM_DIR=$top/sim
. "$top/sim/lib/rack.sh"
. "$top/sim/lib/fabric.sh"
rack_init "$rack"
# run NODE ARGS...: ibp_pingpong on NODE (bounded: no test step may hang the suite)
# (the shim after umad2sim in LD_PRELOAD: it reads the node's port through libibumad)
run() {
	local node=$1
	shift
	timeout 120 "$top/sim/rack" exec "$node" --name "$rack" -- \
		sh -c 'LD_PRELOAD="$LD_PRELOAD:$0" exec "$@"' "$vsim" "$pp" "$@"
}
field() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' <<<"$1"; }
# ud_rx NAME NODE ARGS...: a UD receiver in the background; sets RX_QPN, RX_LID.
ud_rx() {
	local name=$1 node=$2 i
	shift 2
	run "$node" "$@" ud-recv >"$work/$name" 2>&1 &
	eval "pid_$name=$!"
	for i in $(seq 200); do
		grep -q '^ready' "$work/$name" && break
		sleep 0.05
	done
	RX_QPN=$(awk '/^ready/ { print $3 }' "$work/$name")
	RX_LID=$(awk '/^ready/ { print $5 }' "$work/$name")
}
waitfor() { local p; eval "p=\$pid_$1"; wait "$p"; }
# rc_pair TAG ARGS...: RC between ibhost1 and ibhost2 (exchange files in $work/TAG).
rc_pair() {
	local tag=$1
	shift
	mkdir -p "$work/$tag"
	run ibhost2 --dir "$work/$tag" "$@" rc ibhost1 >"$work/$tag/b.out" 2>&1 &
	local pb=$!
	run ibhost1 --dir "$work/$tag" "$@" rc ibhost2 >"$work/$tag/a.out" 2>&1
	wait "$pb"
}

# --- rack, fabric, identities ------------------------------------------------------------
if ! out=$(RACK_QUIET=1 R up --bare 2>&1); then
	tap_not_ok "rack $rack comes up" "$out"
	exit 1
fi
tap_ok "rack $rack comes up"
fabric_start >/dev/null
tap_check "the fabric answers" fabric_ctl stats

info1=$(run ibhost1 info 2>&1)
info2=$(run ibhost2 info 2>&1)
tap_like "query on ibhost1: ACTIVE, MTU 2048, both partitions" "$info1" \
	'^port ibhost1 lid [0-9]+ lmc 0 sm_lid [0-9]+ guid 0x[0-9a-f]{16} gid fe80::[0-9a-f:]+ mtu 2048 state 4 subnet_timeout [0-9]+ pkeys 0xffff,0x8001$'
lid1=$(field "$info1" lid)
lid2=$(field "$info2" lid)
sa=$(rack_ib sm saquery "$lid1" 2>&1)
tap_like "OpenSM's NodeRecord for LID $lid1 (query on ibhost1) is ibhost1" "$sa" 'NodeDescription.*ibhost1'
sa=$(rack_ib sm saquery "$lid2" 2>&1)
tap_like "OpenSM's NodeRecord for LID $lid2 (query on ibhost2) is ibhost2" "$sa" 'NodeDescription.*ibhost2'
out=$(run ibhost1 --node ibhost2 info 2>&1)
tap_like "open of device ibhost2 on ibhost1 is refused, naming the device present" "$out" \
	'no RDMA device named ibhost2 \(present: ibhost1\)'

# --- UD ------------------------------------------------------------------------------------
ud_rx u2 ibhost2 --count 20 --timeout 20
tap_like "UD receiver on ibhost2 ready (QPN from the fabric)" "$RX_QPN" '^0x[0-9a-f]+$'
run ibhost1 --count 20 --size 1000 ud-send "$RX_LID" "$RX_QPN" >"$work/s1" 2>&1
waitfor u2
tap_is "ibhost2 got 20 datagrams, payload intact" "$(grep -c ' ok=1$' "$work/u2")" 20
tap_is "their SLID is ibhost1's LID, no GRH" "$(grep -c "^ud slid=$lid1 .* len=1000 grh=0" "$work/u2")" 20

ud_rx u1 ibhost1 --count 20 --timeout 20
run ibhost2 --count 20 --size 2048 ud-send "$RX_LID" "$RX_QPN" >"$work/s2" 2>&1
waitfor u1
tap_is "ibhost1 got 20 datagrams of 2048 octets from ibhost2" \
	"$(grep -c "^ud slid=$lid2 .* len=2048 grh=0 .* ok=1$" "$work/u1")" 20

mgid=ff12:401b:ffff::ffff:ffff
ud_rx m2 ibhost2 --attach "$mgid/0xc000" --count 3 --timeout 20
run ibhost1 --count 3 --size 64 --dgid "$mgid" ud-send 0xc000 0xffffff >"$work/ms" 2>&1
waitfor m2
tap_is "multicast reaches the attached QP on ibhost2, with its GRH" \
	"$(grep -c "^ud slid=$lid1 .* grh=1 .* ok=1$" "$work/m2")" 3

# UD throughput: 2048-octet datagrams; what the receiver counts (UD may drop).
ud_rx ut ibhost2 --count 20000 --timeout 15 --quiet
run ibhost1 --count 20000 --size 2048 ud-send "$RX_LID" "$RX_QPN" >"$work/ust" 2>&1
waitfor ut
got=$(field "$(grep '^ud-recv' "$work/ut")" got)
tap_like "UD burst of 20000 x 2048 octets: datagrams arrive" "$got" '^[1-9][0-9]*$'
echo "# UD: sender $(grep '^sent' "$work/ust"); receiver $(grep '^ud-recv' "$work/ut")"

# --- RC ------------------------------------------------------------------------------------
rc_pair rc1 --count 1000 --timeout 90
a=$(grep '^rc done' "$work/rc1/a.out")
b=$(grep '^rc done' "$work/rc1/b.out")
tap_like "RC ibhost1: 1000 sent and ACKed, 1000 received in order, none bad" "$a" \
	'^rc done sent 1000 rcvd 1000 bytes [0-9]+ .* bad 0$'
tap_like "RC ibhost2: the same the other way" "$b" '^rc done sent 1000 rcvd 1000 bytes [0-9]+ .* bad 0$'
tap_is "both received the same bytes (up to 65520 per message)" "$(field "$a" bytes)" "$(field "$b" bytes)"
echo "# RC (no loss): $a"
echo "# RC (no loss): $b"

fabric_ctl loss 5 >/dev/null
rc_pair rc2 --count 1000 --timeout 110 --rc-timeout 12
fabric_ctl loss 0 >/dev/null
a=$(grep '^rc done' "$work/rc2/a.out")
b=$(grep '^rc done' "$work/rc2/b.out")
tap_like "RC under 5% loss, ibhost1: everything delivered once, in order" "$a" \
	'^rc done sent 1000 rcvd 1000 bytes [0-9]+ .* bad 0$'
tap_like "RC under 5% loss, ibhost2: the same" "$b" '^rc done sent 1000 rcvd 1000 bytes [0-9]+ .* bad 0$'
tap_like "the loss was real: the fabric dropped packets for it" "$(fabric_ctl stats 2>&1)" '"loss": ?[1-9]'
echo "# RC (5% loss, timeout 16.8 ms): $a"
echo "# RC (5% loss, timeout 16.8 ms): $b"

# The peer dies after 10 messages. Under the shim, as on an HCA, a process that only
# stops polling does not stop its HCA from ACKing (and then RNR NAKing once its SRQ is
# empty, which rnr_retry 7 waits out forever): the peer is killed once it stops, its
# QPs go with it, and the sender's retries run out.
mkdir -p "$work/rc3"
run ibhost2 --dir "$work/rc3" --stop-after 10 rc ibhost1 >"$work/rc3/b.out" 2>&1 &
pb=$!
run ibhost1 --dir "$work/rc3" --count 1000 --timeout 60 rc ibhost2 >"$work/rc3/a.out" 2>&1 &
pa=$!
for i in $(seq 400); do
	grep -q 'stopping after' "$work/rc3/b.out" 2>/dev/null && break
	sleep 0.05
done
for p in $(ip netns pids "$rack-ibhost2" 2>/dev/null); do
	[ "$(cat /proc/"$p"/comm 2>/dev/null)" = ibp_pingpong ] && kill -9 "$p"
done
wait "$pa"
st=$?
wait "$pb" 2>/dev/null
"$top/sim/rack" reap --name "$rack" >/dev/null 2>&1
err=$(grep '^rc error' "$work/rc3/a.out")
tap_is "the sender exits with the error status" "$st" 2
tap_like "its send completes with RETRY_EXCEEDED" "$err" '^rc error RETRY_EXCEEDED '
# timeout 14 = 67.1 ms, retry_count 7: 8 timeouts after the last progress = 537 ms.
ms=$(sed -n 's/.*, \([0-9]*\) ms after the last ACKed send.*/\1/p' <<<"$err")
if [ -n "$ms" ] && [ "$ms" -ge 500 ] && [ "$ms" -le 1200 ]; then
	tap_ok "within the expected time: $ms ms (8 x 67.1 ms = 537 ms)"
else
	tap_not_ok "within the expected time (8 x 67.1 ms = 537 ms)" "got: $err"
fi
tap_like "the dead peer had received its 10 messages" "$(cat "$work/rc3/b.out")" 'stopping after 10 messages'

tap_check "the fabric still answers" fabric_ctl stats
tap_done
