# simport on a rack's nodes, for the fabric suites (fabric.sh, routers.sh). Source after
# setting $top, $rack, $work and $simport (the built test/tools/simport):
#
#   sp NODE ARGS...       # simport ARGS in NODE's namespace
#   rx NAME NODE ARGS...  # a receiver in the background, output in $work/NAME; waits
#                         # until it is attached and sets RX_QPN / RX_LID
#   rx_wait NAME          # waits for that receiver; its exit status
sp() { local node=$1; shift; "$top/sim/rack" exec "$node" --name "$rack" -- "$simport" "$@"; }
rx() {
	local name=$1 node=$2 i
	shift 2
	sp "$node" "$@" recv >"$work/$name" 2>&1 &
	eval "pid_$name=$!"
	for i in $(seq 100); do
		grep -q '^ready' "$work/$name" 2>/dev/null && break
		sleep 0.05
	done
	RX_QPN=$(awk '/^ready/ { print $3 }' "$work/$name")
	RX_LID=$(awk '/^ready/ { print $5 }' "$work/$name")
}
rx_wait() { local p; eval "p=\$pid_$1"; wait "$p"; }
