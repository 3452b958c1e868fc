# A - R - B: three namespaces joined by veth pairs, for suites that run ibgwd in R
# between two Ethernet interfaces (gso.sh, fanout.sh). Source after tap.sh and
# daemon_suite.sh (it needs $top), then:
#
#   arb_init NAME PLAN CMD...   # daemon_suite_init NAME; namespace names $A $R $B, removed
#                         # at exit; tap_plan PLAN; bails out without root, a CMD or ibgwd
#   arb_up A R B X Y      # namespaces A, R, B; A's eth0 10.X.0.2/24, fd00:X::2/64 on
#                         # veth ra in R, B's eth0 10.Y.0.2/24, fd00:Y::2/64 on rb; the
#                         # hosts route to each other via .1 / ::1 (ibgwd's); R's kernel
#                         # has no address, no IPv6, no forwarding; default offloads
#   arb_config FILE X Y [GATEWAY_LINE...]   # an ibgwd config for R: ra and rb with the
#                         # .1 / ::1 addresses, extra lines under gateway:; both with
#                         # backend $ARB_BACKEND when it is set (af_packet, af_xdp)
#                         # and mtu $ARB_MTU (the config's default, 1500, when unset)
#   arb_start FILE        # ibgwd -d in R ($pid: not in a subshell), waits for its socket
#                         # and both links up; returns 1 if it does not answer
arb_init() {
	local c
	daemon_suite_init "$1"
	A=$1-a-$$ R=$1-r-$$ B=$1-b-$$
	daemon_suite_cleanup_hook() { for n in $A $R $B; do ip netns del "$n" 2>/dev/null; done; }
	tap_plan "$2"
	shift 2
	[ "$(id -u)" = 0 ] || { echo "Bail out! needs root"; exit 1; }
	for c in "$@"; do
		command -v "$c" >/dev/null || { echo "Bail out! needs $c"; exit 1; }
	done
	[ -x "$ibgwd" ] || { echo "Bail out! no $ibgwd (make)"; exit 1; }
}

arb_up() {
	local a=$1 r=$2 b=$3 x=$4 y=$5 n d
	for n in "$a" "$r" "$b"; do ip netns add "$n"; ip -n "$n" link set lo up; done
	ip link add eth0 netns "$a" type veth peer name ra netns "$r"
	ip link add eth0 netns "$b" type veth peer name rb netns "$r"
	ip netns exec "$r" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
		net.ipv6.conf.default.disable_ipv6=1
	for d in ra rb; do
		ip netns exec "$r" sysctl -qw "net.ipv6.conf.$d.disable_ipv6=1"
		ip -n "$r" link set "$d" up
	done
	ip -n "$a" addr add "10.$x.0.2/24" dev eth0
	ip -n "$a" addr add "fd00:$x::2/64" dev eth0 nodad
	ip -n "$b" addr add "10.$y.0.2/24" dev eth0
	ip -n "$b" addr add "fd00:$y::2/64" dev eth0 nodad
	for n in "$a" "$b"; do ip -n "$n" link set eth0 up; done
	ip -n "$a" route add "10.$y.0.0/24" via "10.$x.0.1"
	ip -n "$a" -6 route add "fd00:$y::/64" via "fd00:$x::1"
	ip -n "$b" route add "10.$x.0.0/24" via "10.$y.0.1"
	ip -n "$b" -6 route add "fd00:$x::/64" via "fd00:$y::1"
}

arb_config() {
	local f=$1 x=$2 y=$3 l
	shift 3
	{
		echo "gateway:"
		echo "  name: arb"
		for l in "$@"; do echo "  $l"; done
		cat <<EOC
control:
  socket: $sock
logging:
  level: info
ethernet_interfaces:
  - name: ra
    device: ra
    backend: ${ARB_BACKEND:-af_packet}
    addresses: [10.$x.0.1/24, "fd00:$x::1/64"]
    mtu: ${ARB_MTU:-1500}
  - name: rb
    device: rb
    backend: ${ARB_BACKEND:-af_packet}
    addresses: [10.$y.0.1/24, "fd00:$y::1/64"]
    mtu: ${ARB_MTU:-1500}
EOC
	} >"$f"
}

arb_start() {
	ip netns exec "$R" "$ibgwd" -d -f "$1" 2>"$work/log" &
	pid=$!
	wait_socket || return 1
	for _ in $(seq 50); do
		[ "$("$gwctl" -S "$sock" show links 2>/dev/null | grep -c 'state UP')" = 2 ] && return 0
		sleep 0.1
	done
	return 0
}
