#!/usr/bin/env bash
# Two IB subnets joined by IB routers (sim/topologies/two-subnets.topo, seed 004): each
# subnet its own ibsim and OpenSM, subnet prefix and LIDs; the fabric carries both and
# plays the routers rt1 and rt2 (sim/fabric/router.c). simport sends a UD datagram with
# a GRH from ibhost1 (subnet A) to rt1's LID on A with ibhostb1's GID (subnet B) as
# DGID, and back. Shows: both SMs are masters of their own subnet and give the routers'
# ports LIDs; OpenSM's prefix routes answer a PathRecord to the other subnet with a
# router's LID; the datagram arrives at ibhostb1 from rt1's LID on B; the capture has it
# twice (on A as sent, on B as rt1 sent it on), tshark shows the GRH (SGID, DGID, hop
# limit 255 then 254) and the rewritten LRH (DLID, SLID); the ICRC of the routed copy is
# the sender's and valid (recomputed here, independently of lib/ib_crc.c), and the VCRC
# was recomputed; hop limit 1 is dropped at the router and counted; a router's link
# down stops the path through it and rt2 still carries the same DGID.
# Needs root, ibsim, opensm, infiniband-diags, tshark, jq, python3; IBGW_BUILD.
# Run alone, under the rack lock: flock /tmp/ibgw-rack.lock bash test/integration/routers.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
simport=$build/tools/simport
fabric=$build/bin/ibgw-fabric
suite_init rtr

tap_plan 29
suite_need_built "$simport" "$fabric"
suite_need_root
suite_need_cmds ibsim opensm saquery ibaddr tshark jq python3

export IBGW_BUILD=$build
RACK_SIM_DIR=$top/sim
. "$top/sim/lib/rack.sh"
. "$top/sim/lib/fabric.sh"
. "$top/sim/lib/roles.sh"
rack_init "$rack"
ctl() { fabric_ctl "$@"; }
field() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' <<<"$1"; }
. "$top/test/lib/simport.sh"

# --- the rack ----------------------------------------------------------------------
t0=$SECONDS
if ! out=$(RACK_QUIET=1 R up --bare two-subnets 2>&1); then
	tap_not_ok "rack $rack (two-subnets) comes up" "$out"
	exit 1
fi
tap_ok "rack $rack (two-subnets) comes up in $((SECONDS - t0)) s"
tap_like "subnet A's OpenSM is master" "$(rack_ib sm sminfo 2>&1)" 'SMINFO_MASTER'
tap_like "subnet B's OpenSM is master" "$(rack_ib smb sminfo 2>&1)" 'SMINFO_MASTER'

a1=$(sp ibhost1 info 2>&1)
b1=$(sp ibhostb1 info 2>&1)
tap_like "ibhost1's port is on subnet A (fec0:0:0:a::/64)" "$a1" ' gid fec0::a:[0-9a-f:]+ '
tap_like "ibhostb1's port is on subnet B (fec0:0:0:b::/64)" "$b1" ' gid fec0::b:[0-9a-f:]+ '
LID_A1=$(field "$a1" lid) GID_A1=$(field "$a1" gid)
LID_B1=$(field "$b1" lid) GID_B1=$(field "$b1" gid)

st=$(ctl stats)
rt_lid() { jq -r --arg n "$1" --argjson p "$2" '.routers[] | select(.node == $n) | .ports[] | select(.port == $p) | .lid' <<<"$st"; }
RT1_A=$(rt_lid rt1 1) RT1_B=$(rt_lid rt1 2) RT2_A=$(rt_lid rt2 1) RT2_B=$(rt_lid rt2 2)
tap_like "the fabric plays rt1 and rt2, each with a LID on A and on B" \
	"rt1 $RT1_A $RT1_B rt2 $RT2_A $RT2_B" '^rt1 [0-9]+ [0-9]+ rt2 [0-9]+ [0-9]+$'
tap_is "rt1's LID on A is the one subnet A's SA knows for its port 1" \
	"$(rack_ib sm ibaddr -L -G 0x0002c90300f10001 2>/dev/null | awk '{ print $3 }')" "$RT1_A"
tap_is "rt1's routes: B's prefix out of port 2, A's out of port 1, both direct" \
	"$(jq -c '.routers[] | select(.node == "rt1") | [.routes[] | [.prefix, .port, .next_hop]]' <<<"$st")" \
	'[["fec0:0:0:b::/64",2,"direct"],["fec0:0:0:a::/64",1,"direct"]]'
