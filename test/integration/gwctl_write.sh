#!/usr/bin/env bash
# gwctl's write requests against a real ibgwd with a running Ethernet interface (a veth
# in a namespace of our own): routes and neighbours added, shown, pasted back from the
# show output into add, refused with the reason, kept across a reload; flushes.
#
#   test/integration/gwctl_write.sh [BUILD_DIR]     (root; default $IBGW_BUILD or build)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/daemon_suite.sh"
daemon_suite_init gwctl-write "${1:-}"
ns=ibgwwr$$
daemon_suite_cleanup_hook() { ip netns del "$ns" 2>/dev/null; }

ip netns add "$ns"
ip -n "$ns" link add veth0 type veth peer name veth1
ip -n "$ns" link set veth0 up
ip -n "$ns" link set veth1 up
cat >"$work/ibgwd.yaml" <<EOF
gateway:
  name: wr
control:
  socket: $sock
  readonly_socket: $ro
ethernet_interfaces:
  - name: eth0
    device: veth0
    addresses: [192.168.77.1/24, "fd00:77::1/64"]
neighbours:
  gc_thresh3: 4096
routes:
  - prefix: 10.9.0.0/16
    via: 192.168.77.9
EOF
g() { "$gwctl" -t 5 -S "$sock" "$@"; }
wait_up() {
	for _ in $(seq 100); do
		g show links 2>/dev/null | grep -q "eth0: ether state UP" && return 0
		sleep 0.05
	done
	return 1
}

tap_plan 22
ip netns exec "$ns" "$ibgwd" -d -f "$work/ibgwd.yaml" 2>"$work/log" &
pid=$!
tap_check "the daemon runs with eth0 UP" wait_up

tap_check "route add via a gateway on a dev with a metric" \
	g route add 10.1.0.0/16 via 192.168.77.2 dev eth0 metric 10
line=$(g show routes 10.1.0.0/16)
tap_is "show routes prints it like ip route" "$line" \
	"10.1.0.0/16 via 192.168.77.2 dev eth0 proto static metric 10"
g route del $line >/dev/null
tap_is "the shown line deletes it" "$(g show routes 10.1.0.0/16)" ""
g route add $line
tap_is "and adds it back the same" "$(g show routes 10.1.0.0/16)" "$line"

g route add 10.2.0.0/16 via 192.168.77.3 192.168.77.4 dev eth0
shown=$(g show routes 10.2.0.0/16)
joined=$(printf '%s' "$shown" | tr '\n\t' '  ')
tap_like "an ECMP route shows one nexthop line each" "$shown" \
	$'^10.2.0.0/16 proto static\n\tnexthop via 192.168.77.3 dev eth0 weight 1\n\tnexthop via 192.168.77.4 dev eth0 weight 1$'
g route del $joined && g route add $joined
tap_is "its lines joined paste back into del and add" "$(g show routes 10.2.0.0/16)" "$shown"

out=$(g route add 10.1.0.0/16 via 192.168.77.5 metric 10 2>&1); rc=$?
tap_is "adding an existing prefix and metric is refused (exit 1)" "$rc $out" \
	"1 gwctl: a static route 10.1.0.0/16 metric 10 exists already: delete it first or give another metric"
out=$(g route del 10.1.0.0/16 via 192.168.77.5 metric 10 2>&1); rc=$?
tap_like "del with other next hops than the route's is refused" "$rc $out" \
	"^1 gwctl: the static route 10.1.0.0/16 metric 10 has other next hops"
out=$(g route add 10.3.0.0/16 proto kernel dev eth0 2>&1); rc=$?
tap_like "a kernel route is refused before sending (exit 2)" "$rc $out" \
	"^2 gwctl: route add: proto kernel: only static routes"

tap_check "reload succeeds" g reload
tap_like "operator routes survive a reload, beside the config's" \
	"$(g show routes | tr '\n' '|')" \
	"10.1.0.0/16 via 192.168.77.2 dev eth0 proto static metric 10.*10.9.0.0/16 via 192.168.77.9 dev eth0 proto static"

