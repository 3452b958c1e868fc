#!/usr/bin/env bash
# GID routes through two IB routers fail over between them (issue 8; docs/gid-route-
# failover.md). sim/topologies/routed2.topo: routers Rt and Rt2 on sw1, both leading to
# the far switch sw2. ibgwd on gw1 with
#   gid_routes fec0:0:0:2::/64 source local, routers [Rt, Rt2]  (hash-spread)
#   and no route for fec0:0:0:1::/64: the SA is asked, and OpenSM answers through
#   prefix-routes2.conf (router "*": the first router it knows, Rt, then Rt2).
# No host behind a router can answer on the simulated fabric, so far-subnet neighbours
# are made the way a host behind a router would make them: IPoIB ARP requests for the
# gateway's address whose sender hardware address has a far GID (test/tools/
# ipoib_arp_claim, from sm2's port). What is checked is what the gateway does: the
# neighbours' path DLID (gwctl -j show neighbours: .path.dlid) and the SA paths' DLID
# (gwctl -j show paths) move to the surviving router after `sim/rack link Rt down`, and
# back (local routes: spread again; SA paths: asked again, Rt named again) after `link Rt
# up`, each within a bound; the time
# is printed as a TAP comment ("# ... ms"). Three rounds.
# Needs root, ibsim, opensm, ibaddr, jq; IBGW_BUILD (test/run sets it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
suite_init gidfo

rounds=3
tap_plan $((14 + rounds * 6))
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-fabric" \
	"$build/tools/ipoib_arp_claim"
suite_need_root
suite_need_cmds ibsim opensm ibaddr jq
bound_ms=${GIDFO_BOUND_MS:-2500} # poll interval 1000 ms + OpenSM's sweep + slack

# --- the rack, then ibgwd with the routers' LIDs -----------------------------------------
if ! IBGW_GW_NODES= R up routed2 >"$work/up.log" 2>&1; then
	tap_not_ok "rack up (routed2 topology)" "$(tail -5 "$work/up.log")"
	exit 1
fi
tap_ok "rack up (routed2 topology: Rt and Rt2)"
suite_ibhost_helpers
lid_of() { R exec sm -- ibaddr -G "$1" 2>/dev/null | awk '{ print $5 }'; }
rt=$(lid_of 0x0002c90300f10001)
rt2=$(lid_of 0x0002c90300f20001)
tap_like "both routers have a LID ($rt, $rt2)" "$rt $rt2" '^0x[0-9a-f]+ 0x[0-9a-f]+$'
{
	sed -n '/^gateway:/,$p' "$top/sim/etc/rack-gw1.yaml" | sed '/^kernel_routes:/,/^$/d'
	cat <<EOF

gid_routes:
  - prefix: "fec0:0:0:2::/64"
    source: local
    routers:
      - lid: $rt
      - lid: $rt2
EOF
} >"$work/gw1.yaml"
if ! gateway_start gw1 "$work/gw1.yaml" >"$work/gw.log" 2>&1; then
	tap_not_ok "ibgwd started on gw1" "$(cat "$work/gw.log")" \
		"$(tail -5 "$RACK_STATE/logs/ibgwd-gw1.log")"
	exit 1
fi
for i in $(seq 100); do
	gwctl show links 2>/dev/null | grep -q "^ib0: .* state UP" && break
	sleep 0.1
done
tap_like "ib0 is UP" "$(gwctl show links)" "^ib0: ipoib state UP"
gwlid=$(gwctl -j show links | jq -r '.[] | select(.name == "ib0") | .lid // empty')
qpn=$(gwctl -j show links | jq -r '.[] | select(.name == "ib0") | .qpn // empty')
gwlid=${gwlid:-$(R exec gw1 -- ibaddr 2>/dev/null | awk '{ print $5 }')}
qpn=${qpn:-$(gwctl show links | awk '/link\/infiniband/ { for (i = 1; i < NF; i++) if ($i == "qpn") print $(i + 1) }' | head -1)}

