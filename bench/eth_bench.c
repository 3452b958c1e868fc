/*
 * eth_bench: frames per second through one af_packet Ethernet port (port/eth_port.h) on
 * a veth pair, for its two engines (io_uring, recvmmsg/sendmmsg) next to a plain
 * recvmsg/send loop on an AF_PACKET socket with the same options, all in the same run.
 *
 * The process moves into a private network namespace of its own (unshare), creates
 * the veth pair ebA/ebB there (nothing outside is touched; it vanishes on exit) and
 * pins one thread per CPU:
 *   rx  a blaster (sendmmsg batches, CPU 0) floods ebA; the engine under test
 *       receives on ebB (CPU 1), busy polling; frames received per second.
 *   tx  the engine under test sends on ebA as fast as the kernel accepts, 32 frames
 *       per burst (the plain loop: one send per frame); frames accepted per second.
 * Frames of 60 and 1514 bytes (64 and 1518 on a wire, with the FCS). Each case runs
 * REPS times interleaved; the medians are printed, with each engine's ratio to the
 * plain loop. Needs root (unshare, veth). Never pass/fail.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "port/eth_port.h"
#include "lib/evloop.h"
#include "lib/log.h"

#define REPS      5
#define RUN_MS    400
#define BURST     32
#define ETHERTYPE 0x88b5

enum engine {
	ENG_URING,
	ENG_MMSG,
	ENG_PLAIN,
	ENG_N
};

static uint8_t mac_a[6], mac_b[6];
static atomic_bool blasting;

static void die(const char *what)
{
	fprintf(stderr, "eth_bench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu % (int)sysconf(_SC_NPROCESSORS_ONLN), &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

/* The MAC through an ioctl: /sys still shows the namespace it was mounted in. */
static void read_mac(const char *dev, uint8_t *mac)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
	if (fd < 0 || ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
		die(dev);
	memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
	close(fd);
}

/* A raw socket with the port's options: the plain peer and the blaster. */
static int raw_socket(const char *dev)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL) };
	int fd = socket(AF_PACKET, SOCK_RAW, 0), one = 1;

	if (fd < 0)
		die("socket");
	sll.sll_ifindex = (int)if_nametoindex(dev);
	setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof(one));
	setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0)
		die("bind");
	return fd;
}

static void build_frame(uint8_t *f, unsigned len, const uint8_t *dst, const uint8_t *src)
{
	memset(f, 0x5a, len);
	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	f[12] = ETHERTYPE >> 8;
	f[13] = ETHERTYPE & 0xff;
}

/* ---- the blaster (rx cases) ---- */

struct blast_arg {
	unsigned len;
};

static void *blaster(void *argp)
{
	struct blast_arg *a = argp;
	static uint8_t frame[1514];
	struct mmsghdr m[64];
	struct iovec iov = { frame, 0 };
	int fd = raw_socket("ebA");

	pin(0);
	build_frame(frame, a->len, mac_b, mac_a);
	iov.iov_len = a->len;
	memset(m, 0, sizeof(m));
	for (int i = 0; i < 64; i++) {
		m[i].msg_hdr.msg_iov = &iov;
		m[i].msg_hdr.msg_iovlen = 1;
	}
	while (atomic_load(&blasting))
		sendmmsg(fd, m, 64, MSG_DONTWAIT);
	close(fd);
	return NULL;
}

/* ---- engines ---- */

static struct ethp_port *open_port(const char *dev, enum engine e)
{
	struct ethp_port_config cfg = { .device = dev,
					.n_bufs = 2048,
					.buf_size = 2048,
					.rx_depth = 1024,
					.io = e == ENG_URING ? ETHP_IO_URING : ETHP_IO_MMSG };
	struct ethp_port *p;
	int r = ethp_afpacket_ops.open(&cfg, &p);

	if (r < 0) {
		errno = -r;
		die("open port");
	}
	return p;
}

