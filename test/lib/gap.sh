# Traffic gaps for failover tests and benchmarks: a 1 ms ping whose replies carry
# timestamps (ping -D); the gap is the longest time between two consecutive replies.
# Source after setting $work. Needs root (ping -i below 0.2 s).
#
#   gap_start NAME NETNS DST [ARGS...]   start pinging DST from NETNS in the background
#   gap_stop NAME                        stop it; prints "GAP_MS LOST SENT"
#                                        (GAP_MS with one decimal; LOST of SENT requests;
#                                        GAP_MS 99999 when fewer than two replies came:
#                                        the traffic never flowed)
#   gap_window NAME FROM TO              after gap_stop, or while it runs: the longest
#                                        silence (ms, whole) between replies received from
#                                        epoch second FROM to TO, and the requests lost in
#                                        that window: "GAP_MS LOST" (several events in one
#                                        run of a ping, each its own window)
declare -A gap_pids

gap_start() {
	local name=$1 ns=$2 dst=$3
	shift 3
	# Not through a shell function: $! must be ping itself for the SIGINT.
	ip netns exec "$ns" ping -D -n -i 0.001 -W 1 "$@" "$dst" >"$work/gap-$name.txt" 2>&1 &
	gap_pids[$name]=$!
}

gap_stop() {
	local name=$1
	sleep 0.2 # the last replies in flight
	local p=${gap_pids[$name]} i
	kill -INT "$p" 2>/dev/null
	# Polled, not `wait`ed: gap_stop is also called inside $(...), a subshell, where
	# `wait` returns at once (ping is not its child) and the summary was read before
	# ping had written it.
	for ((i = 0; i < 100; i++)); do
		kill -0 "$p" 2>/dev/null || break
		sleep 0.05
	done
	# Without ping's closing summary (ping did not stop within 5 s of SIGINT), the
	# highest icmp_seq answered stands for "sent".
	awk -F'[][]' '
		/bytes from/ { t = $2; n++; if (p != "") { d = t - p; if (d > m) m = d }; p = t
			if (match($0, /icmp_seq=[0-9]+/)) { q = substr($0, RSTART + 9, RLENGTH - 9) + 0
				if (q > seq) seq = q } }
		/transmitted/ { split($0, f, " "); sent = f[1]; got = f[4] }
		END { if (sent == "") { sent = seq; got = n }
			printf "%.1f %d %d\n", n < 2 ? 99999 : m * 1000, sent - got, sent }' "$work/gap-$name.txt"
}

gap_window() {
	awk -F'[][]' -v t0="$2" -v t1="$3" '
		/bytes from/ && $2 >= t0 && $2 <= t1 {
			t = $2; if (p != "" && t - p > m) m = t - p; p = t
			if (match($0, /icmp_seq=[0-9]+/)) { q = substr($0, RSTART + 9, RLENGTH - 9) + 0
				if (lo == "" || q < lo) lo = q; if (q > hi) hi = q; got[q] = 1 } }
		END { for (q in got) k++
			printf "%d %d\n", p == "" ? (t1 - t0) * 1000 : m * 1000 + 0.5, lo == "" ? -1 : hi - lo + 1 - k }' \
		"$work/gap-$1.txt"
}
