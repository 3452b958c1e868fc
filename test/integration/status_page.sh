#!/usr/bin/env bash
# The status page (metrics.status_page) of a real ibgwd, loaded in headless Chromium. The
# daemon runs with one Ethernet interface on a veth in a namespace of our own (no rack),
# whose other end has an address that pings the gateway so that counters move, a static
# route, and a gateway name that is HTML (the page must show it as text). Checked: the
# JSON endpoint (links, routes, neighbours) and the headers of the page (its CSP); then the
# DOM after the page's script ran and polled (chromium --dump-dom with virtual time): the
# interface UP with its counters, the route, the neighbour, the name escaped and no element
# made of it, the rate graphs fed by successive polls, the counters moved, no error
# shown; a screenshot kept as build/artifacts/status_page.png; a reload with status_page false takes the page away
# (404) and leaves /metrics; true brings it back; POST is refused.
# Needs root, curl, jq and chromium (Debian: chromium); skipped without them.
#
#   test/integration/status_page.sh [BUILD_DIR]     (default $IBGW_BUILD or build)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/daemon_suite.sh"
daemon_suite_init status-page "${1:-}"
ns=ibgwsp$$
port=9471
url=http://127.0.0.1:$port
ping_pid=
daemon_suite_cleanup_hook() {
	[ -n "$ping_pid" ] && kill "$ping_pid" 2>/dev/null
	ip netns del "$ns" 2>/dev/null
}
PLAN=21
tap_plan $PLAN
if [ "$(id -u)" -ne 0 ] || [ ! -x "$ibgwd" ] || ! command -v curl >/dev/null ||
	! command -v jq >/dev/null || ! command -v chromium >/dev/null; then
	for _ in $(seq $PLAN); do tap_ok "skip # SKIP needs root, ibgwd, curl, jq and chromium"; done
	exit 0
fi
N() { ip netns exec "$ns" "$@"; }
g() { "$gwctl" -t 5 -S "$sock" "$@"; }

ip netns add "$ns"
ip -n "$ns" link set lo up
ip -n "$ns" link add veth0 type veth peer name veth1
ip -n "$ns" link set veth0 up
ip -n "$ns" link set veth1 up
ip -n "$ns" addr add 192.168.77.2/24 dev veth1
write_config() {
	cat >"$work/ibgwd.yaml" <<YAML
gateway:
  name: "<img src=x onerror=alert(1)>"
control:
  socket: $sock
ethernet_interfaces:
  - name: eth0
    device: veth0
    addresses: [192.168.77.1/24]
routes:
  - prefix: 10.9.0.0/16
    via: 192.168.77.9
metrics:
  listen: "127.0.0.1:$port"
  status_page: $1
YAML
}
write_config true
ip netns exec "$ns" "$ibgwd" -d -f "$work/ibgwd.yaml" 2>"$work/log" &
pid=$!
wait_up() {
	for _ in $(seq 100); do
		g show links 2>/dev/null | grep -q "eth0: ether state UP" && return 0
		sleep 0.05
	done
	return 1
}
tap_check "the daemon runs with eth0 UP" wait_up
# Traffic for the counters, all along.
ip netns exec "$ns" ping -q -i 0.01 -w 60 192.168.77.1 >/dev/null 2>&1 &
ping_pid=$!
sleep 0.5

json=$(N curl -s "$url/status.json")
tap_is "status.json: the interface, UP, with its counters" \
	"$(jq -r '.links[0] | "\(.name) \(.state) \(.stats.rx_packets > 0)"' <<<"$json")" "eth0 up true"
tap_is "status.json: the static route" \
	"$(jq -r '.routes[] | select(.dst == "10.9.0.0/16") | .gateway' <<<"$json")" "192.168.77.9"
tap_is "status.json: the pinging host as a neighbour" \
	"$(jq -r '[.neighbours[].dst] | index("192.168.77.2") != null' <<<"$json")" "true"
