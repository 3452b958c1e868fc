/*
 * Unit tests for kernel/kroute's reading of kernel routes (kroute_parse): messages built by
 * libnl the way the kernel sends them (RTM_NEWROUTE with table, protocol, type,
 * priority, next hops) become the rt_route the import reports, or are skipped: other
 * tables, our own protocol, TOS, cloned routes, local/broadcast types, device-only next
 * hops of unknown devices, IPv4 routes via IPv6; truncated messages are refused. The
 * kernel side (export, events, import) is test/integration/kroute.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <string.h>
#include <cmocka.h>
#include <linux/rtnetlink.h>
#include <netlink/netlink.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>

#include "kernel/kroute.h"

struct spec {
	int family;
	const char *dst; /* "10.0.0.0/8"; NULL: default route */
	uint32_t table;
	uint8_t proto, type, tos;
	uint32_t prio, flags;
	const char *gw[3]; /* next hops: gateway or NULL */
	int oif[3];
	int nnh;
};

static struct nl_addr *addr(const char *s, int family)
{
	struct nl_addr *a = NULL;

	assert_int_equal(nl_addr_parse(s, family, &a), 0);
	return a;
}

/* Build the message and parse it back; returns kroute_parse's result. */
static int parse(const struct spec *s, uint32_t table, struct rt_route *out, kroute_map_fn map)
{
	struct rtnl_route *r = rtnl_route_alloc();
	struct nl_msg *msg = NULL;
	int i, ret;

	rtnl_route_set_family(r, (uint8_t)s->family);
	if (s->dst) {
		struct nl_addr *d = addr(s->dst, s->family);

		rtnl_route_set_dst(r, d);
		nl_addr_put(d);
	} else {
		struct nl_addr *d = nl_addr_alloc(0);

		nl_addr_set_family(d, s->family);
		rtnl_route_set_dst(r, d);
		nl_addr_put(d);
	}
	rtnl_route_set_table(r, s->table);
	rtnl_route_set_protocol(r, s->proto);
	rtnl_route_set_type(r, s->type);
	rtnl_route_set_tos(r, s->tos);
	rtnl_route_set_priority(r, s->prio);
	rtnl_route_set_scope(r, RT_SCOPE_UNIVERSE);
	if (s->flags)
		rtnl_route_set_flags(r, s->flags);
	for (i = 0; i < s->nnh; i++) {
		struct rtnl_nexthop *h = rtnl_route_nh_alloc();

		if (s->gw[i]) {
			struct nl_addr *g =
			    addr(s->gw[i], strchr(s->gw[i], ':') ? AF_INET6 : AF_INET);

			rtnl_route_nh_set_gateway(h, g);
			nl_addr_put(g);
		}
		rtnl_route_nh_set_ifindex(h, s->oif[i]);
		rtnl_route_add_nexthop(r, h);
	}
	assert_int_equal(rtnl_route_build_add_request(r, NLM_F_CREATE, &msg), 0);
	rtnl_route_put(r);
	ret = kroute_parse(nlmsg_hdr(msg), nlmsg_hdr(msg)->nlmsg_len, table, KROUTE_PROTO, map,
			   NULL, out);
	nlmsg_free(msg);
	return ret;
}

static uint32_t map_some(void *ctx, int kif)
{
	(void)ctx;
	return kif == 7 ? 70 : 0; /* only kernel interface 7 is the gateway's (as 70) */
}

static void check_prefix(const struct rt_route *r, const char *want)
{
	char b[IP_PREFIX_STRLEN];

	assert_string_equal(ip_prefix_format(&r->prefix, b, sizeof(b)), want);
}

static void check_gw(const struct rt_nexthop *h, const char *want, uint32_t ifindex)
{
	char b[IP_ADDR_STRLEN];

	assert_int_equal(h->type, RT_NH_GATEWAY);
	assert_string_equal(ip_addr_format(&h->gw, b, sizeof(b)), want);
	assert_int_equal(h->ifindex, ifindex);
}

static void test_gateway_route(void **state)
{
	struct spec s = { .family = AF_INET,
			  .dst = "10.20.0.0/16",
			  .table = 101,
			  .proto = RTPROT_STATIC,
			  .type = RTN_UNICAST,
			  .prio = 30,
			  .gw = { "192.0.2.254" },
			  .oif = { 7 },
			  .nnh = 1 };
	struct rt_route r;

	(void)state;
	assert_int_equal(parse(&s, 101, &r, map_some), 1);
	check_prefix(&r, "10.20.0.0/16");
	assert_int_equal(r.source, RT_SRC_KERNEL);
	assert_int_equal(r.metric, 30);
	assert_int_equal(r.nnh, 1);
	check_gw(&r.nh[0], "192.0.2.254", 70);
	/* an interface the gateway does not own: the RIB resolves the gateway */
	s.oif[0] = 3;
	assert_int_equal(parse(&s, 101, &r, map_some), 1);
	check_gw(&r.nh[0], "192.0.2.254", 0);
	assert_int_equal(parse(&s, 101, &r, NULL), 1);
	check_gw(&r.nh[0], "192.0.2.254", 0);
}

