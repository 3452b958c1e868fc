/*
 * Test helper for test/integration/cm_tshark.sh: encodes a connection's CM MADs with
 * cm/cm_mad.h (REQ, MRA, REP, RTU, REJ, DREQ, DREP, as IPoIB-CM sends them), wraps each
 * in a UD packet to QP1 (Q_Key 0x80010000, lib/ib_packet.h), writes them to a pcap/ERF
 * file (lib/ib_pcap.h), and prints per packet the values tshark should decode, as
 * "tshark.field=value" pairs (numbers in decimal or 0x-hex, the script compares them
 * as numbers; "pdata=" the IPoIB private data octets tshark's *.private field must
 * start with):
 *
 *   cm_pcap FILE.pcap  ->  stdout: one line per packet
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm/cm_mad.h"
#include "lib/ib_packet.h"
#include "lib/ib_pcap.h"

#define A_LID   4
#define B_LID   6
#define A_UDQPN 0x000048
#define B_UDQPN 0x000049
#define A_RCQPN 0x000123
#define B_RCQPN 0x000456
#define A_PSN   0xabcdef
#define B_PSN   0x123456
#define A_CID   0x11223344u
#define B_CID   0x55667788u

static FILE *f;
static uint64_t ts = 1700000000ull * 1000000000ull;

static void emit(const struct cm_msg *m, uint16_t slid, uint16_t dlid, uint16_t pkey)
{
	uint8_t mad[IB_MAD_LEN], pkt_buf[IB_PACKET_MAX_LEN];
	struct ib_packet pkt;
	int n;

	if (cm_mad_encode(m, mad, sizeof(mad)) != IB_MAD_LEN) {
		fprintf(stderr, "cm_pcap: encode %s failed\n", cm_attr_name(m->attr_id));
		exit(1);
	}
	memset(&pkt, 0, sizeof(pkt));
	pkt.lrh.slid = slid;
	pkt.lrh.dlid = dlid;
	pkt.bth.opcode = IB_OP_UD_SEND_ONLY;
	pkt.bth.pkey = pkey;
	pkt.bth.dqpn = IB_QP1;
	pkt.deth.qkey = IB_QP1_QKEY;
	pkt.deth.src_qp = IB_QP1;
	pkt.payload = mad;
	pkt.payload_len = IB_MAD_LEN;
	n = ib_packet_build(&pkt, pkt_buf, sizeof(pkt_buf));
	if (n < 0 || ib_pcap_write_packet(f, pkt_buf, (size_t)n, ts) < 0) {
		fprintf(stderr, "cm_pcap: packet build/write failed\n");
		exit(1);
	}
	ts += 1000000;
	printf("infiniband.bth.destqp=1 infiniband.deth.q_key=0x80010000 infiniband.deth.srcqp=1 "
	       "infiniband.bth.p_key=%u infiniband.mad.mgmtclass=7 infiniband.mad.classversion=2 "
	       "infiniband.mad.method=3 infiniband.mad.attributeid=%u "
	       "infiniband.mad.transactionid=0x%016llx",
	       pkey, m->attr_id, (unsigned long long)m->tid);
}

static void pdata(uint8_t *p, uint32_t qpn, uint32_t mtu)
{
	struct cm_ipoib_pdata pd = { .ud_qpn = qpn, .rx_mtu = mtu };

	cm_ipoib_pdata_encode(&pd, p);
}

static void print_pdata(const uint8_t *p)
{
	printf(" pdata=");
	for (int i = 0; i < CM_IPOIB_PDATA_LEN; i++)
		printf("%02x", p[i]);
}

int main(int argc, char **argv)
{
	struct cm_msg m;
	union ib_gid ga, gb;
	char sa[IB_GID_STRLEN], sb[IB_GID_STRLEN];

	if (argc != 2) {
		fprintf(stderr, "usage: cm_pcap FILE.pcap\n");
		return 2;
	}
	f = fopen(argv[1], "wb");
	if (!f || ib_pcap_write_header(f) < 0) {
		perror(argv[1]);
		return 1;
	}
	ib_gid_set(&ga, IB_GID_LINK_LOCAL_PREFIX, 0x0002c90300001234ull);
	ib_gid_set(&gb, IB_GID_LINK_LOCAL_PREFIX, 0x0002c90300005678ull);
	ib_gid_format(&ga, sa, sizeof(sa));
	ib_gid_format(&gb, sb, sizeof(sb));

	/* 1. REQ A -> B: service ID targets B's UD QPN */
	memset(&m, 0, sizeof(m));
	m.attr_id = CM_ATTR_REQ;
	m.method = IB_MAD_METHOD_SEND;
	m.tid = 0x0000abcd00000001ull;
	m.req.local_comm_id = A_CID;
	m.req.service_id = cm_ipoib_service_id(B_UDQPN);
	m.req.local_ca_guid = 0x0002c90300001234ull;
	m.req.local_qpn = A_RCQPN;
	m.req.remote_cm_response_timeout = 16;
	m.req.transport_service_type = CM_TST_RC;
	m.req.starting_psn = A_PSN;
	m.req.local_cm_response_timeout = 16;
	m.req.retry_count = 7;
	m.req.pkey = 0xffff;
	m.req.path_mtu = 4;
	m.req.rnr_retry_count = 7;
	m.req.max_cm_retries = 8;
	m.req.srq = true;
	m.req.primary.local_lid = A_LID;
	m.req.primary.remote_lid = B_LID;
	m.req.primary.local_gid = ga;
	m.req.primary.remote_gid = gb;
	m.req.primary.sl = 0;
	m.req.primary.subnet_local = true;
	m.req.primary.local_ack_timeout = 19;
	pdata(m.req.private_data, A_UDQPN, 65524);
	emit(&m, A_LID, B_LID, 0xffff);
	printf(" infiniband.cm.req=0x%08x infiniband.cm.req.serviceid=0x%016llx "
	       "infiniband.cm.req.localcaguid=0x%016llx infiniband.cm.req.localqpn=0x%06x "
	       "infiniband.cm.req.startpsn=0x%06x infiniband.cm.req.pkey=0xffff "
	       "infiniband.cm.req.pppmtu=4 infiniband.cm.req.transpsvctype=0 "
	       "infiniband.cm.req.remoteresptout=16 infiniband.cm.req.localresptout=16 "
	       "infiniband.cm.req.retrcount=7 infiniband.cm.req.rnrretrcount=7 "
	       "infiniband.cm.req.maxcmretr=8 infiniband.cm.req.srq=1 "
	       "infiniband.cm.req.prim_locallid=%u infiniband.cm.req.prim_remotelid=%u "
	       "infiniband.cm.req.prim_localgid=%s infiniband.cm.req.prim_remotegid=%s "
	       "infiniband.cm.req.prim_subnetlocal=1 infiniband.cm.req.prim_localacktout=19",
	       A_CID, (unsigned long long)m.req.service_id, (unsigned long long)m.req.local_ca_guid,
	       A_RCQPN, A_PSN, A_LID, B_LID, sa, sb);
	print_pdata(m.req.private_data);
	printf(" kind=req\n");

	/* 2. MRA B -> A: B needs time for the REQ */
	memset(&m, 0, sizeof(m));
	m.attr_id = CM_ATTR_MRA;
	m.method = IB_MAD_METHOD_SEND;
	m.tid = 0x0000abcd00000001ull;
	m.mra.local_comm_id = B_CID;
	m.mra.remote_comm_id = A_CID;
	m.mra.message_mraed = CM_MSG_REF_REQ;
	m.mra.service_timeout = 20;
	emit(&m, B_LID, A_LID, 0xffff);
	printf(" kind=mra\n");

	/* 3. REP B -> A */
	memset(&m, 0, sizeof(m));
	m.attr_id = CM_ATTR_REP;
	m.method = IB_MAD_METHOD_SEND;
	m.tid = 0x0000abcd00000001ull;
	m.rep.local_comm_id = B_CID;
	m.rep.remote_comm_id = A_CID;
	m.rep.local_qpn = B_RCQPN;
	m.rep.starting_psn = B_PSN;
	m.rep.rnr_retry_count = 7;
	m.rep.srq = true;
	m.rep.local_ca_guid = 0x0002c90300005678ull;
	pdata(m.rep.private_data, B_UDQPN, 2048);
	emit(&m, B_LID, A_LID, 0xffff);
	printf(" infiniband.cm.rep=0x%08x infiniband.cm.rep.remotecommid=0x%08x "
	       "infiniband.cm.rep.localqpn=0x%06x infiniband.cm.rep.startpsn=0x%06x "
	       "infiniband.cm.rep.rnrretrcount=7 infiniband.cm.rep.srq=1 "
	       "infiniband.cm.rep.localcaguid=0x%016llx",
	       B_CID, A_CID, B_RCQPN, B_PSN, (unsigned long long)m.rep.local_ca_guid);
	print_pdata(m.rep.private_data);
	printf(" kind=rep\n");

	/* 4. RTU A -> B */
	memset(&m, 0, sizeof(m));
	m.attr_id = CM_ATTR_RTU;
	m.method = IB_MAD_METHOD_SEND;
	m.tid = 0x0000abcd00000001ull;
	m.rtu.local_comm_id = A_CID;
	m.rtu.remote_comm_id = B_CID;
	emit(&m, A_LID, B_LID, 0xffff);
	printf(" infiniband.cm.rtu.localcommid=0x%08x infiniband.cm.rtu.remotecommid=0x%08x "
	       "kind=rtu\n",
	       A_CID, B_CID);

	/* 5. REJ B -> A of a second (crossing) REQ: consumer reject with B's data */
	memset(&m, 0, sizeof(m));
	m.attr_id = CM_ATTR_REJ;
	m.method = IB_MAD_METHOD_SEND;
	m.tid = 0x0000abcd00000002ull;
	m.rej.local_comm_id = 0;
	m.rej.remote_comm_id = A_CID + 1;
	m.rej.message_rejected = CM_MSG_REF_REQ;
	m.rej.reason = CM_REJ_CONSUMER;
	pdata(m.rej.private_data, B_UDQPN, 2048);
	emit(&m, B_LID, A_LID, 0x8001);
	printf(" infiniband.cm.rej.localcommid=0 infiniband.cm.rej.remotecommid=0x%08x "
	       "infiniband.cm.rej.msgrej=0 infiniband.cm.rej.reason=28",
	       A_CID + 1);
	print_pdata(m.rej.private_data);
	printf(" kind=rej\n");

	/* 6. DREQ A -> B, 7. DREP B -> A */
	memset(&m, 0, sizeof(m));
	m.attr_id = CM_ATTR_DREQ;
	m.method = IB_MAD_METHOD_SEND;
	m.tid = 0x0000abcd00000003ull;
	m.dreq.local_comm_id = A_CID;
	m.dreq.remote_comm_id = B_CID;
	m.dreq.remote_qpn = B_RCQPN;
	emit(&m, A_LID, B_LID, 0xffff);
	printf(" infiniband.cm.dreq.localcommid=0x%08x infiniband.cm.dreq.remotecommid=0x%08x "
	       "infiniband.cm.req.remoteqpneecn=0x%06x kind=dreq\n",
	       A_CID, B_CID, B_RCQPN);
	memset(&m, 0, sizeof(m));
	m.attr_id = CM_ATTR_DREP;
	m.method = IB_MAD_METHOD_SEND;
	m.tid = 0x0000abcd00000003ull;
	m.drep.local_comm_id = B_CID;
	m.drep.remote_comm_id = A_CID;
	emit(&m, B_LID, A_LID, 0xffff);
	printf(" infiniband.cm.drsp.localcommid=0x%08x infiniband.cm.drsp.remotecommid=0x%08x "
	       "kind=drep\n",
	       B_CID, A_CID);
	return fclose(f) == 0 ? 0 : 1;
}
