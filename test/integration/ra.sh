#!/usr/bin/env bash
# Router advertisements on the simulated rack (gateway/dp_ra.h): ibgwd on gw1 with
# router_advertisements on ib0 and eth0, and hosts given no IPv6 route at all
# (IBGW_GW_MODE=none). Shows, with what a host's kernel and an operator see:
#   - the Ethernet host's kernel takes the gateway as its default router (proto ra, via
#     the gateway's EUI-64 link-local), forms an address in fd00:20::/64 from the
#     prefix option, and takes the RA's hop limit and MTU option;
#   - the IB host's kernel (ibgw-host's TAP: the RA crossed IPoIB with the 20-octet
#     link-layer option, rewritten by the host role) takes it as its default router via
#     the link's GUID-based link-local address;
#   - with nothing but that, ping6 crosses both ways;
#   - rdisc6 solicits on each side (to ff02::2: on IPoIB through the all-routers MGID)
#     and prints the gateway's answer; gwctl show ra (text and -j) counts it;
#   - SIGTERM: the final RA (router lifetime 0) takes the default route away from both
#     hosts at once, not after the router lifetime.
# Needs root, ibsim, opensm, jq, rdisc6 (Debian's ndisc6); IBGW_BUILD (test/run sets it).
# Run under the rack lock: flock /tmp/ibgw-rack.lock bash test/integration/ra.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
suite_init rat
rackcmd() { R "$@"; }

tap_plan 25
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm jq rdisc6
suite_ibhost_helpers

# The rack's gateway config with router advertisements on both sides: fast intervals
# (the kernel takes the first RA anyway), a router lifetime long enough that only a
# final RA can explain a default route going away within seconds, and on eth0 a hop
# limit and an MTU option the host's kernel must take over.
sed -e '/^ipoib_links:/,$d' "$top/sim/etc/rack-gw1.yaml" >"$work/gw.yaml"
cat >>"$work/gw.yaml" <<'EOF'
ipoib_links:
  - name: ib0
    backend: verbs
    device: gw1
    port: 1
    pkey: 0xffff
    mode: datagram
    mtu: 2044
    addresses:
      - 10.10.0.1/24
      - fd00:10::1/64
    router_advertisements:
      max_interval_ms: 4000
      router_lifetime_s: 600
      mtu: 2044          # given: IPoIB sends none by default (docs/router-advertisements.md)

ethernet_interfaces:
  - name: eth0
    device: eth0
    mtu: 1500
    addresses:
      - 10.20.0.1/24
      - fd00:20::1/64
    router_advertisements:
      max_interval_ms: 4000
      router_lifetime_s: 600
      hop_limit: 61
      mtu: 1400
EOF
chmod 0644 "$work/gw.yaml"

# Hosts: an RA is taken only with forwarding off, or accept_ra 2 (a fresh namespace
# has forwarding off; said here so the test does not depend on it).
accept_ra() {   # NODE DEV
	if [ "$(in_ns "$1" sysctl -n "net.ipv6.conf.$2.forwarding" 2>/dev/null)" = 1 ]; then
		in_ns "$1" sysctl -qw "net.ipv6.conf.$2.accept_ra=2"
	fi
}
default_route() {   # NODE DEV: the kernel's IPv6 default route there, or ""
	in_ns "$1" ip -6 route show default dev "$2" 2>/dev/null | head -n1
}
wait_default() {   # NODE DEV SECONDS [absent]: until there is one (or none)
	local i r
	for i in $(seq $(($3 * 10))); do
		r=$(default_route "$1" "$2")
		if [ "${4:-}" = absent ]; then [ -z "$r" ] && return 0
		else [ -n "$r" ] && return 0
		fi
		sleep 0.1
	done
	return 1
}
slaac_addr() {   # NODE DEV PREFIX: a global address formed in PREFIX, not tentative
	in_ns "$1" ip -6 -o addr show dev "$2" scope global -tentative 2>/dev/null |
		awk -v p="$3" '$4 ~ "^" p { sub("/.*", "", $4); print $4; exit }'
}
rs_sent() {   # NODE DEV: router solicitations the host's kernel counted out of DEV
	# (its own and rdisc6's alike), so that a check counts what the host really sent:
	# CI saw rs_received up by 2 in rdisc6's window, a second RS from the host (its
	# kernel solicits when its link-local address leaves DAD, even after an RA came).
	in_ns "$1" awk '$1 == "Icmp6OutRouterSolicits" { print $2 }' "/proc/net/dev_snmp6/$2"
}
rs_counted() {   # DEV GW-BEFORE NODE HOST-BEFORE JQ-REST: "GW-DELTA HOST-DELTA REST",
	# after waiting up to 2 s for the gateway to have counted all the host sent
	local i g h
	for i in $(seq 20); do
		g=$(( $(ra_field "$1" .rs_received) - $2 ))
		h=$(( $(rs_sent "$3" "$1") - $4 ))
		[ "$g" = "$h" ] && break
		sleep 0.1
	done
	echo "$g $h $(ra_field "$1" "$5")"
}
ra_json() { gwctl -j show ra; }
ra_field() {   # DEV JQ-EXPR
	ra_json | jq -r --arg d "$1" ".[] | select(.dev == \$d) | $2"
}

