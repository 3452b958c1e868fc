#!/usr/bin/env bash
# Instructions per forwarded packet: the pipeline (fwd_bench's "ibgw pipeline") against
# the minimal rte_lpm/lpm4 loop, counted by callgrind. On a machine whose speed swings
# between runs (a VM), fwd_bench's timings move by 2x; an instruction count does not,
# so this shows what a change to the per-packet path costs or saves, run after run.
# It says nothing about cache misses (the timed bench/fwd_bench does).
#
#   bench/fwd_instr.sh [BUILD_DIR]     # default build/; needs valgrind, tor-geoipdb
#
# The tables are every 20th of tor-geoipdb's prefixes (callgrind builds them 50x
# slower than native), 128 packets per set (all in cache), one round of 40 passes:
# 5,120 packets per implementation. Ours is counted from run_ours (classify, the
# burst's stages, fwd_input_* for what they leave, the descriptor queued), the
# reference from run_ref (its lookups, header
# check, neighbour hash, rewrite), averaged over its implementations (lpm4 and
# rte_lpm with DPDK, lpm4 alone without).
set -euo pipefail
build=${1:-build}
bin=$build/bench/fwd_bench
[ -x "$bin" ] || { echo "fwd_instr: $bin not built (make bench)"; exit 1; }
command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null ||
	{ echo "fwd_instr: valgrind not installed (make bench-deps)"; exit 1; }
for f in /usr/share/tor/geoip /usr/share/tor/geoip6; do
	[ -r "$f" ] || { echo "fwd_instr: $f not readable (make bench-deps)"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for v in "" 6; do
	{ grep '^#' "/usr/share/tor/geoip$v" || true; grep -v '^#' "/usr/share/tor/geoip$v" |
		awk 'NR % 20 == 0'; } >"$tmp/geoip$v"
done
packets=$((128 * 40))
eal="--no-huge --no-pci --no-shconf --no-telemetry -m 256 -l 0 --log-level=error"

# Instructions under function $1, fwd_bench run with the rest of the arguments.
count() {
	local fn=$1
	shift
	valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" --toggle-collect="$fn" \
		"$bin" --geoip "$tmp/geoip" --geoip6 "$tmp/geoip6" --rounds 1 --packets 128 \
		--eal "$eal" "$@" >"$tmp/out" 2>"$tmp/err" ||
		{ echo "fwd_instr: fwd_bench failed under callgrind:" >&2; tail -5 "$tmp/err" >&2; exit 1; }
	callgrind_annotate "$tmp/cg" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

printf '%-22s %10s %10s %8s\n' "instructions/packet" ours minimal ours/min
for set in "IPoIB->Ethernet   64" "IPoIB->Ethernet 1500" "Ethernet->IPoIB   64" \
	"Ethernet->IPoIB 1500" "IPv6 IPoIB->Eth   64" "IPv6 Eth->IPoIB   64"; do
	ours_ir=$(count run_ours --ours-only --set "$set")
	ours=$((ours_ir / packets))
	if [[ $set == IPv6* ]]; then
		printf '%-22s %10d %10s %8s\n' "$set" "$ours" - -
		continue
	fi
	ref_ir=$(count run_ref --set "$set")
	nref=$(grep -c 'minimal + ' "$tmp/out")
	ref=$((ref_ir / packets / nref))
	printf '%-22s %10d %10d %8s\n' "$set" "$ours" "$ref" \
		"$(awk -v a="$ours" -v b="$ref" 'BEGIN { printf "%.1fx", a / b }')"
done
