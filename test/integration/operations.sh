#!/usr/bin/env bash
# Operating the gateway on the simulated rack (issue 7): ibgwd on gw1 with
# sim/etc/rack-gw1.yaml (kernel_routes: export table 100, import table 101).
#   kernel routes  the IB-side prefixes (IPv4 and IPv6) are in gw1's kernel table 100 as
#                  proto 250 placeholders, the Ethernet side's are not; a route put in
#                  table 101 shows in `gwctl show routes` as proto kernel and carries
#                  traffic from an IB host to an address behind an Ethernet host; its
#                  deletion is followed; BIRD next to the gateway announces table 100
#                  over eBGP to a BIRD on the Ethernet side, which learns the IB subnet
#   live reload    a 100-per-second ping from an Ethernet host to an IB host runs
#                  through seven reloads: an Ethernet interface added (and forwarding at
#                  once), an IPoIB link on another P_Key added (joins, forwards), the
#                  workers 1 -> 3 -> 2 (threads started and stopped, ports handed over,
#                  every port still forwarding), a second address on eth0, both new
#                  ones removed again with the workers back to 1, a file with errors
#                  (refused with file:line:column, nothing changed); the ping loses
#                  nothing; worker_cpus re-pins the running worker; a reload that turns
#                  the import off drops the imported routes
# Needs root, ibsim, opensm, jq; bird2 for the BGP part.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
suite_init ops
suite_cleanup_hook() {
	[ -f "$work/bird-g.pid" ] && kill "$(cat "$work/bird-g.pid")" 2>/dev/null
	[ -f "$work/bird-e.pid" ] && kill "$(cat "$work/bird-e.pid")" 2>/dev/null
	ip netns del "$rack-ethx" 2>/dev/null
}

tap_plan 34
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm jq
suite_ibhost_helpers
wait_link() { # LINK STATE SECONDS: until show links says LINK is in STATE ("gone": absent)
	local i out
	for i in $(seq $(($3 * 10))); do
		out=$(gwctl show links 2>/dev/null)
		if [ "$2" = gone ]; then
			echo "$out" | grep -q "^$1: " || return 0
		else
			echo "$out" | grep -q "^$1: .* state $2" && return 0
		fi
		sleep 0.1
	done
	return 1
}
until_eq() { # SECONDS WANT CMD...: CMD's output once it equals WANT (or the last one)
	local t=$1 want=$2 out i
	shift 2
	for i in $(seq $((t * 10))); do
		out=$("$@" 2>/dev/null)
		[ "$out" = "$want" ] && break
		sleep 0.1
	done
	echo "$out"
}

if ! R up >"$work/up.log" 2>&1; then
	tap_not_ok "rack up with ibgwd on gw1" "$(tail -5 "$work/up.log")"
	exit 1
fi
wait_link ib0 UP 20
tap_is "rack up: ib0 forwards (Ethernet host -> IB host)" "$(pings ethhost1 10.10.0.13)" 3

# --- kernel routes ---------------------------------------------------------------------
exported() { in_ns gw1 ip route show table 100 proto 250; in_ns gw1 ip -6 route show table 100 proto 250; }
n_exported() { exported | grep -c unreachable; }
until_eq 5 2 n_exported >/dev/null
out=$(exported)
tap_like "export: the IPv4 IB subnet in table 100 as a proto 250 placeholder" "$out" \
	"^unreachable 10\.10\.0\.0/24"
tap_like "export: the IPv6 IB subnet too" "$out" "unreachable fd00:10::/64"
tap_is "export: nothing of the Ethernet side, no host routes of the gateway" \
	"$(echo "$out" | grep -cE '10\.20\.|fd00:20:|10\.10\.0\.1 |fd00:10::1 ')" 0

