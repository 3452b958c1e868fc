# sim/lib/rack.sh - the simulated rack's building blocks (sourced by sim/rack).
#
# A rack is a set of network namespaces named "<rack>-<node>", one per node
# of the topology, plus two infrastructure namespaces:
#   <rack>-mgmt   the rack's management network: bridge "mgmtbr" 198.18.0.1/24,
#                 ibsim (remote mode, UDP 7070..7080) and its console holder;
#                 every IB node has a veth "mgmt0" into it (198.18.0.10+i).
#   <rack>-ethsw  the Ethernet switch: bridge "br0"; every Ethernet-capable
#                 node has a veth "eth0" into it.
# IB clients (OpenSM, saquery, later ibgwd and IPoIB hosts) run inside their
# node's namespace with LD_PRELOAD=libumad2sim.so, IBSIM_SERVER_NAME set to
# the mgmt address of ibsim and SIM_HOST=<node>, so each reaches ibsim over
# its own management link and gets its own node's port.
#
# State lives in /run/ibgw-sim/<rack>/:
#   topology            the ibsim net file in use
#   rack.nodes          one line per node: NAME KIND ROLE NAMESPACE MGMT_IP ETH_ADDR
#   rack.env            RACK_* facts for scripts (topology, addresses)
#   pids/LABEL.pid      one per process the rack started (LABEL.ns: its namespace)
#   logs/LABEL.log      its stdout/stderr
#   ibsim.console       fifo read by ibsim as its console (stdin)
#   nodes/NODE/         per-node work dir (cwd of its daemons), env file
#   nodes/NODE/ibgwd/   a gateway's cwd, its user's ($RACK_GW_USER): umad2sim makes
#                       ./sys-PID there after ibgwd dropped root
#   ha.key              a failover pair's shared key, its user's, 0600
# Everything a rack made is found again by name ("<rack>-*" namespaces, the
# state dir), so `down` works after a crash too.

RACK_RUN_ROOT=${RACK_RUN_ROOT:-/run/ibgw-sim}
RACK_MGMT_NET=198.18.0          # RFC 2544 benchmarking range, only inside the rack's namespaces
RACK_IBSIM_IP=$RACK_MGMT_NET.1
RACK_IBSIM_PORT=7070            # ibsim -l: ctl port; clients use 7071..7080
RACK_IBSIM2_PORT=7170           # subnet B's ibsim (two-subnets.topo); clients 7171..7180
RACK_WAIT_UP=${RACK_WAIT_UP:-30}
# The user and group ibgwd runs as after its start (gateway.user / gateway.group in
# sim/etc/rack-*.yaml), as the package's ibgw on a production box: present on every Debian
# system, so the rack creates no account on the host (docs/simulated-rack.md).
# shellcheck disable=SC2034 # (used by roles.sh)
RACK_GW_USER=nobody
# shellcheck disable=SC2034
RACK_GW_GROUP=nogroup

rack_die() { echo "sim/rack: $*" >&2; exit 1; }
# rack_built OVERRIDE PATH: where a built program or library is: OVERRIDE when set (an
# IBGW_* variable's value), else $IBGW_BUILD/PATH, else build/PATH next to sim/ (the
# default `make` output).
rack_built() {
	if [ -n "$1" ]; then echo "$1"
	elif [ -n "${IBGW_BUILD:-}" ]; then echo "$IBGW_BUILD/$2"
	else echo "$(cd "$RACK_SIM_DIR/.." && pwd)/build/$2"
	fi
}
rack_say() { [ -n "${RACK_QUIET:-}" ] || echo "$*"; }

