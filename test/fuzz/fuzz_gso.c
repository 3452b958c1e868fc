/*
 * libFuzzer harness for pkt/gso: the GSO metadata path. Input: a 10-octet
 * virtio_net_hdr, 2 octets of egress MTU (big-endian; 0: none), then an Ethernet frame.
 * gso_check must refuse or accept without reading outside the frame; a GSO packet it
 * accepts is planned for the MTU and every segment is cut: each fits the MTU, has a
 * valid IP header of its own length, a TCP/UDP checksum that verifies, and the segments'
 * payloads end to end are the packet's. A non-GSO frame with a partial checksum gets it
 * completed, and then it verifies. gso_plan is also fed the raw frame's IP part with a
 * kind and size taken from the header, without gso_check first. gso_l4_csum_fix_partial
 * (the AF_XDP port's guess) is fed the raw frame's IP part: when it changes anything,
 * only the TCP/UDP checksum field changed, the field held the pseudo-header sum, and the
 * packet now verifies.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/gso.h"
#include "pkt/ip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static uint8_t frame[70000], seg[70000];

/* The L4 checksum of an IP packet of exactly len octets verifies. */
static int l4_ok(const uint8_t *p, size_t len, size_t l4, uint8_t proto)
{
	uint32_t n = (uint32_t)(len - l4);
	uint64_t s = (p[0] >> 4) == 4 ? ip4_pseudo_sum(p + 12, p + 16, (uint16_t)n, proto)
				      : ip6_pseudo_sum(p + 8, p + 24, n, proto);

	return ip_csum_fold(ip_csum_add(s, p + l4, n)) == 0xffff;
}

/* Cut every segment of the plan and check it. */
static void cut(const struct gso_plan *p, const uint8_t *ip, size_t len, uint32_t mtu)
{
	uint32_t total = 0;
	uint8_t proto = p->kind == GSO_TCP ? 6 : 17;

	check(p->n >= 1 && p->n <= GSO_SEGS_MAX && p->hdr_len <= GSO_HDR_MAX);
	check(p->hdr_len + p->payload == len);
	for (unsigned i = 0; i < p->n; i++) {
		size_t n = gso_seg_len(p, i);

		check(n > p->hdr_len || p->payload == 0);
		check(!mtu || n <= mtu);
		check(gso_segment(p, ip, i, seg) == n);
		if (p->family == 4) {
			struct ip4_info ii;

			check(ip4_validate(seg, n, &ii) == IP_OK && ii.tot_len == n);
		} else {
			struct ip6_info ii;

			check(ip6_validate(seg, n, &ii) == IP_OK && ii.pkt_len == n);
		}
		check(l4_ok(seg, n, p->l4_off, proto));
		check(memcmp(seg + p->hdr_len, ip + p->hdr_len + total, n - p->hdr_len) == 0);
		total += (uint32_t)(n - p->hdr_len);
	}
	check(total == p->payload);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gso_vnet v;
	struct gso_pkt g, raw;
	struct gso_plan p;
	bool partial;
	uint32_t mtu;
	size_t len;

	if (size < GSO_VNET_LEN + 2 || size - GSO_VNET_LEN - 2 > sizeof(frame))
		return 0;
	gso_vnet_read(&v, data);
	mtu = (uint32_t)(data[GSO_VNET_LEN] << 8 | data[GSO_VNET_LEN + 1]);
	len = size - GSO_VNET_LEN - 2;
	memcpy(frame, data + GSO_VNET_LEN + 2, len);

	if (gso_check(&v, frame, len, &g, &partial) == GSO_OK) {
		check(memcmp(frame, data + GSO_VNET_LEN + 2, len) == 0); /* read only */
		if (g.kind != GSO_NONE) {
			check(g.size == v.gso_size && len > 14);
			if (gso_plan(frame + 14, len - 14, &g, mtu, &p) == GSO_OK) {
				cut(&p, frame + 14, len - 14, mtu);
				gso_l4_seed(&p, frame + 14);
			}
		} else if (partial && len > 14 && gso_l4_csum_fill(frame + 14, len - 14)) {
			const uint8_t *ip = frame + 14;
			size_t tot = (ip[0] >> 4) == 4 ? ip_be16(ip + 2) : 40u + ip_be16(ip + 4);
			uint8_t proto = 0;
			size_t l4 = 0;

			if ((ip[0] >> 4) == 4) {
				struct ip4_info ii;

				check(ip4_validate(ip, tot, &ii) == IP_OK);
				proto = ii.proto;
				l4 = ii.hdr_len;
			} else {
				struct ip6_info ii;

				check(ip6_validate(ip, tot, &ii) == IP_OK);
				proto = ii.proto;
				l4 = ii.l4_off;
			}
			check(l4_ok(ip, tot, l4, proto));
		}
	} else {
		check(memcmp(frame, data + GSO_VNET_LEN + 2, len) == 0);
	}

	/* gso_l4_csum_fix_partial on whatever the frame holds after 14 octets */
	if (len > 14) {
		const uint8_t *orig = data + GSO_VNET_LEN + 2 + 14;
		size_t n = len - 14, diff = 0, at = 0;

		memcpy(frame, data + GSO_VNET_LEN + 2, len);
		if (gso_l4_csum_fix_partial(frame + 14, n)) {
			const uint8_t *ip = frame + 14;
			size_t tot = (ip[0] >> 4) == 4 ? ip_be16(ip + 2) : 40u + ip_be16(ip + 4);

			for (size_t i = 0; i < n; i++)
				if (ip[i] != orig[i]) {
					diff++;
					at = i;
				}
			check(diff <= 2 && diff >= 1);
			if ((ip[0] >> 4) == 4) {
				struct ip4_info ii;

				check(ip4_validate(ip, tot, &ii) == IP_OK);
				check(at - ii.hdr_len == (ii.proto == 6 ? 17u : 7u) ||
				      at - ii.hdr_len == (ii.proto == 6 ? 16u : 6u));
				check(l4_ok(ip, tot, ii.hdr_len, ii.proto));
			} else {
				struct ip6_info ii;

				check(ip6_validate(ip, tot, &ii) == IP_OK);
				check(at - ii.l4_off == (ii.proto == 6 ? 17u : 7u) ||
				      at - ii.l4_off == (ii.proto == 6 ? 16u : 6u));
				check(l4_ok(ip, tot, ii.l4_off, ii.proto));
			}
			/* and it is a fixed point: nothing more to fix */
			check(!gso_l4_csum_fix_partial(frame + 14, n));
		}
	}

	/* gso_plan alone on whatever the frame holds after 14 octets */
	if (len > 14) {
		memcpy(frame, data + GSO_VNET_LEN + 2, len);
		raw.kind = (uint8_t)(v.flags % 4);
		raw.size = v.gso_size;
		if (gso_plan(frame + 14, len - 14, &raw, mtu, &p) == GSO_OK)
			cut(&p, frame + 14, len - 14, mtu);
	}
	return 0;
}
