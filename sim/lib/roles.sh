# sim/lib/roles.sh - what runs on each node of a rack, by role (sourced by sim/rack).
#
# `sim/rack up` calls role_start ROLE NODE for every node of the topology
# (table order, after ibsim is up), then role_after_sm once OpenSM is MASTER
# and every port ACTIVE. A start function uses rack_spawn LABEL NAMESPACE CWD
# ENV... -- CMD (pids/LABEL.pid, logs/LABEL.log; `down` stops it, `status`
# lists it). For an IB node, "${RACK_ENV[@]}" after `rack_env_args NODE` is
# the environment that reaches ibsim (LD_PRELOAD, IBSIM_SERVER_NAME, SIM_HOST).
#
# Adding a role = one function here, e.g. for the gateway once it exists:
#   role_start_gateway() {
#       local node=$1 dir=$RACK_STATE/nodes/$1
#       [ -x "$IBGW_BUILD/ibgwd" ] || return 0
#       rack_env_args "$node"
#       rack_spawn "ibgwd-$node" "$(rack_ns "$node")" "$dir" "${RACK_ENV[@]}" -- \
#           "$IBGW_BUILD/ibgwd" -f "$dir/ibgwd.yaml"
#   }
# Mind ibsim's 10-client limit (docs/simulated-rack.md): one client per
# process that opens an IB port through umad2sim.

role_start() {
	local role=$1 node=$2 fn
	fn=role_start_${role//-/_}
	if declare -F "$fn" >/dev/null; then "$fn" "$node"; fi
}

# The master subnet manager.
role_start_sm() { rack_start_opensm "$1" 15; }

# The standby SM node: started on demand (`sim/rack sm standby start`), so it
# does not hold an ibsim client slot in racks that do not test failover.
role_start_sm_standby() { :; }

# Gateways, IB-side hosts and Ethernet hosts get their processes in later
# issues (ibgwd; the IPoIB host endpoint driving a TUN device). Ethernet hosts
# need nothing started: their namespace and eth0 are the host.
role_start_gateway() { :; }
role_start_ibhost() { :; }   # started after the fabric: role_start_ibhosts
role_start_ethhost() { :; }

# IB hosts (docs/ipoib.md): ibgw-host on each node with a "#@ipoib NODE PKEY MODE
# ADDR..." line, once the fabric runs (the sim port attaches to it) and OpenSM is
# MASTER (the link joins the broadcast group). Label ibgw-host-NODE; its control
# socket is nodes/NODE/ibgw-host.sock (`ibgw-host --ctl SOCK dump`).
host_bin() {
	local top
	top=$(cd "$RACK_SIM_DIR/.." && pwd)
	if [ -n "${IBGW_HOST:-}" ]; then echo "$IBGW_HOST"
	elif [ -n "${IBGW_BUILD:-}" ]; then echo "$IBGW_BUILD/bin/ibgw-host"
	else echo "$top/build/bin/ibgw-host"
	fi
}
ipoib_lines() { awk '$1 == "#@ipoib"' "$RACK_STATE/topology"; }
role_start_ibhost_node() {   # NODE PKEY MODE ADDR...
	local node=$1 pkey=$2 mode=$3 dir=$RACK_STATE/nodes/$1 a args=() i
	shift 3
	for a in "$@"; do args+=(--addr "$a"); done
	rack_env_args "$node"
	rack_spawn "ibgw-host-$node" "$(rack_ns "$node")" "$dir" "${RACK_ENV[@]}" -- \
		"$(host_bin)" --node "$node" --socket "$(fabric_socket)" --pkey "$pkey" \
		--mode "$mode" --ctl "$dir/ibgw-host.sock" "${args[@]}"
	for i in $(seq 50); do
		[ -S "$dir/ibgw-host.sock" ] && return 0
		rack_pid_alive "ibgw-host-$node" || break
		sleep 0.1
	done
	echo "sim/rack: ibgw-host on $node did not start (see $RACK_STATE/logs/ibgw-host-$node.log)" >&2
	return 1
}
role_start_ibhosts() {
	[ -x "$(host_bin)" ] || { echo "sim/rack: no $(host_bin) (make): IB hosts not started" >&2; return 0; }
	fabric_running || return 0
	local tag node pkey mode addrs
	while read -r tag node pkey mode addrs; do
		# shellcheck disable=SC2086
		role_start_ibhost_node "$node" "$pkey" "$mode" $addrs
	done < <(ipoib_lines)
}
# For `status`: one line per IB host (its link as the host reports it).
role_status_ibhosts() {
	local tag node pkey mode addrs sock line
	while read -r tag node pkey mode addrs; do
		sock=$RACK_STATE/nodes/$node/ibgw-host.sock
		line=$(ip netns exec "$(rack_ns "$node")" "$(host_bin)" --ctl "$sock" dump link 2>/dev/null |
			awk '{ print "link", $6, "qpn", $10, "mtu", $12 }')
		printf '  ipoib     %-9s P_Key %s %s %s: %s\n' "$node" "$pkey" "$mode" "$addrs" "${line:-not running}"
	done < <(ipoib_lines)
}

# After OpenSM is MASTER: the data-layer fabric (sim/lib/fabric.sh), in the mgmt
# namespace. It holds no ibsim slot: each port tells it the identity it read
# through libibumad. Without a built ibgw-fabric the rack runs MAD layer only.
role_after_sm() {
	if [ -x "$(fabric_bin)" ]; then
		fabric_start
		role_start_ibhosts
	else
		echo "sim/rack: no $(fabric_bin) (make): rack without its data layer" >&2
	fi
}

# Fabric hooks for `link`, `loss`, `delay`, `capture`, `fabric`.
role_fabric_link() {   # NODE down|up: the data path follows ibsim's link
	fabric_running || return 0
	fabric_ctl link "$1" "$2" >/dev/null
}
role_fabric_cmd() {
	local what=$1
	shift
	fabric_running || {
		echo "sim/rack: $what needs the simulated fabric (not running in rack $RACK_NAME; make, then sim/rack up)" >&2
		exit 2
	}
	case $what in
	capture) fabric_capture "$@";;
	fabric) fabric_ctl "$@";;
	*) fabric_ctl "$what" "$@";;
	esac
}
