/*
 * engine/capture: the records as pcap readers take them (header fields, data, snaplen),
 * directions, libpcap filters on both link types (the IPoIB packet behind its made-up
 * Ethernet header, and put back as it was), a ring that fills up (drops counted, room
 * again once read), records across the ring's wrap, time order across workers, one
 * capture per interface, and an interface removed under a capture.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <pcap/pcap.h>

#include "engine/capture.h"
#include "engine/engine.h"
#include "lib/ib_bytes.h"
#include "port/eth_port.h"

static int dummy_port;
static const struct ibp_ops fake_ib = { .name = "fake" };
static const uint8_t gw_mac[6] = { 2, 0, 0, 0, 0, 1 };

struct env {
	struct rt_table *rt;
	struct fwd_engine *e;
	struct neigh_table *ibn;
	uint32_t eth, ib;
	uint8_t out[1 << 20];
};

static void nsol(void *c, const struct neigh_entry *e, const struct neigh_link *l)
{
	(void)c, (void)e, (void)l;
}
static void nxmit(void *c, const struct neigh_entry *e, const struct neigh_link *l, void *p)
{
	(void)c, (void)e, (void)l, (void)p;
}
static void ndrop(void *c, void *p)
{
	(void)c, (void)p;
}
static const struct neigh_ops nops = { .solicit = nsol, .xmit = nxmit, .drop = ndrop };

static int setup(void **state)
{
	struct env *v = calloc(1, sizeof(*v));
	struct rt_config rc = { 0 };
	struct fwd_engine_config ec = { .n_workers = 2, .flow_seed = 7 };
	struct neigh_config nc = { .ops = &nops };
	struct fwd_if_config ei = { .name = "eth0",
				    .kind = FWD_IF_ETH,
				    .mtu = 1500,
				    .eth_ops = &ethp_afpacket_ops,
				    .eth = (struct ethp_port *)&dummy_port,
				    .mac = gw_mac };
	struct fwd_if_config ii = { .name = "ib0",
				    .kind = FWD_IF_IPOIB,
				    .mtu = 2044,
				    .ib_ops = &fake_ib,
				    .ib_port = (struct ibp_port *)&dummy_port };

	assert_non_null(v);
	assert_int_equal(rt_create(&v->rt, &rc), 0);
	ec.rt = v->rt;
	assert_int_equal(fwd_engine_new(&ec, &v->e), 0);
	assert_int_equal(neigh_table_new(&nc, &v->ibn), 0);
	ii.neigh = v->ibn;
	assert_int_equal(fwd_engine_if_add(v->e, &ei, &v->eth), 0);
	assert_int_equal(fwd_engine_if_add(v->e, &ii, &v->ib), 0);
	*state = v;
	return 0;
}

static int teardown(void **state)
{
	struct env *v = *state;

	fwd_engine_free(v->e);
	neigh_table_free(v->ibn);
	rt_destroy(v->rt);
	free(v);
	return 0;
}

/* An Ethernet frame carrying an IPv4 packet of protocol proto, len octets in all. */
static size_t eth_frame(uint8_t *f, size_t len, uint8_t proto)
{
	memset(f, 0, len);
	memcpy(f, gw_mac, 6);
	f[12] = 0x08;
	f[14] = 0x45;
	f[16] = (uint8_t)((len - 14) >> 8);
	f[17] = (uint8_t)(len - 14);
	f[22] = 64;
	f[23] = proto;
	for (size_t i = 34; i < len; i++)
		f[i] = (uint8_t)i;
	return len;
}

static struct bpf_program compile(const char *expr)
{
	pcap_t *p = pcap_open_dead(DLT_EN10MB, 65535);
	struct bpf_program prog;

	assert_non_null(p);
	assert_int_equal(pcap_compile(p, &prog, expr, 1, PCAP_NETMASK_UNKNOWN), 0);
	pcap_close(p);
	return prog;
}

