/*
 * Frames bigger than the MTU that the kernel hands over as one (GSO super-frames from
 * local senders on veth/tap, GRO-merged frames): their offload metadata, checked, and
 * software segmentation as the kernel's GSO does it. Pure functions over buffers: no
 * sockets, no allocation, no logging. Called by the Ethernet port's receive (the
 * metadata check) and by the forwarding pipeline (segmentation), on the thread that
 * owns the buffers.
 *
 *   gso_vnet_read/write  the 10-octet struct virtio_net_hdr that PACKET_VNET_HDR puts
 *                        before each frame (little-endian on the hosts we run on: the
 *                        kernel writes it in the legacy virtio byte order, the CPU's)
 *   gso_check            the metadata against the frame it came with: a frame whose
 *                        metadata is inconsistent is refused with a reason (counted by
 *                        the caller), never trusted. The metadata comes from the kernel,
 *                        the headers from a remote or local sender.
 *   gso_plan             where a GSO packet splits for an egress MTU
 *   gso_segment          writes one segment: its own IP header (IPv4: identification
 *                        + i, total length, header checksum; IPv6: payload length),
 *                        TCP: sequence number advanced, FIN and PSH on the last segment
 *                        only, CWR on the first only; UDP: its own length; the TCP/UDP
 *                        checksum computed in full (never left partial)
 *   gso_l4_csum_fill     a TCP/UDP checksum computed in full (a partial checksum, the
 *                        pseudo-header sum a local sender leaves for the NIC, completed)
 *   gso_l4_csum_fix_partial  the same for a frame whose checksum state is unknown
 *                        (AF_XDP): only a field holding the pseudo-header sum in a packet
 *                        that does not verify is completed
 *   gso_l4_seed          the pseudo-header sum to leave in a checksum field when the
 *                        frame goes to a kernel that completes it (NEEDS_CSUM on send)
 *
 * What is supported: TCP over IPv4 and IPv6 (VIRTIO_NET_HDR_GSO_TCPV4/TCPV6, with or
 * without the ECN flag) and UDP segmentation offload (GSO_UDP_L4, each datagram its own
 * UDP header, both families). IPv4 options are copied into every segment; IPv6
 * extension headers hop-by-hop, routing and destination options are copied, any other
 * (fragment, AH, ESP, ...) is refused. Legacy UFO (GSO_UDP, one datagram fragmented in
 * IP) is refused: the kernel no longer hands it to a packet socket (virtio_net_hdr_from_skb
 * maps only TCPV4, TCPV6 and UDP_L4; anything else fails the receive in the kernel).
 */
#ifndef IBGW_PKT_GSO_H
#define IBGW_PKT_GSO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GSO_VNET_LEN 10 /* sizeof(struct virtio_net_hdr) */

/* struct virtio_net_hdr's values (linux/virtio_net.h). */
#define GSO_VNET_F_NEEDS_CSUM 1 /* checksum partial: csum_start, csum_offset */
#define GSO_VNET_F_DATA_VALID 2 /* checksum already verified (GRO) */
#define GSO_VNET_NONE         0
#define GSO_VNET_TCPV4        1
#define GSO_VNET_UDP          3 /* legacy UFO: refused */
#define GSO_VNET_TCPV6        4
#define GSO_VNET_UDP_L4       5
#define GSO_VNET_ECN          0x80

/* Segments one GSO packet may become (the pipeline's outputs per input). A 64 KiB
 * packet splits into at most 128 segments when gso_size >= 512. */
#define GSO_SEGS_MAX 128
/* Headers copied into every segment (IP, extension headers, TCP/UDP), at most. */
#define GSO_HDR_MAX 256

struct gso_vnet {
	uint8_t flags;    /* GSO_VNET_F_* */
	uint8_t gso_type; /* GSO_VNET_* */
	uint16_t hdr_len; /* a hint only (the kernel gives its linear length): not used */
	uint16_t gso_size;
	uint16_t csum_start; /* from the start of the frame */
	uint16_t csum_offset;
};

void gso_vnet_read(struct gso_vnet *v, const uint8_t p[GSO_VNET_LEN]);
void gso_vnet_write(uint8_t p[GSO_VNET_LEN], const struct gso_vnet *v);

/* What the pipeline carries with a packet: nothing (GSO_NONE, every packet that fits
 * as it is), or a GSO packet of one kind and its segment payload size. */
enum gso_kind {
	GSO_NONE = 0,
	GSO_TCP,
	GSO_UDP,
};

struct gso_pkt {
	uint8_t kind;  /* enum gso_kind */
	uint16_t size; /* L4 payload octets per segment (the sender's MSS) */
};

