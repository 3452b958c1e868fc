# Start-up of a test's server started in the background: the server creates a marker
# file once it listens (python: open(MARKER, "w").close() after bind/listen), and
#
#   listening MARKER   waits until MARKER exists, at most 20 s (status 1 after that)
#
# A fixed sleep before the client starts was not enough: on a busy machine Python's
# start-up alone (a pyenv shim first, on CI) outlasted it, and the client's connection
# was refused. Remove MARKER before starting the server when a suite reuses the name.
listening() {
	local i
	for ((i = 0; i < 200; i++)); do
		[ -e "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
