/*
 * Unit tests for table/route: connected and local routes from interface addresses, static
 * routes resolved through them (and not through other statics), best-route selection
 * (metric, then source), replace and delete falling back to the next best, ECMP groups
 * (shared between prefixes, hashed per flow, every member used, a flow stays put),
 * walking in prefix order (whole, or in pieces resumed after a prefix), slot reuse, and IPv6.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include "table/route.h"

static struct ip_prefix P(const char *s) {
	struct ip_prefix p;

	assert_int_equal(ip_prefix_parse(s, true, &p), 0);
	return p;
}

static struct ip_addr
A(const char *s) {
	struct ip_addr a;

	assert_int_equal(ip_addr_parse(s, &a), 0);
	return a;
}

static struct rt_route
via(const char *pfx, uint8_t src, uint32_t metric, const char *gw, uint32_t ifindex)
{
	struct rt_route r;

	memset(&r, 0, sizeof(r));
	r.prefix = P(pfx);
	r.source = src;
	r.metric = metric;
	r.nnh = 1;
	r.nh[0].type = RT_NH_GATEWAY;
	r.nh[0].gw = A(gw);
	r.nh[0].ifindex = ifindex;
	return r;
}

/* The next hop the FIB gives for dst: "gw@ifindex", "conn@ifindex", "local", or "none". */
static const char *fwd(const struct rt_table *rt, const char *dst, uint32_t hash)
{
	static char buf[80];
	struct ip_addr a = A(dst);
	const struct rt_fib_nh *nh = rt_lookup(rt, &a, hash);
	char g[IP_ADDR_STRLEN];

	if (!nh)
		return "none";
	switch (nh->type) {
	case RT_NH_GATEWAY:
		inet_ntop(nh->family, nh->gw, g, sizeof(g));
		snprintf(buf, sizeof(buf), "%s@%u", g, nh->ifindex);
		return buf;
	case RT_NH_CONNECTED:
		snprintf(buf, sizeof(buf), "conn@%u", nh->ifindex);
		return buf;
	case RT_NH_LOCAL:
		return "local";
	default:
		return "blackhole";
	}
}

static void test_connected_and_static(void **state)
{
	struct rt_table *rt;
	struct rt_route r;
	struct ip_prefix ifa = P("10.0.0.1/24");
	struct rt_stats st;

	(void)state;
	assert_int_equal(rt_create(&rt, NULL), 0);
	assert_int_equal(rt_add_connected(rt, &ifa, 3), 0);
	assert_string_equal(fwd(rt, "10.0.0.7", 0), "conn@3");
	assert_string_equal(fwd(rt, "10.0.0.1", 0), "local");
	assert_string_equal(fwd(rt, "10.0.1.1", 0), "none");
	assert_int_equal(rt_add_connected(rt, &ifa, 4), -EEXIST);

	/* A static route via a gateway on the connected subnet takes its interface. */
	r = via("10.1.0.0/16", RT_SRC_STATIC, 0, "10.0.0.254", 0);
	assert_int_equal(rt_add(rt, &r), 0);
	assert_string_equal(fwd(rt, "10.1.2.3", 0), "10.0.0.254@3");
	assert_int_equal(rt_add(rt, &r), -EEXIST);
	/* Recursion is refused: a gateway reached only via another static stays unresolved. */
	r = via("10.2.0.0/16", RT_SRC_STATIC, 0, "10.1.0.1", 0);
	assert_int_equal(rt_add(rt, &r), 0);
	assert_string_equal(fwd(rt, "10.2.0.1", 0), "none");
	/* An explicit interface is taken as is (on-link). */
	r = via("10.3.0.0/16", RT_SRC_STATIC, 0, "192.168.9.9", 7);
	assert_int_equal(rt_add(rt, &r), 0);
	assert_string_equal(fwd(rt, "10.3.0.1", 0), "192.168.9.9@7");
	/* A gateway on a subnet that comes later resolves then, and goes when it goes. */
	r = via("10.4.0.0/16", RT_SRC_STATIC, 0, "172.16.0.1", 0);
	assert_int_equal(rt_add(rt, &r), 0);
	assert_string_equal(fwd(rt, "10.4.0.1", 0), "none");
	ifa = P("172.16.0.2/30");
	assert_int_equal(rt_add_connected(rt, &ifa, 5), 0);
	assert_string_equal(fwd(rt, "10.4.0.1", 0), "172.16.0.1@5");
	assert_int_equal(rt_del_connected(rt, &ifa, 6, false), -ENOENT); /* wrong interface */
	assert_int_equal(rt_del_connected(rt, &ifa, 5, false), 0);
	assert_string_equal(fwd(rt, "10.4.0.1", 0), "none");
	assert_string_equal(fwd(rt, "172.16.0.2", 0), "none");
	/* Bad routes. */
	r = via("10.5.0.1/16", RT_SRC_STATIC, 0, "10.0.0.1", 0); /* host bits */
	assert_int_equal(rt_add(rt, &r), -EINVAL);
	r = via("10.5.0.0/16", RT_SRC_STATIC, 0, "fe80::1", 0); /* family */
	assert_int_equal(rt_add(rt, &r), -EINVAL);
	r.nnh = 0;
	assert_int_equal(rt_add(rt, &r), -EINVAL);
	rt_stats(rt, &st);
	assert_int_equal(st.prefixes, 6); /* 10.0.0.0/24, 10.0.0.1/32, 10.1-4/16 */
	assert_int_equal(st.routes, 6);
	rt_destroy(rt);
}

