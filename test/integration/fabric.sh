#!/usr/bin/env bash
# The simulated fabric in a real rack: ibsim + OpenSM assign LIDs, GIDs and P_Keys;
# simport (test/tools/simport.c) reads them through libibumad inside the node's
# namespace and attaches to ibgw-fabric; datagrams cross between ibhost1..3 and gw1.
# Shows: the identities equal what the SA and SMPs report; UD delivery; a wrong P_Key,
# wrong Q_Key, bad ICRC, bad VCRC, bad length, oversized payload and spoofed SLID are
# each dropped and counted under their reason; multicast reaches exactly the attached
# QPs and not the sender; link down stops delivery (the port hears it) and up restores
# it; loss; a capture that tshark decodes to the fields that were sent.
# Needs root, ibsim, opensm, infiniband-diags, tshark, jq; IBGW_BUILD (test/run sets it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
simport=$build/tools/simport
fabric=$build/bin/ibgw-fabric
suite_init fab
rackcmd() { R "$@"; }

tap_plan 38
suite_need_built "$simport" "$fabric"
suite_need_root
suite_need_cmds ibsim opensm saquery smpquery tshark jq

# --- helpers -------------------------------------------------------------------
export IBGW_BUILD=$build
RACK_SIM_DIR=$top/sim
. "$top/sim/lib/rack.sh"
. "$top/sim/lib/fabric.sh"
rack_init "$rack"
ctl() { fabric_ctl "$@"; }
stat() { ctl stats | jq -r "$1"; }
# Per node counters (they outlast a port's connection).
nodestat() { ctl stats | jq -r --arg n "$1" ".nodes[] | select(.node == \$n) | $2"; }
. "$top/test/lib/simport.sh"
npkts() { grep -c '^pkt' "$work/$1"; }

# --- rack and fabric ---------------------------------------------------------------
t0=$SECONDS
if ! out=$(RACK_QUIET=1 rackcmd up --bare 2>&1); then
	tap_not_ok "rack $rack comes up" "$out"
	exit 1
fi
tap_ok "rack $rack comes up"
fabric_running || fabric_start
tap_check "the fabric answers on its control socket" ctl stats

# --- identities ------------------------------------------------------------------
declare -A LID GUID
for n in ibhost1 ibhost2 ibhost3 gw1; do
	info=$(sp "$n" info 2>&1)
	LID[$n]=$(echo "$info" | awk '{ for (i = 1; i < NF; i++) if ($i == "lid") print $(i + 1) }')
	GUID[$n]=$(echo "$info" | awk '{ for (i = 1; i < NF; i++) if ($i == "guid") print $(i + 1) }')
done
info1=$(sp ibhost1 info 2>&1)
tap_like "simport reads ibhost1's port through umad" "$info1" \
	'^port ibhost1 lid [0-9]+ lmc 0 sm_lid 1 guid 0x[0-9a-f]{16} gid fe80::[0-9a-f:]+ mtu 2048 pkeys 0xffff,0x8001$'
# The SA (OpenSM's NodeRecord for that LID) and an SMP (ibsim's PortInfo) agree.
sa=$(rack_ib sm saquery "${LID[ibhost1]}" 2>&1)
tap_like "the SA's NodeRecord for LID ${LID[ibhost1]} is ibhost1" "$sa" 'NodeDescription\.+ibhost1$'
tap_like "the SA's NodeRecord has the port GUID simport read" "$sa" "port_guid\.+${GUID[ibhost1]}$"
smp=$(rack_ib ibhost2 smpquery portinfo "${LID[ibhost2]}" 1 2>&1)
tap_like "smpquery PortInfo of ibhost2 has the LID simport read" "$smp" "^Lid:\.+${LID[ibhost2]}$"
distinct=$(printf '%s\n' "${LID[@]}" | sort -u | wc -l)
tap_is "four nodes, four distinct LIDs" "$distinct" 4

