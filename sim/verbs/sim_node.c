/*
 * A simulated node's HCA read through libibumad (see sim_node.h): directed-route SMPs to
 * the local port and umad_get_port, for the verbs shim (moved here from the retired sim
 * backend of the IB port).
 */
#include "sim/verbs/sim_node.h"

#include <endian.h>
#include <errno.h>
#include <infiniband/umad.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/ib_bytes.h"
#include "lib/ib_types.h"
#include "lib/log.h"

#define IB_MAD_LEN         256
#define SIM_SMP_MS         1000 /* a local SMP's timeout (umad) */
#define SIM_SMP_SLICE_MS   10   /* how long one look at the mailbox waits */
#define SMP_ATTR_NODE_DESC 0x0010
#define SMP_ATTR_NODE_INFO 0x0011
#define SMP_ATTR_PORT_INFO 0x0015
#define SMP_DATA           64

/*
 * Answers that another agent read. umad2sim hands every SMI MAD of the process to the
 * agent of that class registered last: once the program's SA client (sm-client/sa_umad)
 * registers its own SMI agent, the answers to our SMPs reach its fd, not ours. Our TIDs
 * carry SIMNODE_TID_TAG in their low 32 bits (umad2sim rewrites the high ones), and the
 * verbs shim's umad_recv (vsim_umad.c) hands every tagged answer it reads, on whatever
 * fd, to simnode_smp_divert, which keeps it here for smp_get. Without the shim (a unit
 * test linking this file alone) only our own fd's reads arrive.
 */
#define SIMNODE_TID_TAG  0x5ead0000u
#define SIMNODE_TID_MASK 0xffff0000u
#define MAILBOX          8

/* The SMPs of this copy of sim_node waiting for an answer: only those are diverted, so
 * that another copy in the same process (a program's own, linked in) keeps reading its
 * answers. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct {
		bool pending, done;
		uint32_t tid;
		int status; /* umad_status: a send that timed out */
		uint8_t mad[IB_MAD_LEN];
	} box[MAILBOX];
} mb = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

bool simnode_smp_divert(const void *umad, int len)
{
	const uint8_t *mad = umad_get_mad((void *)umad);
	bool taken = false;
	uint32_t tid;

	if (len < 64 || mad[1] != 0x81)
		return false;
	tid = ib_get_be32(mad + 12);
	if ((tid & SIMNODE_TID_MASK) != SIMNODE_TID_TAG)
		return false;
	if (!umad_status((void *)umad) && !(mad[3] & 0x80))
		return false; /* a request: not an answer to us */
	pthread_mutex_lock(&mb.lock);
	for (unsigned i = 0; i < MAILBOX && !taken; i++) {
		if (mb.box[i].pending && !mb.box[i].done && mb.box[i].tid == tid) {
			mb.box[i].done = true;
			mb.box[i].status = umad_status((void *)umad);
			memcpy(mb.box[i].mad, mad, len < IB_MAD_LEN ? (size_t)len : IB_MAD_LEN);
			taken = true;
		}
	}
	if (taken)
		pthread_cond_broadcast(&mb.cond);
	pthread_mutex_unlock(&mb.lock);
	return taken;
}

/* A mailbox slot for tid, or -1 (all taken: the SMP reads only its own fd). */
static int mailbox_reserve(uint32_t tid)
{
	int slot = -1;

	pthread_mutex_lock(&mb.lock);
	for (unsigned i = 0; i < MAILBOX && slot < 0; i++) {
		if (!mb.box[i].pending) {
			mb.box[i].pending = true;
			mb.box[i].done = false;
			mb.box[i].tid = tid;
			slot = (int)i;
		}
	}
	pthread_mutex_unlock(&mb.lock);
	return slot;
}

static void mailbox_release(int slot)
{
	if (slot < 0)
		return;
	pthread_mutex_lock(&mb.lock);
	mb.box[slot].pending = false;
	pthread_mutex_unlock(&mb.lock);
}