# rack_init NAME: set the per-rack names.
rack_init() {
	RACK_NAME=$1
	case $RACK_NAME in
	''|*[!a-z0-9]*) rack_die "bad rack name '$RACK_NAME' (lowercase letters and digits only)";;
	esac
	[ ${#RACK_NAME} -le 10 ] || rack_die "rack name '$RACK_NAME' longer than 10 characters"
	RACK_STATE=$RACK_RUN_ROOT/$RACK_NAME
	RACK_MGMT_NS=$RACK_NAME-mgmt
	RACK_ETHSW_NS=$RACK_NAME-ethsw
	RACK_CONSOLE=$RACK_STATE/ibsim.console
	RACK_SOCKNAME=ibgw-$RACK_NAME
	RACK_SUBNET_B=$RACK_STATE/subnet-b   # "FILE PREFIX ROUTES NODE..." of #@subnet-b
}

# Two subnets (#@subnet-b in the topology): subnet B's nodes reach their own ibsim.
rack_has_b() { [ -s "$RACK_SUBNET_B" ]; }
rack_in_b() {   # NODE: is it one of subnet B's nodes?
	rack_has_b && awk -v n="$1" '{ for (i = 4; i <= NF; i++) if ($i == n) f = 1 } END { exit !f }' \
		"$RACK_SUBNET_B"
}
rack_b_field() { awk -v f="$1" '{ print $f }' "$RACK_SUBNET_B"; }   # 1 file, 2 prefix, 3 routes
# The SM node of subnet B: its node with role sm.
rack_b_sm() {
	local node
	for node in $(awk '{ for (i = 4; i <= NF; i++) print $i }' "$RACK_SUBNET_B"); do
		[ "$(rack_node_field "$node" 3)" = sm ] && { echo "$node"; return; }
	done
}

# rack_umad2sim: the libumad2sim every rack process runs on: $IBGW_UMAD2SIM, else the
# build's (sim/umad2sim/: ibsim's, with the fix its README names).
rack_umad2sim() {
	local so
	so=$(rack_built "${IBGW_UMAD2SIM:-}" sim/umad2sim/libumad2sim.so)
	[ -e "$so" ] || rack_die "no $so (make, or set IBGW_BUILD / IBGW_UMAD2SIM)"
	echo "$so"
}

rack_ns() { echo "$RACK_NAME-$1"; }

# --- node table ------------------------------------------------------------

# rack_parse_topology FILE: print "NAME KIND ROLE ETH_ADDR" per #@node line.
rack_parse_topology() {
	awk '$1 == "#@node" { print $2, $3, $4, ($5 == "" ? "-" : $5) }' "$1"
}
rack_topo_key() {   # rack_topo_key FILE KEY -> value of "#@KEY value"
	awk -v k="#@$2" '$1 == k { print $2; exit }' "$1"
}

# Fields of a node from the state's node table.
rack_node_field() {  # NODE FIELD#(1..6)
	awk -v n="$1" -v f="$2" '$1 == n { print $f; found=1 } END { exit !found }' "$RACK_STATE/rack.nodes"
}
rack_nodes() { awk '{ print $1 }' "$RACK_STATE/rack.nodes"; }
rack_nodes_with() {  # ib|eth
	case $1 in
	ib)  awk '$2 ~ /ib/ { print $1 }' "$RACK_STATE/rack.nodes";;
	eth) awk '$2 ~ /eth/ { print $1 }' "$RACK_STATE/rack.nodes";;
	esac
}
rack_is_up() { [ -f "$RACK_STATE/rack.nodes" ] && rack_pid_alive ibsim; }

# --- processes --------------------------------------------------------------

rack_pid() { cat "$RACK_STATE/pids/$1.pid" 2>/dev/null; }
rack_pid_alive() {   # (a zombie is not alive: a process killed under a test's shell)
	local p; p=$(rack_pid "$1")
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null &&
		[ "$(sed 's/.*) //; s/ .*//' "/proc/$p/stat" 2>/dev/null)" != Z ]
}

# rack_spawn LABEL NAMESPACE CWD [VAR=VALUE...] -- CMD...
# Start CMD detached (own session, stdin /dev/null unless RACK_STDIN is set)
# in NAMESPACE, log to logs/LABEL.log (stderr too unless RACK_STDERR names
# another file), pid in pids/LABEL.pid.
rack_spawn() {
	local label=$1 ns=$2 cwd=$3 i
	shift 3
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	local pidf=$RACK_STATE/pids/$label.pid log=$RACK_STATE/logs/$label.log
	rm -f "$pidf"
	echo "$ns" > "$RACK_STATE/pids/$label.ns"
	(
		cd "$cwd" || exit 1
		exec ip netns exec "$ns" setsid env "${envs[@]}" \
			sh -c 'echo $$ > "$0"; exec "$@"' "$pidf" "$@"
	) < "${RACK_STDIN:-/dev/null}" >> "$log" 2>> "${RACK_STDERR:-$log}" &
	for i in $(seq 50); do
		[ -s "$pidf" ] && return 0
		sleep 0.1
	done
	rack_die "$label did not start (see $log)"
}

# rack_stop LABEL [SIGNAL]: signal a started process and wait (<= 5 s) for it.
rack_stop() {
	local label=$1 sig=${2:-TERM} p i
	p=$(rack_pid "$label")
	[ -n "$p" ] || return 0
	kill -"$sig" "$p" 2>/dev/null
	for i in $(seq 50); do
		kill -0 "$p" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
	rm -f "$RACK_STATE/pids/$label.pid" "$RACK_STATE/pids/$label.ns"
}