static void test_records(void **state)
{
	struct env *v = *state;
	struct fwd_capture_config cfg = { .ifindex = v->eth,
					  .dirs = FWD_CAPTURE_RX | FWD_CAPTURE_TX,
					  .snaplen = 100 };
	struct fwd_capture *c, *c2;
	struct fwd_capture_stats st;
	uint8_t f[300];
	uint64_t n;
	size_t len;

	assert_int_equal(fwd_capture_start(v->e, &cfg, &c), 0);
	assert_int_equal(fwd_capture_linktype(c), FWD_CAPTURE_LINKTYPE_ETHERNET);
	assert_int_equal(fwd_capture_start(v->e, &cfg, &c2), -EBUSY); /* one at a time */
	eth_frame(f, 60, 1);
	/* A sent frame in two pieces (header, data), then a received 300-octet one. */
	fwd_capture_packet(c, 0, FWD_CAPTURE_TX, NULL, 0, f, 14, f + 14, 46);
	eth_frame(f, 300, 17);
	fwd_capture_packet(c, 0, FWD_CAPTURE_RX, NULL, 0, f, 300, NULL, 0);
	len = fwd_capture_read(c, v->out, sizeof(v->out), UINT64_MAX, &n);
	assert_int_equal(n, 2);
	assert_int_equal(len, 16 + 60 + 16 + 100);
	assert_int_equal(ib_get_le32(v->out + 8), 60);  /* incl_len */
	assert_int_equal(ib_get_le32(v->out + 12), 60); /* orig_len */
	assert_true(ib_get_le32(v->out) > 1700000000);  /* seconds since the epoch */
	assert_true(ib_get_le32(v->out + 4) < 1000000); /* microseconds */
	eth_frame(f, 60, 1);
	assert_memory_equal(v->out + 16, f, 60);
	assert_int_equal(ib_get_le32(v->out + 76 + 8), 100);  /* cut at snaplen */
	assert_int_equal(ib_get_le32(v->out + 76 + 12), 300); /* its length kept */
	eth_frame(f, 300, 17);
	assert_memory_equal(v->out + 76 + 16, f, 100);
	assert_int_equal(fwd_capture_read(c, v->out, sizeof(v->out), UINT64_MAX, &n), 0);
	assert_int_equal(n, 0);
	fwd_capture_stats(c, &st);
	assert_int_equal(st.matched, 2);
	fwd_capture_stop(v->e, c);
	/* Free again; only the asked direction now. */
	cfg.dirs = FWD_CAPTURE_TX;
	assert_int_equal(fwd_capture_start(v->e, &cfg, &c), 0);
	fwd_capture_packet(c, 1, FWD_CAPTURE_RX, NULL, 0, f, 60, NULL, 0);
	fwd_capture_packet(c, 1, FWD_CAPTURE_TX, NULL, 0, f, 60, NULL, 0);
	fwd_capture_read(c, v->out, sizeof(v->out), UINT64_MAX, &n);
	assert_int_equal(n, 1);
	/* At most max_packets records per read. */
	for (int i = 0; i < 3; i++)
		fwd_capture_packet(c, 0, FWD_CAPTURE_TX, NULL, 0, f, 60, NULL, 0);
	fwd_capture_read(c, v->out, sizeof(v->out), 2, &n);
	assert_int_equal(n, 2);
	fwd_capture_read(c, v->out, sizeof(v->out), 2, &n);
	assert_int_equal(n, 1);
	fwd_capture_stop(v->e, c);
}