static void test_selection(void **state)
{
	struct rt_table *rt;
	struct rt_route r;
	struct ip_prefix ifa = P("10.0.0.1/24"), p = P("10.9.0.0/16");
	struct rt_stats st;

	(void)state;
	assert_int_equal(rt_create(&rt, NULL), 0);
	assert_int_equal(rt_add_connected(rt, &ifa, 1), 0);
	r = via("10.9.0.0/16", RT_SRC_LEARNED, 10, "10.0.0.3", 0);
	assert_int_equal(rt_add(rt, &r), 0);
	assert_string_equal(fwd(rt, "10.9.1.1", 0), "10.0.0.3@1");
	r = via("10.9.0.0/16", RT_SRC_STATIC, 10, "10.0.0.2", 0); /* same metric: static wins */
	assert_int_equal(rt_add(rt, &r), 0);
	assert_string_equal(fwd(rt, "10.9.1.1", 0), "10.0.0.2@1");
	r = via("10.9.0.0/16", RT_SRC_LEARNED, 5, "10.0.0.4", 0); /* lower metric wins */
	assert_int_equal(rt_add(rt, &r), 0);
	assert_string_equal(fwd(rt, "10.9.1.1", 0), "10.0.0.4@1");
	r = via("10.9.0.0/16", RT_SRC_LEARNED, 5, "10.0.0.5", 0);
	assert_int_equal(rt_replace(rt, &r), 0);
	assert_string_equal(fwd(rt, "10.9.1.1", 0), "10.0.0.5@1");
	/* An unresolved better route is not used. */
	r = via("10.9.0.0/16", RT_SRC_STATIC, 1, "192.0.2.1", 0);
	assert_int_equal(rt_add(rt, &r), 0);
	assert_string_equal(fwd(rt, "10.9.1.1", 0), "10.0.0.5@1");
	/* Deletes fall back to the next best, then to nothing. */
	assert_int_equal(rt_del(rt, &p, RT_SRC_LEARNED, 5), 0);
	assert_string_equal(fwd(rt, "10.9.1.1", 0), "10.0.0.2@1");
	assert_int_equal(rt_del(rt, &p, RT_SRC_LEARNED, 5), -ENOENT);
	assert_int_equal(rt_del(rt, &p, RT_SRC_STATIC, 10), 0);
	assert_string_equal(fwd(rt, "10.9.1.1", 0), "10.0.0.3@1");
	assert_int_equal(rt_del(rt, &p, RT_SRC_LEARNED, 10), 0);
	assert_string_equal(fwd(rt, "10.9.1.1", 0), "none");
	assert_int_equal(rt_del(rt, &p, RT_SRC_STATIC, 1), 0);
	rt_stats(rt, &st);
	assert_int_equal(st.prefixes, 2);
	assert_int_equal(st.nexthops, 2); /* conn@1 and local */
	/* Host routes of proxied neighbours share one next-hop slot. */
	for (int i = 10; i < 200; i++) {
		char buf[32];

		memset(&r, 0, sizeof(r));
		snprintf(buf, sizeof(buf), "10.0.0.%d/32", i);
		r.prefix = P(buf);
		r.source = RT_SRC_LEARNED;
		r.nnh = 1;
		r.nh[0].type = RT_NH_CONNECTED;
		r.nh[0].ifindex = 2;
		assert_int_equal(rt_add(rt, &r), 0);
	}
	assert_string_equal(fwd(rt, "10.0.0.150", 0), "conn@2");
	assert_string_equal(fwd(rt, "10.0.0.9", 0), "conn@1");
	rt_stats(rt, &st);
	assert_int_equal(st.nexthops, 3);
	rt_destroy(rt);
}

