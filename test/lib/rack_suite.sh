# Common set-up for integration suites that run on a simulated rack. Source it after
# test/lib/tap.sh (it needs $top), then:
#
#   suite_init sa            # rack "sa<pid>" (at most 10 characters), a temp work dir
#                            # that is also the cwd (umad2sim writes ./sys-PID/ there)
#                            # and others may enter (ibgwd on the rack runs as nobody and
#                            # reads a config written here again at a reload),
#                            # and an EXIT trap that stops background jobs, takes the
#                            # rack down and removes the work dir
#   suite_need_built "$build/tools/saclient" ...   # a failed check and exit if missing
#   suite_need_root
#   suite_need_cmds ibsim opensm saquery tshark
#   R up routed              # sim/rack with this suite's --name
#
# A suite that needs more cleanup defines suite_cleanup_hook (run first).
build=${IBGW_BUILD:-$top/build}

suite_init() {
	rack="$1$$"
	rack=${rack:0:10}
	work=$(mktemp -d "/tmp/ibgw-$1.XXXXXX")
	chmod 0711 "$work"
	trap suite_cleanup EXIT
	cd "$work" || exit 1
}

suite_cleanup() {
	local j

	declare -F suite_cleanup_hook >/dev/null && suite_cleanup_hook
	for j in $(jobs -p); do kill -9 "$j" 2>/dev/null; done
	wait 2>/dev/null
	RACK_QUIET=1 "$top/sim/rack" down --name "$rack" >/dev/null 2>&1
	rm -rf "$work"
}

R() { "$top/sim/rack" --name "$rack" "$@"; }

suite_need_built() {
	local f

	for f in "$@"; do
		if [ ! -x "$f" ]; then
			tap_not_ok "built: $f" "run make first (or set IBGW_BUILD)"
			exit 1
		fi
	done
}

suite_need_root() {
	if [ "$(id -u)" != 0 ]; then
		tap_not_ok "runs as root" "network namespaces need root"
		exit 1
	fi
}

suite_need_cmds() {
	local c

	for c in "$@"; do
		command -v "$c" >/dev/null || { tap_not_ok "$c is installed"; exit 1; }
	done
}

# --- IB hosts (ibgw-host) -------------------------------------------------------------
# suite_ibhost_helpers: source the rack's own libraries (rack_*, fabric_*, role_*) for
# this suite's rack, and define the helpers the IB-host suites share:
#   in_ns NODE CMD...        run CMD in the node's namespace
#   pings NODE ARGS...       "N received" of a bounded ping (3, 0.2 s apart) from NODE
#   dump NODE [WHAT]         ibgw-host's control-socket dump (link, stats, neigh, conns ...)
#   link_state NODE          up|down as ibgw-host reports its link
#   wait_link NODE STATE S   until link_state is STATE, at most S seconds
#   wait_dad NODE            until DAD finished on ib0 (no tentative address), at most 5 s
#   stat_field NODE KEY      one counter from `dump stats`
#   gwctl ARGS...            gwctl against the gateway on gw1
#   wait_up LINK SECONDS     until gw1's `show links` has LINK in state UP
#   iperf_bytes SERVER_NODE SERVER_ADDR CLIENT_NODE BYTES [-R]   (below)
suite_ibhost_helpers() {
	host=$build/bin/ibgw-host
	export IBGW_BUILD=$build
	RACK_SIM_DIR=$top/sim
	. "$top/sim/lib/rack.sh"
	. "$top/sim/lib/fabric.sh"
	. "$top/sim/lib/roles.sh"
	rack_init "$rack"
}
in_ns() { local n=$1; shift; ip netns exec "$rack-$n" "$@"; }
# wait_capturing ERRFILE...: until each tshark whose stderr goes to ERRFILE says it is
# capturing (it takes seconds to start on a loaded machine: a fixed sleep can miss the
# packets it was started for), 15 s at most.
wait_capturing() {
	local f ok
	for _ in $(seq 150); do
		ok=1
		for f in "$@"; do grep -qs "Capturing on" "$f" || ok=0; done
		[ "$ok" = 1 ] && return 0
		sleep 0.1
	done
	return 1
}
pings() { in_ns "$1" timeout 15 ping -c 3 -i 0.2 -W 3 "${@:2}" 2>&1 | awk '/received/ { print $4 }'; }
dump() { in_ns "$1" "$host" --ctl "$RACK_STATE/nodes/$1/ibgw-host.sock" dump "${2:-all}"; }
link_state() { dump "$1" link 2>/dev/null | awk '{ print $6 }'; }
wait_link() {
	local i
	for i in $(seq $(($3 * 10))); do
		[ "$(link_state "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
wait_dad() {
	local i
	for i in $(seq 50); do
		[ -z "$(in_ns "$1" ip -6 addr show dev ib0 tentative 2>/dev/null)" ] && return 0
		sleep 0.1
	done
	return 1
}
stat_field() { dump "$1" stats | awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' | head -n1; }
gwctl() { in_ns gw1 "$build/bin/gwctl" -S "$RACK_STATE/nodes/gw1/ibgwd.sock" "$@"; }
wait_up() {
	local i
	for i in $(seq $(($2 * 10))); do
		gwctl show links 2>/dev/null | grep -q "^$1: .* state UP" && return 0
		sleep 0.1
	done
	return 1
}

# iperf_bytes SERVER_NODE SERVER_ADDR CLIENT_NODE BYTES [-R]: the bytes an iperf3 TCP run
# sent when it completed (client exit 0: the end-of-test exchange follows the data on
# the same path, so the receiver has read everything), else "failed". -n sends whole
# blocks (128 KiB): a count up to one block above the request is the request, sent.
iperf_bytes() {
	local srv=$1 addr=$2 cli=$3 bytes=$4 rev=${5:-} out
	in_ns "$srv" iperf3 -s -1 -D -B "$addr" --logfile "$work/iperf-$srv.log" >/dev/null 2>&1
	sleep 0.3
	if out=$(in_ns "$cli" timeout 60 iperf3 -c "$addr" -n "$bytes" $rev -J 2>/dev/null); then
		echo "$out" | jq -r --argjson want "$(numfmt --from=iec "$bytes")" \
			'.end.sum_sent.bytes // 0 | if . > $want and . <= $want + 131072 then $want else . end'
	else
		echo failed
	fi
}
