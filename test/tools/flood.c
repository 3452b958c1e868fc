/*
 * flood: a hostile or broken Ethernet host, for the suites that check the gateway keeps
 * serving everyone else (issue 20). Sends COUNT frames at RATE per second from an
 * AF_PACKET socket on IFNAME, each to the gateway's MAC, built with the packet library:
 *
 *   flood IFNAME --gw-mac MAC --mode MODE [--count N] [--rate PPS] [--seed S]
 *         [--src4 A.B.C.D] [--src6 ADDR6] [--prefix4 A.B.C.D/LEN] [--prefix6 ADDR6/64]
 *         [--target4 A.B.C.D] [--target6 ADDR6]
 *
 * MODE (scans go to the gateway's MAC, solicitations to their group or broadcast):
 *   scan4  ICMP echo requests from --src4 to random addresses of --prefix4
 *   scan6  ICMPv6 echo requests from --src6 to random addresses of --prefix6 (a /64
 *          sweep: every packet a new destination, as a scanner or a worm sends)
 *   ns6    Neighbor Solicitations for --target6, each from a new random address of
 *          --prefix6 and a new random MAC (source link-layer option)
 *   arp4   ARP requests for --target4, each from a new random MAC and a new random
 *          sender address of --prefix4
 *
 * The rate is kept by a monotonic clock over bursts of up to 32 frames (sendmmsg); RATE
 * 0 sends as fast as the socket takes them. Random numbers come from a xorshift seeded
 * by --seed (default 1), so a run can be repeated. Prints "sent N in S s (P pps)" and
 * exits 0 when every frame went out, 1 otherwise. Bounded by COUNT (default 20000, at
 * most 10,000,000): it always stops by itself.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pkt/arp.h"
#include "pkt/ip.h"
#include "pkt/nd.h"

#define BURST     32
#define FRAME_MAX 128
#define COUNT_MAX 10000000UL

enum mode {
	SCAN4,
	SCAN6,
	NS6,
	ARP4
};

struct opts {
	enum mode mode;
	unsigned long count;
	unsigned long rate;
	uint64_t seed;
	uint8_t gw_mac[6], own_mac[6];
	uint8_t src4[4], src6[16], target4[4], target6[16];
	uint8_t prefix4[4], prefix6[16];
	unsigned prefix4_len;
};

static uint64_t rng;

static uint64_t next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void random_mac(uint8_t mac[6])
{
	uint64_t r = next_random();

	memcpy(mac, &r, 6);
	mac[0] = (uint8_t)((mac[0] & 0xfe) | 0x02); /* unicast, locally administered */
}

static void random_addr4(const struct opts *o, uint8_t out[4])
{
	uint32_t net = ip_be32(o->prefix4),
		 host_mask = o->prefix4_len >= 32 ? 0 : 0xffffffffu >> o->prefix4_len;

	ip_put32(out, (net & ~host_mask) | ((uint32_t)next_random() & host_mask));
}

static void random_addr6(const struct opts *o, uint8_t out[16])
{
	uint64_t r = next_random();

	memcpy(out, o->prefix6, 8);
	memcpy(out + 8, &r, 8);
}

/* An echo request (ICMP type 8, or ICMPv6 type 128) of 8 octets after the IP header. */
static size_t build_echo(uint8_t *ip, int family, const uint8_t *src, const uint8_t *dst,
			 uint16_t seq)
{
	size_t hl = ip_hdr_build(ip, family, src, dst, family == AF_INET ? 1 : 58, 64, 8, false);
	uint8_t *icmp = ip + hl;

	memset(icmp, 0, 8);
	icmp[0] = family == AF_INET ? 8 : 128;
	ip_put16(icmp + 4, 0x1b6f); /* identifier */
	ip_put16(icmp + 6, seq);
	if (family == AF_INET)
		ip_put16(icmp + 2, ip_csum(icmp, 8));
	else
		ip_put16(icmp + 2, (uint16_t)~ip_csum_fold(
				       ip_csum_add(ip6_pseudo_sum(src, dst, 8, 58), icmp, 8)));
	return hl + 8;
}

