/*
 * libFuzzer harness for the IPoIB link's receive side and the IB host role's L2
 * rewriting: the input is a UD receive buffer (40-octet GRH area, IPoIB header,
 * payload). First octet: flags (bit 0: has_grh, bit 1: arrived through a group,
 * bit 2: also feed the payload to the Ethernet -> IB direction as a frame). Checks:
 * ipoib_rx_classify stays inside the buffer and its result is consistent; whatever
 * hl2_ib_to_eth produces is a frame the Ethernet-side codecs accept again (ARP parses
 * as hardware type 1, ND parses with valid checksum and Ethernet options), and
 * rewriting that frame back towards IB succeeds for ARP/ND and yields a valid IPoIB
 * message.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipoib/ipoib_link.h"
#include "pkt/arp.h"
#include "pkt/ip.h"
#include "pkt/nd.h"
#include "sim/host/host_l2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static struct hl2 h;
static uint8_t frame[70000], back[70000];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ipoib_rx rx;
	struct ipoib_hwaddr own = { .flags = 0, .qpn = 0x48 };
	uint8_t flags;
	int n;

	if (size < 1)
		return 0;
	flags = data[0];
	data++;
	size--;
	ib_gid_set(&own.gid, 0xfe80000000000000ull, 0x0002c90300a10007ull);
	hl2_init(&h, &own);

	enum ipoib_rx_kind k = ipoib_rx_classify(data, size, flags & 1, &rx);

	check(k == rx.kind);
	if (k == IPOIB_RX_DROP) {
		check(rx.why < IPOIB_DROP_COUNT);
	} else {
		check(rx.data == data + IBP_GRH_AREA + IPOIB_ENCAP_LEN);
		check(rx.len == size - IBP_GRH_AREA - IPOIB_ENCAP_LEN);
		struct hl2_src src = { .qpn = 0x49,
				       .lid = 6,
				       .has_gid = rx.has_grh,
				       .gid = rx.sgid,
				       .mcast = (flags & 2) != 0 };

		n = hl2_ib_to_eth(&h, rx.ethertype, rx.data, rx.len, &src, frame, sizeof(frame));
		if (n > 0) {
			struct hl2_dst d;
			uint16_t et;
			int m;

			check(n >= HL2_ETH_HLEN);
			if (k == IPOIB_RX_ARP) {
				struct arp_pkt a;

				check(arp_parse(frame + 14, (size_t)n - 14, ARP_HTYPE_ETHER, &a) ==
				      ARP_OK);
			}
			if (k == IPOIB_RX_ND) {
				struct nd_msg msg;

				check(nd_parse(frame + 14, (size_t)n - 14, ND_LINK_ETHER, &msg) ==
				      ND_OK);
			}
			/* Back towards IB: ARP and ND must map back (every MAC in them is known now),
			 * except a unicast ARP/ND frame whose destination is our own MAC. */
			if (!(flags & 2))
				memcpy(frame, h.n_peers ? h.peers[0].mac : h.own_mac, 6);
			m = hl2_eth_to_ib(&h, frame, (size_t)n, back, sizeof(back), &et, &d);
			if (m > 0 && k == IPOIB_RX_ND) {
				struct nd_msg msg;

				check(nd_parse(back, (size_t)m, ND_LINK_IB, &msg) == ND_OK);
			}
			/* ARP back towards IB is the kernel's: the sender becomes us, so it
			 * must parse again only when the sender already was us. */
			if (m > 0 && k == IPOIB_RX_ARP && !memcmp(frame + 14 + 8, h.own_mac, 6)) {
				struct arp_pkt a;

				check(arp_parse(back, (size_t)m, ARP_HTYPE_IB, &a) == ARP_OK);
			}
		}
	}
	if (flags & 4) {
		struct hl2_dst d;
		uint16_t et;

		n = hl2_eth_to_ib(&h, data, size, back, sizeof(back), &et, &d);
		check(n < 0 || (size_t)n <= size - HL2_ETH_HLEN + HL2_GROWTH);
	}
	return 0;
}
