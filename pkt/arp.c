/*
 * ARP parse, classify and build for Ethernet and IPoIB (see arp.h).
 */
#include <string.h>

#include "pkt/arp.h"
#include "pkt/ip.h"
#include "lib/ipoib.h"

static const char *const reason_names[ARP_REASON_COUNT] = {
	[ARP_OK] = "ok",
	[ARP_TRUNCATED] = "arp_truncated",
	[ARP_UNKNOWN_HTYPE] = "arp_unknown_htype",
	[ARP_WRONG_HTYPE] = "arp_wrong_htype",
	[ARP_BAD_HLEN] = "arp_bad_hlen",
	[ARP_BAD_PTYPE] = "arp_bad_ptype",
	[ARP_BAD_PLEN] = "arp_bad_plen",
	[ARP_UNKNOWN_OP] = "arp_unknown_op",
	[ARP_SHA_ZERO] = "arp_sha_zero",
	[ARP_SHA_BROADCAST] = "arp_sha_broadcast",
	[ARP_SHA_MULTICAST] = "arp_sha_multicast",
	[ARP_SHA_RESERVED_FLAGS] = "arp_sha_reserved_flags",
	[ARP_SPA_INVALID] = "arp_spa_invalid",
	[ARP_TPA_INVALID] = "arp_tpa_invalid",
	[ARP_REPLY_SPA_ZERO] = "arp_reply_spa_zero",
	[ARP_REPLY_TO_SELF] = "arp_reply_to_self",
};

const char *arp_reason_name(enum arp_reason r)
{
	if ((unsigned)r >= ARP_REASON_COUNT)
		return "unknown";
	return reason_names[r];
}

const char *arp_kind_name(enum arp_kind k)
{
	switch (k) {
	case ARP_KIND_REQUEST:
		return "request";
	case ARP_KIND_REPLY:
		return "reply";
	case ARP_KIND_PROBE:
		return "probe";
	case ARP_KIND_ANNOUNCE:
		return "announce";
	case ARP_KIND_GRATUITOUS_REPLY:
		return "gratuitous_reply";
	}
	return "unknown";
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static bool all_ff(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0xff)
			return false;
	return true;
}

/* Not a unicast host address: multicast, loopback, class E, limited broadcast. */
static bool bad_ip(uint32_t a)
{
	return (a >> 24) == 127 || (a >> 28) >= 0xe;
}

static enum arp_reason check_sha(uint16_t htype, const uint8_t *sha)
{
	if (htype == ARP_HTYPE_ETHER) {
		if (all_zero(sha, 6))
			return ARP_SHA_ZERO;
		if (all_ff(sha, 6))
			return ARP_SHA_BROADCAST;
		if (sha[0] & 1)
			return ARP_SHA_MULTICAST;
		return ARP_OK;
	}
	if (sha[0] & IPOIB_HWADDR_F_RSVD)
		return ARP_SHA_RESERVED_FLAGS;
	if (all_zero(sha + 1, 19))
		return ARP_SHA_ZERO;
	if (all_ff(sha + 1, 3))
		return ARP_SHA_BROADCAST; /* QPN 0xffffff: the multicast QPN */
	if (sha[4] == 0xff)
		return ARP_SHA_MULTICAST; /* a multicast GID */
	if (all_zero(sha + 4, 16))
		return ARP_SHA_ZERO;
	return ARP_OK;
}

enum arp_reason arp_parse(const uint8_t *p, size_t len, uint16_t link_htype, struct arp_pkt *out)
{
	uint16_t htype, op;
	size_t hlen, need;
	enum arp_reason r;

