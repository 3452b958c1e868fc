/*
 * The forwarding pipeline on buffers: a small engine (real route table, real neighbour
 * tables, real snapshots) with fake ports only at the edge (an IB buffer pool). Every
 * checksum is verified by this file's own RFC 1071 sum, not the library's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/engine_pvt.h"
#include "engine/forward.h"
#include "ipoib/ipoib_link.h"
#include "table/neigh.h"
#include "table/route.h"

/* ---- an independent Internet checksum ---- */
static uint16_t sum16(const uint8_t *p, size_t n, uint32_t s)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

static bool ip4_csum_ok(const uint8_t *p)
{
	return sum16(p, (p[0] & 15u) * 4, 0) == 0xffff;
}

static bool l4_csum_ok4(const uint8_t *p)
{
	unsigned ihl = (p[0] & 15u) * 4, tot = (unsigned)(p[2] << 8 | p[3]);
	uint32_t s = 0;

	if (p[9] != 1) {
		s = sum16(p + 12, 8, 0);
		s += p[9] + (tot - ihl);
	}
	return sum16(p + ihl, tot - ihl, s) == 0xffff;
}

static bool l4_csum_ok6(const uint8_t *p)
{
	unsigned pl = (unsigned)(p[4] << 8 | p[5]);
	uint32_t s = sum16(p + 8, 32, 0);

	s += pl + p[6];
	return sum16(p + 40, pl, s) == 0xffff;
}

/* ---- fake IB buffer pool ---- */
#define NB 128
static struct ibp_buf bufs[NB];
static uint8_t bufmem[NB][4200];
static bool inuse[NB];
static struct ibp_buf *fake_get(struct ibp_port *p)
{
	(void)p;
	for (int i = 0; i < NB; i++) {
		if (!inuse[i]) {
			inuse[i] = true;
			bufs[i] =
			    (struct ibp_buf){ .data = bufmem[i], .cap = 4200, .id = (uint64_t)i };
			return &bufs[i];
		}
	}
	return NULL;
}
static void fake_put(struct ibp_port *p, struct ibp_buf *b)
{
	(void)p;
	inuse[b->id] = false;
}
static const struct ibp_ops fake_ib = { .name = "fake", .buf_get = fake_get, .buf_put = fake_put };
static int fake_eth_dummy;

/* ---- the engine ---- */
struct env {
	struct rt_table *rt;
	struct fwd_engine *e;
	struct neigh_table *ibn;
	struct fwd_ctx c;
	struct fwd_result res;
	uint32_t eth, ib;
};

static const uint8_t gw_mac[6] = { 2, 0, 0, 0, 0, 1 };
static const uint8_t h_mac[6] = { 2, 0, 0, 0, 0, 2 };
static const uint8_t h3_mac[6] = { 2, 0, 0, 0, 0, 3 };

static void nop_solicit(void *c, const struct neigh_entry *e, const struct neigh_link *l)
{
	(void)c, (void)e, (void)l;
}
static void nop_xmit(void *c, const struct neigh_entry *e, const struct neigh_link *l, void *p)
{
	(void)c, (void)e, (void)l, (void)p;
}
static void nop_drop(void *c, void *p)
{
	(void)c, (void)p;
}
static const struct neigh_ops nops = { .solicit = nop_solicit, .xmit = nop_xmit, .drop = nop_drop };

static struct ip_prefix pfx(const char *s)
{
	struct ip_prefix p;

	assert_int_equal(ip_prefix_parse(s, true, &p), 0);
	return p;
}

static void addr(const char *s, uint8_t *out)
{
	struct ip_addr a;

	assert_int_equal(ip_addr_parse(s, &a), 0);
	memcpy(out, a.bytes, a.family == AF_INET ? 4 : 16);
}

static void eth_neigh(struct env *v, const char *ip, const uint8_t *mac)
{
	struct neigh_link ll = { .len = 6, .usable = true };
	const struct fwd_if *f = fwd_snap_if(fwd_engine_current(v->e), v->eth);
	uint8_t a[16];

	addr(ip, a);
	memcpy(ll.addr, mac, 6);
	assert_non_null(neigh_update(f->neigh, strchr(ip, ':') ? AF_INET6 : AF_INET, a, &ll,
				     NEIGH_F_CREATE | NEIGH_F_ADMIN));
}

static void ib_neigh(struct env *v, const char *ip, uint32_t qpn, uint32_t mtu)
{
	struct neigh_link ll = {
		.len = 20, .usable = true, .ah = (void *)0xa4, .qpn = qpn, .mtu = mtu
	};
	uint8_t a[16];

	addr(ip, a);
	ll.addr[1] = (uint8_t)(qpn >> 16), ll.addr[2] = (uint8_t)(qpn >> 8),
	ll.addr[3] = (uint8_t)qpn;
	ll.addr[4] = 0xfe, ll.addr[5] = 0x80;
	assert_non_null(neigh_update(v->ibn, strchr(ip, ':') ? AF_INET6 : AF_INET, a, &ll,
				     NEIGH_F_CREATE | NEIGH_F_ADMIN));
}

static int setup(void **state)
{
	struct env *v = calloc(1, sizeof(*v));
	struct rt_config rc = { 0 };
	struct fwd_engine_config ec = { .n_workers = 1, .flow_seed = 7 };
	struct neigh_config nc = { .ops = &nops };
	struct fwd_if_config ei = { .name = "eth1",
				    .kind = FWD_IF_ETH,
				    .mtu = 1500,
				    .eth_ops = &ethp_afpacket_ops,
				    .eth = (struct ethp_port *)&fake_eth_dummy,
				    .mac = gw_mac };
	struct fwd_if_config ii = { .name = "ib1",
				    .kind = FWD_IF_IPOIB,
				    .mtu = 2044,
				    .ib_ops = &fake_ib,
				    .ib_port = (struct ibp_port *)&fake_eth_dummy };
	struct ipoib_hwaddr hw = { .qpn = 0x11 };
	struct rt_route r = { .prefix = pfx("198.51.100.0/24"), .source = RT_SRC_STATIC, .nnh = 2 };

	memset(inuse, 0, sizeof(inuse));
	assert_int_equal(rt_create(&v->rt, &rc), 0);
	ec.rt = v->rt;
	assert_int_equal(fwd_engine_new(&ec, &v->e), 0);
	assert_int_equal(neigh_table_new(&nc, &v->ibn), 0);
	ii.neigh = v->ibn;
	assert_int_equal(fwd_engine_if_add(v->e, &ei, &v->eth), 0);
	assert_int_equal(fwd_engine_if_add(v->e, &ii, &v->ib), 0);
	assert_int_equal(fwd_engine_if_set_up(v->e, v->eth, true), 0);
	assert_int_equal(
	    fwd_engine_if_set_ipoib(v->e, v->ib, (struct ibp_qp *)0x9, 0xb1b, &hw, 2044), 0);
	{
		struct ip_prefix a[] = { pfx("10.1.0.1/24"), pfx("2001:db8:1::1/64") };
		struct ip_prefix b[] = { pfx("10.2.0.1/24"), pfx("2001:db8:2::1/64") };

		for (int i = 0; i < 2; i++) {
			assert_int_equal(fwd_engine_if_add_addr(v->e, v->eth, &a[i]), 0);
			assert_int_equal(fwd_engine_if_add_addr(v->e, v->ib, &b[i]), 0);
		}
	}
	r.nh[0] = (struct rt_nexthop){ .type = RT_NH_GATEWAY, .ifindex = v->eth };
	r.nh[1] = r.nh[0];
	assert_int_equal(ip_addr_parse("10.1.0.2", &r.nh[0].gw), 0);
	assert_int_equal(ip_addr_parse("10.1.0.3", &r.nh[1].gw), 0);
	assert_int_equal(rt_add(v->rt, &r), 0);
	eth_neigh(v, "10.1.0.2", h_mac);
	eth_neigh(v, "10.1.0.3", h3_mac);
	eth_neigh(v, "2001:db8:1::2", h_mac);
	ib_neigh(v, "10.2.0.2", 0x48, 2044);
	ib_neigh(v, "2001:db8:2::2", 0x48, 2044);
	assert_int_equal(fwd_ctx_init(&v->c, v->e, 0), 0);
	fwd_ctx_begin(&v->c, 1000000000ull);
	*state = v;
	return 0;
}

static int teardown(void **state)
{
	struct env *v = *state;

	fwd_ctx_fini(&v->c);
	fwd_engine_free(v->e);
	neigh_table_free(v->ibn);
	rt_destroy(v->rt);
	free(v);
	return 0;
}