# --- environment of a node --------------------------------------------------

# rack_node_env NODE: print VAR=VALUE lines a process on NODE needs.
rack_node_env() {
	local node=$1 kind
	kind=$(rack_node_field "$node" 2)
	echo "IBGW_RACK=$RACK_NAME"
	echo "IBGW_RACK_STATE=$RACK_STATE"
	echo "IBGW_NODE=$node"
	echo "IBGW_NODE_DIR=$RACK_STATE/nodes/$node"
	case $kind in *ib*)
		echo "LD_PRELOAD=$(rack_umad2sim)"
		echo "IBSIM_SERVER_NAME=$RACK_IBSIM_IP"
		if rack_in_b "$node"; then
			echo "IBSIM_SERVER_PORT=$RACK_IBSIM2_PORT"
			echo "IBSIM_SOCKNAME=$RACK_SOCKNAME-b"
		else
			echo "IBSIM_SERVER_PORT=$RACK_IBSIM_PORT"
			echo "IBSIM_SOCKNAME=$RACK_SOCKNAME"
		fi
		echo "SIM_HOST=$node"
	esac
	case $(rack_node_field "$node" 3) in gateway)
		echo "IBGW_CTL_SOCKET=$RACK_STATE/nodes/$node/ibgwd.sock"
	esac
}
rack_env_args() { mapfile -t RACK_ENV < "$RACK_STATE/nodes/$1/env"; }

# rack_ib NODE CMD...: run an IB tool on NODE (cwd = node dir, where umad2sim
# makes its ./sys-PID tree), stdout/stderr as the tool's.
rack_ib() {
	local node=$1; shift
	rack_env_args "$node"
	( cd "$RACK_STATE/nodes/$node" &&
	  exec ip netns exec "$(rack_ns "$node")" env "${RACK_ENV[@]}" "$@" )
}

# --- networks ---------------------------------------------------------------

rack_make_infra() {
	ip netns add "$RACK_MGMT_NS" || rack_die "cannot create namespace $RACK_MGMT_NS"
	ip -n "$RACK_MGMT_NS" link set lo up
	ip -n "$RACK_MGMT_NS" link add mgmtbr type bridge
	ip -n "$RACK_MGMT_NS" addr add "$RACK_IBSIM_IP/24" dev mgmtbr
	ip -n "$RACK_MGMT_NS" link set mgmtbr up
	ip netns add "$RACK_ETHSW_NS" || rack_die "cannot create namespace $RACK_ETHSW_NS"
	ip -n "$RACK_ETHSW_NS" link set lo up
	ip -n "$RACK_ETHSW_NS" link add br0 type bridge
	ip -n "$RACK_ETHSW_NS" link set br0 up
}

# rack_make_node NODE KIND INDEX ETH_ADDR
rack_make_node() {
	local node=$1 kind=$2 idx=$3 addr=$4 ns
	ns=$(rack_ns "$node")
	ip netns add "$ns" || rack_die "cannot create namespace $ns"
	ip -n "$ns" link set lo up
	case $kind in *ib*)
		ip link add mgmt0 netns "$ns" type veth peer name "$node" netns "$RACK_MGMT_NS"
		ip -n "$RACK_MGMT_NS" link set "$node" master mgmtbr up
		ip -n "$ns" addr add "$RACK_MGMT_NET.$((10 + idx))/24" dev mgmt0
		ip -n "$ns" link set mgmt0 up
	esac
	case $kind in *eth*)
		ip link add eth0 netns "$ns" address "$(printf '02:1b:00:00:00:%02x' "$((idx + 1))")" \
			type veth peer name "$node" netns "$RACK_ETHSW_NS"
		ip -n "$RACK_ETHSW_NS" link set "$node" master br0 up
		ip -n "$ns" link set eth0 up
		if [ "$addr" != - ]; then
			ip -n "$ns" addr add "$addr" dev eth0
		fi
	esac
}

# --- ibsim ------------------------------------------------------------------

