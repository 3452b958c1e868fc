#!/usr/bin/env bash
# The control socket under load and abuse, against a real ibgwd (a config with no links:
# nothing but the control thread and its sockets): more clients than CTL_MAX_CLIENTS,
# thousands of pipelined requests from several clients, malformed and oversized frames,
# bad write-request arguments, a client that never reads; afterwards the daemon still
# answers `gwctl show version` promptly and its RSS has not kept growing. Each socket has
# its own client limit: 72 idle read-only clients do not keep root's gwctl out. A client
# pipelining 4,000 `show stats` on the read-only socket round after round delays
# `gwctl show version` on the privileged one by less than 50 ms (the requests are served
# in turns: docs/architecture.md, "Control protocol"; a turn is about 2 ms, the rest is
# room for a loaded test machine: the figures are printed). Then the privileged socket's
# peer check end to end: gwctl as user nobody on a socket anyone may open (0666) is
# refused, the read-only socket (0666 too, as configured) still serves it.
#
#   test/integration/ctl_flood.sh [BUILD_DIR]     (root; default $IBGW_BUILD or build)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/daemon_suite.sh"
daemon_suite_init ctl-flood "${1:-}"
flood=$build/tools/ctl_flood
chmod 755 "$work" # nobody must reach the sockets

cat >"$work/ibgwd.yaml" <<EOF
gateway:
  name: flood
control:
  socket: $sock
  readonly_socket: $ro
  socket_mode: 0666
  readonly_socket_mode: 0666
logging:
  level: info
EOF

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status"; }
# Milliseconds one `gwctl show version` takes (it gives up after 5 s).
answer_ms() {
	local t0 t1
	t0=$(date +%s%N)
	"$gwctl" -t 5 -S "$sock" show version >/dev/null 2>&1 || { echo 99999; return; }
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}

tap_plan 23
"$ibgwd" -d -f "$work/ibgwd.yaml" 2>"$work/log" &
pid=$!
tap_check "the daemon answers on its control socket" wait_socket
rss0=$(rss_kb)

# Too many clients: the first CTL_MAX_CLIENTS (64) are served, the rest told why.
out=$(timeout 30 "$flood" "$sock" clients 72)
tap_is "72 clients at once: 64 served, 8 refused with EBUSY" "$out" "ok 64 busy 8 other 0"
out=$(timeout 30 "$flood" "$sock" clients 72 >/dev/null; "$gwctl" -t 5 -S "$sock" show version 2>&1)
tap_like "and once they leave, gwctl is served again" "$out" "^ibgwd "

# Thousands of pipelined requests from several clients at once.
out=$(timeout 60 "$flood" "$sock" burst 8 2500)
tap_is "8 clients x 2500 pipelined requests: every one answered" "$out" \
	"requests 20000 ok 20000 failed 0"

# Malformed and oversized frames, bad arguments: each answered or closed, none hangs.
out=$(timeout 120 "$flood" "$sock" garbage 20)
tap_is "260 malformed frames and bad arguments: 240 answered with an error, 20 closed" \
	"$out" "answered 240 closed 20 hung 0"
out=$("$gwctl" -t 5 -S "$sock" route add 10.1.0.1/16 via 10.0.0.1 2>&1); rc=$?
tap_like "gwctl refuses a bad prefix before sending it (exit 2)" "$rc $out" \
	"^2 gwctl: route add: '10.1.0.1/16' has host bits set \(the prefix is 10.1.0.0/16\)"
out=$("$gwctl" -t 5 -S "$sock" route add 10.1.0.0/16 via 10.0.0.1 dev eth9 2>&1); rc=$?
tap_like "the daemon refuses an unknown dev (exit 1)" "$rc $out" \
	"^1 gwctl: no interface 'eth9' \(interfaces: none configured\)"

# A client that sends and never reads is stopped being read; others are served.
timeout 30 "$flood" "$sock" noread 200000 4 >"$work/noread" &
noread=$!
sleep 1
ms=$(answer_ms)
tap_like "while a client does not read its replies, gwctl is answered (${ms} ms)" "$ms" \
	'^[0-9]{1,3}$'
wait "$noread"
tap_like "that client could only queue so much before being held back" \
	"$(cat "$work/noread")" '^sent [0-9]+$'

rss1=$(rss_kb)