/* ---- packets ---- */
static size_t mk4(uint8_t *p, const char *src, const char *dst, uint8_t proto, size_t len,
		  uint8_t ttl, bool df)
{
	memset(p, 0, len);
	p[0] = 0x45;
	p[2] = (uint8_t)(len >> 8), p[3] = (uint8_t)len;
	p[4] = 0x12, p[5] = 0x34;
	p[6] = df ? 0x40 : 0;
	p[8] = ttl;
	p[9] = proto;
	addr(src, p + 12);
	addr(dst, p + 16);
	{
		uint16_t c = (uint16_t)~sum16(p, 20, 0);

		p[10] = (uint8_t)(c >> 8), p[11] = (uint8_t)c;
	}
	if (proto == 17 && len >= 28) {
		p[20] = 0x30, p[21] = 0x39, p[22] = 0, p[23] = 53;
		p[24] = (uint8_t)((len - 20) >> 8), p[25] = (uint8_t)(len - 20);
		for (size_t i = 28; i < len; i++)
			p[i] = (uint8_t)i;
		{
			uint32_t s = sum16(p + 12, 8, 0) + 17 + (uint32_t)(len - 20);
			uint16_t c = (uint16_t)~sum16(p + 20, len - 20, s);

			p[26] = (uint8_t)(c >> 8), p[27] = (uint8_t)c;
		}
	}
	return len;
}

static size_t mk6(uint8_t *p, const char *src, const char *dst, size_t len, uint8_t hl)
{
	memset(p, 0, len);
	p[0] = 0x60;
	p[4] = (uint8_t)((len - 40) >> 8), p[5] = (uint8_t)(len - 40);
	p[6] = 17;
	p[7] = hl;
	addr(src, p + 8);
	addr(dst, p + 24);
	p[40] = 0x30, p[41] = 0x39, p[43] = 53;
	p[44] = p[4], p[45] = p[5];
	for (size_t i = 48; i < len; i++)
		p[i] = (uint8_t)i;
	{
		uint32_t s = sum16(p + 8, 32, 0) + 17 + (uint32_t)(len - 40);
		uint16_t c = (uint16_t)~sum16(p + 40, len - 40, s);

		p[46] = (uint8_t)(c >> 8), p[47] = (uint8_t)c;
	}
	return len;
}

static void from_ib(struct env *v, uint8_t *p, size_t len)
{
	struct ipoib_rx rx = { .kind = (p[0] >> 4) == 4 ? IPOIB_RX_IP4 : IPOIB_RX_IP6,
			       .data = p,
			       .len = len };

	fwd_ctx_scratch_reset(&v->c);
	fwd_input_ib(&v->c, fwd_snap_if(v->c.snap, v->ib), &rx, NULL, &v->res);
}

/* The worker's receive coalescing (engine/worker.c) holds a TCP segment from IPoIB only
 * when its route leaves by one next hop through an Ethernet port that sends GSO frames
 * whole; the merged packet, given to fwd_input_ib with its GSO metadata, leaves that
 * port as one frame, and is cut into segments for a port that does not take GSO. */
static void gro_wanted_toward_gso_ethernet_only(void **state)
{
	struct env *v = *state;
	struct fwd_if_config gc = { .name = "eth2",
				    .kind = FWD_IF_ETH,
				    .mtu = 1500,
				    .eth_ops = &ethp_afpacket_ops,
				    .eth = (struct ethp_port *)&fake_eth_dummy,
				    .mac = gw_mac,
				    .tx_gso = true };
	struct ip_prefix a4 = pfx("10.3.0.1/24"), a6 = pfx("2001:db8:3::1/64");
	struct neigh_link ll = { .len = 6, .usable = true };
	const struct fwd_if *ib, *g2;
	struct gso_pkt g = { GSO_TCP, 1000 };
	struct ipoib_rx rx = { .kind = IPOIB_RX_IP4 };
	uint32_t e2;
	uint8_t p[3100], a[16];

	assert_int_equal(fwd_engine_if_add(v->e, &gc, &e2), 0);
	assert_int_equal(fwd_engine_if_set_up(v->e, e2, true), 0);
	assert_int_equal(fwd_engine_if_add_addr(v->e, e2, &a4), 0);
	assert_int_equal(fwd_engine_if_add_addr(v->e, e2, &a6), 0);
	g2 = fwd_snap_if(fwd_engine_current(v->e), e2);
	addr("10.3.0.5", a);
	memcpy(ll.addr, h3_mac, 6);
	assert_non_null(neigh_update(g2->neigh, AF_INET, a, &ll, NEIGH_F_CREATE | NEIGH_F_ADMIN));
	fwd_ctx_begin(&v->c, 2000000000ull);
	ib = fwd_snap_if(v->c.snap, v->ib);

	mk4(p, "10.2.0.2", "10.3.0.5", 6, 60, 64, true);
	assert_true(fwd_gro_wanted(&v->c, ib, p, 60));
	mk4(p, "10.2.0.2", "10.3.0.5", 17, 60, 64, true); /* UDP */
	assert_false(fwd_gro_wanted(&v->c, ib, p, 60));
	mk4(p, "10.2.0.2", "10.1.0.2", 6, 60, 64, true); /* eth1: no GSO */
	assert_false(fwd_gro_wanted(&v->c, ib, p, 60));
	mk4(p, "10.2.0.2", "10.2.0.9", 6, 60, 64, true); /* back to IB */
	assert_false(fwd_gro_wanted(&v->c, ib, p, 60));
	mk4(p, "10.2.0.2", "10.3.0.1", 6, 60, 64, true); /* the gateway's own */
	assert_false(fwd_gro_wanted(&v->c, ib, p, 60));
	mk4(p, "10.2.0.2", "198.51.100.7", 6, 60, 64, true); /* an ECMP group */
	assert_false(fwd_gro_wanted(&v->c, ib, p, 60));
	assert_false(fwd_gro_wanted(&v->c, ib, p, 19)); /* short */
	mk6(p, "2001:db8:2::2", "2001:db8:3::5", 60, 64);
	p[6] = 6;
	assert_true(fwd_gro_wanted(&v->c, ib, p, 60));
	assert_false(fwd_gro_wanted(&v->c, ib, p, 39));

	/* A merged packet of three segments (3040 octets of IP): one frame to eth2, its
	 * segment size with it; three to eth1. */
	mk4(p, "10.2.0.2", "10.3.0.5", 6, 3040, 64, true);
	p[32] = 0x50, p[33] = 0x10; /* TCP: 20-octet header, ACK */
	rx.data = p, rx.len = 3040;
	fwd_ctx_scratch_reset(&v->c);
	fwd_input_ib(&v->c, ib, &rx, &g, &v->res);
	assert_int_equal(v->res.v, FWD_V_TX);
	assert_int_equal(v->res.n_tx, 1);
	assert_int_equal(v->res.tx[0].ifp->index, e2);
	assert_int_equal(v->res.tx[0].eth.len, 3040);
	assert_int_equal(v->res.tx[0].eth.gso.kind, GSO_TCP);
	assert_int_equal(v->res.tx[0].eth.gso.size, 1000);
	assert_int_equal(p[8], 63); /* TTL - 1, once */

	mk4(p, "10.2.0.2", "10.1.0.2", 6, 3040, 64, true);
	p[32] = 0x50, p[33] = 0x10;
	fwd_ctx_scratch_reset(&v->c);
	fwd_input_ib(&v->c, ib, &rx, &g, &v->res);
	assert_int_equal(v->res.v, FWD_V_TX);
	assert_int_equal(v->res.n_tx, 3);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(v->res.tx[i].ifp->index, v->eth);
		assert_int_equal(v->res.tx[i].eth.gso.kind, GSO_NONE);
		assert_int_equal(v->res.tx[i].eth.len, 1040);
	}
}

static size_t from_eth(struct env *v, uint8_t *frame, const uint8_t *pkt, size_t len)
{
	memcpy(frame, gw_mac, 6);
	memcpy(frame + 6, h_mac, 6);
	frame[12] = (pkt[0] >> 4) == 4 ? 0x08 : 0x86;
	frame[13] = (pkt[0] >> 4) == 4 ? 0x00 : 0xdd;
	memcpy(frame + 14, pkt, len);
	fwd_ctx_scratch_reset(&v->c);
	fwd_input_eth(&v->c, fwd_snap_if(v->c.snap, v->eth), frame, len + 14, ETHP_PKT_HOST, NULL,
		      &v->res);
	return len + 14;
}

static void release_ib(struct env *v)
{
	for (unsigned i = 0; i < v->res.n_tx; i++)
		if (v->res.tx[i].ifp->kind == FWD_IF_IPOIB)
			fake_put(NULL, v->res.tx[i].ib.buf);
}

