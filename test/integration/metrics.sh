#!/usr/bin/env bash
# The Prometheus endpoint (metrics.listen) of a real ibgwd, scraped with curl and checked
# with promtool. The gateway runs in namespace mx-g-$$ with one Ethernet interface on a
# veth whose other end is in mx-h-$$ (a host that pings the gateway's address), so that
# real counters move. Checked: the page passes `promtool check metrics`, Content-Type,
# build_info, the link's up gauge, receive counters rising between two scrapes, 404, 405
# with Allow, HEAD, a malformed request (400), 100 kB of headers refused, 200 concurrent
# connections leave the daemon answering gwctl and the endpoint serving once they go,
# an idle connection is closed, reload to another port (the old one closes), a refused
# reload shows in the gauges, a second daemon whose port is taken keeps running without
# metrics, clean stop.
# Needs root, curl and promtool (Debian: prometheus); skipped without them.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/daemon_suite.sh"
daemon_suite_init metrics
G=mx-g-$$
H=mx-h-$$
PORT=9464
PORT2=9465
PLAN=32
daemon_suite_cleanup_hook() {
	ip netns del "$G" 2>/dev/null
	ip netns del "$H" 2>/dev/null
}

tap_plan $PLAN
if [ "$(id -u)" -ne 0 ] || [ ! -x "$ibgwd" ] || ! command -v curl >/dev/null ||
	! command -v promtool >/dev/null || ! command -v python3 >/dev/null; then
	for i in $(seq $PLAN); do echo "ok $i - # SKIP needs root, $ibgwd, curl, promtool, python3"; done
	exit 0
fi

gx() { ip netns exec "$G" "$@"; }
hx() { ip netns exec "$H" "$@"; }
ip netns add "$G" && ip netns add "$H" || exit 1
ip link add mxg0 netns "$G" type veth peer name mxh0 netns "$H" || exit 1
for ns in "$G" "$H"; do ip -n "$ns" link set lo up; done
ip -n "$G" link set mxg0 up
ip -n "$H" addr add 192.0.2.2/24 dev mxh0
ip -n "$H" link set mxh0 up

write_config() { # FILE SOCKET LISTEN [DEVICE]
	cat >"$1" <<EOF
gateway:
  name: mx
control:
  socket: $2
logging:
  level: info
ethernet_interfaces:
  - name: eth0
    device: ${4:-mxg0}
    addresses: [192.0.2.1/24]
metrics:
  listen: "$3"
EOF
}

# scrape [PORT] [CURL ARGS...]: the page's body (curl fails on an HTTP error).
scrape() {
	local port=${1:-$PORT}
	[ $# -gt 0 ] && shift
	gx curl -sS -f --max-time 5 "$@" "http://127.0.0.1:$port/metrics"
}
# status URL [CURL ARGS...]: the HTTP status code ("000": no answer).
status() {
	local url=$1; shift
	gx curl -s -o /dev/null --max-time 5 -w '%{http_code}' "$@" "$url"
}
# value NAME_AND_LABELS PAGE: the sample's value.
value() {
	printf '%s\n' "$2" | awk -v k="$1" 'index($0, k " ") == 1 { print $2 }'
}
until_value() { # SECONDS NAME_AND_LABELS EXPECTED: until a scrape has it; prints the last
	local end=$((SECONDS + $1)) v
	while :; do
		v=$(value "$2" "$(scrape "$PORT" --max-time 1 2>/dev/null)")
		[ "$v" = "$3" ] || [ "$SECONDS" -ge "$end" ] && break
		sleep 0.1
	done
	printf '%s' "$v"
}

write_config "$work/ibgwd.yaml" "$sock" "127.0.0.1:$PORT"
ip netns exec "$G" "$ibgwd" -d -f "$work/ibgwd.yaml" >/dev/null 2>"$work/log" &
pid=$!
tap_check "daemon answers on its control socket" wait_socket
tap_like "it logs where metrics are served" "$(cat "$work/log")" \
	"metrics on http://127.0.0.1:$PORT/metrics"

hdr=$(gx curl -sS -o /dev/null -D - --max-time 5 "http://127.0.0.1:$PORT/metrics" | tr -d '\r')
tap_like "GET /metrics answers 200" "$hdr" "^HTTP/1.1 200"
tap_like "with the exposition format's Content-Type" "$hdr" \
	"Content-Type: text/plain; version=0.0.4; charset=utf-8"
page=$(scrape)
out=$(printf '%s\n' "$page" | promtool check metrics 2>&1)
tap_is "promtool check metrics finds nothing to say" "$?:$out" "0:"
tap_is "build_info carries the version" \
	"$(value "ibgw_build_info{version=\"$(cat "$top/VERSION")\"}" "$page")" 1
tap_like "every family has HELP and TYPE once" \
	"$(printf '%s\n' "$page" | awk '/^# TYPE/ { t[$3]++ } /^# HELP/ { h[$3]++ }
		END { for (k in t) if (t[k] != 1 || h[k] != 1) print "bad " k; print "checked" }')" "^checked$"
tap_is "the Ethernet link is up" "$(until_value 5 'ibgw_link_up{link="eth0",tenant="default"}' 1)" 1
tap_is "start time is the daemon's" \
	"$(value ibgw_start_time_seconds "$page")" \
	"$("$gwctl" -S "$sock" -j show version | jq -r '.[0].started')"

before=$(scrape)
tap_check "the host pings the gateway" hx ping -c 5 -i 0.2 -W 2 192.0.2.1
after=$(scrape)
rx0=$(value 'ibgw_link_receive_packets_total{link="eth0",tenant="default"}' "$before")
rx1=$(value 'ibgw_link_receive_packets_total{link="eth0",tenant="default"}' "$after")
tap_like "both scrapes have the link's receive counter" "$rx0 $rx1" "^[0-9]+ [0-9]+$"
[ -n "$rx0" ] && [ -n "$rx1" ] && [ "$((rx1 - rx0))" -ge 5 ] &&
	tap_ok "it rose by the 5 pings at least" ||
	tap_not_ok "it rose by the 5 pings at least" "$rx0 -> $rx1"
w0=$(value 'ibgw_worker_receive_packets_total{worker="0"}' "$before")
w1=$(value 'ibgw_worker_receive_packets_total{worker="0"}' "$after")
[ -n "$w0" ] && [ -n "$w1" ] && [ "$w1" -gt "$w0" ] &&
	tap_ok "the worker's receive counter rose" || tap_not_ok "worker counter rose" "$w0 -> $w1"
e0=$(value 'ibgw_slowpath_events_total{reason="echo_answered"}' "$before")
e1=$(value 'ibgw_slowpath_events_total{reason="echo_answered"}' "$after")
tap_is "the slow path counted 5 echo replies" "$((e1 - e0))" 5

tap_is "another path is 404" "$(status "http://127.0.0.1:$PORT/")" 404
out=$(gx curl -s -i -X POST -d x=1 --max-time 5 "http://127.0.0.1:$PORT/metrics" | tr -d '\r')
tap_like "POST is 405" "$out" "^HTTP/1.1 405"
tap_like "and says Allow: GET, HEAD" "$out" "Allow: GET, HEAD"
out=$(gx curl -s -I --max-time 5 "http://127.0.0.1:$PORT/metrics" | tr -d '\r' | tr '\n' ' ')
tap_like "HEAD is 200 with the Content-Type" "$out" "^HTTP/1.1 200.*Content-Type: text/plain; version=0.0.4"
out=$(gx timeout 5 python3 - "$PORT" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=4)
s.sendall(b"GET /metrics HTTP/1.1\r\nthis is not a header\r\n\r\n")
print(s.recv(64).split(b"\r\n")[0].decode())
EOF
)
tap_is "a malformed request is 400" "$out" "HTTP/1.1 400 Bad Request"
big=$(head -c 100000 /dev/zero | tr '\0' a)
tap_like "a request with 100 kB of headers is refused (431)" \
	"$(status "http://127.0.0.1:$PORT/metrics" -H "X-Big: $big")" "^431$"