/* The answer in slot, waiting at most ms. 1 found, 0 not. */
static int mailbox_take(int slot, uint8_t *mad, int *status, unsigned ms)
{
	struct timespec dl;
	int found = 0;

	if (slot < 0)
		return 0;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_nsec += (long)ms * 1000000L;
	dl.tv_sec += dl.tv_nsec / 1000000000L;
	dl.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&mb.lock);
	while (!mb.box[slot].done && pthread_cond_timedwait(&mb.cond, &mb.lock, &dl) == 0)
		;
	if (mb.box[slot].done) {
		*status = mb.box[slot].status;
		memcpy(mad, mb.box[slot].mad, IB_MAD_LEN);
		found = 1;
	}
	pthread_mutex_unlock(&mb.lock);
	return found;
}

/* An answer (or a timeout report) for our SMP tid: 0, or -errno; data gets the
 * attribute. */
static int smp_answer(const uint8_t *mad, int status, uint8_t *data)
{
	if (status)
		return -ETIMEDOUT;
	if ((ib_get_be16(mad + 4) & 0x7fff) != 0)
		return -EPROTO;
	memcpy(data, mad + 64, SMP_DATA);
	return 0;
}

/* A directed-route SubnGet to the local port (hop count 0); data gets the 64-octet
 * attribute. n->lock held. Returns 0 or -errno. */
static int smp_get(struct simnode *n, uint16_t attr, uint32_t mod, uint8_t *data)
{
	static atomic_uint tid_lo = 1;
	uint8_t umad[512], got[IB_MAD_LEN];
	uint8_t *mad;
	uint32_t tid = SIMNODE_TID_TAG | (atomic_fetch_add(&tid_lo, 1) & ~SIMNODE_TID_MASK);
	int status, slot;

	if (umad_size() + IB_MAD_LEN > sizeof(umad))
		return -ENOBUFS;
	memset(umad, 0, sizeof(umad));
	mad = umad_get_mad(umad);
	mad[0] = 1;    /* base version */
	mad[1] = 0x81; /* SMI directed route */
	mad[2] = 1;
	mad[3] = 0x01; /* Get */
	ib_put_be32(mad + 12, tid);
	ib_put_be16(mad + 16, attr);
	ib_put_be32(mad + 20, mod);
	ib_put_be16(mad + 32, 0xffff); /* DrSLID */
	ib_put_be16(mad + 34, 0xffff); /* DrDLID */
	umad_set_addr(umad, 0xffff, 0, 0, 0);
	slot = mailbox_reserve(tid);
	if (umad_send(n->umad_fd, n->umad_agent, umad, IB_MAD_LEN, SIM_SMP_MS, 2) < 0) {
		mailbox_release(slot);
		return -EIO;
	}
	/* Read our fd (the answer may come there), and wait on the mailbox between reads
	 * (it may have come to another agent's). */
	for (int i = 0; i < SIM_SMP_MS * 3 / SIM_SMP_SLICE_MS; i++) {
		int len = IB_MAD_LEN;
		int ret = umad_recv(n->umad_fd, umad, &len, 0);

		if (ret >= 0 && ib_get_be32(mad + 12) == tid &&
		    (umad_status(umad) || (mad[3] & 0x80))) {
			mailbox_release(slot);
			return smp_answer(mad, umad_status(umad), data);
		}
		if (ret >= 0)
			continue; /* another SMI MAD of the process (another agent's): not ours */
		if (mailbox_take(slot, got, &status, SIM_SMP_SLICE_MS)) {
			mailbox_release(slot);
			return smp_answer(got, status, data);
		}
		if (slot < 0)
			usleep(SIM_SMP_SLICE_MS * 1000);
	}
	mailbox_release(slot);
	return -ETIMEDOUT;
}

