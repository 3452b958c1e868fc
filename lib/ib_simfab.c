/*
 * The simulated fabric's port protocol: message codec, UD packet helper, and the client
 * side every port shares (see ib_simfab.h for the layout).
 *
 * The decoder checks the header (version, length field against the datagram's length),
 * then the body length the type fixes, then each field's range, so a bad message gets
 * one precise reason. The encoder makes the same field checks: what one side encodes,
 * the other decodes.
 *
 * The client keeps a small ring of PACKET/PORT_STATE messages that arrive while it
 * waits for a request's answer, so requests can be made at any time without losing
 * traffic (up to the ring's size; beyond it packets are dropped as an HCA without
 * receive buffers would drop them).
 */
#include "lib/ib_simfab.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "lib/ib_bytes.h"
#include "lib/ib_types.h"

unsigned simfab_mtu_bytes(uint8_t mtu_enum)
{
	return ib_mtu_bytes(mtu_enum);
}

static const char *const type_names[] = {
	[SIMFAB_HELLO] = "HELLO",
	[SIMFAB_PORT_UPDATE] = "PORT_UPDATE",
	[SIMFAB_QP_CREATE] = "QP_CREATE",
	[SIMFAB_QP_MODIFY] = "QP_MODIFY",
	[SIMFAB_QP_DESTROY] = "QP_DESTROY",
	[SIMFAB_MCAST_ATTACH] = "MCAST_ATTACH",
	[SIMFAB_MCAST_DETACH] = "MCAST_DETACH",
	[SIMFAB_PACKET] = "PACKET",
	[SIMFAB_PORT_STATE] = "PORT_STATE",
	[SIMFAB_OK] = "OK",
	[SIMFAB_ERROR] = "ERROR",
	[SIMFAB_RING] = "RING",
	[SIMFAB_KICK] = "KICK",
};

const char *simfab_type_name(uint8_t type)
{
	if (type >= sizeof(type_names) / sizeof(type_names[0]) || !type_names[type])
		return "?";
	return type_names[type];
}

/* Store a reason for the caller (when it asked for one) and return err. */
static int fail(const char **why, const char *reason, int err)
{
	if (why)
		*why = reason;
	return err;
}

int simfab_port_info_check(const struct simfab_port_info *p, const char **why)
{
	size_t nl = strnlen(p->name, SIMFAB_NAME_MAX);

	if (nl == 0)
		return fail(why, "node name is empty", -EINVAL);
	if (nl == SIMFAB_NAME_MAX)
		return fail(why, "node name has no NUL within 64 octets", -EINVAL);
	if (p->port_num == 0 || p->port_num == 255)
		return fail(why, "port number 0 or 255 (HCA ports are 1..254)", -EINVAL);
	if (p->lmc > 7)
		return fail(why, "LMC above 7", -EINVAL);
	if (!simfab_mtu_bytes(p->mtu))
		return fail(why, "active MTU is not an IB MTU code (1..5)", -EINVAL);
	if (p->flags & ~SIMFAB_HELLO_PRIVILEGED)
		return fail(why, "unknown flag bits", -EINVAL);
	if (p->lid == 0 || p->lid >= IB_LID_MC_FIRST)
		return fail(why, "LID is not a unicast LID (1..0xBFFF)", -EINVAL);
	if (((unsigned)p->lid & ((1u << p->lmc) - 1)) != 0)
		return fail(why, "LID is not aligned to 2^LMC", -EINVAL);
	if ((unsigned)p->lid + (1u << p->lmc) - 1 >= IB_LID_MC_FIRST)
		return fail(why, "LID range (LID + 2^LMC - 1) reaches the multicast LIDs", -EINVAL);
	if (p->sm_lid >= IB_LID_MC_FIRST)
		return fail(why, "SM LID is not a unicast LID", -EINVAL);
	if (p->port_guid == 0)
		return fail(why, "port GUID is 0", -EINVAL);
	if (p->n_pkeys == 0 || p->n_pkeys > SIMFAB_PKEYS_MAX)
		return fail(why, "P_Key table size not in 1..128", -EINVAL);
	return 0;
}

/* Body length of each type: fixed, or the minimum (PACKET, ERROR, HELLO). */
static int body_len_ok(uint8_t type, size_t blen, const uint8_t *body, const char **why)
{
	size_t want;

	switch (type) {
	case SIMFAB_HELLO:
	case SIMFAB_PORT_UPDATE:
		if (blen < SIMFAB_PORT_BODY)
			return fail(why, "HELLO/PORT_UPDATE body shorter than 108 octets",
				    -EMSGSIZE);
		want = SIMFAB_PORT_BODY + 2u * ib_get_be16(body + 88);
		if (blen != want)
			return fail(why, "HELLO/PORT_UPDATE body is not 108 + 2 * n_pkeys octets",
				    -EMSGSIZE);
		return 0;
	case SIMFAB_QP_CREATE:
		want = 8;
		break;
	case SIMFAB_QP_MODIFY:
		want = blen == 12 ? 12 : 8;
		break;
	case SIMFAB_QP_DESTROY:
	case SIMFAB_PORT_STATE:
	case SIMFAB_OK:
	case SIMFAB_RING:
	case SIMFAB_KICK:
		want = 4;
		break;
	case SIMFAB_MCAST_ATTACH:
	case SIMFAB_MCAST_DETACH:
		want = 24;
		break;
	case SIMFAB_PACKET:
		if (blen < SIMFAB_PACKET_BODY + IB_PACKET_MIN_LEN)
			return fail(why, "PACKET shorter than its header and a minimal IB packet",
				    -EMSGSIZE);
		if (blen > SIMFAB_PACKET_BODY + IB_PACKET_MAX_LEN)
			return fail(why, "PACKET longer than the longest IB packet", -EMSGSIZE);
		return 0;
	case SIMFAB_ERROR:
		if (blen < 5)
			return fail(why, "ERROR body has no message", -EMSGSIZE);
		if (blen > 4 + SIMFAB_ERRMSG_MAX)
			return fail(why, "ERROR message longer than 200 octets", -EMSGSIZE);
		return 0;
	default:
		return fail(why, "unknown message type", -EPROTO);
	}
	if (blen != want) {
		switch (want) {
		case 4:
			return fail(why, "body is not 4 octets, as the type requires", -EMSGSIZE);
		case 8:
			return fail(why, "body is not 8 octets, as the type requires", -EMSGSIZE);
		default:
			return fail(why, "body is not 24 octets, as the type requires", -EMSGSIZE);
		}
	}
	return 0;
}

