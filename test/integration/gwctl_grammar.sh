#!/usr/bin/env bash
# gwctl's grammar, exit codes and bash completion, as an operator types them.
#
# Golden outputs: test/integration/gwctl_grammar.golden holds blocks
#   $ COMMAND LINE          (evaluated by bash; `gwctl` is the built one, $sock the socket
#   OUTPUT (stdout+stderr)   of a daemon run here with one Ethernet interface, eth0, on a
#   [exit N]                 veth in a namespace of our own, $ro its read-only one, $none
#                            a socket nobody serves, $work the suite's directory)
# and each block is one check: its output and exit status, with the work directory written
# WORK and "in N ms" for durations. Usage errors exit 2 before anything is sent (shown
# against $none, where a sent request would say "cannot reach"), refusals by the daemon
# exit 1, and write commands say what they did. `gwctl_grammar.sh --regen` rewrites the
# golden file from what runs (read the diff before committing it).
#
# Then the completion (packaging/bash-completion/gwctl) sourced in bash: COMPREPLY for a
# few partial lines, the daemon's dev names after "dev", and its object lists against
# `gwctl help`.
#
#   test/integration/gwctl_grammar.sh [--regen] [BUILD_DIR]     (root)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/daemon_suite.sh"
regen=0
[ "${1:-}" = --regen ] && regen=1 && shift
daemon_suite_init gwctl-grammar "${1:-}"
golden=$top/test/integration/gwctl_grammar.golden
ns=ibgwgr$$
daemon_suite_cleanup_hook() { ip netns del "$ns" 2>/dev/null; }
none=$work/none.sock

ip netns add "$ns"
ip -n "$ns" link add veth0 type veth peer name veth1
ip -n "$ns" link set veth0 up
ip -n "$ns" link set veth1 up
printf '%s\n' 'gateway:' '  name: gr' 'control:' "  socket: $sock" "  readonly_socket: $ro" \
	'ethernet_interfaces:' '  - name: eth0' '    device: veth0' \
	'    addresses: [192.168.77.1/24]' >"$work/good.yaml"
cp "$work/good.yaml" "$work/ibgwd.yaml"
# A second interface on a device that does not exist, and a route through it.
{
	cat "$work/good.yaml"
	printf '%s\n' '  - name: eth1' '    device: veth9' '    addresses: [192.168.78.1/24]' \
		'routes:' '  - prefix: 10.8.0.0/16' '    dev: eth1' '  - prefix: 10.9.0.0/16' \
		'    via: 192.168.77.9'
} >"$work/missing-dev.yaml"
printf '%s\n' '# routes for the lab' 'route add 10.3.0.0/16 via 192.168.77.3' '' \
	'  route add 10.4.0.0/16 via 192.168.77.4 # the second' \
	'route add 10.5.0.0/16 via 10.0.0.1 dev eth7' 'frobnicate' \
	'route add 10.6.0.0/16 via 192.168.77.6' >"$work/batch"

gwctl() { "$build/bin/gwctl" "$@"; }
ip netns exec "$ns" "$ibgwd" -d -f "$work/ibgwd.yaml" 2>"$work/log" &
pid=$!
wait_up() {
	for _ in $(seq 100); do
		gwctl -S "$sock" link show 2>/dev/null | grep -q "eth0: ether state UP" && return 0
		sleep 0.05
	done
	return 1
}
wait_up || echo "# the daemon did not bring eth0 up"

# One golden block: run COMMAND, print it as the golden file holds it.
run_block() {
	local out rc
	out=$(eval "$1" 2>&1)
	rc=$?
	printf '%s\n' "$out" | sed -E "s|$work|WORK|g; s/in [0-9]+ ms/in N ms/g; /^\$/d"
	[ "$rc" -ne 0 ] && echo "[exit $rc]"
	return 0
}

