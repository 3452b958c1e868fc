/*
 * Whole InfiniBand packets: parse and build LRH [GRH] BTH [DETH|AETH] [ImmDt] payload
 * pad ICRC VCRC, as they cross a link.
 *
 * The simulated fabric uses these on every packet it switches, and counts the packets
 * it drops by the reason ib_packet_parse() gives. The parser checks, in this order
 * (each check only once the earlier ones hold, so each bad packet has one reason):
 *   1. the buffer holds an LRH, LVer is 0, LNH is IBA local (BTH next) or global (GRH);
 *   2. the buffer is exactly PktLen * 4 + 2 bytes (PktLen counts 4-byte words from the
 *      LRH through the ICRC; the 2-byte VCRC is outside it);
 *   3. the VCRC, as the link layer checks it before anything above it looks;
 *   4. the GRH fits, IPVer 6, NxtHdr 0x1B, PayLen = bytes after the GRH through ICRC;
 *   5. the BTH fits, TVer 0, an opcode we handle (RC/UC SEND and ACK, UD SEND);
 *   6. the opcode's extension headers fit, the pad count is not more than what is left;
 *   7. the ICRC.
 * On success every header is decoded and payload/payload_len point into buf (the pad
 * excluded). Reserved bits are kept, not judged: receivers ignore them (IBA 5.2.x).
 *
 * The builder writes the same layout from a struct ib_packet, computing PktLen, the GRH
 * PayLen, the BTH pad count, the pad octets (zeros), ICRC and VCRC itself.
 */
#ifndef IBGW_LIB_IB_PACKET_H
#define IBGW_LIB_IB_PACKET_H

#include <stddef.h>
#include <stdint.h>

#include "lib/ib_crc.h"
#include "lib/ib_hdr.h"

/* Shortest and longest packets: LRH BTH ICRC VCRC, and PktLen's 11 bits. */
#define IB_PACKET_MIN_LEN (IB_LRH_LEN + IB_BTH_LEN + IB_ICRC_LEN + IB_VCRC_LEN)
#define IB_PACKET_MAX_LEN (IB_PKTLEN_MAX * 4 + IB_VCRC_LEN)

struct ib_packet {
	struct ib_lrh lrh;
	bool has_grh; /* LNH is IBA global */
	struct ib_grh grh;
	struct ib_bth bth;
	unsigned ext;        /* IB_EXT_* present; parse sets it, build derives it from the opcode */
	struct ib_deth deth; /* if ext & IB_EXT_DETH */
	struct ib_aeth aeth; /* if ext & IB_EXT_AETH */
	uint32_t imm;        /* if ext & IB_EXT_IMM; the 4 octets as a big-endian number */
	const uint8_t *payload;
	size_t payload_len; /* without the pad */
	uint32_t icrc;      /* as received (parse) */
	uint16_t vcrc;
};

/* Why a packet was refused. Stable numbering: the fabric counts drops per reason. */
enum ib_pkt_err {
	IB_PKT_OK = 0,
	IB_PKT_ERR_SHORT_LRH,  /* buffer shorter than an LRH */
	IB_PKT_ERR_LVER,       /* LRH LVer is not 0 */
	IB_PKT_ERR_LNH,        /* LRH LNH is raw or non-IBA transport */
	IB_PKT_ERR_TRUNCATED,  /* buffer shorter than PktLen * 4 + VCRC */
	IB_PKT_ERR_TRAILING,   /* buffer longer than PktLen * 4 + VCRC */
	IB_PKT_ERR_VCRC,       /* VCRC mismatch */
	IB_PKT_ERR_PKTLEN_GRH, /* PktLen leaves no room for GRH + ICRC */
	IB_PKT_ERR_IPVER,      /* GRH IPVer is not 6 */
	IB_PKT_ERR_NXTHDR,     /* GRH NxtHdr is not 0x1B (IBA transport) */
	IB_PKT_ERR_PAYLEN,     /* GRH PayLen disagrees with LRH PktLen */
	IB_PKT_ERR_PKTLEN_BTH, /* PktLen leaves no room for BTH + ICRC */
	IB_PKT_ERR_TVER,       /* BTH TVer is not 0 */
	IB_PKT_ERR_OPCODE,     /* BTH opcode we do not handle */
	IB_PKT_ERR_PKTLEN_EXT, /* PktLen leaves no room for the opcode's DETH/AETH/ImmDt */
	IB_PKT_ERR_PAD,        /* BTH PadCnt larger than the payload area */
	IB_PKT_ERR_ICRC,       /* ICRC mismatch */
	IB_PKT_ERR_COUNT
};

/* One-line description ("VCRC mismatch") and a counter name ("vcrc"). */
const char *ib_pkt_err_str(enum ib_pkt_err err);
const char *ib_pkt_err_name(enum ib_pkt_err err);

/* Parse and check one packet (len bytes, VCRC included). */
enum ib_pkt_err ib_packet_parse(const uint8_t *buf, size_t len, struct ib_packet *pkt);

/* The same checks but the two CRCs (pkt->icrc and pkt->vcrc are read, not verified):
 * for a packet whose CRCs were verified where it entered the fabric, parsed again only
 * for its header fields (a switch after a router's rewrite, a delayed packet, the
 * receiving HCA behind the fabric's ring). Each CRC pass costs about as much as a copy
 * of the packet. */
enum ib_pkt_err ib_packet_parse_headers(const uint8_t *buf, size_t len, struct ib_packet *pkt);

/*
 * Build a packet from pkt (lrh, has_grh/grh, bth, the extension headers its opcode
 * needs, payload). Computed, whatever pkt holds: LRH LNH and PktLen, GRH PayLen (IPVer
 * 6 and NxtHdr 0x1B are required), BTH PadCnt, pad, ICRC, VCRC. Returns the packet's
 * length, or -EINVAL (opcode not handled, LVer or TVer not 0, GRH IPVer/NxtHdr wrong),
 * -ERANGE (a field wider than its wire field, or a payload PktLen cannot count), or
 * -ENOSPC (buf too small; ib_packet_len() says how much is needed).
 */
int ib_packet_build(const struct ib_packet *pkt, uint8_t *buf, size_t len);

/* Length ib_packet_build() would produce, or 0 if the opcode is not handled. */
size_t ib_packet_len(const struct ib_packet *pkt);

/* Recompute and store the VCRC of a packet (len bytes, VCRC included) after a switch
 * rewrote a variant field such as the VL. Returns 0 or -EMSGSIZE. */
int ib_packet_reseal_vcrc(uint8_t *buf, size_t len);

#endif
