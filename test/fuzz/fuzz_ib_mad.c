/*
 * libFuzzer harness for the MAD common header decoder: decode, and when it accepts,
 * encode must give back the input's first 24 octets exactly.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ib_mad.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ib_mad_hdr h;
	uint8_t out[IB_MAD_HDR_LEN];

	if (ib_mad_hdr_decode(data, size, &h) != 0)
		return 0;
	if (ib_mad_hdr_encode(&h, out, sizeof(out)) != IB_MAD_HDR_LEN ||
	    memcmp(out, data, IB_MAD_HDR_LEN) != 0)
		abort();
	return 0;
}
