/*
 * libFuzzer harness for pkt/icmp: build an error from an arbitrary invoking packet
 * (first octet: family, type, code, flags). Whatever is built must be a valid ICMP or
 * ICMPv6 packet: IP header valid, checksum right, within 576 / 1280 octets, the quote
 * a prefix of the invoking packet.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/icmp.h"
#include "pkt/ip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t me[16] = { 0x20, 1, 0xd, 0xb8, [15] = 1 };
	static const uint8_t t4[4][2] = { { 3, 1 }, { 3, 4 }, { 11, 0 }, { 12, 0 } };
	static const uint8_t t6[4][2] = { { 1, 0 }, { 2, 0 }, { 3, 0 }, { 4, 2 } };
	uint8_t out[1600];
	size_t n;

	if (size < 1)
		return 0;
	uint8_t sel = data[0];
	const uint8_t *inv = data + 1;
	size_t ilen = size - 1;
	struct icmp_err e = { .param = 1280 + sel, .src = me, .ll_multicast = sel & 0x40 };
	size_t cap = (sel & 0x20) ? 100 : sizeof(out);

	if (sel & 0x80) {
		e.type = t6[sel & 3][0];
		e.code = t6[sel & 3][1];
		if (icmp6_error(&e, inv, ilen, out, cap, &n) != ICMP_OK)
			return 0;
		struct ip6_info i;
		check(n <= 1280 && n <= cap);
		check(ip6_validate(out, n, &i) == IP_OK && i.proto == 58 && i.l4_off == 40);
		check(i.pkt_len == n);
		uint64_t s = ip6_pseudo_sum(out + 8, out + 24, (uint32_t)(n - 40), 58);
		check(ip_csum_fold(ip_csum_add(s, out + 40, n - 40)) == 0xffff);
		check(memcmp(out + 48, inv, n - 48) == 0);
	} else {
		e.type = t4[sel & 3][0];
		e.code = t4[sel & 3][1];
		if (icmp4_error(&e, inv, ilen, out, cap, &n) != ICMP_OK)
			return 0;
		struct ip4_info i;
		check(n <= 576 && n <= cap);
		check(ip4_validate(out, n, &i) == IP_OK && i.proto == 1 && i.tot_len == n);
		check(ip_csum_fold(ip_csum_add(0, out + 20, n - 20)) == 0xffff);
		check(memcmp(out + 28, inv, n - 28) == 0);
	}
	return 0;
}