t0=$(date +%s)
if ! IBGW_GW_CONFIG=$work/gw.yaml IBGW_GW_MODE=none rackcmd up >"$work/up.log" 2>&1; then
	tap_not_ok "rack up with router advertisements on gw1" "$(tail -5 "$work/up.log")"
	exit 1
fi
tap_ok "rack up with router advertisements on gw1 (hosts without IPv6 routes)"
accept_ra ethhost1 eth0
accept_ra ibhost3 ib0
wait_up ib0 20

# --- the gateway's side: gwctl ------------------------------------------------------------
for i in $(seq 50); do
	[ "$(ra_field eth0 .state)/$(ra_field ib0 .state)" = advertising/advertising ] && break
	sleep 0.1
done
tap_is "show ra -j: eth0 advertising" "$(ra_field eth0 .state)" advertising
tap_is "show ra -j: ib0 advertising" "$(ra_field ib0 .state)" advertising
eth_ll=$(ra_field eth0 .source)
ib_ll=$(ra_field ib0 .source)
tap_like "eth0's source is the EUI-64 link-local of gw1's eth0 MAC" "$eth_ll" '^fe80::[0-9a-f:]*ff:fe[0-9a-f:]*$'
tap_like "ib0's source is the link's GUID-based link-local" "$ib_ll" '^fe80::'
tap_is "eth0 advertises its interface's prefix, autonomous" \
	"$(ra_field eth0 '.prefixes | map("\(.prefix) \(.on_link) \(.autonomous)") | join(",")')" \
	"fd00:20::/64 true true"
tap_is "ib0 advertises fd00:10::/64 with MTU option 2044" \
	"$(ra_field ib0 '"\(.prefixes[0].prefix) \(.mtu)"')" "fd00:10::/64 2044"

# --- the Ethernet host's kernel -------------------------------------------------------------
wait_default ethhost1 eth0 10
r=$(default_route ethhost1 eth0)
tap_like "ethhost1: default route from the RA (proto ra) via the gateway's link-local" \
	"$r" "^default via $eth_ll( dev eth0)? proto ra "
for i in $(seq 50); do
	eaddr=$(slaac_addr ethhost1 eth0 fd00:20:)
	[ -n "$eaddr" ] && break
	sleep 0.1
done
tap_like "ethhost1: an address formed in fd00:20::/64 (SLAAC from the prefix option)" \
	"$eaddr" '^fd00:20::'
tap_is "ethhost1: hop limit from the RA" "$(in_ns ethhost1 sysctl -n net.ipv6.conf.eth0.hop_limit)" 61
tap_is "ethhost1: IPv6 MTU from the RA's MTU option" "$(in_ns ethhost1 sysctl -n net.ipv6.conf.eth0.mtu)" 1400

# --- the IB host's kernel ---------------------------------------------------------------
wait_default ibhost3 ib0 10
r=$(default_route ibhost3 ib0)
tap_like "ibhost3: default route from the RA over IPoIB, via ib0's link-local" \
	"$r" "^default via $ib_ll( dev ib0)? proto ra "
tap_like "ibhost3 had no route to fd00:20::/64 but the default" \
	"$(in_ns ibhost3 ip -6 route get fd00:20::99 2>&1)" "via $ib_ll dev ib0"

