/*
 * host_l2: the IB host role's link-layer translation between the kernel's Ethernet on a
 * TAP device and IPoIB on the wire (prefix hl2_).
 *
 * Every IB peer appears to the kernel with a locally administered unicast MAC derived
 * from its port GUID (hl2_mac_from_guid):
 *
 *   octet 0      0x02 | (((fold6(GUID >> 40) + k) & 0x3f) << 2)
 *                (locally administered, unicast; fold6 = XOR of the four 6-bit groups
 *                of the GUID's top 24 bits, its OUI part)
 *   octets 1..5  the GUID's low 40 bits
 *
 * k is 0 unless that MAC already belongs to another GID (or to us): then the next k
 * that is free is taken and the collision counted. A GID keeps its MAC for the life
 * of the process (a peer that restarts with a new QPN keeps it too). Our own MAC is
 * the same rule with k = 0, reserved first.
 *
 * Rewrites (both directions validated by pkt/arp and pkt/nd first; what they refuse is
 * dropped):
 *   ARP   hardware type 32 / 20-octet addresses <-> hardware type 1 / 6-octet MACs;
 *   ND    the source/target link-layer options of RS, RA, NS, NA and Redirect:
 *         IPoIB (length 3: 2 pad octets + 20-octet address) <-> Ethernet (length 1,
 *         MAC), the IPv6 payload length and the ICMPv6 checksum recomputed;
 *   DHCP  the client's messages (UDP 68 -> 67) go out as RFC 4390 has an IPoIB client send
 *         them: htype 32, hlen 0, chaddr zero, the client identifier option (61) replaced
 *         by type 32 + our 20-octet address (so that a relay can unicast to us); replies
 *         (UDP 67 -> 68, htype 32) come to the kernel with htype 1, hlen 6, chaddr our MAC
 *         (a reply whose client identifier is another host's is left alone); the IP and
 *         UDP lengths and checksums recomputed;
 *   IP    otherwise unchanged; the Ethernet header comes from the peer table (to the kernel)
 *         or tells the destination (from the kernel): unicast MAC -> peer; broadcast ->
 *         the broadcast group; IPv4/IPv6 multicast -> the group from the IP header's
 *         destination (the MAC keeps too few bits).
 */
#ifndef IBGW_SIM_HOST_L2_H
#define IBGW_SIM_HOST_L2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/ipoib.h"

#define HL2_MAX_PEERS 1024
#define HL2_ETH_HLEN  14
/* ND grows by 16 octets per link-layer option from Ethernet to IPoIB (two at most). */
#define HL2_GROWTH 32

struct hl2_peer {
	uint8_t mac[6];
	struct ipoib_hwaddr hw;
	/* 0 until seen as the source of a packet; stays 0 for a peer behind an IB router
	 * (its packets come from the router's LID, with a GRH: found by GID) */
	uint16_t lid;
};

struct hl2_stats {
	uint64_t mac_collisions, peers_full;
	uint64_t to_eth, to_ib;
	uint64_t arp_rewritten, nd_rewritten, dhcp_rewritten;
	uint64_t unknown_dst_mac, unknown_src, unknown_tha, bad_arp, bad_nd, bad_frame,
	    bad_ethertype, too_big;
};

struct hl2 {
	uint8_t own_mac[6];
	struct ipoib_hwaddr own_hw;
	uint8_t own_hw_bytes[IPOIB_HWADDR_LEN];
	struct hl2_peer peers[HL2_MAX_PEERS];
	unsigned n_peers;
	struct hl2_stats st;
};

/* The MAC of a GUID with collision index k (0..63). */
void hl2_mac_from_guid(uint64_t guid, unsigned k, uint8_t mac[6]);
void hl2_init(struct hl2 *h, const struct ipoib_hwaddr *own);
/* The peer of hw (learned now if new; its QPN/flags updated if changed). NULL when the
 * table is full. lid 0: unknown. */
const struct hl2_peer *hl2_learn(struct hl2 *h, const struct ipoib_hwaddr *hw, uint16_t lid);
const struct hl2_peer *hl2_by_mac(const struct hl2 *h, const uint8_t mac[6]);
const struct hl2_peer *hl2_by_src(const struct hl2 *h, uint16_t lid, uint32_t qpn);

/* Where a packet received on IB came from. With a GID (a GRH, or a connection) the
 * sender is found by GID and QPN, else by LID and QPN. */
struct hl2_src {
	uint32_t qpn;
	uint16_t lid;
	bool has_gid;
	union ib_gid gid;
	bool mcast; /* arrived through a multicast group */
};

/* IB -> kernel: payload p/len of the given ethertype (after the IPoIB header) into an
 * Ethernet frame at out. Returns the frame length, or -errno (dropped, counted). */
int hl2_ib_to_eth(struct hl2 *h, uint16_t ethertype, const uint8_t *p, size_t len,
		  const struct hl2_src *src, uint8_t *out, size_t cap);

enum hl2_dst_kind {
	HL2_DST_UNICAST,
	HL2_DST_BCAST,
	HL2_DST_MCAST,
};
struct hl2_dst {
	enum hl2_dst_kind kind;
	struct ipoib_hwaddr hw; /* unicast */
	int family;             /* AF_INET / AF_INET6 (mcast, and unicast IP) */
	uint8_t ip[16];         /* mcast: the group; unicast IP: the destination */
	bool is_ip;
};

/* Kernel -> IB: an Ethernet frame into an IPoIB payload at out (without the 4-octet
 * header), its ethertype and destination. Returns the payload length or -errno. */
int hl2_eth_to_ib(struct hl2 *h, const uint8_t *frame, size_t len, uint8_t *out, size_t cap,
		  uint16_t *ethertype, struct hl2_dst *dst);

#endif
