/*
 * host_l2: MAC derivation, the peer table and the ARP/ND rewriting of the IB host role
 * (see host_l2.h). Pure functions over buffers; the peer table is a small array (a host
 * has few peers), searched linearly.
 */
#include "sim/host/host_l2.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "pkt/arp.h"
#include "pkt/dhcp.h"
#include "pkt/ip.h"
#include "pkt/nd.h"

#define ETH_P_IP   0x0800
#define ETH_P_ARP  0x0806
#define ETH_P_IPV6 0x86dd

static const uint8_t bcast_mac[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
static const uint8_t zero20[20];

void hl2_mac_from_guid(uint64_t guid, unsigned k, uint8_t mac[6])
{
	uint32_t top = (uint32_t)(guid >> 40) & 0xffffff;
	unsigned f = (top ^ (top >> 6) ^ (top >> 12) ^ (top >> 18)) & 0x3f;

	mac[0] = (uint8_t)(0x02 | (((f + k) & 0x3f) << 2));
	for (int i = 1; i < 6; i++)
		mac[i] = (uint8_t)(guid >> (8 * (5 - i)));
}

void hl2_init(struct hl2 *h, const struct ipoib_hwaddr *own)
{
	memset(h, 0, sizeof(*h));
	h->own_hw = *own;
	ipoib_hwaddr_encode(own, h->own_hw_bytes, sizeof(h->own_hw_bytes));
	hl2_mac_from_guid(ib_gid_guid(&own->gid), 0, h->own_mac);
}

static bool is_own(const struct hl2 *h, const struct ipoib_hwaddr *hw)
{
	return hw->qpn == h->own_hw.qpn && ib_gid_equal(&hw->gid, &h->own_hw.gid);
}

const struct hl2_peer *hl2_by_mac(const struct hl2 *h, const uint8_t mac[6])
{
	for (unsigned i = 0; i < h->n_peers; i++)
		if (!memcmp(h->peers[i].mac, mac, 6))
			return &h->peers[i];
	return NULL;
}

const struct hl2_peer *hl2_by_src(const struct hl2 *h, uint16_t lid, uint32_t qpn)
{
	for (unsigned i = 0; i < h->n_peers; i++)
		if (h->peers[i].lid == lid && h->peers[i].hw.qpn == qpn && lid)
			return &h->peers[i];
	return NULL;
}

const struct hl2_peer *hl2_learn(struct hl2 *h, const struct ipoib_hwaddr *hw, uint16_t lid)
{
	struct hl2_peer *p;
	uint8_t mac[6];
	unsigned k;

	for (unsigned i = 0; i < h->n_peers; i++) {
		p = &h->peers[i];
		if (ib_gid_equal(&p->hw.gid, &hw->gid)) {
			p->hw.qpn = hw->qpn;
			p->hw.flags = hw->flags;
			if (lid)
				p->lid = lid;
			return p;
		}
	}
	if (h->n_peers == HL2_MAX_PEERS) {
		h->st.peers_full++;
		return NULL;
	}
	for (k = 0; k < 64; k++) {
		hl2_mac_from_guid(ib_gid_guid(&hw->gid), k, mac);
		if (memcmp(mac, h->own_mac, 6) && !hl2_by_mac(h, mac))
			break;
		h->st.mac_collisions++;
	}
	if (k == 64) {
		h->st.peers_full++;
		return NULL;
	}
	p = &h->peers[h->n_peers++];
	memcpy(p->mac, mac, 6);
	p->hw = *hw;
	p->lid = lid;
	return p;
}

/* The MAC the kernel should see for a 20-octet address (ours, or a peer's). */
static int mac_of_hw(struct hl2 *h, const uint8_t *a, uint16_t lid, uint8_t mac[6])
{
	struct ipoib_hwaddr hw;
	const struct hl2_peer *p;

	if (!memcmp(a, zero20, 20)) {
		memset(mac, 0, 6);
		return 0;
	}
	if (ipoib_hwaddr_decode(a, IPOIB_HWADDR_LEN, &hw) < 0)
		return -EINVAL;
	if (is_own(h, &hw)) {
		memcpy(mac, h->own_mac, 6);
		return 0;
	}
	p = hl2_learn(h, &hw, lid);
	if (!p)
		return -ENOSPC;
	memcpy(mac, p->mac, 6);
	return 0;
}

/* The 20-octet address for a MAC the kernel used. */
static int hw_of_mac(const struct hl2 *h, const uint8_t *mac, uint8_t out[20])
{
	const struct hl2_peer *p;
	static const uint8_t zero6[6];

	if (!memcmp(mac, zero6, 6)) {
		memset(out, 0, 20);
		return 0;
	}
	if (!memcmp(mac, h->own_mac, 6)) {
		memcpy(out, h->own_hw_bytes, 20);
		return 0;
	}
	p = hl2_by_mac(h, mac);
	if (!p)
		return -ENXIO;
	ipoib_hwaddr_encode(&p->hw, out, 20);
	return 0;
}

static size_t nd_fixed_len(uint8_t type)
{
	switch (type) {
	case ND_RS:
		return 8;
	case ND_RA:
		return 16;
	case ND_NS:
	case ND_NA:
		return 24;
	case ND_REDIRECT:
		return 40;
	default:
		return 0;
	}
}

/* Rewrite the link-layer options of a validated ND packet (in, len) into out. */
static int nd_rewrite(struct hl2 *h, const uint8_t *in, size_t len, bool to_ib, uint16_t lid,
		      uint8_t *out, size_t cap)
{
	size_t fixed = nd_fixed_len(in[40]), o, w;
	uint64_t sum;

	if (!fixed || len < IP6_HDR_LEN + fixed || cap < IP6_HDR_LEN + fixed)
		return -EINVAL;
	memcpy(out, in, IP6_HDR_LEN + fixed);
	o = w = IP6_HDR_LEN + fixed;
	while (o + 2 <= len) {
		size_t olen = (size_t)in[o + 1] * 8;
		uint8_t t = in[o];

		if (!olen || o + olen > len)
			return -EINVAL;
		if ((t == ND_OPT_SLLA || t == ND_OPT_TLLA) && to_ib && olen == 8) {
			if (w + 24 > cap)
				return -EMSGSIZE;
			out[w] = t;
			out[w + 1] = 3;
			out[w + 2] = out[w + 3] = 0;
			if (hw_of_mac(h, in + o + 2, out + w + 4) < 0)
				return -ENXIO;
			w += 24;
		} else if ((t == ND_OPT_SLLA || t == ND_OPT_TLLA) && !to_ib && olen == 24) {
			if (w + 8 > cap)
				return -EMSGSIZE;
			out[w] = t;
			out[w + 1] = 1;
			if (mac_of_hw(h, in + o + 4, t == ND_OPT_SLLA ? lid : 0, out + w + 2) < 0)
				return -EINVAL;
			w += 8;
		} else {
			if (w + olen > cap)
				return -EMSGSIZE;
			memcpy(out + w, in + o, olen);
			w += olen;
		}
		o += olen;
	}
	ip_put16(out + 4, (uint16_t)(w - IP6_HDR_LEN));
	out[IP6_HDR_LEN + 2] = out[IP6_HDR_LEN + 3] = 0;
	sum = ip6_pseudo_sum(out + 8, out + 24, (uint32_t)(w - IP6_HDR_LEN), 58);
	sum = ip_csum_add(sum, out + IP6_HDR_LEN, w - IP6_HDR_LEN);
	ip_put16(out + IP6_HDR_LEN + 2, (uint16_t)~ip_csum_fold(sum));
	return (int)w;
}

static bool is_nd(const uint8_t *p, size_t len)
{
	return len > IP6_HDR_LEN && p[6] == 58 && p[40] >= ND_RS && p[40] <= ND_REDIRECT;
}

/* The UDP payload of an IPv4 datagram from sport to dport (unfragmented, lengths
 * inside len); NULL otherwise. */
static const uint8_t *udp4_payload(const uint8_t *p, size_t len, uint16_t sport, uint16_t dport,
				   size_t *hl, size_t *plen)
{
	size_t ihl, tot;

	if (len < 20 || (p[0] >> 4) != 4 || p[9] != 17 || (ip_be16(p + 6) & 0x3fff))
		return NULL;
	ihl = (size_t)(p[0] & 15) * 4;
	tot = ip_be16(p + 2);
	if (ihl < 20 || tot > len || tot < ihl + 8 || ip_be16(p + ihl) != sport ||
	    ip_be16(p + ihl + 2) != dport || ip_be16(p + ihl + 4) != tot - ihl)
		return NULL;
	*hl = ihl;
	*plen = tot - ihl - 8;
	return p + ihl + 8;
}

/* IP total length and checksum, UDP length and checksum, of the datagram at q whose
 * DHCP payload is dlen octets. Returns the IP length. */
static size_t udp4_finish(uint8_t *q, size_t hl, size_t dlen)
{
	size_t ulen = 8 + dlen;
	uint16_t c;

	ip_put16(q + 2, (uint16_t)(hl + ulen));
	ip_put16(q + 10, 0);
	ip_put16(q + 10, (uint16_t)~ip_csum_fold(ip_csum_add(0, q, hl)));
	ip_put16(q + hl + 4, (uint16_t)ulen);
	ip_put16(q + hl + 6, 0);
	c = (uint16_t)~ip_csum_fold(
	    ip_csum_add(ip4_pseudo_sum(q + 12, q + 16, (uint16_t)ulen, 17), q + hl, ulen));
	ip_put16(q + hl + 6, c ? c : 0xffff);
	return hl + ulen;
}

/* Kernel -> IB: a DHCP client message in RFC 4390's form at out. 0: not one (sent as
 * it is); -EMSGSIZE. */
static int dhcp_to_ib(struct hl2 *h, const uint8_t *p, size_t len, uint8_t *out, size_t cap)
{
	size_t hl, dlen, n, i;
	const uint8_t *d = udp4_payload(p, len, DHCP_CLIENT_PORT, DHCP_SERVER_PORT, &hl, &dlen);
	struct dhcp_info di;
	uint8_t *o;

	if (!d || dhcp_parse(d, dlen, &di) != DHCP_OK || di.op != DHCP_OP_REQUEST ||
	    di.htype != DHCP_HTYPE_ETHER)
		return 0;
	if (hl + 8 + di.end_off + 2 + 1 + DHCP_IPOIB_HWLEN + 1 > cap)
		return -EMSGSIZE;
	memcpy(out, p, hl + 8);
	o = out + hl + 8;
	memcpy(o, d, DHCP_OPT_OFF);
	o[1] = DHCP_HTYPE_IPOIB;
	o[2] = 0;
	memset(o + 28, 0, 16);
	n = DHCP_OPT_OFF;
	o[n++] = DHCP_OPT_CLIENT_ID;
	o[n++] = 1 + DHCP_IPOIB_HWLEN;
	dhcp_ipoib_client_id(h->own_hw_bytes, o + n);
	n += 1 + DHCP_IPOIB_HWLEN;
	for (i = DHCP_OPT_OFF; i < di.end_off;) { /* dhcp_parse walked them: all inside */
		size_t olen = d[i] == DHCP_OPT_PAD ? 1 : 2 + (size_t)d[i + 1];

		if (d[i] != DHCP_OPT_CLIENT_ID && d[i] != DHCP_OPT_PAD) {
			memcpy(o + n, d + i, olen);
			n += olen;
		}
		i += olen;
	}
	o[n++] = DHCP_OPT_END;
	h->st.dhcp_rewritten++;
	return (int)udp4_finish(out, hl, n);
}

/* IB -> kernel: a relayed DHCP reply (RFC 4390's form, in place at q) for the kernel's
 * client: htype 1, hlen 6, chaddr our MAC. */
static void dhcp_to_eth(struct hl2 *h, uint8_t *q, size_t len)
{
	size_t hl, dlen;
	uint8_t *d = (uint8_t *)(uintptr_t)udp4_payload(q, len, DHCP_SERVER_PORT, DHCP_CLIENT_PORT,
							&hl, &dlen);
	uint8_t own[1 + DHCP_IPOIB_HWLEN];
	struct dhcp_info di;

	if (!d || dhcp_parse(d, dlen, &di) != DHCP_OK || di.op != DHCP_OP_REPLY ||
	    di.htype != DHCP_HTYPE_IPOIB)
		return;
	dhcp_ipoib_client_id(h->own_hw_bytes, own);
	if (di.client_id &&
	    (di.client_id_len != sizeof(own) || memcmp(di.client_id, own, sizeof(own))))
		return; /* another host's */
	d[1] = DHCP_HTYPE_ETHER;
	d[2] = 6;
	memset(d + 28, 0, 16);
	memcpy(d + 28, h->own_mac, 6);
	udp4_finish(q, hl, dlen);
	h->st.dhcp_rewritten++;
}

/* Ethernet destination for an IP packet that arrived through a group. */
static void mcast_mac(uint16_t et, const uint8_t *p, uint8_t mac[6])
{
	if (et == ETH_P_IP) {
		if (p[16] >= 224 && p[16] <= 239) {
			mac[0] = 0x01;
			mac[1] = 0x00;
			mac[2] = 0x5e;
			mac[3] = p[17] & 0x7f;
			mac[4] = p[18];
			mac[5] = p[19];
		} else {
			memcpy(mac, bcast_mac, 6);
		}
	} else {
		if (p[24] == 0xff)
			nd_mcast_mac(p + 24, mac);
		else
			memcpy(mac, bcast_mac, 6);
	}
}

/* The LID to remember for a packet's sender: 0 when it came through an IB router (its
 * GID on another subnet: the LID is the router's, shared by every peer behind it). */
static uint16_t src_lid(const struct hl2 *h, const struct hl2_src *src)
{
	if (src->has_gid && ib_gid_prefix(&src->gid) != ib_gid_prefix(&h->own_hw.gid))
		return 0;
	return src->lid;
}

/* The peer a packet came from: by its GID when it has one (a GRH, a connection), else by
 * LID and QPN; learned when new and the GID is known. */
static const struct hl2_peer *peer_of_src(struct hl2 *h, const struct hl2_src *src)
{
	struct ipoib_hwaddr hw = { .flags = 0, .qpn = src->qpn, .gid = src->gid };

	if (!src->has_gid)
		return hl2_by_src(h, src->lid, src->qpn);
	for (unsigned i = 0; i < h->n_peers; i++)
		if (ib_gid_equal(&h->peers[i].hw.gid, &src->gid) && h->peers[i].hw.qpn == src->qpn)
			return &h->peers[i];
	return hl2_learn(h, &hw, src_lid(h, src));
}

int hl2_ib_to_eth(struct hl2 *h, uint16_t ethertype, const uint8_t *p, size_t len,
		  const struct hl2_src *src, uint8_t *out, size_t cap)
{
	uint8_t *eth = out, srcmac[6], thamac[6];
	const struct hl2_peer *peer;
	int n;

	if (cap < HL2_ETH_HLEN + ARP_ETHER_LEN)
		return -EMSGSIZE;
	ip_put16(eth + 12, ethertype);
	if (ethertype == ETH_P_ARP) {
		struct arp_pkt a;

		if (arp_parse(p, len, ARP_HTYPE_IB, &a) != ARP_OK) {
			h->st.bad_arp++;
			return -EINVAL;
		}
		if (mac_of_hw(h, a.sha, src_lid(h, src), srcmac) < 0 ||
		    mac_of_hw(h, a.tha, 0, thamac) < 0) {
			h->st.bad_arp++;
			return -EINVAL;
		}
		n = (int)arp_build(eth + HL2_ETH_HLEN, cap - HL2_ETH_HLEN, ARP_HTYPE_ETHER, a.op,
				   srcmac, a.spa, thamac, a.tpa);
		if (!n)
			return -EMSGSIZE;
		memcpy(eth, src->mcast ? bcast_mac : h->own_mac, 6);
		memcpy(eth + 6, srcmac, 6);
		h->st.arp_rewritten++;
		h->st.to_eth++;
		return HL2_ETH_HLEN + n;
	}
	if (ethertype != ETH_P_IP && ethertype != ETH_P_IPV6) {
		h->st.bad_ethertype++;
		return -EPROTONOSUPPORT;
	}
	if ((ethertype == ETH_P_IP && len < 20) || (ethertype == ETH_P_IPV6 && len < IP6_HDR_LEN)) {
		h->st.bad_frame++;
		return -EINVAL;
	}
	/* Source MAC: the peer this came from. */
	peer = peer_of_src(h, src);
	if (peer) {
		memcpy(eth + 6, peer->mac, 6);
	} else {
		static const uint8_t unknown[6] = { 0x02, 0, 0, 0, 0, 0x01 };

		memcpy(eth + 6, unknown, 6);
		h->st.unknown_src++;
	}
	if (src->mcast)
		mcast_mac(ethertype, p, eth);
	else
		memcpy(eth, h->own_mac, 6);
	if (ethertype == ETH_P_IPV6 && is_nd(p, len)) {
		struct nd_msg m;

		if (nd_parse(p, len, ND_LINK_IB, &m) != ND_OK) {
			h->st.bad_nd++;
			return -EINVAL;
		}
		n = nd_rewrite(h, p, len, false, src_lid(h, src), eth + HL2_ETH_HLEN,
			       cap - HL2_ETH_HLEN);
		if (n < 0) {
			h->st.bad_nd++;
			return n;
		}
		h->st.nd_rewritten++;
		h->st.to_eth++;
		return HL2_ETH_HLEN + n;
	}
	if (len > cap - HL2_ETH_HLEN) {
		h->st.too_big++;
		return -EMSGSIZE;
	}
	memcpy(eth + HL2_ETH_HLEN, p, len);
	if (ethertype == ETH_P_IP)
		dhcp_to_eth(h, eth + HL2_ETH_HLEN, len);
	h->st.to_eth++;
	return (int)(HL2_ETH_HLEN + len);
}

int hl2_eth_to_ib(struct hl2 *h, const uint8_t *frame, size_t len, uint8_t *out, size_t cap,
		  uint16_t *ethertype, struct hl2_dst *dst)
{
	const uint8_t *p = frame + HL2_ETH_HLEN;
	size_t plen;
	uint16_t et;
	const struct hl2_peer *peer = NULL;

	memset(dst, 0, sizeof(*dst));
	if (len < HL2_ETH_HLEN) {
		h->st.bad_frame++;
		return -EINVAL;
	}
	plen = len - HL2_ETH_HLEN;
	et = ip_be16(frame + 12);
	*ethertype = et;
	if (!memcmp(frame, bcast_mac, 6)) {
		dst->kind = HL2_DST_BCAST;
	} else if (frame[0] & 1) {
		dst->kind = HL2_DST_MCAST;
	} else {
		dst->kind = HL2_DST_UNICAST;
		peer = hl2_by_mac(h, frame);
		if (!peer) {
			h->st.unknown_dst_mac++;
			return -ENXIO;
		}
		dst->hw = peer->hw;
	}
	if (et == ETH_P_ARP) {
		struct arp_pkt a;
		uint8_t tha[20];
		size_t n;

		if (arp_parse(p, plen, ARP_HTYPE_ETHER, &a) != ARP_OK ||
		    dst->kind == HL2_DST_MCAST) {
			h->st.bad_arp++;
			return -EINVAL;
		}
		if (hw_of_mac(h, a.tha, tha) < 0) {
			h->st.unknown_tha++;
			return -ENXIO;
		}
		/* The sender is the kernel: our own address, whatever MAC it wrote. */
		n = arp_build(out, cap, ARP_HTYPE_IB, a.op, h->own_hw_bytes, a.spa, tha, a.tpa);
		if (!n)
			return -EMSGSIZE;
		h->st.arp_rewritten++;
		h->st.to_ib++;
		return (int)n;
	}
	if (et == ETH_P_IP) {
		if (plen < 20 || (p[0] >> 4) != 4) {
			h->st.bad_frame++;
			return -EINVAL;
		}
		dst->family = AF_INET;
		dst->is_ip = true;
		memcpy(dst->ip, p + 16, 4);
		if (dst->kind == HL2_DST_MCAST && !(p[16] >= 224 && p[16] <= 239)) {
			h->st.bad_frame++;
			return -EINVAL;
		}
	} else if (et == ETH_P_IPV6) {
		if (plen < IP6_HDR_LEN || (p[0] >> 4) != 6) {
			h->st.bad_frame++;
			return -EINVAL;
		}
		dst->family = AF_INET6;
		dst->is_ip = true;
		memcpy(dst->ip, p + 24, 16);
		if (dst->kind != HL2_DST_UNICAST && p[24] != 0xff) {
			h->st.bad_frame++;
			return -EINVAL;
		}
		if (dst->kind == HL2_DST_BCAST)
			dst->kind = HL2_DST_MCAST;
		if (is_nd(p, plen)) {
			struct nd_msg m;
			int n;

			if (nd_parse(p, plen, ND_LINK_ETHER, &m) != ND_OK) {
				h->st.bad_nd++;
				return -EINVAL;
			}
			n = nd_rewrite(h, p, plen, true, 0, out, cap);
			if (n < 0) {
				h->st.bad_nd++;
				return n;
			}
			h->st.nd_rewritten++;
			h->st.to_ib++;
			return n;
		}
	} else {
		h->st.bad_ethertype++;
		return -EPROTONOSUPPORT;
	}
	if (et == ETH_P_IP) {
		int n = dhcp_to_ib(h, p, plen, out, cap);

		if (n) {
			if (n > 0)
				h->st.to_ib++;
			else
				h->st.too_big++;
			return n;
		}
	}
	if (plen > cap) {
		h->st.too_big++;
		return -EMSGSIZE;
	}
	memcpy(out, p, plen);
	h->st.to_ib++;
	return (int)plen;
}