static void test_multipath_v6(void **state)
{
	struct spec s = { .family = AF_INET6,
			  .dst = "2001:db8:50::/48",
			  .table = 101,
			  .proto = RTPROT_BOOT,
			  .type = RTN_UNICAST,
			  .prio = 1024,
			  .gw = { "2001:db8::1", "2001:db8::2", NULL },
			  .oif = { 7, 7, 7 },
			  .nnh = 3 };
	struct rt_route r;

	(void)state;
	assert_int_equal(parse(&s, 101, &r, map_some), 1);
	check_prefix(&r, "2001:db8:50::/48");
	assert_int_equal(r.metric, 1024);
	assert_int_equal(r.nnh, 3);
	check_gw(&r.nh[0], "2001:db8::1", 70);
	check_gw(&r.nh[1], "2001:db8::2", 70);
	assert_int_equal(r.nh[2].type, RT_NH_CONNECTED);
	assert_int_equal(r.nh[2].ifindex, 70);
}

static void test_default_and_discard(void **state)
{
	struct spec s = { .family = AF_INET,
			  .dst = NULL,
			  .table = 101,
			  .proto = RTPROT_STATIC,
			  .type = RTN_UNICAST,
			  .gw = { "192.0.2.1" },
			  .oif = { 7 },
			  .nnh = 1 };
	struct rt_route r;
	uint8_t types[3] = { RTN_BLACKHOLE, RTN_UNREACHABLE, RTN_PROHIBIT };
	int i;

	(void)state;
	assert_int_equal(parse(&s, 101, &r, map_some), 1);
	check_prefix(&r, "0.0.0.0/0");
	s.dst = "10.51.0.0/16";
	s.nnh = 0;
	for (i = 0; i < 3; i++) {
		s.type = types[i];
		assert_int_equal(parse(&s, 101, &r, map_some), 1);
		assert_int_equal(r.nnh, 1);
		assert_int_equal(r.nh[0].type, RT_NH_BLACKHOLE);
	}
}

static void test_skipped(void **state)
{
	struct spec base = { .family = AF_INET,
			     .dst = "10.20.0.0/16",
			     .table = 101,
			     .proto = RTPROT_STATIC,
			     .type = RTN_UNICAST,
			     .gw = { "192.0.2.254" },
			     .oif = { 7 },
			     .nnh = 1 };
	struct spec s;
	struct rt_route r;

	(void)state;
	s = base;
	assert_int_equal(parse(&s, 102, &r, map_some), 0); /* other table */
	s = base;
	s.proto = KROUTE_PROTO; /* ours */
	assert_int_equal(parse(&s, 101, &r, map_some), 0);
	s = base;
	s.tos = 0x10;
	assert_int_equal(parse(&s, 101, &r, map_some), 0);
	s = base;
	s.flags = RTM_F_CLONED;
	assert_int_equal(parse(&s, 101, &r, map_some), 0);
	s = base;
	s.type = RTN_LOCAL;
	assert_int_equal(parse(&s, 101, &r, map_some), 0);
	s = base;
	s.gw[0] = NULL; /* a device route on a device the gateway does not own */
	s.oif[0] = 3;
	assert_int_equal(parse(&s, 101, &r, map_some), 0);
	s.oif[0] = 7; /* ... and on one it owns */
	assert_int_equal(parse(&s, 101, &r, map_some), 1);
	assert_int_equal(r.nh[0].type, RT_NH_CONNECTED);
	s = base;
	s.gw[0] = "2001:db8::1"; /* IPv4 via IPv6: not for this RIB */
	assert_int_equal(parse(&s, 101, &r, map_some), 0);
}

static void test_malformed(void **state)
{
	uint8_t buf[64] = { 0 };
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	struct rt_route r;

	(void)state;
	assert_int_equal(kroute_parse(buf, 4, 101, KROUTE_PROTO, NULL, NULL, &r), 0);
	h->nlmsg_len = 200; /* longer than the buffer */
	h->nlmsg_type = RTM_NEWROUTE;
	assert_int_equal(kroute_parse(buf, sizeof(buf), 101, KROUTE_PROTO, NULL, NULL, &r), 0);
	h->nlmsg_len = NLMSG_HDRLEN; /* no rtmsg */
	assert_int_equal(kroute_parse(buf, sizeof(buf), 101, KROUTE_PROTO, NULL, NULL, &r), 0);
	h->nlmsg_len = sizeof(buf);
	h->nlmsg_type = RTM_NEWLINK; /* not a route */
	assert_int_equal(kroute_parse(buf, sizeof(buf), 101, KROUTE_PROTO, NULL, NULL, &r), 0);
}

static void test_config_refused(void **state)
{
	struct kroute_config c = { 0 };
	struct kroute *k = NULL;

	(void)state;
	/* Nothing to do, the main table, a kernel protocol, import = export table: refused
	 * before any socket is opened (no loop needed). */
	assert_int_equal(kroute_new(NULL, &c, &k), -EINVAL);
	c.import_table = 254;
	c.table = 254;
	c.rt = (const struct rt_table *)&c;
	assert_int_equal(kroute_new(NULL, &c, &k), -EINVAL);
	c.table = 100;
	c.import_table = 100;
	assert_int_equal(kroute_new(NULL, &c, &k), -EINVAL);
	c.import_table = 101;
	c.protocol = RTPROT_STATIC;
	assert_int_equal(kroute_new(NULL, &c, &k), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gateway_route),       cmocka_unit_test(test_multipath_v6),
		cmocka_unit_test(test_default_and_discard), cmocka_unit_test(test_skipped),
		cmocka_unit_test(test_malformed),           cmocka_unit_test(test_config_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
