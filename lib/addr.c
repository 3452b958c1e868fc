/*
 * IP addresses and prefixes: strict parsing and formatting.
 *
 * Parsing leans on inet_pton, which already refuses the classic surprises (octal or
 * leading-zero IPv4 octets, shortened IPv4 forms such as "10.1", scope suffixes). What
 * it does not cover is the prefix length, so that part is parsed here by hand: decimal
 * digits only, no sign, no leading zeros, within 0..32 or 0..128. A prefix whose host
 * bits are set is refused unless the caller asks to keep them (interface addresses).
 */
#include "lib/addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

int ip_addr_parse(const char *text, struct ip_addr *out)
{
	struct ip_addr a;

	memset(&a, 0, sizeof(a));
	if (!text || !*text)
		return -EINVAL;
	if (strchr(text, ':')) {
		if (inet_pton(AF_INET6, text, a.bytes) != 1)
			return -EINVAL;
		a.family = AF_INET6;
	} else {
		if (inet_pton(AF_INET, text, a.bytes) != 1)
			return -EINVAL;
		a.family = AF_INET;
	}
	*out = a;
	return 0;
}

int ip_sockaddr_parse(const char *text, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[IP_ADDR_STRLEN];
	const char *colon, *h = text;
	size_t hl;
	unsigned long port = 0;
	struct ip_addr a;

	if (!text)
		return -EINVAL;
	if (text[0] == '[') {
		const char *end = strchr(text, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		h = text + 1;
		hl = (size_t)(end - h);
		colon = end + 1;
	} else {
		colon = strrchr(text, ':');
		if (!colon || memchr(text, ':', (size_t)(colon - text)))
			return -EINVAL; /* IPv6 needs brackets */
		hl = (size_t)(colon - text);
	}
	if (!hl || hl >= sizeof(host) || !colon[1] || strlen(colon + 1) > 5)
		return -EINVAL;
	for (const char *p = colon + 1; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		port = port * 10 + (unsigned long)(*p - '0');
	}
	if (port == 0 || port > 65535 || colon[1] == '0')
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	if (ip_addr_parse(host, &a) < 0 || (text[0] == '[') != (a.family == AF_INET6))
		return -EINVAL;
	memset(ss, 0, sizeof(*ss));
	if (a.family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		memcpy(&sin->sin_addr, a.bytes, 4);
		if (len)
			*len = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		memcpy(&sin6->sin6_addr, a.bytes, 16);
		if (len)
			*len = sizeof(*sin6);
	}
	return 0;
}

/* "0".."128": digits only, no leading zeros, at most max. */
static int parse_len(const char *s, unsigned max, uint8_t *out)
{
	unsigned v = 0;

	if (!*s || strlen(s) > 3 || (s[0] == '0' && s[1]))
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(*s - '0');
	}
	if (v > max)
		return -EINVAL;
	*out = (uint8_t)v;
	return 0;
}

int ip_prefix_parse(const char *text, bool allow_host_bits, struct ip_prefix *out)
{
	char buf[IP_PREFIX_STRLEN];
	struct ip_prefix p;
	const char *slash;
	size_t alen;

	if (!text)
		return -EINVAL;
	memset(&p, 0, sizeof(p));
	slash = strchr(text, '/');
	alen = slash ? (size_t)(slash - text) : strlen(text);
	if (alen == 0 || alen >= IP_ADDR_STRLEN)
		return -EINVAL;
	memcpy(buf, text, alen);
	buf[alen] = '\0';
	if (ip_addr_parse(buf, &p.addr) < 0)
		return -EINVAL;
	if (slash) {
		if (parse_len(slash + 1, ip_addr_bits(&p.addr), &p.len) < 0)
			return -EINVAL;
	} else {
		p.len = (uint8_t)ip_addr_bits(&p.addr);
	}
	if (!allow_host_bits) {
		struct ip_prefix masked = p;

		ip_prefix_mask(&masked);
		if (!ip_addr_equal(&masked.addr, &p.addr))
			return -EINVAL;
	}
	*out = p;
	return 0;
}

char *ip_addr_format(const struct ip_addr *a, char *buf, size_t len)
{
	if (!len)
		return buf;
	if (!inet_ntop(a->family == AF_INET ? AF_INET : AF_INET6, a->bytes, buf, (socklen_t)len))
		buf[0] = '\0';
	return buf;
}

char *ip_prefix_format(const struct ip_prefix *p, char *buf, size_t len)
{
	char a[IP_ADDR_STRLEN];
	int n;

	if (!len)
		return buf;
	ip_addr_format(&p->addr, a, sizeof(a));
	n = snprintf(buf, len, "%s/%u", a, p->len);
	if (n < 0 || (size_t)n >= len)
		buf[0] = '\0';
	return buf;
}

bool ip_addr_equal(const struct ip_addr *a, const struct ip_addr *b)
{
	return a->family == b->family && memcmp(a->bytes, b->bytes, ip_addr_bits(a) / 8) == 0;
}

unsigned ip_addr_bits(const struct ip_addr *a)
{
	return a->family == AF_INET ? 32 : 128;
}

/* Do the first len bits of x and y agree? */
static bool bits_equal(const uint8_t *x, const uint8_t *y, unsigned len)
{
	unsigned full = len / 8, rest = len % 8;

	if (memcmp(x, y, full) != 0)
		return false;
	if (rest) {
		uint8_t m = (uint8_t)(0xff << (8 - rest));

		return (x[full] & m) == (y[full] & m);
	}
	return true;
}

bool ip_prefix_contains(const struct ip_prefix *p, const struct ip_addr *a)
{
	return p->addr.family == a->family && p->len <= ip_addr_bits(a) &&
	       bits_equal(p->addr.bytes, a->bytes, p->len);
}

bool ip_prefix_overlap(const struct ip_prefix *a, const struct ip_prefix *b)
{
	unsigned len = a->len < b->len ? a->len : b->len;

	return a->addr.family == b->addr.family && len <= ip_addr_bits(&a->addr) &&
	       bits_equal(a->addr.bytes, b->addr.bytes, len);
}

void ip_prefix_mask(struct ip_prefix *p)
{
	unsigned bits = ip_addr_bits(&p->addr), len = p->len < bits ? p->len : bits;
	unsigned full = len / 8, rest = len % 8;

	if (rest)
		p->addr.bytes[full++] &= (uint8_t)(0xff << (8 - rest));
	memset(p->addr.bytes + full, 0, sizeof(p->addr.bytes) - full);
}
