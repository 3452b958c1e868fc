# Floods with bystanders, for test/integration/hostile.sh and bench/hostile.sh: one host
# sends test/tools/flood at a router while a bystander pings a host behind it every
# 20 ms, IPv4 and IPv6. Source after setting $work and $build.
#
#   flood_run NAME RUN_FLOODER RUN_BYSTANDER DST4 DST6 ROUTER_MAC RATE COUNT FLOOD-ARGS...
#       RUN_FLOODER / RUN_BYSTANDER: a command prefix that runs in that host's namespace
#       (e.g. "ip netns exec ns1"). Pings DST4 and DST6 from the bystander while COUNT
#       frames go out at RATE per second from the flooder's eth0 to ROUTER_MAC. Prints
#       "SENT LOSS4 LOSS6": the flood tool's line ("sent N in S s (P pps)") and each
#       bystander's lost share in thousandths.
#   flood_loss_permille FILE   the lost share of a ping's requests, in thousandths

# flood_rack_checks NAME FLOOD-ARGS... (on the simulated rack, test/lib/tap.sh loaded):
#       the flood from ethhost1 to $gw_mac while the bystander ethhost2 pings ibhost3
#       (10.10.0.13, fd00:10::13) through the gateway; three checks: the flood went out
#       whole, and each family's bystander lost at most $MAX_LOSS_PERMILLE. Needs in_ns,
#       $RATE, $COUNT, $gw_mac.
flood_rack_checks() {
	local name=$1 r sent l4 l6
	shift
	r=$(flood_run "$name" "in_ns ethhost1" "in_ns ethhost2" 10.10.0.13 fd00:10::13 "$gw_mac" \
		"$RATE" "$COUNT" "$@")
	IFS='|' read -r sent l4 l6 <<<"$r"
	tap_like "$name: the flood went out ($COUNT frames at $RATE/s)" "$sent" "^sent $COUNT in "
	echo "# $name: $sent; bystander loss IPv4 $((l4 / 10)).$((l4 % 10))%, IPv6 $((l6 / 10)).$((l6 % 10))%"
	tap_is "$name: the IPv4 bystander loses at most 1% ($l4 per mille)" \
		"$([ "$l4" -le "$MAX_LOSS_PERMILLE" ] && echo yes || echo "$l4 per mille")" yes
	tap_is "$name: the IPv6 bystander loses at most 1% ($l6 per mille)" \
		"$([ "$l6" -le "$MAX_LOSS_PERMILLE" ] && echo yes || echo "$l6 per mille")" yes
}

flood_loss_permille() {
	awk '/transmitted/ { split($0, f, " "); s = f[1]; r = f[4] }
		END { if (s == "" || s == 0) print 1000; else printf "%d\n", (s - r) * 1000 / s }' "$1"
}

flood_run() {
	local name=$1 run_flooder=$2 run_bystander=$3 dst4=$4 dst6=$5 mac=$6 rate=$7 count=$8
	shift 8
	local n=$(((count / rate + 2) * 50)) out p4 p6
	$run_bystander ping -n -i 0.02 -W 1 -c "$n" "$dst4" >"$work/by4-$name.txt" 2>&1 &
	p4=$!
	$run_bystander ping -6 -n -i 0.02 -W 1 -c "$n" "$dst6" >"$work/by6-$name.txt" 2>&1 &
	p6=$!
	sleep 0.5
	out=$($run_flooder timeout $((count / rate * 3 + 10)) "$build/tools/flood" eth0 \
		--gw-mac "$mac" --count "$count" --rate "$rate" "$@" 2>&1 | tail -1)
	wait "$p4" "$p6"
	echo "$out|$(flood_loss_permille "$work/by4-$name.txt")|$(flood_loss_permille "$work/by6-$name.txt")"
}
