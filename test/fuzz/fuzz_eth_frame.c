/*
 * libFuzzer harness for the Ethernet frame parser (pkt/eth_frame.h). The input is a
 * frame; an accepted frame must satisfy the parser's promises: L3 offset inside the
 * frame and 14 + 4 * tags, ethertype >= 0x0600 and not a tag, tag nesting legal, VIDs
 * not 0xfff. The parser gets a heap copy of exactly size bytes so ASan catches any read
 * beyond it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/eth_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1);
	struct ethf_info fi;
	enum ethf_result r;

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	r = ethf_parse(copy, size, &fi);
	check((unsigned)r < ETHF_ERR_MAX);
	check(ethf_result_name(r) != NULL);
	if (r == ETHF_OK) {
		check(fi.n_tags <= 2);
		check(fi.l3_off == 14 + 4 * fi.n_tags);
		check(fi.l3_off <= size);
		check(fi.ethertype >= ETHF_TYPE_MIN);
		check(fi.ethertype != ETHF_TYPE_8021Q && fi.ethertype != ETHF_TYPE_8021AD);
		check(!(copy[6] & 1));
		if (fi.n_tags >= 1)
			check((fi.outer_tci & ETHF_VID_MASK) != ETHF_VID_RESERVED);
		if (fi.n_tags == 2) {
			check(fi.outer_tpid == ETHF_TYPE_8021AD);
			check((fi.inner_tci & ETHF_VID_MASK) != ETHF_VID_RESERVED);
		}
	} else {
		check(r != ETHF_ERR_RUNT || size < ETHF_HLEN);
	}
	free(copy);
	return 0;
}
