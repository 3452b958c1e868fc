#!/usr/bin/env bash
# Independent check of cm/'s CM MAD encoding: test/tools/cm_pcap.c encodes the MADs of
# one IPoIB-CM connection's life (REQ, MRA, REP, RTU, a REJ, DREQ, DREP) with
# cm/cm_mad.h, sends each as a UD packet to QP1 into a pcap of ERF type-21 records, and
# prints the values tshark must decode. tshark (Wireshark's CM dissector) must show:
# every field the helper printed (service ID, QPNs, PSNs, P_Key, path MTU, comm IDs,
# timeouts, LIDs, GIDs, REJ reason ...), the IPoIB private data octets at the start of
# each message's private data, our service ID 0x10000000000000xx and NOT the RDMA IP CM
# reading (tshark dissects 0x0000000001PPPPPP service IDs as RDMA IP CM and would fill
# infiniband.cm.req.ip_cm.*), and no expert warnings.
# Needs: tshark, $IBGW_BUILD/tools/cm_pcap (built by make; test/run sets IBGW_BUILD).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/lib/tap.sh"
build=${IBGW_BUILD:-$top/build}
work=$(mktemp -d /tmp/ibgw-cm-tshark.XXXXXX)
trap 'rm -rf "$work"' EXIT

norm() { if [[ $1 =~ ^0x[0-9a-fA-F]+$ ]]; then printf '%d' "$1"; else printf '%s' "$1"; fi; }

tap_plan 9
if ! command -v tshark >/dev/null; then
	tap_not_ok "tshark is installed" "apt-get install tshark"
	exit 1
fi
tap_check "helper is built (make builds test/tools/)" test -x "$build/tools/cm_pcap"
tap_check "helper writes the capture" sh -c "'$build/tools/cm_pcap' '$work/cm.pcap' >'$work/expect'"

# Every field any packet expects, plus the private data, the RDMA IP CM fields, the
# protocol stack and expert info.
mapfile -t fields < <(tr ' ' '\n' <"$work/expect" | grep '^infiniband\.' | cut -d= -f1 | sort -u)
extra=(infiniband.cm.req.private infiniband.cm.rep.private infiniband.cm.rej.private
	infiniband.cm.req.ip_cm infiniband.cm.req.ip_cm.sport infiniband.cm.req.serviceid.protocol
	frame.protocols _ws.expert.severity _ws.col.Info)
all=("${fields[@]}" "${extra[@]}")
args=()
for f in "${all[@]}"; do args+=(-e "$f"); done
tshark -r "$work/cm.pcap" -T fields -E "separator=|" -E occurrence=f "${args[@]}" \
	>"$work/got" 2>"$work/tshark.err"
tap_is "tshark decodes 7 packets" "$(wc -l <"$work/got")" "7"
tap_is "as REQ, MRA, REP, RTU, REJ, DREQ, DREP" \
	"$(tshark -r "$work/cm.pcap" -T fields -e _ws.col.Info 2>/dev/null | tr '\n' ' ')" \
	"CM: ConnectRequest CM: MsgRcptAck CM: ConnectReply CM: ReadyToUse CM: ConnectReject CM: DisconnectRequest CM: DisconnectReply "

mismatch=()
checked=0
pkt=0
pdata_ok=0
while IFS= read -r expect && IFS="|" read -r -a got <&3; do
	pkt=$((pkt + 1))
	declare -A val=()
	for i in "${!all[@]}"; do val[${all[$i]}]=${got[$i]:-}; done
	kind=$(grep -o 'kind=[a-z]*' <<<"$expect" | cut -d= -f2)
	for kv in $expect; do
		k=${kv%%=*} v=${kv#*=}
		case $k in
		kind) ;;
		pdata)
			p=${val[infiniband.cm.$kind.private]:-}
			p=${p//:/}
			if [[ $p == "$v"* ]]; then pdata_ok=$((pdata_ok + 1)); else
				mismatch+=("packet $pkt ($kind): private data '${p:0:16}' lacks $v")
			fi ;;
		*)
			if [ "$(norm "$v")" != "$(norm "${val[$k]:-<absent>}")" ]; then
				mismatch+=("packet $pkt: $k built '$v' decoded '${val[$k]:-<absent>}'")
			fi
			checked=$((checked + 1)) ;;
		esac
	done
	[[ ${val[frame.protocols]} == *infiniband* ]] ||
		mismatch+=("packet $pkt: protocols '${val[frame.protocols]}'")
	case ${val[_ws.expert.severity]:-} in
	"" | *2097152*) ;;
	*) mismatch+=("packet $pkt: tshark expert info severity ${val[_ws.expert.severity]}") ;;
	esac
	if [ "$kind" = req ]; then
		req_sid=${val[infiniband.cm.req.serviceid]}
		req_ipcm="${val[infiniband.cm.req.ip_cm]}${val[infiniband.cm.req.ip_cm.sport]}${val[infiniband.cm.req.serviceid.protocol]}"
	fi
	unset val
done <"$work/expect" 3<"$work/got"
if [ ${#mismatch[@]} -eq 0 ] && [ "$checked" -gt 60 ]; then
	tap_ok "every built field decodes to its value ($checked fields in $pkt packets)"
else
	tap_not_ok "every built field decodes to its value ($checked checked)" "${mismatch[@]}" \
		"$(cat "$work/tshark.err")"
fi
tap_is "IPoIB private data (UD QPN, receive MTU) at the start of REQ, REP and REJ data" \
	"$pdata_ok" "3"
tap_like "the REQ's service ID is IPoIB-CM's (0x1000000000000000 | UD QPN 0x49)" \
	"${req_sid:-}" '^0x1000000000000049$'
tap_is "tshark does not read it as an RDMA IP CM service ID" "${req_ipcm:-}" ""
# Control: the same REQ with an RDMA IP CM service ID (0x0000000001 | port space 0x06
# TCP | port 0x0049) is read as one, so the check above can fail. The service ID sits
# at 24 (pcap file header) + 16 (record header) + 16 (ERF) + 28 (LRH BTH DETH) + 32.
cp "$work/cm.pcap" "$work/ipcm.pcap"
printf '\x00\x00\x00\x00\x01\x06\x00\x49' |
	dd of="$work/ipcm.pcap" bs=1 seek=116 conv=notrunc status=none
tap_is "control: an RDMA IP CM service ID is decoded as such (protocol 0x06, port 0x0048)" \
	"$(tshark -r "$work/ipcm.pcap" -c 1 -T fields -E separator=, \
		-e infiniband.cm.req.serviceid.protocol -e infiniband.cm.req.ip_cm.sport 2>/dev/null)" \
	"0x06,0x0048"
tap_done
