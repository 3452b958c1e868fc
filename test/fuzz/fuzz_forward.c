/*
 * libFuzzer harness for engine/forward: arbitrary input from either side (first octet
 * chooses Ethernet or IPoIB and the frame's packet type) through the pipeline against a
 * fixed small engine (one Ethernet and one IPoIB interface, addresses, their connected
 * routes, one neighbour each side, routes via gateways on both sides -- one gateway
 * unresolved -- so that the next hops' neighbour hints are in play), through the
 * burst's stages (fwd_fast_burst) first as the worker does, and fwd_input_* for what
 * they leave. A packet the stages take goes through fwd_input_* alone too, from a copy
 * of the input, and must come out as the same frame. An unresolved punt holds its next hop
 * as the worker's does (fwd_held_add), and an input whose first octet has its top bit
 * set gives the oldest hold back first (fwd_held_done), so that the held path runs too.
 * An IPoIB input may come as a packet the worker's receive coalescing merged (GSO
 * metadata with it), and fwd_gro_wanted is asked of every IPoIB IP packet.
 * Never crashes; every input ends forwarded, punted or dropped with a named reason;
 * every frame sent is within the egress MTU.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/forward.h"
#include "ipoib/ipoib_link.h"
#include "pkt/eth_frame.h"
#include "table/route.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static uint8_t pool[64][4200];
static struct ibp_buf bufs[64];
static unsigned nfree;
static struct ibp_buf *freel[64];
static struct ibp_buf *bget(struct ibp_port *p)
{
	(void)p;
	return nfree ? freel[--nfree] : NULL;
}
static void bput(struct ibp_port *p, struct ibp_buf *b)
{
	(void)p;
	freel[nfree++] = b;
}
static const struct ibp_ops ib = { .name = "fuzz", .buf_get = bget, .buf_put = bput };
static int dummy;
static struct fwd_engine *eng;
static struct fwd_ctx ctx;
static struct fwd_result res;
static uint32_t ieth, iib;
static struct {
	uint32_t ifindex;
	int family;
	uint8_t nh[16];
} held[64];
static unsigned nheld;

static void nsol(void *c, const struct neigh_entry *e, const struct neigh_link *l)
{
	(void)c, (void)e, (void)l;
}
static void nx(void *c, const struct neigh_entry *e, const struct neigh_link *l, void *p)
{
	(void)c, (void)e, (void)l, (void)p;
}
static void nd(void *c, void *p)
{
	(void)c, (void)p;
}
static const struct neigh_ops nops = { .solicit = nsol, .xmit = nx, .drop = nd };

static void init(void)
{
	static const uint8_t mac[6] = { 2, 0, 0, 0, 0, 1 };
	struct rt_table *rt;
	struct rt_config rc = { 0 };
	struct fwd_engine_config ec = { .n_workers = 1, .flow_seed = 1 };
	struct neigh_config nc = { .ops = &nops };
	struct neigh_table *ibn;
	struct fwd_if_config e = { .name = "eth",
				   .kind = FWD_IF_ETH,
				   .mtu = 1500,
				   .eth_ops = &ethp_afpacket_ops,
				   .eth = (void *)&dummy,
				   .mac = mac };
	struct fwd_if_config i = { .name = "ib",
				   .kind = FWD_IF_IPOIB,
				   .mtu = 2044,
				   .ib_ops = &ib,
				   .ib_port = (void *)&dummy };
	struct ipoib_hwaddr hw = { .qpn = 2 };
	struct ip_prefix p;
	struct neigh_link le = { .len = 6, .usable = true, .addr = { 2, 0, 0, 0, 0, 2 } };
	struct neigh_link li = {
		.len = 20, .usable = true, .ah = (void *)1, .qpn = 9, .mtu = 2044
	};
	uint8_t a1[4] = { 10, 1, 0, 2 }, a2[4] = { 10, 2, 0, 2 };
	uint8_t b1[16] = { 0x20, 1, 0xd, 0xb8, 0, 1, [15] = 2 },
		b2[16] = { 0x20, 1, 0xd, 0xb8, 0, 2, [15] = 2 };

	for (unsigned k = 0; k < 64; k++) {
		bufs[k] = (struct ibp_buf){ .data = pool[k], .cap = 4200, .id = k };
		freel[nfree++] = &bufs[k];
	}
	check(rt_create(&rt, &rc) == 0);
	ec.rt = rt;
	check(fwd_engine_new(&ec, &eng) == 0);
	check(neigh_table_new(&nc, &ibn) == 0);
	i.neigh = ibn;
	check(fwd_engine_if_add(eng, &e, &ieth) == 0);
	check(fwd_engine_if_add(eng, &i, &iib) == 0);
	fwd_engine_if_set_up(eng, ieth, true);
	fwd_engine_if_set_ipoib(eng, iib, (void *)&dummy, 0xb1b, &hw, 2044);
	ip_prefix_parse("10.1.0.1/24", true, &p), fwd_engine_if_add_addr(eng, ieth, &p);
	ip_prefix_parse("2001:db8:1::1/64", true, &p), fwd_engine_if_add_addr(eng, ieth, &p);
	ip_prefix_parse("10.2.0.1/24", true, &p), fwd_engine_if_add_addr(eng, iib, &p);
	ip_prefix_parse("2001:db8:2::1/64", true, &p), fwd_engine_if_add_addr(eng, iib, &p);
	{
		const struct fwd_if *f = fwd_snap_if(fwd_engine_current(eng), ieth);

		neigh_update(f->neigh, AF_INET, a1, &le, NEIGH_F_CREATE | NEIGH_F_ADMIN);
		neigh_update(f->neigh, AF_INET6, b1, &le, NEIGH_F_CREATE | NEIGH_F_ADMIN);
	}
	neigh_update(ibn, AF_INET, a2, &li, NEIGH_F_CREATE | NEIGH_F_ADMIN);
	neigh_update(ibn, AF_INET6, b2, &li, NEIGH_F_CREATE | NEIGH_F_ADMIN);
	{
		static const struct {
			const char *pfx, *gw;
			int eth;
		} gws[] = {
			{ "198.51.100.0/24", "10.1.0.2", 1 },
			{ "203.0.113.0/24", "10.2.0.2", 0 },
			{ "192.0.2.0/24", "10.1.0.9", 1 }, /* no neighbour: punted */
			{ "2001:db8:ff::/48", "2001:db8:1::2", 1 },
			{ "2001:db8:fe::/48", "2001:db8:2::2", 0 },
		};

		for (unsigned k = 0; k < sizeof(gws) / sizeof(gws[0]); k++) {
			struct rt_route r = { .source = RT_SRC_STATIC, .nnh = 1 };

			check(ip_prefix_parse(gws[k].pfx, true, &r.prefix) == 0);
			r.nh[0].type = RT_NH_GATEWAY;
			r.nh[0].ifindex = gws[k].eth ? ieth : iib;
			check(ip_addr_parse(gws[k].gw, &r.nh[0].gw) == 0);
			check(rt_add(rt, &r) == 0);
		}
	}
	check(fwd_ctx_init(&ctx, eng, 0) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[70000], copy[70000];
	static uint64_t t;
	struct fwd_tx ftx;
	uint64_t done;

	if (!eng)
		init();
	if (size < 1 || size - 1 > sizeof(buf))
		return 0;
	memcpy(buf, data + 1, size - 1);
	memcpy(copy, buf, size - 1);
	if ((data[0] & 0x80) && nheld) {
		fwd_held_done(&ctx, held[0].ifindex, held[0].family, held[0].nh);
		memmove(&held[0], &held[1], sizeof(held[0]) * --nheld);
	}
	fwd_ctx_begin(&ctx, t += 1000000);
	fwd_ctx_scratch_reset(&ctx);
	if (data[0] & 1) {
		struct ipoib_rx rx;
		size_t iplen = 0;
		uint8_t *ip = NULL;
		/* Bit 2: as a packet the worker merged (its GSO metadata; gso_plan checks
		 * the headers again): not a candidate for the stages, as in the worker. */
		struct gso_pkt g = { GSO_TCP, (uint16_t)(536 + data[0]) };
		const struct fwd_if *in = fwd_snap_if(ctx.snap, iib);

		ipoib_rx_classify(buf, size - 1, data[0] & 2, &rx);
		if (!(data[0] & 4) && (ip = fwd_ib_ip(&rx)))
			iplen = rx.len;
		if (rx.kind == IPOIB_RX_IP4 || rx.kind == IPOIB_RX_IP6)
			(void)fwd_gro_wanted(&ctx, in, rx.data, rx.len);
		/* Bit 3: one the receive coalescing would merge with its neighbours. */
		done = fwd_fast_burst(&ctx, in, &ip, &iplen, 1, (data[0] >> 3) & 1, &ftx);
		if (done) {
			ipoib_rx_classify(copy, size - 1, data[0] & 2, &rx);
			fwd_input_ib(&ctx, in, &rx, NULL, &res);
		} else {
			fwd_input_ib(&ctx, in, &rx, (data[0] & 4) ? &g : NULL, &res);
		}
	} else {
		size_t iplen = 0;
		uint8_t pkttype = (data[0] >> 1) & 3;
		const struct fwd_if *in = fwd_snap_if(ctx.snap, ieth);
		uint8_t *ip = fwd_eth_ip(buf, size - 1, pkttype, NULL, &iplen);

		done = fwd_fast_burst(&ctx, in, &ip, &iplen, 1, 0, &ftx);
		fwd_input_eth(&ctx, in, done ? copy : buf, size - 1, pkttype, NULL, &res);
	}
	/* Taken by the stages: the pipeline alone, on the untouched copy, sends the same
	 * frame (the stages' verdict is never another one). */
	if (done) {
		check(res.v == FWD_V_TX && res.n_tx == 1 && res.tx[0].ifp == ftx.ifp);
		if (ftx.ifp->kind == FWD_IF_ETH) {
			check(!memcmp(ftx.eth.hdr, res.tx[0].eth.hdr, ETHF_HLEN) &&
			      ftx.eth.hdr_len == res.tx[0].eth.hdr_len &&
			      ftx.eth.len == res.tx[0].eth.len && !ftx.eth.gso.kind &&
			      !res.tx[0].eth.gso.kind &&
			      !memcmp(ftx.eth.data, res.tx[0].eth.data, ftx.eth.len));
		} else {
			const struct ibp_send *a = &ftx.ib, *b = &res.tx[0].ib;

			check(a->qp == b->qp && a->ah == b->ah && a->remote_qpn == b->remote_qpn &&
			      a->remote_qkey == b->remote_qkey && a->buf->len == b->buf->len &&
			      !memcmp(a->buf->data, b->buf->data, a->buf->len));
			bput(NULL, a->buf);
		}
	}
	check(res.v == FWD_V_TX || res.v == FWD_V_PUNT || res.drop < FWD_DROP_COUNT ||
	      (res.v == FWD_V_DROP && res.n_tx == 0));
	check(res.v != FWD_V_TX || res.n_tx > 0);
	if (res.v == FWD_V_PUNT)
		check(res.punt < FWD_PUNT_COUNT && res.punt_len <= size);
	if (res.v == FWD_V_PUNT && res.punt == FWD_PUNT_UNRESOLVED && nheld < 64 &&
	    fwd_held_add(&ctx, res.punt_if->index, res.punt_family, res.punt_nh)) {
		held[nheld].ifindex = res.punt_if->index;
		held[nheld].family = res.punt_family;
		memcpy(held[nheld++].nh, res.punt_nh, 16);
	}
	check(ctx.held.n <= nheld);
	for (unsigned k = 0; k < res.n_tx; k++) {
		const struct fwd_tx *x = &res.tx[k];

		if (x->ifp->kind == FWD_IF_ETH) {
			check(x->eth.len <= x->ifp->mtu);
		} else {
			check(x->ib.buf->len <= 2044 + 4);
			bput(NULL, x->ib.buf);
		}
	}
	fwd_count(&ctx, &res);
	return 0;
}
