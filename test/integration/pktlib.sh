#!/usr/bin/env bash
# The packet library judged by a real Linux stack and by tshark. A namespace pkt-<pid>
# is one Ethernet host (10.9.0.1/24, 2001:db8:9::1/64) on a veth whose other end is
# served by test/tools/pkt_inject: the kernel's own ARP requests and Neighbor
# Solicitations are parsed by pkt/arp and pkt/nd, decided by pkt/proxy and answered with
# our replies; the kernel's oversized packets get our ICMP fragmentation-needed and
# ICMPv6 Packet Too Big (pkt/icmp). The kernel must take them: `ip neigh` shows the
# proxied addresses at the gateway's MAC, `ip route get` shows the learned PMTU; and
# tshark decodes every frame we sent with checksum verification on and no expert
# warning. Needs root, iproute2, ping, tshark; $IBGW_BUILD/tools/pkt_inject.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
build=${IBGW_BUILD:-$top/build}
tool=$build/tools/pkt_inject
ns=pkt-$$
hv=pkt-h$$
gv=pkt-g$$
gwmac=02:00:5e:00:09:fe
work=$(mktemp -d /tmp/ibgw-pktlib.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	ip link del "$gv" 2>/dev/null
	ip netns del "$ns" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

tap_plan 15
if [ "$(id -u)" -ne 0 ] || ! command -v tshark >/dev/null || [ ! -x "$tool" ]; then
	tap_not_ok "root, tshark and $tool are there" "uid $(id -u); make builds test/tools/"
	exit 1
fi
tap_check "namespace and veth" sh -c "
	ip netns add $ns &&
	ip link add $hv type veth peer name $gv &&
	ip link set $hv netns $ns &&
	sysctl -qw net.ipv6.conf.$gv.disable_ipv6=1 &&
	ip link set $gv up &&
	ip -n $ns link set lo up &&
	ip -n $ns addr add 10.9.0.1/24 dev $hv &&
	ip -n $ns addr add 2001:db8:9::1/64 dev $hv nodad &&
	ip -n $ns link set $hv up"

"$tool" serve "$gv" --mac $gwmac --b4 10.9.0.20 --b6 2001:db8:9::20 --mtu 1280 \
	--src4 10.9.0.254 --src6 2001:db8:9::fe --seconds 40 --pcap "$work/sent.pcap" \
	>"$work/log" 2>&1 &
pid=$!
for _ in $(seq 50); do grep -q ready "$work/log" && break; sleep 0.1; done

# ARP: the kernel asks for 10.9.0.20 (lives on side B): answered with our MAC.
ip netns exec "$ns" ping -c 1 -W 2 10.9.0.20 >/dev/null 2>&1
tap_like "kernel took our proxied ARP reply" "$(ip -n "$ns" neigh show 10.9.0.20)" \
	"lladdr $gwmac (REACHABLE|STALE|DELAY)"
# 10.9.0.5 is unknown: no answer, so the kernel's entry fails.
ip netns exec "$ns" ping -c 1 -W 1 10.9.0.5 >/dev/null 2>&1
tap_like "no answer for an unknown address" "$(ip -n "$ns" neigh show 10.9.0.5)" \
	"(FAILED|INCOMPLETE)"
tap_like "proxy decisions counted by reason" "$(tr '\n' ' ' <"$work/log")" \
	"arp request -> proxy_answered .*arp request -> proxy_target_unknown"

# ND: the kernel solicits 2001:db8:9::20: answered with an NA carrying our MAC.
ip netns exec "$ns" ping -6 -c 1 -W 2 2001:db8:9::20 >/dev/null 2>&1
tap_like "kernel took our proxied NA" "$(ip -n "$ns" -6 neigh show 2001:db8:9::20)" \
	"lladdr $gwmac (REACHABLE|STALE|DELAY)"

# PMTU, IPv4: a 1428-octet DF ping gets fragmentation needed, MTU 1280.
ip netns exec "$ns" ping -M do -s 1400 -c 1 -W 1 10.9.0.20 >/dev/null 2>&1
tap_like "kernel learned the PMTU from our frag-needed" \
	"$(ip -n "$ns" route get 10.9.0.20)" "mtu 1280"
# PMTU, IPv6: a 1448-octet ping gets Packet Too Big, MTU 1280.
ip netns exec "$ns" ping -6 -s 1400 -c 1 -W 1 2001:db8:9::20 >/dev/null 2>&1
tap_like "kernel learned the PMTU from our Packet Too Big" \
	"$(ip -n "$ns" -6 route get 2001:db8:9::20)" "mtu 1280"
tap_like "IPv6 route cache holds it" "$(ip -n "$ns" -6 route show cache)" \
	"2001:db8:9::20.*mtu 1280"

kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
pid=

# tshark: every frame we sent decodes, checksums verified.
fields="-e frame.protocols -e arp.opcode -e arp.src.hw_mac -e arp.src.proto_ipv4 \
	-e ip.checksum.status -e icmp.type -e icmp.code -e icmp.mtu -e icmp.checksum.status \
	-e icmpv6.type -e icmpv6.checksum.status -e icmpv6.mtu -e icmpv6.nd.na.target_address \
	-e icmpv6.opt.linkaddr -e _ws.expert.severity"
tshark -r "$work/sent.pcap" -o ip.check_checksum:TRUE -T fields -E separator='|' \
	-E occurrence=f $fields >"$work/dec" 2>"$work/tshark.err"
tap_like "tshark: ARP reply 10.9.0.20 is-at our MAC" "$(cat "$work/dec")" \
	"arp\|2\|$gwmac\|10\.9\.0\.20\|"
tap_like "tshark: NA for 2001:db8:9::20 with our MAC, checksum good" "$(cat "$work/dec")" \
	"icmpv6\|+136\|1\|\|2001:db8:9::20\|$gwmac\|"
tap_like "tshark: frag needed, MTU 1280, checksums good" "$(cat "$work/dec")" \
	"\|1\|3\|4\|1280\|1\|"
tap_like "tshark: Packet Too Big, MTU 1280, checksum good" "$(cat "$work/dec")" \
	"\|2\|1\|1280\|"
tap_is "tshark: no expert warnings or errors" \
	"$(cut -d'|' -f15 "$work/dec" | grep -cE '[0-9]')" "0"
tap_is "tshark: nothing on stderr" "$(grep -v 'Running as user' "$work/tshark.err")" ""
tap_is "every frame sent was decoded" "$(wc -l <"$work/dec")" \
	"$(grep -cE 'proxy_answered|-> ok' "$work/log")"
tap_done
