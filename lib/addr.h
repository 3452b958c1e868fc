/*
 * IP addresses and prefixes as the config, the tables and gwctl carry them.
 *
 * One type for IPv4, IPv6 and GIDs (a GID's text form is an IPv6 address's), so the
 * route tables, the config and the printers share one parser and one printer.
 */
#ifndef IBGW_LIB_ADDR_H
#define IBGW_LIB_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct ip_addr {
	uint8_t family;    /* AF_INET or AF_INET6 */
	uint8_t bytes[16]; /* network order; IPv4 uses the first 4 */
};

struct ip_prefix {
	struct ip_addr addr;
	uint8_t len; /* prefix length in bits */
};

#define IP_ADDR_STRLEN   46 /* INET6_ADDRSTRLEN */
#define IP_PREFIX_STRLEN (IP_ADDR_STRLEN + 4)

/* Parse "10.0.0.1" or "fe80::1". Returns 0, or -EINVAL. */
int ip_addr_parse(const char *text, struct ip_addr *out);
/* Parse "10.0.0.0/8" or "fd00::/64"; a bare address is a host prefix. Host bits set
 * beyond the prefix length are an error unless allow_host_bits (interface addresses
 * such as 10.0.0.1/24 keep them). Returns 0 or -EINVAL. */
int ip_prefix_parse(const char *text, bool allow_host_bits, struct ip_prefix *out);

/* Parse a listening address "10.0.0.1:9464" or "[fd00::1]:9464" (port 1..65535) into a
 * sockaddr_in/in6 in ss; *len (if not NULL) gets its length. Returns 0 or -EINVAL. */
int ip_sockaddr_parse(const char *text, struct sockaddr_storage *ss, socklen_t *len);

/* Format into buf (at least IP_ADDR_STRLEN / IP_PREFIX_STRLEN); returns buf. */
char *ip_addr_format(const struct ip_addr *a, char *buf, size_t len);
char *ip_prefix_format(const struct ip_prefix *p, char *buf, size_t len);

bool ip_addr_equal(const struct ip_addr *a, const struct ip_addr *b);
unsigned ip_addr_bits(const struct ip_addr *a); /* 32 or 128 */
/* True if a lies inside p (same family, first p->len bits equal). */
bool ip_prefix_contains(const struct ip_prefix *p, const struct ip_addr *a);
/* True if the two prefixes share any address. */
bool ip_prefix_overlap(const struct ip_prefix *a, const struct ip_prefix *b);
/* Clear the host bits beyond p->len. */
void ip_prefix_mask(struct ip_prefix *p);

#endif
