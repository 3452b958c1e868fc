/*
 * State synchronisation records: what the master has learned (neighbours, IB paths,
 * learned routes) sent to the backup so a takeover does not start cold.
 *
 * A sync message is a failover message of type 2 (ha_wire.h: same header, same HMAC,
 * its own sequence space and replay window) whose body is
 *   64 batch(4)  68 part(2)  70 flags(2)  72 n_records(2)  74 reserved(2)
 *   76 records ...
 * and each record is  type(1) flags(1) length(2, of the body) body:
 *   NEIGH (1), 72 octets: family(1: 4 or 6) state(1) lladdr_len(1) reserved(1)
 *        addr(16, IPv4 in the first 4) link(32, NUL padded) lladdr(20, zero padded)
 *   PATH  (2), 24 octets: dgid(16) dlid(2) sl(1) mtu(1, IB MTU code 1..5) rate(1,
 *        PathRecord rate code) reserved(3)
 *   ROUTE (3), 24 + 16 n octets: family(1) prefix_len(1) n_nexthops(1) reserved(1)
 *        metric(4) prefix(16) n x next hop(16)
 * Record flag 0x01 (DELETE): the entry is gone on the sender. Message flags: 0x0001
 * LAST (the batch's last message), 0x0002 FULL (the batch is a whole dump: what the
 * receiver holds from an older dump and did not get again is stale).
 *
 * Decoding validates the whole message (framing, MAC, every record) before the caller
 * sees any record, so a bad message is refused whole and never half applied; the
 * records are then read one at a time into a caller's struct, with no allocation.
 */
#ifndef IBGW_HA_HA_SYNC_H
#define IBGW_HA_HA_SYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ha/ha_wire.h"
#include "lib/addr.h"

#define HA_SYNC_BODY_LEN     12
#define HA_SYNC_REC_HDR_LEN  4
#define HA_SYNC_NEIGH_LEN    72
#define HA_SYNC_PATH_LEN     24
#define HA_SYNC_ROUTE_LEN    24 /* without next hops */
#define HA_SYNC_MAX_NEXTHOPS 16 /* as a route's via list in the config */
#define HA_SYNC_LLADDR_MAX   20 /* an IPoIB hardware address */
#define HA_SYNC_MIN_LEN      (HA_WIRE_HDR_LEN + HA_SYNC_BODY_LEN + HA_WIRE_MAC_LEN)
#define HA_SYNC_MAX_LEN      65507 /* the largest UDP payload over IPv4 */
/* The smallest message that holds any one record: max_len may not be below it. */
#define HA_SYNC_MIN_DATAGRAM                                                                       \
	(HA_SYNC_MIN_LEN + HA_SYNC_REC_HDR_LEN + HA_SYNC_ROUTE_LEN + 16 * HA_SYNC_MAX_NEXTHOPS)

#define HA_SYNC_F_LAST   0x0001
#define HA_SYNC_F_FULL   0x0002
#define HA_SYNC_R_DELETE 0x01

enum ha_sync_type {
	HA_SYNC_NEIGH = 1,
	HA_SYNC_PATH = 2,
	HA_SYNC_ROUTE = 3,
};

enum ha_sync_neigh_state {
	HA_NEIGH_REACHABLE = 1, /* confirmed recently */
	HA_NEIGH_STALE = 2,     /* usable, to be confirmed on use */
	HA_NEIGH_PERMANENT = 3, /* configured or proxied: never aged */
};

struct ha_sync_neigh {
	struct ip_addr addr;
	char link[HA_NAME_LEN]; /* link or interface name, NUL-terminated */
	uint8_t lladdr[HA_SYNC_LLADDR_MAX];
	uint8_t lladdr_len; /* 6 Ethernet, 20 IPoIB; 1..20 */
	uint8_t state;      /* enum ha_sync_neigh_state */
};

