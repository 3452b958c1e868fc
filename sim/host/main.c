/*
 * ibgw-host: an IB host of the simulated rack. The gateway's IPoIB link (ipoib/ipoib_link)
 * in the host role, bridged at the link layer to a TAP device in the node's namespace:
 * ibgw-host speaks IPoIB on the fabric, and the kernel there runs its own IP stack (ARP,
 * ND, ping, TCP) over the TAP, its frames rewritten to and from IPoIB (host_l2.h).
 *
 *   ibgw-host [OPTIONS]                  run (inside `sim/rack exec NODE --`)
 *   ibgw-host --ctl PATH dump [WHAT]     ask a running host: link, stats, neigh, peers,
 *                                        groups, conns, all (default)
 *   ibgw-host --ctl PATH xmit-ip ADDR N  make the link itself resolve ADDR (ARP/NS from
 *                                        the link, as the gateway does) with N ICMP echo
 *                                        requests queued meanwhile (queue overflow test)
 * Options:
 *   --node NAME     the node ($IBGW_NODE, else $SIM_HOST)
 *   --pkey P        the link's P_Key (default 0xffff)
 *   --mode M        datagram (default) or connected (RFC 4755: the RC flag in our
 *                   hardware address, RC connections to peers that advertise it, TAP
 *                   MTU 65520; packets above a peer's MTU are answered with ICMP
 *                   fragmentation needed / packet too big, as the Linux IPoIB driver
 *                   does, so the kernel caches a per-destination PMTU)
 *   --conn-idle-ms N  connected mode: idle connections are torn down after N ms
 *   --mcast-hop-limit N  GRH hop limit of the link's multicast (ARP, ND; default 1:
 *                   the subnet only); 2 lets ARP/ND cross one IB router that joined the
 *                   group (seed 004, "IB ARP Across Subnets"; docs/ipoib.md)
 *   --addr A/LEN    an address for the TAP (repeatable; IPv4 or IPv6)
 *   --tap NAME      the TAP device (default ib0)
 *   --offloads on|off  datagram mode: offer the kernel TSO and checksum offload on the
 *                   TAP (default on, as the Linux IPoIB driver on an HCA with UD LSO);
 *                   ibgw-host cuts the super-frames it reads. Connected mode: always off
 *   --send-depth N  the send queue's depth (UD; connected: each connection's), default 512
 *                   in datagram mode, 256 in connected mode; the TAP is read while what
 *                   one frame may need is free (with the offloads: 128 sends, a
 *                   super-frame's segments at most)
 *   --ctl PATH      control socket ($IBGW_NODE_DIR/ibgw-host.sock)
 *
 * The kernel's multicast memberships on the TAP (/proc/net/igmp, /proc/net/igmp6) are
 * followed as the Linux IPoIB driver follows its device's list: each group's MGID joined
 * full member, left when the kernel leaves it (sync_groups; docs/ipoib.md).
 *
 * The IB port is the verbs backend (port/ib_port.h) on the node's device, which on the
 * rack is the verbs shim, libibverbs2sim, LD_PRELOADed by sim/rack; connected mode's CM
 * goes through libibumad (cm/cm_umad.h), as the gateway's, the shim carrying its MADs.
 *
 * Threads: one. The control side (SA client, joins, ARP/ND, neighbour timers, control
 * socket) and the port's data path (poll, post) share one lib/evloop loop, which the
 * link's API allows for a single-threaded user (see ipoib/ipoib_link.h). The MAD thread of
 * sm-client/sa_umad is the only other thread; it talks to the loop through its ring and
 * eventfd.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <net/if_arp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "cm/cm_umad.h"
#include "pkt/gro.h"
#include "pkt/gso.h"
#include "pkt/icmp.h"
#include "port/ib_port.h"
#include "pkt/ip.h"
#include "ipoib/ipoib_link.h"
#include "table/neigh.h"
#include "lib/evloop.h"
#include "lib/log.h"
#include "sim/host/host_l2.h"
#include "sm-client/sa.h"
#include "sm-client/sa_umad.h"

#define MAX_ADDRS 8
#define BUF_SIZE  (IBP_GRH_AREA + 4096 + 64)
/* Connected mode: a whole connected-mode message (65520 + the IPoIB header) per buffer. */
#define BUF_SIZE_CM (IBP_GRH_AREA + 65536 + 64)
/* Datagram mode receives into 2048 posted buffers (Linux IPoIB: recv_queue_size, 256 by
 * default, up to 8192): ibgw-host pays a TAP write per packet, far more than a kernel
 * driver, and 256 ran empty under one TCP stream (a UD packet without a posted buffer
 * is dropped). Connected mode keeps 256 of its 64 KiB buffers. */
#define RECV_DEPTH    2048
#define RECV_DEPTH_CM 256
#define N_BUFS        (2 * RECV_DEPTH)
#define N_BUFS_CM     1024
/* Datagram mode's UD send queue: a super-frame from the kernel (the TAP's TSO) is cut
 * into up to GSO_SEGS_MAX segments, each a send; the TAP is read only while that many
 * slots are free (tx_room). Connected mode: each connection's queue (the link's default),
 * one send per TAP frame. */
#define SEND_DEPTH    512
#define SEND_DEPTH_CM 256
#define WC_BATCH      64
#define TAP_BATCH     64
#define FRAME_MAX     (65536 + 64)

struct in6_ifreq_compat {
	struct in6_addr addr;
	uint32_t prefixlen;
	int ifindex;
};

#define MAX_SYNCED 64

struct host {
	struct evloop *loop;
	const struct ibp_ops *ops;
	struct ibp_port *port;
	struct sa_umad *umad;
	struct sa_client *sa;
	struct sa_port_info pi;
	struct ipoib_link *link;
	struct ipoib_cm_port *cmp;
	bool connected;
	uint32_t conn_idle_ms;
	uint8_t mcast_hop_limit;
	struct hl2 l2;
	bool l2_ready;
	int tap_fd, ctl_fd, sig_fd;
	char tap[IFNAMSIZ];
	const char *node, *ctl_path;
	uint16_t pkey;
	int n_addrs;
	struct {
		int family;
		uint8_t a[16];
		unsigned plen;
	} addrs[MAX_ADDRS];
	struct evtimer *tick;
	union ib_gid synced[MAX_SYNCED]; /* MGIDs joined because the kernel listens (sync_groups) */
	unsigned n_synced;
	uint64_t tap_rx, tap_tx, tap_drops, tap_write_errors;
	/* The TAP's offloads (datagram mode unless --offloads off): super-frames the kernel
	 * handed over (tso_frames) cut into tso_segs segments, partial checksums completed
	 * (csum_completed), frames whose metadata did not check (offload_refused). */
	bool offloads;
	uint64_t tso_frames, tso_segs, csum_completed, offload_refused;
	/* Sends posted and not completed (host_post, handle_wc), against the send queue's
	 * depth: the TAP stops being read while fewer slots are free than one frame from it
	 * may need (tx_reserve) (tap_stopped; tx_stops counts the stops), as a NIC driver
	 * stops its queue. */
	unsigned send_depth, tx_inflight;
	bool tap_stopped, tx_progress;
	uint64_t tx_stops, tx_resyncs;
	/* While a batch of TAP frames is read (on_tap), the link's sends wait here and go
	 * as one chain per QP at its end (tx_flush): one ibv_post_send, one doorbell, for
	 * up to 32 segments. send_depth entries: all of them are counted in tx_inflight. */
	struct ibp_send *txq;
	unsigned txq_len;
	bool tx_batch;
	uint64_t tx_chains, tx_flush_drops;
	uint64_t icmp_too_big, icmp_refused, mcast_too_big;
	/* TCP segments to the kernel merged (pkt/gro): written as one GSO frame each, so
	 * that the kernel takes up to 64 KiB per write and per trip through its stack, as
	 * the Linux IPoIB driver's NAPI GRO gives it. gro_frames: frames of two segments
	 * or more; gro_segs: the segments in them. */
	struct gro_tcp gro;
	uint64_t gro_frames, gro_segs;
	uint8_t icmp_frame[HL2_ETH_HLEN + ICMP6_ERR_MAX];
	uint8_t frame[FRAME_MAX];
	uint8_t seg_frame[FRAME_MAX]; /* one segment of a super-frame (on_tap_offload) */
	uint8_t gro_frame[HL2_ETH_HLEN + GRO_MAX_LEN];
};