in_ns ethhost1 ip addr add 10.77.0.1/32 dev lo
in_ns ibhost3 ip route replace 10.77.0.0/16 via 10.10.0.1 dev ib0
in_ns gw1 ip route add 10.77.0.0/16 via 10.20.0.11 dev eth0 onlink table 101
routes77() { gwctl show routes 10.77.0.0/16; }
n77() { routes77 | grep -c 'proto kernel_import'; }
until_eq 5 1 n77 >/dev/null
tap_like "import: table 101's route shows in gwctl as proto kernel_import" "$(routes77)" \
	"^10\.77\.0\.0/16 via 10\.20\.0\.11 dev eth0 proto kernel_import"
tap_is "import: an IB host reaches an address behind the Ethernet host through it" \
	"$(pings ibhost3 10.77.0.1)" 3
tap_is "import: imported routes are not exported again" \
	"$(in_ns gw1 ip route show table 100 | grep -c 10.77)" 0
in_ns gw1 ip route del 10.77.0.0/16 table 101
tap_is "import: a deletion in table 101 removes the route" "$(until_eq 5 "" routes77)" ""
in_ns gw1 ip route add 10.77.0.0/16 via 10.20.0.11 dev eth0 onlink table 101
until_eq 5 1 n77 >/dev/null

if command -v bird >/dev/null; then
	# A peering link between the box's kernel and the Ethernet host's (the gateway's
	# own eth0 belongs to ibgwd, not to the node's kernel).
	ip link add bgp0 netns "$rack-gw1" type veth peer name bgp0 netns "$rack-ethhost1"
	in_ns gw1 ip addr add 192.0.2.1/30 dev bgp0
	in_ns ethhost1 ip addr add 192.0.2.2/30 dev bgp0
	in_ns gw1 ip link set bgp0 up
	in_ns ethhost1 ip link set bgp0 up
	cat >"$work/bird-g.conf" <<EOF
router id 192.0.2.1;
protocol device { }
protocol kernel ibgw4 { kernel table 100; learn; ipv4 { import where krt_source = 250; export none; }; }
protocol bgp tor { local 192.0.2.1 as 65001; neighbor 192.0.2.2 as 65002; connect delay time 1;
	ipv4 { import none; export where krt_source = 250; }; }
EOF
	cat >"$work/bird-e.conf" <<EOF
router id 192.0.2.2;
protocol device { }
protocol bgp gw1 { local 192.0.2.2 as 65002; neighbor 192.0.2.1 as 65001; connect delay time 1;
	ipv4 { import all; export none; }; }
EOF
	in_ns gw1 bird -c "$work/bird-g.conf" -s "$work/bird-g.ctl" -P "$work/bird-g.pid"
	in_ns ethhost1 bird -c "$work/bird-e.conf" -s "$work/bird-e.ctl" -P "$work/bird-e.pid"
	learned() { in_ns ethhost1 birdc -s "$work/bird-e.ctl" show route 10.10.0.0/24 | grep -c 'via 192.0.2.1'; }
	tap_is "BIRD: the Ethernet side learns the IB subnet by BGP from the gateway's table 100" \
		"$(until_eq 60 1 learned)" 1
	tap_is "BIRD: and no Ethernet-side prefix back" \
		"$(in_ns ethhost1 birdc -s "$work/bird-e.ctl" show route 10.20.0.0/24 | grep -c 'via 192.0.2.1')" 0
else
	tap_ok "BIRD: # SKIP bird2 is not installed"
	tap_ok "BIRD: # SKIP bird2 is not installed"
fi

# --- live reload under traffic ----------------------------------------------------------
# ethx: a third Ethernet namespace behind a new interface eth1; gw2 is an IB host on
# P_Key 0x8001 for a new link ib1.
ip netns add "$rack-ethx"
ip link add eth1 netns "$rack-gw1" type veth peer name eth0 netns "$rack-ethx"
in_ns gw1 ip link set eth1 up
in_ns gw1 sysctl -qw net.ipv6.conf.eth1.disable_ipv6=1
ip -n "$rack-ethx" link set lo up
ip -n "$rack-ethx" link set eth0 up
ip -n "$rack-ethx" addr add 10.21.0.11/24 dev eth0
ip -n "$rack-ethx" route add default via 10.21.0.1
veth_tx_csum_off "$rack-ethx" eth0
role_start_ibhost_node gw2 0x8001 datagram 10.11.0.12/24 >/dev/null 2>&1
in_ns gw2 ip route replace default via 10.11.0.1 dev ib0 2>/dev/null
in_ns ibhost3 ip route replace 10.21.0.0/24 via 10.10.0.1 dev ib0

