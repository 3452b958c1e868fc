/*
 * libFuzzer harness for pkt/gro: TCP receive coalescing, fed as the simulated IB host
 * feeds it. Input: packets, each a 2-octet big-endian length and that many octets of IP
 * packet. Each one is appended to the held packet if it continues it, else the held one
 * is finished and this one may start a new merge. Every finished packet is checked: a
 * single segment comes out as it went in (its IP length's octets); a merged one is
 * within 65,535 octets, its IP header valid at its own length, its metadata accepted by
 * pkt/gso's check (the gateway's judge of GSO frames), its checksum verifies once
 * completed, and its payload is the segments' payloads end to end.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/gro.h"
#include "pkt/gso.h"
#include "pkt/ip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static uint8_t frame[14 + GRO_MAX_LEN + 64], first[GRO_MAX_LEN + 64], payloads[GRO_MAX_LEN];
static size_t first_len, payload_len;

static void finish(struct gro_tcp *g)
{
	uint8_t *ip = frame + 14;
	unsigned segs = g->segs;
	uint16_t hdr_len = g->hdr_len;
	struct gso_vnet v;
	struct gso_pkt gp;
	bool partial;
	size_t n;

	if (!segs)
		return;
	n = gro_tcp_end(g, 14, &v);
	check(g->segs == 0 && n <= GRO_MAX_LEN);
	if (segs == 1) {
		check(n == first_len && !memcmp(ip, first, n));
		check(v.flags == 0 && v.gso_type == GSO_VNET_NONE);
		return;
	}
	if ((ip[0] >> 4) == 4) {
		struct ip4_info ii;

		frame[12] = 0x08, frame[13] = 0x00;
		check(ip4_validate(ip, n, &ii) == IP_OK && ii.tot_len == n);
	} else {
		struct ip6_info ii;

		frame[12] = 0x86, frame[13] = 0xdd;
		check(ip6_validate(ip, n, &ii) == IP_OK && ii.pkt_len == n);
	}
	check(gso_check(&v, frame, 14 + n, &gp, &partial) == GSO_OK);
	check(gp.kind == GSO_TCP && partial);
	check(n - hdr_len == payload_len && !memcmp(ip + hdr_len, payloads, payload_len));
	check(gso_l4_csum_fill(ip, n));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gro_tcp g = { 0 };

	while (size >= 2) {
		size_t len = (size_t)(data[0] << 8 | data[1]);
		const uint8_t *p = data + 2;

		size -= 2;
		if (len > size)
			len = size;
		data += 2 + len;
		size -= len;
		if (g.segs && gro_tcp_append(&g, p, len)) {
			size_t added = g.len - g.hdr_len - payload_len;

			check(g.hdr_len + added <= len);
			memcpy(payloads + payload_len, p + g.hdr_len, added);
			payload_len += added;
			continue;
		}
		finish(&g);
		if (gro_tcp_begin(&g, frame + 14, sizeof(frame) - 14, p, len)) {
			first_len = g.len;
			memcpy(first, p, g.len);
			payload_len = g.len - g.hdr_len;
			memcpy(payloads, p + g.hdr_len, payload_len);
		}
	}
	finish(&g);
	return 0;
}
