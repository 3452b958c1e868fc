#!/usr/bin/env bash
# The SA client (sm-client/) through an SM failover and through its own port going down,
# against the real OpenSM on ibsim, with test/tools/saclient's long-running `watch` mode
# in the rack's gw1 node (it keeps a broadcast-group join, trap subscriptions and one
# cached path, re-reads its port with a PortInfo SMP once a second, and prints
# timestamped events; SIGUSR1 prints its counters):
#  (a) a standby OpenSM on sm2 takes over when the master is killed (`sim/rack sm kill`):
#      the client sees the SM LID change, rejoins the broadcast group and resubscribes
#      to the new master (`saquery --smkey 1 -m` and `-I` against it show our GID), the
#      cached path answering throughout and the MADs sent meanwhile bounded;
#  (b) gw1's own link down (`sim/rack link gw1 down`) and up: the client sees the port
#      leave ACTIVE, keeps its cached path (stale, still answering), sends nothing
#      while down, and after link up rejoins, resubscribes and re-resolves the path.
# Prints the measured timings as TAP comments. Needs root, ibsim, opensm,
# infiniband-diags; IBGW_BUILD (absolute) holds tools/saclient (not an ASan build:
# umad2sim's read overflows its buffer by 32 octets under ASan).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
sac=$build/tools/saclient
suite_init saf
bg=
suite_cleanup_hook() { [ -n "$bg" ] && kill "$bg" 2>/dev/null && wait "$bg" 2>/dev/null; }

tap_plan 15
suite_need_built "$sac"
if ! R up --bare >"$work/up.log" 2>&1; then
	tap_not_ok "rack up" "$(cat "$work/up.log")"
	exit 1
