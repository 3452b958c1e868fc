/*
 * ethp_echo: a tiny IPv4 host on one Ethernet port, using only the ethp_ ops (plus the
 * ethf_ parser and the linkwatch netlink follower): the integration suite
 * test/integration/eth_port.sh drives it against real kernels in namespaces.
 *
 * Every mode takes -b BACKEND (af_packet, the default, or af_xdp; the environment's
 * ETHP_BACKEND when -b is not given), and -G: buffers of ETHP_BUF_MAX, as the
 * gateway's, that hold a GSO or GRO frame (default: 2048-octet buffers).
 *
 *   ethp_echo [-v VLAN] [-i uring|mmsg] [-t SECONDS] DEV MYIP respond
 *       answer ARP requests for MYIP and ICMP echo requests to MYIP until SECONDS
 *       pass or SIGTERM; every echo request prints "echo len=FRAMELEN vlan=TCI",
 *       then a final "stats ..." line with the port's counters and what it saw.
 *   ethp_echo [-v VLAN] [-i uring|mmsg] [-t SECONDS] DEV MYIP ping PEERIP COUNT SIZE
 *       resolve PEERIP by ARP (prints "arp PEERIP is at MAC"), send COUNT ICMP echo
 *       requests with SIZE bytes of data, print "replies N" and the stats line.
 *   ethp_echo [-t SECONDS] DEV - link
 *       follow DEV through netlink, print "link up=0|1 mtu=N ms=T" on each change
 *       (T: milliseconds since start), and open a port on DEV whose set_link follows;
 *       after a "down" it tries one send and prints "tx_while_down accepted=N
 *       dropped=N sent=N"; runs until SECONDS pass or SIGTERM.
 *
 * Exit status 0 when the mode ran; 1 on setup errors.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "pkt/eth_frame.h"
#include "port/eth_port.h"
#include "kernel/linkwatch.h"
#include "lib/evloop.h"
#include "lib/log.h"

#define BURST 32

static volatile sig_atomic_t stop;
static const struct ethp_ops *ops;
static struct ethp_port *port;
static uint8_t my_mac[6];
static uint32_t my_ip; /* network order */
static unsigned seen_arp, seen_icmp, seen_other, seen_bad;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint16_t csum(const uint8_t *p, size_t n)
{
	uint32_t s = 0;
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void eth_hdr(struct ethp_tx *t, const uint8_t *dst, uint16_t type)
{
	memset(t, 0, sizeof(*t)); /* no GSO */
	memcpy(t->hdr, dst, 6);
	memcpy(t->hdr + 6, my_mac, 6);
	put16(t->hdr + 12, type);
	t->hdr_len = 14;
}

/* Send one frame; 1 if accepted. */
static int send1(struct ethp_tx *t)
{
	return ops->tx_burst(port, 0, t, 1);
}

static void print_stats(const char *extra)
{
	struct ethp_stats st;
	unsigned i;

	ops->stats(port, &st);
	printf("stats rx_packets=%llu rx_bytes=%llu tx_packets=%llu tx_bytes=%llu arp=%u icmp=%u "
	       "other=%u bad=%u",
	       (unsigned long long)st.rx_packets, (unsigned long long)st.rx_bytes,
	       (unsigned long long)st.tx_packets, (unsigned long long)st.tx_bytes, seen_arp,
	       seen_icmp, seen_other, seen_bad);
	for (i = 0; i < ETHP_DROP_MAX; i++)
		printf(" %s=%llu", ethp_drop_name(i), (unsigned long long)st.drops[i]);
	printf(" rx_csum_completed=%llu rx_gso=%llu%s\n", (unsigned long long)st.rx_csum_completed,
	       (unsigned long long)st.rx_gso, extra ? extra : "");
	fflush(stdout);
}

/* Wait up to ms for frames with the arm protocol; returns rx_burst's result. */
static int wait_rx(struct ethp_rx *rx, unsigned max, int ms)
{
	struct pollfd pfd = { .fd = ops->wait_fd(port, 0), .events = POLLIN };
	int n = ops->rx_burst(port, 0, rx, max);

	if (n != 0)
		return n;
	ops->arm(port, 0);
	n = ops->rx_burst(port, 0, rx, max);
	if (n != 0)
		return n;
	poll(&pfd, 1, ms);
	return ops->rx_burst(port, 0, rx, max);
}

/* Handle one frame in respond mode; replies are built in place in its buffer. */
static void respond_one(struct ethp_rx *rx)
{
	struct ethf_info fi;
	uint8_t *l3;
	struct ethp_tx t;
	size_t l3len;

	if (ethf_parse(rx->data, rx->len, &fi) != ETHF_OK) {
		seen_bad++;
		return;
	}
	l3 = rx->data + fi.l3_off;
	l3len = rx->len - fi.l3_off;
	if (fi.ethertype == ETHF_TYPE_ARP && l3len >= 28 && l3[7] == 1 &&
	    memcmp(l3 + 24, &my_ip, 4) == 0) {
		uint8_t sha[6], spa[4];

		seen_arp++;
		memcpy(sha, l3 + 8, 6);
		memcpy(spa, l3 + 14, 4);
		l3[7] = 2;
		memcpy(l3 + 8, my_mac, 6);
		memcpy(l3 + 14, &my_ip, 4);
		memcpy(l3 + 18, sha, 6);
		memcpy(l3 + 24, spa, 4);
		eth_hdr(&t, sha, ETHF_TYPE_ARP);
		t.data = l3;
		t.len = 28;
		send1(&t);
	} else if (fi.ethertype == ETHF_TYPE_IPV4 && l3len >= 28 && (l3[0] >> 4) == 4 &&
		   l3[9] == 1 && memcmp(l3 + 16, &my_ip, 4) == 0) {
		unsigned ihl = (l3[0] & 15u) * 4, tot = (unsigned)(l3[2] << 8 | l3[3]);
		uint8_t tmp[4], *icmp = l3 + ihl;

		if (ihl < 20 || tot > l3len || tot < ihl + 8 || icmp[0] != 8) {
			seen_other++;
			return;
		}
		seen_icmp++;
		printf("echo len=%u vlan=%u\n", rx->len, rx->vlan_tci & 0xfff);
		memcpy(tmp, l3 + 12, 4);
		memcpy(l3 + 12, l3 + 16, 4);
		memcpy(l3 + 16, tmp, 4);
		l3[8] = 64;
		put16(l3 + 10, 0);
		put16(l3 + 10, csum(l3, ihl));
		icmp[0] = 0;
		put16(icmp + 2, 0);
		put16(icmp + 2, csum(icmp, tot - ihl));
		eth_hdr(&t, rx->data + 6, ETHF_TYPE_IPV4);
		t.data = l3;
		t.len = tot;
		send1(&t);
	} else {
		seen_other++;
	}
}

static int mode_respond(int seconds)
{
	struct ethp_rx rx[BURST];
	uint64_t end = evloop_now_ms() + (uint64_t)seconds * 1000;
	int n, i;

	printf("ready\n");
	fflush(stdout);
	while (!stop && evloop_now_ms() < end) {
		n = wait_rx(rx, BURST, 100);
		if (n < 0) {
			fprintf(stderr, "rx_burst: %s\n", strerror(-n));
			return 1;
		}
		for (i = 0; i < n; i++)
			respond_one(&rx[i]);
		if (n > 0)
			ops->rx_done(port, rx, (unsigned)n);
		fflush(stdout);
	}
	print_stats(NULL);
	return 0;
}

static int mode_ping(uint32_t peer, unsigned count, unsigned size, int seconds)
{
	static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	struct ethp_rx rx[BURST];
	struct ethp_buf *b = ops->buf_get(port);
	uint8_t peer_mac[6], *p;
	struct ethp_tx t;
	uint64_t end = evloop_now_ms() + (uint64_t)seconds * 1000, next = 0;
	unsigned sent = 0, replies = 0, i;
	bool resolved = false;
	int n, k;

	if (!b || size > 1400)
		return 1;
	p = b->base;
	while (!stop && evloop_now_ms() < end && replies < count) {
		uint64_t now = evloop_now_ms();

		if (now >= next && (!resolved || sent < count)) {
			if (!resolved) { /* ARP who-has peer tell me */
				static const uint8_t arp_hdr[8] = { 0, 1, 8, 0, 6, 4, 0, 1 };

				memcpy(p, arp_hdr, 8);
				memcpy(p + 8, my_mac, 6);
				memcpy(p + 14, &my_ip, 4);
				memset(p + 18, 0, 6);
				memcpy(p + 24, &peer, 4);
				eth_hdr(&t, bcast, ETHF_TYPE_ARP);
				t.data = p;
				t.len = 28;
				send1(&t);
				next = now + 200;
			} else {
				unsigned tot = 20 + 8 + size;

				memset(p, 0, tot);
				p[0] = 0x45;
				put16(p + 2, (uint16_t)tot);
				put16(p + 4, (uint16_t)sent);
				p[8] = 64;
				p[9] = 1;
				memcpy(p + 12, &my_ip, 4);
				memcpy(p + 16, &peer, 4);
				put16(p + 10, csum(p, 20));
				p[20] = 8;
				put16(p + 24, 0x4242);
				put16(p + 26, (uint16_t)sent);
				for (i = 0; i < size; i++)
					p[28 + i] = (uint8_t)i;
				put16(p + 22, csum(p + 20, 8 + size));
				eth_hdr(&t, peer_mac, ETHF_TYPE_IPV4);
				t.data = p;
				t.len = tot;
				sent += (unsigned)send1(&t);
				next = now + 20;
			}
		}
		n = wait_rx(rx, BURST, 20);
		for (k = 0; k < n; k++) {
			struct ethf_info fi;
			uint8_t *l3;

			if (ethf_parse(rx[k].data, rx[k].len, &fi) != ETHF_OK) {
				seen_bad++;
			} else if (fi.ethertype == ETHF_TYPE_ARP) {
				l3 = rx[k].data + fi.l3_off;
				seen_arp++;
				if (!resolved && l3[7] == 2 && memcmp(l3 + 14, &peer, 4) == 0) {
					memcpy(peer_mac, l3 + 8, 6);
					resolved = true;
					next = 0;
					printf("arp %s is at %02x:%02x:%02x:%02x:%02x:%02x\n",
					       inet_ntoa(*(struct in_addr *)&peer), peer_mac[0],
					       peer_mac[1], peer_mac[2], peer_mac[3], peer_mac[4],
					       peer_mac[5]);
				}
			} else if (fi.ethertype == ETHF_TYPE_IPV4) {
				l3 = rx[k].data + fi.l3_off;
				if (l3[9] == 1 && l3[20] == 0 && memcmp(l3 + 12, &peer, 4) == 0 &&
				    rx[k].len == 14u + 28 + size) {
					seen_icmp++;
					replies++;
				} else {
					seen_other++;
				}
			} else {
				seen_other++;
			}
			ops->buf_put(port, rx[k].buf);
		}
	}
	ops->buf_put(port, b);
	printf("replies %u\n", replies);
	print_stats(NULL);
	return 0;
}

struct link_ctx {
	uint64_t t0;
	bool was_down;
	bool done;
};

static void on_link(const struct linkwatch_state *st, unsigned changes, void *arg)
{
	struct link_ctx *c = arg;
	static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

	if (!(changes & (LINKWATCH_CHG_UP | LINKWATCH_CHG_MTU | LINKWATCH_CHG_PRESENT)))
		return;
	ops->set_link(port, st->up);
	printf("link up=%d mtu=%u ms=%llu\n", st->up, st->mtu,
	       (unsigned long long)(evloop_now_ms() - c->t0));
	if (!st->up) {
		struct ethp_tx t;
		struct ethp_stats s;
		int n;

		eth_hdr(&t, bcast, 0x88b5); /* local experimental ethertype */
		t.data = NULL;
		t.len = 0;
		n = ops->tx_burst(port, 0, &t, 1);
		ops->stats(port, &s);
		printf("tx_while_down accepted=%d dropped=%llu sent=%llu\n", n,
		       (unsigned long long)s.drops[ETHP_DROP_TX_LINK_DOWN],
		       (unsigned long long)s.tx_packets);
		c->was_down = true;
	} else if (c->was_down) {
		c->done = true;
	}
	fflush(stdout);
}

static void on_tick(struct evloop *loop, struct evtimer *t, void *arg)
{
	struct link_ctx *c = arg;

	(void)t;
	(void)c;
	if (stop)
		evloop_stop(loop);
}

static void on_deadline(struct evloop *loop, struct evtimer *t, void *arg)
{
	(void)t;
	(void)arg;
	evloop_stop(loop);
}

static int mode_link(const char *dev, int seconds)
{
	struct evloop *loop;
	struct linkwatch *w;
	struct linkwatch_state st;
	struct link_ctx c = { .t0 = evloop_now_ms() };
	struct evtimer *tick, *deadline;
	int r;

	if (evloop_new(&loop) < 0 || linkwatch_new(loop, on_link, &c, &w) < 0)
		return 1;
	r = linkwatch_add(w, dev, &st);
	if (r < 0) {
		fprintf(stderr, "linkwatch_add: %s\n", strerror(-r));
		return 1;
	}
	ops->set_link(port, st.up);
	printf("ready up=%d mtu=%u\n", st.up, st.mtu);
	fflush(stdout);
	tick = evtimer_new(loop, on_tick, &c);
	deadline = evtimer_new(loop, on_deadline, &c);
	evtimer_start(tick, 20, 20);
	evtimer_start(deadline, (uint64_t)seconds * 1000, 0);
	evloop_run(loop);
	evtimer_free(tick);
	evtimer_free(deadline);
	linkwatch_free(w);
	evloop_free(loop);
	print_stats(NULL);
	return 0;
}

static void usage(void)
{
	fprintf(
	    stderr,
	    "usage: ethp_echo [-b BACKEND] [-v VLAN] [-i uring|mmsg] [-t SECONDS] [-G] DEV MYIP "
	    "respond | ping PEERIP COUNT SIZE | link\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct ethp_port_config cfg = { .backend = "af_packet", .n_bufs = 256, .buf_size = 2048 };
	struct ethp_port_attr attr;
	int opt, seconds = 10, r, rc = 1;
	const char *mode;
	struct in_addr a;

	log_init("ethp_echo", LOG_TARGET_STDERR, LOG_INFO);
	if (getenv("ETHP_BACKEND") && *getenv("ETHP_BACKEND"))
		cfg.backend = getenv("ETHP_BACKEND");
	while ((opt = getopt(argc, argv, "b:v:i:t:G")) != -1) {
		switch (opt) {
		case 'b':
			cfg.backend = optarg;
			break;
		case 'v':
			cfg.vlan = (uint16_t)atoi(optarg);
			break;
		case 'i':
			cfg.io = strcmp(optarg, "mmsg") == 0 ? ETHP_IO_MMSG : ETHP_IO_URING;
			break;
		case 't':
			seconds = atoi(optarg);
			break;
		case 'G': /* buffers that hold a GSO (or GRO) frame, as the gateway's */
			cfg.buf_size = ETHP_BUF_MAX;
			cfg.n_bufs = 64;
			break;
		default:
			usage();
		}
	}
	if (argc - optind < 3)
		usage();
	cfg.device = argv[optind];
	mode = argv[optind + 2];
	if (strcmp(argv[optind + 1], "-") != 0) {
		if (inet_aton(argv[optind + 1], &a) == 0)
			usage();
		my_ip = a.s_addr;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	ops = ethp_backend(cfg.backend);
	if (!ops)
		usage();
	r = ops->open(&cfg, &port);
	if (r < 0) {
		fprintf(stderr, "open %s: %s\n", cfg.device, strerror(-r));
		return 1;
	}
	r = ops->query(port, &attr);
	if (r < 0) {
		fprintf(stderr, "query: %s\n", strerror(-r));
		goto out;
	}
	memcpy(my_mac, attr.mac, 6);
	fprintf(stderr, "ethp_echo: %s ifindex %d mtu %u link %s io %s vlan %u\n", cfg.device,
		attr.ifindex, attr.mtu, attr.link_up ? "up" : "down", attr.io, attr.vlan);
	if (strcmp(mode, "respond") == 0) {
		rc = mode_respond(seconds);
	} else if (strcmp(mode, "ping") == 0 && argc - optind == 6) {
		if (inet_aton(argv[optind + 3], &a) == 0)
			usage();
		rc = mode_ping(a.s_addr, (unsigned)atoi(argv[optind + 4]),
			       (unsigned)atoi(argv[optind + 5]), seconds);
	} else if (strcmp(mode, "link") == 0) {
		rc = mode_link(cfg.device, seconds);
	} else {
		usage();
	}
out:
	ops->close(port);
	return rc;
}
