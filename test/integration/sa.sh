#!/usr/bin/env bash
# The SA client (sm-client/) against the real OpenSM on ibsim, through test/tools/saclient
# run inside the rack's gw1 node (routed topology):
#  - a full-member join of the IPv4 broadcast group shows in `saquery --smkey 1 -m` with
#    our port GID and JoinState, and is gone after the leave;
#  - the PathRecord we resolve equals `saquery -p --src-to-dst` field for field;
#  - an off-subnet DGID resolves through the router (its LID, hop limit 255); with a
#    local GID route it resolves without a MAD;
#  - our trap subscriptions show in `saquery --smkey 1 -I` and go away on exit;
#  - OpenSM killed: the cached path keeps answering, MADs sent stay bounded; OpenSM back:
#    rejoin and resubscribe.
# Needs root, ibsim, opensm, infiniband-diags; IBGW_BUILD (absolute) holds tools/saclient.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
. "$top/test/lib/rack_suite.sh"
sac=$build/tools/saclient
suite_init sa
bg=
suite_cleanup_hook() { [ -n "$bg" ] && kill "$bg" 2>/dev/null && wait "$bg" 2>/dev/null; }

tap_plan 17
suite_need_built "$sac"
if ! R up routed --bare >"$work/up.log" 2>&1; then
	tap_not_ok "rack up" "$(cat "$work/up.log")"
	exit 1
fi
tap_ok "rack up (routed topology)"
ex() { R exec "$1" -- timeout "${T:-60}" "${@:2}"; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" | head -1; }

gw=$(ex gw1 "$sac" port)
gwlid=$(echo "$gw" | field lid)
gwgid=$(echo "$gw" | field gid)
h1=$(ex ibhost1 "$sac" port)
h1lid=$(echo "$h1" | field lid)
h1gid=$(echo "$h1" | field gid)
tap_like "gw1 and ibhost1 ports are active with LIDs" "$gwlid/$h1lid $gw" '^[0-9]+/[0-9]+ .*state=4'

# --- broadcast group join --------------------------------------------------------
mgid=ff12:401b:ffff::ffff:ffff
ex gw1 "$sac" join "$mgid" --hold 4000 >"$work/join.out" 2>&1 &
bg=$!
for _ in $(seq 50); do grep -q '^joined' "$work/join.out" && break; sleep 0.1; done
tap_like "join answered with the group's parameters" "$(cat "$work/join.out")" \
	"^joined mgid=$mgid port_gid=$gwgid mlid=0xc000 qkey=0x00000b1b pkey=0xffff mtu=4 rate=3 sl=0 .*join_state=0x1"
m=$(ex gw2 saquery --smkey 1 -m 2>&1)
tap_like "saquery -m shows our port GID as a full member" "$(printf '%s' "$m" | tr '\n' ' ')" \
	"PortGid\.*$gwgid[[:space:]]*ScopeState\.*0x21"
wait "$bg"; rc=$?; bg=
tap_like "join/leave exits cleanly after the leave" "rc=$rc $(tr '\n' ' ' <"$work/join.out")" "^rc=0 .*left mgid=$mgid"
m=$(ex gw2 saquery --smkey 1 -m 2>&1)
if printf '%s' "$m" | grep -q "$gwgid"; then tap_not_ok "leave removed our membership" "$m"
else tap_ok "leave removed our membership"; fi

# --- PathRecord equals saquery's --------------------------------------------------
p=$(ex gw1 "$sac" --pkey any path "$h1gid" 2>&1)
s=$(ex gw1 saquery -p --src-to-dst "$gwlid:$h1lid" 2>&1)
sv() { printf '%s\n' "$s" | sed -n "s/^[[:space:]]*$1\.\.\.*\(.*\)$/\1/p" | head -1; }
num() { printf '%d' "$1"; }
exp="dgid=$h1gid sgid=$gwgid dlid=$(sv dlid) slid=$(sv slid) sl=$(num "$(sv sl)") mtu=$(($(sv mtu) & 63)) rate=$(($(sv rate) & 63)) pkt_life=$(($(sv pkt_life) & 63)) hop_limit=$(($(sv hop_flow_raw) & 255)) flow_label=0x$(printf '%x' $((($(sv hop_flow_raw) >> 8) & 0xfffff))) tclass=$(num "$(sv tclass)") pkey=$(sv pkey | tr A-F a-f)"
got=$(printf '%s\n' "$p" | sed -n 's/^path \(.*\) reversible=.*/\1/p')
tap_is "PathRecord equals saquery -p --src-to-dst $gwlid:$h1lid" "$got" "$exp"

# --- off-subnet ----------------------------------------------------------------
rtlid=$(ex gw1 iblinkinfo 2>/dev/null | sed -n 's/.*==>[[:space:]]*\([0-9]*\)[[:space:]]*1\[.*"Rt".*/\1/p' | head -1)
p=$(ex gw1 "$sac" path fec0:0:0:1::1234 2>&1)
tap_like "off-subnet DGID resolves through the router (LID ${rtlid:-?})" "$p" \
	"^path dgid=fec0:0:0:1::1234 .* dlid=${rtlid:-X} .* hop_limit=255 .*local=0"
p=$(ex gw1 "$sac" --gid-route fec0:0:0:2::/64=7,9 path fec0:0:0:2::5 2>&1)
tap_like "a local GID route answers without the SA" "$p" \
	'^path dgid=fec0:0:0:2::5 .* dlid=(7|9) .*hop_limit=255 .*local=1'
# (sent counts retries too: a probe retried on a busy machine is still no query)
tap_is "... and sends no PathRecord query (only the ClassPortInfo probe)" \
	"$(printf '%s\n' "$p" | sed -n 's/^stats sent=\([0-9]*\) .* retries=\([0-9]*\) .*/\1 \2/p' |
		awk '{ print $1 - $2 }')" 1