static void die(const char *what, int err)
{
	fprintf(stderr, "ibgw-host: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* ---- TAP ------------------------------------------------------------------------ */

static int ifreq_ioctl(unsigned long req, struct ifreq *ifr, int family)
{
	int s = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0), r;

	if (s < 0)
		return -errno;
	r = ioctl(s, req, ifr) < 0 ? -errno : 0;
	close(s);
	return r;
}

static int tap_open(struct host *h)
{
	struct ifreq ifr;
	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	char path[128];
	FILE *f;

	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	/* Every frame either way starts with a struct virtio_net_hdr: what we write may be a
	 * GSO frame (pkt/gro), what we read may be one (on_tap_offload). */
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", h->tap);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	/* Datagram mode offers the kernel TSO and checksum offload, as the Linux IPoIB driver
	 * does on an HCA with UD LSO and checksum offload (ipoib_set_dev_features); connected
	 * mode offers none, as the driver turns them off there (RC has no LSO). */
	if (h->offloads &&
	    ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	/* Carrier off until the IPoIB link is up. */
	int off = 0;

	ioctl(fd, TUNSETCARRIER, &off);
	/* The link-local address is the port GUID's (RFC 4391), not the MAC's EUI-64. */
	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/addr_gen_mode", h->tap);
	f = fopen(path, "w");
	if (f) {
		fputs("1\n", f);
		fclose(f);
	}
	h->tap_fd = fd;
	return 0;
}

static int tap_set_mac(struct host *h, const uint8_t mac[6])
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", h->tap);
	ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
	memcpy(ifr.ifr_hwaddr.sa_data, mac, 6);
	return ifreq_ioctl(SIOCSIFHWADDR, &ifr, AF_INET);
}

static int tap_set_mtu(struct host *h, unsigned mtu)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", h->tap);
	ifr.ifr_mtu = (int)mtu;
	return ifreq_ioctl(SIOCSIFMTU, &ifr, AF_INET);
}

static int tap_up(struct host *h)
{
	struct ifreq ifr;
	int r;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", h->tap);
	r = ifreq_ioctl(SIOCGIFFLAGS, &ifr, AF_INET);
	if (r < 0)
		return r;
	ifr.ifr_flags |= IFF_UP;
	return ifreq_ioctl(SIOCSIFFLAGS, &ifr, AF_INET);
}

static int tap_add_addr(struct host *h, int family, const uint8_t *a, unsigned plen)
{
	struct ifreq ifr;
	int r;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", h->tap);
	if (family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
		uint32_t mask = plen ? htonl(0xffffffffu << (32 - plen)) : 0;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, a, 4);
		r = ifreq_ioctl(SIOCSIFADDR, &ifr, AF_INET);
		if (r < 0)
			return r;
		sin->sin_addr.s_addr = mask;
		return ifreq_ioctl(SIOCSIFNETMASK, &ifr, AF_INET);
	}
	struct in6_ifreq_compat r6;
	int s = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		return -errno;
	if (ioctl(s, SIOCGIFINDEX, &ifr) < 0) {
		r = -errno;
		close(s);
		return r;
	}
	memset(&r6, 0, sizeof(r6));
	memcpy(&r6.addr, a, 16);
	r6.prefixlen = plen;
	r6.ifindex = ifr.ifr_ifindex;
	r = ioctl(s, SIOCSIFADDR, &r6) < 0 ? -errno : 0;
	close(s);
	return r == -EEXIST ? 0 : r;
}

static void tap_carrier(struct host *h, bool on)
{
	int v = on;

	ioctl(h->tap_fd, TUNSETCARRIER, &v);
}

/* ---- IB -> TAP ------------------------------------------------------------------ */

/* frame[0..len) to the kernel, with its offload metadata; counted in tap_tx (a merged
 * frame once). */
static bool tap_write(struct host *h, const struct gso_vnet *v, const uint8_t *frame, size_t len)
{
	uint8_t hdr[GSO_VNET_LEN];
	struct iovec iov[2] = { { hdr, sizeof(hdr) }, { (void *)frame, len } };

	gso_vnet_write(hdr, v);
	if (writev(h->tap_fd, iov, 2) != (ssize_t)(sizeof(hdr) + len)) {
		h->tap_write_errors++;
		return false;
	}
	h->tap_tx++;
	return true;
}

/* The held TCP segments to the kernel, as one frame. */
static void gro_flush(struct host *h)
{
	struct gso_vnet v;
	unsigned segs = h->gro.segs;
	size_t n;

	if (!segs)
		return;
	n = gro_tcp_end(&h->gro, HL2_ETH_HLEN, &v);
	if (segs > 1) {
		h->gro_frames++;
		h->gro_segs += segs;
	}
	tap_write(h, &v, h->gro_frame, HL2_ETH_HLEN + n);
}

/* An IP frame to the kernel: appended to the held TCP segments, or held to start a merge
 * (the held ones written first), or written as it is. Frames keep their order. */
static void to_tap_frame(struct host *h, const uint8_t *frame, size_t len)
{
	static const struct gso_vnet plain;
	const uint8_t *ip = frame + HL2_ETH_HLEN;
	size_t iplen = len - HL2_ETH_HLEN;

	if (h->gro.segs) {
		if (!memcmp(frame, h->gro_frame, HL2_ETH_HLEN) &&
		    gro_tcp_append(&h->gro, ip, iplen))
			return;
		gro_flush(h);
	}
	if (((frame[12] == 0x08 && frame[13] == 0x00) ||
	     (frame[12] == 0x86 && frame[13] == 0xdd)) &&
	    gro_tcp_begin(&h->gro, h->gro_frame + HL2_ETH_HLEN, sizeof(h->gro_frame) - HL2_ETH_HLEN,
			  ip, iplen)) {
		memcpy(h->gro_frame, frame, HL2_ETH_HLEN);
		return;
	}
	tap_write(h, &plain, frame, len);
}

static void to_tap(struct host *h, const struct ipoib_rx *rx)
{
	struct hl2_src src = { .qpn = rx->src_qpn,
			       .lid = rx->slid,
			       .has_gid = rx->has_grh || rx->rc,
			       .gid = rx->sgid,
			       .mcast = rx->mcast };
	int n;

	if (!h->l2_ready)
		return;
	n = hl2_ib_to_eth(&h->l2, rx->ethertype, rx->data, rx->len, &src, h->frame,
			  sizeof(h->frame));
	if (n < 0) {
		h->tap_drops++;
		return;
	}
	to_tap_frame(h, h->frame, (size_t)n);
}