# --- unicast UD ------------------------------------------------------------------
rx r1 ibhost2 --count 3 --timeout 10
tap_like "receiver on ibhost2 attached" "$RX_QPN" '^0x[0-9a-f]+$'
sp ibhost1 --count 3 --payload ibgw-hello send "$RX_LID" "$RX_QPN" >/dev/null
rx_wait r1
tap_is "ibhost2 received the 3 datagrams" "$(npkts r1)" 3
tap_like "they carry ibhost1's SLID, the Q_Key, P_Key and payload" "$(head -n 2 "$work/r1" | tail -n 1)" \
	"^pkt qpn=$RX_QPN slid=${LID[ibhost1]} dlid=${LID[ibhost2]} sqpn=0x[0-9a-f]+ pkey=0xffff qkey=0x00000b1b len=10 data=696267772d68656c6c6f$"
tap_is "stats: 3 delivered to ibhost2" "$(nodestat ibhost2 .tx_packets)" 3

# --- what hardware refuses ---------------------------------------------------------
# The receiver's QP is on P_Key 0x8001; each bad packet is sent once, then one good
# one (P_Key 0x8001 from a QP on 0x8001), which must be the only arrival.
rx r2 ibhost2 --pkey 0x8001 --count 2 --timeout 8
dl=$RX_LID q=$RX_QPN
sp ibhost1 send "$dl" "$q" >/dev/null                                  # P_Key 0xffff
sp ibhost1 --pkey 0x8001 --send-qkey 0x1234 send "$dl" "$q" >/dev/null # Q_Key
sp ibhost1 --pkey 0x8001 --bad icrc send "$dl" "$q" >/dev/null
sp ibhost1 --pkey 0x8001 --bad vcrc send "$dl" "$q" >/dev/null
sp ibhost1 --pkey 0x8001 --bad length send "$dl" "$q" >/dev/null
sp ibhost1 --pkey 0x8001 --size 2049 send "$dl" "$q" >/dev/null       # MTU is 2048
sp ibhost1 --pkey 0x8001 --bad slid send "$dl" "$q" >/dev/null
sp ibhost1 --pkey 0x8001 --size 2048 --payload good send "$dl" "$q" >/dev/null
rx_wait r2
tap_is "only the good datagram (2048 octets) arrived" "$(grep '^pkt' "$work/r2" | sed 's/.* len=\([0-9]*\).*/\1/')" 2048
for reason in pkey qkey bad_icrc bad_vcrc bad_length mtu slid; do
	tap_is "dropped and counted: $reason" "$(stat ".drops.$reason")" 1
done
tap_is "ibhost2 refused the wrong P_Key and Q_Key itself" \
	"$(nodestat ibhost2 '.drops_out.pkey + .drops_out.qkey')" 2
tap_is "ibhost1's dropped packets are charged to it" \
	"$(nodestat ibhost1 '[.drops_in[]] | add')" 7

# --- multicast ----------------------------------------------------------------
mgid=ff12:401b:ffff::ffff:ffff
before1=$(stat '.delivered')
rx m2 ibhost2 --attach "$mgid/0xc000" --count 2 --timeout 6
rx m3 ibhost3 --attach "$mgid/0xc000" --count 2 --timeout 6
rx mg gw1 --timeout 3 # not attached: must get nothing
sp ibhost1 --attach "$mgid/0xc000" --count 2 --payload mcast --dgid "$mgid" send 0xc000 0xffffff >/dev/null
rx_wait m2; rx_wait m3; rx_wait mg; rc_mg=$?
tap_is "ibhost2 got both multicast datagrams" "$(npkts m2)" 2
tap_is "ibhost3 got both multicast datagrams" "$(npkts m3)" 2
tap_like "with the MGID as GRH DGID" "$(grep -m1 '^pkt' "$work/m3")" "dlid=49152 .* dgid=$mgid data=6d63617374"
tap_is "gw1 (not attached) got nothing" "$(npkts mg),$rc_mg" "0,3"
tap_is "4 deliveries in all: not one back to the sending QP" "$(($(stat '.delivered') - before1))" 4

