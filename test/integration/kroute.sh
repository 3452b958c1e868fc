#!/usr/bin/env bash
# kernel/kroute against real kernels and real BIRD: test/tools/kroute_sync drives the module
# on a small RIB in network namespaces kr-g-$$ (the gateway) and kr-p-$$ (an Ethernet-side
# router), joined by a veth.
#   export: 3 IPv4 and 2 IPv6 prefixes of the RIB land in table 100 with protocol 250,
#     and nothing else (local routes, Ethernet-side routes, a route of ours left from an
#     earlier run are not there); RIB changes (delete, add, next hop changed to a
#     blackhole, next hop moved to the Ethernet side) are followed; another protocol's
#     routes in the same table are left alone, also when they hold a key we want; a
#     flush of the table by someone else is undone; a restart keeps the routes (no
#     add/del); withdraw empties our part of the table
#   import: routes added/changed/deleted with `ip route ... table 101` reach the
#     callback; table 102 does not
#   BIRD 2 in each namespace: the gateway's BIRD learns table 100 (kernel protocol,
#     learn) and announces it over eBGP (IPv4 and IPv6 sessions); the router's BIRD and
#     its kernel main table show the IB-side prefixes via the gateway; a RIB deletion and
#     the withdraw reach the router
# Needs root and bird2 (the BIRD part is skipped without it). Cleans up on exit.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/lib/tap.sh"
build=${IBGW_BUILD:-$top/build}
tool=$build/tools/kroute_sync
G=kr-g-$$
P=kr-p-$$
work=$(mktemp -d /tmp/ibgw-kroute.XXXXXX)
pids=()
PLAN=32

cleanup() {
	local p
	exec 3>&- 2>/dev/null
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	ip netns del "$G" 2>/dev/null
	ip netns del "$P" 2>/dev/null
	[ -n "${KROUTE_KEEP:-}" ] && cp -r "$work" "$KROUTE_KEEP"
	rm -rf "$work"
}
trap cleanup EXIT

tap_plan $PLAN
if [ "$(id -u)" -ne 0 ] || [ ! -x "$tool" ]; then
	for i in $(seq $PLAN); do echo "ok $i - # SKIP needs root and $tool"; done
	exit 0
fi

gx() { ip netns exec "$G" "$@"; }
px() { ip netns exec "$P" "$@"; }
ip netns add "$G" && ip netns add "$P" || exit 1
ip link add kr-g0 netns "$G" type veth peer name kr-p0 netns "$P" || exit 1
for ns in "$G" "$P"; do ip -n "$ns" link set lo up; done
gx ip addr add 192.0.2.1/24 dev kr-g0
gx ip -6 addr add 2001:db8:ffff::1/64 dev kr-g0 nodad
px ip addr add 192.0.2.2/24 dev kr-p0
px ip -6 addr add 2001:db8:ffff::2/64 dev kr-p0 nodad
gx ip link set kr-g0 up
px ip link set kr-p0 up

# wait_for FILE REGEX SECONDS: until FILE has a line matching REGEX.
wait_for() {
	local i
	for i in $(seq $(($3 * 50))); do
		grep -Eq -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.02
	done
	return 1
}
# until_eq SECONDS EXPECTED CMD...: until CMD prints EXPECTED; prints the last output.
until_eq() {
	local secs=$1 want=$2 i out; shift 2
	for i in $(seq $((secs * 10))); do
		out=$("$@" 2>&1)
		[ "$out" = "$want" ] && break
		sleep 0.1
	done
	printf '%s' "$out"
}

# The tool: commands through a FIFO on fd 3, output in $work/out.N
run=0
start_tool() {
	run=$((run + 1))
	ncmd=0
	out=$work/out.$run
	rm -f "$work/in"
	mkfifo "$work/in"
	ip netns exec "$G" "$tool" "$@" <"$work/in" >"$out" 2>"$work/err.$run" &
	pids+=($!)
	tool_pid=$!
	exec 3>"$work/in"
	wait_for "$out" '^ready' 5
}
cmd() { # cmd LINE: send one command, wait for its answer; returns its ret
	ncmd=$((ncmd + 1))
	echo "$*" >&3
	wait_for "$out" "^done $ncmd ret=" 10 || return 99
	return "$(sed -n "s/^done $ncmd ret=-\{0,1\}\([0-9]*\)$/\1/p" "$out" | tail -1)"
}
stop_tool() {
	cmd quit
	exec 3>&-
	wait "$tool_pid" 2>/dev/null
}
kick_wait() { # a kick, then until the sync it starts has run
	local n i
	n=$(grep -c '^synced' "$out")
	cmd kick
	for i in $(seq 100); do
		[ "$(grep -c '^synced' "$out")" -gt "$n" ] && return 0
		sleep 0.02
	done
	return 1
}
stat_of() { # KEY: from the last stats line
	grep '^stats' "$out" | tail -1 | tr ' ' '\n' | sed -n "s/^$1=//p"
}
# Our routes in table 100: "type prefix", sorted.
ours4() { gx ip route show table 100 | awk '/proto 250/ {print $1, $2}' | sort; }
ours6() { gx ip -6 route show table 100 | awk '/proto 250/ {print $1, $2}' | sort; }
theirs() { { gx ip route show table 100; gx ip -6 route show table 100; } | grep -v 'proto 250' |
	awk '{print $1, $2, $3, $4, $5, $6, $7}' | sort; }