static void handle_wc(struct host *h, struct ibp_wc *wc)
{
	struct ipoib_rx rx;
	enum ipoib_rx_kind k;

	if (wc->kind == IBP_WC_SEND) {
		if (h->tx_inflight)
			h->tx_inflight--;
		h->tx_progress = true;
		ipoib_link_tx_done(h->link, wc);
		return;
	}
	k = ipoib_link_rx(h->link, 0, wc, &rx);
	if (k == IPOIB_RX_ARP || k == IPOIB_RX_ND) {
		/* Learned by the link; spoofed or malformed ARP/ND stops here. */
		if (ipoib_link_input_ctl(h->link, &rx) == 0)
			to_tap(h, &rx);
	} else if (k != IPOIB_RX_DROP) {
		to_tap(h, &rx);
	}
	if (wc->buf)
		ipoib_link_repost(h->link, 0, wc->buf);
}

static void poll_port_batches(struct host *h)
{
	struct ibp_wc wcs[WC_BATCH];
	int n, rounds = 0;

	for (;;) {
		n = h->ops->poll(h->port, 0, wcs, WC_BATCH);
		for (int i = 0; i < n; i++)
			handle_wc(h, &wcs[i]);
		if (n > 0 && ++rounds < 16)
			continue;
		if (n > 0)
			return; /* let the loop run other work; the fd stays readable */
		h->ops->arm(h->port, 0);
		n = h->ops->poll(h->port, 0, wcs, WC_BATCH);
		for (int i = 0; i < n; i++)
			handle_wc(h, &wcs[i]);
		if (n <= 0)
			return;
	}
}

/* ---- the send queue and the TAP's queue -------------------------------------------- */

/* The sends one TAP frame may become: a super-frame's segments with the offloads. */
static unsigned tx_reserve(const struct host *h)
{
	return h->offloads ? GSO_SEGS_MAX : 1;
}

/*
 * The TAP is read while the send queue has room for a whole super-frame's segments; else
 * its queue stops (no EPOLLIN) and the kernel holds what comes (its qdisc, then TCP's
 * own pacing), as the Linux IPoIB driver stops its netdev queue when the send ring is
 * full and wakes it at half (ipoib_send, ipoib_ib_handle_tx_wc). A post that found the
 * queue full would lose the packet.
 */
static bool tx_room(const struct host *h)
{
	return h->tx_inflight + tx_reserve(h) <= h->send_depth;
}

static void tap_stop(struct host *h)
{
	if (h->tap_stopped || evloop_mod_fd(h->loop, h->tap_fd, 0) < 0)
		return;
	h->tap_stopped = true;
	h->tx_stops++;
}

static void tap_wake(struct host *h)
{
	if (h->tap_stopped && evloop_mod_fd(h->loop, h->tap_fd, EPOLLIN) == 0)
		h->tap_stopped = false;
}

/* The sends held by a batch, posted: consecutive sends on one QP as one chain (the
 * backend's post_send). A send the port refuses (its queue in error) is dropped here,
 * its buffer returned and counted (tx_flush_drops; the link counted it sent). */
static void tx_flush(struct host *h)
{
	unsigned done = 0;

	while (done < h->txq_len) {
		int r = h->ops->post_send(0, &h->txq[done], h->txq_len - done);

		h->tx_chains++;
		if (r > 0) {
			done += (unsigned)r;
			continue;
		}
		h->ops->buf_put(h->port, h->txq[done].buf);
		h->tx_flush_drops++;
		h->tx_inflight--;
		done++;
	}
	h->txq_len = 0;
}

/* The link's post hook (every send of the link): counted in flight until its
 * completion; held for the batch's chain while on_tap reads (never more than the
 * queue's depth: tx_room keeps the sends in flight, these among them, within it). */
static int host_post(void *ctx, struct ibp_send *s)
{
	struct host *h = ctx;
	int r;

	if (h->tx_batch) {
		if (h->txq_len == h->send_depth)
			tx_flush(h);
		h->txq[h->txq_len++] = *s;
		h->tx_inflight++;
		return 1;
	}
	r = h->ops->post_send(0, s, 1);
	h->tx_chains++;
	if (r == 1)
		h->tx_inflight++;
	return r;
}

/* What the port has, then the merged segments to the kernel: nothing is held past the
 * completions at hand (as NAPI GRO flushes at the end of a poll). */
static void poll_port(struct host *h)
{
	poll_port_batches(h);
	gro_flush(h);
	if (h->tap_stopped && h->tx_inflight <= h->send_depth / 2)
		tap_wake(h);
}

static void on_cq(struct evloop *loop, int fd, uint32_t ev, void *arg)
{
	(void)loop;
	(void)fd;
	(void)ev;
	poll_port(arg);
}

/* ---- TAP -> IB ------------------------------------------------------------------ */

/*
 * A packet from the kernel above the destination's MTU (connected mode: the TAP's MTU
 * is the connected one, 65520; a UD-only peer takes 2044): answer ICMP fragmentation
 * needed / packet too big with that MTU, as the Linux IPoIB driver does
 * (ipoib_cm_skb_too_long), so the kernel caches the PMTU for that destination. The
 * error comes from the destination's address (a source of our own would be a martian
 * to the kernel), from the peer's MAC.
 */
static void too_big(struct host *h, const uint8_t *frame, size_t len, uint32_t mtu)
{
	struct icmp_err e = { .code = 0, .param = mtu };
	const uint8_t *ip = frame + HL2_ETH_HLEN;
	size_t iplen = len - HL2_ETH_HLEN, n = 0;
	uint16_t et = (uint16_t)(frame[12] << 8 | frame[13]);
	enum icmp_reason r;
	uint8_t *out = h->icmp_frame;

	if (et == 0x0800 && iplen >= 20) {
		e.type = ICMP4_DEST_UNREACH;
		e.code = ICMP4_CODE_FRAG_NEEDED;
		e.src = ip + 16;
		r = icmp4_error(&e, ip, iplen, out + HL2_ETH_HLEN,
				sizeof(h->icmp_frame) - HL2_ETH_HLEN, &n);
	} else if (et == 0x86dd && iplen >= 40) {
		e.type = ICMP6_PACKET_TOO_BIG;
		e.src = ip + 24;
		r = icmp6_error(&e, ip, iplen, out + HL2_ETH_HLEN,
				sizeof(h->icmp_frame) - HL2_ETH_HLEN, &n);
	} else {
		r = ICMP_INVOKING_MALFORMED;
	}
	if (r != ICMP_OK) {
		h->icmp_refused++;
		return;
	}
	memcpy(out, frame + 6, 6); /* to the kernel's MAC */
	memcpy(out + 6, frame, 6); /* from the peer's */
	out[12] = frame[12];
	out[13] = frame[13];
	gro_flush(h);
	if (tap_write(h, &(struct gso_vnet){ 0 }, out, HL2_ETH_HLEN + n))
		h->icmp_too_big++;
}

static void from_tap(struct host *h, const uint8_t *frame, size_t len)
{
	struct ibp_buf *b;
	struct hl2_dst dst;
	uint16_t et;
	int n;

	if (!ipoib_link_is_up(h->link) || !h->l2_ready) {
		h->tap_drops++;
		return;
	}
	b = ipoib_link_buf(h->link);
	if (!b) {
		h->tap_drops++;
		return;
	}
	n = hl2_eth_to_ib(&h->l2, frame, len, b->data + IPOIB_ENCAP_LEN, b->cap - IPOIB_ENCAP_LEN,
			  &et, &dst);
	if (n < 0) {
		h->ops->buf_put(h->port, b);
		h->tap_drops++;
		return;
	}
	b->len = (uint32_t)n;
	if (h->connected) {
		uint32_t mtu = dst.kind == HL2_DST_UNICAST ? ipoib_link_peer_mtu(h->link, &dst.hw)
							   : ipoib_link_mtu(h->link);

		if ((uint32_t)n > mtu) {
			h->ops->buf_put(h->port, b);
			h->tap_drops++;
			if (dst.kind == HL2_DST_UNICAST && dst.is_ip)
				too_big(h, frame, len, mtu);
			else
				h->mcast_too_big++;
			return;
		}
	}
	switch (dst.kind) {
	case HL2_DST_BCAST:
		ipoib_link_xmit_bcast(h->link, et, b);
		break;
	case HL2_DST_MCAST:
		ipoib_link_xmit_ip(h->link, dst.family, dst.ip, et, b);
		break;
	case HL2_DST_UNICAST:
		if (dst.is_ip) {
			struct neigh_entry *e =
			    neigh_lookup(ipoib_link_neigh(h->link), dst.family, dst.ip);

			if (e)
				neigh_entry_used(e, evloop_now_ms());
		}
		ipoib_link_xmit_hw(h->link, &dst.hw, et, b);
		break;
	}
}

