#!/usr/bin/env bash
# ibgwd + gwctl end to end over real sockets: what an operator sees.
# Start, show version/links/config (text and JSON), unique prefixes, usage errors,
# reload (good, broken, via SIGHUP), log level, the read-only socket, a second daemon
# on the same socket, gwctl with no daemon, clean stop on SIGTERM; gateway.user: a
# daemon that becomes nobody keeps exactly CAP_NET_ADMIN, CAP_NET_RAW, CAP_IPC_LOCK.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/daemon_suite.sh"
daemon_suite_init daemon-test

write_config() { # NAME
	cat >"$work/ibgwd.yaml" <<EOF
gateway:
  name: $1
control:
  socket: $sock
  readonly_socket: $ro
logging:
  level: info
ipoib_links:
  - name: ib0
    backend: verbs
    device: gw1
    mode: connected
    addresses: [10.10.0.1/24]
ethernet_interfaces:
  - name: eth0
    device: veth0
    vlan: 12
    addresses: [192.168.50.1/24, "fd00:50::1/64"]
EOF
}

tap_plan 40
printf 'gateway:\n  workers: many\n' >"$work/broken.yaml"
out=$("$ibgwd" -d -f "$work/broken.yaml" -S "$work/b.sock" 2>&1); rc=$?
tap_is "a daemon started on a broken config exits 78 (EX_CONFIG)" "$rc" 78
tap_like "and says where and why" "$out" "broken.yaml:2:12: .*workers"
write_config alpha
"$ibgwd" -d -f "$work/ibgwd.yaml" 2>"$work/log" &
pid=$!
tap_check "daemon answers on its control socket" wait_socket

out=$("$gwctl" -S "$sock" show version)
tap_like "show version names the daemon and version" "$out" "^ibgwd [0-9]+\.[0-9]+\.[0-9]+"
tap_like "show version has the configured name and pid" "$out" "name alpha pid $pid "

out=$("$gwctl" -S "$sock" show links)
tap_like "show links lists the IPoIB link like ip link" "$out" \
	"^ib0: ipoib state DOWN mtu 65520 mode connected pkey 0xffff dev gw1 port 1 backend verbs"
tap_like "show links lists the Ethernet interface with its VLAN" "$out" \
	"eth0: ether state DOWN mtu 1500 dev veth0 vlan 12 backend af_packet"
tap_like "show links prints addresses as inet/inet6" "$out" "    inet6 fd00:50::1/64"
tap_like "show links says why a link is down" "$out" "down: cannot open IB port gw1/1 \(verbs\)"

out=$("$gwctl" -S "$sock" -j show links)
tap_is "-j prints one JSON array with one record per link" "$(echo "$out" | jq -r 'length')" 2
tap_is "-j keys are snake_case values" "$(echo "$out" | jq -r '.[0].name + " " + .[0].kind + " " + .[0].pkey + " " + (.[0].mtu|tostring)')" \
	"ib0 ipoib 0xffff 65520"
out=$("$gwctl" -S "$sock" -j show config)
tap_is "-j show config has the config as JSON" \
	"$(echo "$out" | jq -r '.[0].ipoib_links[0].name + " " + .[0].ethernet_interfaces[0].device')" "ib0 veth0"
out=$("$gwctl" -S "$sock" show config)
tap_like "show config prints YAML" "$out" "ipoib_links:"

out=$("$gwctl" -S "$sock" sh li 2>&1)
tap_like "unique prefixes are accepted (sh li)" "$out" "^ib0: ipoib"
out=$("$gwctl" -S "$sock" shw links 2>&1); rc=$?
tap_is "an unknown word is a usage error (exit 2)" "$rc" 2
tap_like "and says what was expected" "$out" "unknown object 'shw'; one of: link, route, neigh, .*, show or help"
out=$("$gwctl" -S "$sock" show 2>&1); rc=$?
tap_like "an incomplete command lists the choices" "$rc $out" "^2 gwctl: show what\? one of: link, route, neigh,"

# Reload: a broken file is refused with file:line:column, the running config stays.
printf 'gateway:\n  name: beta\n  workrs: 2\n' >"$work/ibgwd.yaml"
out=$("$gwctl" -S "$sock" reload 2>&1); rc=$?
tap_is "reload of a broken file fails (exit 1)" "$rc" 1
tap_like "and reports file:line:column: message" "$out" \
	"ibgwd.yaml:3:3: unknown key 'workrs' in gateway \(did you mean 'workers'\?\)"
out=$("$gwctl" -S "$sock" show version)
tap_like "the running config is unchanged" "$out" "name alpha "

write_config beta
out=$("$gwctl" -S "$sock" reload 2>&1); rc=$?
tap_like "reload of a good file applies it, and fails naming the link that cannot run (exit 1)" \
	"$rc $(echo "$out" | tr '\n' '|')" \
	"^1 reloaded .*ibgwd.yaml in [0-9]+ ms: changed\|    gateway name beta \(was alpha\)\|gwctl: reload applied, but not as written .*\|ib0: not running: cannot open IB port gw1/1"
tap_like "the new config is running" "$("$gwctl" -S "$sock" show version | tr '\n' ' ')" \
	"name beta .*reloads 1 failed 1"
