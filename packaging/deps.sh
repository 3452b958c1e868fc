#!/bin/sh
# Install every Debian package that ibgw's build, tests and demo need (Debian 12).
# Idempotent and quick when everything is present: apt-get runs only for what is missing.
set -eu
PKGS="
build-essential pkg-config clang clang-format libclang-rt-14-dev bc git
libibverbs-dev libibumad-dev libibmad-dev
libnl-3-dev libnl-route-3-dev liburing-dev libyaml-dev libjson-c-dev libbpf-dev libxdp-dev
liburcu-dev libsystemd-dev libmicrohttpd-dev libcmocka-dev libsodium-dev libpcap-dev
ibsim-utils opensm infiniband-diags
tshark iperf3 iproute2 ethtool ndisc6 iputils-ping procps psmisc gdb keepalived nftables jq man-db python3 bird2 prometheus curl
dnsmasq-base busybox isc-dhcp-client
chromium file
dpkg-dev debhelper lintian debootstrap systemd-container
"
# --bench: also the benchmark peers (DPDK's LPM/FIB libraries, real prefix tables).
[ "${1:-}" = "--bench" ] && PKGS="$PKGS libdpdk-dev tor-geoipdb hyperfine valgrind"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "deps: all $(echo $PKGS | wc -w) packages present"
	exit 0
fi
echo "deps: installing:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer no without a prompt.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends $missing
