/*
 * libFuzzer harness for the fabric's control command parser (sim/fabric/fabric_ctl.c):
 * any line is parsed or refused with a reason; what parses names a known command, its
 * node name and file point into the parsed copy and are NUL terminated, and the router
 * commands' numbers are within their ranges.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/fabric/fabric.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fabric_cmd cmd;
	const char *why = NULL;

	if (fabric_cmd_parse((const char *)data, size, &cmd, &why) < 0) {
		check(why != NULL && *why != 0);
		return 0;
	}
	check(cmd.kind >= FABRIC_CMD_LINK && cmd.kind <= FABRIC_CMD_MCAST);
	if (cmd.name)
		check(cmd.name >= cmd.text && cmd.name < cmd.text + sizeof(cmd.text) &&
		      strlen(cmd.name) > 0 && strlen(cmd.name) < SIMFAB_NAME_MAX);
	if (cmd.kind == FABRIC_CMD_CAPTURE_START)
		check(cmd.file && cmd.file[0] == '/');
	if (cmd.kind == FABRIC_CMD_LOSS)
		check(cmd.value <= FABRIC_PPM);
	/* The router commands: a router's port 1..8 and what its fields may hold. */
	if (cmd.kind >= FABRIC_CMD_ROUTER_PORT)
		check(cmd.name && cmd.port >= 1 && cmd.port <= 8);
	if (cmd.kind == FABRIC_CMD_ROUTER_PORT)
		check(cmd.lid >= 1 && cmd.lid < 0xc000 && cmd.guid && cmd.mtu >= 1 && cmd.mtu <= 5);
	if (cmd.kind == FABRIC_CMD_ROUTE)
		check(cmd.plen <= 128 && cmd.lid < 0xc000);
	if (cmd.kind == FABRIC_CMD_MCAST)
		check(cmd.gid.raw[0] == 0xff &&
		      (cmd.lid == 0 || (cmd.lid >= 0xc000 && cmd.lid < 0xffff)));
	return 0;
}