	if (len < ARP_HDR_LEN)
		return ARP_TRUNCATED;
	htype = ip_be16(p);
	if (htype != ARP_HTYPE_ETHER && htype != ARP_HTYPE_IB)
		return ARP_UNKNOWN_HTYPE;
	if (link_htype && htype != link_htype)
		return ARP_WRONG_HTYPE;
	if (ip_be16(p + 2) != ARP_PTYPE_IP)
		return ARP_BAD_PTYPE;
	hlen = p[4];
	if (hlen != arp_hlen(htype))
		return ARP_BAD_HLEN;
	if (p[5] != 4)
		return ARP_BAD_PLEN;
	need = ARP_HDR_LEN + 2 * hlen + 8;
	if (len < need)
		return ARP_TRUNCATED;
	op = ip_be16(p + 6);
	if (op != ARP_OP_REQUEST && op != ARP_OP_REPLY)
		return ARP_UNKNOWN_OP;
	out->htype = htype;
	out->op = op;
	out->hlen = (uint8_t)hlen;
	out->sha = p + ARP_HDR_LEN;
	out->spa = ip_be32(p + ARP_HDR_LEN + hlen);
	out->tha = p + ARP_HDR_LEN + hlen + 4;
	out->tpa = ip_be32(p + ARP_HDR_LEN + 2 * hlen + 4);
	r = check_sha(htype, out->sha);
	if (r != ARP_OK)
		return r;
	if (bad_ip(out->spa))
		return ARP_SPA_INVALID;
	if (out->tpa == 0 || bad_ip(out->tpa))
		return ARP_TPA_INVALID;
	if (op == ARP_OP_REPLY) {
		if (out->spa == 0)
			return ARP_REPLY_SPA_ZERO;
		/* A reply about itself to itself is gratuitous only with tha = sha (or
		 * tha zero / broadcast, as some senders fill it). */
		if (out->spa == out->tpa && memcmp(out->tha, out->sha, hlen) != 0 &&
		    !all_zero(out->tha, hlen) && !all_ff(out->tha, hlen))
			return ARP_REPLY_TO_SELF;
	}
	return ARP_OK;
}

enum arp_kind arp_classify(const struct arp_pkt *a)
{
	if (a->op == ARP_OP_REQUEST) {
		if (a->spa == 0)
			return ARP_KIND_PROBE;
		return a->spa == a->tpa ? ARP_KIND_ANNOUNCE : ARP_KIND_REQUEST;
	}
	return a->spa == a->tpa ? ARP_KIND_GRATUITOUS_REPLY : ARP_KIND_REPLY;
}

size_t arp_build(uint8_t *out, size_t cap, uint16_t htype, uint16_t op, const uint8_t *sha,
		 uint32_t spa, const uint8_t *tha, uint32_t tpa)
{
	size_t hlen = arp_hlen(htype), n = ARP_HDR_LEN + 2 * hlen + 8;

	if (!hlen || cap < n)
		return 0;
	ip_put16(out, htype);
	ip_put16(out + 2, ARP_PTYPE_IP);
	out[4] = (uint8_t)hlen;
	out[5] = 4;
	ip_put16(out + 6, op);
	memcpy(out + 8, sha, hlen);
	ip_put32(out + 8 + hlen, spa);
	if (tha)
		memcpy(out + 12 + hlen, tha, hlen);
	else
		memset(out + 12 + hlen, 0, hlen);
	ip_put32(out + 12 + 2 * hlen, tpa);
	return n;
}

size_t arp_build_request(uint8_t *out, size_t cap, uint16_t htype, const uint8_t *sha, uint32_t spa,
			 uint32_t tpa)
{
	return arp_build(out, cap, htype, ARP_OP_REQUEST, sha, spa, NULL, tpa);
}

size_t arp_build_reply(uint8_t *out, size_t cap, const struct arp_pkt *req, const uint8_t *sha)
{
	uint8_t tha[ARP_HWADDR_MAX];

	/* The request may sit in out's buffer: copy its sender first. */
	memcpy(tha, req->sha, req->hlen);
	return arp_build(out, cap, req->htype, ARP_OP_REPLY, sha, req->tpa, tha, req->spa);
}

size_t arp_build_gratuitous(uint8_t *out, size_t cap, uint16_t htype, const uint8_t *sha,
			    uint32_t addr, bool as_reply)
{
	return arp_build(out, cap, htype, as_reply ? ARP_OP_REPLY : ARP_OP_REQUEST, sha, addr,
			 as_reply ? sha : NULL, addr);
}

size_t arp_build_probe(uint8_t *out, size_t cap, uint16_t htype, const uint8_t *sha, uint32_t addr)
{
	return arp_build(out, cap, htype, ARP_OP_REQUEST, sha, 0, NULL, addr);
}
