# TAP helpers for shell test suites. Source it, then:
#   tap_plan 5
#   tap_check "gwctl answers" gwctl show version     # ok if the command succeeds
#   tap_is "ports active" "$(count_active)" 6         # ok if equal
#   tap_like "state is MASTER" "$out" 'SM State.*MASTER'
#   tap_done                                          # exit status: 1 if anything failed
# Output of failing checks is echoed as TAP comments ("# ...").
tap_n=0
tap_failed=0
tap_plan() { echo "1..$1"; }
tap_ok() { tap_n=$((tap_n + 1)); echo "ok $tap_n - $1"; }
tap_not_ok() {
	tap_n=$((tap_n + 1)); tap_failed=$((tap_failed + 1))
	echo "not ok $tap_n - $1"
	shift
	[ $# -gt 0 ] && printf '%s\n' "$@" | sed 's/^/# /'
	return 0
}
tap_check() {
	local desc=$1 out; shift
	if out=$("$@" 2>&1); then tap_ok "$desc"; else tap_not_ok "$desc" "command: $*" "$out"; fi
}
tap_is() {
	if [ "$2" = "$3" ]; then tap_ok "$1"; else tap_not_ok "$1" "got:      '$2'" "expected: '$3'"; fi
}
tap_like() {
	if printf '%s' "$2" | grep -Eq -- "$3"; then tap_ok "$1"; else tap_not_ok "$1" "no match for /$3/ in:" "$2"; fi
}
tap_done() { [ "$tap_failed" -eq 0 ]; }