/* ---- tests ---- */
static void ib_to_eth_ipv4(void **state)
{
	struct env *v = *state;
	uint8_t p[200];

	mk4(p, "10.2.0.2", "10.1.0.2", 17, 100, 64, false);
	from_ib(v, p, 100);
	assert_int_equal(v->res.v, FWD_V_TX);
	assert_int_equal(v->res.n_tx, 1);
	assert_int_equal(v->res.tx[0].ifp->index, v->eth);
	assert_memory_equal(v->res.tx[0].eth.hdr, h_mac, 6);
	assert_memory_equal(v->res.tx[0].eth.hdr + 6, gw_mac, 6);
	assert_int_equal(v->res.tx[0].eth.hdr[12], 0x08);
	assert_int_equal(v->res.tx[0].eth.hdr_len, 14);
	assert_ptr_equal(v->res.tx[0].eth.data, p); /* no copy */
	assert_int_equal(v->res.tx[0].eth.len, 100);
	assert_int_equal(p[8], 63);
	assert_true(ip4_csum_ok(p));
	assert_true(l4_csum_ok4(p));
}

static void eth_to_ib_ipv4(void **state)
{
	struct env *v = *state;
	uint8_t p[200], f[300];
	const uint8_t *o;

	mk4(p, "10.1.0.2", "10.2.0.2", 17, 120, 10, true);
	from_eth(v, f, p, 120);
	assert_int_equal(v->res.v, FWD_V_TX);
	assert_int_equal(v->res.n_tx, 1);
	assert_int_equal(v->res.tx[0].ifp->index, v->ib);
	assert_ptr_equal(v->res.tx[0].ib.qp, (void *)0x9);
	assert_ptr_equal(v->res.tx[0].ib.ah, (void *)0xa4);
	assert_int_equal(v->res.tx[0].ib.remote_qpn, 0x48);
	assert_int_equal(v->res.tx[0].ib.remote_qkey, 0xb1b);
	assert_int_equal(v->res.tx[0].ib.buf->len, 124);
	o = v->res.tx[0].ib.buf->data;
	assert_int_equal(o[0], 0x08);
	assert_int_equal(o[1], 0x00);
	assert_int_equal(o[2] | o[3], 0);
	assert_int_equal(o[4 + 8], 9);
	assert_true(ip4_csum_ok(o + 4));
	assert_true(l4_csum_ok4(o + 4));
	assert_memory_equal(o + 4 + 20, p + 20, 100);
	release_ib(v);
}

/* A GSO packet from Ethernet (a local sender's UDP super-frame: 3 datagrams of 1400
 * octets and one of 100) toward IPoIB (MTU 2044): segmented straight into IB buffers,
 * each datagram its own IPv4 header (identification + i, TTL - 1) and UDP header with
 * a checksum that verifies; with datagrams of 2100 octets and DF, frag needed (2044),
 * counted, nothing sent. */
static void gso_eth_to_ib(void **state)
{
	struct env *v = *state;
	static uint8_t p[6000], f[6100];
	struct gso_pkt g = { GSO_UDP, 1400 };
	size_t len = 28 + 3 * 1400 + 100;

	mk4(p, "10.1.0.2", "10.2.0.2", 17, len, 10, true);
	memcpy(f, gw_mac, 6);
	memcpy(f + 6, h_mac, 6);
	f[12] = 0x08, f[13] = 0x00;
	memcpy(f + 14, p, len);
	fwd_ctx_scratch_reset(&v->c);
	fwd_input_eth(&v->c, fwd_snap_if(v->c.snap, v->eth), f, len + 14, ETHP_PKT_HOST, &g,
		      &v->res);
	assert_int_equal(v->res.v, FWD_V_TX);
	assert_int_equal(v->res.n_tx, 4);
	for (unsigned i = 0; i < 4; i++) {
		const uint8_t *o = v->res.tx[i].ib.buf->data + 4;
		size_t n = i < 3 ? 1428 : 128;

		assert_int_equal(v->res.tx[i].ifp->index, v->ib);
		assert_int_equal(v->res.tx[i].ib.buf->len, 4 + n);
		assert_int_equal(o[2] << 8 | o[3], n);
		assert_int_equal(o[4] << 8 | o[5], 0x1234 + i);
		assert_int_equal(o[8], 9);
		assert_true(ip4_csum_ok(o));
		assert_int_equal(o[24] << 8 | o[25], n - 20);
		assert_true(l4_csum_ok4(o));
		assert_memory_equal(o + 28, p + 28 + i * 1400, n - 28);
	}
	release_ib(v);

	/* datagrams too big for the link: they are the sender's, never cut smaller */
	g.size = 2100;
	len = 28 + 2 * 2100;
	mk4(p, "10.1.0.2", "10.2.0.2", 17, len, 10, true);
	memcpy(f + 14, p, len);
	fwd_ctx_scratch_reset(&v->c);
	fwd_input_eth(&v->c, fwd_snap_if(v->c.snap, v->eth), f, len + 14, ETHP_PKT_HOST, &g,
		      &v->res);
	assert_int_equal(v->res.v, FWD_V_DROP);
	assert_int_equal(v->res.drop, FWD_DROP_TOO_BIG);
	assert_int_equal(v->res.n_tx, 1); /* the ICMP error, back to the sender */
	assert_int_equal(v->res.tx[0].ifp->index, v->eth);
	assert_int_equal(v->res.tx[0].eth.data[20], 3);
	assert_int_equal(v->res.tx[0].eth.data[21], 4);
	assert_int_equal(v->res.tx[0].eth.data[26] << 8 | v->res.tx[0].eth.data[27], 2044);
	assert_int_equal(v->c.st->gso[GSO_SEGMENT_TOO_BIG], 1);
	release_ib(v);
}

static void ipv6_both_ways(void **state)
{
	struct env *v = *state;
	uint8_t p[300], f[400];
	const uint8_t *o;

	mk6(p, "2001:db8:2::2", "2001:db8:1::2", 200, 64);
	from_ib(v, p, 200);
	assert_int_equal(v->res.v, FWD_V_TX);
	assert_int_equal(v->res.tx[0].ifp->index, v->eth);
	assert_int_equal(v->res.tx[0].eth.hdr[12], 0x86);
	assert_int_equal(v->res.tx[0].eth.hdr[13], 0xdd);
	assert_int_equal(p[7], 63);
	assert_true(l4_csum_ok6(p));

	mk6(p, "2001:db8:1::2", "2001:db8:2::2", 200, 2);
	from_eth(v, f, p, 200);
	assert_int_equal(v->res.v, FWD_V_TX);
	o = v->res.tx[0].ib.buf->data;
	assert_int_equal(o[0], 0x86);
	assert_int_equal(o[4 + 7], 1);
	assert_true(l4_csum_ok6(o + 4));
	release_ib(v);
}

static void ttl_expiry_sends_time_exceeded(void **state)
{
	struct env *v = *state;
	uint8_t p[200];
	const uint8_t *o;
	uint8_t ours[4];

	mk4(p, "10.2.0.2", "10.1.0.2", 17, 100, 1, false);
	from_ib(v, p, 100);
	assert_int_equal(v->res.v, FWD_V_DROP);
	assert_int_equal(v->res.drop, FWD_DROP_TTL_EXPIRED);
	assert_int_equal(v->res.n_tx, 1);
	assert_int_equal(v->res.tx[0].ifp->index, v->ib); /* back where it came from */
	o = v->res.tx[0].ib.buf->data + 4;
	addr("10.2.0.1", ours);
	assert_memory_equal(o + 12, ours, 4);
	assert_memory_equal(o + 16, p + 12, 4);
	assert_int_equal(o[9], 1);
	assert_int_equal(o[20], 11);
	assert_int_equal(o[21], 0);
	assert_true(ip4_csum_ok(o));
	assert_true(l4_csum_ok4(o));
	assert_memory_equal(o + 28, p, 28); /* quote: the packet as it came (TTL 1) */
	release_ib(v);

	mk6(p, "2001:db8:2::2", "2001:db8:1::2", 100, 1);
	from_ib(v, p, 100);
	assert_int_equal(v->res.drop, FWD_DROP_TTL_EXPIRED);
	assert_int_equal(v->res.n_tx, 1);
	o = v->res.tx[0].ib.buf->data + 4;
	assert_int_equal(o[40], 3);
	assert_true(l4_csum_ok6(o));
	release_ib(v);
}

static void df_too_big_sends_frag_needed(void **state)
{
	struct env *v = *state;
	uint8_t p[2100];
	const uint8_t *o;

	mk4(p, "10.2.0.2", "10.1.0.2", 17, 2000, 64, true);
	from_ib(v, p, 2000);
	assert_int_equal(v->res.v, FWD_V_DROP);
	assert_int_equal(v->res.drop, FWD_DROP_TOO_BIG);
	assert_int_equal(v->res.n_tx, 1);
	o = v->res.tx[0].ib.buf->data + 4;
	assert_int_equal(o[20], 3);
	assert_int_equal(o[21], 4);
	assert_int_equal(o[26] << 8 | o[27], 1500); /* next-hop MTU */
	assert_int_equal(o[28 + 8], 64);            /* quoted TTL not decremented */
	assert_true(ip4_csum_ok(o));
	assert_true(l4_csum_ok4(o));
	release_ib(v);
}