int simnode_open(struct simnode *n, uint8_t want_port)
{
	uint8_t nd[SMP_DATA + 1], ni[SMP_DATA];
	size_t len;
	int ret;

	memset(n, 0, sizeof(*n));
	n->umad_fd = n->umad_agent = -1;
	pthread_mutex_init(&n->lock, NULL);
	if (umad_init() < 0)
		return -EIO;
	n->umad_port = want_port;
	if (want_port != 1) {
		umad_port_t up;

		if (umad_get_port(NULL, 0, &up) == 0) {
			if (up.portnum > 0 && up.portnum != want_port)
				n->umad_port = (uint8_t)up.portnum;
			umad_release_port(&up);
		}
	}
	n->umad_fd = umad_open_port(NULL, n->umad_port);
	if (n->umad_fd < 0) {
		ret = n->umad_fd;
		log_errno(LOG_ERR, -ret,
			  "umad_open_port (no IB port %u: is this process on a rack node, under "
			  "libumad2sim?)",
			  n->umad_port);
		return ret;
	}
	n->umad_agent = umad_register(n->umad_fd, 0x81, 1, 0, NULL);
	if (n->umad_agent < 0) {
		ret = n->umad_agent;
		log_errno(LOG_ERR, -ret, "umad_register (SMI)");
		return ret;
	}
	pthread_mutex_lock(&n->lock);
	ret = smp_get(n, SMP_ATTR_NODE_DESC, 0, nd);
	if (ret == 0)
		ret = smp_get(n, SMP_ATTR_NODE_INFO, 0, ni);
	pthread_mutex_unlock(&n->lock);
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "NodeDescription/NodeInfo SMP to the local port");
		return ret;
	}
	nd[SMP_DATA] = 0;
	len = strlen((char *)nd);
	while (len && (nd[len - 1] == ' ' || nd[len - 1] == '\n'))
		nd[--len] = 0;
	snprintf(n->name, sizeof(n->name), "%s", (char *)nd);
	n->num_ports = ni[3] ? ni[3] : 1;
	n->node_guid = ib_get_be64(ni + 12);
	return 0;
}

int simnode_read_port(struct simnode *n, uint8_t port_num, struct simnode_port *out)
{
	struct simfab_port_info *info = &out->info;
	umad_port_t up;
	uint8_t pi[SMP_DATA];
	int ret;

	memset(out, 0, sizeof(*out));
	ret = umad_get_port(NULL, n->umad_port, &up);
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "%s: umad_get_port %u", n->name, n->umad_port);
		return ret;
	}
	snprintf(info->name, sizeof(info->name), "%s", n->name);
	info->port_num = port_num;
	/* Another port of the node than umad2sim's: ibsim numbers a CA's port GUIDs node
	 * GUID + port number, and answers a CA's P_KeyTable for the port an SMP arrives
	 * on (so the table is umad's port's; OpenSM programs the same on every port). */
	info->port_guid = be64toh(up.port_guid) - n->umad_port + port_num;
	/* Keep table positions (a QP names its P_Key by index); drop invalid entries at
	 * the end only. */
	for (unsigned i = 0; i < up.pkeys_size && i < SIMFAB_PKEYS_MAX; i++) {
		info->pkeys[i] = up.pkeys[i];
		if (ib_pkey_is_valid(up.pkeys[i]))
			info->n_pkeys = (uint16_t)(i + 1);
	}
	umad_release_port(&up);
	/* A CA answers PortInfo for the port named in the attribute modifier (0: the
	 * port the SMP arrives on). */
	pthread_mutex_lock(&n->lock);
	ret = smp_get(n, SMP_ATTR_PORT_INFO, port_num == n->umad_port ? 0 : port_num, pi);
	pthread_mutex_unlock(&n->lock);
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "%s: PortInfo SMP to the local port", n->name);
		return ret;
	}
	info->gid_prefix = ib_get_be64(pi + 8);
	info->lid = ib_get_be16(pi + 16);
	info->sm_lid = ib_get_be16(pi + 18);
	out->state = pi[32] & 0xf;
	info->lmc = pi[34] & 0x7;
	info->mtu = pi[36] >> 4;
	out->sm_sl = pi[36] & 0xf;
	out->subnet_timeout = pi[51] & 0x1f;
	out->client_rereg = (pi[51] & 0x80) != 0;
	if (!info->n_pkeys) {
		info->n_pkeys = 1; /* no P_Key yet (no SM): the default, as a port starts */
		info->pkeys[0] = IB_PKEY_DEFAULT;
	}
	return 0;
}

void simnode_close(struct simnode *n)
{
	if (n->umad_agent >= 0)
		umad_unregister(n->umad_fd, n->umad_agent);
	if (n->umad_fd >= 0)
		umad_close_port(n->umad_fd);
	n->umad_fd = n->umad_agent = -1;
	pthread_mutex_destroy(&n->lock);
}