# The daemon rereads the file it started with: restart it once on a copy we may edit.
cp "$top/sim/etc/rack-gw1.yaml" "$work/gw.yaml"
gateway_stop gw1
gateway_start gw1 "$work/gw.yaml" >/dev/null 2>&1
wait_link ib0 UP 20
base=$(cat "$work/gw.yaml")
with_eth1='
  - name: eth1
    device: eth1
    addresses: [10.21.0.1/24]'
with_ib1='  - name: ib1
    backend: verbs
    device: gw1
    pkey: 0x8001
    addresses: [10.11.0.1/24]
'
write_cfg() { # [eth1] [ib1] [addr2] [noimport] [pin] [bad] [workers=N]
	local y=$base a
	case " $* " in *" pin "*) y=${y/  workers: 1/  workers: 1
  worker_cpus: [$pin_cpu]} ;; esac
	for a; do
		case $a in workers=*) y=${y/  workers: 1/  workers: ${a#workers=}} ;; esac
	done
	case " $* " in *" ib1 "*) y=${y/ethernet_interfaces:/$with_ib1
ethernet_interfaces:} ;; esac
	case " $* " in *" addr2 "*) y=${y/      - 10.20.0.1\/24/      - 10.20.0.1\/24
      - 10.20.0.254\/24} ;; esac
	case " $* " in *" noimport "*) y=${y/  import_table: 101/  import_table: 0} ;; esac
	case " $* " in *" eth1 "*) y="$y$with_eth1" ;; esac
	case " $* " in *" bad "*) y="$y
  - name: eth9
    mtu: 99999" ;; esac
	echo "$y" >"$work/gw.yaml"
}
# Not through in_ns: $! must be ping itself (ip netns exec execs it) for the SIGINT.
ip netns exec "$rack-ethhost1" ping -n -i 0.01 -W 1 10.10.0.13 >"$work/flood.txt" 2>&1 &
flood=$!
sleep 1

write_cfg eth1
gwctl reload
wait_link eth1 UP 10
tap_is "reload: a new Ethernet interface comes up and forwards (ethx -> IB host)" \
	"$(pings ethx 10.10.0.13)" 3

write_cfg eth1 ib1
gwctl reload
wait_link ib1 UP 30
tap_like "reload: a new IPoIB link (P_Key 0x8001) joins and comes up" \
	"$(gwctl show links | grep '^ib1:')" "state UP"
tap_is "reload: ... and forwards (the new interface's host -> IB host on 0x8001)" \
	"$(pings ethx 10.11.0.12)" 3

