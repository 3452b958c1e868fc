#!/usr/bin/env bash
# An IPoIB link served by every worker (issue 13), on the simulated rack: gw1 runs
# rack-gw1.yaml with two workers, so its IB port opens two queues; the link's UD QP is a
# receive QP whose datagrams the HCA (the verbs shim's RSS: docs/verbs-sim.md) spreads
# over one work queue per queue by a hash of the IP flow, and a send QP per queue with the
# receive QP's number as its source (docs/ib-port.md). Shows, as a user sees it:
#   - the port opened with two queues (ibgwd's log, gwctl show links);
#   - 64 UDP flows from an IB host to an Ethernet host, 300 numbered datagrams each: every
#     datagram arrives and every flow in order (none of its datagrams overtakes another),
#     IPv4 and IPv6;
#   - both workers received from the IB side (show stats, per_worker, before and after);
#   - 64 flows the other way, Ethernet -> IB (both workers send into the IB port, each
#     through its own queue): all of them, in order;
#   - TCP both ways with 16 MiB: every byte intact;
#   - flows started toward a next hop the gateway must resolve first (neighbour flushed),
#     both ways: in order, the hold of the later packets used, and lifted afterwards;
#   - a reload to one worker and back to two: the IB queues are dealt out again and
#     flows stay in order.
# Connected mode over two queues (RC connections and an SRQ per queue) runs in
# gateway.sh, whose connected-mode gateway has two workers.
# Needs root, ibsim, opensm, jq, python3; IBGW_BUILD (test/run sets it). No timed
# assertions.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
. "$top/test/lib/flows.sh"
. "$top/test/lib/intact.sh"
suite_init ibq

tap_plan 28
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm jq python3
suite_ibhost_helpers
sed 's/^  workers: 1$/  workers: 2/' "$top/sim/etc/rack-gw1.yaml" >"$work/gw1.yaml"
if ! IBGW_GW_CONFIG=$work/gw1.yaml R up >"$work/up.log" 2>&1; then
	tap_not_ok "rack up with ibgwd on gw1 (two workers)" "$(tail -5 "$work/up.log")"
	exit 1
fi
tap_ok "rack up with ibgwd on gw1 (two workers)"
wait_up ib0 20
wait_up eth0 5
tap_like "the IB port opened with two queues" \
	"$(grep -h 'verbs: gw1:1 open' "$RACK_STATE/logs/ibgwd-gw1.log")" \
	"open: [0-9]+ buffers of [0-9]+ bytes, 2 queues"
tap_like "show links: ib0's port has two queues" "$(gwctl show links | grep 'link/infiniband')" \
	" queues 2$"
tap_is "ping IB host -> Ethernet host" "$(pings ibhost1 10.20.0.11)" 3
wait_dad ibhost1 # its IPv6 address usable (duplicate address detection done)
tap_is "ping6 IB host -> Ethernet host" "$(pings ibhost1 -6 fd00:20::11)" 3
# The other way too: the gateway resolves the IB host's addresses (it answered from its
# SLAAC address above), so the flows below find their neighbours resolved (resolution
# parks unres_qlen packets and drops the rest, as Linux does).
tap_is "ping Ethernet host -> IB host" "$(pings ethhost1 10.10.0.11)" 3
tap_is "ping6 Ethernet host -> IB host" "$(pings ethhost1 -6 fd00:10::11)" 3

# rx_packets of each worker, "0=N 1=M".
workers() { gwctl -j show stats | jq -r '.[0].per_worker | to_entries | map("\(.key)=\(.value.rx_packets)") | join(" ")'; }
rx_of() { echo "$1" | tr ' ' '\n' | awk -F= -v w="$2" '$1 == w { print $2 }'; }

# The simulated fabric's UD has no flow control and a python sender outruns the
# gateway's receive queues in bursts: 2 ms after each flow's 20 datagrams.
pause=0.002
# all_flows LABEL SRC DST ADDR: 64 flows from node SRC to ADDR on node DST arrive whole
# and in order.
all_flows() {
	local got
	got=$(flows "$rack-$2" "$rack-$3" "$4" "$pause")
	echo "# $1: $got (of 19200)"
	tap_like "$1: every datagram of the 64 flows arrives, none reordered" "$got" \
		"^received 19200 flows 64 reordered 0 last 299$"
}
w0=$(workers)
all_flows "IB -> Ethernet, IPv4" ibhost1 ethhost1 10.20.0.11
all_flows "IB -> Ethernet, IPv6" ibhost1 ethhost1 fd00:20::11
w1=$(workers)

d0=$(($(rx_of "$w1" 0) - $(rx_of "$w0" 0)))
d1=$(($(rx_of "$w1" 1) - $(rx_of "$w0" 1)))
echo "# received per worker during the IB -> Ethernet flows: 0: $d0, 1: $d1"
if [ "$d0" -gt 2000 ] && [ "$d1" -gt 2000 ]; then
	tap_ok "both workers received from the IB port (each more than 2000 of the datagrams)"
