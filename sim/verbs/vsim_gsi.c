/*
 * libibverbs2sim, part four: a CM MAD carrier under libibumad (docs/verbs-sim.md,
 * "CM MADs"), so that cm/cm_umad.c, what ships for HCAs, runs unchanged on the rack.
 *
 * On an HCA the kernel owns QP1 and hands a registered umad agent the MADs of its
 * class. ibsim cannot carry CM MADs to a umad agent, nor SL, P_Key or GRH
 * (docs/connected-mode.md, "On the rack"), and umad2sim's fds cannot be polled. So a
 * umad agent of the CM class (0x07) is the shim's own: its MADs travel as UD packets
 * from QP1 to QP1 on the packet fabric, through the port connection of the context
 * that uses that port (its progress thread hands QP1 packets here), with SL, P_Key
 * (index into the port's table) and GRH as the umad address says; Q_Key 0x80010000.
 * Its fd is an eventfd, readable while MADs are queued. Every other class goes to
 * libibumad and umad2sim as before (vsim_umad.c routes).
 *
 * Threads: any caller of libibumad, and a context's progress thread (vsim_gsi_rx, with
 * that ctx->lock held). gsi.lock is taken inside ctx->lock, never the other way.
 */
#include <endian.h>
#include <errno.h>
#include <infiniband/umad.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sim/verbs/vsim_gsi.h"
#include "sim/verbs/vsim_pvt.h"
#include "lib/ib_hdr.h"
#include "lib/ib_packet.h"
#include "lib/log.h"

#define GSI_AGENTS   4
#define GSI_QUEUE    256
#define GSI_MAD      256
#define GSI_AGENT_ID 0x5e00 /* agent ids the shim gives: far above libibumad's (< 32) */
#define CM_CLASS     0x07

struct gsi_mad {
	uint8_t mad[GSI_MAD];
	uint16_t slid, pkey_index;
	uint8_t sl;
	bool has_grh;
	uint8_t tclass, hop_limit;
	uint32_t flow_label;
	uint8_t sgid[16];
};

static struct {
	pthread_mutex_t lock;
	struct gsi_agent {
		bool used;
		int portid, efd;
		uint8_t port_num;
		unsigned head, len;
		struct gsi_mad q[GSI_QUEUE];
	} a[GSI_AGENTS];
	struct { /* umad_open_port's answers: which port each portid is */
		int portid;
		uint8_t port_num;
	} open[GSI_AGENTS * 2];
	uint32_t psn;
} gsi = { .lock = PTHREAD_MUTEX_INITIALIZER };

void vsim_gsi_port_opened(int portid, int port_num)
{
	pthread_mutex_lock(&gsi.lock);
	for (unsigned i = 0; i < GSI_AGENTS * 2; i++) {
		if (!gsi.open[i].port_num) {
			gsi.open[i].portid = portid;
			gsi.open[i].port_num = (uint8_t)(port_num > 0 ? port_num : 1);
			break;
		}
	}
	pthread_mutex_unlock(&gsi.lock);
}

void vsim_gsi_port_closed(int portid)
{
	pthread_mutex_lock(&gsi.lock);
	for (unsigned i = 0; i < GSI_AGENTS * 2; i++)
		if (gsi.open[i].port_num && gsi.open[i].portid == portid)
			gsi.open[i].port_num = 0;
	for (unsigned i = 0; i < GSI_AGENTS; i++) {
		if (gsi.a[i].used && gsi.a[i].portid == portid) {
			close(gsi.a[i].efd);
			gsi.a[i].used = false;
		}
	}
	pthread_mutex_unlock(&gsi.lock);
}

/* gsi.lock held. */
static struct gsi_agent *agent_of_portid(int portid)
{
	for (unsigned i = 0; i < GSI_AGENTS; i++)
		if (gsi.a[i].used && gsi.a[i].portid == portid)
			return &gsi.a[i];
	return NULL;
}