tap_check "neigh add of a MAC on eth0" g neigh add 192.168.77.50 lladdr 02:00:00:00:00:50 dev eth0
nline=$(g show neighbours dev eth0 | grep '^192.168.77.50 ')
tap_is "shown PERMANENT, as ip neigh would" "$nline" \
	"192.168.77.50 dev eth0 lladdr 02:00:00:00:00:50 PERMANENT"
g neigh del 192.168.77.50 dev eth0 && g neigh add $nline
tap_is "the shown line pastes back into neigh add" \
	"$(g show neighbours dev eth0 | grep '^192.168.77.50 ')" "$nline"
out=$(g neigh add 192.168.77.51 dev eth0 \
	lladdr 80:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1:00:0b 2>&1); rc=$?
tap_is "an IPoIB lladdr on Ethernet is refused (exit 1)" "$rc $out" \
	"1 gwctl: eth0 is Ethernet: lladdr must be a MAC (6 octets), not 20 octets"
out=$(g neigh flush dev eth0 to 192.168.77.0/24; g show neighbours dev eth0 | grep -c PERMANENT)
tap_like "neigh flush says how many went and keeps PERMANENT entries" "$out" \
	$'^eth0: [0-9]+ neighbours flushed\n1$'
out=$("$gwctl" -t 5 -S "$work/ro.sock" route del 10.1.0.0/16 metric 10 2>&1); rc=$?
tap_like "the read-only socket refuses changes" "$rc $out" "^1 gwctl: this socket is read-only"

# A table larger than one streamed piece (about 64 KiB of records; 4,000 routes are some
# 500 KB on the wire): every route arrives once, in prefix order, in text and in JSON.
{
	cat "$work/ibgwd.yaml"
	for i in $(seq 0 3999); do
		printf '  - prefix: 10.%d.%d.0/24\n    via: 192.168.77.9\n' $((64 + i / 256)) $((i % 256))
	done
} >"$work/big.yaml"
cp "$work/big.yaml" "$work/ibgwd.yaml"
g reload
many=$(g show routes | grep -E '^10\.(6[4-9]|7[0-9])\.[0-9]+\.0/24 via 192\.168\.77\.9 ')
tap_is "show routes streams 4,000 config routes once each, in prefix order" \
	"$(printf '%s\n' "$many" | wc -l) $(printf '%s\n' "$many" | sort -u -t. -k2,2n -k3,3n | cmp -s - <(printf '%s\n' "$many") && echo sorted)" \
	"4000 sorted"
tap_is "show routes -j gives the same routes" \
	"$(g -j show routes | jq length)" \
	"$(g show routes | grep -vc '^[[:space:]]')"

# Neighbours too: 1,500 PERMANENT entries are some 150 KB of JSON, three pieces.
for i in $(seq 1 1500); do
	g neigh add "fd00:77::1:$(printf %x "$i")" dev eth0 \
		lladdr "02:00:00:00:$(printf '%02x:%02x' $((i / 256)) $((i % 256)))" || break
done
many=$(g show neighbours dev eth0 | grep -E '^fd00:77::1:[0-9a-f]+ dev eth0 lladdr 02:00:00:00:[0-9a-f:]+ PERMANENT$')
tap_is "show neighbours streams 1,500 of them once each" \
	"$(printf '%s\n' "$many" | wc -l) $(printf '%s\n' "$many" | sort -u | wc -l)" "1500 1500"
tap_is "show neighbours -j gives the same entries" \
	"$(g -j show neighbours | jq '([.[] | select(.dst | startswith("fd00:77::1:"))] | length), ([.[].dst] | unique | length)' | paste -sd' ')" \
	"1500 $(g show neighbours | wc -l)"

kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
wait "$pid" 2>/dev/null
pid=
tap_done
