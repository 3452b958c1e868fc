/*
 * InfiniBand packet CRCs: the 32-bit invariant CRC (ICRC) and the 16-bit variant CRC
 * (VCRC), IBA vol 1 section 7.8.
 *
 * The ICRC is CRC-32 as Ethernet computes it (polynomial 0x04C11DB7, reflected, initial
 * value all ones, final inversion). It covers the packet from the first LRH byte to the
 * end of the payload and pad, with the fields that switches and routers may change
 * replaced by ones, so it survives the trip end to end:
 *   local packet (LNH 0x2): LRH VL (4 bits); BTH byte 4 (resv8a: FECN, BECN, reserved)
 *   global packet (LNH 0x3): the whole 8-byte LRH (routers rebuild it); GRH traffic
 *     class, flow label and hop limit; BTH byte 4.
 * The eight bytes of ones for a global packet's LRH are why RoCE (which has no LRH)
 * starts its ICRC from the CRC state of 8 bytes of 0xFF (Linux rxe's 0xdebb20e3).
 *
 * The VCRC is CRC-16 with polynomial 0x100B (x^16 + x^12 + x^3 + x + 1), initial value
 * all ones, final inversion, over every byte from the LRH to the end of the ICRC. Bit
 * order: reflected like the ICRC (the table polynomial is 0xD008, 0x100B bit-reversed),
 * as Endace's DAG capture library computes the InfiniBand VCRC (dagcrc.c,
 * dagcrc_infiniband_vcrc16_r); see docs/wire-formats.md for what was cross-checked.
 *
 * Both CRCs go on the wire least significant byte first, as Linux rxe stores the ICRC.
 */
#ifndef IBGW_LIB_IB_CRC_H
#define IBGW_LIB_IB_CRC_H

#include <stddef.h>
#include <stdint.h>

#define IB_ICRC_LEN 4
#define IB_VCRC_LEN 2

/* Raw reflected CRC-32 register update, no inversion on entry or exit: start from
 * 0xffffffff, feed any number of pieces, invert the result. */
uint32_t ib_crc32_update(uint32_t state, const uint8_t *buf, size_t len);
/* Plain CRC-32 of one buffer (initial ones, final inversion): crc32("123456789") is
 * 0xcbf43926. */
uint32_t ib_crc32(const uint8_t *buf, size_t len);

/* Raw reflected CRC-16/0x100B register update, no inversion. */
uint16_t ib_crc16_update(uint16_t state, const uint8_t *buf, size_t len);

/*
 * ICRC of a packet: buf holds the packet from the LRH up to the end of payload + pad
 * (len bytes, the ICRC itself not included). The LRH's LNH says whether a GRH follows.
 * Writes the ICRC value to *out (put it on the wire with ib_put_le32). Returns 0,
 * -EMSGSIZE if len is shorter than the LRH (+GRH) + BTH, or -EINVAL if LNH is not IBA
 * local (0x2) or IBA global (0x3): raw packets carry no ICRC.
 */
int ib_icrc_compute(const uint8_t *buf, size_t len, uint32_t *out);

/* VCRC over len bytes from the LRH (through the ICRC). */
uint16_t ib_vcrc_compute(const uint8_t *buf, size_t len);

#endif
