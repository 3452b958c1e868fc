#!/usr/bin/env bash
# bench/failover.sh: the traffic gap at failover, ibgw's pair next to keepalived (VRRP)
# doing the same job on the Ethernet side, measured in the same run. Root. Figures,
# not pass/fail.
#
#   bench/failover.sh [BUILD_DIR] [ROUNDS]
#
# The gap is the longest time between two replies of a 1 ms ping through the pair
# (test/lib/gap.sh), the median over ROUNDS (default 3) failures of each kind:
#   ibgw, on the simulated rack with the pair of sim/etc/rack-ha-gw*.yaml (heartbeats
#   every 10 ms, dead after 40 ms, the heartbeat thread at SCHED_FIFO 10: the defaults):
#     kill -9 of the master's ibgwd (its box stops forwarding): a ping Ethernet -> IB
#       and one IB -> Ethernet
#     the master's Ethernet link down (ip link set eth0 down on gw1)
#     the master's HCA port down (ibsim unlinks it; the fabric tells the port at once)
#     a heartbeat path cut (nftables at the switch): no failover, so no gap
#     the master OpenSM killed, the standby takes over: no failover of the pair, the
#       gap is the SM's reregistration (one round: the standby is used up)
#   keepalived, two routers in namespaces on a bridge with a VIP the client pings; the
#   master's box dies (its switch port goes down: no advert, no answer): at its
#   default advert_int 1 and at its fastest, advert_int 0.01 (VRRPv3).
#   ibgw again with heartbeats every 10 ms, dead after 30 ms: keepalived's fastest
#   timers' scale, for a comparison at equal timers
# Printed: each case's median gap and the ratios keepalived / ibgw for the kill case at
# default and at equal fast timers (above 1: ibgw's gap is shorter).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
case $build in /*) ;; *) build=$PWD/$build ;; esac
rounds=${2:-3}
rack=fob$(($$ % 10000))
k=kav$(($$ % 10000))
export IBGW_BUILD=$build
work=$(mktemp -d /tmp/ibgw-fobench.XXXXXX)
cleanup() {
	local p
	for p in "$work"/ka-*.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null; done
	for n in a b c s; do ip netns del "$k-$n" 2>/dev/null; done
	RACK_QUIET=1 "$top/sim/rack" down --name "$rack" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
cd "$work" || exit 1
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
. "$top/test/lib/gap.sh"

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "n/a" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# ---- ibgw's pair on the rack -----------------------------------------------------------
rack_sh() { "$top/sim/rack" --name "$rack" "$@"; }
RACK_SIM_DIR=$top/sim
. "$top/sim/lib/rack.sh"
. "$top/sim/lib/fabric.sh"
. "$top/sim/lib/roles.sh"
rack_sh up --ha >"$work/up.log" 2>&1 || { tail -5 "$work/up.log"; exit 1; }
rack_init "$rack"
. "$top/test/lib/ha.sh"
# Back to gw1 MASTER, gw2 BACKUP (preemption brings gw1 back when it returns), both
# heartbeat paths alive.
gw1_cfg=$RACK_STATE/nodes/gw1/ibgwd.yaml
settle() {
	rack_pid_alive ibgwd-gw1 || gateway_start gw1 "$gw1_cfg" >/dev/null 2>&1
	wait_state gw1 master 30 && wait_state gw2 backup 10 && wait_paths gw2 2 10
	sleep 1
}
# case NAME NODE DST BREAK_CMD REPAIR_CMD: the median gap of ROUNDS failures
ibgw_case() {
	local name=$1 node=$2 dst=$3 brk=$4 fix=$5 r gaps=""
	for r in $(seq "$rounds"); do
		settle
		# A round counts only if it starts from gw1 MASTER, gw2 BACKUP and gw2 takes
		# over: otherwise nothing failed over and its gap says nothing.
		if [ "$(state gw1)/$(state gw2)" != master/backup ]; then
			echo "# $name round $r left out: roles $(state gw1)/$(state gw2) before" >&2
			continue
		fi
		gap_start "$name" "$rack-$node" "$dst"
		sleep 1
		eval "$brk"
		if wait_state gw2 master 10; then
			sleep 1.5
			gaps="$gaps $(gap_stop "$name" | cut -d' ' -f1)"
		else
			gap_stop "$name" >/dev/null
			echo "# $name round $r left out: gw2 did not take over" >&2
		fi
		eval "$fix"
	done
	echo "$gaps" | tr ' ' '\n' | grep . | median
}
kill_gw1='kill -9 "$(rack_pid ibgwd-gw1)"'
ib_kill=$(ibgw_case kill-e2i ethhost1 10.10.0.13 "$kill_gw1" :)
ib_kill_i2e=$(ibgw_case kill-i2e ibhost3 10.20.0.11 "$kill_gw1" :)
ib_eth=$(ibgw_case ethdown ibhost3 10.20.0.11 'ip netns exec "$rack-gw1" ip link set eth0 down' \
	'ip netns exec "$rack-gw1" ip link set eth0 up') # gw1 preempts when it is back
ib_hca=$(ibgw_case hcadown ethhost1 10.10.0.13 'rack_sh link gw1 down >/dev/null' \
	'rack_sh link gw1 up >/dev/null')
# A heartbeat path cut: no failover may happen, so the gap is the ping's own.
settle
wait_paths gw2 2 10 || echo "# heartbeat paths not both alive before the cut" >&2
ip netns exec "$rack-ethsw" nft -f - <<'EOF'
table bridge fobench {
	chain hb {
		type filter hook forward priority 0;
		udp dport 7789 drop
	}
}
EOF
gap_start cut "$rack-ethhost1" 10.10.0.13
sleep 3
ib_cut=$(gap_stop cut | cut -d' ' -f1)
cut_state="$(state gw1)/$(state gw2)"
ip netns exec "$rack-ethsw" nft delete table bridge fobench
# The master OpenSM killed, the standby takes over (client reregister on every port).
settle
rack_sh sm standby start >/dev/null 2>&1
sleep 3
gap_start sm "$rack-ethhost1" 10.10.0.13
rack_sh sm kill >/dev/null 2>&1
sleep 12
ib_sm=$(gap_stop sm | cut -d' ' -f1)
sm_state="$(state gw1)/$(state gw2)"
# keepalived's fastest timers against ibgw's at the same scale: heartbeats every 10 ms,
# dead after 30 ms (keepalived: adverts every 10 ms, down after 3 of them and a skew).
for n in gw1 gw2; do
	sed 's/^failover:$/failover:\n  heartbeat_interval_ms: 10\n  dead_interval_ms: 30/' \
		"$RACK_STATE/nodes/$n/ibgwd.yaml" >"$work/$n-fast.yaml"
	gateway_stop "$n"
	gateway_start "$n" "$work/$n-fast.yaml" >/dev/null 2>&1
done
gw1_cfg=$work/gw1-fast.yaml
ib_kill_fast=$(ibgw_case kill-fast ethhost1 10.10.0.13 "$kill_gw1" :)
rack_sh down >/dev/null 2>&1

# ---- keepalived ------------------------------------------------------------------------
# Namespaces a and b (routers), c (client), s (switch: bridge br0). VIP 192.0.2.100.
ks() { ip netns exec "$k-s" "$@"; }
for n in a b c s; do ip netns add "$k-$n"; ip -n "$k-$n" link set lo up; done
ks ip link add br0 type bridge
ks ip link set br0 up
for n in a b c; do
	ip link add eth0 netns "$k-$n" type veth peer name "$n" netns "$k-s"
	ks ip link set dev "$n" master br0 up
	ip -n "$k-$n" link set eth0 up
done
ip -n "$k-a" addr add 192.0.2.1/24 dev eth0
ip -n "$k-b" addr add 192.0.2.2/24 dev eth0
ip -n "$k-c" addr add 192.0.2.10/24 dev eth0
ka_conf() { # NODE PRIORITY ADVERT
	# One keyword a line: keepalived's parser does not take ';' between them.
	cat >"$work/ka-$1.conf" <<EOF
global_defs {
	router_id $1
	vrrp_version 3
	script_user root
	enable_script_security
}
vrrp_instance VI {
	state BACKUP
	interface eth0
	virtual_router_id 51
	priority $2
	advert_int $3
	virtual_ipaddress {
		192.0.2.100/24
	}
}
EOF
}
ka_start() { # NODE
	ip netns exec "$k-$1" keepalived -n -l -D --vrrp -f "$work/ka-$1.conf" \
		-p "$work/ka-$1.pid" -r "$work/ka-$1-vrrp.pid" >"$work/ka-$1.log" 2>&1 &
	echo $! >"$work/ka-$1.pid.sh"
}
ka_stop() { kill "$(cat "$work/ka-$1.pid.sh")" 2>/dev/null; wait "$(cat "$work/ka-$1.pid.sh")" 2>/dev/null; }
has_vip() { ip -n "$k-$1" addr show dev eth0 | grep -q 192.0.2.100; }
ka_case() { # ADVERT: median gap of ROUNDS master deaths
	local adv=$1 r i gaps=""
	ka_conf a 150 "$adv"
	ka_conf b 100 "$adv"
	for r in $(seq "$rounds"); do
		ks ip link set dev a up
		ka_start a
		ka_start b
		for i in $(seq 200); do has_vip a && ! has_vip b && break; sleep 0.05; done
		sleep 2
		gap_start ka "$k-c" 192.0.2.100
		sleep 1
		ks ip link set dev a down # the master's box is gone: no adverts, no answers
		for i in $(seq 200); do has_vip b && break; sleep 0.05; done
		sleep 1.5
		gaps="$gaps $(gap_stop ka | cut -d' ' -f1)"
		ka_stop a
		ka_stop b
		ip -n "$k-a" addr del 192.0.2.100/24 dev eth0 2>/dev/null
		ip -n "$k-b" addr del 192.0.2.100/24 dev eth0 2>/dev/null
		ip -n "$k-c" neigh flush dev eth0
	done
	echo "$gaps" | tr ' ' '\n' | grep . | median
}
ka_default=$(ka_case 1)
ka_fast=$(ka_case 0.01)

printf '%-64s %10s\n' "failure (median of $rounds)" "gap ms"
printf '%-64s %10s\n' "ibgw: master killed, ping Ethernet -> IB" "$ib_kill"
printf '%-64s %10s\n' "ibgw: master killed, ping IB -> Ethernet" "$ib_kill_i2e"
printf '%-64s %10s\n' "ibgw: master's Ethernet link down, IB -> Ethernet" "$ib_eth"
printf '%-64s %10s\n' "ibgw: master's HCA port down, Ethernet -> IB" "$ib_hca"
printf '%-64s %10s\n' "ibgw: Ethernet heartbeat path cut (roles $cut_state)" "$ib_cut"
printf '%-64s %10s\n' "ibgw: standby OpenSM takes over (roles $sm_state, 1 round)" "$ib_sm"
printf '%-64s %10s\n' "ibgw 10/30 ms timers: master killed, Ethernet -> IB" "$ib_kill_fast"
printf '%-64s %10s\n' "keepalived advert_int 1 (default): master gone" "$ka_default"
printf '%-64s %10s\n' "keepalived advert_int 0.01: master gone" "$ka_fast"
echo "ratio keepalived default / ibgw default (kill, Ethernet -> IB): $(ratio "$ka_default" "$ib_kill")"
echo "ratio keepalived 0.01 / ibgw 10/30 ms (kill, Ethernet -> IB):   $(ratio "$ka_fast" "$ib_kill_fast")"
