#!/usr/bin/env bash
# The status page (metrics.status_page) on the simulated rack, as a person sees it in a
# browser: the failover pair (sim/rack up --ha; sim/etc/rack-ha-gw*.yaml serve the page at
# 127.0.0.1:9464 in each box's namespace), with a static route added to gw1's config by a
# reload. Headless Chromium (test/lib/chromium_page.py, one browser in each box's
# namespace) loads a box's page and lets it poll for 7 s of real time, so that the rates
# it computes are real ones; then the DOM is read table by table. What the page must show
# is taken from elsewhere than the daemon: the IB host's IPoIB address (QPN and GID) from
# the host itself, LIDs and GUIDs from ibstat, the broadcast group's MLID from OpenSM
# (saquery), the Ethernet host's MAC from its kernel, who is master from the Ethernet
# host's ARP entry of the service address.
#   gw2 (backup), before any traffic: group svc BACKUP with its peer MASTER and alive, its
#                 last transition to backup; no service address in its routes; the rates
#                 of the heartbeats alone (about 400 packets/s over both links), no drops
#   gw1 (master), under a 200/s ping from an Ethernet host to an IB host and a 100/s ping
#                 to an IB address nobody has (dropped on ib0 for want of a neighbour):
#                 ib0 and eth0 up with their device, MTU and addresses; the connected
#                 route, the service address's and the static one; the IB host as a
#                 neighbour with its QPN and GID, the Ethernet host with its MAC; the
#                 PathRecord to the IB host (its GID and LID, valid); the broadcast group
#                 joined with OpenSM's MLID; group svc MASTER with its peer BACKUP, both
#                 heartbeat paths alive, the last transition to master; per-link packet
#                 rates above the heartbeats', the graph's above idle gw2's by more than
#                 the pings' share, a drop rate above 0, both graphs drawn on their canvases
# No error is shown on either page. Screenshots of both whole pages are kept as
# build/artifacts/status_page-gw1.png and status_page-gw2.png.
# test/integration/status_page.sh covers the rest on a veth (escaping, CSP, reload off/on).
# Needs root, ibsim, opensm, saquery, jq, curl, python3, chromium; about 30 s.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
suite_init spr

tap_plan 30
suite_need_built "$build/bin/ibgwd" "$build/bin/gwctl" "$build/bin/ibgw-host" "$build/bin/ibgw-fabric"
suite_need_root
suite_need_cmds ibsim opensm saquery jq curl python3 chromium
suite_ibhost_helpers
. "$top/test/lib/ha.sh"

# row DOM TABLE FIRST: the cells of the row of table TABLE whose first cell is FIRST, as
# "a|b|c" (a cell's text as the page shows it); every matching row, one a line.
# rows DOM TABLE: every row of TABLE, written so.
cat >"$work/cells.py" <<'EOF'
import sys
from html.parser import HTMLParser


