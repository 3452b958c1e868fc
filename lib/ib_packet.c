/*
 * Whole-packet parse and build (see ib_packet.h for the order of checks and why).
 */
#include "lib/ib_packet.h"

#include <string.h>

static const struct {
	const char *name, *str;
} pkt_errs[IB_PKT_ERR_COUNT] = {
	[IB_PKT_OK] = { "ok", "no error" },
	[IB_PKT_ERR_SHORT_LRH] = { "short_lrh", "shorter than an LRH" },
	[IB_PKT_ERR_LVER] = { "lver", "LRH LVer is not 0" },
	[IB_PKT_ERR_LNH] = { "lnh", "LRH LNH is not IBA local or IBA global" },
	[IB_PKT_ERR_TRUNCATED] = { "truncated", "shorter than LRH PktLen * 4 + VCRC" },
	[IB_PKT_ERR_TRAILING] = { "trailing", "longer than LRH PktLen * 4 + VCRC" },
	[IB_PKT_ERR_VCRC] = { "vcrc", "VCRC mismatch" },
	[IB_PKT_ERR_PKTLEN_GRH] = { "pktlen_grh", "LRH PktLen leaves no room for the GRH" },
	[IB_PKT_ERR_IPVER] = { "ipver", "GRH IPVer is not 6" },
	[IB_PKT_ERR_NXTHDR] = { "nxthdr", "GRH NxtHdr is not 0x1B" },
	[IB_PKT_ERR_PAYLEN] = { "paylen", "GRH PayLen disagrees with LRH PktLen" },
	[IB_PKT_ERR_PKTLEN_BTH] = { "pktlen_bth", "LRH PktLen leaves no room for the BTH" },
	[IB_PKT_ERR_TVER] = { "tver", "BTH TVer is not 0" },
	[IB_PKT_ERR_OPCODE] = { "opcode", "BTH opcode not handled" },
	[IB_PKT_ERR_PKTLEN_EXT] = { "pktlen_ext",
				    "LRH PktLen leaves no room for the opcode's extension headers" },
	[IB_PKT_ERR_PAD] = { "pad", "BTH PadCnt larger than the payload" },
	[IB_PKT_ERR_ICRC] = { "icrc", "ICRC mismatch" },
};

const char *ib_pkt_err_str(enum ib_pkt_err err)
{
	if ((unsigned)err >= IB_PKT_ERR_COUNT)
		return "unknown packet error";
	return pkt_errs[err].str;
}

const char *ib_pkt_err_name(enum ib_pkt_err err)
{
	if ((unsigned)err >= IB_PKT_ERR_COUNT)
		return "unknown";
	return pkt_errs[err].name;
}

static enum ib_pkt_err parse(const uint8_t *buf, size_t len, struct ib_packet *pkt, bool crcs)
{
	size_t words, end, off;
	uint32_t icrc;
	int ext;

	memset(pkt, 0, sizeof(*pkt));
	if (len < IB_LRH_LEN)
		return IB_PKT_ERR_SHORT_LRH;
	if (ib_lrh_decode(buf, len, &pkt->lrh) < 0)
		return IB_PKT_ERR_LVER;
	if (pkt->lrh.lnh != IB_LNH_IBA_LOCAL && pkt->lrh.lnh != IB_LNH_IBA_GLOBAL)
		return IB_PKT_ERR_LNH;
	words = (size_t)pkt->lrh.pkt_len * 4;
	if (len < words + IB_VCRC_LEN)
		return IB_PKT_ERR_TRUNCATED;
	if (len > words + IB_VCRC_LEN)
		return IB_PKT_ERR_TRAILING;

	/* len >= 8 and len == words + 2, so words >= 8: the LRH lies inside PktLen. */
	pkt->vcrc = ib_get_le16(buf + words);
	if (crcs && ib_vcrc_compute(buf, words) != pkt->vcrc)
		return IB_PKT_ERR_VCRC;

	end = words - IB_ICRC_LEN; /* first ICRC byte; words >= 8 so no wrap */
	off = IB_LRH_LEN;
	if (pkt->lrh.lnh == IB_LNH_IBA_GLOBAL) {
		pkt->has_grh = true;
		if (end < off + IB_GRH_LEN)
			return IB_PKT_ERR_PKTLEN_GRH;
		if (ib_grh_decode(buf + off, end - off, &pkt->grh) < 0)
			return IB_PKT_ERR_IPVER;
		if (pkt->grh.next_hdr != IB_GRH_NXTHDR_BTH)
			return IB_PKT_ERR_NXTHDR;
		off += IB_GRH_LEN;
		if (pkt->grh.pay_len != words - off)
			return IB_PKT_ERR_PAYLEN;
	}

	if (end < off + IB_BTH_LEN)
		return IB_PKT_ERR_PKTLEN_BTH;
	if (ib_bth_decode(buf + off, end - off, &pkt->bth) < 0)
		return IB_PKT_ERR_TVER;
	off += IB_BTH_LEN;
	ext = ib_opcode_ext(pkt->bth.opcode);
	if (ext < 0)
		return IB_PKT_ERR_OPCODE;
	pkt->ext = (unsigned)ext;
	if (end < off + ib_ext_len(pkt->ext))
		return IB_PKT_ERR_PKTLEN_EXT;
	/* Fixed order in the IBA: DETH, then AETH, then ImmDt. */
	if (pkt->ext & IB_EXT_DETH) {
		(void)ib_deth_decode(buf + off, end - off, &pkt->deth);
		off += IB_DETH_LEN;
	}
	if (pkt->ext & IB_EXT_AETH) {
		(void)ib_aeth_decode(buf + off, end - off, &pkt->aeth);
		off += IB_AETH_LEN;
	}
	if (pkt->ext & IB_EXT_IMM) {
		pkt->imm = ib_get_be32(buf + off);
		off += IB_IMM_LEN;
	}

