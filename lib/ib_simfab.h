/*
 * The simulated IB fabric's port protocol: how an HCA port (the verbs shim's, in the
 * gateway, an IB-side host or a test tool) attaches to ibgw-fabric and exchanges complete wire
 * packets with it.
 *
 * Transport: a unix SOCK_SEQPACKET socket at a filesystem path (filesystem sockets work
 * across network namespaces; ibsim's abstract ones do not). One connection is one HCA
 * port. Every datagram is exactly one message: an 8-octet header then a body whose
 * length the type fixes (or bounds). All integers are big endian (network order).
 *
 *   header  0: version (SIMFAB_VERSION)  1: type  2-3: length (whole message, header
 *           included; must equal the datagram's length)  4-7: seq (a request's number,
 *           echoed in its OK/ERROR reply; 0 in PACKET and PORT_STATE)
 *
 *   HELLO, PORT_UPDATE (client -> fabric), body 108 + 2 * n_pkeys octets:
 *        0-63: node name, NUL padded (at least one NUL)   64: port number (1..254)
 *        65: LMC (0..7)   66: active MTU (IB enum 1..5 = 256..4096)
 *        67: flags (SIMFAB_HELLO_PRIVILEGED)   68-75: port GUID   76-83: GID prefix
 *        84-85: base LID (unicast, 1..0xBFFF)   86-87: SM LID   88-89: n_pkeys (1..128)
 *        90-107: reserved (0)   108..: P_Key table, n_pkeys x 2 octets
 *      The identity the client read through libibumad (umad_get_port) -- under
 *      umad2sim, the node's simulated port as OpenSM configured it. HELLO must come
 *      first and once; PORT_UPDATE replaces the identity after a port event (LID, SM or
 *      P_Key change). Answer: OK (value 0) or ERROR.
 *   QP_CREATE   body 8:  0: QP type (SIMFAB_QP_UD/RC/UC)  1: reserved  2-3: P_Key
 *        index (into the port's P_Key table)  4-7: Q_Key (UD; 0 for RC/UC)
 *      Answer: OK whose value is the QPN the fabric assigned (24-bit, never 0 or 1: QP0
 *      and QP1 exist implicitly on every port; QP1 is the GSI with Q_Key 0x80010000).
 *      A controlled Q_Key (high bit set) needs a privileged port (ERROR -EPERM).
 *      As on hardware, a QP sends with the P_Key at its index and accepts only
 *      packets whose P_Key matches that one; QP1 accepts any P_Key of the table.
 *   QP_MODIFY   body 8 or 12:  0-3: QPN  4-7: Q_Key  8-9: P_Key index  10-11: reserved (0)
 *      The 12-octet form also moves the QP to another P_Key index (the verbs shim's
 *      RESET->INIT, which names the index after the QP exists).   Answer: OK 0
 *   QP_DESTROY  body 4:  0-3: QPN                                     Answer: OK 0
 *   MCAST_ATTACH, MCAST_DETACH  body 24:  0-3: QPN (UD)  4-5: MLID  6-7: reserved
 *        8-23: MGID                                                   Answer: OK 0
 *   PACKET (both ways)  body 8 + packet:  0-3: QPN  4-7: reserved (0)  8..: the packet,
 *        LRH through VCRC (IB_PACKET_MIN_LEN .. IB_PACKET_MAX_LEN octets)
 *      client -> fabric: QPN is the sending QP (its own; QP1 for GMPs); no answer.
 *      fabric -> client: QPN is the receiving QP on this port (for multicast, one
 *      PACKET per attached QP).
 *   PORT_STATE (fabric -> client)  body 4:  0: state (SIMFAB_PORT_DOWN/ACTIVE)  1-3: 0
 *   OK (fabric -> client)     body 4:  0-3: value
 *   ERROR (fabric -> client)  body 4 + text:  0-3: errno (positive)  4..: message,
 *        1..SIMFAB_ERRMSG_MAX octets of printable ASCII, not NUL terminated
 *   RING (client -> fabric)  body 4:  0-3: slots per direction (a power of two,
 *        SIMFAB_RING_SLOTS_MIN..MAX); the datagram carries one file descriptor
 *        (SCM_RIGHTS), a memfd of at least simfab_ring_bytes(slots) octets laid out as
 *        below. From the answer OK on, PACKETs go both ways through the two rings in
 *        it instead of the socket (the socket keeps requests, answers and PORT_STATE).
 *        Optional: a client that never sends it stays on the socket.
 *   KICK (both ways)  body 4: 0-3: reserved (0). "The ring you consume has packets":
 *        sent only when the consumer said it may sleep (below); carries nothing else.
 *
 * The rings (shared memory, host byte order: both ends are on one machine). At 0 and
 * 128: the control lines of ring 0 (port -> fabric) and ring 1 (fabric -> port), each
 * { u32 head (written by the producer only); 60 octets pad; u32 tail (consumer);
 * u32 sleeping (consumer sets, producer clears) }. At 256: ring 0's slots, then ring 1's,
 * SIMFAB_RING_SLOT octets each: u32 packet length, u32 QPN (as in PACKET), the packet.
 * Single producer, single consumer: the producer writes slot head % slots and then
 * head + 1 (release); the consumer reads slot tail % slots and then writes tail + 1.
 * A consumer that finds its ring empty sets sleeping and looks once more (with a full
 * barrier between); a producer that, after publishing, finds sleeping set clears it and
 * sends KICK on the socket, which is what wakes a consumer blocked in poll/epoll. So a
 * burst costs one wake-up, not one per packet, the way virtio rings suppress
 * notifications. Neither end trusts the other's indexes: head - tail above the slot
 * count, or a slot length outside IB_PACKET_MIN_LEN..IB_PACKET_MAX_LEN, is a protocol
 * error (the fabric closes that port's connection).
 *
 * The codec (simfab_encode/simfab_decode) checks every length against its type and
 * every field against its range, so both sides reject a malformed message with a
 * precise reason. The client helpers (simfab_client_*) are what every client shares:
 * a non-blocking socket usable in poll/epoll, synchronous requests (which queue any
 * PACKET or PORT_STATE arriving meanwhile), and packet send/receive.
 */