mapfile -t cmds < <(sed -n 's/^\$ //p' "$golden")
tap_plan $((${#cmds[@]} + 19))

if [ "$regen" = 1 ]; then
	for c in "${cmds[@]}"; do
		printf '$ %s\n' "$c"
		run_block "$c"
	done >"$golden.new"
	# the blocks ran once: start again from the same state for the checks
	echo "# regenerated $golden: run the suite again to check it"
	mv "$golden.new" "$golden"
	exit 0
fi
# The expected output of block I (0-based) of the golden file.
expected() {
	awk -v want="$1" '/^\$ / { i++; next } i == want + 1' "$golden"
}
for i in "${!cmds[@]}"; do
	c=${cmds[$i]}
	got=$(run_block "$c")
	want=$(expected "$i")
	if [ "$got" = "$want" ]; then
		tap_ok "golden: $c"
	else
		tap_not_ok "golden: $c" "$(diff <(printf '%s\n' "$want") <(printf '%s\n' "$got"))"
	fi
done

# --- what the golden blocks did, seen from elsewhere ---------------------------------
tap_like "the daemon's log of the reload naming a missing device says what was not applied" \
	"$(tr '\n' '|' <"$work/log")" \
	"reloaded .*ibgwd.yaml in [0-9]+ ms, but not as written: eth1: not running: cannot open veth9"
tap_is "show version counts no refused reload (those applied what they could)" \
	"$(gwctl -S "$sock" -j show version | jq -r '.[0].reload_failures')" 0

# --- completion ----------------------------------------------------------------------
PATH=$build/bin:$PATH
. "$top/packaging/bash-completion/gwctl"
tap_is "the completion file registers _gwctl for gwctl" "$(complete -p gwctl)" \
	"complete -F _gwctl gwctl"
# complete_line WORDS...: COMPREPLY, sorted, for a line whose last word is being typed.
complete_line() {
	COMP_WORDS=("$@")
	COMP_CWORD=$(($# - 1))
	_gwctl
	printf '%s\n' "${COMPREPLY[@]}" | sort | paste -sd' ' -
}
tap_is "complete: gwctl <TAB> offers the objects, show and help" \
	"$(complete_line gwctl '')" \
	"capture config connection dhcp gid-route ha help link log mcast neigh path ra reload route show stats version"
tap_is "complete: gwctl r<TAB>" "$(complete_line gwctl r)" "ra reload route"
tap_is "complete: gwctl route <TAB> offers its commands" \
	"$(complete_line gwctl route '')" "add del help list show"
tap_is "complete: gwctl neighbours <TAB> (an alias) offers neigh's commands" \
	"$(complete_line gwctl neighbours '')" "add del flush help list show"
tap_is "complete: gwctl show <TAB> offers what can be shown" \
	"$(complete_line gwctl show '')" \
	"config connection dhcp gid-route ha link mcast neigh path ra route stats version"
tap_is "complete: gwctl -j s<TAB>: past the options, the objects" \
	"$(complete_line gwctl -j s)" "show stats"
tap_is "complete: gwctl -js<TAB> offers the options" "$(complete_line gwctl -js)" "-json"
tap_is "complete: gwctl route add 10.1.0.0/16 <TAB> offers the route's keywords" \
	"$(complete_line gwctl route add 10.1.0.0/16 '')" "blackhole dev metric nexthop via"
tap_is "complete: gwctl log level <TAB> offers the levels" \
	"$(complete_line gwctl log level '')" "debug error info notice warning"
tap_is "complete: after dev, the running daemon's interfaces (on the -S of the line)" \
	"$(complete_line gwctl -S "$sock" neigh show dev '')" "eth0"
tap_is "complete: ... with a prefix, in the other word order" \
	"$(complete_line gwctl -S "$sock" show neighbours dev e)" "eth0"
tap_is "complete: gwctl capture <TAB>: the daemon's interfaces" \
	"$(complete_line gwctl -S "$sock" capture '')" "eth0"
tap_is "complete: gwctl capture eth0 d<TAB>: its keywords" \
	"$(complete_line gwctl -S "$sock" capture eth0 d)" "direction duration"
tap_is "complete: ... nothing when no daemon answers" \
	"$(complete_line gwctl -S "$none" neigh flush dev '')" ""
help_objects=$(gwctl help | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p' | sort -u | paste -sd' ' -)
tap_is "the completion's objects are those gwctl help lists" \
	"$(printf '%s\n' $_gwctl_objects | sort | paste -sd' ' -)" "$help_objects"
tap_is "the completion's show objects are those with a show command in gwctl help" \
	"$(printf '%s\n' $_gwctl_show_objects | sort | paste -sd' ' -)" \
	"$(gwctl help | sed -n 's/^  \([a-z-]*\) { show | list }.*/\1/p' | sort -u | paste -sd' ' -)"
tap_done