# 200 connections at once, held open: the endpoint takes METRICS_HTTP_MAX_CONNS, the rest
# wait in the backlog; the control loop keeps answering gwctl meanwhile.
gx timeout 20 python3 - "$PORT" "$work/held" <<'EOF' &
import socket, sys, time
socks = []
for _ in range(200):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", int(sys.argv[1])))
    except BlockingIOError:
        pass
    socks.append(s)
open(sys.argv[2], "w").close()
time.sleep(3)
EOF
holder=$!
for _ in $(seq 50); do [ -e "$work/held" ] && break; sleep 0.1; done
tap_check "with 200 connections open, gwctl show version still answers" \
	timeout 5 "$gwctl" -S "$sock" show version
wait "$holder"
tap_is "once they close, a scrape works again" "$(status "http://127.0.0.1:$PORT/metrics")" 200
tap_is "and the open-connections gauge is back to this scrape's" \
	"$(until_value 5 ibgw_metrics_http_connections 1)" 1

out=$(gx timeout 20 python3 - "$PORT" <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=18)
t = time.monotonic()
s.sendall(b"GET /metr")  # half a request line, then nothing
print("closed" if s.recv(64) == b"" else "answered", round(time.monotonic() - t))
EOF
)
tap_like "an idle connection is closed after about 10 s" "$out" "^closed (9|10|11|12)$"

# Reload to another port: the old one closes, the new one serves.
write_config "$work/ibgwd.yaml" "$sock" "127.0.0.1:$PORT2"
tap_check "reload with a new metrics address" "$gwctl" -S "$sock" reload
tap_is "the new port serves" "$(status "http://127.0.0.1:$PORT2/metrics")" 200
tap_is "the old one is closed" "$(status "http://127.0.0.1:$PORT/metrics")" 000
page=$(scrape "$PORT2")
tap_is "reloads_total counts it" "$(value ibgw_config_reloads_total "$page")" 1
printf 'gateway:\n  workrs: 2\n' >"$work/ibgwd.yaml"
"$gwctl" -S "$sock" reload >/dev/null 2>&1
page=$(scrape "$PORT2")
tap_is "a refused reload shows: failures 1, last_reload_successful 0" \
	"$(value ibgw_config_reload_failures_total "$page") $(value ibgw_config_last_reload_successful "$page")" "1 0"

# A second daemon whose metrics port is taken keeps running without the endpoint.
write_config "$work/second.yaml" "$work/second.sock" "127.0.0.1:$PORT2" nosuch0
ip netns exec "$G" "$ibgwd" -d -f "$work/second.yaml" >/dev/null 2>"$work/log2" &
pid2=$!
tap_check "a daemon whose metrics port is taken still starts" wait_socket "$work/second.sock"
tap_like "and logs why it has no endpoint" "$(cat "$work/log2")" \
	"metrics: cannot listen on 127.0.0.1:$PORT2: Address already in use"
kill "$pid2"
wait "$pid2" 2>/dev/null
pid2=

kill "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
wait "$pid"
rc=$?
pid=
tap_is "SIGTERM stops the daemon cleanly" "$rc" 0
tap_done
