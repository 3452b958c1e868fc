/*
 * GID text form and helpers (see ib_gid.h).
 *
 * The parser is our own rather than inet_pton so that it can say what is wrong with
 * a GID in a config file, and so that dotted IPv4 tails, which no GID uses, are refused.
 */
#include "lib/ib_gid.h"
#include "lib/ib_bytes.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int ib_gid_parse_why(const char *text, union ib_gid *out, const char **why)
{
	uint16_t head[8], tail[8];
	unsigned nh = 0, nt = 0;
	const char *p = text, *err = NULL;
	bool dbl = false;

	if (!p || !*p) {
		err = "empty";
		goto out;
	}
	if (strlen(p) > IB_GID_STRLEN - 1) {
		err = "longer than 39 characters";
		goto out;
	}
	if (p[0] == ':') {
		if (p[1] != ':') {
			err = "starts with a single ':'";
			goto out;
		}
		dbl = true;
		p += 2;
	}
	while (*p) {
		unsigned v = 0, digits = 0;
		int h;

		while ((h = hexval(*p)) >= 0) {
			if (++digits > 4) {
				err = "group longer than 4 hex digits";
				goto out;
			}
			v = v << 4 | (unsigned)h;
			p++;
		}
		if (*p == '.') {
			err = "dotted IPv4 form is not a GID";
			goto out;
		}
		if (digits == 0) {
			err = *p == ':' ? "empty group" : "character other than hex digit or ':'";
			goto out;
		}
		if (nh + nt == 8) {
			err = "more than 8 groups";
			goto out;
		}
		if (dbl)
			tail[nt++] = (uint16_t)v;
		else
			head[nh++] = (uint16_t)v;
		if (!*p)
			break;
		if (*p != ':') {
			err = "character other than hex digit or ':'";
			goto out;
		}
		p++;
		if (*p == ':') {
			if (dbl) {
				err = "more than one '::'";
				goto out;
			}
			dbl = true;
			p++;
		} else if (!*p) {
			err = "ends with a single ':'";
			goto out;
		}
	}
	if (!dbl && nh != 8) {
		err = "fewer than 8 groups and no '::'";
		goto out;
	}
	if (dbl && nh + nt == 8) {
		err = "'::' with 8 groups besides";
		goto out;
	}

	memset(out->raw, 0, sizeof(out->raw));
	for (unsigned i = 0; i < nh; i++)
		ib_put_be16(out->raw + 2 * i, head[i]);
	for (unsigned i = 0; i < nt; i++)
		ib_put_be16(out->raw + 2 * (8 - nt + i), tail[i]);
out:
	if (why)
		*why = err;
	return err ? -EINVAL : 0;
}

int ib_gid_parse(const char *text, union ib_gid *out)
{
	return ib_gid_parse_why(text, out, NULL);
}

int ib_gid_format(const union ib_gid *gid, char *buf, size_t len)
{
	char tmp[IB_GID_STRLEN];
	int best = -1, best_len = 1, run = -1, n = 0;

	/* RFC 5952 4.2: shorten the longest run of at least two zero groups, the first
	 * one when two runs tie. */
	for (int i = 0; i <= 8; i++) {
		if (i < 8 && ib_get_be16(gid->raw + 2 * i) == 0) {
			if (run < 0)
				run = i;
			continue;
		}
		if (run >= 0 && i - run > best_len) {
			best = run;
			best_len = i - run;
		}
		run = -1;
	}
	for (int i = 0; i < 8; i++) {
		if (i == best) {
			tmp[n++] = ':';
			tmp[n++] = ':';
			i += best_len - 1;
			continue;
		}
		if (n > 0 && tmp[n - 1] != ':')
			tmp[n++] = ':';
		n +=
		    snprintf(tmp + n, sizeof(tmp) - (size_t)n, "%x", ib_get_be16(gid->raw + 2 * i));
	}
	tmp[n] = '\0';
	if ((size_t)n >= len)
		return -ENOSPC;
	memcpy(buf, tmp, (size_t)n + 1);
	return n;
}

uint64_t ib_gid_prefix(const union ib_gid *gid)
{
	return ib_get_be64(gid->raw);
}

uint64_t ib_gid_guid(const union ib_gid *gid)
{
	return ib_get_be64(gid->raw + 8);
}

void ib_gid_set(union ib_gid *gid, uint64_t prefix, uint64_t guid)
{
	ib_put_be64(gid->raw, prefix);
	ib_put_be64(gid->raw + 8, guid);
}

bool ib_gid_equal(const union ib_gid *a, const union ib_gid *b)
{
	return memcmp(a->raw, b->raw, IB_GID_LEN) == 0;
}

bool ib_gid_is_zero(const union ib_gid *gid)
{
	return (gid->raw32[0] | gid->raw32[1] | gid->raw32[2] | gid->raw32[3]) == 0;
}

bool ib_gid_is_multicast(const union ib_gid *gid)
{
	return gid->raw[0] == 0xff;
}

bool ib_gid_is_link_local(const union ib_gid *gid)
{
	return ib_gid_prefix(gid) == IB_GID_LINK_LOCAL_PREFIX;
}