fi
ex() { R exec "$1" -- timeout "${T:-60}" "${@:2}"; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" | head -1; }
ms() { date +%s%3N; }
out=$work/watch.out
# wait_for REGEX [TENTHS]: until a line of the client's output matches (after $from).
from=1
wait_for() {
	for _ in $(seq "${2:-200}"); do
		tail -n +"$from" "$out" | grep -q -- "$1" && return 0
		sleep 0.1
	done
	return 1
}
line_of() { tail -n +"$from" "$out" | grep -- "$1" | head -1; }
status_now() { # SIGUSR1: the client prints its counters
	local n; n=$(grep -c '^status' "$out")
	kill -USR1 "$pid"
	for _ in $(seq 30); do [ "$(grep -c '^status' "$out")" -gt "$n" ] && break; sleep 0.1; done
	grep '^status' "$out" | tail -1
}

R sm standby start >"$work/sm.log" 2>&1
for _ in $(seq 100); do
	ex sm2 sminfo 2>/dev/null | grep -q 'SMINFO_MASTER' && break
	sleep 0.1
done
# The standby shows in the master's SMInfo poll as STANDBY after its first sweep.
sleep 2
sm1=$(ex gw1 "$sac" port | field sm_lid)
sm2lid=$(ex sm2 "$sac" port | field lid)
h1gid=$(ex ibhost1 "$sac" port | field gid)
gwgid=$(ex gw1 "$sac" port | field gid)
tap_like "rack up, master on sm (LID $sm1), standby started on sm2 (LID $sm2lid)" \
	"$sm1/$sm2lid $(R sm status 2>&1 | tr '\n' ' ')" '^[0-9]+/[0-9]+ .*sm2: opensm running'

mgid=ff12:401b:ffff::ffff:ffff
# watch TTL_MS: start the client (join, subscribe, one path) and wait until it is set.
watch() {
	from=1
	T=300 ex gw1 "$sac" --path-ttl "$1" --floor 200 --max 1000 --probe-max 2000 watch \
		--join "$mgid" --subscribe --path "$h1gid" --duration 240 >"$out" 2>&1 &
	bg=$!
	wait_for 'type=subscribed subscribed=4' 100
	pid=$(line_of 'type=start' | field pid)
	st=$(status_now)
}
stop_watch() {   # TERM, then (bounded) KILL: a hung exit must not hang the suite
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null; wait "$bg" 2>/dev/null; bg=
}
# (a) with a 3 s path lifetime, so that path refreshes also go to the dead master.
watch 3000
tap_like "watch: joined, subscribed to 4 traps, path cached (sm_lid $sm1)" \
	"$st" "joins=1 subscriptions=4 .*sm_lid=$sm1 port_active=1 .*paths=1 .*subscribed=4"

# --- (a) the master dies, the standby takes over ----------------------------------------
from=$(($(wc -l <"$out") + 1))
sent0=$(echo "$st" | field sent)
ok0=$(echo "$st" | field lookups_ok)
fail0=$(echo "$st" | field lookups_fail)
reval0=$(echo "$st" | field path_revalidated)
t0=$(ms)
R sm kill >>"$work/sm.log" 2>&1
wait_for "type=port .*sm_lid=$sm2lid " 300
ev_port=$(line_of "type=port .*sm_lid=$sm2lid ")
tap_like "the client sees the SM LID change to the standby's ($sm2lid)" "$ev_port" \
	"type=port lid=[0-9]+ sm_lid=$sm2lid state=4 \(was .*sm_lid=$sm1 "
wait_for 'type=joined' 100
ev_join=$(line_of 'type=joined')
tap_like "... and rejoins the broadcast group through the new master" "$ev_join" 'mlid=0xc000 error=0'
wait_for 'type=subscribed subscribed=4 subscriptions=8' 100
ev_sub=$(line_of 'type=subscribed subscribed=4 subscriptions=8')
tap_like "... and resubscribes to the 4 traps" "$ev_sub" 'subscriptions=8'
m=$(ex gw2 saquery --smkey 1 -m 2>&1)
tap_like "saquery -m against the new master shows our port GID as a full member" \
	"$(printf '%s' "$m" | tr '\n' ' ')" "PortGid\.*$gwgid[[:space:]]*ScopeState\.*0x21"
i=$(ex gw2 saquery --smkey 1 -I 2>&1)
tap_like "saquery -I against the new master shows our subscription" \
	"$(printf '%s' "$i" | tr '\n' ' ')" "SubscriberGID\.*$gwgid .*trap_num\.*6[4-7]"
sleep 2 # let the path revalidation through the new SA finish
st=$(status_now)
sent1=$(echo "$st" | field sent)
ok1=$(echo "$st" | field lookups_ok)
fail1=$(echo "$st" | field lookups_fail)
t_port=$(echo "$ev_port" | field t)
t_join=$(echo "$ev_join" | field t)
t_sub=$(echo "$ev_sub" | field t)
sent_join=$(echo "$ev_join" | field sent)
tap_is "the cached path answered throughout (lookups ok +$((ok1 - ok0)), failed +$((fail1 - fail0)))" \
	"$((fail1 - fail0)) $((ok1 - ok0 >= 3))" "0 1"
tap_is "path revalidated through the new SA (the old one is dead): path_revalidated $reval0 -> $(echo "$st" | field path_revalidated)" \
	"$(echo "$st" | field sm_lid) $(($(echo "$st" | field path_revalidated) > reval0))" "$sm2lid 1"
tap_is "MADs sent from the kill to rejoined+resubscribed+revalidated bounded ($((sent1 - sent0)) <= 30)" \
	"$((sent1 - sent0 <= 30))" "1"
echo "# failover: SM LID change seen $((t_port - t0)) ms after the kill, rejoined at $((t_join - t0)) ms, resubscribed at $((t_sub - t0)) ms"
echo "# failover: MADs sent: $((sent_join - sent0)) until rejoined, $((sent1 - sent0)) in all (kill + $((($(ms) - t0) / 1000)) s)"
echo "# failover: $(echo "$st" | cut -c1-400)"

stop_watch
tap_like "the client exits with its counters" "$(tail -2 "$out" | tr '\n' ' ')" '^status .*stats sent='

# --- (b) our own link down and up ------------------------------------------------------
# A fresh client with a 60 s path lifetime: every revalidation seen is the link's doing.
watch 60000
from=$(($(wc -l <"$out") + 1))
sent0=$(echo "$st" | field sent)
fail0=$(echo "$st" | field lookups_fail)
reval0=$(echo "$st" | field path_revalidated)
t0=$(ms)
R link gw1 down >"$work/link.log" 2>&1
wait_for 'type=port-down' 50
ev_down=$(line_of 'type=port-down')
tap_like "link down: the client sees its port leave ACTIVE" "$(line_of 'type=port ') $ev_down" \
	'type=port .*state=1 .*type=port-down'
sleep 6
st=$(status_now)
tap_like "while down: the path is kept, stale, still answering" "$st" \
	"port_active=0 port_downs=1 paths=1 paths_stale=1 "
tap_is "while down: no MAD sent, no lookup failed (sent +$(($(echo "$st" | field sent) - sent0)), failed +$(($(echo "$st" | field lookups_fail) - fail0)))" \
	"$(($(echo "$st" | field sent) - sent0)) $(($(echo "$st" | field lookups_fail) - fail0))" "0 0"
from=$(($(wc -l <"$out") + 1))
t1=$(ms)
R link gw1 up >>"$work/link.log" 2>&1
wait_for 'type=joined' 100
ev_join=$(line_of 'type=joined')
wait_for 'type=subscribed subscribed=4' 100
sleep 2
st=$(status_now)
tap_like "link up: reregistered, rejoined, path re-resolved (revalidated, not stale)" \
	"$(line_of 'type=reregister') $ev_join $st" \
	"type=reregister .*type=joined .*error=0 .*port_active=1 port_downs=1 paths=1 paths_stale=0 path_revalidated=$((reval0 + 1)) subscribed=4"
echo "# link: port down seen $(($(echo "$ev_down" | field t) - t0)) ms after unlink; rejoined $(($(echo "$ev_join" | field t) - t1)) ms after relink; MADs for the recovery: $(($(echo "$st" | field sent) - sent0))"
stop_watch
tap_done