static void test_ecmp(void **state)
{
	struct rt_table *rt;
	struct rt_route r;
	struct ip_prefix ifa = P("10.0.0.1/24"), p = P("10.8.0.0/16");
	struct rt_stats st;
	unsigned hits[4] = { 0 };

	(void)state;
	assert_int_equal(rt_create(&rt, NULL), 0);
	assert_int_equal(rt_add_connected(rt, &ifa, 1), 0);
	r = via("10.8.0.0/16", RT_SRC_STATIC, 0, "10.0.0.11", 0);
	r.nnh = 4;
	for (int i = 0; i < 4; i++) {
		char g[16];

		snprintf(g, sizeof(g), "10.0.0.%d", 11 + i);
		r.nh[i].type = RT_NH_GATEWAY;
		r.nh[i].gw = A(g);
	}
	assert_int_equal(rt_add(rt, &r), 0);
	r.prefix = P("10.7.0.0/16"); /* same next hops in another order: same group */
	{
		struct rt_nexthop t = r.nh[0];

		r.nh[0] = r.nh[3];
		r.nh[3] = t;
	}
	assert_int_equal(rt_add(rt, &r), 0);
	rt_stats(rt, &st);
	assert_int_equal(st.groups, 1);
	assert_int_equal(st.nexthops, 2 + 4);
	/* Flows spread over every member; a flow always takes the same one. */
	for (uint32_t f = 0; f < 4000; f++) {
		uint32_t h = rt_flow_hash4(0x1234, htonl(0xc0a80001 + f), htonl(0x0a080001), 6,
					   htons((uint16_t)(1024 + f)), htons(80));
		const char *a = fwd(rt, "10.8.0.1", h);
		int k = a[8] - '1'; /* "10.0.0.1X@1" */

		assert_true(k >= 0 && k < 4);
		hits[k]++;
		assert_string_equal(fwd(rt, "10.7.3.3", h), a); /* same group, same choice */
	}
	for (int k = 0; k < 4; k++)
		assert_true(hits[k] > 800); /* 1000 expected each */
	/* Different flows differ in hash; the same flow does not. */
	assert_int_equal(rt_flow_hash4(1, 1, 2, 6, 3, 4), rt_flow_hash4(1, 1, 2, 6, 3, 4));
	assert_int_not_equal(rt_flow_hash4(1, 1, 2, 6, 3, 4), rt_flow_hash4(1, 1, 2, 6, 3, 5));
	assert_int_not_equal(rt_flow_hash4(1, 1, 2, 6, 3, 4), rt_flow_hash4(2, 1, 2, 6, 3, 4));
	/* A member whose gateway is unresolved is left out of the group. */
	r.prefix = P("10.6.0.0/16");
	r.nnh = 2;
	r.nh[1].gw = A("192.0.2.1");
	assert_int_equal(rt_add(rt, &r), 0);
	for (uint32_t f = 0; f < 64; f++)
		assert_string_equal(fwd(rt, "10.6.0.1", f * 0x9e3779b9u), "10.0.0.14@1");
	/* Deleting the prefixes releases the group and its next hops. */
	assert_int_equal(rt_del(rt, &p, RT_SRC_STATIC, 0), 0);
	p = P("10.7.0.0/16");
	assert_int_equal(rt_del(rt, &p, RT_SRC_STATIC, 0), 0);
	p = P("10.6.0.0/16");
	assert_int_equal(rt_del(rt, &p, RT_SRC_STATIC, 0), 0);
	rt_stats(rt, &st);
	assert_int_equal(st.groups, 0);
	assert_int_equal(st.nexthops, 2);
	rt_destroy(rt);
}