# --- across, with no static route ----------------------------------------------------
tap_is "ping6 Ethernet host (SLAAC address) -> IB host, routes from RAs only" \
	"$(pings ethhost1 fd00:10::13)" 3
tap_is "ping6 IB host -> Ethernet host's SLAAC address" "$(pings ibhost3 "$eaddr")" 3

# --- solicitations: rdisc6 on both sides ------------------------------------------------
rs_eth=$(ra_field eth0 .rs_received)
sent_eth=$(rs_sent ethhost1 eth0)
# rdisc6 waits 4 s for the answer (with 2 s, CI saw it send its RS again: rs_received 2).
out=$(in_ns ethhost1 timeout 10 rdisc6 -1 -w 4000 eth0 2>&1)
tap_like "rdisc6 on ethhost1: the gateway answers (prefix, MTU, lifetime)" \
	"$(echo "$out" | tr -s ' \n' ' ')" \
	"Hop limit : 61 .*Router lifetime : 600 .*MTU : 1400 bytes .*Prefix : fd00:20::/64 .*from $eth_ll"
c=$(rs_counted eth0 "$rs_eth" ethhost1 "$sent_eth" '.rs_answered_unicast >= 1')
tap_like "show ra: eth0 counted each solicitation ethhost1 sent (rdisc6's among them), answered unicast" \
	"$c" '^([1-9][0-9]*) \1 true$'
# rdisc6's RS carries no link-layer address option, and an IPoIB frame has no source
# hardware address to take instead: the gateway answers with a multicast RA, no sooner
# than 3 s after its last one (MIN_DELAY_BETWEEN_RAS) plus 0..500 ms. rdisc6 waits 4 s
# (with 2 s, CI saw it send its RS again before the answer came).
rs_ib=$(ra_field ib0 .rs_received)
mc_ib=$(ra_field ib0 .rs_answered_multicast)
sent_ib=$(rs_sent ibhost3 ib0)
t_rs=$(date +%s%N)
out=$(in_ns ibhost3 timeout 10 rdisc6 -1 -w 4000 ib0 2>&1)
echo "# rdisc6 on ibhost3 answered after $(( ($(date +%s%N) - t_rs) / 1000000 )) ms"
tap_like "rdisc6 on ibhost3: RS to ff02::2 over IPoIB answered (prefix, MTU 2044)" \
	"$(echo "$out" | tr -s ' \n' ' ')" "Router lifetime : 600 .*MTU : 2044 bytes .*Prefix : fd00:10::/64 .*from $ib_ll"
c=$(rs_counted ib0 "$rs_ib" ibhost3 "$sent_ib" ".rs_answered_multicast - $mc_ib")
tap_like "show ra: ib0 counted each solicitation ibhost3 sent (they reached the slow path), answered multicast" \
	"$c" '^([1-9][0-9]*) \1 \1$'
tap_like "show ra (text): eth0 line, prefix and counters" "$(gwctl show ra | tr '\n' ' ')" \
	"eth0 advertising from $eth_ll lifetime 600s interval 3000-4000ms hop_limit 61 mtu 1400 .* prefix fd00:20::/64 on-link autonomous valid 2592000s preferred 604800s .*ra sent [1-9]"
n=$(ra_field eth0 .ra_sent)
sleep 4.2
tap_like "unsolicited RAs keep coming (at most max_interval_ms apart)" \
	"$(( $(ra_field eth0 .ra_sent) - n ))" '^[1-9]'

# --- the gateway stops: final RAs -----------------------------------------------------
gateway_stop gw1
tap_ok "ibgwd on gw1 stopped (SIGTERM)"
wait_default ethhost1 eth0 3 absent
tap_is "ethhost1: the default route is gone at once (final RA, lifetime 0)" \
	"$(default_route ethhost1 eth0)" ""
wait_default ibhost3 ib0 3 absent
tap_is "ibhost3: the default route is gone at once too" "$(default_route ibhost3 ib0)" ""
tap_like "ibgwd logged the final RAs" "$(cat "$RACK_STATE/logs/ibgwd-gw1.log")" \
	"eth0: router advertisements: final one sent"
t=$(( $(date +%s) - t0 ))
echo "# the suite ran in ${t} s"
tap_done