static void sync_groups(struct host *h);

/* An IGMP or MLD message from the kernel (IPv4 protocol 2; IPv6 with a hop-by-hop
 * header first, as MLD always has): its membership list just changed. */
static bool is_membership_report(const uint8_t *f, size_t n)
{
	if (n >= HL2_ETH_HLEN + 20 && f[12] == 0x08 && f[13] == 0x00)
		return f[HL2_ETH_HLEN + 9] == 2;
	return n >= HL2_ETH_HLEN + 40 && f[12] == 0x86 && f[13] == 0xdd && f[HL2_ETH_HLEN + 6] == 0;
}

/*
 * A frame the kernel left to the TAP's offloads: its metadata checked against it
 * (pkt/gso, as the gateway's af_packet port does), then a partial checksum completed,
 * or a TCP super-frame cut into segments of the sender's MSS within the TAP's MTU, each
 * its own IP header and full checksum, as an HCA's LSO cuts it. Each segment then goes
 * as any frame. Returns false for a frame refused (counted).
 */
static bool on_tap_offload(struct host *h, const struct gso_vnet *v, uint8_t *frame, size_t len)
{
	struct gso_pkt g;
	struct gso_plan plan;
	bool partial;

	if (gso_check(v, frame, len, &g, &partial) != GSO_OK) {
		h->offload_refused++;
		return false;
	}
	if (g.kind == GSO_NONE) {
		if (partial && gso_l4_csum_fill(frame + HL2_ETH_HLEN, len - HL2_ETH_HLEN))
			h->csum_completed++;
		from_tap(h, frame, len);
		return true;
	}
	if (gso_plan(frame + HL2_ETH_HLEN, len - HL2_ETH_HLEN, &g, ipoib_link_conn_mtu(h->link),
		     &plan) != GSO_OK) {
		h->offload_refused++;
		return false;
	}
	memcpy(h->seg_frame, frame, HL2_ETH_HLEN);
	for (unsigned i = 0; i < plan.n; i++)
		from_tap(h, h->seg_frame,
			 HL2_ETH_HLEN + gso_segment(&plan, frame + HL2_ETH_HLEN, i,
						    h->seg_frame + HL2_ETH_HLEN));
	h->tso_frames++;
	h->tso_segs += plan.n;
	return true;
}

static void on_tap(struct evloop *loop, int fd, uint32_t ev, void *arg)
{
	struct host *h = arg;
	uint8_t hdr[GSO_VNET_LEN];
	struct iovec iov[2] = { { hdr, sizeof(hdr) }, { h->frame, sizeof(h->frame) } };
	struct gso_vnet v;

	(void)loop;
	(void)ev;
	h->tx_batch = true;
	for (int i = 0; i < TAP_BATCH; i++) {
		ssize_t n;

		if (!tx_room(h)) {
			/* What waits goes first, then the completions at hand are reaped (with
			 * nothing held while the receives they bring are handled). */
			tx_flush(h);
			h->tx_batch = false;
			poll_port(h);
			h->tx_batch = true;
			if (!tx_room(h)) {
				tap_stop(h);
				break;
			}
		}
		n = readv(fd, iov, 2);

		if (n <= (ssize_t)sizeof(hdr))
			break;
		n -= (ssize_t)sizeof(hdr);
		h->tap_rx++;
		gso_vnet_read(&v, hdr);
		if (v.gso_type != GSO_VNET_NONE || (v.flags & GSO_VNET_F_NEEDS_CSUM)) {
			if (!on_tap_offload(h, &v, h->frame, (size_t)n))
				h->tap_drops++;
			continue;
		}
		/* The groups joined before the report goes out, so that what a router sends
		 * once it heard the report finds this host a member already. */
		if (is_membership_report(h->frame, (size_t)n) && ipoib_link_is_up(h->link))
			sync_groups(h);
		from_tap(h, h->frame, (size_t)n);
	}
	tx_flush(h);
	h->tx_batch = false;
}

/* ---- link and port events ------------------------------------------------------- */

static void on_link_state(void *ctx, struct ipoib_link *l, bool up)
{
	struct host *h = ctx;
	struct ipoib_hwaddr hw;

	if (up) {
		ipoib_link_hwaddr(l, &hw);
		if (!h->l2_ready || hw.qpn != h->l2.own_hw.qpn) {
			hl2_init(&h->l2, &hw);
			h->l2_ready = true;
		}
		tap_set_mtu(h, ipoib_link_conn_mtu(l));
	}
	tap_carrier(h, up);
}

/* The SA client's router watch (1 s polls of every router a PathRecord named): paths
 * through a router that died are asked for again (the SA then names the other one) and
 * connections through it torn down, as the gateway does (gateway/dp_routers.c). */
static void on_sa_event(void *arg, const struct sa_event *ev)
{
	struct host *h = arg;
	unsigned n = 0;

	if (ev->type != SA_EV_ROUTER_DOWN && ev->type != SA_EV_ROUTER_UP)
		return;
	if (ev->type == SA_EV_ROUTER_DOWN)
		n = ipoib_link_cm_disconnect_dlid(h->link, ev->lid);
	ipoib_link_paths_requery(h->link);
	log_info("IB router LID 0x%x %s: paths re-resolved, %u connections torn down", ev->lid,
		 ev->type == SA_EV_ROUTER_DOWN ? "down" : "up", n);
}

static void on_async(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct host *h = arg;
	struct ibp_event ev;

	(void)loop;
	(void)fd;
	(void)events;
	while (h->ops->next_event(h->port, &ev) == 0) {
		ipoib_link_port_event(h->link, &ev);
		if (ev.type == IBP_EVENT_PORT_ACTIVE || ev.type == IBP_EVENT_CLIENT_REREGISTER ||
		    ev.type == IBP_EVENT_SM_CHANGE || ev.type == IBP_EVENT_LID_CHANGE) {
			log_info("port event %d: rejoining", (int)ev.type);
			sa_client_reregister(h->sa);
		}
	}
}

static void on_port_info(void *arg, const struct sa_port_info *pi)
{
	struct host *h = arg;

	if (pi->lid == h->pi.lid && pi->sm_lid == h->pi.sm_lid && pi->state == h->pi.state &&
	    pi->subnet_timeout == h->pi.subnet_timeout)
		return;
	h->pi = *pi;
	if (h->sa)
		sa_client_set_port(h->sa, pi);
}

/* The groups the kernel listens to on the TAP, as the Linux IPoIB driver follows its
 * device's multicast list (ipoib_mcast_restart_task): /proc/net/igmp (IPv4: a device
 * line, then one line per group, the address as the kernel's u32 in hex) and
 * /proc/net/igmp6 (IPv6: index, device, address in hex). Each group's MGID (RFC 4391 4,
 * the link's P_Key) is joined full member; one the kernel left is left. Up to
 * MAX_SYNCED groups. */