tap_is "rt1 joined the IPv4 broadcast group on A and B with each SA's MLID" \
	"$(jq -c '.routers[] | select(.node == "rt1") | .groups' <<<"$st")" \
	"[{\"mgid\":\"ff12:401b:ffff::ffff:ffff\",\"mlid\":{\"1\":\"$(group_mlid sm ff12:401b:ffff::ffff:ffff | tr A-F a-f)\",\"2\":\"$(group_mlid smb ff12:401b:ffff::ffff:ffff | tr A-F a-f)\"}}]"
# Both subnets number their LIDs from 1: the same LID exists twice in the fabric.
dup=$(jq '[.ports[].lid] | group_by(.) | map(select(length > 1)) | length' <<<"$st")
tap_check "the subnets' LIDs overlap and the fabric holds both ($dup LIDs twice)" test "$dup" -gt 0

# OpenSM's prefix routes: a PathRecord from A to B's GID names a router's LID on A.
pr=$(rack_ib ibhost1 saquery -p --sgid-to-dgid "$GID_A1-$GID_B1" 2>&1)
pr_dlid=$(awk -F. '/^[[:space:]]*dlid/ { print $NF; exit }' <<<"$pr")
tap_check "subnet A's SA answers a PathRecord to ibhostb1 with a router's LID ($pr_dlid)" \
	test "$((pr_dlid))" = "$RT1_A" -o "$((pr_dlid))" = "$RT2_A"

# --- across rt1 ----------------------------------------------------------------------
cap=$work/routed.pcap
ctl capture start "$cap" >/dev/null
rx b1 ibhostb1 --count 1 --timeout 10
QPN_B1=$RX_QPN
sp ibhost1 --payload across-rt1 --dgid "$GID_B1" send "$RT1_A" "$QPN_B1" >/dev/null 2>&1
rx_wait b1
got=$(grep '^pkt' "$work/b1")
tap_like "ibhostb1 receives the datagram from rt1's LID on B" "$got" \
	"^pkt qpn=$QPN_B1 slid=$RT1_B dlid=$LID_B1 .* dgid=$GID_B1 "
# Back from B to A through rt1's port on B, as B's SA would route it.
rx a1 ibhost1 --count 1 --timeout 10
sp ibhostb1 --payload back --dgid "$GID_A1" send "$RT1_B" "$RX_QPN" >/dev/null 2>&1
rx_wait a1
tap_like "and ibhost1 the answer, from rt1's LID on A" "$(grep '^pkt' "$work/a1")" \
	"^pkt qpn=$RX_QPN slid=$RT1_A dlid=$LID_A1 "
ctl capture stop >/dev/null

tsh() { tshark -r "$cap" -Y 'infiniband.grh' -T fields -E separator=' ' "$@" 2>/dev/null; }
lines=$(tsh -e infiniband.lrh.dlid -e infiniband.lrh.slid -e infiniband.grh.hoplmt \
	-e infiniband.grh.sgid -e infiniband.grh.dgid -e erf.flags.rxe)
tap_is "the capture holds each datagram twice, once per subnet" "$(wc -l <<<"$lines")" 4
tap_is "on A, as sent: DLID rt1 (A), SLID ibhost1, hop limit 255, SGID/DGID A->B" \
	"$(sed -n 1p <<<"$lines")" "$RT1_A $LID_A1 255 $GID_A1 $GID_B1 0"
tap_is "on B, as rt1 sent it: DLID ibhostb1, SLID rt1 (B), hop limit 254, GIDs kept" \
	"$(sed -n 2p <<<"$lines")" "$LID_B1 $RT1_B 254 $GID_A1 $GID_B1 0"
tap_is "the way back likewise: hop limit 255 on B, 254 on A" \
	"$(sed -n '3p;4p' <<<"$lines" | awk '{ print $3 }' | tr '\n' ' ')" "255 254 "
