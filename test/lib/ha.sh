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