static unsigned kernel_groups(struct host *h, union ib_gid *out, unsigned max)
{
	char line[256], dev[IFNAMSIZ + 1], hex[33];
	unsigned n = 0;
	bool ours = false;
	FILE *f = fopen("/proc/net/igmp", "r");
	int idx;

	while (f && fgets(line, sizeof(line), f) && n < max) {
		unsigned v;

		if (line[0] != '\t' && sscanf(line, "%d %16s", &idx, dev) == 2) {
			ours = !strcmp(dev, h->tap);
			continue;
		}
		if (ours && sscanf(line, " %8x", &v) == 1 &&
		    ipoib_mgid_from_ipv4(ntohl(v), ipoib_link_pkey(h->link), IB_MGID_SCOPE_LINK,
					 &out[n]) == 0)
			n++;
	}
	if (f)
		fclose(f);
	f = fopen("/proc/net/igmp6", "r");
	while (f && fgets(line, sizeof(line), f) && n < max) {
		uint8_t g[16];
		bool ok = true;

		if (sscanf(line, "%d %16s %32s", &idx, dev, hex) != 3 || strcmp(dev, h->tap))
			continue;
		for (int i = 0; i < 16 && ok; i++) {
			unsigned v;

			ok = sscanf(hex + 2 * i, "%2x", &v) == 1;
			g[i] = (uint8_t)v;
		}
		if (ok && ipoib_mgid_from_ipv6(g, ipoib_link_pkey(h->link), IB_MGID_SCOPE_LINK,
					       &out[n]) == 0)
			n++;
	}
	if (f)
		fclose(f);
	return n;
}

static bool gid_in(const union ib_gid *g, const union ib_gid *set, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (ib_gid_equal(g, &set[i]))
			return true;
	return false;
}

static void sync_groups(struct host *h)
{
	union ib_gid now[MAX_SYNCED];
	unsigned n = kernel_groups(h, now, MAX_SYNCED);

	for (unsigned i = 0; i < n; i++)
		if (!gid_in(&now[i], h->synced, h->n_synced))
			ipoib_link_mcast_join(h->link, &now[i]);
	for (unsigned i = 0; i < h->n_synced; i++)
		if (!gid_in(&h->synced[i], now, n))
			(void)ipoib_link_mcast_leave(h->link, &h->synced[i]);
	memcpy(h->synced, now, n * sizeof(now[0]));
	h->n_synced = n;
}

static void on_tick(struct evloop *loop, struct evtimer *t, void *arg)
{
	struct host *h = arg;

	(void)loop;
	(void)t;
	sa_umad_poll_port(h->umad);
	/* Stopped a whole tick without one send completing: sends the port will never
	 * complete (a queue torn down with them) would stop the TAP for good; count them
	 * gone. */
	if (h->tap_stopped && !h->tx_progress) {
		log_warning("%u sends without completion for 1 s: TAP queue woken", h->tx_inflight);
		h->tx_inflight = 0;
		h->tx_resyncs++;
		tap_wake(h);
	}
	h->tx_progress = false;
	if (ipoib_link_is_up(h->link))
		sync_groups(h);
}

/* ---- control socket ------------------------------------------------------------- */

static void fmt_addr(int family, const uint8_t *a, char *buf, size_t len)
{
	inet_ntop(family, a, buf, (socklen_t)len);
}

struct dump_ctx {
	FILE *f;
};

static int dump_neigh(void *arg, const struct neigh_info *ni)
{
	struct dump_ctx *d = arg;
	char as[INET6_ADDRSTRLEN], hs[IPOIB_HWADDR_STRLEN] = "-", gs[IB_GID_STRLEN] = "-";
	struct ipoib_hwaddr hw = { 0 };

	fmt_addr(ni->family, ni->addr, as, sizeof(as));
	if (ni->has_link && ipoib_hwaddr_decode(ni->link.addr, ni->link.len, &hw) == 0) {
		ipoib_hwaddr_format(&hw, hs, sizeof(hs));
		ib_gid_format(&hw.gid, gs, sizeof(gs));
	}
	fprintf(d->f,
		"neigh %s %s hwaddr %s qpn 0x%x gid %s dlid %u sl %u mtu %u mode %s usable %d "
		"age_ms %llu queued %u queue_drops %llu probes %u\n",
		as, neigh_state_name(ni->state), hs, hw.qpn, gs, ni->link.dlid, ni->link.sl,
		ni->link.mtu, ni->link.conn ? "RC" : "UD", ni->link.usable,
		(unsigned long long)ni->age_ms, ni->queued, (unsigned long long)ni->queue_drops,
		ni->probes);
	return 0;
}

static int dump_group(void *arg, const struct ipoib_mcast_info *mi)
{
	struct dump_ctx *d = arg;
	char gs[IB_GID_STRLEN];

	ib_gid_format(&mi->mgid, gs, sizeof(gs));
	fprintf(d->f, "group %s %s %s mlid 0x%x qkey 0x%x\n", gs, mi->full ? "full" : "sendonly",
		mi->joined ? "joined" : "joining", mi->mlid, mi->qkey);
	return 0;
}

static int dump_conn(void *arg, const struct ipoib_conn_info *ci)
{
	struct dump_ctx *d = arg;
	char hs[IPOIB_HWADDR_STRLEN], gs[IB_GID_STRLEN];

	ipoib_hwaddr_format(&ci->peer, hs, sizeof(hs));
	ib_gid_format(&ci->peer.gid, gs, sizeof(gs));
	fprintf(d->f,
		"conn peer %s qpn 0x%x gid %s state %s %s up %d local_qpn 0x%x remote_qpn 0x%x "
		"mtu %u dlid %u age_ms %llu idle_ms %llu tx_packets %llu tx_bytes %llu "
		"rx_packets %llu rx_bytes %llu\n",
		hs, ci->peer.qpn, gs, cm_state_name(ci->state), ci->active ? "active" : "passive",
		ci->up, ci->local_qpn, ci->remote_qpn, ci->mtu, ci->dlid,
		(unsigned long long)ci->age_ms, (unsigned long long)ci->idle_ms,
		(unsigned long long)ci->tx_packets, (unsigned long long)ci->tx_bytes,
		(unsigned long long)ci->rx_packets, (unsigned long long)ci->rx_bytes);
	return 0;
}

static void dump_cm(struct host *h, FILE *f)
{
	const struct cm_stats *cs = ipoib_link_cm_stats(h->link);
	static const char *const an[8] = {
		"req", "mra", "rej", "rep", "rtu", "dreq", "drep", "cpi"
	};

	if (!cs)
		return;
	fprintf(f,
		"cm_stats rx_mads %llu tx_mads %llu tx_errors %llu established %llu "
		"crossing_accepted %llu crossing_rejected %llu retransmits %llu timeouts %llu "
		"rx_dup_req %llu rx_stale %llu rx_unclaimed %llu return_path_other_router %llu",
		(unsigned long long)cs->rx_mads, (unsigned long long)cs->tx_mads,
		(unsigned long long)cs->tx_errors, (unsigned long long)cs->established,
		(unsigned long long)cs->crossing_accepted,
		(unsigned long long)cs->crossing_rejected, (unsigned long long)cs->retransmits,
		(unsigned long long)cs->timeouts, (unsigned long long)cs->rx_dup_req,
		(unsigned long long)cs->rx_stale, (unsigned long long)cs->rx_unclaimed,
		(unsigned long long)cs->return_path_other_router);
	for (int i = 0; i < 8; i++)
		fprintf(f, " tx_%s %llu rx_%s %llu", an[i], (unsigned long long)cs->tx_by_attr[i],
			an[i], (unsigned long long)cs->rx_by_attr[i]);
	for (int i = 0; i < CM_CLOSE_COUNT; i++)
		fprintf(f, " closed_%s %llu", cm_close_reason_name(i),
			(unsigned long long)cs->closed[i]);
	fprintf(f, "\n");
	if (h->cmp && ipoib_cm_port_umad(h->cmp)) {
		const struct cm_umad_stats *us = cm_umad_get_stats(ipoib_cm_port_umad(h->cmp));

		fprintf(f, "umad_stats tx %llu tx_errors %llu rx %llu rx_errors %llu\n",
			(unsigned long long)us->tx, (unsigned long long)us->tx_errors,
			(unsigned long long)us->rx, (unsigned long long)us->rx_errors);
	}
}