struct walked {
	char lines[16][96];
	int n;
};

static int walk_cb(void *ctx, const struct rt_route *r)
{
	struct walked *w = ctx;
	char p[IP_PREFIX_STRLEN];

	assert_true(w->n < 16);
	snprintf(w->lines[w->n++], sizeof(w->lines[0]), "%s src %u metric %u%s%s",
		 ip_prefix_format(&r->prefix, p, sizeof(p)), r->source, r->metric,
		 r->flags & RT_F_SELECTED ? " selected" : "",
		 r->flags & RT_F_UNRESOLVED ? " unresolved" : "");
	return 0;
}

static void test_walk_and_ipv6(void **state)
{
	struct rt_table *rt;
	struct rt_route r;
	struct ip_prefix ifa6 = P("2001:db8::1/64"), ifa4 = P("10.0.0.1/24");
	struct walked w = { .n = 0 };

	(void)state;
	assert_int_equal(rt_create(&rt, NULL), 0);
	assert_int_equal(rt_add_connected(rt, &ifa6, 2), 0);
	r = via("2001:db8:100::/48", RT_SRC_STATIC, 0, "2001:db8::fe", 0);
	assert_int_equal(rt_add(rt, &r), 0);
	assert_int_equal(rt_add_connected(rt, &ifa4, 1), 0);
	r = via("10.9.0.0/16", RT_SRC_STATIC, 20, "10.0.0.2", 0);
	assert_int_equal(rt_add(rt, &r), 0);
	r = via("10.9.0.0/16", RT_SRC_STATIC, 10, "10.3.0.2", 0);
	assert_int_equal(rt_add(rt, &r), 0);
	assert_string_equal(fwd(rt, "2001:db8:100::1", 0), "2001:db8::fe@2");
	assert_string_equal(fwd(rt, "2001:db8::5", 0), "conn@2");
	assert_string_equal(fwd(rt, "2001:db8::1", 0), "local");
	assert_string_equal(fwd(rt, "2001:db9::1", 0), "none");
	assert_int_equal(rt_walk(rt, 0, walk_cb, &w), 0);
	assert_int_equal(w.n, 7);
	assert_string_equal(w.lines[0], "10.0.0.0/24 src 0 metric 0 selected");
	assert_string_equal(w.lines[1], "10.0.0.1/32 src 0 metric 0 selected");
	assert_string_equal(w.lines[2], "10.9.0.0/16 src 1 metric 20 selected");
	assert_string_equal(w.lines[3], "10.9.0.0/16 src 1 metric 10 unresolved");
	assert_string_equal(w.lines[4], "2001:db8::/64 src 0 metric 0 selected");
	assert_string_equal(w.lines[5], "2001:db8::1/128 src 0 metric 0 selected");
	assert_string_equal(w.lines[6], "2001:db8:100::/48 src 1 metric 0 selected");
	w.n = 0;
	assert_int_equal(rt_walk(rt, AF_INET6, walk_cb, &w), 0);
	assert_int_equal(w.n, 3);
	assert_int_equal(rt_del_connected(rt, &ifa6, 2, false), 0);
	assert_string_equal(fwd(rt, "2001:db8:100::1", 0), "none");
	rt_destroy(rt);
}

