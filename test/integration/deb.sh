#!/usr/bin/env bash
# The Debian package, as an operator meets it: `make deb` builds it, lintian has no error
# or warning, it holds exactly the files it should (nothing from the build tree), and in a
# fresh Debian root made by debootstrap from this machine's apt mirror (minbase plus
# systemd, procps and man-db, as on a server) `apt-get install ./ibgw_*.deb` gives a
# working ibgwd and gwctl, their man pages, the unit where systemd looks (disabled), the
# system group "ibgw" owning the control socket, the udev rule and group (ibgw-mad)
# that let the daemon open the IB MAD devices after it drops root, the unit under
# systemd (the root
# booted in a container: start, the process's user and capabilities, the journal,
# reload, the watchdog, stop), a modified config that survives upgrades, and a purge
# that leaves nothing behind.
#
# Needs root (debootstrap, chroot, systemd-nspawn), the mirror (about 50 s of
# debootstrap, nothing is cached between runs), and debhelper, lintian, debootstrap and
# systemd-container (packaging/deps.sh). IBGW_DEB_MIRROR overrides the mirror. About
# 3 minutes in all.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/lib/tap.sh"
work=$(mktemp -d /tmp/ibgw-deb-test.XXXXXX)
root=$work/root
daemon_pid=
nspawn_pid= # the container's systemd-nspawn, its PID 1, and its cgroups (see below)
leader=
cg_dirs=
machine=
cleanup() {
	[ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
	if [ -n "$nspawn_pid" ]; then
		kill -TERM "$nspawn_pid" 2>/dev/null # a clean poweroff, else everything killed
		for _ in $(seq 150); do
			kill -0 "$nspawn_pid" 2>/dev/null || break
			sleep 0.2
		done
		if kill -0 "$nspawn_pid" 2>/dev/null; then
			[ -n "$leader" ] && kill -KILL "$leader" 2>/dev/null
			kill -KILL "$nspawn_pid" 2>/dev/null
		fi
		wait "$nspawn_pid" 2>/dev/null
	fi
	for d in $cg_dirs; do # (empty once the container's last process is gone)
		for _ in $(seq 25); do
			find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
			[ -d "$d" ] || break
			sleep 0.2
		done
	done
	[ -n "$machine" ] && rmdir "/run/systemd/nspawn/propagate/$machine" 2>/dev/null
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

plan=102
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
	lib/udev/rules.d/60-ibgw.rules usr/share/man/man8/ibgwd.8.gz usr/share/man/man8/gwctl.8.gz \
	usr/share/man/man5/ibgwd.yaml.5.gz usr/share/doc/ibgw/copyright \
	usr/share/doc/ibgw/examples/ibgwd-annotated.yaml \
	usr/share/doc/ibgw/examples/ibgw-connected-mode.conf usr/share/bash-completion/completions/gwctl \
	etc/iproute2/rt_protos.d/ibgw.conf usr/lib/systemd/catalog/ibgw.catalog \
	usr/share/ibgw/monitoring/ibgw-alerts.yml usr/share/ibgw/monitoring/ibgw-dashboard.json; do
	tap_like "the package holds /$f" "$contents" "^$f\$"
done
stray=$(printf '%s\n' "$contents" | grep -Ev '^(usr/sbin/ibgwd|usr/bin/gwctl|etc/ibgw/ibgwd\.yaml|lib/systemd/system/ibgwd\.service|lib/udev/rules\.d/60-ibgw\.rules|usr/share/man/man[58]/[a-z.]+\.[58]\.gz|usr/share/doc/ibgw/[A-Za-z.]+|usr/share/doc/ibgw/examples/(ibgwd-annotated\.yaml|ibgw-connected-mode\.conf)|usr/share/bash-completion/completions/gwctl|etc/iproute2/rt_protos\.d/ibgw\.conf|usr/lib/systemd/catalog/ibgw\.catalog|usr/share/lintian/overrides/ibgw|usr/share/ibgw/monitoring/[A-Za-z.-]+)$')
tap_is "nothing else: no build paths, objects, test programs or simulator" "$stray" ""
x=$work/x
dpkg-deb -x "$deb" "$x"
tap_is "no installed file mentions the build tree ($work)" "$(grep -rl -- "$work" "$x")" ""
tap_is "conffiles: the configuration and the iproute2 protocol name" \
	"$(dpkg-deb -I "$deb" conffiles | sort | paste -sd' ' -)" \
	"/etc/ibgw/ibgwd.yaml /etc/iproute2/rt_protos.d/ibgw.conf"
tap_like "the packaged config gives the control sockets to group ibgw" \
	"$(grep '^  socket_group:' "$x/etc/ibgw/ibgwd.yaml")" '^  socket_group: ibgw +#'
tap_like "the packaged config runs ibgwd as user ibgw" \
	"$(grep '^  user:' "$x/etc/ibgw/ibgwd.yaml")" '^  user: ibgw +#'

# --- a fresh Debian root -----------------------------------------------------------
. /etc/os-release
mirror=${IBGW_DEB_MIRROR:-$(apt-get indextargets --format '$(REPO_URI) $(CODENAME)' 2>/dev/null |
	awk -v c="$VERSION_CODENAME" '$2 == c { print $1; exit }')}
echo "# debootstrap $VERSION_CODENAME from ${mirror:-?}"
out=$(timeout 400 debootstrap --variant=minbase --include=systemd,procps,man-db,iproute2 \
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
tap_like "... a hardware one: an IPoIB link on verbs (mlx5_0 port 1), one Ethernet interface, user ibgw, no failover" \
	"$(in_root ibgwd -n -v -f /etc/ibgw/ibgwd.yaml 2>&1 | tr '\n' '|') failover sections: $(grep -c '^failover:' "$root/etc/ibgw/ibgwd.yaml")" \
	"^gateway:\|.*  user: ibgw\|.*ipoib_links:\|  - name: ib0\|    backend: verbs\|    device: mlx5_0\|    port: 1\|.*ethernet_interfaces:\|  - name: eth0\|.* failover sections: 0$"
tap_is "/etc/iproute2/rt_protos.d/ibgw.conf names protocol 250 ibgw" \
	"$(grep -v '^#' "$root/etc/iproute2/rt_protos.d/ibgw.conf")" "$(printf '250\tibgw')"
tap_is "the bash completion, sourced, registers _gwctl for gwctl" \
	"$(in_root bash -c '. /usr/share/bash-completion/completions/gwctl && complete -p gwctl' 2>&1)" \
	"complete -F _gwctl gwctl"
tap_like "the journal catalog has the reload's MESSAGE_ID (journalctl --list-catalog)" \
	"$(in_root journalctl --list-catalog 82bc78d6df8444bfbde807091df0d439 2>&1)" \
	"82bc78d6df8444bfbde807091df0d439 ibgw: configuration reload"
tap_is "man -w ibgwd" "$(in_root man -w ibgwd 2>&1)" /usr/share/man/man8/ibgwd.8.gz
tap_is "man -w gwctl" "$(in_root man -w gwctl 2>&1)" /usr/share/man/man8/gwctl.8.gz
tap_is "man -w 5 ibgwd.yaml" "$(in_root man -w 5 ibgwd.yaml 2>&1)" \
	/usr/share/man/man5/ibgwd.yaml.5.gz
tap_like "the group ibgw exists, as a system group" \
	"$(in_root getent group ibgw)" '^ibgw:x:[1-9][0-9]?[0-9]?:$'
tap_like "the user ibgw exists, a system user in group ibgw, no home, no shell" \
	"$(in_root getent passwd ibgw)" \
	"^ibgw:x:[1-9][0-9]?[0-9]?:$(in_root getent group ibgw | cut -d: -f3):[^:]*:/nonexistent:/usr/sbin/nologin$"
# The SA client opens the MAD devices after the drop: the udev rule gives them to
# ibgw-mad, whose only member is ibgw (not the gwctl operators' group ibgw).
tap_is "the udev rule gives umad* to group ibgw-mad, mode 0660" \
	"$(grep -v '^#' "$root/lib/udev/rules.d/60-ibgw.rules")" \
	'SUBSYSTEM=="infiniband_mad", KERNEL=="umad*", GROUP="ibgw-mad", MODE="0660"'
tap_like "the group ibgw-mad exists, a system group, ibgw its only member" \
	"$(in_root getent group ibgw-mad)" '^ibgw-mad:x:[1-9][0-9]?[0-9]?:ibgw$'
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

# --- the unit under systemd, in a booted container ---------------------------------
# The root booted with systemd-nspawn: its own systemd as PID 1, journald, and a veth
# pair whose container end is host0. The operator's commands (systemctl, journalctl,
# gwctl) run in it through nsenter into its PID 1's namespaces: machinectl and
# systemd-run -M would need systemd and machined on this machine, which the test does
# not assume. The container gets CAP_IPC_LOCK, which nspawn leaves out of its default
# set and a machine has: the daemon keeps it (memory the HCA pins) and refuses to start
# when it cannot. The config is what an operator would write in /etc/ibgw/ibgwd.yaml:
# the packaged one's user and control section and one Ethernet interface on host0 (the
# example's IPoIB links need an HCA and its failover section needs those links; the
# container has neither); the packaged file comes back before the upgrades below.
machine=ibgwdeb$$
cp -p "$root/etc/ibgw/ibgwd.yaml" "$work/ibgwd.yaml.packaged"
{
	cat "$root/tmp/control.yaml"
	printf 'ethernet_interfaces:\n  - name: host0\n    addresses: [192.0.2.1/24]\n'
	printf 'kernel_routes:\n  export_table: 100\n'
} >"$root/etc/ibgw/ibgwd.yaml"
sed 's/^/# ibgwd.yaml in the container: /' "$root/etc/ibgw/ibgwd.yaml"

in_box() { timeout -k 5 30 nsenter -t "$leader" -m -u -i -n -p -C -r -w "$@" </dev/null; }
# wait_for SECONDS COMMAND...: until COMMAND succeeds, at most SECONDS.
wait_for() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -ge "$end" ] && return 1
		sleep 0.2
	done
}
# The unit's properties PROPS (A,B,...) as "A=x B=y", sorted by name.
unit_props() { in_box systemctl show -p "$1" ibgwd.service 2>&1 | sort | paste -sd' ' -; }
# unit_props_wait SECONDS PROPS EXPECTED: the properties once they are EXPECTED, or as
# last seen after SECONDS (a reload or a restart settles a moment after its command).
unit_props_wait() {
	local end=$((SECONDS + $1)) v
	while v=$(unit_props "$2") && [ "$v" != "$3" ] && [ "$SECONDS" -lt "$end" ]; do
		sleep 0.2
	done
	printf '%s' "$v"
}
journal() { in_box journalctl -b -u ibgwd.service -o cat --no-pager 2>&1; }
journal_has() { journal | grep -Eq -- "$1"; }
booted() {
	found_leader || return 1
	state=$(in_box systemctl is-system-running 2>/dev/null)
	case $state in running | degraded) return 0 ;; esac
	return 1
}