static void ipv6_too_big_sends_ptb(void **state)
{
	struct env *v = *state;
	uint8_t p[2100];
	const uint8_t *o;

	mk6(p, "2001:db8:2::2", "2001:db8:1::2", 1600, 64);
	from_ib(v, p, 1600);
	assert_int_equal(v->res.drop, FWD_DROP_TOO_BIG);
	assert_int_equal(v->res.n_tx, 1);
	o = v->res.tx[0].ib.buf->data + 4;
	assert_int_equal(o[40], 2);
	assert_int_equal((o[44] << 24) | (o[45] << 16) | (o[46] << 8) | o[47], 1500);
	assert_true(l4_csum_ok6(o));
	assert_true((o[4] << 8 | o[5]) + 40 <= 1280);
	release_ib(v);
}

static void fragments_when_df_clear(void **state)
{
	struct env *v = *state;
	uint8_t p[2100], re[2100];
	unsigned total = 0;

	mk4(p, "10.2.0.2", "10.1.0.2", 17, 2000, 64, false);
	memcpy(re, p, 2000);
	from_ib(v, p, 2000);
	assert_int_equal(v->res.v, FWD_V_TX);
	assert_int_equal(v->res.n_tx, 2);
	for (unsigned i = 0; i < 2; i++) {
		const uint8_t *f = v->res.tx[i].eth.data;
		unsigned tot = (unsigned)(f[2] << 8 | f[3]),
			 off = ((f[6] & 0x1fu) << 8 | f[7]) * 8u;

		assert_true(tot <= 1500);
		assert_true(ip4_csum_ok(f));
		assert_int_equal(f[8], 63);
		assert_int_equal(!!(f[6] & 0x20), i == 0);
		assert_memory_equal(f + 20, re + 20 + off, tot - 20);
		total += tot - 20;
	}
	assert_int_equal(total, 1980);
}

static void mss_clamped_on_syn(void **state)
{
	struct env *v = *state;
	uint8_t p[100];

	mk4(p, "10.2.0.2", "10.1.0.2", 6, 44, 64, true);
	p[20] = 0x30, p[21] = 0x39, p[23] = 80;
	p[32] = 0x60; /* data offset 6 */
	p[33] = 0x02; /* SYN */
	p[40] = 2, p[41] = 4, p[42] = 2044 >> 8 & 0xff, p[43] = (2044 - 40) & 0xff;
	p[42] = (uint8_t)(2004 >> 8), p[43] = (uint8_t)2004;
	{
		uint32_t s = sum16(p + 12, 8, 0) + 6 + 24;
		uint16_t c = (uint16_t)~sum16(p + 20, 24, s);

		p[36] = (uint8_t)(c >> 8), p[37] = (uint8_t)c;
	}
	from_ib(v, p, 44);
	assert_int_equal(v->res.v, FWD_V_TX);
	assert_int_equal(p[42] << 8 | p[43], 1460);
	assert_true(l4_csum_ok4(p));
	assert_true(ip4_csum_ok(p));
}

static void martians_and_link_local_dropped(void **state)
{
	struct env *v = *state;
	uint8_t p[200];
	struct fwd_stats st;

	mk4(p, "127.0.0.1", "10.1.0.2", 17, 60, 64, false);
	from_ib(v, p, 60);
	assert_int_equal(v->res.drop, FWD_DROP_MARTIAN);
	assert_int_equal(v->res.n_tx, 0);
	fwd_count(&v->c, &v->res);
	mk4(p, "169.254.1.1", "10.1.0.2", 17, 60, 64, false);
	from_ib(v, p, 60);
	assert_int_equal(v->res.drop, FWD_DROP_MARTIAN);
	fwd_count(&v->c, &v->res);
	mk6(p, "fe80::1", "2001:db8:1::2", 60, 64);
	from_ib(v, p, 60);
	assert_int_equal(v->res.drop, FWD_DROP_MARTIAN);
	fwd_count(&v->c, &v->res);
	fwd_engine_stats(v->e, -1, &st);
	assert_int_equal(st.drops[FWD_DROP_MARTIAN], 3);
	assert_int_equal(st.ip[IP4_SRC_LOOPBACK], 1);
	assert_int_equal(st.ip[IP4_SRC_LINK_LOCAL], 1);
	assert_int_equal(st.ip[IP6_SRC_LINK_LOCAL], 1);
	/* bad checksum */
	mk4(p, "10.2.0.2", "10.1.0.2", 17, 60, 64, false);
	p[10] ^= 1;
	from_ib(v, p, 60);
	assert_int_equal(v->res.drop, FWD_DROP_IP_INVALID);
}

/* A DHCP client's broadcast (0.0.0.0 -> 255.255.255.255, UDP 67) is a martian unless
 * its interface relays DHCP (dhcp_ifmask, fwd_sp_dhcp_bind): then it is punted local,
 * whole; UDP to another port, or on another interface, stays a martian. */
static void dhcp_broadcast_punted_where_relayed(void **state)
{
	struct env *v = *state;
	uint8_t p[300], f[400];

	mk4(p, "0.0.0.0", "255.255.255.255", 17, 300, 64, false);
	p[20] = 0, p[21] = 68, p[22] = 0, p[23] = 67;
	from_ib(v, p, 300);
	assert_int_equal(v->res.v, FWD_V_DROP);
	assert_int_equal(v->res.drop, FWD_DROP_MARTIAN);
	atomic_store(&v->e->dhcp_ifmask, 1u << v->ib);
	from_ib(v, p, 300);
	assert_int_equal(v->res.v, FWD_V_PUNT);
	assert_int_equal(v->res.punt, FWD_PUNT_LOCAL);
	assert_int_equal(v->res.punt_if->index, v->ib);
	assert_int_equal(v->res.punt_len, 300);
	from_eth(v, f, p, 300); /* eth does not relay */
	assert_int_equal(v->res.drop, FWD_DROP_MARTIAN);
	p[23] = 68;
	from_ib(v, p, 300);
	assert_int_equal(v->res.drop, FWD_DROP_MARTIAN);
	p[23] = 67;
	p[6] = 0x20; /* a fragment (MF): no whole UDP datagram to hand over */
	p[10] = p[11] = 0;
	{
		uint16_t c = (uint16_t)~sum16(p, 20, 0);

		p[10] = (uint8_t)(c >> 8), p[11] = (uint8_t)c;
	}
	from_ib(v, p, 300);
	assert_int_equal(v->res.drop, FWD_DROP_MARTIAN);
	atomic_store(&v->e->dhcp_ifmask, 0);
}

/* A DHCPv6 Solicit (fe80:: -> ff02::1:2, UDP 547) is a martian unless its interface
 * relays DHCP: then punted local; to another group or port it stays dropped. */
static void dhcp6_solicit_punted_where_relayed(void **state)
{
	struct env *v = *state;
	uint8_t p[200];

	mk6(p, "fe80::2", "ff02::1:2", 100, 1);
	p[6] = 17;
	p[42] = 0x02, p[43] = 0x23; /* port 547 */
	from_ib(v, p, 100);
	assert_int_equal(v->res.v, FWD_V_DROP);
	atomic_store(&v->e->dhcp_ifmask, 1u << v->ib);
	from_ib(v, p, 100);
	assert_int_equal(v->res.v, FWD_V_PUNT);
	assert_int_equal(v->res.punt, FWD_PUNT_LOCAL);
	p[43] = 0x22; /* 546 */
	from_ib(v, p, 100);
	assert_int_equal(v->res.v, FWD_V_DROP);
	p[43] = 0x23;
	p[39] = 3; /* ff02::1:3 */
	from_ib(v, p, 100);
	assert_int_equal(v->res.v, FWD_V_DROP);
	atomic_store(&v->e->dhcp_ifmask, 0);
}

/* IP multicast is a martian (dropped) unless its interface forwards multicast
 * (mcast_ifmask, fwd_sp_mcast_bind): then punted whole as FWD_PUNT_MCAST, IGMP and
 * group traffic alike, also with TTL 1 (the slow path counts it); a martian source
 * stays dropped; IPv6: from a link-local source (MLD) or a global one, not from ::
 * unless ICMPv6 (an MLDv2 report during DAD). */