/* Slots go back through the defer function, and come back for reuse. */
struct parked {
	void (*fn[256])(void *);
	void *arg[256];
	unsigned n;
};

static void park(void *ctx, void (*fn)(void *), void *arg)
{
	struct parked *p = ctx;

	assert_true(p->n < 256);
	p->fn[p->n] = fn;
	p->arg[p->n++] = arg;
}

static void test_slots_full_and_deferred(void **state)
{
	struct parked pk = { .n = 0 };
	struct rt_config cfg = { .max_nexthops = 3, .defer = park, .defer_ctx = &pk };
	struct rt_table *rt;
	struct rt_route r;
	struct ip_prefix ifa = P("10.0.0.1/24"), p = P("10.1.0.0/16");

	(void)state;
	assert_int_equal(rt_create(&rt, &cfg), 0);
	assert_int_equal(rt_add_connected(rt, &ifa, 1), 0); /* 2 slots */
	r = via("10.1.0.0/16", RT_SRC_STATIC, 0, "10.0.0.2", 0);
	assert_int_equal(rt_add(rt, &r), 0);
	r = via("10.2.0.0/16", RT_SRC_STATIC, 0, "10.0.0.3", 0);
	assert_int_equal(rt_add(rt, &r), -ENOSPC);
	assert_string_equal(fwd(rt, "10.2.0.1", 0), "none");
	assert_int_equal(rt_del(rt, &p, RT_SRC_STATIC, 0), 0);
	assert_int_equal(rt_add(rt, &r), -ENOSPC); /* not before the grace period */
	for (unsigned i = 0; i < pk.n; i++)
		pk.fn[i](pk.arg[i]);
	pk.n = 0;
	assert_int_equal(rt_add(rt, &r), 0);
	assert_string_equal(fwd(rt, "10.2.0.1", 0), "10.0.0.3@1");
	rt_destroy(rt);
}

/* A next hop's neighbour hint (the workers' cache) is not part of its value: a route via
 * the same gateway shares the next hop whatever its hint holds (with no slot left, a
 * second one would fail), and a slot reused for another gateway starts at 0. Next hops
 * sit on 32-octet boundaries (one cache line each). */
static void test_nh_hint_not_value(void **state)
{
	struct parked pk = { .n = 0 };
	struct rt_config cfg = { .max_nexthops = 3, .defer = park, .defer_ctx = &pk };
	struct rt_table *rt;
	struct rt_route r;
	struct ip_prefix ifa = P("10.0.0.1/24"), p1 = P("10.1.0.0/16"), p3 = P("10.3.0.0/16");
	struct ip_addr d1 = A("10.1.0.1"), d3 = A("10.3.0.1"), d2 = A("10.2.0.1");
	const struct rt_fib_nh *nh;

	(void)state;
	assert_int_equal(rt_create(&rt, &cfg), 0);
	assert_int_equal(rt_add_connected(rt, &ifa, 1), 0); /* 2 slots */
	r = via("10.1.0.0/16", RT_SRC_STATIC, 0, "10.0.0.2", 0);
	assert_int_equal(rt_add(rt, &r), 0);
	nh = rt_lookup(rt, &d1, 0);
	assert_non_null(nh);
	assert_int_equal((uintptr_t)nh % 32, 0);
	assert_int_equal(*rt_fib_nh_hint(nh), 0);
	*rt_fib_nh_hint(nh) = 77;
	r = via("10.3.0.0/16", RT_SRC_STATIC, 0, "10.0.0.2", 0);
	assert_int_equal(rt_add(rt, &r), 0);
	assert_ptr_equal(rt_lookup(rt, &d3, 0), nh);
	assert_int_equal(rt_del(rt, &p1, RT_SRC_STATIC, 0), 0);
	assert_int_equal(rt_del(rt, &p3, RT_SRC_STATIC, 0), 0);
	for (unsigned i = 0; i < pk.n; i++)
		pk.fn[i](pk.arg[i]);
	pk.n = 0;
	r = via("10.2.0.0/16", RT_SRC_STATIC, 0, "10.0.0.3", 0);
	assert_int_equal(rt_add(rt, &r), 0);
	assert_ptr_equal(rt_lookup(rt, &d2, 0), nh); /* the only slot free */
	assert_int_equal(*rt_fib_nh_hint(nh), 0);
	assert_string_equal(fwd(rt, "10.2.0.1", 0), "10.0.0.3@1");
	rt_destroy(rt);
}