# nspawn without machined (--register=no --keep-unit) runs the container in the cgroup
# it is started in, split into "supervisor" and "payload". Under a host systemd that is a
# delegated scope of its own; else a cgroup of its own made here in each hierarchy
# systemd uses (the unified one, and the v1 name=systemd one if mounted), removed at exit.
nspawn_args=(-b -D "$root" --machine="$machine" --register=no --keep-unit --network-veth
	--capability=CAP_IPC_LOCK --link-journal=no --resolv-conf=off --timezone=off)
if [ -d /run/systemd/system ]; then
	systemd-run --scope --quiet --collect -p Delegate=yes --unit="$machine" \
		systemd-nspawn "${nspawn_args[@]}" </dev/null >"$work/boot.log" 2>&1 &
	nspawn_pid=$!
else
	for m in $(awk '$3 == "cgroup2" || ($3 == "cgroup" && $4 ~ /(^|,)name=systemd(,|$)/) {
		print $2 }' /proc/self/mounts); do
		mkdir "$m/$machine" && cg_dirs="$cg_dirs $m/$machine"
	done
	(
		for d in $cg_dirs; do echo "$BASHPID" >"$d/cgroup.procs"; done
		exec systemd-nspawn "${nspawn_args[@]}"
	) </dev/null >"$work/boot.log" 2>&1 &
	nspawn_pid=$!
