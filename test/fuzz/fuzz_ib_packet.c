/*
 * libFuzzer harness for ib_packet_parse() and ib_packet_parse_headers(): any input must
 * be parsed or refused without a crash or sanitizer report; the two agree on every
 * input except for the CRCs (same reason, or OK where only a CRC is wrong, and the same
 * fields where both parse); when it parses, building the parsed packet must give
 * back the same octets (reserved bits are kept; pad octets are written as zeros, so
 * that part of the comparison applies when the input's pad was zeros), and the rebuilt
 * packet must parse to the same fields.
 *
 * Random octets almost never carry two valid CRCs, so each input is also tried a second
 * time with its CRCs recomputed (where PktLen puts them): that lets the fuzzer reach
 * the GRH, BTH, extension-header and pad checks behind them.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test/fuzz/fuzz_ib_seal.h"
#include "lib/ib_packet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static void one(const uint8_t *data, size_t size)
{
	static uint8_t out[IB_PACKET_MAX_LEN];
	struct ib_packet p, q;
	bool pad_zero = true;
	int n;

	enum ib_pkt_err err = ib_packet_parse(data, size, &p);
	enum ib_pkt_err herr = ib_packet_parse_headers(data, size, &q);

	check((unsigned)err < IB_PKT_ERR_COUNT);
	if (err == IB_PKT_ERR_VCRC)
		/* Past the VCRC (reason 3) the header checks still run: any reason after it
		 * but the ICRC, or none. */
		check(herr == IB_PKT_OK || (herr > IB_PKT_ERR_VCRC && herr != IB_PKT_ERR_ICRC));
	else if (err == IB_PKT_ERR_ICRC) /* the last check: every header one passed */
		check(herr == IB_PKT_OK);
	else
		check(herr == err);
	if (err != IB_PKT_OK)
		return;
	check(q.payload == p.payload && q.payload_len == p.payload_len && q.ext == p.ext &&
	      q.bth.dqpn == p.bth.dqpn && q.icrc == p.icrc && q.vcrc == p.vcrc);
	check(p.payload >= data && p.payload + p.payload_len <= data + size);
	for (size_t i = 0; i < p.bth.pad; i++)
		pad_zero &= p.payload[p.payload_len + i] == 0;

	n = ib_packet_build(&p, out, sizeof(out));
	check(n == (int)size);
	if (pad_zero)
		check(memcmp(out, data, size) == 0);
	check(ib_packet_parse(out, (size_t)n, &q) == IB_PKT_OK);
	check(q.lrh.dlid == p.lrh.dlid && q.lrh.slid == p.lrh.slid && q.lrh.vl == p.lrh.vl &&
	      q.lrh.sl == p.lrh.sl && q.has_grh == p.has_grh && q.bth.opcode == p.bth.opcode &&
	      q.bth.dqpn == p.bth.dqpn && q.bth.psn == p.bth.psn && q.bth.pkey == p.bth.pkey &&
	      q.ext == p.ext && q.deth.qkey == p.deth.qkey && q.deth.src_qp == p.deth.src_qp &&
	      q.imm == p.imm && q.aeth.msn == p.aeth.msn && q.payload_len == p.payload_len);
	check(memcmp(q.payload, p.payload, p.payload_len) == 0);
	if (p.has_grh)
		check(ib_gid_equal(&q.grh.sgid, &p.grh.sgid) &&
		      ib_gid_equal(&q.grh.dgid, &p.grh.dgid) &&
		      q.grh.flow_label == p.grh.flow_label);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t fixed[IB_PACKET_MAX_LEN];
	int sealed;

	one(data, size);
	sealed = fuzz_ib_seal(data, size, fixed, sizeof(fixed));
	if (sealed == 0)
		return 0;
	check(sealed == 1);
	one(fixed, size);
	return 0;
}