static void count_change(void *ctx)
{
	(*(unsigned *)ctx)++;
}

/* The change hook fires for every change and only for changes (kernel export relies on
 * it to follow learned, static, connected and imported routes alike). */
static void test_change_hook(void **state)
{
	unsigned n = 0, before;
	struct rt_config cfg = { .changed = count_change, .changed_ctx = &n };
	struct rt_table *rt;
	struct ip_prefix ifa = P("10.0.0.1/24");
	struct rt_route r = via("10.9.0.0/16", RT_SRC_STATIC, 0, "10.0.0.2", 0);
	(void)state;

	assert_int_equal(rt_create(&rt, &cfg), 0);
	assert_int_equal(n, 0);
	assert_int_equal(rt_add_connected(rt, &ifa, 1), 0);
	assert_true(n > 0);
	before = n;
	assert_int_equal(rt_add(rt, &r), 0);
	assert_true(n > before);
	before = n;
	assert_int_equal(rt_add(rt, &r), -EEXIST); /* refused: no change, no call */
	assert_int_equal(n, before);
	assert_int_equal(rt_del(rt, &r.prefix, RT_SRC_STATIC, 1), -ENOENT);
	assert_int_equal(n, before);
	r.nnh = 0; /* malformed */
	assert_int_equal(rt_replace(rt, &r), -EINVAL);
	assert_int_equal(n, before);
	assert_int_equal(rt_del(rt, &r.prefix, RT_SRC_STATIC, 0), 0);
	assert_true(n > before);
	before = n;
	assert_int_equal(rt_del_connected(rt, &ifa, 1, false), 0);
	assert_true(n > before);
	rt_destroy(rt);
}

/* Two addresses in one subnet: the second adds its local route only; deleting one
 * keeps the subnet for the other. */
static void test_two_addresses_one_subnet(void **state)
{
	struct rt_table *rt;
	struct ip_prefix a1 = P("10.0.0.1/24"), a2 = P("10.0.0.254/24");
	(void)state;

	assert_int_equal(rt_create(&rt, NULL), 0);
	assert_int_equal(rt_add_connected(rt, &a1, 1), 0);
	assert_int_equal(rt_add_connected(rt, &a2, 1), 0);
	assert_string_equal(fwd(rt, "10.0.0.254", 0), "local");
	assert_string_equal(fwd(rt, "10.0.0.1", 0), "local");
	assert_int_equal(rt_add_connected(rt, &a2, 1), -EEXIST);
	assert_int_equal(rt_del_connected(rt, &a2, 1, true), 0);
	assert_string_equal(fwd(rt, "10.0.0.254", 0), "conn@1");
	assert_string_equal(fwd(rt, "10.0.0.1", 0), "local");
	assert_int_equal(rt_del_connected(rt, &a1, 1, false), 0);
	assert_string_equal(fwd(rt, "10.0.0.7", 0), "none");
	rt_destroy(rt);
}

