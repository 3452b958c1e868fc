# Common set-up for integration suites that run ibgwd itself, without a rack. Source it
# after test/lib/tap.sh (it needs $top), then:
#
#   daemon_suite_init NAME [BUILD_DIR]   # $build (BUILD_DIR, else $IBGW_BUILD, else
#                                        # build/), $ibgwd, $gwctl; a temp dir $work with
#                                        # the control sockets' paths $sock and $ro; an
#                                        # EXIT trap that kills $pid and $pid2 (the
#                                        # daemons the suite starts), runs
#                                        # daemon_suite_cleanup_hook if defined, removes
#                                        # $work
#   wait_socket [SOCKET]                 # until gwctl answers there ($sock), 5 s at most
daemon_suite_init() {
	build=${2:-${IBGW_BUILD:-$top/build}}
	case "$build" in /*) ;; *) build=$top/$build ;; esac
	ibgwd=$build/bin/ibgwd
	gwctl=$build/bin/gwctl
	work=$(mktemp -d "/tmp/ibgw-$1.XXXXXX")
	sock=$work/ctl.sock
	ro=$work/ro.sock
	pid=
	pid2=
	trap daemon_suite_cleanup EXIT
}

daemon_suite_cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	[ -n "$pid2" ] && kill -9 "$pid2" 2>/dev/null
	wait 2>/dev/null
	declare -F daemon_suite_cleanup_hook >/dev/null && daemon_suite_cleanup_hook
	rm -rf "$work"
}

wait_socket() {
	for _ in $(seq 100); do
		"$gwctl" -t 1 -S "${1:-$sock}" show version >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	return 1
}