rack_start_ibsim() {
	local topo=$RACK_STATE/topology
	mkfifo "$RACK_CONSOLE"
	# The holder keeps the fifo open read-write: ibsim never sees EOF on its
	# console (at EOF it spins a core at 100%), and `link` can write to it.
	rack_spawn console "$RACK_MGMT_NS" "$RACK_STATE" -- \
		sh -c 'exec 3<>"$0"; exec sleep infinity' "$RACK_CONSOLE"
	# stdout carries only console answers (rack_console reads them); ibsim's
	# warnings go to ibsim.err.
	RACK_STDIN=$RACK_CONSOLE RACK_STDERR=$RACK_STATE/logs/ibsim.err rack_spawn ibsim "$RACK_MGMT_NS" "$RACK_STATE" \
		"IBSIM_SOCKNAME=$RACK_SOCKNAME" -- \
		ibsim -r -l "$RACK_IBSIM_PORT" -s "$topo"
	local i
	for i in $(seq 50); do
		ip netns exec "$RACK_MGMT_NS" ss -uln 2>/dev/null | grep -q ":$RACK_IBSIM_PORT " && return 0
		rack_pid_alive ibsim || break
		sleep 0.1
	done
	rack_die "ibsim did not start: $(tail -n 3 "$RACK_STATE/logs/ibsim.err")"
}

# rack_start_ibsim_b: subnet B's ibsim (label ibsim-b, console ibsim-b.console), on
# the same address, control port RACK_IBSIM2_PORT, with #@subnet-b's net file.
rack_start_ibsim_b() {
	local net i console=$RACK_STATE/ibsim-b.console
	net=$RACK_SIM_DIR/topologies/$(rack_b_field 1)
	[ -f "$net" ] || rack_die "no net file $net for subnet B"
	cp "$net" "$RACK_STATE/topology-b"
	mkfifo "$console"
	rack_spawn console-b "$RACK_MGMT_NS" "$RACK_STATE" -- \
		sh -c 'exec 3<>"$0"; exec sleep infinity' "$console"
	RACK_STDIN=$console RACK_STDERR=$RACK_STATE/logs/ibsim-b.err rack_spawn ibsim-b "$RACK_MGMT_NS" "$RACK_STATE" \
		"IBSIM_SOCKNAME=$RACK_SOCKNAME-b" -- \
		ibsim -r -l "$RACK_IBSIM2_PORT" -s "$RACK_STATE/topology-b"
	for i in $(seq 50); do
		ip netns exec "$RACK_MGMT_NS" ss -uln 2>/dev/null | grep -q ":$RACK_IBSIM2_PORT " && return 0
		rack_pid_alive ibsim-b || break
		sleep 0.1
	done
	rack_die "subnet B's ibsim did not start: $(tail -n 3 "$RACK_STATE/logs/ibsim-b.err")"
}

# rack_console CMD: send one command to ibsim's console and print its answer
# (the lines ibsim logs in reply, up to its next prompt).
rack_console() {
	# RACK_CONSOLE_LABEL=ibsim-b: subnet B's ibsim (two-subnets.topo).
	local label=${RACK_CONSOLE_LABEL:-ibsim} before i
	local log=$RACK_STATE/logs/$label.log console=$RACK_CONSOLE
	[ "$label" = ibsim ] || console=$RACK_STATE/$label.console
	rack_pid_alive "$label" || rack_die "$label is not running in rack $RACK_NAME"
	before=$(stat -c %s "$log")
	printf '%s\n' "$*" > "$console"
	for i in $(seq 30); do
		sleep 0.1
		tail -c +"$((before + 1))" "$log" | grep -q 'sim> ' && break
	done
	tail -c +"$((before + 1))" "$log" | sed -e 's/^sim> *//' | grep -v '^$'
}

# --- OpenSM -----------------------------------------------------------------

# rack_opensm_conf NODE PRIORITY: write the node's opensm.conf from sim/opensm.
# Subnet B's SM gets B's subnet prefix and prefix routes; A's gets the topology's
# #@prefix when it has one.
rack_opensm_conf() {
	local node=$1 prio=$2 dir=$RACK_STATE/nodes/$1 prefix= routes=prefix-routes.conf
	mkdir -p "$dir/cache"
	if rack_in_b "$node"; then
		prefix=$(rack_b_field 2) routes=prefix-routes-b.conf
	else
		prefix=$(rack_topo_key "$RACK_STATE/topology" prefix)
	fi
	awk -v prio="$prio" -v dir="$dir" -v cfg="$RACK_STATE/opensm" -v prefix="$prefix" \
		-v routes="$routes" '
		$1 == "sm_priority"           { print "sm_priority", prio; next }
		$1 == "subnet_prefix" && prefix != "" { print "subnet_prefix", prefix; next }
		$1 == "log_file"              { print "log_file", dir "/opensm.log"; next }
		$1 == "dump_files_dir"        { print "dump_files_dir", dir "/"; next }
		$1 == "partition_config_file" { print "partition_config_file", cfg "/partitions.conf"; next }
		$1 == "prefix_routes_file"    { print "prefix_routes_file", cfg "/" routes; next }
		{ print }' "$RACK_SIM_DIR/opensm/opensm.conf" > "$dir/opensm.conf"
}

