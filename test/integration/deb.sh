#!/usr/bin/env bash
# The Debian package, as an operator meets it: `make deb` builds it, lintian has no error
# or warning, it holds exactly the files it should (nothing from the build tree), and in a
# fresh Debian root made by debootstrap from this machine's apt mirror (minbase plus
# systemd, procps and man-db, as on a server) `apt-get install ./ibgw_*.deb` gives a
# working ibgwd and gwctl, their man pages, the unit where systemd looks (disabled), the
# system group "ibgw" owning the control socket, a modified config that survives
# upgrades, and a purge that leaves nothing behind.
#
# Needs root (debootstrap, chroot), the mirror (about 50 s of debootstrap, nothing is
# cached between runs), and debhelper, lintian and debootstrap (packaging/deps.sh).
# IBGW_DEB_MIRROR overrides the mirror. About 2-3 minutes in all.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/lib/tap.sh"
work=$(mktemp -d /tmp/ibgw-deb-test.XXXXXX)
root=$work/root
daemon_pid=
cleanup() {
	[ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
	# Nothing is mounted in the root; make sure of it before removing the tree.
	if grep -q " $root[/ ]" /proc/self/mounts; then
		echo "# deb.sh: something is mounted under $root; left in place" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

version=$(cat "$top/VERSION")
arch=$(dpkg --print-architecture)
deb=$work/deb/ibgw_${version}_${arch}.deb
in_root() { chroot "$root" "$@"; }

plan=58
tap_plan $plan
# bail REASON: a step everything after it needs has failed; the checks not reached are
# failures (none passes on a missing package or root), and the suite ends here.
bail() {
	while [ "$tap_n" -lt "$plan" ]; do tap_not_ok "not reached: $1"; done
	exit 1
}

# --- build -------------------------------------------------------------------------
# nocheck: the package build would run the unit tests (make unit-check) that make check
# runs anyway; here they would only double the time and the report of a unit failure.
# IBGW_DEB_CHECK=1 keeps them.
opts=nocheck
[ "${IBGW_DEB_CHECK:-0}" = 1 ] && opts=
out=$(DEB_BUILD_OPTIONS=$opts timeout 400 make -C "$top" --no-print-directory deb \
	DEB_DIR="$work/deb" 2>&1)
rc=$?
tap_is "make deb builds the package (dpkg-buildpackage -us -uc -b)" "$rc" 0
if [ "$rc" -ne 0 ]; then
	printf '%s\n' "$out" | grep -Ev '^(cc|ar|rm) ' | grep -Ei -B3 -A3 'error|not ok|fail' |
		head -40 | sed 's/^/# /'
	bail "make deb failed"
fi
tap_check "the .deb is named after VERSION and the architecture" test -s "$deb"
[ -s "$deb" ] || bail "no $deb"
tap_is "the source tree has no debian/ of its own after the build" \
	"$(test -e "$top/debian" && echo present || echo absent)" absent

field() { dpkg-deb -f "$deb" "$1" 2>/dev/null; }
tap_is "Package: ibgw" "$(field Package)" ibgw
tap_is "Version: the VERSION file (debian/changelog agrees with it)" "$(field Version)" "$version"
deps=$(field Depends)
tap_like "Depends has adduser (the postinst makes the group)" "$deps" '(^|, )adduser(,|$)'
tap_like "Depends come from shlibs (libc6, libyaml)" "$deps" 'libc6 \(>= [0-9.]+\).*libyaml-0-2'

# --- lintian -----------------------------------------------------------------------
changes=$work/deb/ibgw_${version}_${arch}.changes
lint=$(timeout 300 lintian --pedantic -I --fail-on error,warning "$changes" 2>&1)
rc=$?
printf '%s\n' "$lint" | grep -v '^running with root privileges' | grep . | sed 's/^/# lintian: /'
tap_is "lintian (the .deb, the dbgsym, the .changes) exits 0 with --fail-on error,warning" "$rc" 0
tap_is "lintian prints no E: or W: tag" "$(printf '%s\n' "$lint" | grep -Ec '^[EW]: ')" 0

# --- contents ----------------------------------------------------------------------
# Every file and symlink the package holds, without the leading "./".
contents=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { sub(/^\.\//, "", $6); print $6 }' | sort)
printf '%s\n' "$contents" | sed 's/^/# /'
for f in usr/sbin/ibgwd usr/bin/gwctl etc/ibgw/ibgwd.yaml lib/systemd/system/ibgwd.service \
	usr/share/man/man8/ibgwd.8.gz usr/share/man/man8/gwctl.8.gz \
	usr/share/man/man5/ibgwd.yaml.5.gz usr/share/doc/ibgw/copyright; do
	tap_like "the package holds /$f" "$contents" "^$f\$"
done
stray=$(printf '%s\n' "$contents" | grep -Ev '^(usr/sbin/ibgwd|usr/bin/gwctl|etc/ibgw/ibgwd\.yaml|lib/systemd/system/ibgwd\.service|usr/share/man/man[58]/[a-z.]+\.[58]\.gz|usr/share/doc/ibgw/[A-Za-z.]+|usr/share/lintian/overrides/ibgw)$')
tap_is "nothing else: no build paths, objects, test programs or simulator" "$stray" ""
x=$work/x
dpkg-deb -x "$deb" "$x"
tap_is "no installed file mentions the build tree ($work)" "$(grep -rl -- "$work" "$x")" ""
tap_is "conffiles: the configuration only" "$(dpkg-deb -I "$deb" conffiles)" /etc/ibgw/ibgwd.yaml
tap_like "the packaged config gives the control sockets to group ibgw" \
	"$(grep '^  socket_group:' "$x/etc/ibgw/ibgwd.yaml")" '^  socket_group: ibgw +#'
tap_like "the packaged config runs ibgwd as user ibgw" \
	"$(grep '^  user:' "$x/etc/ibgw/ibgwd.yaml")" '^  user: ibgw +#'

# --- a fresh Debian root -----------------------------------------------------------
. /etc/os-release
mirror=${IBGW_DEB_MIRROR:-$(apt-get indextargets --format '$(REPO_URI) $(CODENAME)' 2>/dev/null |
	awk -v c="$VERSION_CODENAME" '$2 == c { print $1; exit }')}
echo "# debootstrap $VERSION_CODENAME from ${mirror:-?}"
out=$(timeout 400 debootstrap --variant=minbase --include=systemd,procps,man-db \
	"$VERSION_CODENAME" "$root" "$mirror" 2>&1)
rc=$?
tap_is "debootstrap makes a minimal $VERSION_CODENAME root from the apt mirror" "$rc" 0
if [ "$rc" -ne 0 ]; then
	printf '%s\n' "$out" | tail -20 | sed 's/^/# /'
	bail "no Debian root"
fi
tap_is "the fresh root has no group ibgw before" "$(in_root getent group ibgw)" ""

cp "$deb" "$root/tmp/"
out=$(in_root env DEBIAN_FRONTEND=noninteractive timeout 300 \
	apt-get install -y -q --no-install-recommends "/tmp/$(basename "$deb")" 2>&1 </dev/null)
rc=$?
tap_is "apt-get install ./ibgw.deb in the root (dependencies from the mirror)" "$rc" 0
if [ "$rc" -ne 0 ]; then
	printf '%s\n' "$out" | tail -20 | sed 's/^/# /'
	bail "the package did not install"
fi
tap_is "ibgwd -V" "$(in_root ibgwd -V 2>&1)" "ibgwd $version"
# (its owner, ibgw, below, once the user is checked)
tap_like "the postinst made the failover key: 0600, 64 hex digits" \
	"$(in_root stat -c '%a' /etc/ibgw/failover.key 2>&1) $(in_root cat /etc/ibgw/failover.key 2>&1)" \
	'^600 [0-9a-f]{64}$'
key_sum=$(md5sum <"$root/etc/ibgw/failover.key")
tap_check "ibgwd -n -f /etc/ibgw/ibgwd.yaml accepts the installed config" \
	in_root ibgwd -n -f /etc/ibgw/ibgwd.yaml
tap_is "man -w ibgwd" "$(in_root man -w ibgwd 2>&1)" /usr/share/man/man8/ibgwd.8.gz
tap_is "man -w gwctl" "$(in_root man -w gwctl 2>&1)" /usr/share/man/man8/gwctl.8.gz
tap_is "man -w 5 ibgwd.yaml" "$(in_root man -w 5 ibgwd.yaml 2>&1)" \
	/usr/share/man/man5/ibgwd.yaml.5.gz
tap_like "the group ibgw exists, as a system group" \
	"$(in_root getent group ibgw)" '^ibgw:x:[1-9][0-9]?[0-9]?:$'
tap_like "the user ibgw exists, a system user in group ibgw, no home, no shell" \
	"$(in_root getent passwd ibgw)" \
	"^ibgw:x:[1-9][0-9]?[0-9]?:$(in_root getent group ibgw | cut -d: -f3):[^:]*:/nonexistent:/usr/sbin/nologin$"
tap_is "the failover key is ibgw's, mode 0600" \
	"$(in_root stat -c '%U %G %a' /etc/ibgw/failover.key 2>&1)" "ibgw ibgw 600"
# The host's systemctl reads the root's unit paths: the unit is found, and is disabled.
tap_is "systemctl --root: the unit is found and disabled" \
	"$(systemctl --root="$root" is-enabled ibgwd.service 2>&1)" disabled
tap_check "systemd-analyze verify --root: the unit's programs and targets exist" \
	systemd-analyze verify --man=no --root="$root" ibgwd.service
tap_like "the unit starts the installed daemon on the installed config" \
	"$(grep '^ExecStart=' "$root/lib/systemd/system/ibgwd.service")" \
	'^ExecStart=/usr/sbin/ibgwd -d -f /etc/ibgw/ibgwd.yaml$'

# The daemon with the packaged config's control section: its sockets belong to group
# ibgw, a member may use the privileged socket and a non-member may not. Only that
# section (the example's links would open this machine's eth0), and in a network
# namespace of its own with no interface but lo.
in_root useradd -m alice && in_root adduser --quiet alice ibgw && in_root useradd -m bob
{
	printf 'gateway:\n'
	grep -E '^  (user|group):' "$root/etc/ibgw/ibgwd.yaml"
	awk '/^control:/ { p = 1; print; next } p && /^[^ #]/ { p = 0 } p' "$root/etc/ibgw/ibgwd.yaml"
} >"$root/tmp/control.yaml"
chmod 0644 "$root/tmp/control.yaml"
sed 's/^/# control.yaml: /' "$root/tmp/control.yaml"
timeout 120 unshare --net chroot "$root" ibgwd -d -f /tmp/control.yaml >"$work/ibgwd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do
	[ -S "$root/run/ibgw/ibgwd.sock" ] && break
	sleep 0.1
done
tap_is "the control socket is mode 0660, group ibgw" \
	"$(in_root stat -c '%a %G' /run/ibgw/ibgwd.sock 2>&1)" "660 ibgw"
tap_check "alice (in group ibgw) runs gwctl reload" in_root runuser -u alice -- gwctl reload
tap_like "the daemon runs as ibgw with three capabilities" "$(tr '\n' ' ' <"$work/ibgwd.log")" \
	"running as user ibgw \(uid [0-9]+, gid [0-9]+\) with capabilities cap_net_admin,cap_net_raw,cap_ipc_lock"
out=$(in_root runuser -u bob -- gwctl reload 2>&1)
rc=$?
tap_like "bob (not in the group) is refused" "$rc: $out" '^1: .*Permission denied'
kill "$daemon_pid" 2>/dev/null
wait "$daemon_pid" 2>/dev/null
daemon_pid=
sed 's/^/# ibgwd: /' "$work/ibgwd.log"

# --- upgrades with a modified configuration ----------------------------------------
# Two later versions made from this .deb: one with the same packaged config, one with a
# changed one (as when upstream edits the example).
mkdeb() { # NAME VERSION [append-to-config]
	local d=$work/$1
	dpkg-deb -R "$deb" "$d"
	sed -i "s/^Version: .*/Version: $2/" "$d/DEBIAN/control"
	[ -n "${3:-}" ] && echo "$3" >>"$d/etc/ibgw/ibgwd.yaml" &&
		(cd "$d" && find etc usr lib -type f -exec md5sum {} + | sort -k2 >DEBIAN/md5sums)
	dpkg-deb -b --root-owner-group "$d" "$root/tmp/$1.deb" >/dev/null
}
mkdeb same "$version+t1"
mkdeb changed "$version+t2" "# a later upstream example"
echo "# edited by the operator" >>"$root/etc/ibgw/ibgwd.yaml"
local_sum=$(md5sum <"$root/etc/ibgw/ibgwd.yaml")
tap_check "upgrade (config unchanged in the package) runs without a prompt" \
	in_root dpkg -i /tmp/same.deb </dev/null
tap_is "... the operator's config is kept" "$(md5sum <"$root/etc/ibgw/ibgwd.yaml")" "$local_sum"
tap_check "upgrade (config changed in the package) with --force-confold" \
	in_root dpkg -i --force-confdef --force-confold /tmp/changed.deb </dev/null
tap_is "... the operator's config is kept" "$(md5sum <"$root/etc/ibgw/ibgwd.yaml")" "$local_sum"
tap_like "... and the new one is beside it as ibgwd.yaml.dpkg-dist" \
	"$(tail -1 "$root/etc/ibgw/ibgwd.yaml.dpkg-dist" 2>&1)" '^# a later upstream example$'
tap_is "... the failover key is kept" "$(md5sum <"$root/etc/ibgw/failover.key")" "$key_sum"
tap_is "... and the unit is still disabled" \
	"$(systemctl --root="$root" is-enabled ibgwd.service 2>&1)" disabled

# --- remove, purge -----------------------------------------------------------------
# What the package put there: its files, and the folders no other package owns.
installed=$(in_root dpkg -L ibgw | while read -r p; do
	if [ -d "$root$p" ]; then
		[ "$(in_root dpkg-query -S "$p" 2>/dev/null | sed 's/: .*//')" = ibgw ] && echo "$p"
	else
		echo "$p"
	fi
done)
echo "# the package's own paths:" $installed
tap_check "dpkg -r ibgw" in_root dpkg -r ibgw
tap_is "remove takes the programs" "$(test -e "$root/usr/sbin/ibgwd" && echo present || echo gone)" gone
tap_check "remove keeps the configuration" test -f "$root/etc/ibgw/ibgwd.yaml"
tap_check "dpkg -P ibgw" in_root dpkg -P ibgw
left=$(for p in $installed; do [ -e "$root$p" ] && echo "$p"; done)
tap_is "purge leaves none of the package's files or folders" "$left" ""
tap_is "purge removes /etc/ibgw (with the .dpkg-dist)" \
	"$(test -e "$root/etc/ibgw" && ls -A "$root/etc/ibgw" || echo gone)" gone
tap_is "purge removes the user ibgw" "$(in_root getent passwd ibgw)" ""
tap_is "purge removes the group ibgw" "$(in_root getent group ibgw)" ""
tap_is "purge leaves no systemd enablement state" \
	"$(ls "$root/var/lib/systemd/deb-systemd-helper-enabled" 2>/dev/null | grep -c ibgwd)" 0
tap_is "dpkg no longer lists ibgw as installed or with config files" \
	"$(in_root dpkg-query -W -f='${Status}' ibgw 2>/dev/null | grep -Ec 'ok (installed|config-files|half)')" 0
tap_done
