/*
 * fabric_bench: how many UD packets per second a running ibgw-fabric switches between
 * two ports. It attaches two made-up ports (LIDs 0x100 and 0x101, no ibsim needed),
 * sends --count datagrams of --size octets from one to the other as fast as the
 * sender's socket takes them, and counts what arrives on a second thread (until all
 * did, or a second passes without any: the time is up to the last arrival). Prints one
 * line: packets sent and received, seconds, packets and megabits per second. A figure,
 * not a pass/fail test.
 *
 *   fabric_bench --socket PATH [--count N] [--size BYTES]
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/ib_simfab.h"

struct rx {
	struct simfab_client *c;
	unsigned long want, got;
	double last; /* when the last packet arrived */
	volatile int done;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *rx_run(void *arg)
{
	struct rx *r = arg;
	struct simfab_event ev;

	while (r->got < r->want) {
		int rc = simfab_client_recv(r->c, &ev, 1000);

		if (rc == -EAGAIN)
			break; /* a second without traffic: the rest were dropped */
		if (rc < 0)
			break;
		if (ev.type == SIMFAB_PACKET) {
			r->got++;
			r->last = now_s();
		}
	}
	r->done = 1;
	return NULL;
}

static struct simfab_client *attach(const char *path, const char *name, uint16_t lid,
				    struct simfab_port_info *pi, uint32_t *qpn)
{
	struct simfab_client *c;
	int rc;

	memset(pi, 0, sizeof(*pi));
	snprintf(pi->name, sizeof(pi->name), "%s", name);
	pi->port_num = 1;
	pi->mtu = SIMFAB_MTU_4096;
	pi->lid = lid;
	pi->sm_lid = 1;
	pi->port_guid = 0x0002c903bbbb0000ull + lid;
	pi->gid_prefix = 0xfe80000000000000ull;
	pi->n_pkeys = 1;
	pi->pkeys[0] = 0xffff;
	if ((rc = simfab_client_connect(path, &c)) < 0 || (rc = simfab_client_hello(c, pi)) < 0 ||
	    (rc = simfab_client_qp_create(c, SIMFAB_QP_UD, 0x0b1b, qpn)) < 0) {
		fprintf(stderr, "fabric_bench: attach %s: %s\n", name, strerror(-rc));
		exit(1);
	}
	return c;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "count", required_argument, NULL, 'c' },
		{ "size", required_argument, NULL, 'z' },
		{ NULL, 0, NULL, 0 },
	};
	static uint8_t payload[4096], pkt[IB_PACKET_MAX_LEN];
	const char *path = NULL;
	unsigned long count = 200000, sent = 0;
	size_t size = 1024;
	struct simfab_port_info pa, pb;
	struct simfab_ud_dest d = { .dlid = 0x101, .qkey = 0x0b1b, .pkey = 0xffff };
	struct rx r = { 0 };
	pthread_t th;
	uint32_t qa, qb;
	double t0, t1;
	int o, n;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == 's')
			path = optarg;
		else if (o == 'c')
			count = strtoul(optarg, NULL, 0);
		else if (o == 'z')
			size = strtoul(optarg, NULL, 0);
		else
			return 2;
	}
	if (!path || size > sizeof(payload) || count == 0) {
		fprintf(stderr, "usage: fabric_bench --socket PATH [--count N] [--size 1..4096]\n");
		return 2;
	}
	struct simfab_client *ca = attach(path, "bench-a", 0x100, &pa, &qa);
	r.c = attach(path, "bench-b", 0x101, &pb, &qb);
	r.want = count;
	d.dqpn = qb;
	pthread_create(&th, NULL, rx_run, &r);
	t0 = now_s();
	for (unsigned long i = 0; i < count && !r.done; i++) {
		n = simfab_build_ud(&pa, qa, (uint32_t)i, &d, payload, size, pkt, sizeof(pkt));
		while (simfab_client_send(ca, qa, pkt, (size_t)n) == -EAGAIN)
			usleep(20);
		sent++;
	}
	pthread_join(th, NULL);
	t1 = r.got ? r.last : now_s();
	printf("sent %lu received %lu size %zu in %.3f s: %.0f packets/s, %.0f Mbit/s\n", sent,
	       r.got, size, t1 - t0, (double)r.got / (t1 - t0),
	       (double)r.got * (double)size * 8 / (t1 - t0) / 1e6);
	simfab_client_close(ca);
	simfab_client_close(r.c);
	return 0;
}
