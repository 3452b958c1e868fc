/*
 * GIDs: the 128-bit InfiniBand global identifiers (IBA vol 1 section 4.1.1).
 *
 * A GID is laid out like an IPv6 address and written like one: a 64-bit subnet prefix
 * then a 64-bit interface ID (a port GUID, for the default GID), or, for multicast, an
 * MGID starting with 0xFF. Text follows IPv6 rules (RFC 4291 section 2.2 to read,
 * RFC 5952 to write: lower case, no leading zeros, the longest run of two or more zero
 * groups shortened to "::"), so fe80:0:0:0:2:c903:1:1234 prints as fe80::2:c903:1:1234.
 * The dotted IPv4 tail of IPv6 text is refused: no GID is written that way.
 */
#ifndef IBGW_LIB_IB_GID_H
#define IBGW_LIB_IB_GID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IB_GID_LEN    16
#define IB_GID_STRLEN 40 /* 8 groups of 4 hex digits, 7 colons, NUL */

/* Subnet prefix every IB subnet has for link-local use (IBA 4.1.1). */
#define IB_GID_LINK_LOCAL_PREFIX 0xfe80000000000000ull

/* MGID scopes (the low nibble of octet 1 of an MGID). */
enum ib_mgid_scope {
	IB_MGID_SCOPE_LINK = 0x2,
	IB_MGID_SCOPE_SITE = 0x5,
	IB_MGID_SCOPE_ORG = 0x8,
	IB_MGID_SCOPE_GLOBAL = 0xe,
};

/* Network order, as on the wire. */
union ib_gid {
	uint8_t raw[IB_GID_LEN];
	uint32_t raw32[4]; /* for word-wise compares; still network order */
};
_Static_assert(sizeof(union ib_gid) == IB_GID_LEN, "a GID is 16 octets");

/* Parse GID text. Returns 0, or -EINVAL (the reason as a static string in *why when
 * why is not NULL: "empty", "more than one '::'", "group longer than 4 hex digits", ...). */
int ib_gid_parse_why(const char *text, union ib_gid *out, const char **why);
int ib_gid_parse(const char *text, union ib_gid *out);

/* Format in canonical text; returns the number of characters written (without the
 * NUL), or -ENOSPC if len is too small (IB_GID_STRLEN always suffices). */
int ib_gid_format(const union ib_gid *gid, char *buf, size_t len);

/* Host-order halves, and the reverse. */
uint64_t ib_gid_prefix(const union ib_gid *gid);
uint64_t ib_gid_guid(const union ib_gid *gid);
void ib_gid_set(union ib_gid *gid, uint64_t prefix, uint64_t guid);

bool ib_gid_equal(const union ib_gid *a, const union ib_gid *b);
bool ib_gid_is_zero(const union ib_gid *gid);
bool ib_gid_is_multicast(const union ib_gid *gid); /* octet 0 is 0xFF */
/* Unicast link-local: prefix exactly fe80:0:0:0 (the IBA's default; Linux rdma-core
 * tests the same 64 bits). */
bool ib_gid_is_link_local(const union ib_gid *gid);
/* Scope nibble of an MGID (meaningless for a unicast GID). */
static inline unsigned ib_mgid_scope(const union ib_gid *gid)
{
	return gid->raw[1] & 0x0f;
}

#endif
