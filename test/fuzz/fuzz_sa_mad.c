/*
 * libFuzzer harness for every SA MAD decoder, reached the way real MADs reach them:
 * through sa_client_input on a client that has one query of each kind pending (a
 * PathRecord Get, an MCMemberRecord join, four InformInfo subscriptions, the
 * ClassPortInfo probe, a router poll -- PortInfoRecord GetTable -- and, queued behind
 * them, an off-subnet PathRecord whose answer teaches a router). The input's first octet picks a pending request whose TID is
 * spliced into the MAD (bit 7 set), so responses get past TID matching and into the
 * record decoders; the rest is the MAD, any length. Reports, short, cut and mismatched
 * MADs take the other paths. The client is freed each run (leaks are caught), and the
 * codecs are also called directly on the raw input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sm-client/sa.h"
#include "sm-client/sa_mad.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fz {
	uint8_t sent[16][256];
	unsigned n;
	uint64_t now;
};

static int fz_send(void *ctx, const uint8_t *mad, size_t len, const struct sa_dest *d)
{
	struct fz *f = ctx;

	(void)d;
	if (f->n < 16 && len == 256)
		memcpy(f->sent[f->n++], mad, 256);
	return 0;
}

static uint64_t fz_now(void *ctx)
{
	return ((struct fz *)ctx)->now;
}

static const struct sa_transport_ops ops = { .send = fz_send };

static void nop_path(void *arg, int status, const struct sa_path *p)
{
	(void)arg;
	(void)status;
	(void)p;
}

static void nop_join(void *arg, int status, const struct sa_mcast_group *g)
{
	(void)arg;
	(void)status;
	(void)g;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = { .now = 1000 };
	struct sa_client_config cfg = { .ops = &ops, .now_ms = fz_now, .seed = 1 };
	struct sa_port_info pi = { .lid = 4,
				   .sm_lid = 1,
				   .state = SA_PORT_ACTIVE,
				   .subnet_timeout = 8,
				   .gid_prefix = 0xfe80000000000000ull,
				   .port_guid = 0x0002c90300a10003ull };
	struct sa_mcast_params mp = { .join_state = SA_JOIN_FULL, .create = true };
	struct sa_path_query q = { 0 };
	struct sa_client *c;
	uint8_t mad[4096];
	size_t len;

	/* Direct decoder calls on the raw bytes. */
	{
		struct sa_hdr h;
		struct sa_path_rec pr;
		struct sa_mcm_rec mr;
		struct sa_inform_info ii;
		struct sa_notice n;
		struct sa_class_port_info cpi;
		size_t stride;
		unsigned count;
		bool trunc;

		if (sa_hdr_decode(data, size, &h) == 0)
			sa_records(&h, size, 64, &stride, &count, &trunc);
		sa_path_rec_decode(data, size, &pr);
		sa_mcm_rec_decode(data, size, &mr);
		sa_inform_info_decode(data, size, &ii);
		sa_notice_decode(data, size, &n);
		sa_class_port_info_decode(data, size, &cpi);
	}
	if (size < 1)
		return 0;
	cfg.ops_ctx = &f;
	cfg.now_ctx = &f;
	if (sa_client_new(&cfg, &c))
		return 0;
	sa_client_set_port(c, &pi);
	ib_gid_set(&q.dgid, 0xfe80000000000000ull, 0x0002c90300a10007ull);
	sa_path_resolve(c, &q, nop_path, NULL);
	sa_ipoib_bcast_mgid(0xffff, &mp.mgid);
	sa_mcast_join(c, &mp, nop_join, NULL);
	sa_subscribe_traps(c);
	sa_router_watch(c, 3);
	ib_gid_set(&q.dgid, 0xfec0000000000001ull, 0x1234);
	sa_path_resolve(c, &q, nop_path, NULL);

	len = size - 1 < sizeof(mad) ? size - 1 : sizeof(mad);
	memcpy(mad, data + 1, len);
	if ((data[0] & 0x80) && f.n && len >= 16) {
		const uint8_t *req = f.sent[(data[0] & 0x7f) % f.n];

		memcpy(mad + 8, req + 8, 8); /* TID */
		if ((data[0] & 0x40) && len >= 18)
			memcpy(mad + 16, req + 16, 2); /* attribute */
	}
	sa_client_input(c, mad, len);
	/* A second copy (duplicate answer), then time passes (retries, timeouts, the
	 * next router poll), and the same MAD once more against what is pending then. */
	sa_client_input(c, mad, len);
	f.now += 100000;
	sa_client_tick(c);
	if ((data[0] & 0x80) && f.n && len >= 16) {
		memcpy(mad + 8, f.sent[f.n - 1] + 8, 8);
		sa_client_input(c, mad, len);
	}
	sa_client_free(c);
	return 0;
}