#ifndef IBGW_LIB_IB_SIMFAB_H
#define IBGW_LIB_IB_SIMFAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/ib_gid.h"
#include "lib/ib_packet.h"

#define SIMFAB_VERSION     1
#define SIMFAB_HDR_LEN     8
#define SIMFAB_NAME_MAX    64  /* node name field, NUL included */
#define SIMFAB_PKEYS_MAX   128 /* P_Key table entries in a HELLO */
#define SIMFAB_ERRMSG_MAX  200
#define SIMFAB_PORT_BODY   108 /* fixed part of HELLO/PORT_UPDATE */
#define SIMFAB_PACKET_BODY 8   /* PACKET body before the wire packet */
/* Longest message: a PACKET carrying the longest IB packet. */
#define SIMFAB_MSG_MAX (SIMFAB_HDR_LEN + SIMFAB_PACKET_BODY + IB_PACKET_MAX_LEN)

enum simfab_type {
	SIMFAB_HELLO = 1,
	SIMFAB_PORT_UPDATE = 2,
	SIMFAB_QP_CREATE = 3,
	SIMFAB_QP_MODIFY = 4,
	SIMFAB_QP_DESTROY = 5,
	SIMFAB_MCAST_ATTACH = 6,
	SIMFAB_MCAST_DETACH = 7,
	SIMFAB_PACKET = 8,
	SIMFAB_PORT_STATE = 9,
	SIMFAB_OK = 10,
	SIMFAB_ERROR = 11,
	SIMFAB_RING = 12,
	SIMFAB_KICK = 13,
};

/* Rings: slots per direction, and one slot (8-octet header + the longest packet,
 * rounded up to a cache line). */
#define SIMFAB_RING_SLOTS_MIN 16
#define SIMFAB_RING_SLOTS_MAX 1024
#define SIMFAB_RING_SLOT      ((8 + IB_PACKET_MAX_LEN + 63) / 64 * 64)
#define SIMFAB_RING_CTL       128 /* one direction's control lines */

enum simfab_qp_type {
	SIMFAB_QP_UD = 1,
	SIMFAB_QP_RC = 2,
	SIMFAB_QP_UC = 3,
};

enum simfab_port_state {
	SIMFAB_PORT_DOWN = 1,   /* IB PortState Down */
	SIMFAB_PORT_ACTIVE = 4, /* IB PortState Active */
};

/* HELLO flags. A privileged port may use controlled Q_Keys (high bit set) on its own
 * QPs, as a kernel consumer may on hardware; others may not. */
#define SIMFAB_HELLO_PRIVILEGED 0x01u

/* IB MTU enum (PortInfo NeighborMTU, PathRecord MTU) to octets and back. */
#define SIMFAB_MTU_256  1
#define SIMFAB_MTU_4096 5
unsigned simfab_mtu_bytes(uint8_t mtu_enum); /* 0 for a value outside 1..5 */

/* A port's identity, host order. */
struct simfab_port_info {
	char name[SIMFAB_NAME_MAX]; /* node name ("ibhost1"), NUL terminated */
	uint8_t port_num;
	uint8_t lmc;
	uint8_t mtu; /* active MTU, IB enum */
	uint8_t flags;
	uint64_t port_guid;
	uint64_t gid_prefix;
	uint16_t lid, sm_lid;
	uint16_t n_pkeys;
	uint16_t pkeys[SIMFAB_PKEYS_MAX];
};

