/*
 * libFuzzer harness for the IPoIB parsers: the 20-octet hardware address, the
 * encapsulation header, the MGID decoder (checked against the forward mappings: a
 * decoded MGID must map back to itself) and GID text parsing (parse, print, parse
 * must agree). The input feeds each of them.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/ib_gid.h"
#include "lib/ipoib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ipoib_hwaddr a;
	struct ipoib_encap e;
	struct ipoib_mgid_info info;
	union ib_gid g, back;
	uint8_t out[IPOIB_HWADDR_LEN];
	char text[IB_GID_STRLEN], *s;

	if (ipoib_hwaddr_decode(data, size, &a) == 0) {
		check(ipoib_hwaddr_encode(&a, out, sizeof(out)) == IPOIB_HWADDR_LEN);
		check(memcmp(out, data, IPOIB_HWADDR_LEN) == 0);
	}
	if (ipoib_encap_decode(data, size, &e) == 0) {
		check(ipoib_encap_encode(&e, out, sizeof(out)) == IPOIB_ENCAP_LEN);
		check(memcmp(out, data, IPOIB_ENCAP_LEN) == 0);
	}
	if (size >= IB_GID_LEN) {
		const char *why = NULL;

		memcpy(g.raw, data, IB_GID_LEN);
		if (ipoib_mgid_decode(&g, &info, &why) == 0) {
			int rc;

			if (info.family == AF_INET6) {
				uint8_t v6[16] = { 0xff };

				memcpy(v6 + 6, info.ipv6_low80, 10);
				rc = ipoib_mgid_from_ipv6(v6, info.pkey, info.scope, &back);
			} else if (info.broadcast) {
				rc = ipoib_mgid_broadcast(info.pkey, info.scope, &back);
			} else {
				rc = ipoib_mgid_from_ipv4(info.ipv4_group, info.pkey, info.scope,
							  &back);
			}
			check(rc == 0);
			/* The mapping writes the full-member P_Key: compare with it set. */
			g.raw[4] |= 0x80;
			check(ib_gid_equal(&g, &back));
		} else {
			check(why != NULL);
		}
		check(ib_gid_format(&g, text, sizeof(text)) > 0);
		check(ib_gid_parse(text, &back) == 0 && ib_gid_equal(&g, &back));
	}

	/* GID text: NUL-terminated copy of the input. */
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (ib_gid_parse(s, &g) == 0) {
		check(ib_gid_format(&g, text, sizeof(text)) > 0);
		check(ib_gid_parse(text, &back) == 0 && ib_gid_equal(&g, &back));
	}
	free(s);
	return 0;
}
