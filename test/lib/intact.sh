# intact NS_SERVER NS_CLIENT ADDR FILE: FILE sent over one TCP connection from network
# namespace NS_CLIENT to ADDR (port 5202) in NS_SERVER, with sendfile (the sender's TSO
# and checksum offload at work when its device has them on); prints the SHA-256 of what
# the server received. Needs python3 and $work (a temporary directory).
. "$top/test/lib/listening.sh"
intact() {
	local s=$1 c=$2 addr=$3 file=$4
	rm -f "$work/intact.listening"
	ip netns exec "$s" python3 -c '
import hashlib, socket, sys
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
l = socket.socket(fam, socket.SOCK_STREAM)
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], 5202)); l.listen(1); l.settimeout(30)
open(sys.argv[2], "w").close()
c, _ = l.accept(); c.settimeout(30)
h = hashlib.sha256()
while True:
    b = c.recv(1 << 20)
    if not b: break
    h.update(b)
print(h.hexdigest())' "$addr" "$work/intact.listening" >"$work/intact.sum" 2>&1 &
	local rx=$!
	listening "$work/intact.listening"
	ip netns exec "$c" timeout 60 python3 -c '
import socket, sys
c = socket.create_connection((sys.argv[1], 5202), timeout=30)
with open(sys.argv[2], "rb") as f:
    c.sendfile(f)
c.close()' "$addr" "$file"
	wait "$rx"
	cat "$work/intact.sum"
}
