/*
 * An Ethernet port, as the data plane sees it: a table of operations (prefix ethp_)
 * with backends chosen by name, in the manner of port/ib_port.h.
 *
 *   af_packet  an AF_PACKET socket on the kernel netdev, driven through io_uring
 *              (multishot RECVMSG into a provided buffer ring, linked SENDMSG batches),
 *              or through recvmmsg/sendmmsg when io_uring is unavailable
 *              (port/eth_port_afpacket.c)
 *   af_xdp     AF_XDP sockets (libxdp) on every RX queue of the netdev, one UMEM (the
 *              pool), an XDP program that hands them the port's VLAN and passes the
 *              rest to the kernel; zero-copy where the driver offers it, else copy
 *              mode; no GSO (attr.gso false); one af_xdp port per device
 *              (port/eth_port_afxdp.c)
 *
 * A port is one (device, VLAN) pair: a port with vlan N on device D receives only
 * frames of VLAN N on D (filtered in the kernel by a socket filter or the XDP program,
 * checked again in user space) and sends frames tagged N on D; vlan 0 means untagged frames only.
 * Received frames are handed out untagged (the tag is in the descriptor); frames to
 * send are given untagged and the port inserts its tag.
 *
 * Buffers and the IB -> Ethernet path: a port owns one pool of buffers (n_bufs of
 * buf_size bytes, one allocation). Receive fills pool buffers and hands them to the
 * caller, who returns them with buf_put. Transmit does NOT need pool buffers: a frame
 * is gathered from two pieces, an L2 header the caller writes into the descriptor
 * (ETHP_HDR_MAX bytes inline) and a payload pointer into any memory, e.g. the IP
 * packet where it lies in an IB receive buffer. tx_burst is synchronous for memory:
 * when it returns the port holds no reference to any descriptor or payload (AF_PACKET
 * copies into a kernel skb during sendmsg; the io_uring path reaps the send
 * completions before returning; af_xdp copies the frame into a UMEM chunk), so the IB
 * buffer can be reposted at once. One copy per packet.
 *
 * Queues: a port has 1..ETHP_QUEUES_MAX queues (set_queues), each a receive and a send
 * path of its own, so that every worker serves every port without a lock: af_packet
 * gives each queue its own socket in one PACKET_FANOUT group (PACKET_FANOUT_HASH: the
 * kernel spreads received frames over the queues by the flow hash, so the frames of one
 * flow arrive on one queue, in order); af_xdp gives queue w the device's RX queues w,
 * w + n, ... (the device's RSS keeps a flow on one). What a queue sends leaves in the
 * order sent.
 *
 * Threads: open, close, query, set_link, set_queues, mc_add/mc_del, set_promisc and
 * stats are called from the control thread. The data path of a queue (rx_burst,
 * tx_burst, arm, with its queue number) belongs to one thread at a time, its worker;
 * different queues of a port may be driven at once by different threads. buf_get and
 * buf_put are safe from any thread. wait_fd may be read from any thread once the queue
 * exists.
 */
#ifndef IBGW_PORT_ETH_PORT_H
#define IBGW_PORT_ETH_PORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pkt/gso.h"

struct ethp_port;

#define ETHP_ADDR_LEN   6
#define ETHP_HDR_MAX    22 /* dst, src, up to two tags, ethertype */
#define ETHP_QUEUES_MAX 16 /* queues per port: one per worker (FWD_WORKERS_MAX) */

enum ethp_io_mode {
	ETHP_IO_AUTO = 0, /* io_uring, else recvmmsg/sendmmsg (logged once) */
	ETHP_IO_URING,    /* io_uring or fail */
	ETHP_IO_MMSG,     /* recvmmsg/sendmmsg */
};

/* Which port to open. Zero fields take the defaults given. */
struct ethp_port_config {
	const char *backend; /* "af_packet" (default) or "af_xdp" */
	const char *device;  /* kernel netdev ("eth0", "veth0") */
	uint16_t vlan;       /* 0 = untagged; 1..4094 = 802.1Q VLAN id */
	unsigned n_bufs;     /* buffers in the pool: default 1024, 16..32768 */
	unsigned buf_size;   /* bytes per buffer: default 2048, at most ETHP_BUF_MAX; must
			      * hold the frame (MTU + 22) plus ETHP_RX_HEADROOM, and a GSO
			      * frame (ETHP_GSO_FRAME_MAX) to receive those. af_xdp: a UMEM
			      * chunk, 2048 when buf_size is at most that, else one page;
			      * a frame starts 258 bytes into it */
	unsigned rx_depth;   /* buffers kept posted for receive, shared by the queues:
			      * default n_bufs / 2. af_xdp: at least 4096 over the device
			      * queues (its rings), n_bufs grown to feed them */
	enum ethp_io_mode io;
	bool no_vnet_hdr; /* no PACKET_VNET_HDR: GSO frames neither received (truncated
			   * when larger than a buffer) nor sent whole */
};