static int qpn_ok(uint32_t qpn, const char **why)
{
	if (qpn > IB_QPN_MAX)
		return fail(why, "QPN wider than 24 bits", -EINVAL);
	return 0;
}

int simfab_decode(const uint8_t *buf, size_t len, struct simfab_msg *m, const char **why)
{
	const uint8_t *b = buf + SIMFAB_HDR_LEN;
	size_t blen;
	int rc;

	memset(m, 0, sizeof(*m));
	if (len < SIMFAB_HDR_LEN)
		return fail(why, "shorter than the 8-octet header", -EMSGSIZE);
	if (buf[0] != SIMFAB_VERSION)
		return fail(why, "protocol version is not 1", -EPROTO);
	if (ib_get_be16(buf + 2) != len)
		return fail(why, "length field disagrees with the message's length", -EMSGSIZE);
	m->type = buf[1];
	m->seq = ib_get_be32(buf + 4);
	blen = len - SIMFAB_HDR_LEN;
	rc = body_len_ok(m->type, blen, b, why);
	if (rc < 0)
		return rc;

	switch (m->type) {
	case SIMFAB_HELLO:
	case SIMFAB_PORT_UPDATE: {
		struct simfab_port_info *p = &m->u.port;

		memcpy(p->name, b, SIMFAB_NAME_MAX);
		if (!memchr(p->name, 0, SIMFAB_NAME_MAX))
			return fail(why, "node name has no NUL within 64 octets", -EINVAL);
		for (size_t i = strlen(p->name); i < SIMFAB_NAME_MAX; i++)
			if (b[i])
				return fail(why, "node name is not NUL padded", -EINVAL);
		p->port_num = b[64];
		p->lmc = b[65];
		p->mtu = b[66];
		p->flags = b[67];
		p->port_guid = ib_get_be64(b + 68);
		p->gid_prefix = ib_get_be64(b + 76);
		p->lid = ib_get_be16(b + 84);
		p->sm_lid = ib_get_be16(b + 86);
		p->n_pkeys = ib_get_be16(b + 88);
		for (size_t i = 90; i < SIMFAB_PORT_BODY; i++)
			if (b[i])
				return fail(why, "reserved octets of HELLO are not 0", -EINVAL);
		if (p->n_pkeys > SIMFAB_PKEYS_MAX)
			return fail(why, "P_Key table size not in 1..128", -EINVAL);
		for (unsigned i = 0; i < p->n_pkeys; i++)
			p->pkeys[i] = ib_get_be16(b + SIMFAB_PORT_BODY + 2 * i);
		return simfab_port_info_check(p, why);
	}
	case SIMFAB_QP_CREATE:
		m->u.qp_create.type = b[0];
		if (b[0] < SIMFAB_QP_UD || b[0] > SIMFAB_QP_UC)
			return fail(why, "QP type is not UD (1), RC (2) or UC (3)", -EINVAL);
		if (b[1])
			return fail(why, "reserved octet of QP_CREATE is not 0", -EINVAL);
		m->u.qp_create.pkey_index = ib_get_be16(b + 2);
		if (m->u.qp_create.pkey_index >= SIMFAB_PKEYS_MAX)
			return fail(why, "P_Key index above 127", -EINVAL);
		m->u.qp_create.qkey = ib_get_be32(b + 4);
		return 0;
	case SIMFAB_QP_MODIFY:
		m->u.qp_modify.qpn = ib_get_be32(b);
		m->u.qp_modify.qkey = ib_get_be32(b + 4);
		m->u.qp_modify.set_pkey = blen == 12;
		if (m->u.qp_modify.set_pkey) {
			m->u.qp_modify.pkey_index = ib_get_be16(b + 8);
			if (m->u.qp_modify.pkey_index >= SIMFAB_PKEYS_MAX)
				return fail(why, "P_Key index above 127", -EINVAL);
			if (b[10] || b[11])
				return fail(why, "reserved octets of QP_MODIFY are not 0", -EINVAL);
		}
		return qpn_ok(m->u.qp_modify.qpn, why);
	case SIMFAB_QP_DESTROY:
		m->u.qp_destroy.qpn = ib_get_be32(b);
		return qpn_ok(m->u.qp_destroy.qpn, why);
	case SIMFAB_MCAST_ATTACH:
	case SIMFAB_MCAST_DETACH:
		m->u.mcast.qpn = ib_get_be32(b);
		m->u.mcast.mlid = ib_get_be16(b + 4);
		memcpy(m->u.mcast.mgid.raw, b + 8, IB_GID_LEN);
		if ((rc = qpn_ok(m->u.mcast.qpn, why)) < 0)
			return rc;
		if (b[6] || b[7])
			return fail(why, "reserved octets of MCAST_ATTACH/DETACH are not 0",
				    -EINVAL);
		if (m->u.mcast.mlid < IB_LID_MC_FIRST || m->u.mcast.mlid == IB_LID_PERMISSIVE)
			return fail(why, "MLID is not a multicast LID (0xC000..0xFFFE)", -EINVAL);
		if (!ib_gid_is_multicast(&m->u.mcast.mgid))
			return fail(why, "MGID is not a multicast GID (first octet 0xFF)", -EINVAL);
		return 0;
	case SIMFAB_PACKET:
		m->u.packet.qpn = ib_get_be32(b);
		if ((rc = qpn_ok(m->u.packet.qpn, why)) < 0)
			return rc;
		if (ib_get_be32(b + 4))
			return fail(why, "reserved octets of PACKET are not 0", -EINVAL);
		m->u.packet.data = b + SIMFAB_PACKET_BODY;
		m->u.packet.len = blen - SIMFAB_PACKET_BODY;
		return 0;
	case SIMFAB_PORT_STATE:
		m->u.port_state.state = b[0];
		if (b[0] != SIMFAB_PORT_DOWN && b[0] != SIMFAB_PORT_ACTIVE)
			return fail(why, "port state is not DOWN (1) or ACTIVE (4)", -EINVAL);
		if (b[1] || b[2] || b[3])
			return fail(why, "reserved octets of PORT_STATE are not 0", -EINVAL);
		return 0;
	case SIMFAB_OK:
		m->u.ok.value = ib_get_be32(b);
		return 0;
	case SIMFAB_RING:
		m->u.ring.slots = ib_get_be32(b);
		if (!simfab_ring_bytes(m->u.ring.slots))
			return fail(why, "RING slots not a power of two in 16..1024", -EINVAL);
		return 0;
	case SIMFAB_KICK:
		if (ib_get_be32(b))
			return fail(why, "reserved octets of KICK are not 0", -EINVAL);
		return 0;
	case SIMFAB_ERROR:
		m->u.error.err = ib_get_be32(b);
		m->u.error.text = (const char *)b + 4;
		m->u.error.len = blen - 4;
		if (m->u.error.err == 0 || m->u.error.err > 4095)
			return fail(why, "ERROR errno not in 1..4095", -EINVAL);
		for (size_t i = 0; i < m->u.error.len; i++)
			if (b[4 + i] < 0x20 || b[4 + i] > 0x7e)
				return fail(why, "ERROR message is not printable ASCII", -EINVAL);
		return 0;
	}
	return fail(why, "unknown message type", -EPROTO); /* not reached: body_len_ok */
}

