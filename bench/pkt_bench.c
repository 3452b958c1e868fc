/*
 * Packet library rates per core, each next to a straightforward reference measured in
 * the same run; figures are medians of 7 rounds, printed with their ratio.
 *
 *   ip4 forward   ip4_validate + ip4_check_addrs + ip4_ttl_decrement (RFC 1624 update)
 *                 vs. the textbook path: verify by summing the header, decrement, zero
 *                 the field and recompute the whole header checksum
 *   ip6 forward   ip6_validate (chain walk, here HBH + TCP) + ip6_check_addrs + hop-1
 *   arp parse     arp_parse + arp_classify (Ethernet)
 *   nd parse      nd_parse of an NS with a source link-layer option, vs. the bare cost
 *                 of verifying its ICMPv6 checksum (the floor any ND parser pays)
 * Benchmarks print figures; they never pass or fail.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pkt/arp.h"
#include "pkt/ip.h"
#include "pkt/nd.h"

#define BATCH  1024
#define ROUNDS 7

static volatile uint64_t sink;
static uint8_t pkts[BATCH][128], pristine[BATCH][128];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Textbook checksum: 16-bit words, fold at the end. */
static uint16_t ref_csum(const uint8_t *p, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static uint64_t ours4(void)
{
	uint64_t ok = 0;

	for (int i = 0; i < BATCH; i++) {
		struct ip4_info info;
		uint8_t *p = pkts[i];

		if (ip4_validate(p, 64, &info) == IP_OK &&
		    ip4_check_addrs(&ip4_martian_default, info.src, info.dst) == IP_OK &&
		    ip4_ttl_decrement(p) == IP_OK)
			ok++;
	}
	return ok;
}

static uint64_t ref4(void)
{
	uint64_t ok = 0;

	for (int i = 0; i < BATCH; i++) {
		uint8_t *p = pkts[i];
		size_t ihl = (size_t)(p[0] & 15) * 4;

		if (p[0] >> 4 != 4 || ihl < 20 || (size_t)(p[2] << 8 | p[3]) > 64 ||
		    ref_csum(p, ihl) != 0 || p[8] <= 1 || p[12] == 127 || p[12] == 0 ||
		    p[12] >= 224)
			continue;
		p[8]--;
		p[10] = p[11] = 0;
		uint16_t c = ref_csum(p, ihl);
		p[10] = (uint8_t)(c >> 8);
		p[11] = (uint8_t)c;
		ok++;
	}
	return ok;
}

static uint64_t ours6(void)
{
	uint64_t ok = 0;

	for (int i = 0; i < BATCH; i++) {
		struct ip6_info info;
		uint8_t *p = pkts[i];

		if (ip6_validate(p, 88, &info) == IP_OK &&
		    ip6_check_addrs(&ip6_martian_default, p + 8, p + 24) == IP_OK &&
		    ip6_hop_decrement(p) == IP_OK)
			ok += info.proto;
	}
	return ok;
}

static uint64_t arp_run(void)
{
	uint64_t ok = 0;

	for (int i = 0; i < BATCH; i++) {
		struct arp_pkt a;

		if (arp_parse(pkts[i], 28, ARP_HTYPE_ETHER, &a) == ARP_OK)
			ok += arp_classify(&a) + 1;
	}
	return ok;
}

static uint64_t nd_run(void)
{
	uint64_t ok = 0;

	for (int i = 0; i < BATCH; i++) {
		struct nd_msg m;

		if (nd_parse(pkts[i], 72, ND_LINK_ETHER, &m) == ND_OK)
			ok += m.type;
	}
	return ok;
}

static uint64_t nd_floor(void)
{
	uint64_t ok = 0;

	for (int i = 0; i < BATCH; i++) {
		const uint8_t *p = pkts[i];
		uint32_t s = 32 + 58;

		for (int k = 8; k < 72; k += 2)
			s += (uint32_t)(p[k] << 8 | p[k + 1]);
		while (s >> 16)
			s = (s & 0xffff) + (s >> 16);
		ok += s == 0xffff;
	}
	return ok;
}

/* Packets per second of fn, median of ROUNDS rounds of about 0.1 s each. The packets
 * are restored from the pristine copy every 200 passes (TTLs run down). */
static double rate(uint64_t (*fn)(void))
{
	double r[ROUNDS];

	for (int k = 0; k < ROUNDS; k++) {
		uint64_t passes = 0;
		double t0 = now(), t;

		memcpy(pkts, pristine, sizeof(pkts));
		do {
			for (int j = 0; j < 50; j++) {
				sink += fn();
				if (++passes % 200 == 0)
					memcpy(pkts, pristine, sizeof(pkts));
			}
			t = now() - t0;
		} while (t < 0.1);
		r[k] = (double)passes * BATCH / t;
	}
	qsort(r, ROUNDS, sizeof(r[0]), cmp);
	return r[ROUNDS / 2];
}

static void fill4(void)
{
	for (int i = 0; i < BATCH; i++) {
		uint8_t *p = pristine[i];

		memset(p, 0, 128);
		p[0] = 0x45, p[3] = 64, p[8] = 255, p[9] = 17;
		p[12] = 10, p[13] = (uint8_t)(i >> 8), p[14] = (uint8_t)i, p[15] = 1;
		p[16] = 10, p[17] = 200, p[18] = (uint8_t)i, p[19] = 9;
		uint16_t c = ref_csum(p, 20);
		p[10] = (uint8_t)(c >> 8), p[11] = (uint8_t)c;
	}
}

static void fill6(void)
{
	for (int i = 0; i < BATCH; i++) {
		uint8_t *p = pristine[i];

		memset(p, 0, 128);
		p[0] = 0x60, p[5] = 48, p[6] = 0, p[7] = 255;
		p[8] = 0x20, p[9] = 1, p[10] = 0xd, p[11] = 0xb8, p[22] = (uint8_t)i, p[23] = 1;
		p[24] = 0x20, p[25] = 1, p[26] = 0xd, p[27] = 0xb9, p[39] = 2;
		p[40] = 6, p[42] = 1, p[43] = 4; /* hop-by-hop, PadN, then TCP */
	}
}

static void fill_arp(void)
{
	static const uint8_t mac[6] = { 2, 0, 0, 0, 0, 1 };

	for (int i = 0; i < BATCH; i++)
		arp_build_request(pristine[i], 128, ARP_HTYPE_ETHER, mac, 0x0a000001u + (unsigned)i,
				  0x0a000fffu);
}

static void fill_nd(void)
{
	static const uint8_t mac[6] = { 2, 0, 0, 0, 0, 1 };
	uint8_t src[16] = { 0xfe, 0x80 }, tgt[16] = { 0x20, 1, 0xd, 0xb8 };

	for (int i = 0; i < BATCH; i++) {
		src[15] = (uint8_t)i;
		tgt[14] = (uint8_t)(i >> 8), tgt[15] = (uint8_t)i;
		nd_build_ns(pristine[i], 128, ND_LINK_ETHER, src, NULL, tgt, mac);
	}
}

int main(void)
{
	double a, b;

	printf("%-34s %14s %14s %8s\n", "case (64-octet packets)", "ours pkt/s", "reference",
	       "ratio");
	fill4();
	a = rate(ours4);
	b = rate(ref4);
	printf("%-34s %14.3e %14.3e %8.2f\n", "ip4 validate+ttl (RFC 1624)", a, b, a / b);
	fill6();
	a = rate(ours6);
	printf("%-34s %14.3e %14s %8s\n", "ip6 validate (HBH chain)+hop", a, "-", "-");
	fill_arp();
	a = rate(arp_run);
	printf("%-34s %14.3e %14s %8s\n", "arp parse+classify", a, "-", "-");
	fill_nd();
	a = rate(nd_run);
	b = rate(nd_floor);
	printf("%-34s %14.3e %14.3e %8.2f\n", "nd parse (NS+SLLA) vs csum floor", a, b, a / b);
	return sink == 42 ? 1 : 0;
}