class Cells(HTMLParser):
    def __init__(self, table):
        super().__init__()
        self.table, self.inside, self.rows, self.row, self.cell = table, False, [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "table" and dict(attrs).get("id") == self.table:
            self.inside = True
        elif self.inside and tag == "tr":
            self.row = []
        elif self.inside and tag == "td":
            self.cell = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif self.inside and tag == "td" and self.cell is not None:
            self.row.append(self.cell)
            self.cell = None
        elif self.inside and tag == "tr" and self.row:
            self.rows.append("|".join(self.row))
            self.row = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


p = Cells(sys.argv[2])
p.feed(open(sys.argv[1]).read())
for r in p.rows:
    if len(sys.argv) < 4 or r.split("|")[0] == sys.argv[3]:
        print(r)
EOF
rows() { python3 "$work/cells.py" "$1" "$2"; }
row() { python3 "$work/cells.py" "$1" "$2" "$3"; }
# cell DOM TABLE FIRST N: the Nth cell of that row.
cell() { row "$1" "$2" "$3" | head -n1 | cut -d'|' -f"$4"; }
# The page's numbers: "351.5", "1.2 k" (fmt() in mgmt/www/status.js), as a plain number.
num() { awk '{ v = $1 + 0; if ($2 == "k") v *= 1e3; else if ($2 == "M") v *= 1e6; print v }'; }
# The number in a graph's caption "now N/s (K samples)".
caption_rate() { grep -o "<span id=\"rate-$2\">now [^<]*" "$1" | sed 's/.*now //; s|/s.*||' | num; }
caption_samples() { grep -o "<span id=\"rate-$2\">now [^<]*" "$1" | sed 's/.*(//; s/ sample.*//'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }
# gid_of NODE: the port GID (link-local prefix and the port GUID ibstat shows), as the
# daemon prints GIDs (RFC 5952).
gid_of() {
	python3 -c 'import ipaddress, sys; print(ipaddress.IPv6Address((0xfe80 << 112) | int(sys.argv[1], 16)))' \
		"$(rack_ib "$1" ibstat | awk '/Port GUID/ { print $3; exit }')"
}
lid_of() { printf '0x%x' "$(rack_ib "$1" ibstat | awk '/Base lid/ { print $3; exit }')"; }
# The JavaScript that counts, on each graph's canvas, the pixels of its line's colour
# (#0969da packets, #cf222e drops).
graph_pixels='(() => {
	const r = {};
	for (const [id, c] of [["graph-packets", [9, 105, 218]], ["graph-drops", [207, 34, 46]]]) {
		const cv = document.getElementById(id);
		const d = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
		let n = 0;
		for (let i = 0; i < d.length; i += 4)
			if (d[i + 3] > 0 && Math.abs(d[i] - c[0]) < 40 && Math.abs(d[i + 1] - c[1]) < 40 &&
				Math.abs(d[i + 2] - c[2]) < 40) n++;
		r[id] = n;
	}
	return r;
})()'
# The pages are loaded by one Chromium per gateway's namespace, each started early
# (page_start, before traffic and before the checks) and then asked for pages
# (page_load): a browser's start takes both CPUs of a small machine for a moment, long
# enough for the pair's heartbeats (every 10 ms, dead after 40) to miss, and a false
# failover then would move the traffic to gw2. It runs at nice 19 for the same reason.
page_start() { # NODE: the browser up, its requests on fd page_fd_NODE, its pid page_pid_NODE
	local fd i
	mkfifo "$work/page-$1.in"
	: >"$work/page-$1.out"
	ip netns exec "$rack-$1" nice -n 19 python3 "$top/test/lib/chromium_page.py" --serve \
		<"$work/page-$1.in" >"$work/page-$1.out" 2>>"$work/chromium.log" &
	printf -v "page_pid_$1" %s "$!"
	exec {fd}>"$work/page-$1.in"
	printf -v "page_fd_$1" %s "$fd"
	for i in $(seq 300); do
		[ "$(head -n1 "$work/page-$1.out")" = ready ] && return 0
		sleep 0.1
	done
	return 1
}
# page_load NODE: the node's status page for 7 s of real time, its DOM in
# $work/NODE.html, a screenshot kept as build/artifacts/status_page-NODE.png; prints the
# browser's answer, {"eval": {"graph-packets": N, "graph-drops": N}} (graph_pixels).
page_load() {
	local fd_var=page_fd_$1 n i
	mkdir -p "$build/artifacts"
	n=$(wc -l <"$work/page-$1.out")
	jq -cn --arg dom "$work/$1.html" --arg png "$build/artifacts/status_page-$1.png" \
		--arg js "$graph_pixels" \
		'{url: "http://127.0.0.1:9464/status", seconds: 7, dom: $dom, png: $png, eval: $js}' \
		>&"${!fd_var}"
	for i in $(seq 600); do
		[ "$(wc -l <"$work/page-$1.out")" -gt "$n" ] && break
		sleep 0.1
	done
	tail -n1 "$work/page-$1.out"
}
suite_cleanup_hook() { # each browser closed (by chromium_page.py, on SIGTERM too)
	local node fd_var pid_var i
	for node in gw1 gw2; do
		fd_var=page_fd_$node
		pid_var=page_pid_$node
		[ -n "${!fd_var:-}" ] && eval "exec ${!fd_var}>&-"
		[ -n "${!pid_var:-}" ] && kill -TERM "${!pid_var}" 2>/dev/null
	done
	for node in gw1 gw2; do
		pid_var=page_pid_$node
		[ -n "${!pid_var:-}" ] || continue
		for i in $(seq 100); do
			kill -0 "${!pid_var}" 2>/dev/null || break
			sleep 0.1
		done
	done
}

if ! R up --ha >"$work/up.log" 2>&1; then
	tap_not_ok "rack up with a failover pair" "$(tail -5 "$work/up.log")"
	exit 1
fi
page_start gw1
r1=$?
page_start gw2
tap_is "Chromium runs in gw1's and gw2's namespaces" "$r1 $?" "0 0"
wait_state gw1 master 10
wait_state gw2 backup 10
# A static route in gw1's config, by a reload (the pair's configs have none: hostile_ha.sh
# appends its own routes: section to them).
printf 'routes:\n  - prefix: 10.30.0.0/24\n    via: 10.20.0.11\n' >>"$RACK_STATE/nodes/gw1/ibgwd.yaml"
tap_like "gw1 reloads its config with a static route" "$(g gw1 reload 2>&1)" \
	"static routes: 1 added, 0 removed"