fi
leader=
# The container's init: nspawn's child in a PID namespace of its own. Not merely its first
# child: nspawn's outer child, which starts init and exits, may be found first (CI once
# entered it: every systemctl in the box failed, though the container booted).
found_leader() {
	local p
	leader=
	for p in $(pgrep -P "$nspawn_pid"); do
		if [ "$(readlink "/proc/$p/ns/pid")" != "$(readlink /proc/self/ns/pid)" ]; then
			leader=$p
			return 0
		fi
	done
	return 1
}
state=
unit_checks_end=$((tap_n + 28))
unit_checks() {
	local rc out pid pid2 uid gid wd t1 t2
	wait_for 10 found_leader && wait_for 90 booted
	rc=$?
	tap_like "systemd-nspawn -b boots the root within 90 s: systemctl is-system-running" \
		"$state" '^(running|degraded)$'
	if [ "$rc" -ne 0 ]; then
		tail -20 "$work/boot.log" | sed 's/^/# boot: /'
		return
	fi
	[ "$state" = degraded ] && in_box systemctl --failed --no-legend | sed 's/^/# failed: /'

	out=$(in_box systemctl start ibgwd 2>&1)
	rc=$?
	tap_is "systemctl start ibgwd exits 0 (Type=notify: once the daemon says READY=1)" \
		"$rc: $out" "0: "
	tap_is "... the unit is active (running), StatusText 'running'" \
		"$(unit_props ActiveState,SubState,StatusText)" \
		"ActiveState=active StatusText=running SubState=running"
	pid=$(in_box systemctl show -p MainPID --value ibgwd)
	uid=$(in_box id -u ibgw)
	gid=$(in_box id -g ibgw)
	tap_is "its process runs as user ibgw, group ibgw (/proc/MAINPID/status Uid, Gid)" \
		"$(in_box awk '/^(Uid|Gid):/ { print $1, $2, $3, $4, $5 }' "/proc/$pid/status" |
			paste -sd' ' -)" "Uid: $uid $uid $uid $uid Gid: $gid $gid $gid $gid"
	# ibgwd(8) PRIVILEGES: CAP_NET_ADMIN (12), CAP_NET_RAW (13), CAP_IPC_LOCK (14),
	# permitted and effective, in every thread; none inheritable or ambient.
	tap_is "every thread has CapPrm = CapEff = NET_ADMIN, NET_RAW, IPC_LOCK; CapInh, CapAmb none" \
		"$(in_box sh -c "cat /proc/$pid/task/*/status" | grep -E '^Cap(Inh|Prm|Eff|Amb):' |
			sort -u | paste -sd' ' -)" \
		"$(printf 'CapAmb:\t%016x CapEff:\t%016x CapInh:\t%016x CapPrm:\t%016x' \
			0 0x7000 0 0x7000)"
	# The unit's CapabilityBoundingSet: those three, CHOWN (0), SETGID (6), SETUID (7).
	tap_is "... the unit's bounding set (those, CHOWN, SETUID, SETGID), NoNewPrivs, a seccomp filter" \
		"$(in_box grep -E '^(CapBnd|NoNewPrivs|Seccomp):' "/proc/$pid/status" | paste -sd' ' -)" \
		"$(printf 'CapBnd:\t%016x NoNewPrivs:\t1 Seccomp:\t2' 0x70c1)"
	tap_like "journalctl -u ibgwd has its start line" "$(journal)" \
		"^ibgwd $version started \(/etc/ibgw/ibgwd\.yaml, 0 IPoIB links, 1 Ethernet interfaces\)$"
	tap_like "... and the drop to user ibgw" "$(journal)" \
		"^running as user ibgw \(uid $uid, gid $gid\) with capabilities cap_net_admin,cap_net_raw,cap_ipc_lock$"
	tap_like "gwctl show routes (root, in the container) has host0's connected route" \
		"$(in_box gwctl show routes 2>&1)" '^192\.0\.2\.0/24 dev host0 proto kernel'
	in_box gwctl route add blackhole 203.0.113.0/24 >/dev/null 2>&1
	exported() { in_box ip route show table 100 2>&1 | grep -q '^blackhole 203\.0\.113\.0/24'; }
	wait_for 5 exported
	tap_like "an exported route shows 'proto ibgw' in ip route (rt_protos.d)" \
		"$(in_box ip route show table 100 2>&1)" '^blackhole 203\.0\.113\.0/24 proto ibgw'

	# reload: a route added to the file, then a file with an error.
	printf 'routes:\n  - prefix: 198.51.100.0/24\n    via: 192.0.2.254\n' \
		>>"$root/etc/ibgw/ibgwd.yaml"
	cp -p "$root/etc/ibgw/ibgwd.yaml" "$work/ibgwd.yaml.reloaded"
	out=$(in_box systemctl reload ibgwd 2>&1)
	rc=$?
	tap_is "systemctl reload ibgwd exits 0 (a route added to the file)" "$rc: $out" "0: "
	wait_for 10 journal_has '^reloaded /etc/ibgw/ibgwd\.yaml in'
	tap_like "... the journal says it was applied" "$(journal)" \
		'^reloaded /etc/ibgw/ibgwd\.yaml in [0-9]+ ms$'
	tap_like "... that entry carries the reload's MESSAGE_ID (journalctl MESSAGE_ID=...)" \
		"$(in_box journalctl -b -u ibgwd.service -o cat --no-pager \
			MESSAGE_ID=82bc78d6df8444bfbde807091df0d439 2>&1)" \
		'^reloaded /etc/ibgw/ibgwd\.yaml in [0-9]+ ms$'
	tap_is "... the unit stays active (running), the same process, StatusText 'running'" \
		"$(unit_props_wait 5 ActiveState,SubState,StatusText,MainPID \
			"ActiveState=active MainPID=$pid StatusText=running SubState=running")" \
		"ActiveState=active MainPID=$pid StatusText=running SubState=running"
	tap_like "... gwctl show routes has the new route" "$(in_box gwctl show routes 2>&1)" \
		'^198\.51\.100\.0/24 via 192\.0\.2\.254 dev host0 proto static'
	echo "bogus_key: 1" >>"$root/etc/ibgw/ibgwd.yaml"
	in_box systemctl reload ibgwd >/dev/null 2>&1
	wait_for 10 journal_has 'running config is unchanged'
	tap_like "reload of a file with an error: the journal says where (FILE:LINE:COLUMN)" \
		"$(journal)" "^/etc/ibgw/ibgwd\.yaml:[0-9]+:1: unknown key 'bogus_key'"
	tap_is "... the unit stays active, the same process, StatusText 'running; last reload failed'" \
		"$(unit_props_wait 5 ActiveState,StatusText,MainPID \
			"ActiveState=active MainPID=$pid StatusText=running; last reload failed")" \
		"ActiveState=active MainPID=$pid StatusText=running; last reload failed"
	tap_like "... and the running config stays (the route is there)" \
		"$(in_box gwctl show routes 2>&1)" '^198\.51\.100\.0/24 via 192\.0\.2\.254 dev host0'
	cp -p "$work/ibgwd.yaml.reloaded" "$root/etc/ibgw/ibgwd.yaml"

	# The watchdog: the shipped WatchdogSec, petted every half of it; a stopped daemon
	# is killed after it, and restarted (Restart=on-failure).
	wd=$(sed -n 's/^WatchdogSec=\([0-9]\{1,2\}\)s$/\1/p' "$root/lib/systemd/system/ibgwd.service")
	tap_is "the unit arms the watchdog: WatchdogUSec is the unit's WatchdogSec (${wd:-?}s)" \
		"$(in_box systemctl show -p WatchdogUSec --value ibgwd)" "${wd:-?}s"
	wd=${wd:-10}
	t1=$(in_box systemctl show -p WatchdogTimestampMonotonic --value ibgwd)
	advanced() {
		t2=$(in_box systemctl show -p WatchdogTimestampMonotonic --value ibgwd)
		[ "${t1:-0}" -gt 0 ] && [ "${t2:-0}" -gt "$t1" ]
	}
	wait_for $((wd * 3 / 4 + 1)) advanced
	tap_is "ibgwd pets it: WatchdogTimestamp advances within ${wd}s*3/4" \
		"$([ "${t1:-0}" -gt 0 ] && [ "${t2:-0}" -gt "$t1" ] && echo advanced || echo "$t1 -> $t2")" \
		advanced
	in_box kill -STOP "$pid"
	wait_for $((wd + 5)) journal_has 'Watchdog timeout'
	tap_like "SIGSTOP the daemon: the journal says 'Watchdog timeout' within ${wd}+5 s" "$(journal)" \
		"^ibgwd\.service: Watchdog timeout \(limit ${wd}s\)!$"
	tap_like "... and the unit failed with result 'watchdog'" "$(journal)" \
		"^ibgwd\.service: Failed with result 'watchdog'\.$"
	tap_is "... Restart=on-failure starts it again: active (running), NRestarts=1" \
		"$(unit_props_wait 15 ActiveState,SubState,StatusText,NRestarts \
			"ActiveState=active NRestarts=1 StatusText=running SubState=running")" \
		"ActiveState=active NRestarts=1 StatusText=running SubState=running"
	pid2=$(in_box systemctl show -p MainPID --value ibgwd)
	tap_is "... in a new process" \
		"$([ "${pid2:-0}" -gt 0 ] && [ "$pid2" != "$pid" ] && echo new || echo "$pid -> $pid2")" new

	out=$(in_box systemctl stop ibgwd 2>&1)
	rc=$?
	tap_is "systemctl stop ibgwd exits 0" "$rc: $out" "0: "
	tap_is "... inactive (dead), Result=success, ExecMainStatus=0" \
		"$(unit_props ActiveState,SubState,Result,ExecMainStatus)" \
		"ActiveState=inactive ExecMainStatus=0 Result=success SubState=dead"
	# (journald may file the daemon's last message a moment after it exited)
	last_words() {
		in_box journalctl -b -o cat --no-pager _SYSTEMD_UNIT=ibgwd.service "_PID=$pid2" | tail -1
	}
	said_stopped() { [ "$(last_words)" = stopped ]; }
	wait_for 5 said_stopped
	tap_is "... the daemon's last journal line is 'stopped'" "$(last_words)" stopped
	tap_is "... /run/ibgw is gone (RuntimeDirectory=)" \
		"$(in_box sh -c 'test -e /run/ibgw && ls -A /run/ibgw || echo gone')" gone
}
unit_checks
while [ "$tap_n" -lt "$unit_checks_end" ]; do tap_not_ok "not reached: the container did not boot"; done
[ -n "$leader" ] && journal | sed 's/^/# journal: /'

# poweroff: SIGTERM to systemd-nspawn shuts the container down in order.
kill -TERM "$nspawn_pid" 2>/dev/null
nspawn_gone() { ! kill -0 "$nspawn_pid" 2>/dev/null; }
if wait_for 30 nspawn_gone; then
	wait "$nspawn_pid"
	rc=$?
else
	rc="still running after 30 s"
fi
tap_is "the container powers off (SIGTERM to systemd-nspawn) within 30 s, exit status 0" "$rc" 0
[ "$rc" = 0 ] && nspawn_pid=
cp -p "$work/ibgwd.yaml.packaged" "$root/etc/ibgw/ibgwd.yaml"

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
tap_is "purge removes the group ibgw-mad" "$(in_root getent group ibgw-mad)" ""
tap_is "purge leaves no systemd enablement state" \
	"$(ls "$root/var/lib/systemd/deb-systemd-helper-enabled" 2>/dev/null | grep -c ibgwd)" 0
tap_is "dpkg no longer lists ibgw as installed or with config files" \
	"$(in_root dpkg-query -W -f='${Status}' ibgw 2>/dev/null | grep -Ec 'ok (installed|config-files|half)')" 0
tap_done
