/*
 * TCP receive coalescing, as the kernel's GRO does it for TCP: consecutive in-order
 * segments of one flow merged into one GSO packet that a kernel takes whole
 * (virtio_net_hdr GSO_TCPV4/TCPV6 with a partial checksum), so that the receiver pays
 * one write and one trip through its stack per merged packet (up to 64 KiB) instead of
 * one per segment. Pure functions over buffers: no sockets, no allocation, no logging.
 * Called by the simulated rack's IB host (sim/host, before its TAP) on its one thread.
 *
 *   gro_tcp_begin   a packet that may start a merge is copied into the caller's buffer
 *                   and held: IPv4 without options and not a fragment, or IPv6 with TCP
 *                   right after the fixed header; TCP with ACK and payload and none of
 *                   SYN, FIN, RST, URG, CWR; its IP header and TCP checksums verify;
 *                   a second segment of its size would fit
 *   gro_tcp_append  the next packet continues the held one when the kernel's GRO would
 *                   merge them (tcp_gro_receive): same addresses, ports, IP fields but
 *                   for length, identification and checksum; the same TCP header but for
 *                   sequence number, checksum and PSH; its sequence number the held
 *                   one's end; every held segment as long as the first, this one no
 *                   longer; checksums that verify; the merge within 65,535 octets. Its
 *                   payload is appended. After a shorter segment or one with PSH the
 *                   held packet takes no more.
 *   gro_tcp_end     the held packet finished: a single segment as it came (no metadata);
 *                   merged ones get their IP length (IPv4: and header checksum), PSH if
 *                   any segment had it, the TCP checksum field seeded with the
 *                   pseudo-header sum, and the metadata of a GSO packet of the first
 *                   segment's size with the checksum left partial. The kernel accepts a
 *                   partial checksum on receive as verified: every segment's was
 *                   verified here, so nothing is laundered.
 *
 * Anything gro_tcp_begin refuses or gro_tcp_append does not take is the caller's to send
 * as it is (after ending the held packet, to keep the order).
 */
#ifndef IBGW_PKT_GRO_H
#define IBGW_PKT_GRO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pkt/gso.h"

/* The largest merged IP packet (the IPv4 total length and IPv6 payload length fields). */
#define GRO_MAX_LEN 65535

struct gro_tcp {
	uint8_t *ip;       /* the held packet, in the caller's buffer */
	size_t cap;        /* that buffer's size */
	uint32_t len;      /* the held packet's length so far */
	uint32_t next_seq; /* the sequence number that continues it */
	uint16_t l4_off;   /* IP header */
	uint16_t hdr_len;  /* IP + TCP header */
	uint16_t mss;      /* the first segment's payload */
	uint16_t segs;     /* segments held; 0: nothing held */
	uint8_t family;    /* 4 or 6 */
	bool closed;       /* a shorter segment or PSH came: nothing more appends */
};

/* Hold ip[0..len) (octets past its IP length are padding, dropped) in buf[0..cap) when
 * it may start a merge. false: it may not (nothing held). */
bool gro_tcp_begin(struct gro_tcp *g, uint8_t *buf, size_t cap, const uint8_t *ip, size_t len);

/* Append ip[0..len) to the held packet when it continues it. false: it does not (the held
 * packet unchanged). */
bool gro_tcp_append(struct gro_tcp *g, const uint8_t *ip, size_t len);

/* Finish the held packet: *v its metadata (l2_len: octets before the IP header in the
 * frame the caller sends, for csum_start). Returns its IP length; nothing is held after. */
size_t gro_tcp_end(struct gro_tcp *g, unsigned l2_len, struct gso_vnet *v);

#endif