# What the rack has, from elsewhere than the gateways.
ib3_hw=$(dump ibhost3 link | awk '{ for (i = 1; i < NF; i++) if ($i == "hwaddr") print $(i + 1) }')
ib3_gid=$(gid_of ibhost3)
ib3_lid=$(lid_of ibhost3)
gw1_gid=$(gid_of gw1)
eth1_mac=$(in_ns ethhost1 ip -j link show eth0 | jq -r '.[0].address')
gw1_mac=$(in_ns gw1 ip -j link show eth0 | jq -r '.[0].address')
bcast_mlid=$(rack_ib sm saquery MCMR --mgid ff12:401b:ffff::ffff:ffff 2>/dev/null |
	awk '/MGID/ { g = $0 } /[Mm]lid/ && g ~ /ff12:401b:ffff::ffff:ffff/ { sub(/.*\./, ""); print tolower($0); exit }')
echo "# ibhost3: hwaddr $ib3_hw gid $ib3_gid lid $ib3_lid; gw1 gid $gw1_gid; ethhost1 $eth1_mac; broadcast MLID $bcast_mlid"

# gw2 first, before any traffic: its rates are the heartbeats'.
a2=$(page_load gw2)
d2=$work/gw2.html
tap_is "gw2: the page loaded and polled, no error shown" \
	"$(grep -c '<p id="error" class="error" hidden="">' "$d2" 2>/dev/null) $(jq -r '.error // ""' <<<"$a2")" "1 "
tap_like "gw2 failover: group svc BACKUP, priority 100, its peer MASTER" "$(row "$d2" failover group)" \
	"^group\|svc\|backup\|priority=100 .*peer_state=master peer_priority=150 "
tap_like "gw2 failover: the node's peer gw1 alive" "$(row "$d2" failover node)" "^node\|gw2\|peer alive\|peer=gw1 "
tap_like "gw2 failover: the last transition, to backup" "$(rows "$d2" transitions | tail -n1)" \
	"^[0-9.]+ s\|svc\|[a-z]+\|backup\|[a-z]"
tap_like "gw2 routes: its own connected subnet" "$(row "$d2" routes 10.10.0.0/24)" "^10\.10\.0\.0/24\|\|ib0\|kernel\|"
tap_is "gw2 routes: no service address (the backup does not hold it)" "$(row "$d2" routes 10.10.0.1)" ""
# Heartbeats: one each way per path every 10 ms, so about 400 packets/s over both links.
pk2=$(caption_rate "$d2" packets)
dr2=$(caption_rate "$d2" drops)
echo "# gw2 rates, idle: all links $pk2/s packets, $dr2/s drops"
tap_is "gw2 graphs, idle: the heartbeats' 200-800 packets/s, no drops, from 2 or more samples" \
	"$(awk -v p="$pk2" -v d="$dr2" 'BEGIN { print (p >= 200 && p <= 800), d }') $(ge "$(caption_samples "$d2" packets)" 2 && echo yes)" \
	"1 0 yes"
tap_like "gw2: a screenshot kept" "$(file -b "$build/artifacts/status_page-gw2.png" 2>&1)" "^PNG image data, 1280 x [0-9]+"

# Traffic through the master all along the page's polls.
in_ns ethhost1 ping -q -i 0.005 -w 40 10.10.0.13 >"$work/ping.log" 2>&1 &
in_ns ethhost1 ping -q -i 0.01 -w 40 10.10.0.99 >/dev/null 2>&1 &
sleep 1
tap_is "the master is gw1: ethhost1 reaches the service address 10.20.0.1 at gw1's MAC" \
	"$(in_ns ethhost1 ip -j neigh show 10.20.0.1 | jq -r '.[0].lladdr')" "$gw1_mac"

a1=$(page_load gw1)
d1=$work/gw1.html
tap_is "gw1: the page loaded and polled, no error shown" \
	"$(grep -c '<p id="error" class="error" hidden="">' "$d1" 2>/dev/null) $(jq -r '.error // ""' <<<"$a1")" "1 "
tap_like "gw1: ib0, IPoIB on the HCA gw1, up, MTU 2044, its addresses" "$(row "$d1" links ib0)" \
	"^ib0\|ipoib\|gw1\|up\|2044\|10\.10\.0\.2/24 fd00:10::2/64\|[1-9]"