# The number of workers, live: ports change threads under the ping.
fwd_threads() { # the forwarding threads' names, sorted
	local t
	for t in /proc/"$(rack_pid ibgwd-gw1)"/task/*; do
		cat "$t/comm" 2>/dev/null
	done | grep '^ibgw-fwd' | sort | tr '\n' ' '
}
write_cfg eth1 ib1 workers=3
gwctl reload
tap_is "reload: workers 1 -> 3 starts two forwarding threads" "$(fwd_threads)" \
	"ibgw-fwd0 ibgw-fwd1 ibgw-fwd2 "
tap_is "reload: ... show stats says 3" "$(gwctl -j show stats | jq -r '.[0].workers')" 3
tap_is "reload: ... every port forwards on its new thread (eth0, eth1 -> ib0; eth1 -> ib1)" \
	"$(pings ethhost1 10.10.0.13) $(pings ethx 10.10.0.13) $(pings ethx 10.11.0.12)" "3 3 3"
write_cfg eth1 ib1 workers=2
gwctl reload
tap_is "reload: workers 3 -> 2 stops one" "$(fwd_threads)" "ibgw-fwd0 ibgw-fwd1 "
tap_is "reload: ... every port still forwards" \
	"$(pings ethhost1 10.10.0.13) $(pings ethx 10.10.0.13) $(pings ethx 10.11.0.12)" "3 3 3"

write_cfg eth1 ib1 addr2 workers=2
gwctl reload
tap_is "reload: a second address on eth0 answers at once" "$(pings ethhost1 10.20.0.254)" 3

write_cfg
gwctl reload
wait_link eth1 gone 10
wait_link ib1 gone 10
tap_is "reload: the removed interface and link are gone from show links" \
	"$(gwctl show links | grep -cE '^(eth1|ib1):')" 0
tap_is "reload: ... and the workers back to one" "$(fwd_threads)" "ibgw-fwd0 "
tap_is "reload: the removed address no longer answers" "$(pings ethhost1 10.20.0.254)" 0
tap_is "reload: a removed interface's subnet is no longer routed" \
	"$(gwctl show routes 10.21.0.0/24)" ""

write_cfg bad
err=$(gwctl reload 2>&1)
rc=$?
tap_is "reload with errors: gwctl exits 1" "$rc" 1
tap_like "reload with errors: each error with file:line:column" "$err" \
	"gw.yaml:[0-9]+:[0-9]+: ethernet_interfaces\[1\]\.mtu: 99999 is out of range"
tap_is "reload with errors: show version counts the failure" \
	"$(gwctl -j show version | jq -r '.[0].reload_failures')" 1
tap_is "reload with errors: the running config still forwards" "$(pings ethhost1 10.10.0.13)" 3

alive=no
kill -INT "$flood" 2>/dev/null && alive=yes
wait "$flood"
sent=$(awk '/transmitted/ { print $1 }' "$work/flood.txt")
# Lost: the requests up to the last one answered that got no reply. The summary's
# "transmitted - received" also counts the request in flight when ping was stopped
# (it sends every 10 ms and does not wait for that reply).
read -r got last < <(awk '/bytes from/ && match($0, /icmp_seq=[0-9]+/) {
		q = substr($0, RSTART + 9, RLENGTH - 9) + 0; if (!(q in seen)) { seen[q] = 1; n++ }
		if (q > m) m = q } END { print n + 0, m + 0 }' "$work/flood.txt")
tap_is "reload: a 100/s ping Ethernet -> IB through seven reloads lost nothing ($got of the first $last answered)" \
	"$((last - got))" 0
tap_is "reload: ... and it ran through all of them (still running at the end, $sent sent)" \
	"$alive $([ "${sent:-0}" -gt 200 ] && echo many)" "yes many"

# worker_cpus: the running worker moves at once.
pin_cpu=$(($(nproc) - 1))
fwd_cpus() { # the Cpus_allowed_list of the forwarding thread
	local t
	for t in /proc/"$(rack_pid ibgwd-gw1)"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = ibgw-fwd0 ] && awk '/^Cpus_allowed_list/ { print $2 }' "$t/status"
	done
}
all_cpus=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/"$(rack_pid ibgwd-gw1)"/status)
write_cfg pin
gwctl reload
tap_is "reload: worker_cpus pins the running worker" "$(fwd_cpus)" "$pin_cpu"
write_cfg
gwctl reload
tap_is "reload: without worker_cpus it may run anywhere again" "$(fwd_cpus)" "$all_cpus"

tap_like "import: before turning it off, the imported route is there" \
	"$(gwctl show routes 10.77.0.0/16)" "proto kernel_import"
write_cfg noimport
gwctl reload
tap_is "reload: import turned off drops the imported routes" "$(gwctl show routes 10.77.0.0/16)" ""
tap_like "reload: the export stays (table 100 kept, not flapped)" "$(exported)" \
	"^unreachable 10\.10\.0\.0/24"
tap_done
