/*
 * IPoIB wire formats (RFC 4391 for UD, RFC 4755 for connected mode): the 20-octet
 * link-layer address, the 4-octet encapsulation header, the multicast GIDs that IPv4
 * and IPv6 groups map to, and the IPv6 interface identifier of a port.
 *
 *   hardware address: 0: flags (RC 0x80, UC 0x40, the rest reserved)  1-3: UD QPN
 *                     4-19: GID. RFC 4755 numbers bits from the most significant, so
 *                     its "bit 0" (RC) is 0x80, as the Linux driver sends it.
 *   encapsulation:    0-1: ethertype  2-3: reserved (zero on send, ignored on receive)
 *   IPv4 MGID:        ff1S:401b:PPPP:0000:0000:0000:GGGG:GGGG  (S scope, P P_Key,
 *                     G the group's low 28 bits; the broadcast group is ...:ffff:ffff)
 *   IPv6 MGID:        ff1S:601b:PPPP: + the group address's low 80 bits
 * The P_Key in an MGID is the full-member form (0x8000 set), as the Linux driver and
 * OpenSM create the broadcast group (ff12:401b:ffff::ffff:ffff for the default P_Key).
 */
#ifndef IBGW_LIB_IPOIB_H
#define IBGW_LIB_IPOIB_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/ib_bytes.h"
#include "lib/ib_gid.h"

#define IPOIB_HWADDR_LEN     20
#define IPOIB_HWADDR_STRLEN  60 /* 20 octets as "xx:" ... "xx" plus NUL */
#define IPOIB_HWADDR_F_RC    0x80
#define IPOIB_HWADDR_F_UC    0x40
#define IPOIB_HWADDR_F_RSVD  0x3f
#define IPOIB_ENCAP_LEN      4
#define IPOIB_QKEY_BROADCAST 0x00000b1bu /* Q_Key OpenSM gives the IPv4 broadcast group */

struct ipoib_hwaddr {
	uint8_t flags; /* IPOIB_HWADDR_F_RC | IPOIB_HWADDR_F_UC */
	uint32_t qpn;  /* 24 bits */
	union ib_gid gid;
};

/* -EMSGSIZE if short, -EINVAL if a reserved flag bit (0x3f) is set. */
int ipoib_hwaddr_decode(const uint8_t *buf, size_t len, struct ipoib_hwaddr *out);
/* Whether the 20 octets at raw can be a neighbour's address: not the multicast QPN
 * 0xffffff, and a GID neither multicast (ff00::/8) nor all zero -- what arp_parse
 * refuses in an ARP sender. Reserved flag bits are ipoib_hwaddr_decode's to refuse. */
bool ipoib_hwaddr_is_unicast(const uint8_t *raw);
/* Returns IPOIB_HWADDR_LEN, -ENOSPC, or -ERANGE (reserved flags, QPN over 24 bits). */
int ipoib_hwaddr_encode(const struct ipoib_hwaddr *a, uint8_t *buf, size_t len);
/* Colon-separated hex as the Linux driver shows it ("80:00:00:48:fe:80:..."). Returns
 * the length written or -ENOSPC. */
int ipoib_hwaddr_format(const struct ipoib_hwaddr *a, char *buf, size_t len);
/* Order for the crossing-REQ rule (RFC 4755): compare with the flags zeroed, most
 * significant octet first. <0, 0, >0 like memcmp. */
int ipoib_hwaddr_cmp_noflags(const struct ipoib_hwaddr *a, const struct ipoib_hwaddr *b);

struct ipoib_encap {
	uint16_t ethertype;
	uint16_t reserved;
};

/* -EMSGSIZE if short. The reserved octets are returned, not judged. Inline: every
 * IPoIB receive goes through it (ipoib_rx_classify). */
static inline int ipoib_encap_decode(const uint8_t *buf, size_t len, struct ipoib_encap *out)
{
	if (len < IPOIB_ENCAP_LEN)
		return -EMSGSIZE;
	out->ethertype = ib_get_be16(buf);
	out->reserved = ib_get_be16(buf + 2);
	return 0;
}

/* Returns IPOIB_ENCAP_LEN or -ENOSPC. */
int ipoib_encap_encode(const struct ipoib_encap *h, uint8_t *buf, size_t len);

/* Broadcast MGID of a link: -ERANGE if scope > 0xF, -EINVAL if the P_Key is invalid
 * (base 0). */
int ipoib_mgid_broadcast(uint16_t pkey, uint8_t scope, union ib_gid *out);
/* MGID of an IPv4 group (host order, must be in 224.0.0.0/4; -EINVAL otherwise). */
int ipoib_mgid_from_ipv4(uint32_t group, uint16_t pkey, uint8_t scope, union ib_gid *out);
/* MGID of an IPv6 group (network order, must be in ff00::/8; -EINVAL otherwise). */
int ipoib_mgid_from_ipv6(const uint8_t group[16], uint16_t pkey, uint8_t scope, union ib_gid *out);

/* What an IPoIB MGID says; the inverse of the three functions above. */
struct ipoib_mgid_info {
	int family; /* AF_INET or AF_INET6 */
	uint8_t scope;
	uint16_t pkey;
	bool broadcast;         /* the IPv4 broadcast group */
	uint32_t ipv4_group;    /* host order, 224.0.0.0/4 (0xffffffff for broadcast) */
	uint8_t ipv6_low80[10]; /* the only part of the IPv6 group the MGID keeps */
};

/* -EINVAL (reason in *why if not NULL) when mgid is not an IPoIB MGID: wrong prefix
 * (not ff1S), unknown signature, non-zero octets where the mapping puts zeros, invalid
 * P_Key. */
int ipoib_mgid_decode(const union ib_gid *mgid, struct ipoib_mgid_info *out, const char **why);

/* IPv6 interface identifier of a port (RFC 4391 section 8): the port GUID as a modified
 * EUI-64, that is with the universal/local bit (0x02 of the first octet) inverted. */
void ipoib_ipv6_iid(uint64_t port_guid, uint8_t out[8]);
/* fe80::<iid>, the port's IPv6 link-local address. */
void ipoib_ipv6_link_local(uint64_t port_guid, uint8_t out[16]);

#endif