static void dump(struct host *h, FILE *f, const char *what)
{
	struct dump_ctx d = { .f = f };
	struct ipoib_link_stats st;
	struct neigh_stats ns;
	struct ipoib_hwaddr hw;
	char hs[IPOIB_HWADDR_STRLEN];
	bool all = !strcmp(what, "all");

	ipoib_link_stats(h->link, &st);
	neigh_table_stats(ipoib_link_neigh(h->link), &ns);
	ipoib_link_hwaddr(h->link, &hw);
	ipoib_hwaddr_format(&hw, hs, sizeof(hs));
	if (all || !strcmp(what, "link"))
		fprintf(f,
			"link %s node %s state %s pkey 0x%04x qpn 0x%x mtu %u hwaddr %s mac "
			"%02x:%02x:%02x:%02x:%02x:%02x mode %s conn_mtu %u\n",
			h->tap, h->node, ipoib_link_is_up(h->link) ? "up" : "down",
			ipoib_link_pkey(h->link), hw.qpn, ipoib_link_mtu(h->link), hs,
			h->l2.own_mac[0], h->l2.own_mac[1], h->l2.own_mac[2], h->l2.own_mac[3],
			h->l2.own_mac[4], h->l2.own_mac[5], h->connected ? "connected" : "datagram",
			ipoib_link_conn_mtu(h->link));
	if (all || !strcmp(what, "stats")) {
		fprintf(
		    f,
		    "stats rx_packets %llu tx_packets %llu rx_bytes %llu tx_bytes %llu rx_mcast "
		    "%llu tx_mcast %llu rx_arp %llu rx_nd %llu tx_arp %llu tx_nd %llu joins %llu "
		    "join_failures %llu up_count %llu down_count %llu paths_resolved %llu "
		    "path_failures %llu ah_rebuilt %llu\n",
		    (unsigned long long)st.rx_packets, (unsigned long long)st.tx_packets,
		    (unsigned long long)st.rx_bytes, (unsigned long long)st.tx_bytes,
		    (unsigned long long)st.rx_mcast, (unsigned long long)st.tx_mcast,
		    (unsigned long long)st.rx_arp, (unsigned long long)st.rx_nd,
		    (unsigned long long)st.tx_arp, (unsigned long long)st.tx_nd,
		    (unsigned long long)st.joins, (unsigned long long)st.join_failures,
		    (unsigned long long)st.up_count, (unsigned long long)st.down_count,
		    (unsigned long long)st.paths_resolved, (unsigned long long)st.path_failures,
		    (unsigned long long)st.ah_rebuilt);
		fprintf(
		    f,
		    "rc rc_tx_packets %llu rc_tx_bytes %llu rc_rx_packets %llu rc_rx_bytes %llu "
		    "rc_tx_errors %llu conn_requests %llu conn_up %llu conn_down %llu "
		    "conn_failed %llu conn_queued %llu ud_to_rc_peer %llu icmp_too_big %llu "
		    "icmp_refused %llu mcast_too_big %llu\n",
		    (unsigned long long)st.rc_tx_packets, (unsigned long long)st.rc_tx_bytes,
		    (unsigned long long)st.rc_rx_packets, (unsigned long long)st.rc_rx_bytes,
		    (unsigned long long)st.rc_tx_errors, (unsigned long long)st.conn_requests,
		    (unsigned long long)st.conn_up, (unsigned long long)st.conn_down,
		    (unsigned long long)st.conn_failed, (unsigned long long)st.conn_queued,
		    (unsigned long long)st.ud_to_rc_peer, (unsigned long long)h->icmp_too_big,
		    (unsigned long long)h->icmp_refused, (unsigned long long)h->mcast_too_big);
		dump_cm(h, f);
		fprintf(f, "drops");
		for (int i = 0; i < IPOIB_DROP_COUNT; i++)
			fprintf(f, " %s %llu", ipoib_drop_name(i), (unsigned long long)st.drops[i]);
		fprintf(f, "\n");
		fprintf(
		    f,
		    "neigh_stats entries %u allocs %llu destroys %llu res_failed %llu "
		    "unres_discards %llu queued %llu mcast_solicits %llu ucast_solicits %llu "
		    "table_full %llu unres_evictions %llu stale_evictions %llu learn_refused %llu "
		    "reachable_ms %u\n",
		    ns.entries, (unsigned long long)ns.allocs, (unsigned long long)ns.destroys,
		    (unsigned long long)ns.res_failed, (unsigned long long)ns.unres_discards,
		    (unsigned long long)ns.queued, (unsigned long long)ns.mcast_solicits,
		    (unsigned long long)ns.ucast_solicits, (unsigned long long)ns.table_full,
		    (unsigned long long)ns.unres_evictions, (unsigned long long)ns.stale_evictions,
		    (unsigned long long)ns.learn_refused,
		    neigh_reachable_time(ipoib_link_neigh(h->link)));
		fprintf(
		    f,
		    "tap rx %llu tx %llu drops %llu write_errors %llu gro_frames %llu gro_segs %llu "
		    "offloads %s tso_frames %llu tso_segs %llu csum_completed %llu "
		    "offload_refused %llu tx_inflight %u tx_stops %llu tx_resyncs %llu "
		    "tx_chains %llu tx_flush_drops %llu "
		    "l2_to_eth %llu l2_to_ib %llu "
		    "arp_rewritten %llu nd_rewritten %llu dhcp_rewritten %llu unknown_dst_mac %llu unknown_src %llu "
		    "mac_collisions %llu\n",
		    (unsigned long long)h->tap_rx, (unsigned long long)h->tap_tx,
		    (unsigned long long)h->tap_drops, (unsigned long long)h->tap_write_errors,
		    (unsigned long long)h->gro_frames, (unsigned long long)h->gro_segs,
		    h->offloads ? "on" : "off", (unsigned long long)h->tso_frames,
		    (unsigned long long)h->tso_segs, (unsigned long long)h->csum_completed,
		    (unsigned long long)h->offload_refused, h->tx_inflight,
		    (unsigned long long)h->tx_stops, (unsigned long long)h->tx_resyncs,
		    (unsigned long long)h->tx_chains, (unsigned long long)h->tx_flush_drops,
		    (unsigned long long)h->l2.st.to_eth, (unsigned long long)h->l2.st.to_ib,
		    (unsigned long long)h->l2.st.arp_rewritten,
		    (unsigned long long)h->l2.st.nd_rewritten,
		    (unsigned long long)h->l2.st.dhcp_rewritten,
		    (unsigned long long)h->l2.st.unknown_dst_mac,
		    (unsigned long long)h->l2.st.unknown_src,
		    (unsigned long long)h->l2.st.mac_collisions);
	}
	if (all || !strcmp(what, "neigh"))
		neigh_foreach(ipoib_link_neigh(h->link), dump_neigh, &d);
	if (all || !strcmp(what, "peers"))
		for (unsigned i = 0; i < h->l2.n_peers; i++) {
			const struct hl2_peer *p = &h->l2.peers[i];

			ipoib_hwaddr_format(&p->hw, hs, sizeof(hs));
			fprintf(f, "peer mac %02x:%02x:%02x:%02x:%02x:%02x hwaddr %s lid %u\n",
				p->mac[0], p->mac[1], p->mac[2], p->mac[3], p->mac[4], p->mac[5],
				hs, p->lid);
		}
	if (all || !strcmp(what, "groups"))
		ipoib_link_mcast_foreach(h->link, dump_group, &d);
	if (all || !strcmp(what, "conns"))
		ipoib_link_conn_foreach(h->link, dump_conn, &d);
}

