# Paced TCP streams that span an event (a failover), checked end to end. Needs python3
# and $work (a temporary directory).
. "$top/test/lib/listening.sh"
#
#   stream_start NAME NS_SERVER NS_CLIENT ADDR PORT SECONDS
#       a server in NS_SERVER on ADDR:PORT hashing what it reads, and a client in
#       NS_CLIENT sending 256 KiB of random octets every 1/8 s (2 MiB/s) for SECONDS,
#       hashing what it sent; both in the background
#       (the client starts once the server listens, or after 20 s)
#   stream_result NAME   waits for both (at most SECONDS + 120 s); prints "intact BYTES"
#                        when the server read exactly what the client sent (same count,
#                        same SHA-256), else what each side reported. It polls rather
#                        than `wait`s: it is called inside $(...), a subshell, where
#                        `wait` returns at once (the processes are not its children).
stream_start() {
	local name=$1 s=$2 c=$3 addr=$4 port=$5 secs=$6
	rm -f "$work/stream-$name.listening"
	ip netns exec "$s" python3 -c '
import hashlib, socket, sys
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
l = socket.socket(fam, socket.SOCK_STREAM)
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], int(sys.argv[2]))); l.listen(1); l.settimeout(30)
open(sys.argv[3], "w").close()
c, _ = l.accept(); c.settimeout(60)
h = hashlib.sha256(); n = 0
while True:
    b = c.recv(1 << 20)
    if not b: break
    h.update(b); n += len(b)
print(n, h.hexdigest())' "$addr" "$port" "$work/stream-$name.listening" >"$work/stream-$name.rx" 2>&1 &
	eval "stream_rx_$name=$!"
	listening "$work/stream-$name.listening"
	eval "stream_secs_$name=$secs"
	ip netns exec "$c" timeout $((secs + 90)) python3 -c '
import hashlib, os, socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60)
h = hashlib.sha256(); n = 0
t0 = time.monotonic(); k = 0
while time.monotonic() - t0 < float(sys.argv[3]):
    b = os.urandom(256 << 10)
    c.sendall(b); h.update(b); n += len(b); k += 1
    d = t0 + k / 8 - time.monotonic()
    if d > 0: time.sleep(d)
c.close()
print(n, h.hexdigest())' "$addr" "$port" "$secs" >"$work/stream-$name.tx" 2>&1 &
	eval "stream_tx_$name=$!"
}
stream_result() {
	local name=$1 rx tx p secs end
	eval "secs=\$stream_secs_$name"
	end=$((SECONDS + secs + 120))
	for p in $(eval "echo \$stream_tx_$name \$stream_rx_$name"); do
		while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.1; done
	done
	rx=$(cat "$work/stream-$name.rx") tx=$(cat "$work/stream-$name.tx")
	if [ -n "$tx" ] && [ "$rx" = "$tx" ]; then
		echo "intact ${tx%% *}"
	else
		echo "sent: $tx; received: $rx"
	fi
}
