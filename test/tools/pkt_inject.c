/*
 * pkt_inject: plays the gateway's side of one Ethernet link with the packet library,
 * so a real Linux stack (a namespace on the other end of a veth) judges our packets.
 *
 *   pkt_inject serve IFNAME --mac MAC [--b4 A.B.C.D]... [--b6 ADDR6]... [--mtu N]
 *              [--src4 A.B.C.D] [--src6 ADDR6] [--seconds N] [--pcap FILE]
 *
 * Over an AF_PACKET socket on IFNAME, for up to --seconds: ARP requests go through
 * arp_parse + proxy_arp (addresses given with --b4 live on "side B"; everything else
 * in the request's subnet is unknown); Neighbor Solicitations through nd_parse +
 * proxy_nd (--b6); IPv4 packets with DF set longer than --mtu get an ICMP
 * fragmentation-needed (icmp4_error) from --src4; IPv6 packets longer than --mtu a
 * Packet Too Big (icmp6_error) from --src6. Every frame sent is also written to --pcap
 * (Ethernet link type) for tshark. Prints one line per decision on stdout.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pkt/arp.h"
#include "pkt/icmp.h"
#include "pkt/ip.h"
#include "pkt/nd.h"
#include "pkt/proxy.h"

#define MAX_B 16

static uint8_t b4[MAX_B][4], b6[MAX_B][16];
static int nb4, nb6;
static FILE *pcap;

static enum proxy_where lookup(void *ctx, int family, const uint8_t *a)
{
	(void)ctx;
	if (family == AF_INET) {
		for (int i = 0; i < nb4; i++)
			if (!memcmp(b4[i], a, 4))
				return PROXY_WHERE_OTHER_SIDE;
	} else {
		for (int i = 0; i < nb6; i++)
			if (!memcmp(b6[i], a, 16))
				return PROXY_WHERE_OTHER_SIDE;
	}
	return PROXY_WHERE_UNKNOWN;
}

static void pcap_write(const uint8_t *f, size_t n)
{
	struct timespec ts;
	uint32_t rec[4];

	if (!pcap)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	rec[0] = (uint32_t)ts.tv_sec;
	rec[1] = (uint32_t)(ts.tv_nsec / 1000);
	rec[2] = rec[3] = (uint32_t)n;
	fwrite(rec, sizeof(rec), 1, pcap);
	fwrite(f, n, 1, pcap);
	fflush(pcap);
}

static int parse_mac(const char *s, uint8_t m[6])
{
	unsigned v[6];

	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++)
		m[i] = (uint8_t)v[i];
	return 0;
}

static void send_frame(int fd, int ifindex, const uint8_t dst[6], const uint8_t src[6],
		       uint16_t type, const uint8_t *payload, size_t n)
{
	uint8_t f[2048];
	struct sockaddr_ll sll = { .sll_family = AF_PACKET,
				   .sll_ifindex = ifindex,
				   .sll_halen = 6 };
	size_t len = 14 + n;

	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	ip_put16(f + 12, type);
	memcpy(f + 14, payload, n);
	if (len < 60) {
		memset(f + len, 0, 60 - len);
		len = 60;
	}
	memcpy(sll.sll_addr, dst, 6);
	if (sendto(fd, f, len, 0, (struct sockaddr *)&sll, sizeof(sll)) < 0)
		perror("sendto");
	pcap_write(f, len);
}

int main(int argc, char **argv)
{
	uint8_t mac[6] = { 0 }, src4[4] = { 0 }, src6[16] = { 0 };
	unsigned mtu = 1500, seconds = 10;
	const char *ifname;
	int have_mac = 0;

	if (argc < 3 || strcmp(argv[1], "serve") != 0) {
		fprintf(stderr, "usage: pkt_inject serve IFNAME --mac MAC [--b4 A]... [--b6 A]... "
				"[--mtu N] [--src4 A] [--src6 A] [--seconds N] [--pcap FILE]\n");
		return 2;
	}
	ifname = argv[2];
	for (int i = 3; i + 1 < argc; i += 2) {
		const char *o = argv[i], *v = argv[i + 1];
		int ok = 1;

		if (!strcmp(o, "--mac"))
			ok = parse_mac(v, mac) == 0, have_mac = 1;
		else if (!strcmp(o, "--b4") && nb4 < MAX_B)
			ok = inet_pton(AF_INET, v, b4[nb4++]) == 1;
		else if (!strcmp(o, "--b6") && nb6 < MAX_B)
			ok = inet_pton(AF_INET6, v, b6[nb6++]) == 1;
		else if (!strcmp(o, "--src4"))
			ok = inet_pton(AF_INET, v, src4) == 1;
		else if (!strcmp(o, "--src6"))
			ok = inet_pton(AF_INET6, v, src6) == 1;
		else if (!strcmp(o, "--mtu"))
			mtu = (unsigned)atoi(v);
		else if (!strcmp(o, "--seconds"))
			seconds = (unsigned)atoi(v);
		else if (!strcmp(o, "--pcap")) {
			static const uint32_t hdr[6] = { 0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1 };

			pcap = fopen(v, "wb");
			ok = pcap && fwrite(hdr, sizeof(hdr), 1, pcap) == 1;
		} else
			ok = 0;
		if (!ok) {
			fprintf(stderr, "pkt_inject: bad option %s %s\n", o, v);
			return 2;
		}
	}
	if (!have_mac) {
		fprintf(stderr, "pkt_inject: --mac is required\n");
		return 2;
	}
	int ifindex = (int)if_nametoindex(ifname);
	int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	if (!ifindex || fd < 0) {
		fprintf(stderr, "pkt_inject: %s: %s\n", ifname, strerror(errno));
		return 1;
	}
	struct sockaddr_ll bind_to = { .sll_family = AF_PACKET,
				       .sll_protocol = htons(ETH_P_ALL),
				       .sll_ifindex = ifindex };
	if (bind(fd, (struct sockaddr *)&bind_to, sizeof(bind_to)) < 0) {
		perror("bind");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);

	struct proxy_cfg cfg = { .enabled = true, .defend_dad = true };
	struct proxy_link link = { .ib = false, .lladdr = mac };
	struct proxy_env env = { .cfg = &cfg, .link = &link, .lookup = lookup };
	time_t end = time(NULL) + seconds;

	while (time(NULL) < end) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		struct sockaddr_ll from;
		socklen_t fl = sizeof(from);
		uint8_t f[9000], out[1600];
		size_t n;

		if (poll(&pfd, 1, 200) <= 0)
			continue;
		ssize_t got = recvfrom(fd, f, sizeof(f), 0, (struct sockaddr *)&from, &fl);
		if (got < 14 || from.sll_pkttype == PACKET_OUTGOING)
			continue;
		uint16_t type = ip_be16(f + 12);
		const uint8_t *p = f + 14, *hsrc = f + 6;
		size_t len = (size_t)got - 14;

		if (type == ETH_P_ARP) {
			struct arp_pkt a;
			enum arp_reason r = arp_parse(p, len, ARP_HTYPE_ETHER, &a);

			if (r != ARP_OK) {
				printf("arp rejected %s\n", arp_reason_name(r));
				continue;
			}
			struct proxy_decision d = proxy_arp(&env, &a, hsrc, out, sizeof(out));
			printf("arp %s -> %s\n", arp_kind_name(arp_classify(&a)),
			       proxy_reason_name(d.reason));
			if (d.action == PROXY_ANSWER)
				send_frame(fd, ifindex, hsrc, mac, ETH_P_ARP, out, d.len);
		} else if (type == ETH_P_IPV6) {
			struct nd_msg m;
			struct ip6_info i6;

			if (len >= 41 && p[6] == 58 && len > 40 && p[40] >= 133 && p[40] <= 137) {
				enum nd_reason r = nd_parse(p, len, ND_LINK_ETHER, &m);

				if (r != ND_OK) {
					printf("nd rejected %s\n", nd_reason_name(r));
					continue;
				}
				struct proxy_decision d =
				    proxy_nd(&env, &m, hsrc, out, sizeof(out));
				printf("nd type %u -> %s\n", m.type, proxy_reason_name(d.reason));
				if (d.action == PROXY_ANSWER) {
					uint8_t dmac[6];

					if (ip6_is_multicast(out + 24))
						nd_mcast_mac(out + 24, dmac);
					else
						memcpy(dmac, hsrc, 6);
					send_frame(fd, ifindex, dmac, mac, ETH_P_IPV6, out, d.len);
				}
				continue;
			}
			if (ip6_validate(p, len, &i6) != IP_OK || i6.pkt_len <= mtu)
				continue;
			struct icmp_err e = { .type = ICMP6_PACKET_TOO_BIG,
					      .param = mtu,
					      .src = src6 };
			enum icmp_reason r = icmp6_error(&e, p, len, out, sizeof(out), &n);
			printf("ip6 len %u > mtu %u -> %s\n", i6.pkt_len, mtu, icmp_reason_name(r));
			if (r == ICMP_OK)
				send_frame(fd, ifindex, hsrc, mac, ETH_P_IPV6, out, n);
		} else if (type == ETH_P_IP) {
			struct ip4_info i4;
			enum ip_reason ir = ip4_validate(p, len, &i4);

			if (ir != IP_OK) {
				printf("ip4 rejected %s\n", ip_reason_name(ir));
				continue;
			}
			if (i4.tot_len <= mtu || !i4.df)
				continue;
			struct icmp_err e = { .type = ICMP4_DEST_UNREACH,
					      .code = ICMP4_CODE_FRAG_NEEDED,
					      .param = mtu,
					      .src = src4,
					      .ip_id = 1 };
			enum icmp_reason r = icmp4_error(&e, p, len, out, sizeof(out), &n);
			printf("ip4 len %u > mtu %u -> %s\n", i4.tot_len, mtu, icmp_reason_name(r));
			if (r == ICMP_OK)
				send_frame(fd, ifindex, hsrc, mac, ETH_P_IP, out, n);
		}
		fflush(stdout);
	}
	if (pcap)
		fclose(pcap);
	return 0;
}