/* An ICMP echo request from our first IPv4 address to dst, through the link's own
 * resolution (the gateway's path): ipoib_link_xmit_ip. */
static int xmit_ip_test(struct host *h, const char *addr, unsigned count, FILE *f)
{
	uint8_t dst[4], *p;
	struct ibp_buf *b;
	int queued = 0, sent = 0, dropped = 0, src = -1;

	for (int i = 0; i < h->n_addrs; i++)
		if (h->addrs[i].family == AF_INET) {
			src = i;
			break;
		}
	if (src < 0 || inet_pton(AF_INET, addr, dst) != 1)
		return -EINVAL;
	for (unsigned i = 0; i < count; i++) {
		b = ipoib_link_buf(h->link);
		if (!b)
			return -ENOBUFS;
		p = b->data + IPOIB_ENCAP_LEN;
		memset(p, 0, 28);
		p[0] = 0x45;
		ip_put16(p + 2, 28);
		ip_put16(p + 4, (uint16_t)(0x4000 + i));
		p[8] = 64;
		p[9] = 1;
		memcpy(p + 12, h->addrs[src].a, 4);
		memcpy(p + 16, dst, 4);
		ip_put16(p + 10, ip_csum(p, 20));
		p[20] = 8; /* echo request */
		ip_put16(p + 24, 0x1b1b);
		ip_put16(p + 26, (uint16_t)i);
		ip_put16(p + 22, ip_csum(p + 20, 8));
		b->len = 28;
		int r = ipoib_link_xmit_ip(h->link, AF_INET, dst, 0x0800, b);

		if (r == 0)
			sent++;
		else if (r == 1)
			queued++;
		else
			dropped++;
	}
	fprintf(f, "xmit-ip %s count %u sent %d queued %d dropped %d\n", addr, count, sent, queued,
		dropped);
	return 0;
}

static void on_ctl(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct host *h = arg;
	char req[256], a1[64] = "", a2[64] = "", a3[32] = "";
	int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC), n;
	FILE *f;

	(void)loop;
	(void)events;
	if (c < 0)
		return;
	struct timeval tv = { .tv_sec = 1 };

	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = (int)read(c, req, sizeof(req) - 1);
	if (n <= 0) {
		close(c);
		return;
	}
	req[n] = 0;
	f = fdopen(c, "w");
	if (!f) {
		close(c);
		return;
	}
	sscanf(req, "%63s %63s %31s", a1, a2, a3);
	if (!strcmp(a1, "dump"))
		dump(h, f, a2[0] ? a2 : "all");
	else if (!strcmp(a1, "xmit-ip")) {
		if (xmit_ip_test(h, a2, (unsigned)atoi(a3), f) < 0)
			fprintf(f, "error bad xmit-ip request\n");
	} else
		fprintf(f, "error unknown request '%s'\n", a1);
	fclose(f);
}

static int ctl_listen(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -errno;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		close(fd);
		return -ENAMETOOLONG;
	}
	strcpy(sun.sun_path, path);
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(fd, 8) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

static int ctl_client(const char *path, int argc, char **argv)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	char req[256] = "", buf[4096];
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ssize_t n;

	if (fd < 0 || strlen(path) >= sizeof(sun.sun_path))
		return 1;
	strcpy(sun.sun_path, path);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		fprintf(stderr, "ibgw-host: %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (int i = 0; i < argc; i++) {
		strncat(req, argv[i], sizeof(req) - strlen(req) - 2);
		strcat(req, " ");
	}
	if (write(fd, req, strlen(req)) < 0)
		return 1;
	shutdown(fd, SHUT_WR);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stdout);
	close(fd);
	return 0;
}

static void on_signal(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct signalfd_siginfo si;

	(void)events;
	(void)arg;
	if (read(fd, &si, sizeof(si)) == sizeof(si))
		evloop_stop(loop);
}

/* ---- main ----------------------------------------------------------------------- */