# --- link down / up ---------------------------------------------------------------
rx l2 ibhost2 --count 2 --timeout 10
out=$(rackcmd link ibhost2 down 2>&1)
tap_like "sim/rack link ibhost2 down" "$out" "link ibhost2 down"
for i in $(seq 40); do grep -q '^state down' "$work/l2" && break; sleep 0.05; done
tap_like "the port hears PORT_STATE down" "$(cat "$work/l2")" 'state down'
sp ibhost1 --count 5 send "$RX_LID" "$RX_QPN" >/dev/null
tap_is "link down: nothing delivered, 5 counted" "$(npkts l2),$(stat .drops.link_down)" "0,5"
rackcmd link ibhost2 up >/dev/null 2>&1
# Wait for OpenSM to make the port Active again (later simports need an active port).
for i in $(seq 50); do
	rack_ib ibhost2 smpquery portinfo "$RX_LID" 1 2>/dev/null | grep -q '^LinkState:.*Active' && break
	sleep 0.1
done
sp ibhost1 --count 2 send "$RX_LID" "$RX_QPN" >/dev/null
rx_wait l2
tap_is "link up: delivery restored" "$(npkts l2)" 2
tap_like "and the port heard it" "$(cat "$work/l2")" 'state active'

# --- loss -----------------------------------------------------------------------
rx s2 ibhost2 --timeout 4
rackcmd loss 50 >/dev/null
sp ibhost1 --count 400 send "$RX_LID" "$RX_QPN" >/dev/null
rackcmd loss 0 >/dev/null
rx_wait s2
got=$(npkts s2)
tap_ok_if() { if eval "$2"; then tap_ok "$1"; else tap_not_ok "$1" "$3"; fi; }
tap_ok_if "loss 50%: about half of 400 arrive" "[ $got -ge 140 ] && [ $got -le 260 ]" "got $got"
tap_is "the rest are counted as loss" "$(stat .drops.loss)" "$((400 - got))"

# --- capture --------------------------------------------------------------------
cap=$work/cap.pcap
rx c2 ibhost2 --attach "$mgid/0xc000" --count 2 --timeout 8
rackcmd capture "$cap" >/dev/null
sp ibhost1 --payload unicast send "$RX_LID" "$RX_QPN" >/dev/null
sp ibhost1 --payload multicast --dgid "$mgid" send 0xc000 0xffffff >/dev/null
sp ibhost1 --send-qkey 0x1234 send "$RX_LID" "$RX_QPN" >/dev/null
rx_wait c2
ctl capture stop >/dev/null
f='-e infiniband.lrh.dlid -e infiniband.lrh.slid -e infiniband.bth.p_key -e infiniband.bth.destqp -e infiniband.deth.q_key -e infiniband.deth.srcqp -e infiniband.grh.dgid -e erf.flags.rxe'
dec=$(tshark -r "$cap" -T fields -E separator=' ' $f 2>"$work/tshark.err")
nlines=$(echo "$dec" | grep -c .)
tap_is "tshark decodes 3 packets from the ERF capture" "$nlines" 3
# tshark prints QPNs and Q_Keys in hex: numbers as decimal, other words as they are.
norm() {
	local w out=
	for w in $1; do
		case $w in 0x*) w=$((w));; esac
		out="$out $w"
	done
	echo "${out# }"
}
exp_q=$((RX_QPN))
tap_like "unicast: DLID SLID P_Key DestQP Q_Key as sent" "$(norm "$(echo "$dec" | sed -n 1p)")" \
	"^${LID[ibhost2]} ${LID[ibhost1]} 65535 $exp_q 2843 [0-9]+ 0$"
tap_like "multicast: MLID, DestQP 0xFFFFFF, GRH DGID" "$(norm "$(echo "$dec" | sed -n 2p)")" \
	"^49152 ${LID[ibhost1]} 65535 16777215 2843 [0-9]+ $mgid 0$"
tap_like "the dropped one (wrong Q_Key) is marked rxe" "$(norm "$(echo "$dec" | sed -n 3p)")" \
	"^${LID[ibhost2]} ${LID[ibhost1]} 65535 $exp_q 4660 [0-9]+ 1$"

# --- down ------------------------------------------------------------------------
RACK_QUIET=1 "$top/sim/rack" down --name "$rack" >/dev/null 2>&1
left=$(ip netns list | grep -c "^$rack-"; ls /run/ibgw-sim/"$rack" 2>/dev/null | wc -l)
tap_is "nothing left behind (namespaces, state dir)" "$(echo $left)" "0 0"
echo "# fabric suite took $((SECONDS - t0)) s"
tap_done