/* Bytes at the start of a receive buffer before the frame (af_packet; af_xdp: 258, the
 * kernel's XDP headroom and 2): io_uring's recvmsg header
 * (16), the sender's sockaddr_ll (20, given 24 so the cmsg after it is 8-aligned), the
 * VLAN auxdata cmsg (40) and the virtio_net_hdr (10) that PACKET_VNET_HDR puts before
 * the frame. An IP header after a 14-byte Ethernet header lands 8-byte aligned
 * (90 + 14 = 104). */
#define ETHP_RX_HEADROOM 90
/* The largest frame the kernel hands over with GSO metadata: an IP packet of 65535
 * octets, its Ethernet header and a tag still in the frame. */
#define ETHP_GSO_FRAME_MAX (65535 + 14 + 4)
/* The largest buffer a port takes: a GSO frame after the headroom. */
#define ETHP_BUF_MAX ((ETHP_RX_HEADROOM + ETHP_GSO_FRAME_MAX + 63) / 64 * 64)

/* A buffer of the port's pool. */
struct ethp_buf {
	uint8_t *base; /* start of the buffer */
	uint32_t cap;  /* bytes at base */
	uint32_t id;   /* index in the pool */
};

/* Kernel packet types (sockaddr_ll.sll_pkttype). */
enum ethp_pkttype {
	ETHP_PKT_HOST = 0,      /* to our MAC */
	ETHP_PKT_BROADCAST = 1, /* ff:ff:ff:ff:ff:ff */
	ETHP_PKT_MULTICAST = 2,
	ETHP_PKT_OTHERHOST = 3, /* to another MAC (promiscuous) */
};

#define ETHP_RX_VLAN 0x01 /* the frame carried a tag (vlan_tci is valid) */

/* One received frame, untagged: data points at the destination MAC, inside buf. A
 * frame larger than the MTU that the kernel handed over as one (a local sender's GSO
 * super-frame, a GRO-merged frame) has gso.kind set and gso.size its segments' payload:
 * its metadata was checked against it (pkt/gso.h: gso_check; inconsistent ones are
 * dropped, rx_gso_invalid), and its L4 checksum may be partial (the pseudo-header sum
 * only): segmentation computes every segment's. Any other frame's partial checksum was
 * completed by the port (rx_csum_completed). */
struct ethp_rx {
	struct ethp_buf *buf; /* held by the caller until buf_put */
	uint8_t *data;
	uint32_t len;      /* frame length, tag removed, no FCS */
	uint16_t vlan_tci; /* PCP, DEI, VID of the removed tag */
	uint8_t pkttype;   /* enum ethp_pkttype */
	uint8_t flags;     /* ETHP_RX_* */
	struct gso_pkt gso;
};

/* One frame to send: hdr[0..hdr_len) then data[0..len). The port inserts its VLAN tag
 * after the MAC addresses; hdr holds an untagged header (at least 14 bytes). A GSO
 * frame (gso.kind set; only to a port whose attr.gso is true) is data = an IP packet
 * larger than the MTU, sent whole with its metadata for the kernel to segment at
 * gso.size: l4_off is its TCP/UDP header's offset in data, and its checksum field holds
 * the pseudo-header sum (gso_l4_seed). Zero gso (the default) for any other frame. */
struct ethp_tx {
	uint8_t hdr[ETHP_HDR_MAX];
	uint8_t hdr_len;
	const uint8_t *data; /* may be NULL when len is 0 */
	uint32_t len;
	struct gso_pkt gso;
	uint16_t l4_off;
};

struct ethp_port_attr {
	int ifindex;
	uint8_t mac[ETHP_ADDR_LEN];
	uint32_t mtu;
	bool link_up; /* IFF_UP and IFF_RUNNING (carrier) */
	uint16_t vlan;
	const char *io; /* "io_uring", "mmsg"; "af_xdp-zc", "af_xdp-copy", "af_xdp-skb" */
	bool gso;       /* receives GSO frames with their metadata, sends them whole */
};

