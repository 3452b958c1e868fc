# Helpers for a failover pair on the simulated rack (sim/rack up --ha), shared by
# test/integration/failover.sh and bench/failover.sh. Needs $rack, $build, $RACK_STATE.
#
#   g NODE ARGS...            gwctl on a gateway node
#   state NODE                its group's state (master, backup, fault, init)
#   transitions NODE          how many state transitions it has made since its start
#   wait_state NODE STATE S   until it is STATE, at most S seconds
#   wait_paths NODE N S       until N heartbeat paths are alive there, at most S seconds
#   ha_pair_up [NOTE]         sim/rack up --ha (the caller's environment: IBGW_GW_MODE...)
#                             as a check, then gw1 MASTER; exits when the rack fails
#   ha_reload_with WHAT SED   both boxes' rendered configs edited with sed -E SED and
#                             reloaded (a check each), then "gw1 MASTER, gw2 BACKUP"
#   keep_cpus_awake           a busy loop at SCHED_IDLE on every CPU, until the suite ends
g() { ip netns exec "$rack-$1" "$build/bin/gwctl" -S "$RACK_STATE/nodes/$1/ibgwd.sock" "${@:2}"; }
state() { g "$1" -j show ha 2>/dev/null | jq -r '.[] | select(.kind == "group") | .state'; }
transitions() { g "$1" -j show ha 2>/dev/null | jq -r '.[] | select(.kind == "node") | .transitions'; }
wait_state() {
	local i
	for i in $(seq $(($3 * 20))); do
		[ "$(state "$1")" = "$2" ] && return 0
		sleep 0.05
	done
	return 1
}
wait_paths() {
	local i
	for i in $(seq $(($3 * 20))); do
		[ "$(g "$1" -j show ha 2>/dev/null |
			jq '[.[] | select(.kind == "path" and .alive)] | length')" = "$2" ] && return 0
		sleep 0.05
	done
	return 1
}

ha_pair_up() {
	if ! R up --ha >"$work/up.log" 2>&1; then
		tap_not_ok "rack up with a failover pair${1:+ ($1)}" "$(tail -5 "$work/up.log")"
		exit 1
	fi
	tap_ok "rack up with a failover pair${1:+ ($1)}"
	wait_state gw1 master 20
}

ha_reload_with() {
	local n
	for n in gw1 gw2; do
		sed -i -E "$2" "$RACK_STATE/nodes/$n/ibgwd.yaml"
		tap_check "$n: reload with $1" g "$n" reload
	done
	tap_is "gw1 MASTER, gw2 BACKUP" "$(state gw1)/$(state gw2)" master/backup
}

# A VM's idle vCPU halts, and it runs again when the hypervisor gets to it: on the AMD
# EPYC VM under PVM a timer on a halted vCPU fired up to 32 ms late (ftrace: no event on
# that CPU for 39 ms while the other was busy; a SCHED_FIFO 99 probe woke up to 31 ms
# late), so one box's heartbeat thread slept through three intervals and, with the 10/40
# timers, its peer took the live master for dead. No flood is needed for that, and bare
# metal wakes a core in microseconds. A loop at SCHED_IDLE on each CPU keeps the vCPUs
# from halting (as idle=poll on a kernel command line would) and gives way to every other
# task at once: with it the probe's worst lateness in a minute was 5.5 ms. The suite's
# EXIT trap stops the loops (they are its jobs).
keep_cpus_awake() {
	local c

	for c in $(seq 0 $(($(nproc) - 1))); do
		taskset -c "$c" chrt -i 0 bash -c 'while :; do :; done' &
	done
}