static void multicast_punted_where_forwarded(void **state)
{
	struct env *v = *state;
	uint8_t p[200], f[300];

	mk4(p, "10.2.0.2", "239.1.2.3", 17, 100, 64, false);
	from_ib(v, p, 100);
	assert_int_equal(v->res.v, FWD_V_DROP);
	assert_int_equal(v->res.drop, FWD_DROP_MARTIAN);
	atomic_store(&v->e->mcast_ifmask, 1u << v->ib | 1u << v->eth);
	from_ib(v, p, 100);
	assert_int_equal(v->res.v, FWD_V_PUNT);
	assert_int_equal(v->res.punt, FWD_PUNT_MCAST);
	assert_int_equal(v->res.punt_if->index, v->ib);
	assert_int_equal(v->res.punt_len, 100);
	mk4(p, "10.1.0.2", "239.1.2.3", 17, 100, 1, false);
	from_eth(v, f, p, 100);
	assert_int_equal(v->res.v, FWD_V_PUNT);
	assert_int_equal(v->res.punt, FWD_PUNT_MCAST);
	assert_int_equal(v->res.punt_if->index, v->eth);
	mk4(p, "127.0.0.1", "239.1.2.3", 17, 100, 64, false);
	from_ib(v, p, 100);
	assert_int_equal(v->res.drop, FWD_DROP_MARTIAN);
	mk6(p, "fe80::2", "ff02::16", 100, 1);
	p[6] = 58;
	from_ib(v, p, 100);
	assert_int_equal(v->res.punt, FWD_PUNT_MCAST);
	mk6(p, "fd00:10::2", "ff0e::1:2", 100, 64);
	p[6] = 17;
	from_ib(v, p, 100);
	assert_int_equal(v->res.v, FWD_V_PUNT);
	assert_int_equal(v->res.punt, FWD_PUNT_MCAST);
	mk6(p, "::", "ff0e::1:2", 100, 64);
	p[6] = 17;
	from_ib(v, p, 100);
	assert_int_equal(v->res.v, FWD_V_DROP);
	atomic_store(&v->e->mcast_ifmask, 1u << v->eth); /* ib0 does not forward multicast */
	mk4(p, "10.2.0.2", "239.1.2.3", 17, 100, 64, false);
	from_ib(v, p, 100);
	assert_int_equal(v->res.drop, FWD_DROP_MARTIAN);
	atomic_store(&v->e->mcast_ifmask, 0);
}

static void local_delivery_punts(void **state)
{
	struct env *v = *state;
	uint8_t p[200], f[300];

	mk4(p, "10.1.0.2", "10.1.0.1", 1, 60, 64, false);
	from_eth(v, f, p, 60);
	assert_int_equal(v->res.v, FWD_V_PUNT);
	assert_int_equal(v->res.punt, FWD_PUNT_LOCAL);
	assert_int_equal(v->res.punt_len, 60);
	mk6(p, "2001:db8:2::2", "2001:db8:2::1", 60, 64);
	from_ib(v, p, 60);
	assert_int_equal(v->res.punt, FWD_PUNT_LOCAL);
}

static void unresolved_punts_with_next_hop(void **state)
{
	struct env *v = *state;
	uint8_t p[200], f[300], nh[4];

	mk4(p, "10.2.0.2", "10.1.0.9", 17, 60, 64, false);
	from_ib(v, p, 60);
	assert_int_equal(v->res.v, FWD_V_PUNT);
	assert_int_equal(v->res.punt, FWD_PUNT_UNRESOLVED);
	assert_int_equal(v->res.punt_if->index, v->eth);
	addr("10.1.0.9", nh);
	assert_memory_equal(v->res.punt_nh, nh, 4);
	assert_int_equal(p[8], 64); /* not decremented: the egress stage runs again later */
	/* to IB, unknown neighbour */
	mk4(p, "10.1.0.2", "10.2.0.77", 17, 60, 64, false);
	from_eth(v, f, p, 60);
	assert_int_equal(v->res.punt, FWD_PUNT_UNRESOLVED);
	assert_int_equal(v->res.punt_if->index, v->ib);
	/* ARP and ND punt too */
	memcpy(f, gw_mac, 6);
	f[12] = 0x08, f[13] = 0x06;
	fwd_input_eth(&v->c, fwd_snap_if(v->c.snap, v->eth), f, 60, ETHP_PKT_BROADCAST, NULL,
		      &v->res);
	assert_int_equal(v->res.punt, FWD_PUNT_ARP);
}

/* A next hop the worker still has unresolved punts out for (struct fwd_held): its later
 * packets are punted behind them even once the neighbour is usable, until the last one
 * is back; the packets that come back (fwd_output_ip) go out; other hops are not held. */
static void held_next_hop_keeps_order(void **state)
{
	struct env *v = *state;
	const struct fwd_if *eth = fwd_snap_if(v->c.snap, v->eth);
	uint8_t p[200], nh[4];

	addr("10.1.0.9", nh);
	mk4(p, "10.2.0.2", "10.1.0.9", 17, 60, 64, false);
	from_ib(v, p, 60);
	assert_int_equal(v->res.punt, FWD_PUNT_UNRESOLVED);
	assert_true(fwd_held_add(&v->c, v->eth, AF_INET, nh)); /* the worker hands it over */
	assert_true(fwd_held_add(&v->c, v->eth, AF_INET, nh)); /* and a second one */
	eth_neigh(v, "10.1.0.9", h_mac);                       /* resolved meanwhile */
	mk4(p, "10.2.0.2", "10.1.0.9", 17, 60, 64, false);
	from_ib(v, p, 60);
	assert_int_equal(v->res.v, FWD_V_PUNT); /* behind the two */
	assert_int_equal(v->res.punt, FWD_PUNT_UNRESOLVED);
	assert_int_equal(v->c.st->unres_held, 1);
	/* One comes back: sent (the egress stage without the hold), the hop still held. */
	mk4(p, "10.2.0.2", "10.1.0.9", 17, 60, 63, false);
	fwd_output_ip(&v->c, eth, AF_INET, nh, p, 60, &v->res);
	assert_int_equal(v->res.v, FWD_V_TX);
	fwd_held_done(&v->c, v->eth, AF_INET, nh);
	mk4(p, "10.2.0.3", "10.1.0.2", 17, 60, 64, false); /* another hop: not held */
	from_ib(v, p, 60);
	assert_int_equal(v->res.v, FWD_V_TX);
	release_ib(v);
	mk4(p, "10.2.0.2", "10.1.0.9", 17, 60, 64, false);
	from_ib(v, p, 60);
	assert_int_equal(v->res.v, FWD_V_PUNT);
	/* The last one back: the hop's packets go straight out again. */
	fwd_held_done(&v->c, v->eth, AF_INET, nh);
	assert_int_equal(v->c.held.n, 0);
	mk4(p, "10.2.0.2", "10.1.0.9", 17, 60, 64, false);
	from_ib(v, p, 60);
	assert_int_equal(v->res.v, FWD_V_TX);
	release_ib(v);
	fwd_held_done(&v->c, v->eth, AF_INET, nh); /* one too many: nothing to undo */
	assert_int_equal(v->c.held.n, 0);
}

/* The held hops are sets of FWD_HELD_WAYS: a hop whose set is full is not held (the
 * caller then does not count its punt), and a way freed is taken again. */
static void held_set_full_refuses(void **state)
{
	struct env *v = *state;
	uint8_t nh[16] = { 0x20, 0x01, 0x0d, 0xb8 };
	unsigned held = 0, refused = 0;

	for (unsigned i = 0; i < FWD_HELD_SETS * FWD_HELD_WAYS * 4; i++) {
		nh[14] = (uint8_t)(i >> 8), nh[15] = (uint8_t)i;
		if (fwd_held_add(&v->c, v->eth, AF_INET6, nh))
			held++;
		else
			refused++;
	}
	assert_int_equal(held, FWD_HELD_SETS * FWD_HELD_WAYS);
	assert_int_equal(v->c.held.n, held);
	assert_int_equal(refused, FWD_HELD_SETS * FWD_HELD_WAYS * 3);
	for (unsigned i = 0; i < FWD_HELD_SETS * FWD_HELD_WAYS * 4; i++) {
		nh[14] = (uint8_t)(i >> 8), nh[15] = (uint8_t)i;
		fwd_held_done(&v->c, v->eth, AF_INET6, nh);
	}
	assert_int_equal(v->c.held.n, 0);
	nh[15] = 7;
	assert_true(fwd_held_add(&v->c, v->eth, AF_INET6, nh));
	assert_int_equal(v->c.held.n, 1);
}

