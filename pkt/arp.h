/*
 * ARP (RFC 826) for both link types the gateway has: Ethernet (hardware type 1, 6-octet
 * addresses) and IPoIB (hardware type 32, RFC 4391: the 20-octet flags/QPN/GID address
 * of lib/ipoib.h). IPv4 only (protocol type 0x0800, 4-octet protocol addresses).
 *
 * arp_parse() refuses malformed or lying packets with a precise reason; arp_classify()
 * names what a valid packet is (RFC 5227 probe and announcement, gratuitous reply);
 * the builders write the ARP packet only (the caller adds the Ethernet header or the
 * IPoIB encapsulation header; an Ethernet frame is padded to 60 octets by the port).
 */
#ifndef IBGW_PKT_ARP_H
#define IBGW_PKT_ARP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ARP_HTYPE_ETHER 1
#define ARP_HTYPE_IB    32
#define ARP_PTYPE_IP    0x0800
#define ARP_OP_REQUEST  1
#define ARP_OP_REPLY    2
#define ARP_HDR_LEN     8
#define ARP_ETHER_LEN   28 /* 8 + 2 * 6 + 2 * 4 */
#define ARP_IB_LEN      56 /* 8 + 2 * 20 + 2 * 4 */
#define ARP_MAX_LEN     ARP_IB_LEN
#define ARP_HWADDR_MAX  20

enum arp_reason {
	ARP_OK = 0,
	ARP_TRUNCATED,          /* shorter than the header, or than its lengths say */
	ARP_UNKNOWN_HTYPE,      /* not 1 (Ethernet) nor 32 (InfiniBand) */
	ARP_WRONG_HTYPE,        /* a known type, but not the link it came in on */
	ARP_BAD_HLEN,           /* hlen not 6 for Ethernet / 20 for IPoIB */
	ARP_BAD_PTYPE,          /* not 0x0800 */
	ARP_BAD_PLEN,           /* not 4 */
	ARP_UNKNOWN_OP,         /* not request or reply (RARP, InARP ... ) */
	ARP_SHA_ZERO,           /* sender hardware address all zero */
	ARP_SHA_BROADCAST,      /* ff:ff:ff:ff:ff:ff, or IPoIB QPN 0xffffff */
	ARP_SHA_MULTICAST,      /* Ethernet group bit, or IPoIB multicast GID (ff00::/8) */
	ARP_SHA_RESERVED_FLAGS, /* IPoIB flags with reserved bits (0x3f) set */
	ARP_SPA_INVALID,        /* sender IP multicast, loopback, class E or broadcast */
	ARP_TPA_INVALID,        /* target IP multicast, loopback, class E, broadcast or zero */
	ARP_REPLY_SPA_ZERO,     /* a reply from 0.0.0.0 */
	ARP_REPLY_TO_SELF,      /* reply with sender IP == target IP but not gratuitous */
	ARP_REASON_COUNT
};

const char *arp_reason_name(enum arp_reason r);

enum arp_kind {
	ARP_KIND_REQUEST,          /* who-has tpa, tell spa */
	ARP_KIND_REPLY,            /* spa is-at sha */
	ARP_KIND_PROBE,            /* RFC 5227 probe: request from 0.0.0.0 */
	ARP_KIND_ANNOUNCE,         /* gratuitous request: spa == tpa */
	ARP_KIND_GRATUITOUS_REPLY, /* gratuitous reply: spa == tpa */
};

const char *arp_kind_name(enum arp_kind k);

struct arp_pkt {
	uint16_t htype, op;
	uint8_t hlen;
	const uint8_t *sha, *tha; /* hlen octets each, inside the parsed buffer */
	uint32_t spa, tpa;        /* host order */
};

/* htype is the link's (ARP_HTYPE_ETHER or ARP_HTYPE_IB); 0 accepts either. Octets past
 * the ARP packet (Ethernet padding) are ignored. */
enum arp_reason arp_parse(const uint8_t *p, size_t len, uint16_t link_htype, struct arp_pkt *out);
enum arp_kind arp_classify(const struct arp_pkt *a);

static inline size_t arp_hlen(uint16_t htype)
{
	return htype == ARP_HTYPE_ETHER ? 6 : htype == ARP_HTYPE_IB ? 20 : 0;
}

/* Build an ARP packet; tha NULL means all zero. Returns the length or 0 if cap is too
 * small or htype unknown. spa/tpa in host order. */
size_t arp_build(uint8_t *out, size_t cap, uint16_t htype, uint16_t op, const uint8_t *sha,
		 uint32_t spa, const uint8_t *tha, uint32_t tpa);
/* who-has tpa tell spa. */
size_t arp_build_request(uint8_t *out, size_t cap, uint16_t htype, const uint8_t *sha, uint32_t spa,
			 uint32_t tpa);
/* The reply to request req, saying req->tpa is at sha (ours, or the proxied one). */
size_t arp_build_reply(uint8_t *out, size_t cap, const struct arp_pkt *req, const uint8_t *sha);
/* Gratuitous ARP for addr at sha: a request (announcement, RFC 5227) or, with as_reply,
 * a reply (tha = sha), which some old hosts need. */
size_t arp_build_gratuitous(uint8_t *out, size_t cap, uint16_t htype, const uint8_t *sha,
			    uint32_t addr, bool as_reply);
/* RFC 5227 probe: who-has addr, tell 0.0.0.0. */
size_t arp_build_probe(uint8_t *out, size_t cap, uint16_t htype, const uint8_t *sha, uint32_t addr);

#endif