static void put_hdr(uint8_t *buf, uint8_t type, size_t len, uint32_t seq)
{
	buf[0] = SIMFAB_VERSION;
	buf[1] = type;
	ib_put_be16(buf + 2, (uint16_t)len);
	ib_put_be32(buf + 4, seq);
}

int simfab_packet_header(uint8_t *buf, uint32_t qpn, size_t pkt_len)
{
	size_t len = SIMFAB_HDR_LEN + SIMFAB_PACKET_BODY + pkt_len;

	if (qpn > IB_QPN_MAX || pkt_len < IB_PACKET_MIN_LEN || pkt_len > IB_PACKET_MAX_LEN)
		return -EINVAL;
	put_hdr(buf, SIMFAB_PACKET, len, 0);
	ib_put_be32(buf + SIMFAB_HDR_LEN, qpn);
	ib_put_be32(buf + SIMFAB_HDR_LEN + 4, 0);
	return (int)len;
}

int simfab_encode(const struct simfab_msg *m, uint8_t *buf, size_t len)
{
	uint8_t *b = buf + SIMFAB_HDR_LEN;
	size_t blen;

	switch (m->type) {
	case SIMFAB_HELLO:
	case SIMFAB_PORT_UPDATE:
		if (simfab_port_info_check(&m->u.port, NULL) < 0)
			return -EINVAL;
		blen = SIMFAB_PORT_BODY + 2u * m->u.port.n_pkeys;
		break;
	case SIMFAB_QP_CREATE:
		if (m->u.qp_create.type < SIMFAB_QP_UD || m->u.qp_create.type > SIMFAB_QP_UC ||
		    m->u.qp_create.pkey_index >= SIMFAB_PKEYS_MAX)
			return -EINVAL;
		blen = 8;
		break;
	case SIMFAB_QP_MODIFY:
		if (m->u.qp_modify.qpn > IB_QPN_MAX ||
		    (m->u.qp_modify.set_pkey && m->u.qp_modify.pkey_index >= SIMFAB_PKEYS_MAX))
			return -EINVAL;
		blen = m->u.qp_modify.set_pkey ? 12 : 8;
		break;
	case SIMFAB_QP_DESTROY:
		if (m->u.qp_destroy.qpn > IB_QPN_MAX)
			return -EINVAL;
		blen = 4;
		break;
	case SIMFAB_MCAST_ATTACH:
	case SIMFAB_MCAST_DETACH:
		if (m->u.mcast.qpn > IB_QPN_MAX || m->u.mcast.mlid < IB_LID_MC_FIRST ||
		    m->u.mcast.mlid == IB_LID_PERMISSIVE || !ib_gid_is_multicast(&m->u.mcast.mgid))
			return -EINVAL;
		blen = 24;
		break;
	case SIMFAB_PACKET:
		if (len < SIMFAB_HDR_LEN + SIMFAB_PACKET_BODY + m->u.packet.len)
			return -ENOSPC;
		if (simfab_packet_header(buf, m->u.packet.qpn, m->u.packet.len) < 0)
			return -EINVAL;
		memmove(buf + SIMFAB_HDR_LEN + SIMFAB_PACKET_BODY, m->u.packet.data,
			m->u.packet.len);
		ib_put_be32(buf + 4, m->seq);
		return (int)(SIMFAB_HDR_LEN + SIMFAB_PACKET_BODY + m->u.packet.len);
	case SIMFAB_PORT_STATE:
		if (m->u.port_state.state != SIMFAB_PORT_DOWN &&
		    m->u.port_state.state != SIMFAB_PORT_ACTIVE)
			return -EINVAL;
		blen = 4;
		break;
	case SIMFAB_OK:
	case SIMFAB_KICK:
		blen = 4;
		break;
	case SIMFAB_RING:
		if (!simfab_ring_bytes(m->u.ring.slots))
			return -EINVAL;
		blen = 4;
		break;
	case SIMFAB_ERROR:
		if (m->u.error.err == 0 || m->u.error.err > 4095 || m->u.error.len == 0 ||
		    m->u.error.len > SIMFAB_ERRMSG_MAX)
			return -EINVAL;
		for (size_t i = 0; i < m->u.error.len; i++)
			if (m->u.error.text[i] < 0x20 || m->u.error.text[i] > 0x7e)
				return -EINVAL;
		blen = 4 + m->u.error.len;
		break;
	default:
		return -EINVAL;
	}
	if (len < SIMFAB_HDR_LEN + blen)
		return -ENOSPC;
	memset(b, 0, blen);
	switch (m->type) {
	case SIMFAB_HELLO:
	case SIMFAB_PORT_UPDATE: {
		const struct simfab_port_info *p = &m->u.port;

		memcpy(b, p->name, strnlen(p->name, SIMFAB_NAME_MAX));
		b[64] = p->port_num;
		b[65] = p->lmc;
		b[66] = p->mtu;
		b[67] = p->flags;
		ib_put_be64(b + 68, p->port_guid);
		ib_put_be64(b + 76, p->gid_prefix);
		ib_put_be16(b + 84, p->lid);
		ib_put_be16(b + 86, p->sm_lid);
		ib_put_be16(b + 88, p->n_pkeys);
		for (unsigned i = 0; i < p->n_pkeys; i++)
			ib_put_be16(b + SIMFAB_PORT_BODY + 2 * i, p->pkeys[i]);
		break;
	}
	case SIMFAB_QP_CREATE:
		b[0] = m->u.qp_create.type;
		ib_put_be16(b + 2, m->u.qp_create.pkey_index);
		ib_put_be32(b + 4, m->u.qp_create.qkey);
		break;
	case SIMFAB_QP_MODIFY:
		ib_put_be32(b, m->u.qp_modify.qpn);
		ib_put_be32(b + 4, m->u.qp_modify.qkey);
		if (m->u.qp_modify.set_pkey) {
			ib_put_be16(b + 8, m->u.qp_modify.pkey_index);
			ib_put_be16(b + 10, 0);
		}
		break;
	case SIMFAB_QP_DESTROY:
		ib_put_be32(b, m->u.qp_destroy.qpn);
		break;
	case SIMFAB_MCAST_ATTACH:
	case SIMFAB_MCAST_DETACH:
		ib_put_be32(b, m->u.mcast.qpn);
		ib_put_be16(b + 4, m->u.mcast.mlid);
		memcpy(b + 8, m->u.mcast.mgid.raw, IB_GID_LEN);
		break;
	case SIMFAB_PORT_STATE:
		b[0] = m->u.port_state.state;
		break;
	case SIMFAB_OK:
		ib_put_be32(b, m->u.ok.value);
		break;
	case SIMFAB_RING:
		ib_put_be32(b, m->u.ring.slots);
		break;
	case SIMFAB_ERROR:
		ib_put_be32(b, m->u.error.err);
		memcpy(b + 4, m->u.error.text, m->u.error.len);
		break;
	}
	put_hdr(buf, m->type, SIMFAB_HDR_LEN + blen, m->seq);
	return (int)(SIMFAB_HDR_LEN + blen);
}

