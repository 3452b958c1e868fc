# sim/lib/fabric.sh - the rack's data layer: start, stop and command ibgw-fabric
# (sourced by sim/rack after rack.sh; see docs/simulated-rack.md, "Data layer").
#
# The fabric runs in the rack's mgmt namespace; its sockets are files in the rack's
# state dir, reachable from every node namespace (pathname unix sockets are not
# per-namespace):
#   $RACK_STATE/fabric.sock       ports attach here (lib/ib_simfab.h protocol)
#   $RACK_STATE/fabric.sock.ctl   text commands (ibgw-fabric ctl ...)
# Its pid is pids/fabric.pid, its log logs/fabric.log, as for every rack process.
# The binary: $IBGW_FABRIC, else $IBGW_BUILD/bin/ibgw-fabric, else build/bin/ next to
# sim/ (the default `make` output).

fabric_bin() { rack_built "${IBGW_FABRIC:-}" bin/ibgw-fabric; }

FABRIC_SOCK_NAME=fabric.sock

fabric_socket() { echo "$RACK_STATE/$FABRIC_SOCK_NAME"; }
fabric_ctl_socket() { echo "$RACK_STATE/$FABRIC_SOCK_NAME.ctl"; }
fabric_running() { rack_pid_alive fabric; }

# fabric_start: start ibgw-fabric (once) and wait until its sockets answer.
fabric_start() {
	local bin i
	bin=$(fabric_bin)
	fabric_running && return 0
	[ -x "$bin" ] || rack_die "no fabric binary $bin (make, or set IBGW_BUILD / IBGW_FABRIC)"
	rack_spawn fabric "$RACK_MGMT_NS" "$RACK_STATE" -- \
		"$bin" --socket "$(fabric_socket)" --control "$(fabric_ctl_socket)"
	for i in $(seq 50); do
		"$bin" ctl "$(fabric_ctl_socket)" stats >/dev/null 2>&1 && return 0
		fabric_running || break
		sleep 0.1
	done
	rack_die "fabric did not start: $(tail -n 3 "$RACK_STATE/logs/fabric.log" 2>/dev/null)"
}

# fabric_stop: SIGTERM (it closes a running capture and removes its sockets).
fabric_stop() {
	rack_stop fabric TERM
	rm -f "$(fabric_socket)" "$(fabric_ctl_socket)"
}

# fabric_ctl WORDS...: one command; its answer on stdout (errors on stderr, status 1).
fabric_ctl() {
	fabric_running || rack_die "the fabric of rack $RACK_NAME is not running"
	"$(fabric_bin)" ctl "$(fabric_ctl_socket)" "$@"
}

# fabric_capture FILE [--seconds N]: capture to FILE; with --seconds, wait until
# the fabric closes it (N seconds) or until interrupted (the capture is then stopped).
fabric_capture() {
	local file=${1:-} secs=
	[ -n "$file" ] || rack_die "usage: capture FILE [--seconds N] | capture stop"
	if [ "$file" = stop ]; then fabric_ctl capture stop; return; fi
	shift
	case ${1:-} in
	--seconds) [ $# -eq 2 ] || rack_die "usage: capture FILE [--seconds N]"; secs=$2;;
	'') ;;
	*) rack_die "usage: capture FILE [--seconds N]";;
	esac
	case $file in /*) ;; *) file=$PWD/$file;; esac
	if [ -z "$secs" ]; then
		fabric_ctl capture start "$file" >/dev/null || return 1
		echo "capturing to $file until 'sim/rack capture stop'"
		return 0
	fi
	fabric_ctl capture start "$file" "$secs" >/dev/null || return 1
	trap 'fabric_ctl capture stop; trap - INT TERM; exit 130' INT TERM
	# The fabric closes the file itself after N seconds; the stop after that is
	# only for the race at the boundary (it fails harmlessly when already closed).
	sleep "$secs"
	sleep 0.2
	fabric_ctl capture stop >/dev/null 2>&1
	trap - INT TERM
	echo "captured to $file"
}
