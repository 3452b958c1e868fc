/*
 * libFuzzer harness for the simulated fabric's port protocol (lib/ib_simfab.c): any
 * octets must be decoded or refused with a reason, never crash or read out of bounds;
 * a message that decodes must encode back to exactly the same octets (the codec keeps
 * no slack: reserved octets must be zero, names NUL padded), and its seq survives.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ib_simfab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[SIMFAB_MSG_MAX + 16];
	struct simfab_msg m;
	const char *why = NULL;
	int rc, n;

	rc = simfab_decode(data, size, &m, &why);
	if (rc < 0) {
		check(why != NULL && *why != 0);
		check(rc == -EINVAL || rc == -EMSGSIZE || rc == -EPROTO);
		return 0;
	}
	check(*simfab_type_name(m.type) != '?');
	n = simfab_encode(&m, out, sizeof(out));
	check(n == (int)size);
	check(memcmp(out, data, size) == 0);
	/* Too small a buffer is refused, never overrun. */
	check(simfab_encode(&m, out, size - 1) == -ENOSPC);
	return 0;
}
