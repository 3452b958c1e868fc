# An Ethernet host on the rack's switch whose frames are in VLAN 20, for the tenant suites.
# The kernels here have no 802.1Q (CONFIG_VLAN_8021Q unset): tc BPF programs on the
# host's veth tag what it sends and untag (and keep only) VLAN 20
# (test/tools/bpf/vlan_host.bpf.c, built with the tools). Needs $rack, $build, $work,
# $RACK_ETHSW_NS and rack_suite.sh's helpers; the caller's cleanup deletes "$rack-NODE".
#
#   vlan_host_need_built             a check that fails the suite when the program is missing
#   vlan_host_up NODE ADDR4 GW4 [ADDR6 GW6]
#                                    namespace "$rack-NODE", its eth0 on br0, the addresses
#                                    and default routes given
vlan_host_need_built() {
	[ -f "$build/tools/vlan_host.bpf.o" ] ||
		{ tap_not_ok "built: $build/tools/vlan_host.bpf.o" "make unit-tests"; exit 1; }
}

vlan_host_up() {
	local n=$1 ns=$rack-$1 d
	ip netns add "$ns"
	ip link add "$n" netns "$RACK_ETHSW_NS" type veth peer name eth0 netns "$ns"
	ip -n "$RACK_ETHSW_NS" link set "$n" master br0 up
	ip -n "$ns" link set lo up
	ip -n "$ns" link set eth0 up
	veth_tx_csum_off "$ns" eth0
	in_ns "$n" tc qdisc add dev eth0 clsact
	for d in egress ingress; do
		in_ns "$n" tc filter add dev eth0 "$d" bpf da obj "$build/tools/vlan_host.bpf.o" \
			sec "tc/$d"
	done
	ip -n "$ns" addr add "$2" dev eth0
	ip -n "$ns" route add default via "$3"
	[ $# -ge 5 ] || return 0
	ip -n "$ns" -6 addr add "$4" dev eth0 nodad
	ip -n "$ns" -6 route add default via "$5"
}
