#!/usr/bin/env bash
# The Ethernet port suite (eth_port.sh) on the af_xdp backend.
ETHP_BACKEND=af_xdp exec bash "$(dirname "$0")/eth_port.sh" "$@"
