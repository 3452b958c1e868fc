# flows_rx NS ADDR PORT TIMEOUT MARKER: receive "FLOW NUMBER" datagrams on ADDR:PORT in
# namespace NS until none came for TIMEOUT seconds (MARKER created once bound: see
# test/lib/listening.sh); print "received N flows F reordered R last L" (R: datagrams
# that arrived after a later one of their flow; L: the highest number).
. "$top/test/lib/listening.sh"
flows_rx() {
	ip netns exec "$1" python3 -c '
import socket, sys
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
s.bind((sys.argv[1], int(sys.argv[2]))); s.settimeout(float(sys.argv[3]))
open(sys.argv[4], "w").close()
last, got, reordered = {}, 0, 0
try:
    while True:
        f, n = map(int, s.recv(64).split())
        got += 1
        if n < last.get(f, -1): reordered += 1
        last[f] = max(n, last.get(f, -1))
except socket.timeout:
    pass
print("received %d flows %d reordered %d last %d" %
      (got, len(last), reordered, max(last.values(), default=-1)))' "$2" "$3" "$4" "$5"
}

# flows NS_A NS_B ADDR [PAUSE]: 64 UDP flows (source ports 41000..41063) from namespace NS_A to
# ADDR (port 6000) in NS_B, 300 datagrams each carrying (flow, number), 20 of a flow back
# to back, flow after flow, round after round: the datagrams of a flow follow each other
# closely, so that a flow spread over two workers would be reordered (with the frames
# dealt out in turn, PACKET_FANOUT_LB, fanout.sh's check fails). Prints flows_rx's
# line: R counts datagrams that arrived after a later one of their flow.
# A send the host's veth refuses (its ring full: a veth whose peer runs XDP pushes back,
# and with no qdisc the send fails with ENETDOWN or ENOBUFS) is retried a millisecond
# later, for up to 2 s (under load the XDP peer may push back for more than 100 ms).
# PAUSE (optional, seconds): a pause after each flow's 20, for a path whose receive
# queues are shallower than the rate a python sender reaches (the simulated IB fabric's
# UD has no flow control: ib_queues.sh).
# Needs python3 and $work. Used by fanout.sh, afxdp.sh and ib_queues.sh.
flows() {
	rm -f "$work/flows.listening"
	flows_rx "$2" "$3" 6000 2 "$work/flows.listening" >"$work/flows" &
	local rx=$!
	listening "$work/flows.listening"
	ip netns exec "$1" python3 -c '
import socket, sys, time
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
pause = float(sys.argv[2])
socks = []
for f in range(64):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind(("", 41000 + f)); socks.append(s)
for r in range(0, 300, 20):
    for f, s in enumerate(socks):
        for n in range(r, r + 20):
            for t in range(2000):
                try:
                    s.sendto(b"%d %d" % (f, n), (sys.argv[1], 6000))
                    break
                except OSError:
                    time.sleep(0.001)
        time.sleep(pause)
    time.sleep(0.01)' "$3" "${4:-0}"
	wait "$rx"
	cat "$work/flows"
}

# one_flow NS_A NS_B ADDR: one UDP flow of 3000 numbered datagrams from namespace NS_A to
# ADDR (port 6001) in NS_B, sent back to back (a short pause every 50, so that the
# simulated fabric's receive queues keep up). Prints flows_rx's line: R counts datagrams
# that arrived after a later one, L is the highest number that arrived (-1: none). Used
# by ib_queues.sh to start a flow toward a next hop the gateway must resolve first.
# Needs python3 and $work.
one_flow() {
	rm -f "$work/one_flow.listening"
	flows_rx "$2" "$3" 6001 3 "$work/one_flow.listening" >"$work/one_flow" &
	local rx=$!
	listening "$work/one_flow.listening"
	ip netns exec "$1" python3 -c '
import socket, sys, time
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
for n in range(3000):
    try:
        s.sendto(b"0 %d" % n, (sys.argv[1], 6001))
    except OSError:
        time.sleep(0.001)
    if n % 50 == 49:
        time.sleep(0.0005)' "$3"
	wait "$rx"
	cat "$work/one_flow"
}