int simfab_build_ud(const struct simfab_port_info *port, uint32_t src_qpn, uint32_t psn,
		    const struct simfab_ud_dest *d, const uint8_t *payload, size_t payload_len,
		    uint8_t *buf, size_t len)
{
	struct ib_packet p;

	memset(&p, 0, sizeof(p));
	p.lrh.sl = d->sl;
	p.lrh.dlid = d->dlid;
	p.lrh.slid = port->lid;
	if (d->dgid) {
		p.has_grh = true;
		p.grh.ipver = IB_GRH_IPVER;
		p.grh.next_hdr = IB_GRH_NXTHDR_BTH;
		p.grh.hop_limit = d->hop_limit;
		ib_gid_set(&p.grh.sgid, port->gid_prefix, port->port_guid);
		p.grh.dgid = *d->dgid;
	}
	p.bth.opcode = IB_OP_UD_SEND_ONLY;
	p.bth.pkey = d->pkey;
	p.bth.dqpn = d->dqpn;
	p.bth.psn = psn & IB_PSN_MAX;
	p.deth.qkey = d->qkey;
	p.deth.src_qp = src_qpn;
	p.payload = payload;
	p.payload_len = payload_len;
	return ib_packet_build(&p, buf, len);
}

/* ---- shared rings (layout and rules: ib_simfab.h) ------------------------------------ */

#define RING_HEAD     0 /* offsets in a direction's control lines */
#define RING_TAIL     64
#define RING_SLEEPING 68

static _Atomic uint32_t *ring_word(const struct simfab_ring *r, size_t off)
{
	return (_Atomic uint32_t *)(void *)(r->ctl + off);
}