/* One decoded message. For PACKET and ERROR, pkt/text point into the decoded buffer. */
struct simfab_msg {
	uint8_t type;
	uint32_t seq;
	union {
		struct simfab_port_info port; /* HELLO, PORT_UPDATE */
		struct {
			uint8_t type;
			uint16_t pkey_index;
			uint32_t qkey;
		} qp_create;
		struct {
			uint32_t qpn, qkey;
			bool set_pkey; /* the 12-octet form */
			uint16_t pkey_index;
		} qp_modify;
		struct {
			uint32_t qpn;
		} qp_destroy;
		struct {
			uint32_t qpn;
			uint16_t mlid;
			union ib_gid mgid;
		} mcast; /* MCAST_ATTACH, MCAST_DETACH */
		struct {
			uint32_t qpn;
			const uint8_t *data;
			size_t len;
		} packet;
		struct {
			uint8_t state;
		} port_state;
		struct {
			uint32_t value;
		} ok;
		struct {
			uint32_t err;
			const char *text; /* not NUL terminated */
			size_t len;
		} error;
		struct {
			uint32_t slots;
		} ring;
	} u;
};

/* Name of a message type ("HELLO"), or "?" */
const char *simfab_type_name(uint8_t type);

/*
 * Decode one message of len octets. Returns 0, or -EINVAL / -EMSGSIZE / -EPROTO with a
 * static reason in *why (when why is not NULL): "shorter than the header", "version 2,
 * expected 1", "length field 40 but message is 36 octets", "HELLO body is 10 octets,
 * expected 108 + 2 * n_pkeys", "LMC 9 above 7", ...
 */
int simfab_decode(const uint8_t *buf, size_t len, struct simfab_msg *msg, const char **why);

/* Encode msg into buf. Returns the message length, -ENOSPC, or -EINVAL (a field out of
 * range, the same checks the decoder makes). */
int simfab_encode(const struct simfab_msg *msg, uint8_t *buf, size_t len);

/* Encode just the PACKET header (type, QPN) in front of a packet the caller already
 * placed at buf + SIMFAB_HDR_LEN + SIMFAB_PACKET_BODY: for zero-copy senders. Returns
 * the message length or -EINVAL (pkt_len out of range). */
int simfab_packet_header(uint8_t *buf, uint32_t qpn, size_t pkt_len);

/* Check a port identity (ranges, P_Key table non-empty, name terminated and not empty).
 * Returns 0 or -EINVAL with a reason in *why. */
int simfab_port_info_check(const struct simfab_port_info *info, const char **why);

/*
 * Build a UD SEND-only packet from a port: LRH (VL 0, SL sl, SLID = the port's base
 * LID), a GRH when dgid is not NULL (SGID = gid_prefix:port_guid, HopLmt hop_limit),
 * BTH (P_Key, DestQP, PSN), DETH (Q_Key, SrcQP), payload; ib_packet_build() computes
 * lengths, pad and CRCs. Returns the packet length or its negative errno.
 */
struct simfab_ud_dest {
	uint16_t dlid;
	uint8_t sl;
	const union ib_gid *dgid; /* NULL: no GRH */
	uint8_t hop_limit;
	uint32_t dqpn, qkey;
	uint16_t pkey;
};
int simfab_build_ud(const struct simfab_port_info *port, uint32_t src_qpn, uint32_t psn,
		    const struct simfab_ud_dest *dest, const uint8_t *payload, size_t payload_len,
		    uint8_t *buf, size_t len);

/*
 * Client side. All functions return 0 (or a length) or -errno; requests wait for their
 * answer at most timeout_ms (-ETIMEDOUT), and an ERROR answer is returned as -errno
 * with its text kept for simfab_client_errmsg().
 */
struct simfab_client;

int simfab_client_connect(const char *path, struct simfab_client **out);
void simfab_client_close(struct simfab_client *c);
/* The socket, non-blocking: poll/epoll it for EPOLLIN, then simfab_client_recv(c, ...,
 * 0) until -EAGAIN. */
int simfab_client_fd(const struct simfab_client *c);
/* Text of the last ERROR answer or protocol failure ("" if none). */
const char *simfab_client_errmsg(const struct simfab_client *c);
void simfab_client_set_timeout(struct simfab_client *c, int timeout_ms); /* default 5000 */

int simfab_client_hello(struct simfab_client *c, const struct simfab_port_info *info);
int simfab_client_port_update(struct simfab_client *c, const struct simfab_port_info *info);
int simfab_client_qp_create(struct simfab_client *c, enum simfab_qp_type type, uint32_t qkey,
			    uint32_t *qpn);
/* The same with a P_Key index other than 0 (simfab_client_qp_create uses index 0). */
int simfab_client_qp_create_pkey(struct simfab_client *c, enum simfab_qp_type type,
				 uint16_t pkey_index, uint32_t qkey, uint32_t *qpn);