# --- subscriptions ---------------------------------------------------------------
ex gw1 "$sac" subscribe --hold 4000 >"$work/sub.out" 2>&1 &
bg=$!
for _ in $(seq 50); do grep -q '^subscription trap=67' "$work/sub.out" && break; sleep 0.1; done
tap_like "InformInfo Set for traps 64-67 accepted" "$(tr '\n' ' ' <"$work/sub.out")" \
	'trap=64 subscribed=1.*trap=65 subscribed=1.*trap=66 subscribed=1.*trap=67 subscribed=1'
i=$(ex gw2 saquery --smkey 1 -I 2>&1)
tap_like "saquery -I shows our subscription" "$(printf '%s' "$i" | tr '\n' ' ')" \
	"SubscriberGID\.*$gwgid .*trap_num\.*6[4-7]"
wait "$bg"; bg=
i=$(ex gw2 saquery --smkey 1 -I 2>&1)
if printf '%s' "$i" | grep -q "$gwgid"; then tap_not_ok "unsubscribed on exit" "$i"
else tap_ok "unsubscribed on exit"; fi

# --- OpenSM killed and restarted -----------------------------------------------------
T=120 ex gw1 "$sac" --path-ttl 2000 --floor 200 --max 1000 --probe-max 2000 run \
	--join "$mgid" --subscribe --path "$h1gid" --duration 100 >"$work/run.out" 2>&1 &
bg=$!
for _ in $(seq 100); do grep -q 'joins=1 subscriptions=4' "$work/run.out" && break; sleep 0.1; done
R sm kill >"$work/sm.log" 2>&1
before=$(tail -1 "$work/run.out")
sleep 15
during=$(tail -1 "$work/run.out")
sent0=$(echo "$before" | field sent)
sent1=$(echo "$during" | field sent)
ok0=$(echo "$before" | field lookups_ok)
ok1=$(echo "$during" | field lookups_ok)
fail1=$(echo "$during" | field lookups_fail)
fail0=$(echo "$before" | field lookups_fail)
tap_like "SA marked unreachable while OpenSM is dead" "$during" 'sa_reachable=0 sa_down=1'
tap_is "cached path kept answering (lookups ok +$((ok1 - ok0)), failed +$((fail1 - fail0)))" \
	"$((fail1 - fail0)) $((ok1 - ok0 >= 12))" "0 1"
tap_is "MADs sent in 15 s without an SA stay bounded ($((sent1 - sent0)) <= 25)" \
	"$((sent1 - sent0 <= 25))" "1"
R sm start >>"$work/sm.log" 2>&1
for _ in $(seq 60); do
	tail -1 "$work/run.out" | grep -q 'sa_reachable=1 sa_down=1 sa_up=1' &&
		tail -1 "$work/run.out" | grep -q 'joins=2 subscriptions=8' && break
	sleep 0.5
done
m=$(ex gw2 saquery --smkey 1 -m 2>&1)
i=$(ex gw2 saquery --smkey 1 -I 2>&1)
tap_like "after OpenSM returns: rejoined and resubscribed" \
	"$(tail -1 "$work/run.out") $(printf '%s' "$m" | grep -c "$gwgid")/$(printf '%s' "$i" | grep -c "$gwgid")" \
	'sa_reachable=1 sa_down=1 sa_up=1 .*joins=2 subscriptions=8 .* [1-9]/[1-9]'
kill "$bg" 2>/dev/null; wait "$bg" 2>/dev/null; bg=
echo "# outage: $(echo "$during" | cut -c1-200)"
if ! tail -1 "$work/run.out" | grep -q 'sa_up=1'; then   # what the SA did meanwhile
	tail -n 5 "$work/sm.log" | sed 's/^/# sm: /'
	printf '%s\n' "$m" | head -n 5 | sed 's/^/# saquery -m: /'
	grep -v '^status' "$work/run.out" | tail -n 5 | sed 's/^/# saclient: /'
	tail -n 5 "$RACK_STATE/logs/opensm-sm.log" | sed 's/^/# opensm: /'
fi
tap_done