size_t simfab_ring_bytes(uint32_t slots)
{
	if (slots < SIMFAB_RING_SLOTS_MIN || slots > SIMFAB_RING_SLOTS_MAX || (slots & (slots - 1)))
		return 0;
	return 2 * SIMFAB_RING_CTL + 2 * (size_t)slots * SIMFAB_RING_SLOT;
}

void simfab_ring_view(uint8_t *mem, uint32_t slots, int dir, struct simfab_ring *r)
{
	r->ctl = mem + (size_t)dir * SIMFAB_RING_CTL;
	r->slots = mem + 2 * SIMFAB_RING_CTL + (size_t)dir * slots * SIMFAB_RING_SLOT;
	r->n = slots;
	r->pos = 0;
}

uint8_t *simfab_ring_slot(struct simfab_ring *r, int *err)
{
	uint32_t tail = atomic_load_explicit(ring_word(r, RING_TAIL), memory_order_acquire);
	uint32_t used = r->pos - tail;

	*err = used > r->n ? -EPROTO : used == r->n ? -EAGAIN : 0;
	if (*err)
		return NULL;
	return r->slots + (size_t)(r->pos & (r->n - 1)) * SIMFAB_RING_SLOT + 8;
}

int simfab_ring_push(struct simfab_ring *r, uint32_t qpn, const uint8_t *pkt, size_t len)
{
	int err;
	uint8_t *d = simfab_ring_slot(r, &err);

	if (!d)
		return err;
	if (len < IB_PACKET_MIN_LEN || len > IB_PACKET_MAX_LEN || qpn > IB_QPN_MAX)
		return -EINVAL;
	memcpy(d, pkt, len);
	return simfab_ring_commit(r, qpn, len);
}

int simfab_ring_commit(struct simfab_ring *r, uint32_t qpn, size_t len)
{
	uint8_t *slot = r->slots + (size_t)(r->pos & (r->n - 1)) * SIMFAB_RING_SLOT;
	uint32_t one = 1;

	if (len < IB_PACKET_MIN_LEN || len > IB_PACKET_MAX_LEN || qpn > IB_QPN_MAX)
		return -EINVAL;
	memcpy(slot, &(uint32_t){ (uint32_t)len }, 4);
	memcpy(slot + 4, &qpn, 4);
	r->pos++;
	atomic_store_explicit(ring_word(r, RING_HEAD), r->pos, memory_order_release);
	/* Pairs with the consumer's barrier between setting sleeping and looking again:
	 * either it sees the new head, or this sees sleeping. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(ring_word(r, RING_SLEEPING), memory_order_relaxed) &&
	    atomic_compare_exchange_strong(ring_word(r, RING_SLEEPING), &one, 0))
		return 1;
	return 0;
}

int simfab_ring_peek(struct simfab_ring *r, uint32_t *qpn, const uint8_t **pkt, size_t *len)
{
	uint32_t head = atomic_load_explicit(ring_word(r, RING_HEAD), memory_order_acquire);
	uint32_t l, q;
	const uint8_t *slot;

	if (head == r->pos) {
		atomic_store_explicit(ring_word(r, RING_SLEEPING), 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst);
		head = atomic_load_explicit(ring_word(r, RING_HEAD), memory_order_acquire);
		if (head == r->pos)
			return 0;
		atomic_store_explicit(ring_word(r, RING_SLEEPING), 0, memory_order_relaxed);
	}
	if (head - r->pos > r->n)
		return -EPROTO;
	slot = r->slots + (size_t)(r->pos & (r->n - 1)) * SIMFAB_RING_SLOT;
	memcpy(&l, slot, 4);
	memcpy(&q, slot + 4, 4);
	if (l < IB_PACKET_MIN_LEN || l > IB_PACKET_MAX_LEN || q > IB_QPN_MAX)
		return -EPROTO;
	*qpn = q;
	*pkt = slot + 8;
	*len = l;
	return 1;
}

void simfab_ring_pop(struct simfab_ring *r)
{
	r->pos++;
	atomic_store_explicit(ring_word(r, RING_TAIL), r->pos, memory_order_release);
}

/* ---- client ------------------------------------------------------------------------ */

#define CLIENT_RING 64 /* PACKET/PORT_STATE messages kept while waiting for an answer */
/* Messages one recvmmsg takes when a caller polls (timeout 0): a busy port's burst costs
 * one system call, not one per packet (bench/README.md, "A faster simulated fabric"). */
#define CLIENT_BATCH 16

struct simfab_client {
	int fd;
	int timeout_ms;
	uint32_t seq;
	char errmsg[SIMFAB_ERRMSG_MAX + 64];
	uint8_t rx[SIMFAB_MSG_MAX]; /* last message handed out / being read */
	uint8_t tx[SIMFAB_HDR_LEN + SIMFAB_PORT_BODY + 2 * SIMFAB_PKEYS_MAX]; /* largest: HELLO */
	struct {
		uint16_t len;
		uint8_t *buf;
	} ring[CLIENT_RING];
	unsigned head, count;
	uint8_t *ring_mem;
	uint64_t ring_drops;
	/* The last recvmmsg: messages bat_next..bat_n-1 not handed out yet. They are older
	 * than anything in the ring (filled only when the ring is empty), so they go first. */
	struct mmsghdr bat_mm[CLIENT_BATCH];
	struct iovec bat_iov[CLIENT_BATCH];
	unsigned bat_next, bat_n;
	uint8_t *bat_mem;
	/* Shared rings (simfab_client_ring): rmap is NULL while PACKETs use the socket. */
	uint8_t *rmap;
	size_t rmap_len;
	struct simfab_ring rtx, rrx;
	bool rx_held;   /* the packet last handed out is still in its rx slot */
	bool corked;    /* simfab_client_cork: a KICK waits for the uncork */
	bool kick_owed; /* the fabric asked for one while corked */
};

int simfab_client_connect(const char *path, struct simfab_client **out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct simfab_client *c;
	int rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->ring_mem = malloc((size_t)(CLIENT_RING + CLIENT_BATCH) * SIMFAB_MSG_MAX);
	if (!c->ring_mem) {
		rc = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < CLIENT_RING; i++)
		c->ring[i].buf = c->ring_mem + (size_t)i * SIMFAB_MSG_MAX;
	c->bat_mem = c->ring_mem + (size_t)CLIENT_RING * SIMFAB_MSG_MAX;
	for (unsigned i = 0; i < CLIENT_BATCH; i++) {
		c->bat_iov[i].iov_base = c->bat_mem + (size_t)i * SIMFAB_MSG_MAX;
		c->bat_iov[i].iov_len = SIMFAB_MSG_MAX;
		c->bat_mm[i].msg_hdr.msg_iov = &c->bat_iov[i];
		c->bat_mm[i].msg_hdr.msg_iovlen = 1;
	}
	c->timeout_ms = 5000;
	strcpy(sa.sun_path, path);
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		rc = -errno;
		goto fail_free;
	}
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		goto fail_close;
	}
	*out = c;
	return 0;
