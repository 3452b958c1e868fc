/*
 * The IB port backends by name: the data plane asks for "verbs" (a real HCA) or "sim"
 * (the simulated fabric) from the config and gets the matching ops table.
 */
#include "port/ib_port.h"

#include <string.h>

const struct ibp_ops *ibp_backend(const char *name)
{
	if (!name)
		return NULL;
	if (strcmp(name, "verbs") == 0)
		return &ibp_verbs_ops;
	if (strcmp(name, "sim") == 0)
		return &ibp_sim_ops;
	return NULL;
}