static int count_routes(void *ctx, const struct rt_route *r)
{
	(void)r;
	(*(unsigned *)ctx)++;
	return 0;
}

/* Imported routes leave together when the import stops; other sources stay. */
static void test_del_source(void **state)
{
	struct rt_table *rt;
	struct ip_prefix ifa = P("10.0.0.1/24");
	struct rt_route a = via("10.9.0.0/16", RT_SRC_KERNEL, 5, "10.0.0.2", 0),
			b = via("10.9.0.0/16", RT_SRC_KERNEL, 7, "10.0.0.3", 0),
			c = via("fd00:9::/64", RT_SRC_KERNEL, 0, "10.0.0.2", 0),
			st = via("10.9.0.0/16", RT_SRC_STATIC, 9, "10.0.0.4", 0);
	unsigned n = 0;
	(void)state;

	memset(&c.nh[0], 0, sizeof(c.nh[0]));
	c.nh[0].type = RT_NH_BLACKHOLE; /* an IPv6 prefix: a blackhole from the kernel */
	assert_int_equal(rt_create(&rt, NULL), 0);
	assert_int_equal(rt_add_connected(rt, &ifa, 1), 0);
	assert_int_equal(rt_add(rt, &a), 0);
	assert_int_equal(rt_add(rt, &b), 0);
	assert_int_equal(rt_add(rt, &c), 0);
	assert_int_equal(rt_add(rt, &st), 0);
	assert_string_equal(fwd(rt, "10.9.1.1", 0), "10.0.0.2@1");
	assert_int_equal(rt_del_source(rt, RT_SRC_KERNEL), 3);
	assert_string_equal(fwd(rt, "10.9.1.1", 0), "10.0.0.4@1");
	assert_string_equal(fwd(rt, "fd00:9::1", 0), "none");
	assert_int_equal(rt_walk(rt, 0, count_routes, &n), 0);
	assert_int_equal(n, 3); /* connected, local, static */
	assert_int_equal(rt_del_source(rt, RT_SRC_KERNEL), 0);
	rt_destroy(rt);
}

/* One line per route, up to 64, as rt_walk_after gives them. */
struct pieces {
	char lines[64][96];
	int n, limit; /* stop at the first route of a new prefix once limit lines are in */
	struct ip_prefix last;
	bool have_last;
};

static int piece_cb(void *ctx, const struct rt_route *r)
{
	struct pieces *w = ctx;
	char p[IP_PREFIX_STRLEN];

	if (w->limit && w->n >= w->limit && w->have_last &&
	    (w->last.len != r->prefix.len || !ip_addr_equal(&w->last.addr, &r->prefix.addr)))
		return 1; /* a whole prefix at a time: the cursor is the last one finished */
	assert_true(w->n < 64);
	snprintf(w->lines[w->n++], sizeof(w->lines[0]), "%s src %u metric %u",
		 ip_prefix_format(&r->prefix, p, sizeof(p)), r->source, r->metric);
	w->last = r->prefix;
	w->have_last = true;
	return 0;
}

/* Walk family in pieces of about limit routes, each resumed after the last prefix of
 * the one before; the lines of all pieces in out. */
static void walk_in_pieces(const struct rt_table *rt, int family, int limit, struct pieces *out)
{
	memset(out, 0, sizeof(*out));
	out->limit = limit;
	for (int calls = 0;; calls++) {
		int before = out->n;

		assert_true(calls < 64);
		out->limit = out->n + limit;
		if (rt_walk_after(rt, family, out->have_last ? &out->last : NULL, piece_cb, out) ==
		    0)
			break;
		assert_true(out->n > before); /* every piece makes progress */
	}
}

/* Walking in pieces (rt_walk_after from the last prefix done) gives what one rt_walk
 * gives, for both families and each alone, a prefix's routes never split; a walk
 * resumed after its cursor prefix went away goes on with the next one. */
