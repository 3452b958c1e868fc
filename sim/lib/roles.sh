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

# Gateways start after the fabric (role_start_gateways); IB hosts likewise
# (role_start_ibhosts). Ethernet hosts need nothing started: their namespace and
# eth0 are the host.
role_start_gateway() { :; }
role_start_ibhost() { :; }   # started after the fabric: role_start_ibhosts
role_start_ethhost() { :; }

# IB hosts (docs/ipoib.md): ibgw-host on each node with a "#@ipoib NODE PKEY MODE
# ADDR..." line, once the fabric runs (the sim port attaches to it) and OpenSM is
# MASTER (the link joins the broadcast group). Label ibgw-host-NODE; its control
# socket is nodes/NODE/ibgw-host.sock (`ibgw-host --ctl SOCK dump`). A topology's
# "#@mcast-hop-limit N" gives every host that GRH hop limit for its multicast (ARP, ND:
# 2 crosses one IB router, sim/topologies/two-subnets.topo).
host_bin() { rack_built "${IBGW_HOST:-}" bin/ibgw-host; }
ipoib_lines() { awk '$1 == "#@ipoib"' "$RACK_STATE/topology"; }
role_start_ibhost_node() {   # NODE PKEY MODE ADDR... (IBGW_HOST_ARGS: more options)
	local node=$1 pkey=$2 mode=$3 dir=$RACK_STATE/nodes/$1 a args=() i hop
	shift 3
	for a in "$@"; do args+=(--addr "$a"); done
	# shellcheck disable=SC2206
	args+=(${IBGW_HOST_ARGS:-})
	hop=$(rack_topo_key "$RACK_STATE/topology" mcast-hop-limit)
	[ -z "$hop" ] || args+=(--mcast-hop-limit "$hop")
	# The verbs backend on the verbs shim, as the gateway; in connected mode the CM is
	# cm_umad, its MADs carried on the fabric's QP1 by the shim (docs/verbs-sim.md).
	rack_env_verbs "$node"
	rack_spawn "ibgw-host-$node" "$(rack_ns "$node")" "$dir" "${RACK_ENV[@]}" -- \
		"$(host_bin)" --node "$node" --pkey "$pkey" \
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
	role_status_gateways
}

