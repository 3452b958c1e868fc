# Common set-up for integration suites that run on a simulated rack. Source it after
# test/lib/tap.sh (it needs $top), then:
#
#   suite_init sa            # rack "sa<pid>" (at most 10 characters), a temp work dir
#                            # that is also the cwd (umad2sim writes ./sys-PID/ there),
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
