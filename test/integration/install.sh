#!/usr/bin/env bash
# make install into a staging root: every file an operator needs lands where the
# packaging expects it, the systemd unit points at the installed binaries, the installed
# daemon accepts the installed example config, and the man pages render without warnings.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/lib/tap.sh"
build=${IBGW_BUILD:-$top/build}
root=$(mktemp -d /tmp/ibgw-install-test.XXXXXX)
trap 'rm -rf "$root"' EXIT

files="usr/sbin/ibgwd usr/bin/gwctl etc/ibgw/ibgwd.yaml usr/lib/systemd/system/ibgwd.service
usr/share/man/man8/ibgwd.8 usr/share/man/man8/gwctl.8 usr/share/man/man5/ibgwd.yaml.5"
tap_plan 13
tap_check "make install DESTDIR=... PREFIX=/usr succeeds" \
	make -C "$top" --no-print-directory O="$build" install DESTDIR="$root" PREFIX=/usr
for f in $files; do
	tap_check "installs /$f" test -s "$root/$f"
done
unit=$root/usr/lib/systemd/system/ibgwd.service
tap_is "the unit has no unsubstituted @VARS@" "$(grep -c '@[A-Z]*@' "$unit")" 0
tap_like "the unit starts the installed daemon in the foreground" \
	"$(grep '^ExecStart=' "$unit")" "^ExecStart=/usr/sbin/ibgwd -d -f /etc/ibgw/ibgwd.yaml$"
tap_is "the unit is hardened: no new privileges, a bounding set, a closed device policy" \
	"$(grep -cE '^(NoNewPrivileges=yes|CapabilityBoundingSet=CAP_NET_ADMIN CAP_NET_RAW CAP_IPC_LOCK CAP_BPF CAP_CHOWN CAP_SETUID CAP_SETGID|ProtectSystem=strict|ProtectHome=yes|PrivateTmp=yes|DevicePolicy=closed|SystemCallFilter=@system-service|RuntimeDirectory=ibgw)$' "$unit")" 8
# The example names the key the package makes at install: check it with one made here.
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$root/etc/ibgw/failover.key")
sed "s|^\(  key_file: \)/etc/ibgw/failover.key|\1$root/etc/ibgw/failover.key|" \
	"$root/etc/ibgw/ibgwd.yaml" >"$root/etc/ibgw/check.yaml"
tap_check "the installed daemon accepts the installed example config" \
	"$root/usr/sbin/ibgwd" -n -f "$root/etc/ibgw/check.yaml"
warn=$(for m in "$root"/usr/share/man/man*/*; do LC_ALL=C.UTF-8 man --warnings -E UTF-8 -l "$m" 2>&1 >/dev/null; done)
tap_is "man pages render without warnings" "$warn" ""
tap_done