/* One frame of the flood into f; returns its length (0: could not build). */
static size_t build_frame(const struct opts *o, uint8_t *f, unsigned long i)
{
	static const uint8_t broadcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t src_mac[6], a[16], group[16], group_mac[6];
	const uint8_t *dst_mac = o->gw_mac;
	uint16_t type = ETHERTYPE_IPV6;
	size_t n = 0;

	memcpy(src_mac, o->own_mac, 6);
	switch (o->mode) {
	case SCAN4:
		type = ETHERTYPE_IP;
		random_addr4(o, a);
		n = build_echo(f + 14, AF_INET, o->src4, a, (uint16_t)i);
		break;
	case SCAN6:
		random_addr6(o, a);
		n = build_echo(f + 14, AF_INET6, o->src6, a, (uint16_t)i);
		break;
	case NS6:
		random_mac(src_mac);
		random_addr6(o, a);
		nd_solicited_node(o->target6, group);
		nd_mcast_mac(group, group_mac);
		dst_mac = group_mac; /* as a host solicits: the solicited-node group */
		n = nd_build_ns(f + 14, FRAME_MAX - 14, ND_LINK_ETHER, a, NULL, o->target6,
				src_mac);
		break;
	case ARP4:
		type = ETHERTYPE_ARP;
		random_mac(src_mac);
		random_addr4(o, a);
		dst_mac = broadcast;
		n = arp_build_request(f + 14, FRAME_MAX - 14, ARP_HTYPE_ETHER, src_mac, ip_be32(a),
				      ip_be32(o->target4));
		break;
	}
	if (!n)
		return 0;
	memcpy(f, dst_mac, 6);
	memcpy(f + 6, src_mac, 6);
	ip_put16(f + 12, type);
	n += 14;
	if (n < 60) { /* Ethernet minimum, as a NIC pads */
		memset(f + n, 0, 60 - n);
		n = 60;
	}
	return n;
}

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];

	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++) {
		if (v[i] > 0xff)
			return -1;
		mac[i] = (uint8_t)v[i];
	}
	return 0;
}

static int parse_prefix(const char *s, int family, uint8_t *addr, unsigned *len)
{
	char buf[64];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	unsigned max = family == AF_INET ? 32 : 128;

	if (n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (inet_pton(family, buf, addr) != 1)
		return -1;
	*len = slash ? (unsigned)strtoul(slash + 1, NULL, 10) : max;
	return *len <= max ? 0 : -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: flood IFNAME --gw-mac MAC --mode scan4|scan6|ns6|arp4 "
			"[--count N] [--rate PPS] [--seed S] [--src4 A] [--src6 A] "
			"[--prefix4 P/LEN] [--prefix6 P/64] [--target4 A] [--target6 A]\n");
	exit(2);
}