# The RIB: interface 1 is the IB side, 2 the Ethernet side (not exported through).
rib() {
	cmd addr 10.9.0.1/24 1
	cmd addr 192.0.2.1/24 2
	cmd addr 2001:db8:9::1/64 1
	cmd route 10.20.0.0/16 static via 10.9.0.254
	cmd route 10.9.0.5/32 learned dev 1
	cmd route 2001:db8:20::/48 static via 2001:db8:9::fe
	cmd route 0.0.0.0/0 static via 192.0.2.254
	cmd route ::/0 static via 2001:db8:ffff::2 dev 2
}

# Before the first run: another protocol's routes, and one of ours from an earlier run.
gx ip route add 10.77.0.0/16 via 192.0.2.254 table 100 proto static
gx ip -6 route add 2001:db8:77::/48 via 2001:db8:ffff::2 table 100 proto static
gx ip route add blackhole 10.30.0.0/16 table 100 proto static
gx ip route add unreachable 10.66.0.0/16 table 100 proto 250
foreign_before=$(theirs)

# ---- export ----------------------------------------------------------------------------
start_tool -i 101 -x 2
rib
cmd sync
tap_is "export: IPv4 table 100 holds exactly the 3 IB-side prefixes, proto 250" "$(ours4)" \
"unreachable 10.20.0.0/16
unreachable 10.9.0.0/24
unreachable 10.9.0.5"
tap_is "export: IPv6 table 100 holds exactly the 2 IB-side prefixes, proto 250" "$(ours6)" \
"unreachable 2001:db8:20::/48
unreachable 2001:db8:9::/64"
cmd stats
tap_is "export: the leftover route of an earlier run was deleted (1 del, 5 adds)" \
	"$(stat_of adds) $(stat_of dels) $(stat_of errors)" "5 1 0"

# Changes: one deleted, one added, one next hop changed to a blackhole (a replace), one
# moved to the Ethernet side (withdrawn); through a kick (the timer's sync).
cmd del 10.20.0.0/16 static
cmd route 10.22.0.0/16 static via 10.9.0.254
cmd route 10.23.0.0/16 static via 10.9.0.254
cmd route 2001:db8:20::/48 static blackhole
kick_wait
cmd route 10.23.0.0/16 static via 192.0.2.254
kick_wait
tap_is "changes: IPv4 follows (del, add, next hop to the Ethernet side withdrawn)" "$(ours4)" \
"unreachable 10.22.0.0/16
unreachable 10.9.0.0/24
unreachable 10.9.0.5"
tap_is "changes: IPv6 follows (next hop now a blackhole)" "$(ours6)" \
"blackhole 2001:db8:20::/48
unreachable 2001:db8:9::/64"
cmd stats
tap_is "changes: the type change was a replace, not del+add" "$(stat_of replaces)" "1"

# Another protocol's route at a key we want: ours is refused, theirs stays.
cmd route 10.30.0.0/16 static via 10.9.0.254
cmd sync
r=$?
cmd stats
tap_is "conflict: our add refused (EEXIST), counted as failed" "$r $(stat_of failed)" "17 1"
tap_like "conflict: logged once" "$(grep -c 'refused' "$work/err.$run")" '^1$'
cmd sync
cmd full
tap_is "conflict: retried on a full resync, not logged again" \
	"$(grep -c 'refused' "$work/err.$run")" "1"
tap_is "other protocols' routes untouched" "$(theirs)" "$foreign_before"

