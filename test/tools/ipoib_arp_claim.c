/*
 * ipoib_arp_claim: send IPoIB ARP requests (RFC 4391: hardware type 32, 20-octet
 * hardware addresses) from a simulated port, with a sender hardware address of our
 * choosing -- e.g. one whose GID is on another IB subnet, standing for a host behind an
 * IB router (test/integration/gid_failover.sh: the gateway learns it as a neighbour,
 * as Linux does from a request for one of its addresses, and reaches it through the
 * GID route). Run inside a rack node with the fabric up, under the verbs shim (the
 * verbs backend: LD_PRELOAD libibverbs2sim after libumad2sim).
 *
 *   ipoib_arp_claim [--node NAME] [--qkey Q] [--dgid GID] DLID DQPN SPA SHA TPA...
 *
 * DLID/DQPN: where the requests go (the gateway's LID and UD QPN, or 0xc000 0xffffff
 * with --dgid for the broadcast group); SPA: sender IPv4; SHA: the 20-octet sender
 * hardware address (flags:qpn:gid as 20 colon-separated hex octets); one request per
 * TPA (target IPv4). Prints `sent N`.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "port/ib_port.h"
#include "lib/ib_gid.h"

static int die(const char *what, int err)
{
	fprintf(stderr, "ipoib_arp_claim: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

static int parse_hw(const char *s, uint8_t out[20])
{
	for (unsigned i = 0; i < 20; i++) {
		char *end;
		unsigned long v = strtoul(s, &end, 16);

		if (end == s || v > 0xff || (i < 19 && *end != ':') || (i == 19 && *end))
			return -1;
		out[i] = (uint8_t)v;
		s = end + 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "node", 1, NULL, 'n' },
					    { "qkey", 1, NULL, 'q' },
					    { "dgid", 1, NULL, 'g' },
					    { NULL, 0, NULL, 0 } };
	const char *node = getenv("IBGW_NODE"), *dgid = NULL;
	uint32_t qkey = 0x0b1b;
	int c;

	if (!node)
		node = getenv("SIM_HOST");
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			node = optarg;
			break;
		case 'q':
			qkey = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'g':
			dgid = optarg;
			break;
		default:
			return 2;
		}
	}
	if (argc - optind < 5 || !node) {
		fprintf(stderr,
			"usage: ipoib_arp_claim [--node N] [--qkey Q] [--dgid GID] DLID DQPN SPA "
			"SHA TPA...\n");
		return 2;
	}
	uint16_t dlid = (uint16_t)strtoul(argv[optind], NULL, 0);
	uint32_t dqpn = (uint32_t)strtoul(argv[optind + 1], NULL, 0);
	struct in_addr spa, tpa;
	uint8_t sha[20];

	if (inet_pton(AF_INET, argv[optind + 2], &spa) != 1)
		die("SPA", EINVAL);
	if (parse_hw(argv[optind + 3], sha) < 0)
		die("SHA (20 hex octets with colons)", EINVAL);

	const struct ibp_ops *ops = ibp_backend("verbs");
	struct ibp_port_config cfg = {
		.backend = "verbs", .device = node, .port = 1, .buf_size = 4096 + 64, .n_bufs = 64
	};
	struct ibp_port *port;
	struct ibp_qp_init init = {
		.type = IBP_QPT_UD, .qkey = qkey, .send_depth = 16, .recv_depth = 1
	};
	struct ibp_qp *qp;
	struct ibp_ah_attr aa = { .dlid = dlid, .hop_limit = 1 };
	struct ibp_ah *ah;
	int ret;
	unsigned sent = 0;

	if (!ops)
		die("verbs", ENOTSUP);
	ret = ops->open(&cfg, &port);
	if (ret < 0)
		die("open", ret);
	ret = ops->create_qp(port, &init, &qp);
	if (ret < 0 || (ret = ops->qp_ready(qp, NULL)) < 0)
		die("UD QP", ret);
	if (dgid) {
		if (ib_gid_parse(dgid, &aa.dgid) < 0)
			die("--dgid", EINVAL);
		aa.is_global = true;
	}
	ret = ops->create_ah(port, &aa, &ah);
	if (ret < 0)
		die("create_ah", ret);
	for (int i = optind + 4; i < argc; i++) {
		struct ibp_buf *b = ops->buf_get(port);
		struct ibp_send s;
		uint8_t *p;

		if (inet_pton(AF_INET, argv[i], &tpa) != 1)
			die("TPA", EINVAL);
		if (!b)
			die("buf_get", ENOMEM);
		p = b->data;
		memset(p, 0, 4 + 28 + 2 * 20);
		p[0] = 0x08; /* IPoIB header: ethertype ARP, reserved */
		p[1] = 0x06;
		p += 4;
		p[1] = 32; /* hardware type: InfiniBand (RFC 4391) */
		p[2] = 0x08;
		p[3] = 0x00;
		p[4] = 20;
		p[5] = 4;
		p[7] = 1; /* request */
		memcpy(p + 8, sha, 20);
		memcpy(p + 28, &spa, 4);
		memcpy(p + 52, &tpa, 4); /* THA (20) left zero */
		b->len = 4 + 8 + 2 * (20 + 4);
		s = (struct ibp_send){
			.qp = qp, .ah = ah, .remote_qpn = dqpn, .remote_qkey = qkey, .buf = b
		};
		if (ops->post_send(0, &s, 1) != 1) {
			ops->buf_put(port, b);
			die("post_send", EIO);
		}
		sent++;
	}
	/* Collect the send completions (the buffers go back to the pool). */
	for (unsigned done = 0, tries = 0; done < sent && tries < 200; tries++) {
		struct ibp_wc wc[16];
		int n = ops->poll(port, 0, wc, 16);

		for (int k = 0; k < n; k++) {
			ops->buf_put(port, wc[k].buf);
			done++;
		}
		if (n <= 0)
			usleep(5000);
	}
	printf("sent %u\n", sent);
	ops->destroy_ah(ah);
	ops->destroy_qp(qp);
	ops->close(port);
	return 0;
}