static void no_route_sends_unreachable(void **state)
{
	struct env *v = *state;
	uint8_t p[200];
	const uint8_t *o;

	mk4(p, "10.2.0.2", "203.0.113.1", 17, 60, 64, false);
	from_ib(v, p, 60);
	assert_int_equal(v->res.drop, FWD_DROP_NO_ROUTE);
	assert_int_equal(v->res.n_tx, 1);
	o = v->res.tx[0].ib.buf->data + 4;
	assert_int_equal(o[20], 3);
	assert_int_equal(o[21], 0);
	release_ib(v);
}

/*
 * Tenants: an interface given a table of its own (fwd_if_config.rt) is looked up there
 * only, its addresses may repeat the default tenant's, and a packet reaches another
 * tenant only through a route in its own table that names an interface there.
 */
static void tenants_have_own_tables(void **state)
{
	struct env *v = *state;
	struct rt_config rc = { 0 };
	struct rt_table *blue;
	struct fwd_if_config bc = { .name = "eth2",
				    .kind = FWD_IF_ETH,
				    .mtu = 1500,
				    .eth_ops = &ethp_afpacket_ops,
				    .eth = (struct ethp_port *)&fake_eth_dummy,
				    .mac = gw_mac };
	struct ip_prefix same = pfx("10.1.0.1/24");
	struct rt_route leak = { .prefix = pfx("10.2.0.0/24"), .source = RT_SRC_STATIC, .nnh = 1 };
	struct neigh_link ll = { .len = 6, .usable = true };
	struct ip_addr dst;
	const struct rt_fib_nh *nh;
	uint32_t e2;
	uint8_t p[200], f[300], a[16];
	const struct fwd_if *in2;

	assert_int_equal(rt_create(&blue, &rc), 0);
	bc.rt = blue;
	assert_int_equal(fwd_engine_if_add(v->e, &bc, &e2), 0);
	assert_int_equal(fwd_engine_if_set_up(v->e, e2, true), 0);
	/* The default tenant's subnet again: accepted, and connected in blue only. */
	assert_int_equal(fwd_engine_if_add_addr(v->e, e2, &same), 0);
	assert_int_equal(ip_addr_parse("10.1.0.9", &dst), 0);
	nh = rt_lookup(v->rt, &dst, 0);
	assert_non_null(nh);
	assert_int_equal(nh->ifindex, v->eth);
	nh = rt_lookup(blue, &dst, 0);
	assert_non_null(nh);
	assert_int_equal(nh->ifindex, e2);
	in2 = fwd_snap_if(fwd_engine_current(v->e), e2);
	addr("10.1.0.2", a);
	memcpy(ll.addr, h3_mac, 6);
	assert_non_null(neigh_update(in2->neigh, AF_INET, a, &ll, NEIGH_F_CREATE | NEIGH_F_ADMIN));

	/* From IB (default tenant) to 10.1.0.2: the default tenant's host on eth1. */
	fwd_ctx_begin(&v->c, 2000000000ull);
	mk4(p, "10.2.0.2", "10.1.0.2", 17, 100, 64, false);
	from_ib(v, p, 100);
	assert_int_equal(v->res.v, FWD_V_TX);
	assert_int_equal(v->res.tx[0].ifp->index, v->eth);
	assert_memory_equal(v->res.tx[0].eth.hdr, h_mac, 6);

	/* From blue's eth2 to the IB subnet: no route in blue, unreachable back on eth2. */
	mk4(p, "10.1.0.2", "10.2.0.2", 17, 100, 64, false);
	memcpy(f, gw_mac, 6);
	memcpy(f + 6, h3_mac, 6);
	f[12] = 0x08, f[13] = 0x00;
	memcpy(f + 14, p, 100);
	fwd_ctx_scratch_reset(&v->c);
	fwd_input_eth(&v->c, fwd_snap_if(v->c.snap, e2), f, 114, ETHP_PKT_HOST, NULL, &v->res);
	assert_int_equal(v->res.v, FWD_V_DROP);
	assert_int_equal(v->res.drop, FWD_DROP_NO_ROUTE);
	assert_int_equal(v->res.n_tx, 1);
	assert_int_equal(v->res.tx[0].ifp->index, e2);
	assert_memory_equal(v->res.tx[0].eth.hdr, h3_mac, 6);

	/* A route in blue naming the IB link leaks that prefix into the default tenant. */
	leak.nh[0] = (struct rt_nexthop){ .type = RT_NH_CONNECTED, .ifindex = v->ib };
	assert_int_equal(rt_add(blue, &leak), 0);
	mk4(p, "10.1.0.2", "10.2.0.2", 17, 100, 64, false);
	memcpy(f + 14, p, 100);
	fwd_ctx_scratch_reset(&v->c);
	fwd_input_eth(&v->c, fwd_snap_if(v->c.snap, e2), f, 114, ETHP_PKT_HOST, NULL, &v->res);
	assert_int_equal(v->res.v, FWD_V_TX);
	assert_int_equal(v->res.n_tx, 1);
	assert_int_equal(v->res.tx[0].ifp->index, v->ib);
	assert_int_equal(v->res.tx[0].ib.remote_qpn, 0x48);
	release_ib(v);

	assert_int_equal(fwd_engine_if_del(v->e, e2), 0);
	rt_destroy(blue);
}

static void ecmp_spreads_and_sticks(void **state)
{
	struct env *v = *state;
	uint8_t p[200];
	unsigned a = 0, b = 0;

	for (unsigned i = 0; i < 2000; i++) {
		mk4(p, "10.2.0.2", "198.51.100.7", 17, 60, 64, false);
		p[20] = (uint8_t)(i >> 8), p[21] = (uint8_t)i; /* source port */
		p[26] = p[27] = 0;
		from_ib(v, p, 60);
		assert_int_equal(v->res.v, FWD_V_TX);
		if (!memcmp(v->res.tx[0].eth.hdr, h_mac, 6))
			a++;
		else if (!memcmp(v->res.tx[0].eth.hdr, h3_mac, 6))
			b++;
		if (i == 5) {
			uint8_t first[6];

			memcpy(first, v->res.tx[0].eth.hdr, 6);
			for (int k = 0; k < 10; k++) {
				mk4(p, "10.2.0.2", "198.51.100.7", 17, 60, 64, false);
				p[20] = 0, p[21] = 5, p[26] = p[27] = 0;
				from_ib(v, p, 60);
				assert_memory_equal(v->res.tx[0].eth.hdr, first, 6);
			}
		}
	}
	assert_int_equal(a + b, 2000);
	assert_true(a > 800 && b > 800);
}

static void snapshot_changes_are_seen(void **state)
{
	struct env *v = *state;
	uint8_t p[200];

	assert_int_equal(fwd_engine_if_set_up(v->e, v->eth, false), 0);
	fwd_ctx_begin(&v->c, 2000000000ull);
	mk4(p, "10.2.0.2", "10.1.0.2", 17, 60, 64, false);
	from_ib(v, p, 60);
	assert_int_equal(v->res.drop, FWD_DROP_IF_DOWN);
	assert_int_equal(fwd_engine_if_set_up(v->e, v->eth, true), 0);
	fwd_ctx_begin(&v->c, 3000000000ull);
	mk4(p, "10.2.0.2", "10.1.0.2", 17, 60, 64, false);
	from_ib(v, p, 60);
	assert_int_equal(v->res.v, FWD_V_TX);
	assert_string_equal(fwd_drop_name(FWD_DROP_MARTIAN), "martian");
}

/* A burst of one through the stages up to the route only (fwd_fast_burst without tx:
 * the lookups kept for the input), then the input. */
static void from_ib_warmed(struct env *v, uint8_t *p, size_t len)
{
	uint8_t *ip = p;
	size_t l = len;

	fwd_fast_burst(&v->c, fwd_snap_if(v->c.snap, v->ib), &ip, &l, 1, 0, NULL);
	from_ib(v, p, len);
}

/* One IPv4 packet from IB to 203.0.113.5: sent to mac, or (mac NULL) punted for want of
 * the gateway 10.1.0.2. */
static void to_gateway(struct env *v, const uint8_t *mac)
{
	uint8_t p[200], gw[4];

	mk4(p, "10.2.0.2", "203.0.113.5", 17, 60, 64, false);
	from_ib_warmed(v, p, 60);
	if (!mac) {
		assert_int_equal(v->res.v, FWD_V_PUNT);
		assert_int_equal(v->res.punt, FWD_PUNT_UNRESOLVED);
		addr("10.1.0.2", gw);
		assert_memory_equal(v->res.punt_nh, gw, 4);
		return;
	}
	assert_int_equal(v->res.v, FWD_V_TX);
	assert_int_equal(v->res.tx[0].ifp->index, v->eth);
	assert_memory_equal(v->res.tx[0].eth.hdr, mac, 6);
}

/*
 * A gateway route's next hop keeps a hint to its neighbour's slot: the gateway's entry
 * deleted (punted, never sent to the old address), created again elsewhere with another
 * address, the index rebuilt under it by churn, or the hint holding garbage -- every
 * packet goes where a lookup without the hint would send it.
 */