# Someone else flushes our routes or deletes one: they come back (events, full resync).
gx ip route flush table 100 proto 250
gx ip -6 route flush table 100 proto 250
tap_is "flush: IPv4 routes put back" "$(until_eq 5 "$(printf 'unreachable 10.22.0.0/16\nunreachable 10.9.0.0/24\nunreachable 10.9.0.5')" ours4)" \
"unreachable 10.22.0.0/16
unreachable 10.9.0.0/24
unreachable 10.9.0.5"
tap_is "flush: IPv6 routes put back" "$(until_eq 5 "$(printf 'blackhole 2001:db8:20::/48\nunreachable 2001:db8:9::/64')" ours6)" \
"blackhole 2001:db8:20::/48
unreachable 2001:db8:9::/64"
gx ip route del 10.9.0.5/32 table 100
tap_like "delete by hand: put back" "$(until_eq 5 x bash -c "ip -n $G route show table 100 10.9.0.5/32")" \
	'^unreachable 10.9.0.5 proto 250'
tap_is "other protocols' routes still untouched" "$(theirs)" "$foreign_before"

# ---- import ----------------------------------------------------------------------------
gx ip route add 10.50.0.0/16 via 192.0.2.254 table 101
gx ip route add blackhole 10.51.0.0/16 table 101 metric 5
gx ip -6 route add 2001:db8:50::/48 via 2001:db8:ffff::2 table 101
gx ip route add 10.52.0.0/16 via 192.0.2.254 table 102
kif=$(gx cat /sys/class/net/kr-g0/ifindex)
wait_for "$out" '^import add 2001:db8:50::/48' 5
tap_like "import: IPv4 route via a gateway reported" "$(grep '^import' "$out")" \
	"^import add 10.50.0.0/16 metric 0 via 192.0.2.254 dev $kif\$"
tap_like "import: blackhole with its metric reported" "$(grep '^import' "$out")" \
	'import add 10.51.0.0/16 metric 5 blackhole'
tap_like "import: IPv6 route reported" "$(grep '^import' "$out")" \
	"import add 2001:db8:50::/48 metric 1024 via 2001:db8:ffff::2 dev $kif"
gx ip route change 10.50.0.0/16 via 192.0.2.3 table 101
wait_for "$out" '^import add 10.50.0.0/16 metric 0 via 192.0.2.3' 5
tap_like "import: a changed next hop reported as add" "$(grep '^import' "$out")" \
	"import add 10.50.0.0/16 metric 0 via 192.0.2.3 dev $kif"
gx ip route del 10.50.0.0/16 table 101
gx ip -6 route del 2001:db8:50::/48 table 101
wait_for "$out" '^import del 2001:db8:50::/48' 5
tap_like "import: deletions reported" "$(grep '^import del' "$out" | sort | tr '\n' ' ')" \
	'^import del 10.50.0.0/16 metric 0 import del 2001:db8:50::/48 metric 1024 $'
tap_is "import: table 102 and our own table not reported" \
	"$(grep '^import' "$out" | grep -cE '10\.52\.|10\.9\.|10\.22\.')" "0"
cmd stats
tap_is "import: one route left" "$(stat_of imported)" "1"

# ---- restart, withdraw -----------------------------------------------------------------
stop_tool
start_tool -x 2
rib
cmd del 10.20.0.0/16 static
cmd route 10.22.0.0/16 static via 10.9.0.254
cmd route 2001:db8:20::/48 static blackhole
cmd sync
cmd stats
tap_is "restart: routes of the last run kept (0 adds, 0 replaces, 0 dels)" \
	"$(stat_of adds) $(stat_of replaces) $(stat_of dels) $(stat_of exported)" "0 0 0 5"
cmd withdraw
tap_is "withdraw: none of ours left" "$(ours4)$(ours6)" ""
tap_is "withdraw: other protocols' routes untouched" "$(theirs)" "$foreign_before"
stop_tool

# ---- BIRD ------------------------------------------------------------------------------
if ! command -v bird >/dev/null; then
	for i in $(seq $((tap_n + 1)) $PLAN); do echo "ok $i - # SKIP bird2 is not installed"; done
	exit 0