# Gateways (docs/operations.md): ibgwd on each node of $IBGW_GW_NODES (default gw1;
# "" for none) once the fabric and the IB hosts run, with $IBGW_GW_CONFIG (default
# sim/etc/rack-gw1.yaml, routed mode; sim/etc/rack-gw1-proxy.yaml for proxy mode). Label
# ibgwd-NODE, log logs/ibgwd-NODE.log, control socket nodes/NODE/ibgwd.sock (the
# node's IBGW_CTL_SOCKET, which gwctl reads: `sim/rack exec gw1 -- gwctl show routes`).
# $IBGW_GW_MODE (routed | proxy | none; default: proxy when the config's name says
# so, else routed) gives the hosts their side of it:
#   routed  Ethernet hosts get fd00:20::N/64 and routes to 10.10.0.0/24, fd00:10::/64
#           via the gateway; IB hosts routes to 10.20.0.0/24, fd00:20::/64 via it.
#   proxy   Ethernet hosts get 10.10.0.(200+K)/24 and fd00:10::(200+K)/64 in the IB
#           hosts' subnet, and no route: proxy ARP/ND does the rest.
ibgwd_bin() { rack_built "${IBGW_IBGWD:-}" bin/ibgwd; }
# The verbs shim (sim/verbs, docs/verbs-sim.md): libibverbs on the simulated fabric.
# ibgwd's links say `backend: verbs`, the code that ships for HCAs; on the rack that
# code runs on this library, LD_PRELOADed after libumad2sim (it reads the node's port
# through libibumad). $IBGW_VSIM, else $IBGW_BUILD/sim/verbs/, else build/ next to sim/.
vsim_lib() { rack_built "${IBGW_VSIM:-}" sim/verbs/libibverbs2sim.so; }
# rack_env_verbs NODE: RACK_ENV for NODE with the verbs shim after libumad2sim.
rack_env_verbs() {
	local i
	rack_env_args "$1"
	for i in "${!RACK_ENV[@]}"; do
		case ${RACK_ENV[$i]} in LD_PRELOAD=*)
			RACK_ENV[i]="${RACK_ENV[$i]}:$(vsim_lib)"
		esac
	done
}
# gw_config [NODE]: the config ibgwd runs with. A failover pair (sim/rack up --ha:
# IBGW_GW_HA=1) runs sim/etc/rack-ha-NODE.yaml, rendered into the node's folder with the
# rack's name, next to the pair's shared key ($RACK_STATE/ha.key, made once, 0600 and
# $RACK_GW_USER's: ibgwd reads it after dropping root, at start and at every reload, as
# the package's key is ibgw's); $IBGW_HA_DEAD_MS, when set, is its
# failover.dead_interval_ms (default 40). Else $IBGW_GW_CONFIG, else the topology's
# "#@gw-config FILE" (in sim/etc/), else sim/etc/rack-gw1.yaml.
gw_config() {
	local node=${1:-gw1} out
	if rack_is_ha; then
		out=$RACK_STATE/nodes/$node/ibgwd.yaml
		mkdir -p "$RACK_STATE/nodes/$node"
		if [ ! -s "$RACK_STATE/ha.key" ]; then
			(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$RACK_STATE/ha.key")
		fi
		chown "$RACK_GW_USER:$RACK_GW_GROUP" "$RACK_STATE/ha.key"
		sed -e "s/@RACK@/$RACK_NAME/g" \
			-e "${IBGW_HA_DEAD_MS:+s/^failover:\$/failover:\n  dead_interval_ms: $IBGW_HA_DEAD_MS/}" \
			"$RACK_SIM_DIR/etc/rack-ha-$node.yaml" >"$out"
		echo "$out"
		return
	fi
	local topo_cfg=
	[ -f "$RACK_STATE/topology" ] && topo_cfg=$(rack_topo_key "$RACK_STATE/topology" gw-config)
	echo "${IBGW_GW_CONFIG:-$RACK_SIM_DIR/etc/${topo_cfg:-rack-gw1.yaml}}"
}
# The gateway nodes: $IBGW_GW_NODES, default gw1 (gw1 and gw2 for a failover pair).
gw_nodes() {
	if [ -n "${IBGW_GW_NODES+set}" ]; then echo "$IBGW_GW_NODES"
	elif rack_is_ha; then echo "gw1 gw2"
	else echo gw1
	fi
}
# A failover pair: asked for now, or the rack was brought up with --ha (its key).
rack_is_ha() { [ -n "${IBGW_GW_HA:-}" ] || [ -f "$RACK_STATE/ha.key" ]; }
gw_mode() {
	if [ -n "${IBGW_GW_MODE:-}" ]; then echo "$IBGW_GW_MODE"
	else case $(basename "$(gw_config)") in *proxy*) echo proxy;; *) echo routed;; esac
	fi
}
# as_gw_user CMD...: CMD as the user ibgwd becomes (its group only), for checks.
as_gw_user() { setpriv --reuid="$RACK_GW_USER" --regid="$RACK_GW_GROUP" --clear-groups "$@"; }
# gateway_start NODE [CONFIG]: start ibgwd on NODE and wait for its control socket.
# ibgwd starts as root and becomes $RACK_GW_USER (the config's gateway.user) before it
# opens a port: its cwd, where umad2sim makes ./sys-PID, is nodes/NODE/ibgwd/, that
# user's. A config that user cannot read starts (root reads it) but cannot be reloaded,
# and a config without gateway.user runs as root: both are said on stderr.
gateway_start() {
	local node=$1 cfg=${2:-$(gw_config "$1")} dir=$RACK_STATE/nodes/$1 i ns uid
	ns=$(rack_ns "$node")
	mkdir -p "$dir/ibgwd"
	chown "$RACK_GW_USER:$RACK_GW_GROUP" "$dir/ibgwd"
	as_gw_user test -r "$cfg" ||
		echo "sim/rack: $RACK_GW_USER cannot read $cfg: ibgwd on $node will not reload it" >&2
	# The gateway speaks on eth0 itself (AF_PACKET); the node's kernel keeps out of
	# IPv6 there (no link-local, no ND answers of its own).
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1 2>/dev/null
	rm -f "$dir/ibgwd.sock"
	# An earlier ibgwd killed here (failover tests) still holds its ibsim slot.
	rack_reap_clients >/dev/null 2>&1
	rack_env_verbs "$node"
	rack_spawn "ibgwd-$node" "$ns" "$dir/ibgwd" "${RACK_ENV[@]}" -- \
		"$(ibgwd_bin)" -d -f "$cfg" -S "$dir/ibgwd.sock"
	for i in $(seq 100); do
		if [ -S "$dir/ibgwd.sock" ]; then
			# The socket is made just before the drop (its chown needs root).
			for _ in $(seq 50); do
				uid=$(awk '/^Uid:/ { print $3 }' "/proc/$(rack_pid "ibgwd-$node")/status" 2>/dev/null)
				[ "$uid" = 0 ] || break
				sleep 0.1
			done
			[ "$uid" = 0 ] &&
				echo "sim/rack: ibgwd on $node runs as root, not $RACK_GW_USER (no gateway.user in $cfg)" >&2
			return 0
		fi
		rack_pid_alive "ibgwd-$node" || break
		sleep 0.1
	done
	echo "sim/rack: ibgwd on $node did not start (see $RACK_STATE/logs/ibgwd-$node.log)" >&2
	return 1
}
gateway_stop() {   # NODE
	rack_pid_alive "ibgwd-$1" || return 0
	rack_stop "ibgwd-$1" TERM
}
# veth_tx_csum_off NS DEV: make a host's veth behave like a wire: the host's kernel
# computes its checksums and segments its TCP itself (turning TX checksum offload off
# also turns off TSO/GSO), so the rack's suites see the frames a NIC would deliver.
# The gateway takes a local sender's 64 KiB GSO super-frames too (received whole with
# their metadata, cut in software for IPoIB): test/integration/gateway.sh turns the
# offloads back on for ethhost1 to check it, gso.sh and fanout.sh run with them on.
# ethtool -K DEV tx off, without ethtool: the SIOCETHTOOL ioctl with ETHTOOL_STXCSUM.
veth_tx_csum_off() {
	ip netns exec "$1" python3 -c '
import ctypes, fcntl, socket, struct, sys
val = ctypes.create_string_buffer(struct.pack("II", 0x17, 0))
ifr = struct.pack("16sP", sys.argv[1].encode(), ctypes.addressof(val))
fcntl.ioctl(socket.socket(), 0x8946, ifr)' "$2"
}
# hosts_for_gateway MODE: addresses and routes on the hosts (idempotent).
hosts_for_gateway() {
	local mode=$1 node kind role ns ip addr k=0 tag pkey m addrs
	while read -r node kind role ns ip addr; do
		[ "$role" = ethhost ] || continue
		k=$((k + 1))
		veth_tx_csum_off "$ns" eth0
		case $mode in
		routed)
			local n=${addr%/*}; n=${n##*.}
			ip -n "$ns" -6 addr replace "fd00:20::$n/64" dev eth0 nodad
			ip -n "$ns" route replace 10.10.0.0/24 via 10.20.0.1
			ip -n "$ns" -6 route replace fd00:10::/64 via fd00:20::1;;
		proxy)
			ip -n "$ns" addr replace "10.10.0.$((200 + k))/24" dev eth0
			ip -n "$ns" -6 addr replace "fd00:10::$((200 + k))/64" dev eth0 nodad;;
		esac
	done < "$RACK_STATE/rack.nodes"
	[ "$mode" = routed ] || return 0
	while read -r tag node pkey m addrs; do
		ns=$(rack_ns "$node")
		ip -n "$ns" route replace 10.20.0.0/24 via 10.10.0.1 dev ib0 2>/dev/null
		ip -n "$ns" -6 route replace fd00:20::/64 via fd00:10::1 dev ib0 2>/dev/null
	done < <(ipoib_lines)
}
role_start_gateways() {
	local node
	[ -x "$(ibgwd_bin)" ] || { echo "sim/rack: no $(ibgwd_bin) (make): gateways not started" >&2; return 0; }
	[ -e "$(vsim_lib)" ] || { echo "sim/rack: no $(vsim_lib) (make): gateways not started" >&2; return 0; }
	fabric_running || return 0
	for node in $(gw_nodes); do
		rack_node_field "$node" 1 >/dev/null || continue
		gateway_start "$node" || return 1
	done
	[ -n "$(gw_nodes)" ] && [ "$(gw_mode)" != none ] && hosts_for_gateway "$(gw_mode)"
	return 0
}
role_status_gateways() {
	local node sock
	for node in $(gw_nodes); do
		sock=$RACK_STATE/nodes/$node/ibgwd.sock
		# (a stopped ibgwd leaves its socket: it cannot unlink it from a root's folder)
		[ -S "$sock" ] && rack_pid_alive "ibgwd-$node" || continue
		printf '  gateway   %s: %s\n' "$node" "$(ip netns exec "$(rack_ns "$node")" \
			"$(dirname "$(ibgwd_bin)")/gwctl" -S "$sock" show links 2>/dev/null |
			awk '/^[a-z]/ { printf "%s%s %s", sep, $1, $5; sep = ", " }')"
	done
}

# After OpenSM is MASTER: the data-layer fabric (sim/lib/fabric.sh), in the mgmt
# namespace. It holds no ibsim slot: each port tells it the identity it read
# through libibumad. Without a built ibgw-fabric the rack runs MAD layer only.
# Routers (two-subnets.topo): the fabric plays each "#@router NAME GUID_A GUID_B" of
# the topology, port 1 on subnet A and port 2 on subnet B, with the LID each subnet's
# OpenSM gave that port (router_port_lid) and the rack's MTU (2048); then the topology's
# "#@route NAME GID/LEN PORT direct|LID" lines.
router_port_lid() {   # SM_NODE GUID: the LID OpenSM gave that port (ibaddr asks the SA)
	rack_ib "$1" ibaddr -L -G "$2" 2>/dev/null | awk '$1 == "LID" { print $3; exit }'
}
# "#@join NAME MGID": the router joins that group on both subnets, with the MLID each
# subnet's SA has for it (the group must exist: OpenSM makes the partitions' broadcast
# groups). saquery -g lists at most 3 groups (no RMPP): enough for the broadcast groups.
group_mlid() {   # SM_NODE MGID
	rack_ib "$1" saquery -g 2>/dev/null | awk -F. -v m="$2" '
		/MGID/ { g = $NF } /Mlid/ && g == m { print $NF; exit }'
}
role_start_routers() {
	local tag name ga gb prefix_a prefix_b lid_a lid_b sm_a sm_b i
	rack_has_b || return 0
	sm_a=$(rack_topo_key "$RACK_STATE/topology" sm)
	prefix_a=$(rack_topo_key "$RACK_STATE/topology" prefix)
	prefix_a=${prefix_a:-0xfe80000000000000}
	prefix_b=$(rack_b_field 2)
	sm_b=$(rack_b_sm)
	while read -r tag name ga gb; do
		for i in $(seq 20); do
			lid_a=$(router_port_lid "$sm_a" "$ga")
			lid_b=$(router_port_lid "$sm_b" "$gb")
			[ -n "$lid_a" ] && [ -n "$lid_b" ] && [ "$lid_a" != 0 ] && [ "$lid_b" != 0 ] && break
			sleep 0.5
		done
		[ -n "$lid_a" ] && [ -n "$lid_b" ] || rack_die "router $name: no LID for its ports $ga / $gb"
		fabric_ctl router "$name" 1 "$lid_a" "$ga" "$prefix_a" 2048 >/dev/null &&
			fabric_ctl router "$name" 2 "$lid_b" "$gb" "$prefix_b" 2048 >/dev/null ||
			rack_die "router $name: the fabric refused its ports"
	done < <(awk '$1 == "#@router"' "$RACK_STATE/topology")
	while read -r tag name rest; do
		# shellcheck disable=SC2086
		fabric_ctl route "$name" $rest >/dev/null || rack_die "route $name $rest refused"
	done < <(awk '$1 == "#@route"' "$RACK_STATE/topology")
	while read -r tag name mgid; do
		lid_a=$(group_mlid "$sm_a" "$mgid")
		lid_b=$(group_mlid "$sm_b" "$mgid")
		[ -n "$lid_a" ] && [ -n "$lid_b" ] || rack_die "router $name: group $mgid has no MLID on A or B"
		fabric_ctl mcast "$name" "$mgid" 1 "$lid_a" >/dev/null &&
			fabric_ctl mcast "$name" "$mgid" 2 "$lid_b" >/dev/null ||
			rack_die "router $name: the fabric refused group $mgid"
	done < <(awk '$1 == "#@join"' "$RACK_STATE/topology")
	while read -r tag name prefix; do
		fabric_ctl mcast-proxy "$name" "$prefix" >/dev/null ||
			rack_die "router $name: the fabric refused mcast-proxy $prefix"
	done < <(awk '$1 == "#@mcast-proxy"' "$RACK_STATE/topology")
}

role_after_sm() {
	if [ -x "$(fabric_bin)" ]; then
		fabric_start
		role_start_routers
		[ -n "${RACK_BARE:-}" ] || role_start_ibhosts
		[ -n "${RACK_BARE:-}" ] || role_start_gateways
	else
		echo "sim/rack: no $(fabric_bin) (make): rack without its data layer" >&2
	fi
}

# Fabric hooks for `link`, `loss`, `delay`, `capture`, `fabric`.
role_fabric_link() {   # NODE down|up [PORT]: the data path follows ibsim's link
	fabric_running || return 0
	fabric_ctl link "$1" "$2" ${3:+"$3"} >/dev/null
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
