#!/usr/bin/env bash
# IPoIB datagram mode between IB hosts of a real rack: ibsim + OpenSM (joins,
# PathRecords), the simulated fabric (packets), and ibgw-host on ibhost1..3 (the IPoIB
# link in a host role, each driving a TAP in its namespace where the kernel does its own
# ARP, ND, ping and TCP). Shows: the links come up after the broadcast join with the
# group's MTU; the kernel's ping over IPv4, IPv6 global and IPv6 link-local; iperf3 TCP;
# the neighbour dump (REACHABLE with the peer's QPN+GID); a capture that tshark decodes
# to IPoIB ARP (hardware type 32, 20-octet addresses) and ICMP with valid checksums; the
# TAP's TSO (the kernel's super-frames cut by ibgw-host and posted in chains; data intact
# and nothing lost to a full send queue while the fabric stalls; --offloads off); the
# link's own resolution with a neighbour queue overflow counted; port down/up (rejoin);
# partitions (P_Key 0x8001 vs 0xffff).
# Needs root, ibsim, opensm, tshark, iperf3, ethtool, python3; IBGW_BUILD (test/run sets it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
. "$top/test/lib/intact.sh"
suite_init ipo
rackcmd() { R "$@"; }

tap_plan 35
suite_need_built "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm tshark iperf3 ethtool python3
suite_ibhost_helpers
restart_host() {   # NODE PKEY ADDR...
	local n=$1 p=$2
	shift 2
	rack_stop "ibgw-host-$n" TERM
	role_start_ibhost_node "$n" "$p" datagram "$@" >/dev/null
}

# --- up ------------------------------------------------------------------------
# rack.topo runs ibhost1/ibhost2 in connected mode (test/integration/ipoib_cm.sh); this
# suite is datagram mode's: the same rack with every IB host in datagram mode.
topo=$work/rack-datagram.topo
sed 's/^\(#@ipoib [^ ]* [^ ]*\) connected /\1 datagram /' "$top/sim/topologies/rack.topo" >"$topo"
out=$(rackcmd up "$topo" 2>&1)
if [ $? -ne 0 ] || ! rack_is_up; then
	tap_not_ok "rack up with IB hosts" "$out"
	exit 1
fi
ok=1
for n in ibhost1 ibhost2 ibhost3; do wait_link $n up 20 || ok=; done
if [ -n "$ok" ]; then tap_ok "ibgw-host on ibhost1..3: links up after the broadcast join"
else tap_not_ok "links up" "$(for n in ibhost1 ibhost2 ibhost3; do tail -n 5 "$RACK_STATE/logs/ibgw-host-$n.log"; done)"; fi
tap_like "sim/rack status shows the IB hosts" "$(rackcmd status)" "ipoib +ibhost1 +P_Key 0xffff datagram .*link up qpn 0x[0-9a-f]+ mtu 2044"
tap_like "TAP MTU = IB MTU 2048 - 4" "$(in_ns ibhost1 ip link show ib0)" "mtu 2044 "
for n in ibhost1 ibhost2 ibhost3; do wait_dad $n; done
ll2=$(in_ns ibhost2 ip -6 -o addr show dev ib0 scope link | awk '{ print $4 }' | cut -d/ -f1)
guid2=$(dump ibhost2 link | sed -n 's/.*hwaddr \([0-9a-f:]*\).*/\1/p' | cut -d: -f13-20 | tr -d :)
tap_is "IPv6 link-local of ibhost2 is its port GUID's (U/L bit flipped)" "$ll2" \
	"$(printf 'fe80::%x:%x:%x:%x' $((0x${guid2:0:4} ^ 0x0200)) $((0x${guid2:4:4})) $((0x${guid2:8:4})) $((0x${guid2:12:4})))"

# --- capture + pings -------------------------------------------------------------
cap=$work/ipoib.pcap
rackcmd capture "$cap" >/dev/null 2>&1
tap_check "ping IPv4 ibhost1 -> ibhost2 (kernel's ping, kernel's ARP)" in_ns ibhost1 ping -c 3 -i 0.2 -W 2 10.10.0.12
tap_check "ping IPv6 global ibhost1 -> ibhost2 (kernel's ND)" in_ns ibhost1 ping -c 3 -i 0.2 -W 2 fd00:10::12
tap_check "ping IPv6 link-local ibhost1 -> ibhost2" in_ns ibhost1 ping -c 3 -i 0.2 -W 2 "$ll2%ib0"
tap_check "ping IPv4 ibhost2 -> ibhost3" in_ns ibhost2 ping -c 2 -i 0.2 -W 2 10.10.0.13
rackcmd capture stop >/dev/null 2>&1
sleep 0.5

arp=$(tshark -r "$cap" -Y 'arp' -T fields -e arp.hw.type -e arp.hw.size -e arp.opcode 2>/dev/null | sort -u)
tap_like "tshark: IPoIB ARP request with hardware type 32, 20-octet addresses" "$arp" "^32	20	1$"
tap_like "tshark: IPoIB ARP reply with hardware type 32, 20-octet addresses" "$arp" "^32	20	2$"
icmp=$(tshark -o ip.check_checksum:TRUE -r "$cap" -Y 'icmp && erf.flags.rxe == 0' -T fields \
	-e ip.checksum.status -e icmp.checksum.status 2>/dev/null | sort | uniq -c)
