#!/usr/bin/env bash
# The status page (metrics.status_page) of a real ibgwd: what does not need the rack. The
# daemon runs with one Ethernet interface on a veth in a namespace of our own and a
# gateway name that is HTML (the page must show it as text). Checked: the headers of the
# page (its CSP) and of its script, POST refused, failover not configured said so in the
# JSON; the DOM after the page's script ran and polled (chromium --dump-dom): the name
# escaped and no element made of it, no error shown; a reload with status_page false takes
# the page away (404) and leaves /metrics; true brings it back.
# What the page shows of a gateway (links, routes, neighbours, paths, groups, failover,
# rates and graphs) is checked against the simulated rack: status_page_rack.sh.
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
daemon_suite_cleanup_hook() { ip netns del "$ns" 2>/dev/null; }
PLAN=12
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
json=$(N curl -s "$url/status.json")
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
tap_like "DOM: the gateway's name shown as text" "$dom" \
	'<span id="gw-name">&lt;img src=x onerror=alert\(1\)&gt;</span>'
tap_is "DOM: no element made of it" "$(grep -c '<img' "$work/dom.html")" 0
tap_like "DOM: no error shown" "$dom" '<p id="error" class="error" hidden="">'

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

kill "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
wait "$pid"
tap_is "SIGTERM stops the daemon cleanly" "$?" 0
pid=
tap_done