static void test_filters(void **state)
{
	struct env *v = *state;
	struct bpf_program prog = compile("icmp");
	struct fwd_capture_config cfg = { .ifindex = v->eth,
					  .dirs = FWD_CAPTURE_RX,
					  .snaplen = 65535,
					  .filter = prog.bf_insns,
					  .filter_len = prog.bf_len };
	struct fwd_capture *c;
	struct fwd_capture_stats st;
	uint8_t f[100], pre[40] = { 0x60 }, ib[84], want[84];
	uint64_t n;

	assert_int_equal(fwd_capture_start(v->e, &cfg, &c), 0);
	eth_frame(f, 100, 1); /* ICMP */
	fwd_capture_packet(c, 0, FWD_CAPTURE_RX, NULL, 0, f, 100, NULL, 0);
	eth_frame(f, 100, 17); /* UDP */
	fwd_capture_packet(c, 0, FWD_CAPTURE_RX, NULL, 0, f, 100, NULL, 0);
	fwd_capture_read(c, v->out, sizeof(v->out), UINT64_MAX, &n);
	assert_int_equal(n, 1);
	assert_int_equal(v->out[16 + 23], 1);
	fwd_capture_stats(c, &st);
	assert_int_equal(st.filtered, 1);
	fwd_capture_stop(v->e, c);

	/* IPoIB: the same filter, on the packet behind the 40-octet address block and the
	 * 4-octet IPoIB header; the record keeps both as they were. */
	cfg.ifindex = v->ib;
	assert_int_equal(fwd_capture_start(v->e, &cfg, &c), 0);
	assert_int_equal(fwd_capture_linktype(c), FWD_CAPTURE_LINKTYPE_IPOIB);
	for (int i = 1; i < 40; i++)
		pre[i] = (uint8_t)(0xa0 + i);
	eth_frame(f, 100, 1);
	ib[0] = 0x08, ib[1] = 0x00, ib[2] = 0, ib[3] = 0;
	memcpy(ib + 4, f + 14, 80);
	memcpy(want, ib, sizeof(ib));
	fwd_capture_packet(c, 1, FWD_CAPTURE_RX, pre, 40, ib, 84, NULL, 0);
	ib[4 + 9] = 17; /* UDP: refused */
	fwd_capture_packet(c, 1, FWD_CAPTURE_RX, pre, 40, ib, 84, NULL, 0);
	ib[0] = 0x86, ib[1] = 0xdd; /* not IPv4 at all: refused */
	fwd_capture_packet(c, 1, FWD_CAPTURE_RX, pre, 40, ib, 84, NULL, 0);
	fwd_capture_read(c, v->out, sizeof(v->out), UINT64_MAX, &n);
	assert_int_equal(n, 1);
	assert_int_equal(ib_get_le32(v->out + 8), 124);
	assert_memory_equal(v->out + 16, pre, 40);
	assert_memory_equal(v->out + 56, want, 84);
	fwd_capture_stats(c, &st);
	assert_int_equal(st.filtered, 2);
	fwd_capture_stop(v->e, c);
	pcap_freecode(&prog);
}

/* The smallest ring (128 KiB) with 40,000-octet records: the fourth does not fit until
 * some are read; records then wrap around the end and come out whole, in order. */
static void test_ring_full_and_wrap(void **state)
{
	struct env *v = *state;
	struct fwd_capture_config cfg = {
		.ifindex = v->eth, .dirs = FWD_CAPTURE_RX, .snaplen = 65535, .ring_bytes = 1
	};
	static uint8_t f[40000];
	struct fwd_capture *c;
	struct fwd_capture_stats st;
	uint64_t n, seq = 0, want = 0;

	assert_int_equal(fwd_capture_start(v->e, &cfg, &c), 0);
	for (int i = 0; i < 4; i++) {
		f[20] = (uint8_t)seq++;
		fwd_capture_packet(c, 0, FWD_CAPTURE_RX, NULL, 0, f, sizeof(f), NULL, 0);
	}
	fwd_capture_stats(c, &st);
	assert_int_equal(st.matched, 3);
	assert_int_equal(st.dropped, 1);
	for (int round = 0; round < 20; round++) {
		size_t off = 0, len = fwd_capture_read(c, v->out, sizeof(v->out), 2, &n);

		assert_int_equal(len, n * (16 + sizeof(f)));
		for (uint64_t k = 0; k < n; k++, off += 16 + sizeof(f)) {
			assert_int_equal(ib_get_le32(v->out + off + 8), sizeof(f));
			assert_int_equal(v->out[off + 16 + 20], (uint8_t)want++);
			if (want == 3)
				want = 4; /* the dropped one */
		}
		for (int i = 0; i < 2; i++) {
			f[20] = (uint8_t)seq++;
			fwd_capture_packet(c, 0, FWD_CAPTURE_RX, NULL, 0, f, sizeof(f), NULL, 0);
		}
	}
	fwd_capture_stats(c, &st);
	assert_int_equal(st.dropped, 1); /* reading kept room for every later pair */
	fwd_capture_stop(v->e, c);
}

