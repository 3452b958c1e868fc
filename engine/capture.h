/*
 * capture: packet capture on one interface (prefix fwd_capture_), for `gwctl capture`.
 * The gateway has no kernel ib0 for tcpdump to open, so the daemon captures itself:
 * the workers copy what an interface receives and sends into a ring of their own
 * (single producer, single consumer, no lock), and the control thread reads the rings
 * as classic pcap records, merged in time order.
 *
 * What a record holds, by the interface's kind:
 *   Ethernet  the frame as on the wire (VLAN tag removed), link type 1 (EN10MB)
 *   IPoIB     link type 242 (IPOIB, RFC 4391 section 6, as Wireshark reads it): a
 *             40-octet address block, then the 4-octet IPoIB header and the packet.
 *             Received: a GRH-shaped block (version 6 in the first nibble), the source
 *             QPN in octets 5-7, the source GID in 8-23 (zero when the packet came
 *             without a GRH over UD), the destination GID in 24-39 (the GRH's, or the
 *             link's own GID). Sent: octets 0-19 zero, then the destination's 20-octet
 *             hardware address as far as the send knows it: its QPN (0xffffff for
 *             multicast; 0 on a connection) and a zero GID.
 *
 * The filter is classic BPF (compiled by libpcap on the control thread). libpcap cannot
 * compile filters for link type 242, so an IPoIB capture's filter is compiled for
 * Ethernet and run on the packet behind a made-up Ethernet header (zero addresses, the
 * IPoIB header's ethertype): every protocol primitive works (ip, arp, icmp6, host,
 * port, ...), the Ethernet address ones match nothing useful.
 *
 * Cost. No capture: the workers read one pointer per interface and burst (an atomic
 * load). A capture: a clock read, a copy of the packet and the filter's run per packet
 * of that interface, in the worker that handles it. A ring that is full drops the
 * record (counted): the capture never slows forwarding down.
 *
 * Threads: fwd_capture_start/stop/read/stats on the control thread; fwd_capture_packet
 * on workers (inside their RCU read-side state, which keeps the capture alive: it is
 * freed through the engine's defer after stop).
 */
#ifndef IBGW_ENGINE_CAPTURE_H
#define IBGW_ENGINE_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

struct fwd_engine;
struct fwd_capture;
struct bpf_insn;

#define FWD_CAPTURE_RX 1u
#define FWD_CAPTURE_TX 2u

#define FWD_CAPTURE_LINKTYPE_ETHERNET 1
#define FWD_CAPTURE_LINKTYPE_IPOIB    242
#define FWD_CAPTURE_IPOIB_ADDR_LEN    40 /* the address block before the IPoIB header */
#define FWD_CAPTURE_REC_HDR_LEN       16 /* a pcap record header */
#define FWD_CAPTURE_MAX_PACKET        65535

struct fwd_capture_config {
	uint32_t ifindex;
	unsigned dirs;    /* FWD_CAPTURE_RX | FWD_CAPTURE_TX */
	uint32_t snaplen; /* octets kept of each packet (after the filter saw all) */
	/* Classic BPF, as libpcap compiles it for link type 1 (see above); NULL: all.
	 * Copied: the caller keeps its program. */
	const struct bpf_insn *filter;
	unsigned filter_len;
	size_t ring_bytes; /* per worker; 0: 1 MiB. Rounded up to a power of two. */
};

/* Start a capture on an interface of the current snapshot. 0, -ENODEV (no such
 * interface), -EBUSY (one runs there already), -EINVAL (config), -ENOMEM. */
int fwd_capture_start(struct fwd_engine *e, const struct fwd_capture_config *cfg,
		      struct fwd_capture **out);
/* Stop it: the workers stop copying at once; the memory goes after a grace period. */
void fwd_capture_stop(struct fwd_engine *e, struct fwd_capture *c);
int fwd_capture_linktype(const struct fwd_capture *c);
/* Copy pcap records (16-octet record header, then the packet), oldest first across the
 * workers, into out (at most max octets, at most max_packets records). Returns the
 * octets written; *packets gets the records. max must hold the largest record
 * (FWD_CAPTURE_REC_HDR_LEN + FWD_CAPTURE_MAX_PACKET), or a large one blocks the rest. */
size_t fwd_capture_read(struct fwd_capture *c, uint8_t *out, size_t max, uint64_t max_packets,
			uint64_t *packets);

struct fwd_capture_stats {
	uint64_t matched;  /* records written into the rings */
	uint64_t filtered; /* packets the filter refused */
	uint64_t dropped;  /* packets that matched but found their ring full */
};
void fwd_capture_stats(const struct fwd_capture *c, struct fwd_capture_stats *out);

/* Workers: one packet of interface ifindex in direction dir (FWD_CAPTURE_RX or _TX) of
 * the capture c (fwd_capture_of), as pre (the IPoIB address block, or NULL) then up to
 * two pieces of data. */
void fwd_capture_packet(struct fwd_capture *c, unsigned worker, unsigned dir, const void *pre,
			size_t pre_len, const void *a, size_t a_len, const void *b, size_t b_len);

#endif