fi
# The gateway's BIRD: table 100 learned (routes of protocol 250 only), announced by eBGP.
cat >"$work/bird-g.conf" <<EOF
log "$work/bird-g.log" all;
router id 192.0.2.1;
protocol device { }
protocol kernel ibgw4 {
	kernel table 100;
	learn;
	ipv4 { import where krt_source = 250; export none; };
}
protocol kernel ibgw6 {
	kernel table 100;
	learn;
	ipv6 { import where krt_source = 250; export none; };
}
protocol bgp tor4 {
	local 192.0.2.1 as 65001;
	neighbor 192.0.2.2 as 65002;
	connect delay time 1;
	ipv4 { import none; export where krt_source = 250; };
}
protocol bgp tor6 {
	local 2001:db8:ffff::1 as 65001;
	neighbor 2001:db8:ffff::2 as 65002;
	connect delay time 1;
	ipv6 { import none; export where krt_source = 250; };
}
EOF
# The Ethernet-side router: learns by BGP, installs into its main table.
cat >"$work/bird-p.conf" <<EOF
log "$work/bird-p.log" all;
router id 192.0.2.2;
protocol device { }
protocol kernel { ipv4 { import none; export all; }; }
protocol kernel { ipv6 { import none; export all; }; }
protocol bgp gw4 {
	local 192.0.2.2 as 65002;
	neighbor 192.0.2.1 as 65001;
	connect delay time 1;
	ipv4 { import all; export none; };
}
protocol bgp gw6 {
	local 2001:db8:ffff::2 as 65002;
	neighbor 2001:db8:ffff::1 as 65001;
	connect delay time 1;
	ipv6 { import all; export none; };
}
EOF
start_tool -x 2
rib
cmd del 10.20.0.0/16 static
cmd route 10.22.0.0/16 static via 10.9.0.254
cmd sync
# Not through gx/px: $! must be bird itself (ip netns exec execs it), not a subshell.
ip netns exec "$G" bird -f -c "$work/bird-g.conf" -s "$work/bird-g.ctl" -P "$work/bird-g.pid" \
	>"$work/bird-g.out" 2>&1 &
pids+=($!)
ip netns exec "$P" bird -f -c "$work/bird-p.conf" -s "$work/bird-p.ctl" -P "$work/bird-p.pid" \
	>"$work/bird-p.out" 2>&1 &
pids+=($!)
bgc() { gx birdc -s "$work/bird-g.ctl" "$@"; }
bpc() { px birdc -s "$work/bird-p.ctl" "$@"; }
sessions() { bpc show protocols | awk '/^gw[46] / {print $1, $6}' | sort | tr '\n' ' '; }
tap_is "BIRD: both BGP sessions established" "$(until_eq 60 'gw4 Established gw6 Established ' sessions)" \
	"gw4 Established gw6 Established "
p_routes() { px ip route show proto bird | awk '{print $1, $2, $3, $4, $5}' | sort; }
p_routes6() { px ip -6 route show proto bird | awk '{print $1, $2, $3}' | sort; }
want4="10.22.0.0/16 via 192.0.2.1 dev kr-p0
10.9.0.0/24 via 192.0.2.1 dev kr-p0
10.9.0.5 via 192.0.2.1 dev kr-p0"
tap_is "BIRD: the router's kernel has the IPv4 IB-side prefixes via the gateway" \
	"$(until_eq 30 "$want4" p_routes)" "$want4"
glla=$(gx ip -6 addr show dev kr-g0 scope link | awk '/inet6/ {sub("/.*", "", $2); print $2}')
got6=$(until_eq 30 x p_routes6)
tap_like "BIRD: ... and the IPv6 ones via the gateway" "$(echo "$got6" | tr '\n' ' ')" \
	"^2001:db8:20::/48 via (2001:db8:ffff::1|$glla) 2001:db8:9::/64 via (2001:db8:ffff::1|$glla) \$"
show=$(bpc show route 10.9.0.0/24 all)
tap_like "BIRD: birdc on the router shows the prefix learned by BGP from the gateway" \
	"$(echo "$show" | tr '\n\t' '  ')" '10\.9\.0\.0/24 +unicast \[gw4 .* via 192\.0\.2\.1 on kr-p0'
tap_like "BIRD: with the gateway's AS path" "$show" 'BGP.as_path: 65001'
tap_like "BIRD: the gateway's BIRD learned them from table 100" "$(bgc show route protocol ibgw4)" \
	'10\.22\.0\.0/16 +unreachable \[ibgw4'
cmd del 10.22.0.0/16 static
cmd sync
tap_is "BIRD: a RIB deletion reaches the router" \
	"$(until_eq 30 "$(printf '10.9.0.0/24 via 192.0.2.1 dev kr-p0\n10.9.0.5 via 192.0.2.1 dev kr-p0')" p_routes)" \
	"$(printf '10.9.0.0/24 via 192.0.2.1 dev kr-p0\n10.9.0.5 via 192.0.2.1 dev kr-p0')"
cmd withdraw
tap_is "BIRD: withdraw empties the router's learned routes" \
	"$(until_eq 30 "" bash -c "ip -n $P route show proto bird; ip -n $P -6 route show proto bird")" ""
stop_tool
tap_done
