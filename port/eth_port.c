/*
 * The Ethernet port backends by name ("af_packet", "af_xdp"; the config's `backend`)
 * and the drop reasons' names.
 */
#include "port/eth_port.h"

#include <string.h>

const struct ethp_ops *ethp_backend(const char *name)
{
	if (!name || strcmp(name, "af_packet") == 0)
		return &ethp_afpacket_ops;
	if (strcmp(name, "af_xdp") == 0)
		return &ethp_afxdp_ops;
	return NULL;
}

const char *ethp_drop_name(enum ethp_drop d)
{
	static const char *const names[ETHP_DROP_MAX] = {
		[ETHP_DROP_RX_KERNEL] = "rx_kernel",   [ETHP_DROP_RX_TRUNCATED] = "rx_truncated",
		[ETHP_DROP_RX_RUNT] = "rx_runt",       [ETHP_DROP_RX_VLAN] = "rx_vlan",
		[ETHP_DROP_TX_FULL] = "tx_full",       [ETHP_DROP_TX_LINK_DOWN] = "tx_link_down",
		[ETHP_DROP_TX_INVALID] = "tx_invalid", [ETHP_DROP_TX_ERROR] = "tx_error",
		[ETHP_DROP_RX_GSO] = "rx_gso_invalid",
	};

	if ((unsigned)d >= ETHP_DROP_MAX)
		return "unknown";
	return names[d];
}