if echo "$icmp" | grep -q '1	1$' && ! echo "$icmp" | grep -vq '1	1$'; then
	tap_ok "tshark: every ICMP packet has good IP and ICMP checksums ($(echo "$icmp" | awk '{ print $1 }') packets)"
else
	tap_not_ok "tshark: ICMP checksums good" "$icmp"
fi
nd=$(tshark -r "$cap" -Y 'icmpv6.type == 135 && icmpv6.opt.type == 1' -T fields -e icmpv6.opt.length 2>/dev/null | sort -u)
tap_is "tshark: NS carries the 24-octet IPoIB link-layer option (length 3)" "$nd" "3"

# --- neighbours ----------------------------------------------------------------
qpn2=$(dump ibhost2 link | awk '{ print $10 }')
gid2=$(in_ns ibhost2 ip -6 -o addr show dev ib0 scope link >/dev/null; printf 'fe80::%x:%x:%x:%x' $((0x${guid2:0:4})) $((0x${guid2:4:4})) $((0x${guid2:8:4})) $((0x${guid2:12:4})))
n1=$(dump ibhost1 neigh)
tap_like "ibhost1's link: 10.10.0.12 REACHABLE with ibhost2's QPN and GID" "$n1" \
	"^neigh 10\.10\.0\.12 REACHABLE .*qpn $qpn2 gid $gid2 dlid [0-9]+ sl 0 mtu 2044 mode UD usable 1"
tap_like "ibhost1's link: fd00:10::12 known with ibhost2's QPN and GID" "$n1" \
	"^neigh fd00:10::12 (REACHABLE|STALE|DELAY|PROBE) .*qpn $qpn2 gid $gid2"
tap_like "the kernel sees ibhost2 at its GUID-derived MAC" "$(in_ns ibhost1 ip neigh show 10.10.0.12)" \
	"lladdr ([0-9a-f]{2}:)03:00:a1:00:09"

# --- TCP -------------------------------------------------------------------------
# Datagram mode offers the kernel TSO and checksum offload on the TAP, as the Linux IPoIB
# driver on an HCA with UD LSO: the kernel hands ibgw-host super-frames, which it cuts
# into datagrams of the link's MTU (docs/simulated-rack.md, "The IB host's TAP").
tap_like "datagram mode: the TAP offers the kernel TSO (ethtool -k ib0)" \
	"$(in_ns ibhost1 ethtool -k ib0)" "tcp-segmentation-offload: on"
tso0=$(stat_field ibhost1 tso_frames)
in_ns ibhost2 iperf3 -s -1 -D >/dev/null 2>&1
sleep 0.5
ip_out=$(in_ns ibhost1 iperf3 -c 10.10.0.12 -t 5 -f m 2>&1)
rate=$(echo "$ip_out" | awk '/receiver/ { print $7, $8 }')
if [ -n "$rate" ]; then tap_ok "iperf3 TCP ibhost1 -> ibhost2 completes: $rate"
else tap_not_ok "iperf3 TCP" "$ip_out"; fi
echo "# iperf3 datagram mode: $rate"
tso=$(stat_field ibhost1 tso_frames)
segs=$(stat_field ibhost1 tso_segs)
refused=$(stat_field ibhost1 offload_refused)
chains=$(stat_field ibhost1 tx_chains)
echo "# ibhost1 cut $((tso - tso0)) super-frames from its kernel ($segs segments in all, $chains posts)"
tap_like "ibgw-host cut the kernel's super-frames into datagrams (tso_frames grew, 2+ segments each, none refused)" \
	"$((tso - tso0)) $((segs >= 2 * tso)) $refused" "^[1-9][0-9]* 1 0$"
tap_is "... and posted them in chains (fewer than one post per 4 segments)" "$((chains * 4 < segs))" 1

# The fabric stalls again and again during two streams (SIGSTOP 0.1 s in every 0.2 s): the
# port's ring to it fills, UD sends wait in the send queue uncompleted (vsim_qp.c,
# send_ud), and the TAP stops being read while fewer slots than a super-frame's
# segments are free; it wakes at half. Nothing is lost to a full queue (tx_post drops
# stay 0): the kernel holds the rest, as a NIC driver's stopped queue makes it do.
dd if=/dev/urandom of="$work/blob" bs=1M count=64 status=none
blob_sum=$(sha256sum <"$work/blob" | cut -d' ' -f1)
IBGW_HOST_ARGS="--send-depth 160" restart_host ibhost1 0xffff 10.10.0.11/24 fd00:10::11/64
wait_link ibhost1 up 20
wait_dad ibhost1
fpid=$(rack_pid fabric)
rm -f "$work/stall.end"
(for _ in $(seq 100); do
	[ -e "$work/stall.end" ] && break
	kill -STOP "$fpid"; sleep 0.1; kill -CONT "$fpid"; sleep 0.1
done) &
stall=$!
tap_is "send queue of 160, the fabric stalling: 64 MiB TCP ibhost1 -> ibhost2 arrive intact (SHA-256)" \
	"$(intact "$rack-ibhost2" "$rack-ibhost1" 10.10.0.12 "$work/blob")" "$blob_sum"
