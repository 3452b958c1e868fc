/*
 * libFuzzer harness for the CM: the MAD decoder (decode -> encode -> decode must
 * give the same message), the IPoIB private-data decoder, and cm_input /
 * cm_input_orphan on an instance holding connections in several states (established
 * active and passive, REQ sent, REP sent, MRA sent, timewait), so a hostile MAD meets
 * every state's handler. The first input octet picks the sender LID and whether a GRH
 * came with it; the rest is the MAD (short and long inputs reach the length checks).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cm/cm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t t_now = 1000;
static uint32_t next_qpn = 0x100;
static uint8_t last_tx[IB_MAD_LEN];

static uint64_t clk(void *ctx)
{
	(void)ctx;
	return t_now;
}

static int tx(void *ctx, const struct cm_addr *to, const uint8_t *mad, size_t len)
{
	(void)ctx;
	(void)to;
	if (len != IB_MAD_LEN)
		abort();
	memcpy(last_tx, mad, len);
	return 0;
}

static int defer;

static int qp_create(void *ctx, const struct cm_conn_info *c, void **qp, uint32_t *qpn)
{
	(void)ctx;
	(void)c;
	if (defer)
		return -EINPROGRESS;
	*qpn = next_qpn++ & 0xffffff;
	*qp = NULL;
	return 0;
}

static int qp_connect(void *ctx, void *qp, const struct ibp_qp_connect *c)
{
	(void)ctx;
	(void)qp;
	(void)c;
	return 0;
}

static const struct cm_transport_ops tops = { .send = tx };
static const struct cm_callbacks cbs = { .qp_create = qp_create, .qp_connect = qp_connect };

static struct ipoib_hwaddr peer(uint8_t last, uint32_t qpn)
{
	struct ipoib_hwaddr h = { .flags = IPOIB_HWADDR_F_RC, .qpn = qpn };

	ib_gid_set(&h.gid, IB_GID_LINK_LOCAL_PREFIX, 0x0002c90300000000ull | last);
	return h;
}

/* A REQ from peer p to us (UD QPN 0x48), as the fuzzed instance will meet it. */
static void feed_req(struct cm *cm, const struct ipoib_hwaddr *p, uint32_t lcid)
{
	struct cm_msg m = { .attr_id = CM_ATTR_REQ, .method = IB_MAD_METHOD_SEND, .tid = lcid };
	struct cm_ipoib_pdata pd = { .ud_qpn = p->qpn, .rx_mtu = 65524 };
	struct cm_addr from = { .lid = 9 };
	uint8_t b[IB_MAD_LEN];

	m.req.local_comm_id = lcid;
	m.req.service_id = cm_ipoib_service_id(0x48);
	m.req.local_qpn = 0x500 + lcid;
	m.req.path_mtu = IB_MTU_2048;
	m.req.primary.local_gid = p->gid;
	m.req.primary.subnet_local = true;
	cm_ipoib_pdata_encode(&pd, m.req.private_data);
	cm_mad_encode(&m, b, sizeof(b));
	cm_input(cm, b, sizeof(b), &from);
}

static struct cm *make_cm(void)
{
	struct cm_config cfg = {
		.local = peer(0x50, 0x48),
		.lid = 4,
		.response_timeout = 12,
		.max_cm_retries = 2,
		.timewait_ms = 50,
		.transport = &tops,
		.cb = &cbs,
		.now_ms = clk,
		.seed = 7,
		.comm_id_tag = 0x11, /* IDs 0x11xxxxxx: reachable by the fuzzer's bytes */
	};
	struct cm_path_info path = { .slid = 4, .dlid = 9, .mtu = IB_MTU_2048, .pkey = 0xffff };
	struct cm *cm;
	struct ipoib_hwaddr p;
	uint8_t rep[IB_MAD_LEN];
	struct cm_msg m;
	struct cm_addr from = { .lid = 9 };

	if (cm_new(&cfg, &cm) < 0)
		abort();
	/* active, REQ sent (to 0x49), then REP'd into established */
	p = peer(0x60, 0x49);
	cm_connect(cm, &p, &path);
	if (cm_mad_decode(last_tx, IB_MAD_LEN, &m) != CM_MAD_OK)
		abort();
	{
		uint32_t lcid = m.req.local_comm_id;
		struct cm_ipoib_pdata pd = { .ud_qpn = 0x49, .rx_mtu = 4096 };

		memset(&m, 0, sizeof(m));
		m.attr_id = CM_ATTR_REP;
		m.method = IB_MAD_METHOD_SEND;
		m.rep.local_comm_id = 0x22000001;
		m.rep.remote_comm_id = lcid;
		m.rep.local_qpn = 0x777;
		cm_ipoib_pdata_encode(&pd, m.rep.private_data);
	}
	cm_mad_encode(&m, rep, sizeof(rep));
	cm_input(cm, rep, sizeof(rep), &from);
	/* active, REQ outstanding */
	p = peer(0x61, 0x4a);
	cm_connect(cm, &p, &path);
	/* passive: REP sent */
	p = peer(0x62, 0x4b);
	feed_req(cm, &p, 0x22000002);
	/* passive: MRA sent */
	defer = 1;
	p = peer(0x63, 0x4c);
	feed_req(cm, &p, 0x22000003);
	defer = 0;
	/* passive established, then torn down into timewait */
	p = peer(0x64, 0x4d);
	feed_req(cm, &p, 0x22000004);
	cm_activity(cm, &p);
	cm_disconnect(cm, &p);
	return cm;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct cm *cm;
	struct cm_msg m, m2;
	struct cm_ipoib_pdata pd;
	uint8_t out[IB_MAD_LEN];
	struct cm_addr from = { 0 };

	if (size >= 8)
		(void)cm_ipoib_pdata_decode(data, &pd);
	if (cm_mad_decode(data + (size ? 1 : 0), size ? size - 1 : 0, &m) == CM_MAD_OK) {
		/* what decodes must encode, and decode again to the same message */
		if (cm_mad_encode(&m, out, sizeof(out)) != IB_MAD_LEN)
			abort();
		if (cm_mad_decode(out, sizeof(out), &m2) != CM_MAD_OK ||
		    memcmp(&m, &m2, sizeof(m)) != 0)
			abort();
	}
	if (!cm) /* one instance for the run: state accumulates, as in a daemon */
		cm = make_cm();
	if (size) {
		from.lid = data[0] & 0x0f;
		from.has_grh = data[0] & 0x80;
		if (cm_input(cm, data + 1, size - 1, &from) == -ENOENT)
			cm_input_orphan(cm, data + 1, size - 1, &from);
	}
	t_now += 7;
	cm_tick(cm);
	if (cm_for_each(cm, NULL, NULL) > 4096)
		abort(); /* bounded: timewait entries expire */
	return 0;
}