# Idle read-only clients at their limit: the privileged socket's limit is its own.
timeout 30 "$flood" "$ro" idle 72 20 >"$work/idle" &
idle=$!
for _ in $(seq 100); do [ -s "$work/idle" ] && break; sleep 0.1; done
tap_is "72 idle read-only clients: 64 accepted, 8 refused" "$(cat "$work/idle")" "ok 64 busy 8"
out=$("$gwctl" -t 5 -S "$ro" show version 2>&1); rc=$?
tap_like "the read-only socket is full" "$rc $out" \
	"^1 gwctl: too many read-only control clients \(64\): try again later"
out=$("$gwctl" -t 5 -S "$sock" show version 2>&1)
tap_like "while they hold it, gwctl on the privileged socket is served" "$out" "^ibgwd "
kill "$idle" 2>/dev/null
wait "$idle" 2>/dev/null

# A pipelining flood on the read-only socket: the privileged socket's answer time.
best=99999
for _ in 1 2 3 4 5; do ms=$(answer_ms); [ "$ms" -lt "$best" ] && best=$ms; done
timeout 60 "$flood" "$ro" pipeline 4000 4 >"$work/pipeline" &
pipe=$!
sleep 0.5
worst=0
for _ in $(seq 10); do
	ms=$(answer_ms)
	[ "$ms" -gt "$worst" ] && worst=$ms
	sleep 0.1
done
wait "$pipe"
tap_like "4,000 show stats a round on the read-only socket, every one answered" \
	"$(cat "$work/pipeline")" '^rounds ([1-9][0-9]*) requests ([0-9]+) ok \2$'
tap_like "meanwhile gwctl show version on the privileged socket: worst ${worst} ms against ${best} ms idle (delay under 50 ms; $(cat "$work/pipeline"))" \
	"$((worst - best < 50))" '^1$'

# Two more rounds of everything: once the buffers a round needs exist, memory must not
# grow with the number of requests (20000 more per round: a leak of 50 octets each
# would show).
flood_round() {
	timeout 30 "$flood" "$sock" clients 72 >/dev/null
	timeout 60 "$flood" "$sock" burst 8 2500 >/dev/null
	timeout 120 "$flood" "$sock" garbage 20 >/dev/null
	timeout 30 "$flood" "$sock" noread 200000 1 >/dev/null
}
flood_round
rss2=$(rss_kb)
flood_round
rss3=$(rss_kb)
ms=$(answer_ms)
tap_like "after the floods, show version is answered promptly (${ms} ms)" "$ms" '^[0-9]{1,3}$'
tap_check "the daemon is still running" kill -0 "$pid"
tap_like "RSS after the first round grew less than 64 MiB (${rss0} -> ${rss1} kB)" \
	"$((rss1 - rss0 < 65536))" '^1$'
tap_like "a further round grew it by less than 1 MiB (${rss2} -> ${rss3} kB)" \
	"$((rss3 - rss2 < 1024))" '^1$'
stats=$(grep -c "refusing more" "$work/log")
tap_like "refusals are logged at most once a second, not per client (${stats} lines)" \
	"$stats" '^[1-9]$'

# The privileged socket checks who connected: nobody is refused on every request.
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
out=$(as_nobody "$gwctl" -t 5 -S "$sock" show version 2>&1); rc=$?
tap_like "nobody on the privileged socket: exit 1 and why" "$rc $out" \
	"^1 gwctl: uid 65534 is not allowed on the privileged socket \(use the read-only socket or join group $(id -gn)\)"
out=$(as_nobody "$gwctl" -t 5 -S "$sock" route add 10.1.0.0/16 via 10.0.0.1 2>&1); rc=$?
tap_like "a write request too, before its arguments are even looked at" "$rc $out" \
	"^1 gwctl: uid 65534 is not allowed on the privileged socket"
out=$(as_nobody "$gwctl" -t 5 -S "$ro" show version 2>&1); rc=$?
tap_like "the read-only socket serves nobody" "$rc $out" "^0 ibgwd "
out=$(as_nobody "$gwctl" -S "$ro" capture eth0 duration 1 -w /dev/null 2>&1); rc=$?
tap_is "but not a capture: it shows every host's traffic (exit 1)" "$rc $out" \
	"1 gwctl: this socket is read-only: only show requests are accepted"

kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
wait "$pid" 2>/dev/null
pid=
tap_done