int vsim_gsi_register(int portid, int mgmt_class)
{
	uint8_t port_num = 0;
	int id = -EBUSY;

	if (mgmt_class != CM_CLASS)
		return -ENOENT; /* not ours: libibumad's */
	pthread_mutex_lock(&gsi.lock);
	for (unsigned i = 0; i < GSI_AGENTS * 2; i++)
		if (gsi.open[i].port_num && gsi.open[i].portid == portid)
			port_num = gsi.open[i].port_num;
	if (!port_num) {
		pthread_mutex_unlock(&gsi.lock);
		return -ENOENT; /* a port opened before the shim saw it */
	}
	for (unsigned i = 0; i < GSI_AGENTS; i++) {
		if (gsi.a[i].used && gsi.a[i].port_num == port_num) {
			/* The kernel refuses a second agent for a method held (EINVAL). */
			pthread_mutex_unlock(&gsi.lock);
			errno = EINVAL;
			return -EPERM;
		}
	}
	for (unsigned i = 0; i < GSI_AGENTS; i++) {
		struct gsi_agent *a = &gsi.a[i];

		if (a->used)
			continue;
		a->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC | EFD_SEMAPHORE);
		if (a->efd < 0) {
			id = -errno;
			break;
		}
		a->used = true;
		a->portid = portid;
		a->port_num = port_num;
		a->head = a->len = 0;
		id = GSI_AGENT_ID + (int)i;
		break;
	}
	pthread_mutex_unlock(&gsi.lock);
	return id;
}

int vsim_gsi_fd(int portid)
{
	struct gsi_agent *a;
	int fd;

	pthread_mutex_lock(&gsi.lock);
	a = agent_of_portid(portid);
	fd = a ? a->efd : -1;
	pthread_mutex_unlock(&gsi.lock);
	return fd;
}

bool vsim_gsi_unregister(int portid, int agent_id)
{
	struct gsi_agent *a;
	bool ours = false;

	pthread_mutex_lock(&gsi.lock);
	a = agent_of_portid(portid);
	if (a && agent_id == GSI_AGENT_ID + (int)(a - gsi.a)) {
		close(a->efd);
		a->used = false;
		ours = true;
	}
	pthread_mutex_unlock(&gsi.lock);
	return ours;
}

int vsim_gsi_recv(int portid, void *umad, int *length)
{
	struct gsi_agent *a;
	struct gsi_mad m;
	ib_mad_addr_t *addr;
	uint64_t v;
	int id;

	pthread_mutex_lock(&gsi.lock);
	a = agent_of_portid(portid);
	if (!a) {
		pthread_mutex_unlock(&gsi.lock);
		return -ENOENT;
	}
	if (!a->len) {
		pthread_mutex_unlock(&gsi.lock);
		return -EAGAIN;
	}
	m = a->q[a->head];
	a->head = (a->head + 1) % GSI_QUEUE;
	a->len--;
	if (read(a->efd, &v, sizeof(v)) < 0) {
		/* the count is one per queued MAD: nothing to do when it is already 0 */
	}
	id = GSI_AGENT_ID + (int)(a - gsi.a);
	pthread_mutex_unlock(&gsi.lock);
	if (*length < GSI_MAD) {
		*length = GSI_MAD;
		return -ENOSPC;
	}
	((struct ib_user_mad *)umad)->agent_id = (uint32_t)id;
	((struct ib_user_mad *)umad)->status = 0;
	((struct ib_user_mad *)umad)->length = (uint32_t)(umad_size() + GSI_MAD);
	addr = umad_get_mad_addr(umad);
	memset(addr, 0, sizeof(*addr));
	addr->qpn = htobe32(IB_QP1);
	addr->qkey = htobe32(IB_QP1_QKEY);
	addr->lid = htobe16(m.slid);
	addr->sl = m.sl;
	addr->grh_present = m.has_grh;
	if (m.has_grh) {
		memcpy(addr->gid, m.sgid, 16);
		addr->flow_label = htobe32(m.flow_label);
		addr->traffic_class = m.tclass;
		addr->hop_limit = m.hop_limit;
	}
	umad_set_pkey(umad, m.pkey_index); /* (a no-op with the old umad ABI, as libibumad) */
	/* Last: with the old umad ABI the address's tail is where the MAD starts. */
	memcpy(umad_get_mad(umad), m.mad, GSI_MAD);
	*length = GSI_MAD;
	return id;
}

