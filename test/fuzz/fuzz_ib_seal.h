/*
 * fuzz_ib_seal: a fuzz input made a well-formed IB packet, for the harnesses that feed
 * packets to a parser or a switch (fuzz_ib_packet, fuzz_fabric_packet, fuzz_router):
 * with random CRCs nearly every input dies at the ICRC check, so each input is also run
 * with its ICRC and VCRC computed.
 */
#ifndef IBGW_TEST_FUZZ_IB_SEAL_H
#define IBGW_TEST_FUZZ_IB_SEAL_H

#include <stdint.h>
#include <string.h>

#include "lib/ib_bytes.h"
#include "lib/ib_crc.h"
#include "lib/ib_hdr.h"
#include "lib/ib_packet.h"

/* data[0..len) into fixed (cap octets) with its ICRC and VCRC computed. 0: not sealed
 * (its LRH PktLen does not give len, or it does not fit); 1: sealed; -1: the VCRC could
 * not be recomputed (a bug: the caller checks it). */
static inline int fuzz_ib_seal(const uint8_t *data, size_t len, uint8_t *fixed, size_t cap)
{
	size_t words;
	uint32_t icrc;

	if (len < IB_LRH_LEN || len > cap)
		return 0;
	words = (size_t)(ib_get_be16(data + 4) & IB_PKTLEN_MAX) * 4;
	if (len != words + IB_VCRC_LEN || words < IB_LRH_LEN + IB_ICRC_LEN)
		return 0;
	memcpy(fixed, data, len);
	if (ib_icrc_compute(fixed, words - IB_ICRC_LEN, &icrc) == 0)
		ib_put_le32(fixed + words - IB_ICRC_LEN, icrc);
	return ib_packet_reseal_vcrc(fixed, len) == 0 ? 1 : -1;
}

#endif