# claim P N...: ARP requests for 10.10.0.1 from 10.10.0.(7+P)N with GID fec0:0:0:P::9N
claim() {
	local p=$1 n
	shift
	for n in "$@"; do
		R exec sm2 -- sh -c 'LD_PRELOAD="$LD_PRELOAD:$0" exec "$@"' "$build/sim/verbs/libibverbs2sim.so" \
			"$build/tools/ipoib_arp_claim" "$gwlid" "$qpn" "10.10.0.$((7 + p))$n" \
			"00:00:00:48:fe:c0:00:00:00:00:00:0$p:00:00:00:00:00:00:00:9$n" 10.10.0.1 \
			>/dev/null 2>>"$work/claim.err"
	done
}
# via LID: far neighbours whose path goes to LID / SA paths with that DLID
nb_via() { gwctl -j show neighbours dev ib0 | jq --arg l "$1" '[.[] | select(.gid | startswith("fec0:")) | select(.path.dlid == $l)] | length'; }
sa_via() { gwctl -j show paths | jq --arg l "$1" '[.[] | select(.dgid | startswith("fec0:0:0:1:")) | select(.dlid == $l)] | length'; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# wait_for T0 CMD...: until CMD succeeds or bound_ms*2 passed since T0 (ms, taken
# before the link command: `sim/rack link` itself takes ~0.1-0.2 s); prints the ms
wait_for() {
	local t0=$1 t
	shift
	while :; do
		t=$(($(now_ms) - t0))
		"$@" && { echo "$t"; return 0; }
		[ "$t" -gt $((bound_ms * 2)) ] && { echo "$t"; return 1; }
		sleep 0.02
	done
}

claim 2 0 1 2 3 4 5 6 7
claim 1 0 1 2 3
sleep 0.3
n_rt=$(nb_via "$rt")
n_rt2=$(nb_via "$rt2")
tap_is "8 local-route neighbours + 4 SA neighbours bound to a path" "$((n_rt + n_rt2))" 12
tap_like "local routes spread over both routers ($n_rt via Rt incl. 4 SA, $n_rt2 via Rt2)" \
	"$n_rt $n_rt2" '^([5-9]|1[0-1]) [1-7]$'
tap_is "SA paths (OpenSM prefix route '*') all through Rt" "$(sa_via "$rt")" 4
spread_rt=$n_rt

all_off_rt() { [ "$(nb_via "$rt")" = 0 ] && [ "$(sa_via "$rt2")" = 4 ]; }
spread_back() { [ "$(nb_via "$rt")" -ge $((spread_rt - 4)) ] && [ "$(nb_via "$rt")" -ge 1 ]; }
downs=
ups=
for r in $(seq $rounds); do
	t0=$(now_ms)
	R link Rt down >/dev/null
	if ms=$(wait_for "$t0" all_off_rt); then
		tap_ok "round $r: Rt down: every path through Rt2 after $ms ms (bound $bound_ms)"
		[ "$ms" -le "$bound_ms" ] || tap_not_ok "round $r: within $bound_ms ms" "took $ms ms"
		[ "$ms" -le "$bound_ms" ] && tap_ok "round $r: within $bound_ms ms"
	else
		tap_not_ok "round $r: Rt down: every path through Rt2" "after $ms ms: $(nb_via "$rt") neighbours via Rt, $(sa_via "$rt2") SA paths via Rt2" "$(gwctl show paths)"
		tap_not_ok "round $r: within $bound_ms ms"
	fi
	downs="$downs $ms"
	echo "# round $r: Rt down -> paths through Rt2 in $ms ms"
	tap_is "round $r: the SA paths were re-asked, all through Rt2" "$(sa_via "$rt2")" 4
	t0=$(now_ms)
	R link Rt up >/dev/null
	if ms=$(wait_for "$t0" spread_back); then
		tap_ok "round $r: Rt up: local routes spread over both routers again after $ms ms"
	else
		tap_not_ok "round $r: Rt up: local routes spread again" "after $ms ms: $(nb_via "$rt") via Rt"
	fi
	ups="$ups $ms"
	echo "# round $r: Rt up -> local routes through Rt again in $ms ms"
	# SA paths move back too: a router's return drops the cached off-subnet paths and
	# the SA ("*": the first router it knows) names Rt again (failback).
	sa_back() { [ "$(sa_via "$rt")" = 4 ]; }
	if ms=$(wait_for "$t0" sa_back); then
		tap_ok "round $r: the SA paths are back on Rt after $ms ms (failback)"
	else
		tap_not_ok "round $r: the SA paths are back on Rt" "after $ms ms: $(sa_via "$rt") via Rt"
	fi
	tap_is "round $r: no neighbour lost" "$(($(nb_via "$rt") + $(nb_via "$rt2")))" 12
	sleep 0.$((RANDOM % 10)) # the next death falls anywhere in the poll interval
done
echo "# Rt down -> paths through Rt2 (ms):$downs"
echo "# Rt up -> local routes spread again (ms):$ups"

log=$RACK_STATE/logs/ibgwd-gw1.log
tap_like "the gateway logged the router going down" "$(cat "$log")" \
	"sa: IB router LID $((rt)) is down"
tap_like "and coming back" "$(cat "$log")" "sa: IB router LID $((rt)) is up"
tap_like "dp_routers: connected-mode connections through it looked at" "$(cat "$log")" \
	"IB router LID $rt down: .* connected-mode connections through it torn down"
# The other router: Rt2 down puts everything on Rt.
t0=$(now_ms)
R link Rt2 down >/dev/null
all_off_rt2() { [ "$(nb_via "$rt2")" = 0 ]; }
if ms=$(wait_for "$t0" all_off_rt2); then
	tap_ok "Rt2 down: every neighbour through Rt after $ms ms"
else
	tap_not_ok "Rt2 down: every neighbour through Rt" "$(nb_via "$rt2") still via Rt2"
fi
tap_is "show gid-routes: Rt2 marked down" "$(gwctl show gid-routes)" \
	"fec0:0:0:2::/64 via $rt up via $rt2 down dev gw1/1"
R link Rt2 up >/dev/null
# A reload changes the GID routes in place (each IB port's table from the routes of its
# links): the route now names Rt2 only, so the 8 neighbours on fec0:0:0:2:: (local
# routes; the other 4 are SA paths) all go through Rt2, without a restart.
nb2_via() { gwctl -j show neighbours dev ib0 | jq --arg l "$1" '[.[] | select(.gid | startswith("fec0:0:0:2:")) | select(.path.dlid == $l)] | length'; }
sed -i "/^      - lid: $rt\$/d" "$work/gw1.yaml"
t0=$(now_ms)
gwctl reload >/dev/null 2>&1
only_rt2() { [ "$(nb2_via "$rt")" = 0 ] && [ "$(nb2_via "$rt2")" = 8 ]; }
if ms=$(wait_for "$t0" only_rt2); then
	tap_ok "a reload naming only Rt2: the 8 local-route neighbours through Rt2 after $ms ms"
else
	tap_not_ok "a reload naming only Rt2: the 8 local-route neighbours through Rt2" \
		"$(nb2_via "$rt") via Rt, $(nb2_via "$rt2") via Rt2" "$(tail -5 "$log")"
fi
tap_like "the port's table was rebuilt" "$(cat "$log")" "IB port gw1/1: 1 GID routes"
tap_is "show gid-routes: the route through Rt2 alone" "$(gwctl show gid-routes)" \
	"fec0:0:0:2::/64 via $rt2 up dev gw1/1"
tap_done