static void gateway_hint_follows_neighbour(void **state)
{
	struct env *v = *state;
	struct rt_route r = { .prefix = pfx("203.0.113.0/24"), .source = RT_SRC_STATIC, .nnh = 1 };
	const struct fwd_if *eth = fwd_snap_if(v->c.snap, v->eth);
	const struct rt_fib_nh *nh;
	struct ip_addr dst;
	uint8_t gw[4], a[4];

	r.nh[0] = (struct rt_nexthop){ .type = RT_NH_GATEWAY, .ifindex = v->eth };
	assert_int_equal(ip_addr_parse("10.1.0.2", &r.nh[0].gw), 0);
	assert_int_equal(rt_add(v->rt, &r), 0);
	assert_int_equal(ip_addr_parse("203.0.113.5", &dst), 0);
	nh = rt_lookup(v->rt, &dst, 0);
	assert_non_null(nh);
	addr("10.1.0.2", gw);

	to_gateway(v, h_mac);
	assert_int_not_equal(*rt_fib_nh_hint(nh), 0); /* learned */
	to_gateway(v, h_mac);
	neigh_delete(eth->neigh, neigh_lookup(eth->neigh, AF_INET, gw));
	to_gateway(v, NULL);
	assert_int_equal(*rt_fib_nh_hint(nh), 0);
	eth_neigh(v, "10.1.0.2", h3_mac);
	to_gateway(v, h3_mac);
	/* 3000 neighbours come and go (dead slots: the index is rebuilt several times) */
	for (unsigned i = 0; i < 3000; i++) {
		struct neigh_link ll = { .len = 6, .usable = true };

		a[0] = 10, a[1] = 1, a[2] = (uint8_t)(1 + i / 250), a[3] = (uint8_t)(i % 250);
		assert_non_null(
		    neigh_update(eth->neigh, AF_INET, a, &ll, NEIGH_F_CREATE | NEIGH_F_ADMIN));
		if (i >= 100) {
			a[2] = (uint8_t)(1 + (i - 100) / 250), a[3] = (uint8_t)((i - 100) % 250);
			neigh_delete(eth->neigh, neigh_lookup(eth->neigh, AF_INET, a));
		}
		if (i % 7 == 0)
			to_gateway(v, h3_mac);
	}
	to_gateway(v, h3_mac);
	*rt_fib_nh_hint(nh) = 0xfffffff0u; /* another table's, say */
	to_gateway(v, h3_mac);
}

/*
 * fwd_input_* takes the route the burst's stages looked up for the same packet, in the same
 * turn, FIB and destination, and nothing else: a route replaced between the warming and
 * the next turn's input (fwd_ctx_begin) is the one used; a packet that follows in the
 * same buffer unwarmed, or that was rewritten after its warming, goes by what it holds.
 */
static void warmed_route_only_its_own(void **state)
{
	struct env *v = *state;
	struct rt_route r = { .prefix = pfx("203.0.113.0/24"), .source = RT_SRC_STATIC, .nnh = 1 };
	const struct fwd_if *ib = fwd_snap_if(v->c.snap, v->ib);
	uint8_t p[200], *ip = p;
	size_t l = 60;

	eth_neigh(v, "10.1.0.4", h_mac);
	r.nh[0] = (struct rt_nexthop){ .type = RT_NH_GATEWAY, .ifindex = v->eth };
	assert_int_equal(ip_addr_parse("10.1.0.3", &r.nh[0].gw), 0);
	assert_int_equal(rt_add(v->rt, &r), 0);
	mk4(p, "10.2.0.2", "203.0.113.5", 17, 60, 64, false);
	fwd_fast_burst(&v->c, ib, &ip, &l, 1, 0, NULL);
	assert_int_equal(ip_addr_parse("10.1.0.4", &r.nh[0].gw), 0);
	assert_int_equal(rt_replace(v->rt, &r), 0);
	fwd_ctx_begin(&v->c, 2000000000ull);
	from_ib(v, p, 60);
	assert_int_equal(v->res.v, FWD_V_TX);
	assert_memory_equal(v->res.tx[0].eth.hdr, h_mac, 6); /* 10.1.0.4's, not 10.1.0.3's */

	mk4(p, "10.2.0.2", "203.0.113.5", 17, 60, 64, false);
	from_ib_warmed(v, p, 60);
	assert_memory_equal(v->res.tx[0].eth.hdr, h_mac, 6);
	mk4(p, "10.2.0.2", "10.1.0.3", 17, 60, 64, false); /* same buffer, unwarmed */
	from_ib(v, p, 60);
	assert_int_equal(v->res.v, FWD_V_TX);
	assert_memory_equal(v->res.tx[0].eth.hdr, h3_mac, 6);

	mk4(p, "10.2.0.2", "203.0.113.5", 17, 60, 64, false);
	fwd_fast_burst(&v->c, ib, &ip, &l, 1, 0, NULL);
	mk4(p, "10.2.0.2", "10.1.0.3", 17, 60, 64, false); /* rewritten since */
	from_ib(v, p, 60);
	assert_int_equal(v->res.v, FWD_V_TX);
	assert_memory_equal(v->res.tx[0].eth.hdr, h3_mac, 6);
}

/* ---- the burst's stages against the pipeline alone ---- */

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (uint32_t)((rng >> 11) % n);
}

/*
 * A random packet, half of them forwardable: addresses from lists that
 * cover gateways (ECMP, resolved, unresolved), connected neighbours, the gateway's own
 * addresses, martians, multicast, broadcast and no route; TTL 0-2 or 64; lengths past
 * both MTUs; TCP SYNs (clamped); then, for one in four, a random header octet changed
 * (IHL, fragments, checksum, version, lengths). Returns its length in the buffer (link
 * padding past the IP length at times).
 */
static size_t rnd_packet(uint8_t *p)
{
	static const char *const src4[] = { "10.2.0.2",  "10.1.0.2",    "198.51.100.9", "0.0.0.0",
					    "127.0.0.1", "169.254.1.1", "224.0.0.1" };
	static const char *const dst4[] = { "10.1.0.2",     "10.1.0.3",    "10.2.0.2",
					    "198.51.100.7", "203.0.113.5", "10.1.0.77",
					    "192.0.2.1",    "10.1.0.1",    "255.255.255.255",
					    "224.0.0.5",    "8.8.8.8",     "10.2.0.1" };
	static const char *const src6[] = { "2001:db8:2::2", "2001:db8:1::2", "fe80::1", "::1",
					    "ff02::1" };
	static const char *const dst6[] = { "2001:db8:1::2",  "2001:db8:2::2", "2001:db8:ff::5",
					    "2001:db8:1::77", "2001:db8:1::1", "ff02::2",
					    "2001:db8:9::1",  "fe80::2" };
	static const size_t lens[] = { 28, 60, 64, 576, 1400, 1500, 1501, 2000, 2044, 2045 };
	size_t len = lens[rnd(2) ? rnd(4) : rnd(10)], pad = rnd(4) ? 0 : rnd(20);
	uint8_t ttl = rnd(6) ? 64 : (uint8_t)rnd(3);

	if (rnd(3)) {
		mk4(p, src4[rnd(2) ? 0 : rnd(7)], dst4[rnd(3) ? rnd(5) : rnd(12)], rnd(4) ? 17 : 6,
		    len, ttl, rnd(2));
		if (p[9] == 6) {
			p[20 + 13] = (uint8_t)(rnd(3) ? 0x10 : 0x02); /* ACK or SYN */
			p[20 + 12] = 0x50;
		}
		if (!rnd(4))
			p[20 + rnd(8)] ^= (uint8_t)(1 + rnd(255)); /* ports: another flow */
	} else {
		if (len < 48)
			len = 48;
		mk6(p, src6[rnd(2) ? 0 : rnd(5)], dst6[rnd(3) ? rnd(3) : rnd(8)], len, ttl);
		if (!rnd(6))
			p[6] = (uint8_t)(rnd(2) ? 58 : 0); /* ICMPv6 (ND at times) or hop-by-hop */
		if (p[6] == 58)
			p[40] = (uint8_t)(rnd(2) ? 128 : 133 + rnd(5));
	}
	if (!rnd(4))
		p[rnd(p[0] >> 4 == 4 ? 20 : 40)] ^= (uint8_t)(1 + rnd(255));
	memset(p + len, 0, pad);
	return len + pad;
}