enum ethp_drop {
	ETHP_DROP_RX_KERNEL,    /* the kernel dropped: socket queue full (no buffers posted) */
	ETHP_DROP_RX_TRUNCATED, /* frame longer than a buffer */
	ETHP_DROP_RX_RUNT,      /* shorter than an Ethernet header */
	ETHP_DROP_RX_VLAN,      /* another VLAN's frame (the socket filter missed it) */
	ETHP_DROP_TX_FULL,      /* the kernel's send queue was full (EAGAIN, ENOBUFS) */
	ETHP_DROP_TX_LINK_DOWN, /* the port's link is down */
	ETHP_DROP_TX_INVALID,   /* header shorter than 14 or frame larger than MTU + header */
	ETHP_DROP_TX_ERROR,     /* any other send error */
	ETHP_DROP_RX_GSO,       /* offload metadata inconsistent with the frame (gso_check) */
	ETHP_DROP_MAX
};

/* Counters. Written only by each queue's thread (relaxed atomic stores), read by anyone;
 * stats() sums the queues, those closed by set_queues included (totals never go down). */
struct ethp_stats {
	uint64_t rx_packets, rx_bytes;
	uint64_t tx_packets, tx_bytes;
	uint64_t rx_csum_completed; /* TCP/UDP checksums the sender left to offload */
	uint64_t rx_gso, tx_gso;    /* GSO frames received, sent whole (also in rx/tx_packets) */
	uint64_t drops[ETHP_DROP_MAX];
};

struct ethp_ops {
	const char *name;
	int (*open)(const struct ethp_port_config *cfg, struct ethp_port **out);
	void (*close)(struct ethp_port *port);
	int (*query)(struct ethp_port *port, struct ethp_port_attr *attr);
	/* The control thread tells the port its link state (netlink, through
	 * kernel/linkwatch): while down, tx_burst drops (counted) instead of queueing
	 * to a dead link. */
	void (*set_link)(struct ethp_port *port, bool up);
	/* Receive frames to a multicast MAC (ND solicited-node groups of proxied
	 * addresses), or everything (promiscuous). Memberships end with the port. */
	int (*mc_add)(struct ethp_port *port, const uint8_t mac[ETHP_ADDR_LEN]);
	int (*mc_del)(struct ethp_port *port, const uint8_t mac[ETHP_ADDR_LEN]);
	int (*set_promisc)(struct ethp_port *port, bool on);

	/* Pool buffers (any thread). buf_get returns NULL when the pool is empty. */
	struct ethp_buf *(*buf_get)(struct ethp_port *port);
	void (*buf_put)(struct ethp_port *port, struct ethp_buf *buf);
	/* The buffers of n received frames (a receive burst the caller is done with) back
	 * to the pool at once (any thread): one acquisition of the pool's lock for the
	 * burst instead of one per frame. */
	void (*rx_done)(struct ethp_port *port, const struct ethp_rx *rxs, unsigned n);

	/* Run n queues (1..ETHP_QUEUES_MAX; a port opens with one): queues 0..n-1 exist
	 * when it returns 0. Growing opens the new ones (on failure, none: -errno);
	 * shrinking closes the last ones, whose received frames not yet taken are lost
	 * (the engine never shrinks: it gives the queues of fewer workers to those left):
	 * the caller has stopped using them. */
	int (*set_queues)(struct ethp_port *port, unsigned n);

	/* Batched data path of queue q (its thread), never blocking. rx_burst: up to max
	 * frames; returns the count or -errno. tx_burst: consumes a prefix of txs and
	 * returns its length (0..n). A frame refused for a permanent reason (link down,
	 * invalid, a send error) is consumed and counted as a drop; a full kernel queue
	 * ends the prefix (counted once in ETHP_DROP_TX_FULL): the frames after it are the
	 * caller's again, to retry or drop. */
	int (*rx_burst)(struct ethp_port *port, unsigned q, struct ethp_rx *rxs, unsigned max);
	int (*tx_burst)(struct ethp_port *port, unsigned q, const struct ethp_tx *txs, unsigned n);

	/* Queue q's thread: an fd readable when rx_burst may return frames, once arm()
	 * has been called. Sleep protocol: rx_burst until empty, arm(), rx_burst once
	 * more, then wait on the fd (frames that came before arm may raise no event). */
	int (*wait_fd)(struct ethp_port *port, unsigned q);
	int (*arm)(struct ethp_port *port, unsigned q);

	/* Counters (control thread; the kernel's drop count is folded in here). */
	void (*stats)(struct ethp_port *port, struct ethp_stats *st);
};

extern const struct ethp_ops ethp_afpacket_ops;
extern const struct ethp_ops ethp_afxdp_ops;

/* The ops table for a backend name ("af_packet", "af_xdp"), or NULL. */
const struct ethp_ops *ethp_backend(const char *name);
/* Name of a drop reason ("rx_kernel", ...), for gwctl and logs. */
const char *ethp_drop_name(enum ethp_drop d);

#endif