/* ctx->lock held (the progress thread). */
void vsim_gsi_rx(struct vsim_port *port, const uint8_t *wire, size_t len)
{
	const struct simfab_port_info *i = &port->sp.info;
	struct ib_packet p;
	struct gsi_mad m;
	struct gsi_agent *a = NULL;

	if (ib_packet_parse(wire, len, &p) != IB_PKT_OK || p.payload_len < GSI_MAD ||
	    p.payload[1] != CM_CLASS)
		return;
	memset(&m, 0, sizeof(m));
	memcpy(m.mad, p.payload, GSI_MAD);
	m.slid = p.lrh.slid;
	m.sl = p.lrh.sl;
	/* The P_Key's index in the port's table (the fabric checked it is there). */
	for (unsigned k = 0; k < i->n_pkeys; k++) {
		if ((i->pkeys[k] & 0x7fff) == (p.bth.pkey & 0x7fff)) {
			m.pkey_index = (uint16_t)k;
			if (i->pkeys[k] == p.bth.pkey)
				break;
		}
	}
	if (p.has_grh) {
		m.has_grh = true;
		memcpy(m.sgid, p.grh.sgid.raw, 16);
		m.flow_label = p.grh.flow_label;
		m.tclass = p.grh.tclass;
		m.hop_limit = p.grh.hop_limit;
	}
	pthread_mutex_lock(&gsi.lock);
	for (unsigned k = 0; k < GSI_AGENTS && !a; k++)
		if (gsi.a[k].used && gsi.a[k].port_num == port->num)
			a = &gsi.a[k];
	if (a && a->len < GSI_QUEUE) {
		uint64_t one = 1;

		a->q[(a->head + a->len) % GSI_QUEUE] = m;
		a->len++;
		if (write(a->efd, &one, sizeof(one)) < 0) {
			/* cannot overflow: at most GSI_QUEUE counts */
		}
	}
	pthread_mutex_unlock(&gsi.lock);
}

int vsim_gsi_send(int portid, const void *umad, int length)
{
	const ib_mad_addr_t *addr = umad_get_mad_addr((void *)umad);
	struct gsi_agent *ag;
	struct vsim_ctx *ctx;
	struct vsim_port *port;
	struct ib_packet p;
	uint8_t port_num;
	/* libibumad's own view: without the kernel's P_Key API (old umad ABI) there is no
	 * index in the address, and every MAD goes on index 0, as the kernel sends it. */
	uint16_t pkey_index = (uint16_t)umad_get_pkey((void *)umad);
	int len, ret;

	if (length != GSI_MAD)
		return -EINVAL;
	pthread_mutex_lock(&gsi.lock);
	ag = agent_of_portid(portid);
	port_num = ag ? ag->port_num : 0;
	pthread_mutex_unlock(&gsi.lock);
	if (!port_num)
		return -ENOENT;
	port = vsim_port_on_fabric(port_num, &ctx);
	if (!port)
		return -ENETDOWN; /* no context of this process uses the port */
	memset(&p, 0, sizeof(p));
	p.lrh.sl = addr->sl & 0xf;
	p.lrh.dlid = be16toh(addr->lid);
	p.lrh.slid = port->sp.info.lid;
	if (addr->grh_present) {
		p.has_grh = true;
		p.grh.ipver = IB_GRH_IPVER;
		p.grh.next_hdr = IB_GRH_NXTHDR_BTH;
		p.grh.tclass = addr->traffic_class;
		p.grh.flow_label = be32toh(addr->flow_label) & 0xfffff;
		p.grh.hop_limit = addr->hop_limit;
		ib_gid_set(&p.grh.sgid, port->sp.info.gid_prefix, port->sp.info.port_guid);
		memcpy(p.grh.dgid.raw, addr->gid, 16);
	}
	p.bth.opcode = IB_OP_UD_SEND_ONLY;
	p.bth.pkey = pkey_index < port->sp.info.n_pkeys ? port->sp.info.pkeys[pkey_index] : 0;
	p.bth.dqpn = IB_QP1;
	p.bth.psn = __atomic_fetch_add(&gsi.psn, 1, __ATOMIC_RELAXED) & IB_PSN_MAX;
	p.deth.qkey = IB_QP1_QKEY;
	p.deth.src_qp = IB_QP1;
	p.payload = umad_get_mad((void *)umad);
	p.payload_len = GSI_MAD;
	ret = -ENETDOWN;
	len = ib_packet_build(&p, port->tx, sizeof(port->tx));
	if (len > 0 && port->fab && port->link_up)
		ret = simfab_client_send(port->fab, IB_QP1, port->tx, (size_t)len);
	pthread_mutex_unlock(&ctx->lock);
	/* A full socket or a down link loses the MAD, as a wire does: the CM resends. */
	return len < 0 ? -EINVAL : ret == -EAGAIN || ret == -ENETDOWN ? 0 : ret;
}