/* The same frame: egress, header, bytes, where an IPoIB one goes. */
static void same_tx(const struct fwd_tx *a, const struct fwd_tx *b)
{
	assert_ptr_equal(a->ifp, b->ifp);
	if (a->ifp->kind == FWD_IF_ETH) {
		assert_int_equal(a->eth.hdr_len, b->eth.hdr_len);
		assert_memory_equal(a->eth.hdr, b->eth.hdr, a->eth.hdr_len);
		assert_int_equal(a->eth.len, b->eth.len);
		assert_memory_equal(a->eth.data, b->eth.data, a->eth.len);
		assert_int_equal(a->eth.gso.kind, b->eth.gso.kind);
		return;
	}
	assert_ptr_equal(a->ib.qp, b->ib.qp);
	assert_ptr_equal(a->ib.ah, b->ib.ah);
	assert_int_equal(a->ib.remote_qpn, b->ib.remote_qpn);
	assert_int_equal(a->ib.remote_qkey, b->ib.remote_qkey);
	assert_int_equal(a->ib.buf->len, b->ib.buf->len);
	assert_memory_equal(a->ib.buf->data, b->ib.buf->data, a->ib.buf->len);
}

/*
 * fwd_fast_burst against fwd_input_* alone, on 4,000 bursts of random packets from
 * both sides: each packet of a burst goes through the stages (and fwd_input_* when they
 * leave it), as the worker runs it, and a copy of it through fwd_input_* alone; the
 * verdict, the reason and every frame are the same. The stages must take a good part of
 * them (else the comparison says nothing), and none of the others.
 */
static void stages_match_pipeline(void **state)
{
	struct env *v = *state;
	struct rt_route r = { .source = RT_SRC_STATIC, .nnh = 1 };
	static uint8_t a[16][2200], b[16][2200];
	struct fwd_result ra;
	unsigned taken = 0, forwarded = 0, total = 0;

	/* 203.0.113.0/24 via IB, 192.0.2.0/24 via an unresolved gateway, an IPv6 route */
	r.prefix = pfx("203.0.113.0/24");
	r.nh[0] = (struct rt_nexthop){ .type = RT_NH_GATEWAY, .ifindex = v->ib };
	assert_int_equal(ip_addr_parse("10.2.0.2", &r.nh[0].gw), 0);
	assert_int_equal(rt_add(v->rt, &r), 0);
	r.prefix = pfx("192.0.2.0/24");
	r.nh[0].ifindex = v->eth;
	assert_int_equal(ip_addr_parse("10.1.0.9", &r.nh[0].gw), 0);
	assert_int_equal(rt_add(v->rt, &r), 0);
	r.prefix = pfx("2001:db8:ff::/48");
	assert_int_equal(ip_addr_parse("2001:db8:1::2", &r.nh[0].gw), 0);
	assert_int_equal(rt_add(v->rt, &r), 0);

	for (unsigned burst = 0; burst < 4000; burst++) {
		bool ib = burst & 1;
		const struct fwd_if *in;
		unsigned n = 1 + rnd(16);
		uint8_t *ip[16];
		size_t len[16], flen[16];
		struct ipoib_rx rx[16];
		struct fwd_tx tx[16];
		uint64_t done;

		/* now and then the ingress is down (one burst in 50) */
		assert_int_equal(fwd_engine_if_set_up(v->e, ib ? v->ib : v->eth, burst % 50 != 7),
				 0);
		fwd_ctx_begin(&v->c, 1000000000ull * (burst + 2)); /* ICMP limits refilled */
		in = fwd_snap_if(v->c.snap, ib ? v->ib : v->eth);
		for (unsigned i = 0; i < n; i++) {
			size_t l = rnd_packet(a[i] + 14);
			/* one in 20 with the link layer's type the other IP version's */
			bool v4 = (a[i][14] >> 4 == 4) != !rnd(20);

			if (ib) {
				rx[i] = (struct ipoib_rx){ .kind = v4 ? IPOIB_RX_IP4 : IPOIB_RX_IP6,
							   .data = a[i] + 14,
							   .len = l };
				ip[i] = fwd_ib_ip(&rx[i]); /* NULL: versions differ */
				len[i] = l;
			} else {
				memcpy(a[i], gw_mac, 6);
				memcpy(a[i] + 6, h_mac, 6);
				a[i][12] = v4 ? 0x08 : 0x86;
				a[i][13] = v4 ? 0x00 : 0xdd;
				flen[i] = l + 14;
				ip[i] = fwd_eth_ip(a[i], flen[i], ETHP_PKT_HOST, NULL, &len[i]);
			}
			memcpy(b[i], a[i], 14 + l);
		}
		done = fwd_fast_burst(&v->c, in, ip, len, n, 0, tx);
		for (unsigned i = 0; i < n; i++) {
			struct ipoib_rx rb = rx[i];
			uint16_t ip_id = v->c.ip_id; /* our ICMP errors' identification */

			fwd_ctx_scratch_reset(&v->c);
			if (done >> i & 1) {
				ra =
				    (struct fwd_result){ .v = FWD_V_TX, .n_tx = 1, .tx[0] = tx[i] };
				taken++;
			} else if (ib) {
				fwd_input_ib(&v->c, in, &rx[i], NULL, &ra);
			} else {
				fwd_input_eth(&v->c, in, a[i], flen[i], ETHP_PKT_HOST, NULL, &ra);
			}
			/* the copy, alone (scratch past the first's frames) */
			v->c.ip_id = ip_id;
			rb.data = b[i] + 14;
			if (ib)
				fwd_input_ib(&v->c, in, &rb, NULL, &v->res);
			else
				fwd_input_eth(&v->c, in, b[i], flen[i], ETHP_PKT_HOST, NULL,
					      &v->res);
			assert_int_equal(ra.v, v->res.v);
			if (ra.v == FWD_V_DROP)
				assert_int_equal(ra.drop, v->res.drop);
			if (ra.v == FWD_V_PUNT)
				assert_int_equal(ra.punt, v->res.punt);
			assert_int_equal(ra.n_tx, v->res.n_tx);
			for (unsigned k = 0; k < ra.n_tx; k++)
				same_tx(&ra.tx[k], &v->res.tx[k]);
			forwarded += v->res.v == FWD_V_TX;
			total++;
			release_ib(v);
			v->res = ra;
			release_ib(v);
		}
	}
	/* Over a quarter are forwarded (29%); the stages take half of those (the others
	 * are fragmented, clamped or sent back out of their ingress) and nothing else. */
	print_message("%u packets, %u forwarded, %u by the stages\n", total, forwarded, taken);
	assert_true(forwarded > total / 4);
	assert_true(taken > forwarded / 2);
	assert_true(taken <= forwarded);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(ib_to_eth_ipv4, setup, teardown),
		cmocka_unit_test_setup_teardown(eth_to_ib_ipv4, setup, teardown),
		cmocka_unit_test_setup_teardown(gso_eth_to_ib, setup, teardown),
		cmocka_unit_test_setup_teardown(ipv6_both_ways, setup, teardown),
		cmocka_unit_test_setup_teardown(ttl_expiry_sends_time_exceeded, setup, teardown),
		cmocka_unit_test_setup_teardown(df_too_big_sends_frag_needed, setup, teardown),
		cmocka_unit_test_setup_teardown(ipv6_too_big_sends_ptb, setup, teardown),
		cmocka_unit_test_setup_teardown(fragments_when_df_clear, setup, teardown),
		cmocka_unit_test_setup_teardown(mss_clamped_on_syn, setup, teardown),
		cmocka_unit_test_setup_teardown(martians_and_link_local_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(local_delivery_punts, setup, teardown),
		cmocka_unit_test_setup_teardown(unresolved_punts_with_next_hop, setup, teardown),
		cmocka_unit_test_setup_teardown(held_next_hop_keeps_order, setup, teardown),
		cmocka_unit_test_setup_teardown(held_set_full_refuses, setup, teardown),
		cmocka_unit_test_setup_teardown(no_route_sends_unreachable, setup, teardown),
		cmocka_unit_test_setup_teardown(dhcp_broadcast_punted_where_relayed, setup,
						teardown),
		cmocka_unit_test_setup_teardown(dhcp6_solicit_punted_where_relayed, setup,
						teardown),
		cmocka_unit_test_setup_teardown(multicast_punted_where_forwarded, setup, teardown),
		cmocka_unit_test_setup_teardown(tenants_have_own_tables, setup, teardown),
		cmocka_unit_test_setup_teardown(ecmp_spreads_and_sticks, setup, teardown),
		cmocka_unit_test_setup_teardown(snapshot_changes_are_seen, setup, teardown),
		cmocka_unit_test_setup_teardown(gateway_hint_follows_neighbour, setup, teardown),
		cmocka_unit_test_setup_teardown(warmed_route_only_its_own, setup, teardown),
		cmocka_unit_test_setup_teardown(stages_match_pipeline, setup, teardown),
		cmocka_unit_test_setup_teardown(gro_wanted_toward_gso_ethernet_only, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