# TCP's window is smaller than the port's ring (1024 packets): only a sender that does
# not wait for acknowledgements fills it during a stall. 2 s of UDP at 3 Gbit/s.
in_ns ibhost2 iperf3 -s -1 -D >/dev/null 2>&1
sleep 0.5
in_ns ibhost1 timeout 20 iperf3 -c 10.10.0.12 -u -b 3G -t 2 >/dev/null 2>&1
touch "$work/stall.end"
wait "$stall"
kill -CONT "$fpid" 2>/dev/null
stops=$(stat_field ibhost1 tx_stops)
post=$(stat_field ibhost1 tx_post)
resyncs=$(stat_field ibhost1 tx_resyncs)
echo "# ibhost1's TAP queue stopped $stops times"
tap_like "... the TAP's queue stopped (tx_stops grew), no send lost to a full queue (tx_post 0), each woken by completions (tx_resyncs 0)" \
	"$stops $post $resyncs" "^[1-9][0-9]* 0 0$"
tap_check "... and it reads again: ping ibhost1 -> ibhost2" in_ns ibhost1 ping -c 2 -i 0.2 -W 2 10.10.0.12
IBGW_HOST_ARGS="--offloads off" restart_host ibhost1 0xffff 10.10.0.11/24 fd00:10::11/64
wait_link ibhost1 up 20
tap_like "--offloads off: the TAP offers no TSO" "$(in_ns ibhost1 ethtool -k ib0)" \
	"tcp-segmentation-offload: off"
tap_like "... and ibgw-host says so (dump stats: offloads off)" "$(dump ibhost1 stats)" \
	"^tap .* offloads off tso_frames 0 "
restart_host ibhost1 0xffff 10.10.0.11/24 fd00:10::11/64
wait_link ibhost1 up 20
wait_dad ibhost1

# --- the link's own resolution, queue overflow -------------------------------------
before=$(stat_field ibhost1 unres_discards)
x=$(in_ns ibhost1 "$host" --ctl "$RACK_STATE/nodes/ibhost1/ibgw-host.sock" xmit-ip 10.10.0.13 10)
tap_like "link resolves 10.10.0.13 itself: 10 packets queued meanwhile" "$x" "queued 10"
sleep 1.5
after=$(stat_field ibhost1 unres_discards)
tap_is "neighbour queue overflow counted (10 - unres_qlen 3 = 7)" "$((after - before))" 7
tap_like "resolved by the link's ARP: 10.10.0.13 REACHABLE" "$(dump ibhost1 neigh)" "^neigh 10\.10\.0\.13 REACHABLE .*usable 1"

# --- port down / up --------------------------------------------------------------
rackcmd link ibhost2 down >/dev/null
if wait_link ibhost2 down 5; then tap_ok "port down: ibhost2's link goes down"
else tap_not_ok "port down: link down" "$(dump ibhost2 link)"; fi
tap_like "port down: the TAP loses its carrier" "$(in_ns ibhost2 ip link show ib0)" "NO-CARRIER"
rackcmd link ibhost2 up >/dev/null
if wait_link ibhost2 up 20; then tap_ok "port up: rejoined, link up again"
else tap_not_ok "port up: link up" "$(tail -n 8 "$RACK_STATE/logs/ibgw-host-ibhost2.log")"; fi
tap_check "after the rejoin: ping IPv4 ibhost1 -> ibhost2" in_ns ibhost1 ping -c 2 -i 0.3 -w 8 10.10.0.12

# --- partitions ------------------------------------------------------------------
restart_host ibhost3 0x8001 10.10.0.13/24 fd00:10::13/64
restart_host ibhost2 0x8001 10.10.0.12/24 fd00:10::12/64
wait_link ibhost3 up 20 && wait_link ibhost2 up 20
tap_like "ibhost2 and ibhost3 on P_Key 0x8001 (their own broadcast group)" "$(dump ibhost3 link)" "state up pkey 0x8001"
wait_dad ibhost2; wait_dad ibhost3
in_ns ibhost1 ip neigh flush dev ib0
tap_check "same partition 0x8001: ping ibhost2 -> ibhost3" in_ns ibhost2 ping -c 2 -i 0.3 -w 6 10.10.0.13
if in_ns ibhost1 ping -c 2 -i 0.3 -w 3 10.10.0.13 >/dev/null 2>&1; then
	tap_not_ok "different partitions: ibhost1 (0xffff) cannot reach ibhost3 (0x8001)"
else
	tap_ok "different partitions: ibhost1 (0xffff) cannot reach ibhost3 (0x8001)"
fi
if in_ns ibhost1 ping -6 -c 2 -i 0.3 -w 3 fd00:10::13 >/dev/null 2>&1; then
	tap_not_ok "different partitions: not over IPv6 either"
else
	tap_ok "different partitions: not over IPv6 either"
fi

tap_done
