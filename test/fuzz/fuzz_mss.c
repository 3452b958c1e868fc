/*
 * libFuzzer harness for pkt/mss: clamp arbitrary IPv4/IPv6 packets (first two octets:
 * the MSS limit). Only the MSS value and the TCP checksum may change, and a packet whose
 * TCP checksum was right before is right after.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/ip.h"
#include "pkt/mss.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

/* Does the TCP checksum verify? (l4 offset and segment length from validation) */
static int tcp_ok(const uint8_t *p, int v6, size_t l4, size_t seg)
{
	uint64_t s = v6 ? ip6_pseudo_sum(p + 8, p + 24, (uint32_t)seg, 6)
			: ip4_pseudo_sum(p + 12, p + 16, (uint16_t)seg, 6);

	return ip_csum_fold(ip_csum_add(s, p + l4, seg)) == 0xffff;
}

static uint8_t buf[65536];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3 || size - 2 > sizeof(buf))
		return 0;
	uint16_t max = (uint16_t)(data[0] << 8 | data[1]);
	data += 2;
	size -= 2;
	memcpy(buf, data, size);
	int v6 = (data[0] >> 4) == 6;
	size_t l4 = 0, seg = 0;
	if (v6) {
		struct ip6_info i;
		if (ip6_validate(data, size, &i) == IP_OK) {
			l4 = i.l4_off;
			seg = i.pkt_len - i.l4_off;
		}
	} else {
		struct ip4_info i;
		if (ip4_validate(data, size, &i) == IP_OK) {
			l4 = i.hdr_len;
			seg = i.tot_len - i.hdr_len;
		}
	}
	uint16_t old = 0;
	enum mss_result r =
	    v6 ? mss_clamp6(buf, size, max, &old) : mss_clamp4(buf, size, max, &old);
	if (r != MSS_CLAMPED) {
		check(memcmp(buf, data, size) == 0);
		return 0;
	}
	check(old > max && l4 && seg >= 20);
	size_t diff = 0;
	for (size_t i = 0; i < size; i++)
		diff += buf[i] != data[i];
	check(diff <= 4);
	if (tcp_ok(data, v6, l4, seg))
		check(tcp_ok(buf, v6, l4, seg));
	return 0;
}
