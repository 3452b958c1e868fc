/*
 * The Ethernet side's frame parser (prefix ethf_): Ethernet II with up to two VLAN
 * tags, 802.1ad (S-tag, 0x88a8) outside 802.1Q (C-tag, 0x8100), giving the ethertype
 * and the offset of the L3 header. It refuses, with a precise reason, anything a
 * worker should not hand to the classifier.
 *
 * Accepted shapes:
 *   dst src type                       (type >= 0x0600, not a tag)
 *   dst src 8100 tci type              (802.1Q)
 *   dst src 88a8 tci type              (802.1ad S-tag alone)
 *   dst src 88a8 tci 8100 tci type     (802.1ad QinQ)
 * Refused: headers cut short (runt), 802.3 length fields (LLC frames, type <= 1500)
 * and the undefined range 1501..1535, a tag inside a C-tag or an S-tag inside an
 * S-tag (bad nesting), more than two tags, VID 0xfff (reserved), a multicast source
 * address.
 *
 * The parser reads only the bytes it is given and is pure: ethf_parse is static inline
 * (called once per received frame); pkt/eth_frame.c holds the reason names.
 */
#ifndef IBGW_PKT_ETH_FRAME_H
#define IBGW_PKT_ETH_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define ETHF_HLEN         14
#define ETHF_TAG_LEN      4
#define ETHF_TYPE_8021Q   0x8100
#define ETHF_TYPE_8021AD  0x88a8
#define ETHF_TYPE_IPV4    0x0800
#define ETHF_TYPE_ARP     0x0806
#define ETHF_TYPE_IPV6    0x86dd
#define ETHF_TYPE_MIN     0x0600 /* smallest Ethernet II type; <= 1500 is an 802.3 length */
#define ETHF_VID_MASK     0x0fff
#define ETHF_VID_RESERVED 0x0fff

enum ethf_result {
	ETHF_OK = 0,
	ETHF_ERR_RUNT,        /* shorter than the Ethernet header */
	ETHF_ERR_TAG_RUNT,    /* a tag announced but the frame ends inside it */
	ETHF_ERR_LLC,         /* 802.3 length field (<= 1500): not Ethernet II */
	ETHF_ERR_BAD_TYPE,    /* 1501..1535: neither a length nor a type */
	ETHF_ERR_TAG_NESTING, /* a tag inside a C-tag, or an S-tag inside an S-tag */
	ETHF_ERR_TOO_MANY_TAGS,
	ETHF_ERR_VID_RESERVED,  /* VID 0xfff */
	ETHF_ERR_SRC_MULTICAST, /* source MAC with the group bit set */
	ETHF_ERR_MAX
};

struct ethf_info {
	uint16_t ethertype;             /* of the payload, after the tags */
	uint16_t l3_off;                /* offset of the payload (L3 header) */
	uint8_t n_tags;                 /* 0, 1 or 2 */
	uint16_t outer_tpid, outer_tci; /* valid when n_tags >= 1 */
	uint16_t inner_tci;             /* valid when n_tags == 2 (the C-tag) */
};

static inline uint16_t ethf_be16(const uint8_t *p)
{
	return (uint16_t)(((unsigned)p[0] << 8) | p[1]);
}

/* Parse frame[0..len). Returns ETHF_OK and fills *info, or the reason of refusal. */
static inline enum ethf_result ethf_parse(const uint8_t *frame, size_t len, struct ethf_info *info)
{
	size_t off = 12;
	uint16_t type;

	if (len < ETHF_HLEN)
		return ETHF_ERR_RUNT;
	if (frame[6] & 1)
		return ETHF_ERR_SRC_MULTICAST;
	info->n_tags = 0;
	info->outer_tpid = info->outer_tci = info->inner_tci = 0;
	type = ethf_be16(frame + off);
	while (type == ETHF_TYPE_8021Q || type == ETHF_TYPE_8021AD) {
		uint16_t tci;

		if (info->n_tags == 2)
			return ETHF_ERR_TOO_MANY_TAGS;
		if (info->n_tags == 1 &&
		    (info->outer_tpid == ETHF_TYPE_8021Q || type == ETHF_TYPE_8021AD))
			return ETHF_ERR_TAG_NESTING;
		if (len < off + 2 + ETHF_TAG_LEN)
			return ETHF_ERR_TAG_RUNT;
		tci = ethf_be16(frame + off + 2);
		if ((tci & ETHF_VID_MASK) == ETHF_VID_RESERVED)
			return ETHF_ERR_VID_RESERVED;
		if (info->n_tags == 0) {
			info->outer_tpid = type;
			info->outer_tci = tci;
		} else {
			info->inner_tci = tci;
		}
		info->n_tags++;
		off += ETHF_TAG_LEN;
		type = ethf_be16(frame + off);
	}
	if (type <= 1500)
		return ETHF_ERR_LLC;
	if (type < ETHF_TYPE_MIN)
		return ETHF_ERR_BAD_TYPE;
	info->ethertype = type;
	info->l3_off = (uint16_t)(off + 2);
	return ETHF_OK;
}

/* A short name for a result ("ok", "runt", "tag_runt", ...), for counters and logs. */
const char *ethf_result_name(enum ethf_result r);

#endif