/* Refusals; gso_result_name() gives stable counter names. */
enum gso_result {
	GSO_OK = 0,
	GSO_BAD_TYPE,        /* gso_type not TCPV4, TCPV6, UDP_L4 (or NONE) */
	GSO_UFO,             /* legacy UDP fragmentation offload */
	GSO_BAD_ECN,         /* the ECN flag without TCP */
	GSO_ZERO_SIZE,       /* a GSO type with gso_size 0 */
	GSO_CSUM_RANGE,      /* csum_start + csum_offset + 2 beyond the frame */
	GSO_CSUM_MISMATCH,   /* a GSO frame whose csum_start/offset are not its L4 checksum */
	GSO_NOT_IP,          /* a GSO frame that is not IPv4/IPv6 */
	GSO_FAMILY,          /* TCPV4 on IPv6 or TCPV6 on IPv4 */
	GSO_BAD_IP,          /* the IP header fails validation */
	GSO_BAD_LENGTH,      /* IP length != frame length, UDP length != IP payload */
	GSO_FRAGMENT,        /* an IP fragment */
	GSO_EXT_HDR,         /* an IPv6 extension header that cannot be copied (AH, ESP, ...) */
	GSO_PROTO,           /* the L4 protocol is not the GSO type's */
	GSO_L4_TRUNCATED,    /* TCP/UDP header past the packet, TCP data offset < 5 */
	GSO_TOO_MANY_SEGS,   /* more than GSO_SEGS_MAX segments */
	GSO_MTU_TOO_SMALL,   /* TCP: the egress MTU leaves no room for payload */
	GSO_SEGMENT_TOO_BIG, /* UDP: a datagram of gso_size does not fit the egress MTU */
	GSO_HDR_TOO_LONG,    /* headers (copied into every segment) over GSO_HDR_MAX */
	GSO_RESULT_COUNT
};

const char *gso_result_name(enum gso_result r);

/*
 * Check a received frame's metadata against the frame (untagged Ethernet: frame[12..14)
 * the ethertype, the IP header at 14). csum_start is as the kernel gave it, relative to
 * frame. On GSO_OK, *out says what the pipeline carries: GSO_NONE for a frame that is
 * not GSO (or a GSO frame of a single segment), else the kind and segment size; and
 * *partial whether the frame's L4 checksum was left to offload (NEEDS_CSUM): the caller
 * completes it (gso_l4_csum_fill) when out->kind is GSO_NONE; a GSO packet's segments
 * get theirs computed by gso_segment.
 */
enum gso_result gso_check(const struct gso_vnet *v, const uint8_t *frame, size_t len,
			  struct gso_pkt *out, bool *partial);

/* Where one GSO IP packet splits. */
struct gso_plan {
	uint8_t kind;     /* enum gso_kind */
	uint8_t family;   /* 4 or 6 */
	uint16_t l4_off;  /* IP header + extension headers */
	uint16_t hdr_len; /* l4_off + the TCP/UDP header: copied into every segment */
	uint16_t mss;     /* payload octets per segment (the last may be shorter) */
	uint16_t n;       /* segments */
	uint32_t payload; /* L4 payload octets in all */
};

/*
 * Plan the segmentation of the IP packet ip[0..len) (headers as gso_check accepted them;
 * they are checked again) for an egress of IP MTU mtu. TCP: segments of g->size, or
 * smaller when the MTU cannot carry them (TCP may be resegmented anywhere). UDP: the
 * datagrams are the sender's (GSO_SEGMENT_TOO_BIG when one does not fit). mtu 0: no
 * limit (segments of g->size).
 */
enum gso_result gso_plan(const uint8_t *ip, size_t len, const struct gso_pkt *g, uint32_t mtu,
			 struct gso_plan *p);

/* Length of segment i of a plan (hdr_len + its payload). */
static inline size_t gso_seg_len(const struct gso_plan *p, unsigned i)
{
	uint32_t off = (uint32_t)i * p->mss;
	uint32_t rest = p->payload - off;

	return (size_t)p->hdr_len + (rest < p->mss ? rest : p->mss);
}

/* Write segment i (0 <= i < p->n) of ip into out, which holds gso_seg_len(p, i)
 * octets. Returns its length. */
size_t gso_segment(const struct gso_plan *p, const uint8_t *ip, unsigned i, uint8_t *out);

/* Compute the TCP or UDP checksum of an unfragmented IPv4/IPv6 packet in full (the field
 * is overwritten). false, and the packet untouched, for anything else. */
bool gso_l4_csum_fill(uint8_t *ip, size_t len);

/* A TCP/UDP checksum a local sender left partial where no metadata says so (AF_XDP hands
 * frames over without the kernel's checksum state): when the checksum field of an
 * unfragmented IPv4/IPv6 TCP/UDP packet holds exactly its pseudo-header sum and the
 * packet does not verify, the checksum is computed in full and true returned. Anything
 * else (a right checksum, a wrong one of another value, not TCP/UDP) is left as it is. */
bool gso_l4_csum_fix_partial(uint8_t *ip, size_t len);

/* Leave the pseudo-header sum (non-complemented, as Linux's CHECKSUM_PARTIAL wants it)
 * in the L4 checksum field of a packet planned as p, for a kernel to complete. */
void gso_l4_seed(const struct gso_plan *p, uint8_t *ip);

#endif
