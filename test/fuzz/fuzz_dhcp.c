/*
 * libFuzzer harness for pkt/dhcp: parse arbitrary DHCP payloads (the first octet picks
 * the relay's settings: max_hops, option 82, the ids' lengths). What parses is
 * rewritten both ways; the outputs must parse again, the request with hops + 1, giaddr
 * set, option 82 present when it was added, the reply without option 82 and its other
 * options unchanged in order; the reply destination is one of the kinds, with an
 * address length that fits.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/dhcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t ids[255] = "ib0-circuit-remote-id-long-enough";
	static uint8_t out[DHCP_MAX_LEN + 600], back[DHCP_MAX_LEN + 600];
	struct dhcp_relay_params rp = { .giaddr = { 10, 10, 0, 1 } };
	struct dhcp_info d, d2;
	enum dhcp_result why;
	struct dhcp_dest t;
	size_t n;
	bool added;
	uint8_t sel;

	if (size < 1)
		return 0;
	sel = data[0];
	data++, size--;
	if (dhcp_parse(data, size, &d) != DHCP_OK)
		return 0;
	check(d.end_off >= DHCP_OPT_OFF && d.end_off < size && data[d.end_off] == DHCP_OPT_END);
	rp.max_hops = (uint8_t)(1 + (sel & 15));
	rp.option82 = sel & 0x10;
	rp.circuit_id = ids;
	rp.circuit_len = (sel & 0x20) ? 3 : (sel & 0x40) ? 200 : 0;
	rp.remote_id = ids;
	rp.remote_len = (sel & 0x80) ? 120 : 8;
	n = dhcp_relay_request(data, size, &d, &rp, out, (sel & 1) ? size + 20 : sizeof(out),
			       &added, &why);
	if (n) {
		check(dhcp_parse(out, n, &d2) == DHCP_OK);
		check(d2.hops == d.hops + 1 && d2.hops <= rp.max_hops);
		check(d2.xid == d.xid && d2.msg_type == d.msg_type);
		if (!d.giaddr[0] && !d.giaddr[1] && !d.giaddr[2] && !d.giaddr[3])
			check(!memcmp(d2.giaddr, rp.giaddr, 4));
		else
			check(!memcmp(d2.giaddr, d.giaddr, 4));
		check(d2.has_relay_info == (d.has_relay_info || added));
		check(!added || (rp.option82 && !d.has_relay_info));
		if (!added)
			check(n == size);
	} else {
		check(why == DHCP_HOPS_EXCEEDED || why == DHCP_NO_ROOM);
		check(why != DHCP_HOPS_EXCEEDED || d.hops >= rp.max_hops);
	}
	n = dhcp_relay_reply(data, size, &d, back, sizeof(back));
	check(n > 0 && n <= size);
	check(dhcp_parse(back, n, &d2) == DHCP_OK);
	check(!d2.has_relay_info && d2.xid == d.xid && d2.msg_type == d.msg_type);
	check(!memcmp(back, data, DHCP_OPT_OFF));
	for (int ib = 0; ib < 2; ib++) {
		dhcp_reply_dest(&d, ib, &t);
		check(t.kind == DHCP_DEST_BCAST || t.kind == DHCP_DEST_CIADDR ||
		      t.kind == DHCP_DEST_YIADDR_HW);
		check(t.kind != DHCP_DEST_YIADDR_HW || t.hw_len == (ib ? 20 : 6));
		check(!t.ib_no_hw || (ib && t.kind == DHCP_DEST_BCAST));
	}
	return 0;
}