crc=$(tsh -e infiniband.invariant.crc -e infiniband.variant.crc | sed -n '1p;2p')
tap_is "the routed copy carries the sender's ICRC" "$(awk '{ print $1 }' <<<"$crc" | uniq | wc -l)" 1
tap_check "and a recomputed VCRC" test "$(awk '{ print $2 }' <<<"$crc" | uniq | wc -l)" = 2
# Every packet's CRCs, recomputed from the capture's octets (ERF type 21 records) by the
# IBA's rules (ICRC: CRC-32 with the LRH, GRH TClass/FlowLabel/HopLmt and BTH resv8a
# as ones; VCRC: CRC-16 0x100B), not by lib/ib_crc.c.
crccheck=$(python3 - "$cap" <<'EOF'
import struct, sys, zlib
data = open(sys.argv[1], 'rb').read()
off, out = 24, []
while off < len(data):
    incl = struct.unpack_from('<I', data, off + 8)[0]
    pkt = data[off + 16 + 16: off + 16 + incl]
    off += 16 + incl
    lnh = pkt[1] & 3
    body = bytearray(pkt[:-6])
    if lnh == 3:
        body[0:8] = b'\xff' * 8
        body[8] |= 0x0f; body[9:12] = b'\xff\xff\xff'; body[15] = 0xff
        body[8 + 40 + 4] = 0xff
    else:
        body[0] |= 0xf0; body[8 + 4] = 0xff
    icrc_ok = zlib.crc32(bytes(body)) == struct.unpack_from('<I', pkt, len(pkt) - 6)[0]
    c = 0xffff
    for b in pkt[:-2]:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0xd008 if c & 1 else c >> 1
    vcrc_ok = (c ^ 0xffff) == struct.unpack_from('<H', pkt, len(pkt) - 2)[0]
    out.append('%d%d' % (icrc_ok, vcrc_ok))
print(' '.join(out))
EOF
)
tap_is "ICRC and VCRC of all 4 packets check, the routed copies' included" "$crccheck" "11 11 11 11"

# --- drops at the router ----------------------------------------------------------------
before=$(ctl stats | jq .drops.hop_limit)
rx b1h ibhostb1 --count 1 --timeout 1
# simport's multicast hop limit is 1; unicast is 255: a multicast DGID shows the drop.
ctl mcast rt1 ff15:401b:ffff::1 1 0xc0f0 >/dev/null
ctl mcast rt1 ff15:401b:ffff::1 2 0xc0f1 >/dev/null
sp ibhost1 --payload hop1 --dgid ff15:401b:ffff::1 send 0xc0f0 0xffffff >/dev/null 2>&1
rx_wait b1h
tap_is "hop limit 1 (simport's multicast) is dropped at rt1 and counted" \
	"$(ctl stats | jq .drops.hop_limit)" "$((before + 1))"
tap_is "and does not reach B" "$(grep -c '^pkt' "$work/b1h")" 0

# --- a router down: the path through it stops, the other router carries it ---------------
tap_check "sim/rack link rt1 down (both ibsims and the fabric)" R link rt1 down
rx b1d ibhostb1 --count 1 --timeout 1
sp ibhost1 --payload rt1-down --dgid "$GID_B1" send "$RT1_A" "$RX_QPN" >/dev/null 2>&1
rx_wait b1d
tap_is "rt1's link down: nothing reaches ibhostb1 through it" "$(grep -c '^pkt' "$work/b1d")" 0
tap_check "counted as link_down at rt1" \
	test "$(ctl stats | jq '.nodes[] | select(.node == "rt1") | .drops_out.link_down')" -ge 1
rx b1r ibhostb1 --count 1 --timeout 10
sp ibhost1 --payload via-rt2 --dgid "$GID_B1" send "$RT2_A" "$RX_QPN" >/dev/null 2>&1
rx_wait b1r
tap_like "through rt2 it arrives, from rt2's LID on B" "$(grep '^pkt' "$work/b1r")" \
	"^pkt qpn=$RX_QPN slid=$RT2_B dlid=$LID_B1 "
tap_check "sim/rack link rt1 up" R link rt1 up
rx b1u ibhostb1 --count 1 --timeout 10
sp ibhost1 --payload rt1-up --dgid "$GID_B1" send "$RT1_A" "$RX_QPN" >/dev/null 2>&1
rx_wait b1u
tap_like "rt1 up again carries it again" "$(grep '^pkt' "$work/b1u")" "^pkt .*slid=$RT1_B "
tap_is "the fabric counted no bad ICRC or VCRC" \
	"$(ctl stats | jq '.drops.bad_icrc + .drops.bad_vcrc')" 0

echo "# the suite took $((SECONDS - t0)) s"
