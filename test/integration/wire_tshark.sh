#!/usr/bin/env bash
# Independent check of lib/'s IB packet encoding: build a few UD packets (local and
# global; IPoIB ARP and IPv4 ICMP payloads) with test/tools/ib_wire_pcap.c, write them
# as a pcap of ERF type-21 records (what ibdump writes), and check that tshark decodes
# every LRH, GRH, BTH and DETH field, the CRC positions and the IPoIB payloads to the
# values that were built. tshark does not check the CRCs themselves: the unit tests do.
# Needs: tshark, $IBGW_BUILD/tools/ib_wire_pcap (built by make; test/run sets IBGW_BUILD).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
build=${IBGW_BUILD:-$top/build}
work=$(mktemp -d /tmp/ibgw-wire.XXXXXX)
trap 'rm -rf "$work"' EXIT

fields=(lrh.vl lrh.lver lrh.sl lrh.lnh lrh.dlid lrh.pktlen lrh.slid
	grh.ipver grh.tclass grh.flowlabel grh.paylen grh.nxthdr grh.hoplmt grh.sgid grh.dgid
	bth.opcode bth.se bth.m bth.padcnt bth.tver bth.p_key bth.destqp bth.a bth.psn
	deth.q_key deth.srcqp invariant.crc variant.crc
	arp.opcode arp.hw.type arp.src.proto_ipv4 arp.dst.proto_ipv4
	ip.src ip.dst icmp.type ip.len ip.checksum.status icmp.checksum.status
	frame.protocols _ws.expert.severity)
tshark_field() { case $1 in lrh.* | grh.* | bth.* | deth.* | *.crc) echo "infiniband.$1" ;; *) echo "$1" ;; esac; }
# tshark prints some integers in hex (VL, LNH, QPNs, Q_Key): compare numbers as numbers.
norm() { if [[ $1 =~ ^0x[0-9a-fA-F]+$ ]]; then printf '%d' "$1"; else printf '%s' "$1"; fi; }

tap_plan 5
if ! command -v tshark >/dev/null; then
	tap_not_ok "tshark is installed" "apt-get install tshark"
	exit 1
fi
tap_check "helper is built (make builds test/tools/)" test -x "$build/tools/ib_wire_pcap"
tap_check "helper writes the capture" sh -c "'$build/tools/ib_wire_pcap' '$work/w.pcap' >'$work/expect'"

args=()
for f in "${fields[@]}"; do args+=(-e "$(tshark_field "$f")"); done
tshark -r "$work/w.pcap" -o ip.check_checksum:TRUE -T fields \
	-E "separator=|" -E occurrence=f "${args[@]}" >"$work/got" 2>"$work/tshark.err"
tap_is "tshark decodes 4 packets" "$(wc -l <"$work/got")" "4"

# Every key=value the helper printed must equal tshark's field; the payload kind must
# be in tshark's protocol stack; tshark must raise no expert warning or error.
mismatch=()
checked=0
pkt=0
while IFS= read -r expect && IFS="|" read -r -a got <&3; do
	pkt=$((pkt + 1))
	declare -A val=()
	for i in "${!fields[@]}"; do val[${fields[$i]}]=${got[$i]:-}; done
	for kv in $expect; do
		k=${kv%%=*} v=${kv#*=}
		if [ "$k" = payload ]; then
			[[ ${val[frame.protocols]} == *:infiniband:ethertype:*$v* ]] ||
				mismatch+=("packet $pkt: protocols '${val[frame.protocols]}' lack $v")
		elif [ "$(norm "$v")" != "$(norm "${val[$k]:-<absent>}")" ]; then
			mismatch+=("packet $pkt: $k built '$v' decoded '${val[$k]:-<absent>}'")
		fi
		checked=$((checked + 1))
	done
	case ${val[_ws.expert.severity]:-} in
	"" | *2097152*) ;; # none, or chat-level notes only
	*) mismatch+=("packet $pkt: tshark expert info severity ${val[_ws.expert.severity]}") ;;
	esac
	unset val
done <"$work/expect" 3<"$work/got"
if [ ${#mismatch[@]} -eq 0 ] && [ "$checked" -gt 100 ]; then
	tap_ok "every built field decodes to its value ($checked fields in $pkt packets)"
else
	tap_not_ok "every built field decodes to its value ($checked checked)" "${mismatch[@]}" \
		"$(cat "$work/tshark.err")"
fi

# The ICMP packets carry IPv4 and ICMP checksums tshark verified (status 1 = good),
# which shows the payload came through the IB encapsulation octet for octet.
good=$(awk -F"|" -v a=37 -v b=38 '$a == 1 && $b == 1' "$work/got" | wc -l)
tap_is "IPv4 and ICMP checksums good in both ICMP packets" "$good" "2"
tap_done