fail_close:
	close(c->fd);
fail_free:
	free(c->ring_mem);
fail:
	free(c);
	return rc;
}

void simfab_client_close(struct simfab_client *c)
{
	if (!c)
		return;
	if (c->rmap)
		munmap(c->rmap, c->rmap_len);
	close(c->fd);
	free(c->ring_mem);
	free(c);
}

int simfab_client_fd(const struct simfab_client *c)
{
	return c->fd;
}

const char *simfab_client_errmsg(const struct simfab_client *c)
{
	return c->errmsg;
}

void simfab_client_set_timeout(struct simfab_client *c, int timeout_ms)
{
	c->timeout_ms = timeout_ms;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read one message into c->rx within timeout_ms (-1 forever). Returns its length,
 * -EAGAIN, -ETIMEDOUT (only if timeout_ms > 0), -ECONNRESET or -errno. */
static int read_msg(struct simfab_client *c, int timeout_ms)
{
	int64_t deadline = timeout_ms > 0 ? now_ms() + timeout_ms : 0;

	for (;;) {
		ssize_t n = recv(c->fd, c->rx, sizeof(c->rx), MSG_TRUNC);
		struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
		int wait;

		if (n > (ssize_t)sizeof(c->rx)) {
			snprintf(c->errmsg, sizeof(c->errmsg), "message of %zd octets is too long",
				 n);
			return -EPROTO;
		}
		if (n > 0)
			return (int)n;
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return errno == ECONNRESET || errno == EPIPE ? -ECONNRESET : -errno;
		if (timeout_ms == 0)
			return -EAGAIN;
		wait = -1;
		if (timeout_ms > 0) {
			int64_t left = deadline - now_ms();

			if (left <= 0)
				return -ETIMEDOUT;
			wait = (int)left;
		}
		if (poll(&pfd, 1, wait) < 0 && errno != EINTR)
			return -errno;
	}
}

/* Send a request (with file descriptor fd attached when fd >= 0) and wait for its
 * answer, keeping traffic that overtakes it. */
static int send_req_fd(struct simfab_client *c, struct simfab_msg *m, uint32_t *value, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int64_t deadline;
	int len, n;

	m->seq = ++c->seq;
	c->errmsg[0] = 0;
	len = simfab_encode(m, c->tx, sizeof(c->tx));
	if (len < 0)
		return len;
	iov.iov_base = c->tx;
	iov.iov_len = (size_t)len;
	if (fd >= 0) {
		struct cmsghdr *ch;

		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof(cm.buf);
		ch = CMSG_FIRSTHDR(&mh);
		ch->cmsg_level = SOL_SOCKET;
		ch->cmsg_type = SCM_RIGHTS;
		ch->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(ch), &fd, sizeof(int));
	}
	if (sendmsg(c->fd, &mh, MSG_NOSIGNAL) != len)
		return errno == EPIPE ? -ECONNRESET : -errno;
	deadline = now_ms() + c->timeout_ms;
	for (;;) {
		struct simfab_msg r;
		const char *why = NULL;
		int64_t left = deadline - now_ms();

		n = read_msg(c, left > 0 ? (int)left : 1);
		if (n == -EAGAIN)
			n = -ETIMEDOUT;
		if (n < 0)
			return n;
		if (simfab_decode(c->rx, (size_t)n, &r, &why) < 0) {
			snprintf(c->errmsg, sizeof(c->errmsg), "bad message from the fabric: %s",
				 why);
			return -EPROTO;
		}
		if (r.type == SIMFAB_KICK)
			continue; /* simfab_client_recv looks at the ring anyway */
		if (r.type == SIMFAB_PACKET || r.type == SIMFAB_PORT_STATE) {
			/* Traffic that overtook the answer: keep it for simfab_client_recv. */
			if (c->count == CLIENT_RING) {
				c->ring_drops++;
				continue;
			}
			unsigned slot = (c->head + c->count) % CLIENT_RING;

			memcpy(c->ring[slot].buf, c->rx, (size_t)n);
			c->ring[slot].len = (uint16_t)n;
			c->count++;
			continue;
		}
		if (r.seq != m->seq || (r.type != SIMFAB_OK && r.type != SIMFAB_ERROR)) {
			snprintf(c->errmsg, sizeof(c->errmsg),
				 "unexpected %s (seq %u) while waiting for the answer to %s",
				 simfab_type_name(r.type), r.seq, simfab_type_name(m->type));
			return -EPROTO;
		}
		if (r.type == SIMFAB_ERROR) {
			snprintf(c->errmsg, sizeof(c->errmsg), "%.*s", (int)r.u.error.len,
				 r.u.error.text);
			return -(int)r.u.error.err;
		}
		if (value)
			*value = r.u.ok.value;
		return 0;
	}
}

