#!/usr/bin/env bash
# bench/mcast.sh: IP multicast forwarding against unicast through ibgwd on the simulated
# rack, in the same run: ethhost1 sends UDP as fast as one Python socket sends for
# SECONDS, once to ibhost3's address and once to 239.1.2.3, which a socket on ibhost3
# joined; what ibhost3 received per second is printed for each, and their ratio.
# Twice: with the rack's config as shipped (multicast bound by the group's
# rate_limit_pps, 1000/s, under the `mcast` punt class's 5000/s per source), then with
# those limits lifted (the slow path's own capacity). Root. Figures, not pass/fail (docs/multicast.md).
#
#   bench/mcast.sh [BUILD_DIR] [SECONDS]
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
case $build in /*) ;; *) build=$PWD/$build ;; esac
secs=${2:-5}
rack=mcb$(($$ % 10000))
export IBGW_BUILD=$build
work=$(mktemp -d /tmp/ibgw-bench.XXXXXX)
chmod 755 "$work"
cleanup() {
	RACK_QUIET=1 "$top/sim/rack" down --name "$rack" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
cd "$work" || exit 1
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
peer=$top/sim/mcast-peer
on() { local n=$1; shift; "$top/sim/rack" exec "$n" --name "$rack" -- "$@"; }

# DST PORT: packets a second ibhost3 received of what ethhost1 sent for $secs
rate() {
	local dst=$1 port=$2 n
	rm -f "$work/READY-$dst-$port" "$work/count"
	on ibhost3 python3 "$peer" recv "$dst" "$port" ib0 100000000 $((secs + 4)) >"$work/count" &
	for _ in $(seq 50); do [ -e "$work/READY-$dst-$port" ] && break; sleep 0.1; done
	sleep 1 # the group's report reaches the gateway (multicast)
	on ethhost1 python3 "$peer" send "$dst" "$port" eth0 "${secs}s" 8 0 >/dev/null
	touch "$work/LEAVE-$dst-$port"
	wait
	n=$(head -n1 "$work/count")
	echo $(( ${n:-0} / secs ))
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.4f", a / b; else print "n/a" }'; }

run() {   # LABEL CONFIG
	RACK_QUIET=1 "$top/sim/rack" down --name "$rack" >/dev/null 2>&1
	IBGW_GW_CONFIG=$2 "$top/sim/rack" up --name "$rack" >"$work/up.log" 2>&1 ||
		{ echo "rack up failed: $(tail -3 "$work/up.log")"; exit 1; }
	for _ in $(seq 200); do
		on gw1 "$build/bin/gwctl" show links 2>/dev/null | grep -q "^ib0: .*state UP" && break
		sleep 0.1
	done
	uc=$(rate 10.10.0.13 6000)
	mc=$(rate 239.1.2.3 6001)
	printf '%-28s unicast %8s pkt/s   multicast %8s pkt/s   multicast/unicast %s\n' \
		"$1" "$uc" "$mc" "$(ratio "$mc" "$uc")"
}

cp "$top/sim/etc/rack-gw1.yaml" "$work/shipped.yaml"
{
	cat "$top/sim/etc/rack-gw1.yaml" | sed 's/ip_multicast: {}.*/ip_multicast: {rate_limit_pps: 0}/'
	printf '%s\n' 'punt:' '  mcast:' '    per_source_rate: 1000000' '    per_source_burst: 100000' \
		'    per_worker_rate: 0' '    per_worker_burst: 100000'
} >"$work/lifted.yaml"
chmod 644 "$work"/*.yaml
echo "# $secs s each, UDP of 6-12 octets, ethhost1 -> ibhost3 through gw1"
run "limits as shipped" "$work/shipped.yaml"
run "punt and rate limits lifted" "$work/lifted.yaml"
