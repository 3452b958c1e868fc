/*
 * libFuzzer harness for kernel/kroute's reading of kernel routes: arbitrary bytes as an
 * rtnetlink message (the first octet picks the message type, so both route types and
 * others are tried) through libnl's parser into kroute_parse. A route it accepts must be
 * well formed: a family with its prefix length, host bits clear, 1..RT_ECMP_MAX next hops,
 * gateways of the prefix's family, source kernel.
 */
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/kroute.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static uint32_t map(void *ctx, int kif)
{
	(void)ctx;
	return kif & 1 ? (uint32_t)kif : 0;
}

static uint8_t buf[65536] __attribute__((aligned(8)));

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	struct rt_route r, m;
	unsigned i;

	if (size < 1 || size - 1 + NLMSG_HDRLEN > sizeof(buf))
		return 0;
	memset(h, 0, NLMSG_HDRLEN);
	h->nlmsg_type = data[0] & 1 ? RTM_NEWROUTE : data[0] & 2 ? RTM_DELROUTE : data[0];
	h->nlmsg_len = (uint32_t)(NLMSG_HDRLEN + size - 1);
	memcpy(buf + NLMSG_HDRLEN, data + 1, size - 1);
	if (kroute_parse(buf, h->nlmsg_len, 101, KROUTE_PROTO, map, NULL, &r) != 1)
		return 0;
	check(r.source == RT_SRC_KERNEL);
	check(r.prefix.addr.family == AF_INET || r.prefix.addr.family == AF_INET6);
	check(r.prefix.len <= ip_addr_bits(&r.prefix.addr));
	m = r;
	ip_prefix_mask(&m.prefix);
	check(memcmp(&m.prefix, &r.prefix, sizeof(m.prefix)) == 0);
	check(r.nnh >= 1 && r.nnh <= RT_ECMP_MAX);
	for (i = 0; i < r.nnh; i++) {
		check(r.nh[i].type <= RT_NH_BLACKHOLE && r.nh[i].type != RT_NH_LOCAL);
		if (r.nh[i].type == RT_NH_GATEWAY)
			check(r.nh[i].gw.family == r.prefix.addr.family);
		if (r.nh[i].type == RT_NH_CONNECTED)
			check(r.nh[i].ifindex != 0);
	}
	return 0;
}