static int send_req(struct simfab_client *c, struct simfab_msg *m, uint32_t *value)
{
	return send_req_fd(c, m, value, -1);
}

int simfab_client_hello(struct simfab_client *c, const struct simfab_port_info *info)
{
	struct simfab_msg m = { .type = SIMFAB_HELLO };

	m.u.port = *info;
	return send_req(c, &m, NULL);
}

int simfab_client_port_update(struct simfab_client *c, const struct simfab_port_info *info)
{
	struct simfab_msg m = { .type = SIMFAB_PORT_UPDATE };

	m.u.port = *info;
	return send_req(c, &m, NULL);
}

int simfab_client_qp_create_pkey(struct simfab_client *c, enum simfab_qp_type type,
				 uint16_t pkey_index, uint32_t qkey, uint32_t *qpn)
{
	struct simfab_msg m = { .type = SIMFAB_QP_CREATE };

	m.u.qp_create.type = (uint8_t)type;
	m.u.qp_create.pkey_index = pkey_index;
	m.u.qp_create.qkey = qkey;
	return send_req(c, &m, qpn);
}

int simfab_client_qp_create(struct simfab_client *c, enum simfab_qp_type type, uint32_t qkey,
			    uint32_t *qpn)
{
	return simfab_client_qp_create_pkey(c, type, 0, qkey, qpn);
}

int simfab_client_qp_modify(struct simfab_client *c, uint32_t qpn, uint32_t qkey)
{
	struct simfab_msg m = { .type = SIMFAB_QP_MODIFY };

	m.u.qp_modify.qpn = qpn;
	m.u.qp_modify.qkey = qkey;
	return send_req(c, &m, NULL);
}

int simfab_client_qp_modify_pkey(struct simfab_client *c, uint32_t qpn, uint16_t pkey_index,
				 uint32_t qkey)
{
	struct simfab_msg m = { .type = SIMFAB_QP_MODIFY };

	m.u.qp_modify.qpn = qpn;
	m.u.qp_modify.qkey = qkey;
	m.u.qp_modify.set_pkey = true;
	m.u.qp_modify.pkey_index = pkey_index;
	return send_req(c, &m, NULL);
}

int simfab_client_qp_destroy(struct simfab_client *c, uint32_t qpn)
{
	struct simfab_msg m = { .type = SIMFAB_QP_DESTROY };

	m.u.qp_destroy.qpn = qpn;
	return send_req(c, &m, NULL);
}

static int mcast(struct simfab_client *c, uint8_t type, uint32_t qpn, const union ib_gid *mgid,
		 uint16_t mlid)
{
	struct simfab_msg m = { .type = type };

	m.u.mcast.qpn = qpn;
	m.u.mcast.mgid = *mgid;
	m.u.mcast.mlid = mlid;
	return send_req(c, &m, NULL);
}

int simfab_client_mcast_attach(struct simfab_client *c, uint32_t qpn, const union ib_gid *mgid,
			       uint16_t mlid)
{
	return mcast(c, SIMFAB_MCAST_ATTACH, qpn, mgid, mlid);
}

int simfab_client_mcast_detach(struct simfab_client *c, uint32_t qpn, const union ib_gid *mgid,
			       uint16_t mlid)
{
	return mcast(c, SIMFAB_MCAST_DETACH, qpn, mgid, mlid);
}

int simfab_client_ring(struct simfab_client *c, uint32_t slots)
{
	size_t bytes = simfab_ring_bytes(slots);
	struct simfab_msg m = { .type = SIMFAB_RING };
	uint8_t *mem;
	int fd, ret;

	if (!bytes)
		return -EINVAL;
	if (c->rmap)
		return -EALREADY;
	fd = memfd_create("ibgw-simfab-ring", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mem == MAP_FAILED) {
		ret = -errno;
		close(fd);
		return ret;
	}
	/* Both consumers start asleep: the first packet each way comes with a KICK. */
	simfab_ring_view(mem, slots, 0, &c->rtx);
	simfab_ring_view(mem, slots, 1, &c->rrx);
	atomic_store(ring_word(&c->rtx, RING_SLEEPING), 1);
	atomic_store(ring_word(&c->rrx, RING_SLEEPING), 1);
	m.u.ring.slots = slots;
	ret = send_req_fd(c, &m, NULL, fd);
	close(fd); /* the mapping (ours and the fabric's) keeps the memory */
	if (ret < 0) {
		munmap(mem, bytes);
		return ret;
	}
	c->rmap = mem;
	c->rmap_len = bytes;
	return 0;
}

/* Tell the fabric its ring from us has packets (it said it may sleep). Best effort: a
 * full socket means the fabric has messages to read, and it drains the ring first. */
