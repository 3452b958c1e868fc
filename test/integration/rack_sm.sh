#!/bin/bash
# The simulated rack's MAD layer: real OpenSM on ibsim, reached from node
# namespaces over the rack's management network (sim/rack, docs/simulated-rack.md).
# Needs root. Uses its own rack names, so a user's rack "rack" is left alone.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
. "$TOP/test/lib/tap.sh"
RACK=$TOP/sim/rack
R1=t$$
R2=u$$
R1=${R1:0:10} R2=${R2:0:10}

cleanup() {
	"$RACK" down --name "$R1" >/dev/null 2>&1
	"$RACK" down --name "$R2" >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT TERM

r1() { "$RACK" --name "$R1" "$@"; }
r2() { "$RACK" --name "$R2" "$@"; }
# lid_of RACKFN NODE: the LID the node's own port reports (decimal).
lid_of() {
	local h
	h=$("$1" exec "$2" -- ibaddr 2>/dev/null | sed -n 's/.*LID start 0x\([0-9a-fA-F]*\).*/\1/p')
	[ -n "$h" ] && echo $((16#$h))
}
# flat: an output on one line (fields separated by single spaces).
flat() { tr -s ' \t\n' ' '; echo; }
# wait_for SECONDS CMD...: retry CMD every 0.25 s until it succeeds.
wait_for() {
	local t=$1 end; shift
	end=$((SECONDS + t))
	while [ $SECONDS -lt $end ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
	"$@" >/dev/null 2>&1
}
sa_has_node() { r1 exec ibhost1 -- saquery "$1" 2>/dev/null | grep -q "NodeDescription\.*$2\$"; }
sa_lacks_node() { ! r1 exec ibhost1 -- saquery "$1" 2>/dev/null | grep -q NodeDescription; }
master_is() { r1 exec "$1" -- sminfo 2>/dev/null | grep -q "sm lid $2 .*SMINFO_MASTER"; }

tap_plan 26

# --- default rack --------------------------------------------------------------
t0=$SECONDS
out=$(r1 up 2>&1)
tap_like "rack up: OpenSM MASTER, every port ACTIVE, within 30 s" "$out" "rack $R1: up \(rack.topo\)"
[ $((SECONDS - t0)) -le 30 ] || tap_not_ok "up took $((SECONDS - t0)) s"
tap_like "up prints what runs where" "$out" "sm +ib +sm +$R1-sm +198\.18\.0\.10 .*opensm-sm\["

tap_like "sminfo from a node namespace: the SM on 'sm' is MASTER" \
	"$(r1 exec gw1 -- sminfo 2>&1)" "sm lid $(lid_of r1 sm) .*priority 15 .*SMINFO_MASTER"

links=$(r1 exec sm -- iblinkinfo 2>&1)
tap_is "iblinkinfo: all 7 HCA ports Active" \
	"$(echo "$links" | awk '/^CA: /{ca=1; next} ca { if (/Active\//) n++; ca=0 } END { print n+0 }')" 7

st=$(r1 exec ibhost1 -- ibstat 2>&1 | flat)
tap_like "ibhost1's namespace sees its own port (SIM_HOST): Active, GUID" "$st" \
	"State: Active .*Port GUID: 0x0002c90300a10007"
tap_like "ibhost1's GID is its own" "$(r1 exec ibhost1 -- ibaddr 2>&1)" "^GID fe80::2:c903:a1:7 LID start 0x[0-9a-f]+"
tap_is "ibhost1 talks to ibsim over its mgmt link, not a shared socket" \
	"$(ip netns exec "$R1-ibhost1" ip -o -4 addr show dev mgmt0 | awk '{print $4}')" "198.18.0.14/24"

# NodeRecord by LID (one record: fits umad2sim's no-RMPP limit), every node.
bad=
for n in sm sm2 gw1 gw2 ibhost1 ibhost2 ibhost3; do
	l=$(lid_of r1 "$n")
	sa_has_node "$l" "$n" || bad="$bad $n(lid ${l:-?})"
done
tap_is "saquery NodeRecord by LID from ibhost1 names every node" "${bad# }" ""

gw1=$(lid_of r1 gw1); h1=$(lid_of r1 ibhost1)
tap_like "PathRecord ibhost1 -> gw1 (saquery -p --src-to-dst)" \
	"$(r1 exec ibhost1 -- saquery -p --src-to-dst "$h1:$gw1" 2>&1 | flat)" "dlid\.+$gw1 slid\.+$h1 "

# Each group asked by its MGID (an MCMemberRecord query): a plain `saquery -g` lists at
# most three (no RMPP), and the gateway's multicast (ip_multicast in the rack's config)
# makes more.
group() { r1 exec ibhost3 -- saquery MCMR --mgid "$1" 2>&1; }
tap_like "IPoIB broadcast group of P_Key 0x7fff exists" "$(group ff12:401b:ffff::ffff:ffff)" \
	"MGID\.+ff12:401b:ffff::ffff:ffff"
tap_like "IPoIB broadcast group of P_Key 0x8001 exists" "$(group ff12:401b:8001::ffff:ffff)" \
	"MGID\.+ff12:401b:8001::ffff:ffff"
tap_like "ibhost1's P_Key table holds both partitions" \
	"$(r1 exec sm -- smpquery pkeys "$h1" 2>&1)" "0xffff +0x8001"

# --- link down / up through ibsim's console -----------------------------------
h2=$(lid_of r1 ibhost2)
r1 link ibhost2 down >/dev/null
if wait_for 10 sa_lacks_node "$h2"; then tap_ok "link ibhost2 down: OpenSM drops its NodeRecord"
else tap_not_ok "link ibhost2 down: OpenSM drops its NodeRecord" "$(r1 exec ibhost1 -- saquery "$h2" 2>&1)"; fi
tap_like "link ibhost2 down: its port is Down" "$(r1 exec ibhost2 -- ibstat 2>&1)" "State: Down"
r1 link ibhost2 up >/dev/null
if wait_for 10 sa_has_node "$h2" ibhost2; then tap_ok "link ibhost2 up: NodeRecord back, same LID"
else tap_not_ok "link ibhost2 up: NodeRecord back, same LID" "$(r1 exec ibhost1 -- saquery "$h2" 2>&1)"; fi
tap_like "link ibhost2 up: port Active again" "$(r1 exec ibhost2 -- ibstat 2>&1)" "State: Active"

# --- SM failover ----------------------------------------------------------------
sm2=$(lid_of r1 sm2)
r1 sm standby start >/dev/null
standby() { r1 exec sm -- sminfo "$sm2" 2>/dev/null | grep -q SMINFO_STANDBY; }
if wait_for 10 standby; then tap_ok "second OpenSM on sm2 (priority 1) is STANDBY"
else tap_not_ok "second OpenSM on sm2 (priority 1) is STANDBY" "$(r1 exec sm -- sminfo "$sm2" 2>&1)"; fi
r1 sm kill >/dev/null
t0=$SECONDS
if wait_for 20 master_is ibhost1 "$sm2"; then tap_ok "master killed: sm2 takes over ($((SECONDS - t0)) s)"
else tap_not_ok "master killed: sm2 takes over" "$(r1 exec ibhost1 -- sminfo 2>&1)" "$(tail -n 5 /run/ibgw-sim/$R1/nodes/sm2/opensm.log)"; fi
tap_like "ports follow the new master (PortInfo SM LID)" "$(r1 exec ibhost3 -- ibstat 2>&1)" "SM lid: $sm2\$"

# --- a second rack beside the first ----------------------------------------------
out=$(r2 up 2>&1)
tap_like "second rack comes up beside the first" "$out" "rack $R2: up"
tap_like "second rack has its own SM (sm, not the first rack's sm2)" \
	"$(r2 exec gw2 -- sminfo 2>&1)" "sm lid $(lid_of r2 sm) .*priority 15 .*SMINFO_MASTER"
tap_like "first rack unchanged: still mastered by its sm2" "$(r1 exec gw2 -- sminfo 2>&1)" "sm lid $sm2 .*SMINFO_MASTER"
r2 down >/dev/null
tap_is "second rack down: its namespaces and state are gone, first rack still up" \
	"$(ip netns list | grep -c "^$R2-"):$([ -e /run/ibgw-sim/$R2 ] && echo state):$("$RACK" status --name "$R1" | head -n1)" \
	"0::rack $R1: up"

# --- routed topology --------------------------------------------------------------
r1 down >/dev/null
r1 up routed >/dev/null 2>&1
rt=$(r1 exec sm -- iblinkinfo 2>/dev/null | awk '/^Router: Rt:/{getline; print $2; exit}')
pr=$(r1 exec gw1 -- saquery -p --sgid-to-dgid fe80::2:c903:a1:3-fec0:0:0:1::1234 2>&1 | flat)
tap_like "routed: off-subnet PathRecord goes to the router's LID, hop limit 0xff" "$pr" \
	"dgid\.+fec0:0:0:1::1234 .*dlid\.+${rt:-none} .*hop_flow_raw\.+0xFF "

# --- down after a crash -------------------------------------------------------------
pids=$(cat /run/ibgw-sim/$R1/pids/*.pid 2>/dev/null | tr '\n' ' ')
kill -KILL $(cat /run/ibgw-sim/$R1/pids/ibsim.pid) 2>/dev/null
rm -f /run/ibgw-sim/$R1/pids/opensm-sm.pid      # lose a pid file too
r1 down >/dev/null
left=
for p in $pids; do kill -0 "$p" 2>/dev/null && left="$left pid:$p"; done
left="$left $(ip netns list | awk '{print $1}' | grep "^$R1-" | tr '\n' ' ')"
[ -e /run/ibgw-sim/$R1 ] && left="$left /run/ibgw-sim/$R1"
tap_is "down after an ibsim crash leaves no process, namespace or file" "$(echo $left)" ""

out=$( (r1 loss 5 2>&1; echo "rc=$?") | tr '\n' ' ')
tap_like "loss on a rack that is down fails clearly" "$out" "needs the simulated fabric .*rc=[1-9]"

tap_done
