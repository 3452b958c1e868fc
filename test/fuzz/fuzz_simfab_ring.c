/*
 * libFuzzer harness for the simulated fabric's shared rings (lib/ib_simfab.c,
 * simfab_ring_*): the fabric maps memory a port process writes, so whatever the peer
 * put there -- any head, tail and sleeping words, any slot lengths and QPNs -- must be
 * taken or refused (-EPROTO), never read or written outside the mapping. A packet handed
 * out lies inside its slot with a length in IB_PACKET_MIN_LEN..IB_PACKET_MAX_LEN, and
 * never more packets than slots come out of one look.
 *
 * Input: octets 0-3 the consumer's own tail, 4-7 the shared head of ring 0, 8-11 the
 * shared tail of ring 1 (the producer's view), 12-15 the producer's own head, then 8
 * octets (length, QPN) per slot of ring 0 for as many slots as the input covers; what
 * remains is the payload pushed into ring 1 (its length clamped to 0..IB_PACKET_MAX_LEN+1).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ib_simfab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static uint32_t take32(const uint8_t **p, size_t *left)
{
	uint32_t v = 0;

	if (*left >= 4) {
		memcpy(&v, *p, 4);
		*p += 4;
		*left -= 4;
	}
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *mem, pkt[IB_PACKET_MAX_LEN + 1];
	const uint32_t slots = SIMFAB_RING_SLOTS_MIN;
	size_t bytes = simfab_ring_bytes(slots), left = size, plen;
	const uint8_t *p = data;
	struct simfab_ring in, out;
	uint32_t v;
	int rc;

	if (!mem)
		mem = malloc(bytes);
	check(mem != NULL);
	memset(mem, 0, bytes);
	simfab_ring_view(mem, slots, 0, &in);
	simfab_ring_view(mem, slots, 1, &out);
	in.pos = take32(&p, &left);
	v = take32(&p, &left);
	memcpy(in.ctl, &v, 4); /* ring 0 head, as the port wrote it */
	v = take32(&p, &left);
	memcpy(out.ctl + 64, &v, 4); /* ring 1 tail, as the port wrote it */
	out.pos = take32(&p, &left);
	for (uint32_t s = 0; s < slots && left >= 8; s++) {
		memcpy(in.slots + (size_t)s * SIMFAB_RING_SLOT, p, 8);
		p += 8;
		left -= 8;
	}

	for (uint32_t n = 0;; n++) {
		uint32_t qpn;
		const uint8_t *d;
		size_t len;

		rc = simfab_ring_peek(&in, &qpn, &d, &len);
		check(rc == 1 || rc == 0 || rc == -EPROTO);
		if (rc != 1)
			break;
		check(n < slots);
		check(len >= IB_PACKET_MIN_LEN && len <= IB_PACKET_MAX_LEN);
		check(d >= in.slots && d + len <= in.slots + (size_t)slots * SIMFAB_RING_SLOT);
		simfab_ring_pop(&in);
	}

	plen = left > IB_PACKET_MAX_LEN + 1 ? IB_PACKET_MAX_LEN + 1 : left;
	memcpy(pkt, p, plen);
	for (int i = 0; i < 2; i++) {
		rc = simfab_ring_push(&out, (uint32_t)plen, pkt, plen);
		check(rc == 0 || rc == 1 || rc == -EAGAIN || rc == -EPROTO || rc == -EINVAL);
	}
	return 0;
}
