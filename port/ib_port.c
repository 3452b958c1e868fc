/*
 * The IB port backends by name: the data plane asks for the config's backend and gets
 * the matching ops table. "verbs" is the only one (a real HCA, or the verbs shim of
 * the simulated rack, docs/verbs-sim.md).
 */
#include "port/ib_port.h"

#include <string.h>

const struct ibp_ops *ibp_backend(const char *name)
{
	if (!name)
		return NULL;
	if (strcmp(name, "verbs") == 0)
		return &ibp_verbs_ops;
	return NULL;
}
