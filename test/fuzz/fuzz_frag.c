/*
 * libFuzzer harness for pkt/frag: fragment an arbitrary packet at an arbitrary MTU
 * (first two octets); every fragment must validate and fit the MTU, and reassembling
 * them must give the original data, offsets contiguous, the original MF on the last.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/frag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static uint8_t bufs[128][1600];
static uint8_t whole[65536];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct frag4_piece pc[128];
	struct ip4_info o, f;
	size_t n, done = 0;

	if (size < 2)
		return 0;
	unsigned mtu = (unsigned)(data[0] << 8 | data[1]) % 1600;
	data += 2;
	size -= 2;
	for (int i = 0; i < 128; i++) {
		pc[i].buf = bufs[i];
		pc[i].cap = sizeof(bufs[i]);
	}
	if (frag4_fragment(data, size, mtu, pc, 128, &n, NULL) != FRAG_OK)
		return 0;
	check(ip4_validate(data, size, &o) == IP_OK);
	check(n >= 1 && n == frag4_count(data, size, mtu));
	for (size_t i = 0; i < n; i++) {
		check(pc[i].len <= (mtu > 65535 ? 65535 : mtu) || n == 1);
		check(ip4_validate(pc[i].buf, pc[i].len, &f) == IP_OK);
		check(f.frag_off == o.frag_off + done);
		check(f.mf == (i + 1 < n ? 1 : o.mf));
		check(f.df == o.df);
		check(memcmp(pc[i].buf + 4, data + 4, 2) == 0);
		memcpy(whole + done, pc[i].buf + f.hdr_len, f.tot_len - f.hdr_len);
		done += f.tot_len - f.hdr_len;
	}
	check(done == (size_t)(o.tot_len - o.hdr_len));
	check(memcmp(whole, data + o.hdr_len, done) == 0);
	check(memcmp(pc[0].buf + 20, data + 20, o.hdr_len - 20u) == 0);
	return 0;
}