static void send_kick(struct simfab_client *c)
{
	uint8_t buf[SIMFAB_HDR_LEN + 4];
	struct simfab_msg m = { .type = SIMFAB_KICK };

	if (simfab_encode(&m, buf, sizeof(buf)) > 0)
		(void)send(c->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* After a push that found the fabric asleep (ring commit returned 1). */
static void kick_now_or_later(struct simfab_client *c)
{
	if (c->corked)
		c->kick_owed = true;
	else
		send_kick(c);
}

void simfab_client_cork(struct simfab_client *c)
{
	c->corked = true;
}

void simfab_client_uncork(struct simfab_client *c)
{
	c->corked = false;
	if (c->kick_owed) {
		c->kick_owed = false;
		send_kick(c);
	}
}

uint8_t *simfab_client_tx_slot(struct simfab_client *c)
{
	int err;

	return c->rmap ? simfab_ring_slot(&c->rtx, &err) : NULL;
}

int simfab_client_send_slot(struct simfab_client *c, uint32_t src_qpn, size_t len)
{
	int ret;

	if (!c->rmap)
		return -EINVAL;
	ret = simfab_ring_commit(&c->rtx, src_qpn, len);
	if (ret == 1)
		kick_now_or_later(c);
	return ret == 1 ? 0 : ret;
}

int simfab_client_send(struct simfab_client *c, uint32_t src_qpn, const uint8_t *pkt, size_t len)
{
	uint8_t hdr[SIMFAB_HDR_LEN + SIMFAB_PACKET_BODY];
	struct iovec iov[2] = { { hdr, sizeof(hdr) }, { (void *)pkt, len } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };

	if (c->rmap) {
		int ret = simfab_ring_push(&c->rtx, src_qpn, pkt, len);

		if (ret == 1)
			kick_now_or_later(c);
		return ret == 1 ? 0 : ret;
	}
	if (simfab_packet_header(hdr, src_qpn, len) < 0)
		return -EINVAL;
	if (sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		return errno == EPIPE ? -ECONNRESET : -errno;
	return 0;
}

static int to_event(struct simfab_client *c, const uint8_t *buf, size_t n, struct simfab_event *ev)
{
	struct simfab_msg r;
	const char *why = NULL;

	if (simfab_decode(buf, n, &r, &why) < 0) {
		snprintf(c->errmsg, sizeof(c->errmsg), "bad message from the fabric: %s", why);
		return -EPROTO;
	}
	memset(ev, 0, sizeof(*ev));
	ev->type = r.type;
	if (r.type == SIMFAB_PACKET) {
		ev->qpn = r.u.packet.qpn;
		ev->data = r.u.packet.data;
		ev->len = r.u.packet.len;
		return 0;
	}
	if (r.type == SIMFAB_PORT_STATE) {
		ev->port_state = r.u.port_state.state;
		return 0;
	}
	if (r.type == SIMFAB_KICK)
		return 1; /* nothing to hand out: look again */
	snprintf(c->errmsg, sizeof(c->errmsg), "unexpected %s from the fabric",
		 simfab_type_name(r.type));
	return -EPROTO;
}

/* Hand out the next message of the last recvmmsg (its buffer stays untouched until the
 * batch is refilled, after the last one is handed out and a later call). */
static int batch_next(struct simfab_client *c, struct simfab_event *ev)
{
	unsigned i = c->bat_next++;
	const struct mmsghdr *m = &c->bat_mm[i];

	if (m->msg_len == 0) { /* orderly shutdown */
		c->bat_next = c->bat_n = 0;
		return -ECONNRESET;
	}
	if (m->msg_hdr.msg_flags & MSG_TRUNC) {
		snprintf(c->errmsg, sizeof(c->errmsg), "message longer than %d octets",
			 SIMFAB_MSG_MAX);
		return -EPROTO;
	}
	return to_event(c, c->bat_mem + (size_t)i * SIMFAB_MSG_MAX, m->msg_len, ev);
}

int simfab_client_recv(struct simfab_client *c, struct simfab_event *ev, int timeout_ms)
{
	int n, rc;

	if (c->rx_held) {
		simfab_ring_pop(&c->rrx);
		c->rx_held = false;
	}
	/* rc 1: a KICK, nothing to hand out; look again. */
	for (;;) {
		if (c->bat_next < c->bat_n) {
			rc = batch_next(c, ev);
			if (rc != 1)
				return rc;
			continue;
		}
		if (c->count) {
			unsigned slot = c->head;
			size_t len = c->ring[slot].len;

			/* Copy out so the slot is free and ev->data stays valid until the next
			 * call. */
			memcpy(c->rx, c->ring[slot].buf, len);
			c->head = (c->head + 1) % CLIENT_RING;
			c->count--;
			rc = to_event(c, c->rx, len, ev);
			if (rc != 1)
				return rc;
			continue;
		}
		if (c->rmap) {
			uint32_t qpn;
			const uint8_t *data;
			size_t len;

			rc = simfab_ring_peek(&c->rrx, &qpn, &data, &len);
			if (rc < 0) {
				snprintf(c->errmsg, sizeof(c->errmsg),
					 "the fabric's ring holds an impossible index or length");
				return -EPROTO;
			}
			if (rc == 1) {
				memset(ev, 0, sizeof(*ev));
				ev->type = SIMFAB_PACKET;
				ev->qpn = qpn;
				ev->data = data;
				ev->len = len;
				c->rx_held = true;
				return 0;
			}
		}
		if (timeout_ms == 0) {
			for (unsigned i = 0; i < CLIENT_BATCH; i++)
				c->bat_mm[i].msg_hdr.msg_flags = 0;
			do
				n = recvmmsg(c->fd, c->bat_mm, CLIENT_BATCH, MSG_DONTWAIT, NULL);
			while (n < 0 && errno == EINTR);
			if (n < 0)
				return errno == EAGAIN                         ? -EAGAIN
				       : errno == ECONNRESET || errno == EPIPE ? -ECONNRESET
									       : -errno;
			if (n == 0)
				return -ECONNRESET;
			c->bat_next = 0;
			c->bat_n = (unsigned)n;
			continue;
		}
		n = read_msg(c, timeout_ms);
		if (n == -ETIMEDOUT)
			n = -EAGAIN;
		if (n < 0)
			return n;
		rc = to_event(c, c->rx, (size_t)n, ev);
		if (rc != 1)
			return rc;
	}
}
