/*
 * libFuzzer harness for pkt/arp: whatever parses must rebuild to the same octets, and a
 * reply built to it must have the reply's shape.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/arp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint16_t links[3] = { 0, ARP_HTYPE_ETHER, ARP_HTYPE_IB };
	static const uint8_t me[20] = { 0x80, 0, 0, 1, 0xfe, 0x80, [19] = 1 };
	uint8_t out[ARP_MAX_LEN];
	struct arp_pkt a, r;

	for (int l = 0; l < 3; l++) {
		if (arp_parse(data, size, links[l], &a) != ARP_OK)
			continue;
		size_t n = arp_build(out, sizeof(out), a.htype, a.op, a.sha, a.spa, a.tha, a.tpa);
		check(n == 8u + 2u * a.hlen + 8u && n <= size);
		check(memcmp(out, data, n) == 0);
		(void)arp_classify(&a);
		n = arp_build_reply(out, sizeof(out), &a, me);
		check(n == 8u + 2u * a.hlen + 8u);
		enum arp_reason rr = arp_parse(out, n, a.htype, &r);
		/* a reply to a probe goes to 0.0.0.0; one to an announcement is about
		 * the target to the target, with a foreign tha: both refused on receive */
		check(rr == ARP_OK || (a.spa == 0 && rr == ARP_TPA_INVALID) ||
		      (a.spa == a.tpa && rr == ARP_REPLY_TO_SELF));
	}
	return 0;
}
