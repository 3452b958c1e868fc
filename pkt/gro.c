/*
 * TCP receive coalescing (pkt/gro.h): the checks of tcp_gro_receive and inet_gro_receive
 * / ipv6_gro_receive over plain buffers. Runs on the caller's thread (sim/host: its one
 * loop).
 */
#include "pkt/gro.h"

#include <netinet/in.h>
#include <string.h>

#include "pkt/ip.h"

/* What one segment says of itself. */
struct seg {
	uint32_t len; /* IP length */
	uint32_t seq;
	uint16_t l4_off, hdr_len;
	uint8_t family, flags;
};

/* A segment that may be merged, by its headers: see gro_tcp_begin in gro.h (its TCP
 * checksum is checked last, by tcp_csum_ok, when nothing cheaper refused it). */
static bool parse(const uint8_t *ip, size_t len, struct seg *s)
{
	const uint8_t *th;
	unsigned doff;

	if (len < 20)
		return false;
	if (ip[0] == 0x45) {
		s->len = ip_be16(ip + 2);
		if (ip[9] != IPPROTO_TCP || s->len > len || (ip_be16(ip + 6) & 0x3fff) ||
		    ip_csum_fold(ip_csum_add(0, ip, 20)) != 0xffff)
			return false; /* MF or an offset: a fragment */
		s->l4_off = 20;
		s->family = 4;
	} else if ((ip[0] >> 4) == 6 && len >= 40) {
		s->len = 40u + ip_be16(ip + 4);
		if (ip[6] != IPPROTO_TCP || s->len > len)
			return false;
		s->l4_off = 40;
		s->family = 6;
	} else {
		return false;
	}
	if (s->len < s->l4_off + 20u)
		return false;
	th = ip + s->l4_off;
	doff = (unsigned)(th[12] >> 4) * 4;
	if (doff < 20 || s->l4_off + doff >= s->len)
		return false; /* no payload: nothing to merge */
	s->hdr_len = (uint16_t)(s->l4_off + doff);
	s->flags = th[13];
	if ((s->flags & (TCP_ACK | TCP_SYN | TCP_FIN | TCP_RST | TCP_URG | TCP_CWR)) != TCP_ACK)
		return false;
	s->seq = ip_be32(th + 4);
	return true;
}

/* Its TCP checksum verifies: a merged packet's is left partial, which its receiver
 * trusts, so every segment's is verified here. */
static bool tcp_csum_ok(const uint8_t *ip, const struct seg *s)
{
	uint32_t l4len = s->len - s->l4_off;

	return ip_csum_fold(ip_csum_add(ip_pseudo_sum(ip, s->family, l4len, IPPROTO_TCP),
					ip + s->l4_off, l4len)) == 0xffff;
}

bool gro_tcp_begin(struct gro_tcp *g, uint8_t *buf, size_t cap, const uint8_t *ip, size_t len)
{
	size_t limit = cap < GRO_MAX_LEN ? cap : GRO_MAX_LEN;
	struct seg s;

	g->segs = 0;
	/* Held only when a second segment of its size could follow: a bigger one (IPoIB
	 * connected mode's) would be copied for nothing. */
	if (!parse(ip, len, &s) || s.len + (s.len - s.hdr_len) > limit || !tcp_csum_ok(ip, &s))
		return false;
	memcpy(buf, ip, s.len);
	g->ip = buf;
	g->cap = limit;
	g->len = s.len;
	g->l4_off = s.l4_off;
	g->hdr_len = s.hdr_len;
	g->mss = (uint16_t)(s.len - s.hdr_len);
	g->next_seq = s.seq + g->mss;
	g->segs = 1;
	g->family = s.family;
	g->closed = (s.flags & TCP_PSH) != 0;
	return true;
}

/* The IP fields that must match: all but length, identification and checksum (IPv4:
 * version/IHL, TOS, flags, TTL, protocol, addresses; IPv6: version, traffic class, flow
 * label, next header, hop limit, addresses). */
static bool same_ip(const uint8_t *a, const uint8_t *b, uint8_t family)
{
	if (family == 4)
		return !memcmp(a, b, 2) && !memcmp(a + 6, b + 6, 4) && !memcmp(a + 12, b + 12, 8);
	return !memcmp(a, b, 4) && !memcmp(a + 6, b + 6, 34);
}

/* The TCP fields that must match: all but sequence number, checksum and PSH (ports,
 * acknowledgement, data offset, flags, window, urgent pointer, options). */
static bool same_tcp(const uint8_t *a, const uint8_t *b, unsigned len)
{
	return !memcmp(a, b, 4) && !memcmp(a + 8, b + 8, 5) && !((a[13] ^ b[13]) & ~TCP_PSH) &&
	       !memcmp(a + 14, b + 14, 2) && !memcmp(a + 18, b + 18, len - 18);
}

bool gro_tcp_append(struct gro_tcp *g, const uint8_t *ip, size_t len)
{
	struct seg s;
	uint32_t payload;
	uint8_t *th;

	if (!g->segs || g->closed || !parse(ip, len, &s) || s.family != g->family ||
	    s.hdr_len != g->hdr_len || s.seq != g->next_seq)
		return false;
	payload = s.len - s.hdr_len;
	th = g->ip + g->l4_off;
	if (payload > g->mss || g->len + payload > g->cap || !same_ip(g->ip, ip, g->family) ||
	    !same_tcp(th, ip + s.l4_off, (unsigned)(g->hdr_len - g->l4_off)) ||
	    !tcp_csum_ok(ip, &s))
		return false;
	memcpy(g->ip + g->len, ip + s.hdr_len, payload);
	g->len += payload;
	g->next_seq += payload;
	g->segs++;
	if (s.flags & TCP_PSH)
		th[13] |= TCP_PSH;
	g->closed = payload < g->mss || (s.flags & TCP_PSH);
	return true;
}

size_t gro_tcp_end(struct gro_tcp *g, unsigned l2_len, struct gso_vnet *v)
{
	uint8_t *ip = g->ip;

	memset(v, 0, sizeof(*v));
	if (g->segs > 1) {
		if (g->family == 4) {
			ip_put16(ip + 2, (uint16_t)g->len);
			ip_put16(ip + 10, 0);
			ip_put16(ip + 10, ip_csum(ip, 20));
		} else {
			ip_put16(ip + 4, (uint16_t)(g->len - 40));
		}
		ip_put16(ip + g->l4_off + 16, ip_csum_fold(ip_pseudo_sum(
						  ip, g->family, g->len - g->l4_off, IPPROTO_TCP)));
		v->flags = GSO_VNET_F_NEEDS_CSUM;
		v->gso_type = g->family == 4 ? GSO_VNET_TCPV4 : GSO_VNET_TCPV6;
		v->gso_size = g->mss;
		v->hdr_len = (uint16_t)(l2_len + g->hdr_len);
		v->csum_start = (uint16_t)(l2_len + g->l4_off);
		v->csum_offset = 16;
	}
	g->segs = 0;
	return g->len;
}