/* Receive for RUN_MS on ebB; returns frames per second. */
static double run_rx(enum engine e, unsigned len)
{
	const struct ethp_ops *o = &ethp_afpacket_ops;
	struct ethp_port *p = NULL;
	struct ethp_rx rx[BURST];
	struct blast_arg ba = { len };
	pthread_t t;
	uint64_t n = 0, t0, t1, now;
	int fd = -1;
	uint8_t buf[2048], ctl[64];
	struct sockaddr_ll sll;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = {
		.msg_name = &sll, .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl
	};

	pin(1);
	if (e == ENG_PLAIN)
		fd = raw_socket("ebB");
	else
		p = open_port("ebB", e);
	atomic_store(&blasting, true);
	pthread_create(&t, NULL, blaster, &ba);
	/* Warm up 50 ms, then count for RUN_MS. */
	t0 = evloop_now_ns() + 50000000ull;
	t1 = t0 + RUN_MS * 1000000ull;
	for (;;) {
		int k;

		now = evloop_now_ns();
		if (now >= t1)
			break;
		if (e == ENG_PLAIN) {
			mh.msg_namelen = sizeof(sll);
			mh.msg_controllen = sizeof(ctl);
			k = recvmsg(fd, &mh, MSG_DONTWAIT) > 0;
		} else {
			k = o->rx_burst(p, 0, rx, BURST);
			if (k > 0)
				o->rx_done(p, rx, (unsigned)k);
		}
		if (k > 0 && now >= t0)
			n += (uint64_t)k;
	}
	atomic_store(&blasting, false);
	pthread_join(t, NULL);
	if (p)
		o->close(p);
	if (fd >= 0)
		close(fd);
	return (double)n * 1000.0 / RUN_MS;
}

/* Send for RUN_MS on ebA; returns frames accepted per second. */
static double run_tx(enum engine e, unsigned len)
{
	const struct ethp_ops *o = &ethp_afpacket_ops;
	static uint8_t frame[1514];
	struct ethp_tx tx[BURST] = { 0 };
	struct ethp_port *p = NULL;
	uint64_t n = 0, t0, t1, now;
	int fd = -1;

	pin(0);
	build_frame(frame, len, mac_b, mac_a);
	for (int i = 0; i < BURST; i++) {
		memcpy(tx[i].hdr, frame, 14);
		tx[i].hdr_len = 14;
		tx[i].data = frame + 14;
		tx[i].len = len - 14;
	}
	if (e == ENG_PLAIN)
		fd = raw_socket("ebA");
	else
		p = open_port("ebA", e);
	t0 = evloop_now_ns() + 50000000ull;
	t1 = t0 + RUN_MS * 1000000ull;
	for (;;) {
		int k;

		now = evloop_now_ns();
		if (now >= t1)
			break;
		if (e == ENG_PLAIN)
			k = send(fd, frame, len, MSG_DONTWAIT) > 0;
		else
			k = o->tx_burst(p, 0, tx, BURST);
		if (k > 0 && now >= t0)
			n += (uint64_t)k;
	}
	if (p)
		o->close(p);
	if (fd >= 0)
		close(fd);
	return (double)n * 1000.0 / RUN_MS;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void setup_netns(void)
{
	FILE *f;

	if (unshare(CLONE_NEWNET) < 0)
		die("unshare(CLONE_NEWNET) (run as root)");
	if (system("ip link set lo up && ip link add ebA type veth peer name ebB && "
		   "ip link set ebA up && ip link set ebB up") != 0) {
		errno = EIO;
		die("creating the veth pair");
	}
	f = fopen("/proc/sys/net/ipv6/conf/all/disable_ipv6", "w");
	if (f) {
		fputs("1", f);
		fclose(f);
	}
	read_mac("ebA", mac_a);
	read_mac("ebB", mac_b);
	usleep(200000);
}

int main(void)
{
	static const unsigned lens[2] = { 60, 1514 };
	double res[2][2][ENG_N][REPS]; /* dir, len, engine, rep */
	double med[2][2][ENG_N];

	log_init("eth_bench", LOG_TARGET_STDERR, LOG_WARNING);
	setup_netns();
	for (int rep = 0; rep < REPS; rep++)
		for (int l = 0; l < 2; l++)
			for (int e = 0; e < ENG_N; e++) {
				res[0][l][e][rep] = run_rx(e, lens[l]);
				res[1][l][e][rep] = run_tx(e, lens[l]);
			}
	printf("eth_bench: one af_packet port on veth, %d runs of %d ms each, medians\n", REPS,
	       RUN_MS);
	printf("%-4s %-6s %14s %14s %14s %12s %12s\n", "dir", "frame", "io_uring f/s", "mmsg f/s",
	       "plain f/s", "uring/plain", "mmsg/plain");
	for (int d = 0; d < 2; d++)
		for (int l = 0; l < 2; l++) {
			for (int e = 0; e < ENG_N; e++) {
				qsort(res[d][l][e], REPS, sizeof(double), cmp_d);
				med[d][l][e] = res[d][l][e][REPS / 2];
			}
			printf("%-4s %-6u %14.0f %14.0f %14.0f %11.2fx %11.2fx\n", d ? "tx" : "rx",
			       lens[l] + 4, med[d][l][ENG_URING], med[d][l][ENG_MMSG],
			       med[d][l][ENG_PLAIN], med[d][l][ENG_URING] / med[d][l][ENG_PLAIN],
			       med[d][l][ENG_MMSG] / med[d][l][ENG_PLAIN]);
		}
	return 0;
}
