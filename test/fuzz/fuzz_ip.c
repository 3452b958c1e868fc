/*
 * libFuzzer harness for pkt/ip: IPv4 and IPv6 validation and the extension-header
 * chain. What validates must be self-consistent (offsets inside the packet), a TTL
 * decrement must leave a header that validates again, and the address checks and
 * flow hashes must run on anything that validated.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/ip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ip4_info i4, j4;
	struct ip6_info i6;
	uint8_t buf[65536];

	if (size > sizeof(buf))
		return 0;
	if (ip4_validate(data, size, &i4) == IP_OK) {
		check(i4.hdr_len >= 20 && i4.hdr_len <= i4.tot_len && i4.tot_len <= size);
		(void)ip4_check_addrs(&ip4_martian_default, i4.src, i4.dst);
		memcpy(buf, data, size);
		if (ip4_ttl_decrement(buf) == IP_OK) {
			check(ip4_validate(buf, size, &j4) == IP_OK);
			check(j4.ttl == i4.ttl - 1);
		} else {
			check(i4.ttl <= 1);
		}
	}
	if (ip6_validate(data, size, &i6) == IP_OK) {
		check(i6.pkt_len <= size && i6.l4_off <= i6.pkt_len && i6.l4_off >= 40);
		check(i6.n_ext <= IP6_EXT_MAX);
		(void)ip6_check_addrs(&ip6_martian_default, data + 8, data + 24);
	}
	return 0;
}