static int parse_addr(struct host *h, const char *s)
{
	char buf[64], *slash;
	int fam;

	if (h->n_addrs == MAX_ADDRS)
		return -ENOSPC;
	snprintf(buf, sizeof(buf), "%s", s);
	slash = strchr(buf, '/');
	if (!slash)
		return -EINVAL;
	*slash = 0;
	fam = strchr(buf, ':') ? AF_INET6 : AF_INET;
	if (inet_pton(fam, buf, h->addrs[h->n_addrs].a) != 1)
		return -EINVAL;
	h->addrs[h->n_addrs].family = fam;
	h->addrs[h->n_addrs].plen = (unsigned)atoi(slash + 1);
	h->n_addrs++;
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: ibgw-host [--node N] [--pkey P] "
		"[--mode datagram|connected] [--conn-idle-ms N] [--mcast-hop-limit N] "
		"[--addr A/LEN]... [--tap NAME] [--offloads on|off] [--send-depth N] "
		"[--ctl PATH]\n"
		"       ibgw-host --ctl PATH dump [link|stats|neigh|peers|groups|conns|all]\n"
		"       ibgw-host --ctl PATH xmit-ip ADDR COUNT\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static struct host h;
	static const struct option lo[] = {
		{ "node", required_argument, NULL, 'n' },
		{ "pkey", required_argument, NULL, 'p' },
		{ "mode", required_argument, NULL, 'm' },
		{ "conn-idle-ms", required_argument, NULL, 'i' },
		{ "mcast-hop-limit", required_argument, NULL, 'H' },
		{ "addr", required_argument, NULL, 'a' },
		{ "tap", required_argument, NULL, 't' },
		{ "offloads", required_argument, NULL, 'o' },
		{ "send-depth", required_argument, NULL, 'd' },
		{ "ctl", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char ctlbuf[256];
	const char *env;
	bool offloads_off = false;
	unsigned long send_depth = 0;
	int o, r;

	h.pkey = 0xffff;
	snprintf(h.tap, sizeof(h.tap), "ib0");
	while ((o = getopt_long(argc, argv, "+", lo, NULL)) != -1) {
		switch (o) {
		case 'n':
			h.node = optarg;
			break;
		case 'p':
			h.pkey = (uint16_t)strtoul(optarg, NULL, 0);
			break;
		case 'm':
			if (!strcmp(optarg, "connected")) {
				h.connected = true;
			} else if (strcmp(optarg, "datagram")) {
				fprintf(stderr, "ibgw-host: mode %s: datagram or connected\n",
					optarg);
				return 2;
			}
			break;
		case 'i':
			h.conn_idle_ms = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'H': {
			unsigned long v = strtoul(optarg, NULL, 0);

			if (v < 1 || v > 255) {
				fprintf(stderr, "ibgw-host: mcast-hop-limit %s: 1..255\n", optarg);
				return 2;
			}
			h.mcast_hop_limit = (uint8_t)v;
			break;
		}
		case 'a':
			if (parse_addr(&h, optarg) < 0) {
				fprintf(stderr, "ibgw-host: bad address %s\n", optarg);
				return 2;
			}
			break;
		case 't':
			snprintf(h.tap, sizeof(h.tap), "%s", optarg);
			break;
		case 'c':
			h.ctl_path = optarg;
			break;
		case 'o':
			if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
				fprintf(stderr, "ibgw-host: offloads %s: on or off\n", optarg);
				return 2;
			}
			offloads_off = !strcmp(optarg, "off");
			break;
		case 'd': {
			char *end;

			send_depth = strtoul(optarg, &end, 0);
			if (*end || !send_depth) {
				fprintf(stderr, "ibgw-host: send-depth %s: not a positive number\n",
					optarg);
				return 2;
			}
			break;
		}
		default:
			usage();
		}
	}
	h.offloads = !h.connected && !offloads_off;
	h.send_depth = h.connected ? SEND_DEPTH_CM : SEND_DEPTH;
	if (send_depth) {
		if (send_depth <= tx_reserve(&h) || send_depth > 8192) {
			fprintf(stderr, "ibgw-host: send-depth %lu: %u..8192\n", send_depth,
				tx_reserve(&h) + 1);
			return 2;
		}
		h.send_depth = (unsigned)send_depth;
	}
	h.txq = calloc(h.send_depth, sizeof(*h.txq));
	if (!h.txq)
		die("send queue", -ENOMEM);
	if (!h.ctl_path && (env = getenv("IBGW_NODE_DIR"))) {
		snprintf(ctlbuf, sizeof(ctlbuf), "%s/ibgw-host.sock", env);
		h.ctl_path = ctlbuf;
	}
	if (optind < argc) {
		if (!h.ctl_path)
			usage();
		return ctl_client(h.ctl_path, argc - optind, argv + optind);
	}
	if (!h.node)
		h.node = getenv("IBGW_NODE") ? getenv("IBGW_NODE") : getenv("SIM_HOST");
	if (!h.node)
		usage();
	log_init("ibgw-host", LOG_TARGET_STDERR, LOG_INFO);
	signal(SIGPIPE, SIG_IGN);

	if ((r = evloop_new(&h.loop)) < 0)
		die("evloop", r);
	h.ops = ibp_backend("verbs");
	if (!h.ops)
		die("backend", -ENOTSUP);
	struct ibp_port_config pc = { .backend = "verbs",
				      .device = h.node,
				      .port = 1,
				      .buf_size = h.connected ? BUF_SIZE_CM : BUF_SIZE,
				      .n_bufs = h.connected ? N_BUFS_CM : N_BUFS };
	if ((r = h.ops->open(&pc, &h.port)) < 0)
		die("open port", r);

	/* Query the port before sa_umad opens (see ipoib_link_config.attr). */
	struct ibp_port_attr pa;

	if ((r = h.ops->query(h.port, &pa)) < 0)
		die("query port", r);
	struct sa_umad_config uc = { .loop = h.loop, .port_cb = on_port_info, .port_arg = &h };
	if ((r = sa_umad_open(&uc, &h.umad)) < 0)
		die("umad", r);
	if ((r = sa_umad_port_info(h.umad, &h.pi)) < 0)
		die("port info", r);
	struct sa_client_config cc = { .ops = &sa_umad_ops,
				       .ops_ctx = h.umad,
				       .loop = h.loop,
				       .pkey = h.pkey,
				       .event = on_sa_event,
				       .event_arg = &h };
	if ((r = sa_client_new(&cc, &h.sa)) < 0)
		die("sa client", r);
	if ((r = sa_umad_start(h.umad, h.sa)) < 0)
		die("umad start", r);
	sa_client_set_port(h.sa, &h.pi);
	sa_umad_poll_port(h.umad);

	/* Connected mode's CM: through libibumad, as the gateway's (cm/cm_umad.h; on the
	 * rack the verbs shim carries its MADs). */
	if (h.connected) {
		char why[512];

		if ((r = ipoib_cm_port_open_umad(h.node, 1, h.loop, &h.cmp, why, sizeof(why))) <
		    0) {
			log_error("connected mode refused: %s", why);
			die("cm", r);
		}
	}
	struct ipoib_link_config lc = {
		.cm_port = h.cmp,
		.name = h.tap,
		.ops = h.ops,
		.port = h.port,
		.sa = h.sa,
		.loop = h.loop,
		.pkey = h.pkey,
		.role = IPOIB_ROLE_HOST,
		.connected = h.connected,
		.conn_idle_ms = h.conn_idle_ms,
		.mcast_hop_limit = h.mcast_hop_limit,
		.state_cb = on_link_state,
		.cb_ctx = &h,
		.attr = &pa,
		.recv_depth = h.connected ? RECV_DEPTH_CM : RECV_DEPTH,
		.send_depth = h.send_depth,
		.post = host_post,
		.post_ctx = &h,
	};
	if ((r = ipoib_link_new(&lc, &h.link)) < 0)
		die("link", r);
	for (int i = 0; i < h.n_addrs; i++)
		ipoib_link_add_addr(h.link, h.addrs[i].family, h.addrs[i].a);

	if ((r = tap_open(&h)) < 0)
		die("tap", r);
	{
		/* The MAC from our own GUID (host_l2.h), before the link is up. */
		uint8_t mac[6];

		hl2_mac_from_guid(pa.port_guid, 0, mac);
		if ((r = tap_set_mac(&h, mac)) < 0)
			die("tap mac", r);
		uint8_t ll[16];

		if ((r = tap_up(&h)) < 0)
			die("tap up", r);
		ipoib_ipv6_link_local(pa.port_guid, ll);
		if ((r = tap_add_addr(&h, AF_INET6, ll, 64)) < 0)
			log_errno(LOG_WARNING, -r, "link-local address");
		for (int i = 0; i < h.n_addrs; i++)
			if ((r = tap_add_addr(&h, h.addrs[i].family, h.addrs[i].a,
					      h.addrs[i].plen)) < 0)
				log_errno(LOG_WARNING, -r, "address %d", i);
	}
	if (h.ctl_path) {
		h.ctl_fd = ctl_listen(h.ctl_path);
		if (h.ctl_fd < 0)
			die("control socket", h.ctl_fd);
		evloop_add_fd(h.loop, h.ctl_fd, EPOLLIN, on_ctl, &h);
	}
	sigset_t ss;

	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	h.sig_fd = signalfd(-1, &ss, SFD_CLOEXEC | SFD_NONBLOCK);
	evloop_add_fd(h.loop, h.sig_fd, EPOLLIN, on_signal, &h);
	evloop_add_fd(h.loop, h.tap_fd, EPOLLIN, on_tap, &h);
	evloop_add_fd(h.loop, h.ops->cq_fd(h.port, 0), EPOLLIN, on_cq, &h);
	evloop_add_fd(h.loop, h.ops->async_fd(h.port), EPOLLIN, on_async, &h);
	h.tick = evtimer_new(h.loop, on_tick, &h);
	evtimer_start(h.tick, 1000, 1000);
	h.ops->arm(h.port, 0);

	if ((r = ipoib_link_start(h.link)) < 0)
		die("link start", r);
	log_notice("%s on %s: P_Key 0x%04x, %s mode, joining the broadcast group", h.tap, h.node,
		   h.pkey, h.connected ? "connected" : "datagram");
	evloop_run(h.loop);

	log_notice("stopping");
	ipoib_link_stop(h.link);
	poll_port(&h);
	sa_client_free(h.sa); /* the leaves went out in ipoib_link_stop */
	sa_umad_close(h.umad);
	ipoib_link_free(h.link);
	ipoib_cm_port_close(h.cmp);
	h.ops->close(h.port);
	if (h.ctl_path)
		unlink(h.ctl_path);
	close(h.tap_fd);
	evloop_free(h.loop);
	free(h.txq);
	return 0;
}