struct ha_sync_path {
	uint8_t dgid[16];
	uint16_t dlid; /* unicast: 0x0001..0xbfff */
	uint8_t sl;    /* 0..15 */
	uint8_t mtu;   /* IB MTU code: 1 (256) .. 5 (4096) */
	uint8_t rate;  /* PathRecord rate code, 6 bits */
};

struct ha_sync_route {
	struct ip_prefix prefix; /* host bits clear */
	uint32_t metric;
	uint8_t n_nexthops; /* 0: directly connected */
	struct ip_addr nexthops[HA_SYNC_MAX_NEXTHOPS];
};

struct ha_sync_rec {
	uint8_t type; /* enum ha_sync_type */
	bool del;     /* HA_SYNC_R_DELETE */
	union {
		struct ha_sync_neigh neigh;
		struct ha_sync_path path;
		struct ha_sync_route route;
	} u;
};

/* Called with each finished message; a non-zero return stops the encoding and is
 * returned by ha_sync_encode. */
typedef int (*ha_sync_emit_fn)(void *arg, const uint8_t *msg, size_t len);

/*
 * Pack recs[0..n) into as few messages of at most max_len octets as fit (in order), each
 * sealed with key and numbered from *seq (advanced per message), and hand each to emit.
 * n == 0 still sends one (empty, LAST) message: a full dump of nothing is news.
 * Returns the number of messages, -EINVAL for a record that cannot be encoded (bad
 * family, name too long, too many next hops...) or max_len below HA_SYNC_MIN_DATAGRAM,
 * or emit's non-zero return. Nothing is emitted before every record has been checked.
 */
int ha_sync_encode(const struct ha_origin *o, uint64_t *seq, const struct ha_key *key,
		   uint32_t batch, bool full, const struct ha_sync_rec *recs, size_t n,
		   size_t max_len, ha_sync_emit_fn emit, void *arg);

/*
 * The messages of a dump on their way out. A full dump of a big box is hundreds of
 * datagrams (a PathRecord cache of thousands of hosts): sent at once they would
 * exhaust the sender's transmit buffers (the gateway's control message pool: 256) and
 * overrun the receiver's. So ha_sync_encode fills the queue (ha_sync_queue_push is an
 * ha_sync_emit_fn) and the sender drains it a burst at a time, stopping where its
 * buffers run out and going on at the next turn. A new dump replaces what is left of
 * the old one (ha_sync_queue_clear): the new one says everything again.
 */
struct ha_sync_queue {
	uint8_t **msg;
	size_t *len;
	unsigned n, head, cap;
};
/* Returns 0 or -ENOMEM (arg: struct ha_sync_queue). */
int ha_sync_queue_push(void *arg, const uint8_t *msg, size_t len);
/* What send returns: 0 sent; -ENOBUFS no buffer now (kept, drain stops); other < 0
 * cannot be sent (dropped, counted in *failed). */
typedef int (*ha_sync_send_fn)(void *ctx, const uint8_t *msg, size_t len);
/* Send up to max messages in order. Returns how many are still queued. */
unsigned ha_sync_queue_drain(struct ha_sync_queue *q, unsigned max, ha_sync_send_fn send, void *ctx,
			     unsigned *sent, unsigned *failed);
void ha_sync_queue_clear(struct ha_sync_queue *q); /* empty; keeps its capacity */
void ha_sync_queue_free(struct ha_sync_queue *q);

/* A decoded message: the header and a cursor over its (already validated) records. */
struct ha_sync_msg {
	struct ha_wire_hdr hdr;
	uint32_t batch;
	uint16_t part;
	bool last, full;
	uint16_t n_records;
	const uint8_t *recs; /* inside the caller's buffer */
	size_t recs_len;
	size_t off;     /* cursor */
	uint16_t index; /* records read so far */
};

enum ha_wire_err ha_sync_decode(const uint8_t *buf, size_t len, const struct ha_key *key,
				struct ha_sync_msg *out, char *why, size_t why_len);
/* The next record into *rec; false after the last. Only after ha_sync_decode said OK. */
bool ha_sync_next(struct ha_sync_msg *m, struct ha_sync_rec *rec);

#endif