tap_is "status.json: failover not configured says so" \
	"$(jq -r '(.failover | length) == 0 and .failover_error != null' <<<"$json")" "true"
hdr=$(N curl -s -D - -o "$work/page.html" "$url/status")
tap_like "the page: 200, text/html" "$hdr" "^Content-Type: text/html"
tap_like "the page: a CSP allowing only its own files" "$hdr" \
	"^Content-Security-Policy: default-src 'none'; script-src 'self'"
tap_is "the page's script is served" \
	"$(N curl -s -o /dev/null -w '%{http_code} %{content_type}' "$url/status.js")" \
	"200 text/javascript; charset=utf-8"
tap_is "POST is refused" "$(N curl -s -o /dev/null -w '%{http_code}' -d x "$url/status")" 405

# The DOM once the script ran and polled twice or more (virtual time).
N timeout 120 chromium --headless --no-sandbox --disable-gpu --virtual-time-budget=5000 \
	--window-size=1280,1400 --dump-dom "$url/status" >"$work/dom.html" 2>"$work/chromium.log"
dom=$(tr -d '\n' <"$work/dom.html")
tap_like "DOM: eth0 in the links table, up" "$dom" \
	'<tr><td>eth0</td><td>ether</td><td>veth0</td><td><span class="state-up">up</span></td><td class="num">1500</td><td>192.168.77.1/24</td>'
tap_like "DOM: the route" "$dom" \
	'<tr><td>10.9.0.0/16</td><td>192.168.77.9</td><td>eth0</td><td>static</td>'
tap_like "DOM: the neighbour" "$dom" '<tr><td>192.168.77.2</td><td>eth0</td>'
tap_like "DOM: the gateway's name shown as text" "$dom" \
	'<span id="gw-name">&lt;img src=x onerror=alert\(1\)&gt;</span>'
tap_is "DOM: no element made of it" "$(grep -c '<img' "$work/dom.html")" 0
# Virtual time runs the 2 s timers at once: the polls come milliseconds apart in real
# time, so the rate itself may be 0; that the graphs got samples from successive polls is
# what can be checked here (the counters' rise is checked in the links table).
tap_like "DOM: the rate graphs fed by successive polls" "$dom" \
	'<span id="rate-packets">now [0-9][0-9.]* ?[kMG]?/s \([1-9][0-9]* samples?\)</span>.*<span id="rate-drops">now [0-9][0-9.]* ?[kMG]?/s \([1-9][0-9]* samples?\)</span>'
tap_like "DOM: the interface's counters moved (the ping)" "$dom" \
	'<td>192.168.77.1/24</td><td class="num">[1-9][0-9.]* ?[kMG]?</td><td class="num">[1-9]'
tap_like "DOM: no error shown" "$dom" '<p id="error" class="error" hidden="">'

N timeout 120 chromium --headless --no-sandbox --disable-gpu --virtual-time-budget=5000 \
	--window-size=1280,1400 --screenshot="$work/status_page.png" "$url/status" \
	>>"$work/chromium.log" 2>&1
mkdir -p "$build/artifacts"
cp "$work/status_page.png" "$build/artifacts/status_page.png" 2>/dev/null
tap_like "a screenshot, kept as build/artifacts/status_page.png" \
	"$(file -b "$build/artifacts/status_page.png" 2>&1)" "^PNG image data, 1280 x 1400"

write_config false
g reload >/dev/null
tap_is "status_page false on reload: the page and its JSON are gone, /metrics stays" \
	"$(for p in status status.json status.js metrics; do
		N curl -s -o /dev/null -w '%{http_code} ' "$url/$p"
	done)" "404 404 404 200 "
write_config true
g reload >/dev/null
tap_is "true again: the page is back" \
	"$(N curl -s -o /dev/null -w '%{http_code}' "$url/status")" 200

kill "$ping_pid" 2>/dev/null
wait "$ping_pid" 2>/dev/null
ping_pid=
kill "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
wait "$pid"
tap_is "SIGTERM stops the daemon cleanly" "$?" 0
pid=
tap_done