	if (end - off < pkt->bth.pad)
		return IB_PKT_ERR_PAD;
	pkt->payload = buf + off;
	pkt->payload_len = end - off - pkt->bth.pad;

	pkt->icrc = ib_get_le32(buf + end);
	if (crcs && (ib_icrc_compute(buf, end, &icrc) < 0 || icrc != pkt->icrc))
		return IB_PKT_ERR_ICRC;
	return IB_PKT_OK;
}

enum ib_pkt_err ib_packet_parse(const uint8_t *buf, size_t len, struct ib_packet *pkt)
{
	return parse(buf, len, pkt, true);
}

enum ib_pkt_err ib_packet_parse_headers(const uint8_t *buf, size_t len, struct ib_packet *pkt)
{
	return parse(buf, len, pkt, false);
}

size_t ib_packet_len(const struct ib_packet *pkt)
{
	int ext = ib_opcode_ext(pkt->bth.opcode);
	size_t n;

	if (ext < 0)
		return 0;
	n = IB_LRH_LEN + (pkt->has_grh ? IB_GRH_LEN : 0) + IB_BTH_LEN + ib_ext_len((unsigned)ext);
	if (pkt->payload_len > IB_PACKET_MAX_LEN)
		return IB_PACKET_MAX_LEN + 4; /* too long for PktLen; build says -ERANGE */
	n += (pkt->payload_len + 3) & ~(size_t)3;
	return n + IB_ICRC_LEN + IB_VCRC_LEN;
}

int ib_packet_build(const struct ib_packet *pkt, uint8_t *buf, size_t len)
{
	struct ib_lrh lrh = pkt->lrh;
	struct ib_grh grh = pkt->grh;
	struct ib_bth bth = pkt->bth;
	size_t total, words, off = 0;
	uint32_t icrc;
	unsigned ext;
	int rc;

	rc = ib_opcode_ext(bth.opcode);
	if (rc < 0 || lrh.lver != 0 || bth.tver != 0)
		return -EINVAL;
	if (pkt->has_grh && (grh.ipver != IB_GRH_IPVER || grh.next_hdr != IB_GRH_NXTHDR_BTH))
		return -EINVAL;
	ext = (unsigned)rc;
	total = ib_packet_len(pkt);
	if (total > IB_PACKET_MAX_LEN)
		return -ERANGE;
	if (pkt->payload_len && !pkt->payload)
		return -EINVAL;
	words = total - IB_VCRC_LEN;

	lrh.lnh = pkt->has_grh ? IB_LNH_IBA_GLOBAL : IB_LNH_IBA_LOCAL;
	lrh.pkt_len = (uint16_t)(words / 4);
	bth.pad = (uint8_t)((4 - pkt->payload_len % 4) % 4);

	/* Encode headers into buf only when it is big enough, but range-check the
	 * headers first so -ERANGE wins over -ENOSPC (a bug beats a short buffer). */
	{
		uint8_t scratch[IB_GRH_LEN];
		struct ib_aeth aeth = pkt->aeth;
		struct ib_deth deth = pkt->deth;

		if ((rc = ib_lrh_encode(&lrh, scratch, sizeof(scratch))) < 0 ||
		    (pkt->has_grh && (rc = ib_grh_encode(&grh, scratch, sizeof(scratch))) < 0) ||
		    (rc = ib_bth_encode(&bth, scratch, sizeof(scratch))) < 0 ||
		    ((ext & IB_EXT_DETH) &&
		     (rc = ib_deth_encode(&deth, scratch, sizeof(scratch))) < 0) ||
		    ((ext & IB_EXT_AETH) &&
		     (rc = ib_aeth_encode(&aeth, scratch, sizeof(scratch))) < 0))
			return rc;
	}
	if (len < total)
		return -ENOSPC;

	off += (size_t)ib_lrh_encode(&lrh, buf + off, len - off);
	if (pkt->has_grh) {
		grh.pay_len = (uint16_t)(words - IB_LRH_LEN - IB_GRH_LEN);
		off += (size_t)ib_grh_encode(&grh, buf + off, len - off);
	}
	off += (size_t)ib_bth_encode(&bth, buf + off, len - off);
	if (ext & IB_EXT_DETH)
		off += (size_t)ib_deth_encode(&pkt->deth, buf + off, len - off);
	if (ext & IB_EXT_AETH)
		off += (size_t)ib_aeth_encode(&pkt->aeth, buf + off, len - off);
	if (ext & IB_EXT_IMM) {
		ib_put_be32(buf + off, pkt->imm);
		off += IB_IMM_LEN;
	}
	if (pkt->payload_len)
		memcpy(buf + off, pkt->payload, pkt->payload_len);
	off += pkt->payload_len;
	memset(buf + off, 0, bth.pad);
	off += bth.pad;

	(void)ib_icrc_compute(buf, off, &icrc);
	ib_put_le32(buf + off, icrc);
	off += IB_ICRC_LEN;
	ib_put_le16(buf + off, ib_vcrc_compute(buf, off));
	return (int)total;
}

int ib_packet_reseal_vcrc(uint8_t *buf, size_t len)
{
	if (len < IB_VCRC_LEN)
		return -EMSGSIZE;
	ib_put_le16(buf + len - IB_VCRC_LEN, ib_vcrc_compute(buf, len - IB_VCRC_LEN));
	return 0;
}