else
	tap_not_ok "both workers received from the IB port (each more than 2000 of the datagrams)" \
		"worker 0: $d0, worker 1: $d1"
fi

all_flows "Ethernet -> IB, IPv4" ethhost1 ibhost1 10.10.0.11
all_flows "Ethernet -> IB, IPv6" ethhost1 ibhost1 fd00:10::11

head -c 16M /dev/urandom >"$work/blob"
blob_sum=$(sha256sum <"$work/blob" | cut -d' ' -f1)
tap_is "TCP IB host -> Ethernet host: 16 MiB arrive intact" \
	"$(intact "$rack-ethhost1" "$rack-ibhost1" 10.20.0.11 "$work/blob")" "$blob_sum"
tap_is "TCP Ethernet host -> IB host (IPv6): 16 MiB arrive intact" \
	"$(intact "$rack-ibhost1" "$rack-ethhost1" fd00:10::11 "$work/blob")" "$blob_sum"

# A flow that starts while its next hop is unresolved (the neighbour flushed first): the
# first datagrams wait for the resolution on the control thread and those that follow
# them while they are out go there too (unresolved_held), so none overtakes another
# (docs/dataplane.md, "Order across a resolution"). Three flows each way; the hold must
# have been used, and lifted: a flow to the neighbours now resolved is not held at all.
held() { gwctl -j show stats | jq '.[0].unresolved_held'; }
in_order='^received [0-9]+ flows 1 reordered 0 last [0-9]+$'
run_flow() {   # LABEL SRC DST DEV|resolved ADDR: one_flow's line in got (DEV's neighbours
	# flushed first)
	[ "$4" = resolved ] || gwctl neigh flush dev "$4" >/dev/null
	got=$(one_flow "$rack-$2" "$rack-$3" "$5")
	echo "# $1: $got (of 3000)"
}
resolving_flow() {
	run_flow "$@"
	tap_like "$1: arrives in order" "$got" "$in_order"
}
held0=$(held)
for i in 1 2 3; do
	resolving_flow "Ethernet -> IB, unresolved ($i)" ethhost1 ibhost1 ib0 10.10.0.11
	resolving_flow "IB -> Ethernet, unresolved ($i)" ibhost1 ethhost1 eth0 10.20.0.11
done
held1=$(held)
# A packet is held only if it arrives between the neighbour's publish and the return of
# the parked ones, and CI once saw three rounds miss that window (unresolved_held 0 -> 0,
# every flow in order): up to five more rounds until it is used, each flow of them in
# order too.
more=0 more_bad=
more_flow() {   # as resolving_flow, an order failure kept in more_bad
	run_flow "$@"
	echo "$got" | grep -Eq "$in_order" || more_bad="$more_bad [$1: $got]"
}
while [ "$held1" -le "$held0" ] && [ "$more" -lt 5 ]; do
	more=$((more + 1))
	more_flow "Ethernet -> IB, unresolved (more $more)" ethhost1 ibhost1 ib0 10.10.0.11
	more_flow "IB -> Ethernet, unresolved (more $more)" ibhost1 ethhost1 eth0 10.20.0.11
	held1=$(held)
done
echo "# unresolved_held: $held0 -> $held1 ($more more rounds)"
if [ "$held1" -gt "$held0" ] && [ -z "$more_bad" ]; then
	tap_ok "packets that followed unresolved ones were sent after them (unresolved_held grew)"
else
	tap_not_ok "packets that followed unresolved ones were sent after them (unresolved_held grew)" \
		"unresolved_held $held0 -> $held1 after $more more rounds${more_bad:+; out of order:$more_bad}" \
		"$(gwctl -j show stats | jq -c '.[0] | {punts, punt_classes, drops}')"
fi
resolving_flow "Ethernet -> IB, resolved" ethhost1 ibhost1 resolved 10.10.0.11
resolving_flow "IB -> Ethernet, resolved" ibhost1 ethhost1 resolved 10.20.0.11
tap_is "the hold is lifted: flows to resolved neighbours are not held (unresolved_held)" \
	"$(held)" "$held1"

# A reload to one worker deals both queues to worker 0, and back to two.
sed -i 's/^  workers: 2$/  workers: 1/' "$work/gw1.yaml"
tap_check "reload to one worker" gwctl reload
all_flows "one worker, IB -> Ethernet" ibhost1 ethhost1 10.20.0.11
sed -i 's/^  workers: 1$/  workers: 2/' "$work/gw1.yaml"
tap_check "reload back to two workers" gwctl reload
all_flows "two workers again, IB -> Ethernet" ibhost1 ethhost1 10.20.0.11