# rack_start_opensm NODE PRIORITY
rack_start_opensm() {
	local node=$1 prio=$2 dir=$RACK_STATE/nodes/$1
	rack_pid_alive "opensm-$node" && rack_die "OpenSM already runs on $node"
	rack_opensm_conf "$node" "$prio"
	rack_env_args "$node"
	rack_spawn "opensm-$node" "$(rack_ns "$node")" "$dir" "${RACK_ENV[@]}" \
		"OSM_CACHE_DIR=$dir/cache" "OSM_TMP_DIR=$dir/cache" -- \
		opensm -F "$dir/opensm.conf"
}

# rack_sminfo NODE: sminfo as seen from NODE (the master's state and LID).
rack_sminfo() { rack_ib "$1" sminfo 2>&1; }

# rack_ports_active: 0 when every IB node of the table has an Active port with
# a LID, as OpenSM's view (iblinkinfo from the master's node) shows.
rack_ports_active() {
	local from=$1 out node
	out=$(rack_ib "$from" iblinkinfo 2>/dev/null) || return 1
	for node in $(rack_nodes_with ib); do
		# Only the nodes of FROM's subnet: an SM does not see through a router.
		if rack_in_b "$from"; then rack_in_b "$node" || continue
		else ! rack_in_b "$node" || continue; fi
		echo "$out" | awk -v n="$node" '
			$0 == "CA: " n ":" { want = 1; next }
			want { ok = ($0 ~ /Active\//); exit }
			END { exit !ok }' || return 1
	done
}

# rack_wait_ready NODE SECONDS: wait until sminfo via NODE shows a MASTER
# and every port is Active.
rack_wait_ready() {
	local node=$1 secs=$2 t0=$SECONDS
	while [ $((SECONDS - t0)) -lt "$secs" ]; do
		if rack_sminfo "$node" | grep -q SMINFO_MASTER && rack_ports_active "$node"; then
			return 0
		fi
		sleep 0.5
	done
	return 1
}

# rack_reap_clients: disconnect ibsim client slots whose process is gone.
# On hardware the kernel closes a dead process's umad/issm files (the port
# drops IsSM); ibsim in remote mode only notices a dead client when a write
# to it fails, which for UDP may never happen: the slot (one of 10) stays
# taken and a killed SM keeps IsSM, so SMInfo polls to it are black-holed.
# A client's ibsim "pid" is, in remote mode, the UDP port of its data socket
# in its node's namespace: no such bound port = dead client.
rack_reap_clients() {
	local line id port node n=0
	while read -r line; do
		id=$(echo "$line" | sed -n 's/^Client \([0-9]*\): pid \([0-9]*\) connected at "\([^"]*\)".*/\1 \2 \3/p')
		[ -n "$id" ] || continue
		set -- $id
		id=$1 port=$2 node=$3
		if ! ip netns exec "$(rack_ns "$node")" ss -Huan "sport = :$port" 2>/dev/null | grep -q .; then
			rack_console "X $id" >/dev/null
			echo "reaped ibsim client $id (node $node, port $port): its process is gone"
			n=$((n + 1))
		fi
	done < <(rack_console Attached)
	return 0
}

# rack_detach_process LABEL: detach from ibsim the client(s) of a running
# process, before killing it. ibsim forwards a request for an SM (SMInfo) to
# the SM's client and never answers it itself; umad2sim has no send
# timeouts, so a request forwarded to a dead SM is lost for good and an
# OpenSM waiting for it (a standby taking over) stalls in DISCOVERING forever.
# Detaching first makes ibsim answer such requests with a timeout status, as
# a kernel does once the dead process's files are closed.
rack_detach_process() {
	local label=$1 pid node ports port line id
	pid=$(rack_pid "$label") || return 0
	[ -n "$pid" ] || return 0
	node=$(cat "$RACK_STATE/pids/$label.ns"); node=${node#"$RACK_NAME"-}
	ports=$(ip netns exec "$(rack_ns "$node")" ss -Huanp 2>/dev/null |
		awk -v p="pid=$pid," 'index($0, p) { n = split($4, a, ":"); print a[n] }')
	for port in $ports; do
		while read -r line; do
			id=$(echo "$line" | sed -n "s/^Client \([0-9]*\): pid $port connected.*/\1/p")
			[ -n "$id" ] && rack_console "X $id" >/dev/null
		done < <(rack_console Attached)
	done
}