int simfab_client_qp_modify(struct simfab_client *c, uint32_t qpn, uint32_t qkey);
/* The same, also moving the QP to P_Key index pkey_index. */
int simfab_client_qp_modify_pkey(struct simfab_client *c, uint32_t qpn, uint16_t pkey_index,
				 uint32_t qkey);
int simfab_client_qp_destroy(struct simfab_client *c, uint32_t qpn);
int simfab_client_mcast_attach(struct simfab_client *c, uint32_t qpn, const union ib_gid *mgid,
			       uint16_t mlid);
int simfab_client_mcast_detach(struct simfab_client *c, uint32_t qpn, const union ib_gid *mgid,
			       uint16_t mlid);

/* Send one wire packet from local QP src_qpn. Never blocks: -EAGAIN when the socket is
 * full (the caller may poll for EPOLLOUT, or count a drop as a full send queue would). */
int simfab_client_send(struct simfab_client *c, uint32_t src_qpn, const uint8_t *pkt, size_t len);
/* Zero-copy send through the rings: where to build the next packet (IB_PACKET_MAX_LEN
 * octets), or NULL (no rings, or the ring is full: use simfab_client_send); then
 * simfab_client_send_slot publishes the len octets built there. */
uint8_t *simfab_client_tx_slot(struct simfab_client *c);
int simfab_client_send_slot(struct simfab_client *c, uint32_t src_qpn, size_t len);
/* Hold back the KICKs of the sends that follow until simfab_client_uncork, which sends
 * at most one: the doorbell of a batch (as a NIC's driver rings once per post of a WR
 * list), so a burst wakes the fabric once, not once per packet the fabric drains
 * faster than they come. Only ring sends are held; a caller must uncork before it
 * waits. */
void simfab_client_cork(struct simfab_client *c);
void simfab_client_uncork(struct simfab_client *c);

/* What simfab_client_recv returns: a PACKET (qpn, data/len valid until the next call
 * on c) or a PORT_STATE. */
struct simfab_event {
	uint8_t type; /* SIMFAB_PACKET or SIMFAB_PORT_STATE */
	uint32_t qpn;
	const uint8_t *data;
	size_t len;
	uint8_t port_state;
};

/* Wait at most timeout_ms (0: do not wait, -1: forever) for the next PACKET or
 * PORT_STATE. Returns 0, -EAGAIN (nothing yet), -ECONNRESET (fabric gone), -EPROTO. */
int simfab_client_recv(struct simfab_client *c, struct simfab_event *ev, int timeout_ms);

/*
 * One direction of the shared rings (layout above). pos is this end's own index: the
 * producer's head or the consumer's tail, never read back from the shared memory.
 */
struct simfab_ring {
	uint8_t *ctl;   /* the direction's control lines */
	uint8_t *slots; /* its first slot */
	uint32_t n;     /* slots, a power of two */
	uint32_t pos;
};

/* Octets of shared memory two rings of `slots` slots need (0: slots out of range or not
 * a power of two). */
size_t simfab_ring_bytes(uint32_t slots);
/* The view of direction dir (0: port -> fabric, 1: fabric -> port) of mapped memory. */
void simfab_ring_view(uint8_t *mem, uint32_t slots, int dir, struct simfab_ring *r);
/* Producer: copy a packet into the next slot. Returns 0, 1 (done, and the consumer
 * asked to be woken: send KICK), -EAGAIN (full) or -EPROTO (the consumer's tail is
 * impossible). */
int simfab_ring_push(struct simfab_ring *r, uint32_t qpn, const uint8_t *pkt, size_t len);
/* The same in two steps, for a producer that builds the packet in place: the packet
 * area of the next slot (IB_PACKET_MAX_LEN octets), or NULL with *err -EAGAIN (full) or
 * -EPROTO; then publish len octets written there (returns as simfab_ring_push, or
 * -EINVAL for a length or QPN out of range, the slot then not published). */
uint8_t *simfab_ring_slot(struct simfab_ring *r, int *err);
int simfab_ring_commit(struct simfab_ring *r, uint32_t qpn, size_t len);
/* Consumer: the oldest packet, left in its slot until simfab_ring_pop. Returns 1, 0
 * (empty: the producer will KICK after its next push) or -EPROTO (head or slot out of
 * range). */
int simfab_ring_peek(struct simfab_ring *r, uint32_t *qpn, const uint8_t **pkt, size_t *len);
void simfab_ring_pop(struct simfab_ring *r);

/* Move this client's PACKETs to shared rings of `slots` slots per direction (RING
 * above). Returns 0, or -errno (the client stays on the socket). */
int simfab_client_ring(struct simfab_client *c, uint32_t slots);

#endif
