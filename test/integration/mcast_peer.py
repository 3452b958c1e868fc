#!/usr/bin/env python3
# A multicast sender, receiver and link-layer counter for test/integration/mcast.sh.
#   mcast_peer.py send GROUP PORT IFNAME COUNT TTL [GAP_MS]
#       COUNT UDP datagrams ("seq N") to GROUP:PORT out of IFNAME, TTL / hop limit TTL
#   mcast_peer.py recv GROUP PORT IFNAME COUNT SECONDS
#       join GROUP on IFNAME, count datagrams to PORT until COUNT came or SECONDS passed,
#       print the count (a file READY-GROUP-PORT appears in the cwd once joined), then
#       stay a member until a file LEAVE-GROUP-PORT appears (at most SECONDS more)
#   mcast_peer.py sniff GROUP IFNAME SECONDS
#       count the frames to GROUP (any port) seen on IFNAME (AF_PACKET, no join), print it
import socket, struct, sys, time, os

def family(group):
    return socket.AF_INET6 if ":" in group else socket.AF_INET

def main():
    what, group = sys.argv[1], sys.argv[2]
    fam = family(group)
    if what == "send":
        port, ifname, count, ttl = sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
        gap = float(sys.argv[7]) / 1000 if len(sys.argv) > 7 else 0.01
        s = socket.socket(fam, socket.SOCK_DGRAM)
        idx = socket.if_nametoindex(ifname)
        if fam == socket.AF_INET:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, ifname.encode())
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, struct.pack("=4s4si", b"\0" * 4, b"\0" * 4, idx))
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, ttl)
        else:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, idx)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, ttl)
        for i in range(count):
            s.sendto(b"seq %d" % i, (group, int(port)))
            time.sleep(gap)
        return
    if what == "recv":
        port, ifname, count, secs = int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), float(sys.argv[6])
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        idx = socket.if_nametoindex(ifname)
        if fam == socket.AF_INET:
            s.bind((group, port))
            s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                         struct.pack("=4s4si", socket.inet_aton(group), b"\0" * 4, idx))
        else:
            s.bind((group, port, 0, idx))
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP,
                         socket.inet_pton(fam, group) + struct.pack("=I", idx))
        open("READY-%s-%d" % (group, port), "w").close()
        n, end = 0, time.time() + secs
        while n < count and time.time() < end:
            s.settimeout(max(0.05, end - time.time()))
            try:
                s.recv(2048)
                n += 1
            except socket.timeout:
                pass
        print(n, flush=True)
        end = time.time() + secs
        while time.time() < end and not os.path.exists("LEAVE-%s-%d" % (group, port)):
            time.sleep(0.05)
        return
    if what == "sniff":
        ifname, secs = sys.argv[3], float(sys.argv[4])
        g = socket.inet_pton(fam, group)
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        s.bind((ifname, 0))
        open("READY-sniff-%s" % group, "w").close()
        n, end = 0, time.time() + secs
        while time.time() < end:
            s.settimeout(max(0.05, end - time.time()))
            try:
                f = s.recv(4096)
            except socket.timeout:
                continue
            if fam == socket.AF_INET and f[12:14] == b"\x08\x00" and f[30:34] == g:
                n += 1
            if fam == socket.AF_INET6 and f[12:14] == b"\x86\xdd" and f[38:54] == g:
                n += 1
        print(n)

main()
