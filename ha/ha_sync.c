/*
 * State-sync records: encode a batch into datagrams, validate and read them back.
 *
 * One validation function (rec_validate) serves both directions, so the encoder never
 * produces what the decoder refuses.
 */
#include "ha/ha_sync.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/ib_bytes.h"

__attribute__((format(printf, 4, 5))) static enum ha_wire_err
fail(enum ha_wire_err err, char *why, size_t why_len, const char *fmt, ...)
{
	if (why && why_len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return err;
}

static const char *type_name(uint8_t type)
{
	switch (type) {
	case HA_SYNC_NEIGH:
		return "neighbour";
	case HA_SYNC_PATH:
		return "path";
	case HA_SYNC_ROUTE:
		return "route";
	}
	return "unknown";
}

/* Wire family octet (4 or 6, not the host's AF_ numbers) <-> address length. */
static unsigned family_len(uint8_t wire)
{
	return wire == 4 ? 4 : wire == 6 ? 16 : 0;
}

static uint8_t family_wire(uint8_t af)
{
	return af == AF_INET ? 4 : af == AF_INET6 ? 6 : 0;
}

static uint8_t family_af(uint8_t wire)
{
	return wire == 4 ? AF_INET : AF_INET6;
}

/* Body length of a record as encoded. */
static size_t rec_body_len(const struct ha_sync_rec *r)
{
	switch (r->type) {
	case HA_SYNC_NEIGH:
		return HA_SYNC_NEIGH_LEN;
	case HA_SYNC_PATH:
		return HA_SYNC_PATH_LEN;
	case HA_SYNC_ROUTE:
		return HA_SYNC_ROUTE_LEN + 16u * r->u.route.n_nexthops;
	}
	return 0;
}

static bool family_ok(const struct ip_addr *a)
{
	return a->family == AF_INET || a->family == AF_INET6;
}

static bool host_bits_clear(const struct ip_prefix *p)
{
	struct ip_prefix m = *p;

	ip_prefix_mask(&m);
	return memcmp(m.addr.bytes, p->addr.bytes, sizeof(m.addr.bytes)) == 0;
}

/* The rules a record must meet, on either side of the wire. */
static enum ha_wire_err rec_validate(const struct ha_sync_rec *r, char *why, size_t why_len)
{
	switch (r->type) {
	case HA_SYNC_NEIGH: {
		const struct ha_sync_neigh *n = &r->u.neigh;
		size_t nl = strnlen(n->link, HA_NAME_LEN);
		if (!family_ok(&n->addr))
			return fail(HA_WIRE_MALFORMED, why, why_len, "neighbour: bad family");
		if (nl == 0 || nl == HA_NAME_LEN)
			return fail(HA_WIRE_MALFORMED, why, why_len,
				    "neighbour: link name empty or not NUL-terminated");
		if (n->lladdr_len == 0 || n->lladdr_len > HA_SYNC_LLADDR_MAX)
			return fail(HA_WIRE_MALFORMED, why, why_len,
				    "neighbour: link-layer address of %u octets (1..%d)",
				    n->lladdr_len, HA_SYNC_LLADDR_MAX);
		if (n->state < HA_NEIGH_REACHABLE || n->state > HA_NEIGH_PERMANENT)
			return fail(HA_WIRE_MALFORMED, why, why_len, "neighbour: state %u",
				    n->state);
		return HA_WIRE_OK;
	}
	case HA_SYNC_PATH: {
		const struct ha_sync_path *p = &r->u.path;
		if (p->dlid == 0 || p->dlid >= 0xc000)
			return fail(HA_WIRE_MALFORMED, why, why_len,
				    "path: DLID 0x%04x is not a unicast LID", p->dlid);
		if (p->sl > 15 || p->mtu < 1 || p->mtu > 5 || p->rate > 63)
			return fail(HA_WIRE_MALFORMED, why, why_len,
				    "path: SL %u, MTU code %u or rate code %u out of range", p->sl,
				    p->mtu, p->rate);
		return HA_WIRE_OK;
	}
	case HA_SYNC_ROUTE: {
		const struct ha_sync_route *rt = &r->u.route;
		if (!family_ok(&rt->prefix.addr) || rt->prefix.len > ip_addr_bits(&rt->prefix.addr))
			return fail(HA_WIRE_MALFORMED, why, why_len,
				    "route: bad family or prefix length %u", rt->prefix.len);
		if (!host_bits_clear(&rt->prefix))
			return fail(HA_WIRE_MALFORMED, why, why_len, "route: prefix has host bits");
		if (rt->n_nexthops > HA_SYNC_MAX_NEXTHOPS)
			return fail(HA_WIRE_MALFORMED, why, why_len,
				    "route: %u next hops (at most %d)", rt->n_nexthops,
				    HA_SYNC_MAX_NEXTHOPS);
		for (unsigned i = 0; i < rt->n_nexthops; i++)
			if (rt->nexthops[i].family != rt->prefix.addr.family)
				return fail(HA_WIRE_MALFORMED, why, why_len,
					    "route: next hop %u of another family", i);
		return HA_WIRE_OK;
	}
	}
	return fail(HA_WIRE_MALFORMED, why, why_len, "record type %u unknown", r->type);
}

static void put_addr(uint8_t *p, const struct ip_addr *a)
{
	memset(p, 0, 16);
	memcpy(p, a->bytes, a->family == AF_INET ? 4 : 16);
}

static void get_addr(const uint8_t *p, uint8_t wire_family, struct ip_addr *a)
{
	memset(a, 0, sizeof(*a));
	a->family = family_af(wire_family);
	memcpy(a->bytes, p, family_len(wire_family));
}

/* Write one validated record (header and body); returns its whole length. */
static size_t rec_put(uint8_t *p, const struct ha_sync_rec *r)
{
	size_t blen = rec_body_len(r);
	uint8_t *b = p + HA_SYNC_REC_HDR_LEN;

	p[0] = r->type;
	p[1] = r->del ? HA_SYNC_R_DELETE : 0;
	ib_put_be16(p + 2, (uint16_t)blen);
	memset(b, 0, blen);
	switch (r->type) {
	case HA_SYNC_NEIGH: {
		const struct ha_sync_neigh *n = &r->u.neigh;
		b[0] = family_wire(n->addr.family);
		b[1] = n->state;
		b[2] = n->lladdr_len;
		put_addr(b + 4, &n->addr);
		memcpy(b + 20, n->link, strnlen(n->link, HA_NAME_LEN - 1));
		memcpy(b + 52, n->lladdr, n->lladdr_len);
		break;
	}
	case HA_SYNC_PATH: {
		const struct ha_sync_path *pa = &r->u.path;
		memcpy(b, pa->dgid, 16);
		ib_put_be16(b + 16, pa->dlid);
		b[18] = pa->sl;
		b[19] = pa->mtu;
		b[20] = pa->rate;
		break;
	}
	case HA_SYNC_ROUTE: {
		const struct ha_sync_route *rt = &r->u.route;
		b[0] = family_wire(rt->prefix.addr.family);
		b[1] = rt->prefix.len;
		b[2] = rt->n_nexthops;
		ib_put_be32(b + 4, rt->metric);
		put_addr(b + 8, &rt->prefix.addr);
		for (unsigned i = 0; i < rt->n_nexthops; i++)
			put_addr(b + 24 + 16 * i, &rt->nexthops[i]);
		break;
	}
	}
	return HA_SYNC_REC_HDR_LEN + blen;
}

/* Octets of an IPv4 address field past the 4 used must be zero: one encoding only. */
static bool v4_padding_clear(const uint8_t *p, uint8_t wire_family)
{
	if (wire_family != 4)
		return true;
	for (int i = 4; i < 16; i++)
		if (p[i])
			return false;
	return true;
}

/* Read the body of one record whose header said type and blen (bounds already
 * checked); then validate it. */
static enum ha_wire_err rec_parse(const uint8_t *b, uint8_t type, uint8_t flags, size_t blen,
				  struct ha_sync_rec *r, char *why, size_t why_len)
{
	memset(r, 0, sizeof(*r));
	r->type = type;
	r->del = flags & HA_SYNC_R_DELETE;
	switch (type) {
	case HA_SYNC_NEIGH:
		if (blen != HA_SYNC_NEIGH_LEN || !family_len(b[0]))
			break;
		if (!v4_padding_clear(b + 4, b[0]) || b[2] > HA_SYNC_LLADDR_MAX)
			break;
		get_addr(b + 4, b[0], &r->u.neigh.addr);
		r->u.neigh.state = b[1];
		r->u.neigh.lladdr_len = b[2];
		/* up to the NUL only: what follows it is padding, not part of the name */
		memcpy(r->u.neigh.link, b + 20, strnlen((const char *)b + 20, HA_NAME_LEN));
		memcpy(r->u.neigh.lladdr, b + 52, r->u.neigh.lladdr_len);
		return rec_validate(r, why, why_len);
	case HA_SYNC_PATH:
		if (blen != HA_SYNC_PATH_LEN)
			break;
		memcpy(r->u.path.dgid, b, 16);
		r->u.path.dlid = ib_get_be16(b + 16);
		r->u.path.sl = b[18];
		r->u.path.mtu = b[19];
		r->u.path.rate = b[20];
		return rec_validate(r, why, why_len);
	case HA_SYNC_ROUTE:
		if (blen < HA_SYNC_ROUTE_LEN || !family_len(b[0]) || b[2] > HA_SYNC_MAX_NEXTHOPS ||
		    blen != HA_SYNC_ROUTE_LEN + 16u * b[2] || !v4_padding_clear(b + 8, b[0]))
			break;
		get_addr(b + 8, b[0], &r->u.route.prefix.addr);
		r->u.route.prefix.len = b[1];
		r->u.route.n_nexthops = b[2];
		r->u.route.metric = ib_get_be32(b + 4);
		for (unsigned i = 0; i < b[2]; i++) {
			if (!v4_padding_clear(b + 24 + 16 * i, b[0]))
				return fail(HA_WIRE_MALFORMED, why, why_len,
					    "route: next hop %u has octets past its IPv4 address",
					    i);
			get_addr(b + 24 + 16 * i, b[0], &r->u.route.nexthops[i]);
		}
		return rec_validate(r, why, why_len);
	default:
		return fail(HA_WIRE_MALFORMED, why, why_len, "record type %u unknown", type);
	}
	return fail(HA_WIRE_MALFORMED, why, why_len,
		    "%s record: %zu-octet body, bad family, or octets past an IPv4 address",
		    type_name(type), blen);
}

/* Write the sync body header of a message being filled. */
static void put_body_hdr(uint8_t *buf, uint32_t batch, uint16_t part, uint16_t flags,
			 uint16_t n_records)
{
	uint8_t *p = buf + HA_WIRE_HDR_LEN;

	ib_put_be32(p, batch);
	ib_put_be16(p + 4, part);
	ib_put_be16(p + 6, flags);
	ib_put_be16(p + 8, n_records);
	ib_put_be16(p + 10, 0);
}

int ha_sync_encode(const struct ha_origin *o, uint64_t *seq, const struct ha_key *key,
		   uint32_t batch, bool full, const struct ha_sync_rec *recs, size_t n,
		   size_t max_len, ha_sync_emit_fn emit, void *arg)
{
	uint8_t buf[HA_SYNC_MAX_LEN];

	if (max_len < HA_SYNC_MIN_DATAGRAM || max_len > HA_SYNC_MAX_LEN || (n && !recs))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (rec_validate(&recs[i], NULL, 0) != HA_WIRE_OK)
			return -EINVAL;

	size_t i = 0;
	uint16_t part = 0;
	do {
		size_t len = HA_WIRE_HDR_LEN + HA_SYNC_BODY_LEN;
		uint16_t count = 0;
		while (i < n && count < UINT16_MAX &&
		       len + HA_SYNC_REC_HDR_LEN + rec_body_len(&recs[i]) + HA_WIRE_MAC_LEN <=
			   max_len) {
			len += rec_put(buf + len, &recs[i]);
			count++;
			i++;
		}
		uint16_t flags =
		    (uint16_t)((i == n ? HA_SYNC_F_LAST : 0) | (full ? HA_SYNC_F_FULL : 0));
		ha_wire_put_hdr(buf, o, HA_MSG_SYNC, ++*seq);
		put_body_hdr(buf, batch, part++, flags, count);
		len += HA_WIRE_MAC_LEN;
		ha_wire_seal(buf, len, key);
		int rc = emit(arg, buf, len);
		if (rc)
			return rc;
	} while (i < n);
	return part;
}

enum ha_wire_err ha_sync_decode(const uint8_t *buf, size_t len, const struct ha_key *key,
				struct ha_sync_msg *out, char *why, size_t why_len)
{
	enum ha_wire_err e = ha_wire_open(buf, len, key, HA_MSG_SYNC, HA_SYNC_MIN_LEN,
					  HA_SYNC_MAX_LEN, &out->hdr, why, why_len);
	if (e != HA_WIRE_OK)
		return e;

	const uint8_t *p = buf + HA_WIRE_HDR_LEN;
	uint16_t flags = ib_get_be16(p + 6);
	out->batch = ib_get_be32(p);
	out->part = ib_get_be16(p + 4);
	out->last = flags & HA_SYNC_F_LAST;
	out->full = flags & HA_SYNC_F_FULL;
	out->n_records = ib_get_be16(p + 8);
	out->recs = p + HA_SYNC_BODY_LEN;
	out->recs_len = out->hdr.length - HA_SYNC_MIN_LEN;
	out->off = 0;
	out->index = 0;

	/* Walk every record now: the message is taken whole or not at all. */
	size_t off = 0;
	struct ha_sync_rec r;
	for (unsigned i = 0; i < out->n_records; i++) {
		if (out->recs_len - off < HA_SYNC_REC_HDR_LEN)
			return fail(HA_WIRE_BAD_LENGTH, why, why_len,
				    "record %u of %u: header past the end", i, out->n_records);
		const uint8_t *rh = out->recs + off;
		size_t blen = ib_get_be16(rh + 2);
		if (out->recs_len - off - HA_SYNC_REC_HDR_LEN < blen)
			return fail(HA_WIRE_BAD_LENGTH, why, why_len,
				    "record %u of %u: %zu-octet body past the end", i,
				    out->n_records, blen);
		e = rec_parse(rh + HA_SYNC_REC_HDR_LEN, rh[0], rh[1], blen, &r, why, why_len);
		if (e != HA_WIRE_OK)
			return e;
		off += HA_SYNC_REC_HDR_LEN + blen;
	}
	if (off != out->recs_len)
		return fail(HA_WIRE_BAD_LENGTH, why, why_len, "%zu octets after the %u records",
			    out->recs_len - off, out->n_records);
	return HA_WIRE_OK;
}

bool ha_sync_next(struct ha_sync_msg *m, struct ha_sync_rec *rec)
{
	if (m->index >= m->n_records)
		return false;
	const uint8_t *rh = m->recs + m->off;
	size_t blen = ib_get_be16(rh + 2);
	/* Validated by ha_sync_decode: cannot fail here. */
	rec_parse(rh + HA_SYNC_REC_HDR_LEN, rh[0], rh[1], blen, rec, NULL, 0);
	m->off += HA_SYNC_REC_HDR_LEN + blen;
	m->index++;
	return true;
}

/* ---- the outgoing queue ---------------------------------------------------------------- */

int ha_sync_queue_push(void *arg, const uint8_t *msg, size_t len)
{
	struct ha_sync_queue *q = arg;
	uint8_t *copy;

	if (q->n == q->cap) {
		unsigned cap = q->cap ? 2 * q->cap : 64;
		uint8_t **m = realloc(q->msg, cap * sizeof(*m));
		size_t *l;

		if (!m)
			return -ENOMEM;
		q->msg = m;
		l = realloc(q->len, cap * sizeof(*l));
		if (!l)
			return -ENOMEM;
		q->len = l;
		q->cap = cap;
	}
	copy = malloc(len);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, msg, len);
	q->msg[q->n] = copy;
	q->len[q->n++] = len;
	return 0;
}

unsigned ha_sync_queue_drain(struct ha_sync_queue *q, unsigned max, ha_sync_send_fn send, void *ctx,
			     unsigned *sent, unsigned *failed)
{
	unsigned done = 0;

	while (q->head < q->n && done < max) {
		int ret = send(ctx, q->msg[q->head], q->len[q->head]);

		if (ret == -ENOBUFS)
			break;
		if (ret < 0)
			(*failed)++;
		else
			(*sent)++;
		free(q->msg[q->head++]);
		done++;
	}
	if (q->head == q->n)
		q->head = q->n = 0;
	return q->n - q->head;
}

void ha_sync_queue_clear(struct ha_sync_queue *q)
{
	while (q->head < q->n)
		free(q->msg[q->head++]);
	q->head = q->n = 0;
}

void ha_sync_queue_free(struct ha_sync_queue *q)
{
	ha_sync_queue_clear(q);
	free(q->msg);
	free(q->len);
	memset(q, 0, sizeof(*q));
}
