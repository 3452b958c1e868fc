/*
 * libFuzzer harness for the proxy ARP/ND decision (pkt/proxy): arbitrary ARP packets
 * and IPv6 packets, on an Ethernet and an IPoIB side, against a lookup whose answer for
 * each address is drawn from the input too, with and without DAD defence. Whatever is
 * decided must be consistent: an answer is a reply that parses again on that link
 * type (but for the defence of a DAD probe, whose target 0.0.0.0 the receive side
 * refuses) and claims the gateway's own link address for the address asked about.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_at(int cond, int line)
{
	if (!cond) {
		fprintf(stderr, "fuzz_proxy: check at line %d failed\n", line);
		abort();
	}
}
#define check(cond) check_at((cond), __LINE__)

/* The first input octet picks, per address, where it lives. */
static uint8_t where_bits;

static enum proxy_where lookup(void *ctx, int family, const uint8_t *addr)
{
	(void)ctx;
	(void)family;
	return (enum proxy_where)((where_bits ^ addr[0] ^ addr[3]) % 5);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t mac[6] = { 0x02, 0, 0, 0, 0, 0x01 };
	static const uint8_t ib_addr[20] = { 0x80, 0, 0, 0x48, 0xfe, 0x80, [19] = 1 };
	static const uint8_t frame_src[20] = { 0x02, 0, 0, 0, 0, 0x02 };
	uint8_t out[ARP_MAX_LEN + ND_MAX_LEN];

	if (size < 2)
		return 0;
	where_bits = data[0];
	struct proxy_cfg cfg = { .enabled = true,
				 .answer_unresolved = data[1] & 1,
				 .defend_dad = data[1] & 2,
				 .router = data[1] & 4 };
	data += 2;
	size -= 2;

	for (int ib = 0; ib < 2; ib++) {
		struct proxy_link link = { .ib = ib, .lladdr = ib ? ib_addr : mac };
		struct proxy_env env = { .cfg = &cfg, .link = &link, .lookup = lookup };
		struct arp_pkt req, rep;
		struct nd_msg ns, na;
		struct proxy_decision d;

		if (arp_parse(data, size, ib ? ARP_HTYPE_IB : ARP_HTYPE_ETHER, &req) == ARP_OK) {
			d = proxy_arp(&env, &req, frame_src, out, sizeof(out));
			check(d.reason < PROXY_REASON_COUNT);
			if (d.action == PROXY_ANSWER) {
				check(d.len > 0 && d.len <= sizeof(out));
				/* A defence of a DAD probe (sender 0.0.0.0) goes back to 0.0.0.0, as
				 * Linux's does; arp_parse refuses that target on receive. */
				if (req.spa) {
					check(arp_parse(out, d.len,
							ib ? ARP_HTYPE_IB : ARP_HTYPE_ETHER,
							&rep) == ARP_OK);
					check(!memcmp(rep.sha, link.lladdr, rep.hlen));
					check(rep.spa == req.tpa);
				}
			}
		}
		if (nd_parse(data, size, ib ? ND_LINK_IB : ND_LINK_ETHER, &ns) == ND_OK) {
			d = proxy_nd(&env, &ns, frame_src, out, sizeof(out));
			check(d.reason < PROXY_REASON_COUNT);
			if (d.action == PROXY_ANSWER) {
				check(d.len > 0 && d.len <= sizeof(out));
				check(nd_parse(out, d.len, ib ? ND_LINK_IB : ND_LINK_ETHER, &na) ==
				      ND_OK);
				check(na.target && ns.target && !memcmp(na.target, ns.target, 16));
			}
		}
	}
	return 0;
}