write_config gamma
kill -HUP "$pid"
for _ in $(seq 100); do "$gwctl" -S "$sock" show version | grep -q "name gamma" && break; sleep 0.05; done
tap_like "SIGHUP reloads too" "$("$gwctl" -S "$sock" show version | tr '\n' ' ')" "name gamma .*reloads 2"

tap_check "log level can be changed" "$gwctl" -S "$sock" log level debug
out=$("$gwctl" -S "$sock" log level loud 2>&1); rc=$?
tap_like "an unknown log level is refused by the daemon (exit 1)" "$rc $out" \
	"^1 gwctl: unknown log level 'loud'"

out=$("$gwctl" -S "$ro" reload 2>&1); rc=$?
tap_like "the read-only socket refuses reload" "$rc $out" "^1 .*read-only"

out=$("$ibgwd" -d -f "$work/ibgwd.yaml" 2>&1); rc=$?
tap_like "a second daemon on a live socket refuses to start" "$rc $out" "is in use: is another ibgwd running"

out=$("$gwctl" -S "$work/nothing.sock" show version 2>&1); rc=$?
tap_like "gwctl with no daemon says so (exit 1)" "$rc $out" "^1 gwctl: cannot reach ibgwd at .*nothing.sock: No such file or directory \(is ibgwd running\?\)"

kill -TERM "$pid"
wait "$pid"; rc=$?
pid=
tap_is "SIGTERM stops the daemon with status 0" "$rc" 0
tap_is "and removes its control sockets" "$(ls "$work"/*.sock 2>/dev/null | wc -l)" 0

# gateway.user: started as root, it makes its sockets, then runs as nobody with three
# capabilities (bits 12-14: 0x7000), in every thread. Its files sit in a folder nobody
# can read, so that a reload can read the config again.
priv=$work/priv
mkdir -m 0755 "$priv"
chmod 0711 "$work"
write_priv() { # NAME USER
	cat >"$priv/ibgwd.yaml" <<EOF
gateway:
  name: $1
  workers: 2
  user: $2
  group: nogroup
control:
  socket: $priv/ctl.sock
  socket_mode: 0660
  socket_group: nogroup
ipoib_links:
  - name: ib0
    backend: verbs
    device: gw1
    addresses: [10.10.0.1/24]
ethernet_interfaces:
  - name: eth0
    device: veth0
    addresses: [192.168.50.1/24]
EOF
}
write_priv delta nobody
"$ibgwd" -d -f "$priv/ibgwd.yaml" 2>"$work/log2" &
pid2=$!
tap_check "a daemon with user: nobody answers on its control socket" wait_socket "$priv/ctl.sock"
status=$(cat /proc/$pid2/status)
tap_like "it runs as nobody:nogroup" "$(echo "$status" | grep -E '^(Uid|Gid):' | tr '\t\n' '  ')" \
	"^Uid: 65534 65534 65534 65534 Gid: 65534 65534 65534 65534 $"
tap_is "CapEff and CapPrm are CAP_NET_ADMIN, CAP_NET_RAW, CAP_IPC_LOCK; none inheritable or ambient" \
	"$(echo "$status" | grep -E '^Cap(Inh|Prm|Eff|Amb):' | tr '\t\n' '  ')" \
	"CapInh: 0000000000000000 CapPrm: 0000000000007000 CapEff: 0000000000007000 CapAmb: 0000000000000000 "
tap_is "every thread has the same set" \
	"$(cat /proc/$pid2/task/*/status | grep '^CapEff:' | sort -u | tr '\t' ' ')" "CapEff: 0000000000007000"
tap_like "the log names the user and the set once" "$(grep -c 'running as user' "$work/log2") $(tr '\n' ' ' <"$work/log2")" \
	"^1 .*running as user nobody \(uid 65534, gid 65534\) with capabilities cap_net_admin,cap_net_raw,cap_ipc_lock"
tap_like "its socket was made as root: owner root, group nogroup, mode 0660" \
	"$(stat -c '%U %G %a' "$priv/ctl.sock")" "^root nogroup 660$"
write_priv epsilon nobody
# (its links cannot run here: the reload applies the file and says so, exit 1)
tap_like "a reload as nobody reads the config again" \
	"$("$gwctl" -S "$priv/ctl.sock" reload 2>&1 | tr '\n' '|')" \
	"^reloaded .*/priv/ibgwd.yaml in [0-9]+ ms: changed\|    gateway name epsilon \(was delta\)\|"
tap_like "and runs it" "$("$gwctl" -S "$priv/ctl.sock" show version | tr '\n' ' ')" "name epsilon .*reloads 1"
write_priv zeta root
"$gwctl" -S "$priv/ctl.sock" reload >/dev/null 2>&1
tap_like "a reload that changes the user says it waits for the next start" "$(cat "$work/log2")" \
	"gateway.user and gateway.group changes take effect at the next start"
kill -TERM "$pid2"
wait "$pid2"
pid2=
write_priv eta no-such-user-ibgw
out=$("$ibgwd" -d -f "$priv/ibgwd.yaml" 2>&1); rc=$?
tap_like "a user that does not exist fails the start, saying so" "$rc $(echo "$out" | tr '\n' ' ')" \
	"^1 .*gateway.user: no user 'no-such-user-ibgw'"
tap_done