static void test_walk_after(void **state)
{
	static const char *const pfx[] = { "0.0.0.0/0",      "10.0.0.0/8",  "10.0.0.0/16",
					   "10.1.0.0/16",    "10.1.2.0/24", "192.168.0.0/16",
					   "::/0",           "fd00::/8",    "fd00:1::/64",
					   "fd00:1:0:1::/64" };
	struct rt_table *rt;
	struct pieces all, cut;
	struct walked w = { .n = 0 };
	(void)state;

	assert_int_equal(rt_create(&rt, NULL), 0);
	for (unsigned i = 0; i < sizeof(pfx) / sizeof(pfx[0]); i++) {
		struct rt_route r =
		    via(pfx[i], RT_SRC_STATIC, 1, strchr(pfx[i], ':') ? "fd00::1" : "10.0.0.1", 0);

		memset(&r.nh[0], 0, sizeof(r.nh[0]));
		r.nh[0].type = RT_NH_BLACKHOLE;
		assert_int_equal(rt_add(rt, &r), 0);
		r.metric = 2; /* two routes on every prefix */
		assert_int_equal(rt_add(rt, &r), 0);
	}
	walk_in_pieces(rt, 0, 0, &all); /* no limit: one call */
	assert_int_equal(all.n, 20);
	assert_string_equal(all.lines[0], "0.0.0.0/0 src 1 metric 1");
	assert_string_equal(all.lines[19], "fd00:1:0:1::/64 src 1 metric 2");
	for (int limit = 1; limit <= 5; limit++) {
		walk_in_pieces(rt, 0, limit, &cut);
		assert_int_equal(cut.n, all.n);
		for (int i = 0; i < all.n; i++)
			assert_string_equal(cut.lines[i], all.lines[i]);
	}
	/* the same as rt_walk, family by family */
	walk_in_pieces(rt, AF_INET6, 3, &cut);
	assert_int_equal(rt_walk(rt, AF_INET6, walk_cb, &w), 0);
	assert_int_equal(cut.n, w.n);
	assert_int_equal(cut.n, 8);
	assert_string_equal(cut.lines[0], "::/0 src 1 metric 1");
	walk_in_pieces(rt, AF_INET, 3, &cut);
	assert_int_equal(cut.n, 12);
	assert_string_equal(cut.lines[11], "192.168.0.0/16 src 1 metric 2");
	/* the cursor's prefix deleted between two pieces: the next one goes on after it */
	struct ip_prefix cur = P("10.0.0.0/16");
	assert_int_equal(rt_del(rt, &cur, RT_SRC_STATIC, 1), 0);
	assert_int_equal(rt_del(rt, &cur, RT_SRC_STATIC, 2), 0);
	memset(&cut, 0, sizeof(cut));
	assert_int_equal(rt_walk_after(rt, AF_INET, &cur, piece_cb, &cut), 0);
	assert_int_equal(cut.n, 6);
	assert_string_equal(cut.lines[0], "10.1.0.0/16 src 1 metric 1");
	/* after the last prefix: nothing */
	cur = P("fd00:1:0:1::/64");
	memset(&cut, 0, sizeof(cut));
	assert_int_equal(rt_walk_after(rt, 0, &cur, piece_cb, &cut), 0);
	assert_int_equal(cut.n, 0);
	rt_destroy(rt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connected_and_static),
		cmocka_unit_test(test_selection),
		cmocka_unit_test(test_ecmp),
		cmocka_unit_test(test_walk_and_ipv6),
		cmocka_unit_test(test_walk_after),
		cmocka_unit_test(test_slots_full_and_deferred),
		cmocka_unit_test(test_nh_hint_not_value),
		cmocka_unit_test(test_change_hook),
		cmocka_unit_test(test_del_source),
		cmocka_unit_test(test_two_addresses_one_subnet),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