tap_like "gw1: eth0, Ethernet on the device eth0, up, MTU 1500, its addresses" "$(row "$d1" links eth0)" \
	"^eth0\|ether\|eth0\|up\|1500\|10\.20\.0\.2/24 fd00:20::2/64\|[1-9]"
tap_like "gw1 routes: the connected subnet of ib0" "$(row "$d1" routes 10.10.0.0/24)" \
	"^10\.10\.0\.0/24\|\|ib0\|kernel\|"
tap_like "gw1 routes: the service address 10.10.0.1, held by the master" "$(row "$d1" routes 10.10.0.1)" \
	"^10\.10\.0\.1\|\|ib0\|kernel\|"
tap_like "gw1 routes: the static route from the config" "$(row "$d1" routes 10.30.0.0/24)" \
	"^10\.30\.0\.0/24\|10\.20\.0\.11\|eth0\|static\|"
tap_like "gw1 neighbours: the IB host with its QPN and GID (its own IPoIB address)" \
	"$(row "$d1" neighbours 10.10.0.13)" "^10\.10\.0\.13\|ib0\|$ib3_hw\|(REACHABLE|STALE|DELAY|PROBE)$"
tap_like "gw1 neighbours: the Ethernet host with its MAC" "$(row "$d1" neighbours 10.20.0.11)" \
	"^10\.20\.0\.11\|eth0\|$eth1_mac\|(REACHABLE|STALE|DELAY|PROBE)$"
tap_like "gw1 paths: the PathRecord to the IB host, valid, with its GID and LID" "$(rows "$d1" paths)" \
	"dgid=$ib3_gid sgid=$gw1_gid state=valid dlid=$ib3_lid "
tap_like "gw1 multicast: the broadcast group joined, with OpenSM's MLID" "$(rows "$d1" mcast)" \
	"mgid=ff12:401b:ffff::ffff:ffff dev=ib0 join=full state=joined mlid=$bcast_mlid "
tap_like "gw1 failover: group svc MASTER, priority 150, its peer BACKUP" "$(row "$d1" failover group)" \
	"^group\|svc\|master\|priority=150 .*peer_state=backup peer_priority=100 "
tap_is "gw1 failover: both heartbeat paths alive" \
	"$(row "$d1" failover path | cut -d'|' -f2,3 | sort | paste -sd' ')" "eth0|alive ib0|alive"
tap_like "gw1 failover: the last transition, to master" "$(rows "$d1" transitions | tail -n1)" \
	"^[0-9.]+ s\|svc\|(init|backup|fault)\|master\|[a-z]"
# Rates: heartbeats alone make about 100 packets/s each way on each link (one per 10 ms);
# the 200/s echo requests cross eth0 -> ib0 and their replies ib0 -> eth0, the 100/s to
# nobody come in on eth0.
r_eth_rx=$(cell "$d1" links eth0 9 | num)
r_ib_tx=$(cell "$d1" links ib0 10 | num)
echo "# gw1 rates: eth0 rx $r_eth_rx/s, ib0 tx $r_ib_tx/s; all links $(caption_rate "$d1" packets)/s packets, $(caption_rate "$d1" drops)/s drops; pings: $(tr '\n' ' ' <"$work/ping.log")"
tap_is "gw1 links: eth0 receives and ib0 sends above 200 packets/s (heartbeats 100, pings 200-300)" \
	"$(ge "$r_eth_rx" 200 && echo yes) $(ge "$r_ib_tx" 200 && echo yes)" "yes yes"
# (A pair's start leaves some 15 drops on ib0: heartbeats before the peer is resolved.)
tap_is "gw1 links: ib0 counts more than 100 drops (the pings to an IB address nobody has)" \
	"$(ge "$(cell "$d1" links ib0 11 | num)" 100 && echo yes)" yes
pk1=$(caption_rate "$d1" packets)
tap_is "gw1 graph: packets above the idle gw2's by more than 400/s, from 2 or more samples" \
	"$(awk -v a="$pk1" -v b="$pk2" 'BEGIN { print (a - b > 400) }') $(ge "$(caption_samples "$d1" packets)" 2 && echo yes)" "1 yes"
tap_is "gw1 graph: drops above 0/s" "$(awk -v r="$(caption_rate "$d1" drops)" 'BEGIN { print (r > 0) }')" 1
tap_is "gw1 graphs: both lines drawn on their canvases" \
	"$(jq -r '.eval | (.["graph-packets"] >= 5) and (.["graph-drops"] >= 5)' <<<"$a1" 2>&1)" true
tap_like "gw1: a screenshot of the whole page kept" \
	"$(file -b "$build/artifacts/status_page-gw1.png" 2>&1)" "^PNG image data, 1280 x [0-9]+"

tap_done
