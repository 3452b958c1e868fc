# busybox udhcpc for the DHCP relay suites. Source after setting $work.
#
#   udhcpc_script   writes $work/udhcpc.sh, udhcpc's script: on a lease it sets the
#                   address (and the default route via the router option) on the
#                   interface and writes "ADDRESS NETMASK ROUTER" to $work/lease; on
#                   deconfig it flushes the interface's IPv4 addresses
udhcpc_script() {
	cat >"$work/udhcpc.sh" <<'SCRIPT'
#!/bin/sh
case $1 in
deconfig) ip -4 addr flush dev "$interface";;
bound|renew)
	ip -4 addr flush dev "$interface"
	ip addr add "$ip/$subnet" dev "$interface"
	[ -n "${router:-}" ] && ip route replace default via "${router%% *}" dev "$interface"
	echo "$ip $subnet ${router:-}" >"$(dirname "$0")/lease"
	;;
esac
exit 0
SCRIPT
	chmod 0755 "$work/udhcpc.sh"
}
