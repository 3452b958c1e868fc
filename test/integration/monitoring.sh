#!/usr/bin/env bash
# The monitoring kit (packaging/monitoring/): the Prometheus alert rules pass `promtool
# check rules` and their unit tests (`promtool test rules`: each alert fires on a series
# that should trigger it and stays silent on one that should not); the Grafana dashboard
# is valid JSON of the expected shape; every ibgw_* name in a rule, a panel or an
# annotation is a metric ibgwd exports (one its sources write); the package installs both.
# Needs promtool (Debian: prometheus) and jq; no root, no rack.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/lib/tap.sh"
kit=$top/packaging/monitoring
rules=$kit/ibgw-alerts.yml
dash=$kit/ibgw-dashboard.json

tap_plan 9
if ! command -v promtool >/dev/null || ! command -v jq >/dev/null; then
	for i in $(seq 9); do tap_ok "skip # SKIP needs promtool and jq"; done
	exit 0
fi

tap_check "promtool check rules" promtool check rules "$rules"
tap_check "promtool test rules (each alert fires and stays silent as it should)" \
	bash -c "cd '$kit' && promtool test rules ibgw-alerts.test.yml"
# The alerts the operator asked for are all there.
want="IbgwDown IbgwFailoverTransition IbgwLinkDown IbgwDropsRising IbgwNeighbourTableFull IbgwSaUnreachable"
have=$(grep -oE '^ *- alert: [A-Za-z]+' "$rules" | awk '{print $3}' | tr '\n' ' ')
missing=""
for a in $want; do case " $have " in *" $a "*) ;; *) missing="$missing $a" ;; esac; done
tap_is "the rules cover down, failover, link, drops, neighbour table, SA" "$missing" ""

tap_check "the dashboard is JSON with a title, a uid and panels" \
	jq -e '(.title | length > 0) and (.uid | length > 0) and (.panels | length > 10)' "$dash"
tap_check "every panel has a grid position; every non-row panel has queries" \
	jq -e 'all(.panels[]; .gridPos.w > 0 and .gridPos.h > 0 and
		(.type == "row" or ((.targets | length) > 0 and all(.targets[]; (.expr | length) > 0))))' \
	"$dash"
ids=$(jq '[.panels[].id] | (length == (unique | length))' "$dash")
tap_is "panel ids are unique" "$ids" "true"

# The metric names ibgwd writes: the string literals of its sources.
exported=$(grep -rhoE '"ibgw_[a-z0-9_]+' "$top/gateway" "$top/mgmt" "$top/ha" "$top/lib" \
	--include='*.c' | tr -d '"' | sort -u)
unknown_names() {
	local n bad=""
	for n in $(grep -oE 'ibgw_[a-z0-9_]+' | sort -u); do
		grep -qxF "$n" <<<"$exported" || bad="$bad $n"
	done
	echo "$bad"
}
tap_is "every metric the dashboard queries exists" \
	"$(jq -r '.panels[].targets[]?.expr, .annotations.list[].expr?, .templating.list[].definition?' \
		"$dash" | unknown_names)" ""
tap_is "every metric the alert rules use exists" \
	"$(grep -E '^ *expr:' "$rules" | unknown_names)" ""

dest=$(mktemp -d /tmp/ibgw-monitoring.XXXXXX)
trap 'rm -rf "$dest"' EXIT
make -s -C "$top" install-monitoring DESTDIR="$dest" PREFIX=/usr >/dev/null
tap_check "make install puts the kit in /usr/share/ibgw/monitoring" \
	test -s "$dest/usr/share/ibgw/monitoring/ibgw-alerts.yml" -a \
	-s "$dest/usr/share/ibgw/monitoring/ibgw-dashboard.json" -a \
	-s "$dest/usr/share/ibgw/monitoring/ibgw-alerts.test.yml"
tap_done