/* Records of several workers come out oldest first. */
static void test_time_order(void **state)
{
	struct env *v = *state;
	struct fwd_capture_config cfg = { .ifindex = v->eth,
					  .dirs = FWD_CAPTURE_RX,
					  .snaplen = 64 };
	struct fwd_capture *c;
	uint8_t f[60] = { 0 };
	uint64_t n;
	struct timespec pause = { 0, 2000000 };

	assert_int_equal(fwd_capture_start(v->e, &cfg, &c), 0);
	for (int i = 0; i < 6; i++) {
		f[20] = (uint8_t)i;
		fwd_capture_packet(c, (unsigned)(5 - i) % 3, FWD_CAPTURE_RX, NULL, 0, f, 60, NULL,
				   0);
		nanosleep(&pause, NULL); /* microsecond stamps: keep them apart */
	}
	assert_int_equal(fwd_capture_read(c, v->out, sizeof(v->out), UINT64_MAX, &n),
			 6 * (16 + 60));
	for (int i = 0; i < 6; i++)
		assert_int_equal(v->out[i * 76 + 16 + 20], i);
	/* A worker number out of range is ignored, not written past the rings. */
	fwd_capture_packet(c, FWD_WORKERS_MAX, FWD_CAPTURE_RX, NULL, 0, f, 60, NULL, 0);
	fwd_capture_read(c, v->out, sizeof(v->out), UINT64_MAX, &n);
	assert_int_equal(n, 0);
	fwd_capture_stop(v->e, c);
}

static void test_refusals_and_removal(void **state)
{
	struct env *v = *state;
	struct fwd_capture_config cfg = { .ifindex = 30, .dirs = FWD_CAPTURE_RX, .snaplen = 64 };
	struct fwd_if_config ei = { .kind = FWD_IF_ETH,
				    .mtu = 1500,
				    .eth_ops = &ethp_afpacket_ops,
				    .eth = (struct ethp_port *)&dummy_port,
				    .mac = gw_mac };
	struct fwd_capture *c, *c2;
	uint32_t idx;

	assert_int_equal(fwd_capture_start(v->e, &cfg, &c), -ENODEV);
	cfg.ifindex = v->eth;
	cfg.dirs = 0;
	assert_int_equal(fwd_capture_start(v->e, &cfg, &c), -EINVAL);
	cfg.dirs = FWD_CAPTURE_RX;
	cfg.snaplen = 0;
	assert_int_equal(fwd_capture_start(v->e, &cfg, &c), -EINVAL);
	cfg.snaplen = 64;
	/* The interface goes: the capture is no longer reachable from the workers, and a
	 * new interface given its index starts without it (not -EBUSY). */
	assert_int_equal(fwd_capture_start(v->e, &cfg, &c), 0);
	assert_int_equal(fwd_engine_if_del(v->e, v->eth), 0);
	assert_int_equal(fwd_capture_start(v->e, &cfg, &c2), -ENODEV);
	ei.name = "eth1";
	assert_int_equal(fwd_engine_if_add(v->e, &ei, &idx), 0);
	assert_int_equal(idx, v->eth);
	assert_int_equal(fwd_capture_start(v->e, &cfg, &c2), 0);
	fwd_capture_stop(v->e, c); /* the old one's stop leaves the new one in place */
	assert_int_equal(fwd_capture_start(v->e, &cfg, &c), -EBUSY);
	fwd_capture_stop(v->e, c2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_filters, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ring_full_and_wrap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_time_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals_and_removal, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