static void parse_args(int argc, char **argv, struct opts *o, const char **ifname)
{
	static const struct option lo[] = {
		{ "gw-mac", 1, NULL, 'g' },  { "mode", 1, NULL, 'm' },
		{ "count", 1, NULL, 'c' },   { "rate", 1, NULL, 'r' },
		{ "seed", 1, NULL, 's' },    { "src4", 1, NULL, '4' },
		{ "src6", 1, NULL, '6' },    { "prefix4", 1, NULL, 'p' },
		{ "prefix6", 1, NULL, 'P' }, { "target4", 1, NULL, 't' },
		{ "target6", 1, NULL, 'T' }, { NULL, 0, NULL, 0 },
	};
	bool have_mac = false, have_mode = false;
	unsigned len;
	int c;

	o->count = 20000;
	o->seed = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'g':
			if (parse_mac(optarg, o->gw_mac) < 0)
				usage();
			have_mac = true;
			break;
		case 'm':
			have_mode = true;
			if (!strcmp(optarg, "scan4"))
				o->mode = SCAN4;
			else if (!strcmp(optarg, "scan6"))
				o->mode = SCAN6;
			else if (!strcmp(optarg, "ns6"))
				o->mode = NS6;
			else if (!strcmp(optarg, "arp4"))
				o->mode = ARP4;
			else
				usage();
			break;
		case 'c':
			o->count = strtoul(optarg, NULL, 10);
			if (!o->count || o->count > COUNT_MAX)
				usage();
			break;
		case 'r':
			o->rate = strtoul(optarg, NULL, 10);
			break;
		case 's':
			o->seed = strtoull(optarg, NULL, 10) ?: 1;
			break;
		case '4':
			if (inet_pton(AF_INET, optarg, o->src4) != 1)
				usage();
			break;
		case '6':
			if (inet_pton(AF_INET6, optarg, o->src6) != 1)
				usage();
			break;
		case 'p':
			if (parse_prefix(optarg, AF_INET, o->prefix4, &o->prefix4_len) < 0)
				usage();
			break;
		case 'P':
			if (parse_prefix(optarg, AF_INET6, o->prefix6, &len) < 0 || len != 64)
				usage();
			break;
		case 't':
			if (inet_pton(AF_INET, optarg, o->target4) != 1)
				usage();
			break;
		case 'T':
			if (inet_pton(AF_INET6, optarg, o->target6) != 1)
				usage();
			break;
		default:
			usage();
		}
	}
	if (optind != argc - 1 || !have_mac || !have_mode)
		usage();
	*ifname = argv[optind];
}

int main(int argc, char **argv)
{
	static uint8_t frames[BURST][FRAME_MAX];
	struct mmsghdr msgs[BURST];
	struct iovec iov[BURST];
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_halen = 6 };
	struct opts o = { 0 };
	const char *ifname;
	unsigned long sent = 0;
	double start, elapsed;
	int fd;

	parse_args(argc, argv, &o, &ifname);
	rng = o.seed;
	sll.sll_ifindex = (int)if_nametoindex(ifname);
	if (!sll.sll_ifindex) {
		fprintf(stderr, "flood: no interface %s\n", ifname);
		return 2;
	}
	memcpy(sll.sll_addr, o.gw_mac, 6);
	fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (fd < 0) {
		perror("flood: socket");
		return 2;
	}
	{
		struct ifreq ifr = { 0 };

		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
		if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) {
			perror("flood: SIOCGIFHWADDR");
			return 2;
		}
		memcpy(o.own_mac, ifr.ifr_hwaddr.sa_data, 6);
	}
	start = now_s();
	while (sent < o.count) {
		unsigned n = 0;
		int r;

		if (o.rate) { /* wait until this burst is due */
			double due = start + (double)sent / (double)o.rate;
			double wait = due - now_s();

			if (wait > 0) {
				struct timespec ts = {
					(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)
				};
				nanosleep(&ts, NULL);
			}
		}
		while (n < BURST && sent + n < o.count &&
		       (!o.rate || n < (o.rate + 99) / 100)) { /* bursts of at most 10 ms */
			size_t len = build_frame(&o, frames[n], sent + n);

			if (!len) {
				fprintf(stderr, "flood: cannot build a frame\n");
				return 2;
			}
			iov[n] = (struct iovec){ frames[n], len };
			msgs[n] = (struct mmsghdr){ .msg_hdr = { .msg_name = &sll,
								 .msg_namelen = sizeof(sll),
								 .msg_iov = &iov[n],
								 .msg_iovlen = 1 } };
			n++;
		}
		r = sendmmsg(fd, msgs, n, 0);
		if (r < 0) {
			if (errno == ENOBUFS || errno == EAGAIN || errno == EINTR)
				continue; /* the device queue is full: the same burst again */
			perror("flood: sendmmsg");
			break;
		}
		sent += (unsigned long)r;
	}
	elapsed = now_s() - start;
	printf("sent %lu in %.2f s (%.0f pps)\n", sent, elapsed,
	       elapsed > 0 ? (double)sent / elapsed : 0.0);
	close(fd);
	return sent == o.count ? 0 : 1;
}
