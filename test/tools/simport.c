/*
 * simport: a simulated HCA port on the command line, for tests and for trying the
 * fabric by hand. Run inside a rack node (`sim/rack exec ibhost1 -- simport ...`), it
 * reads the node's port through libibumad (under umad2sim: the port OpenSM configured
 * in ibsim) and its active MTU with a PortInfo SMP, attaches to ibgw-fabric with that
 * identity, creates one UD QP, and then sends or receives datagrams:
 *
 *   simport [OPTIONS] info                   print the port identity (one line)
 *   simport [OPTIONS] send DLID DQPN         send --count datagrams
 *   simport [OPTIONS] recv                   print one line per packet received
 *
 * Options (before the command):
 *   --socket PATH     the fabric's port socket ($IBGW_FABRIC_SOCKET, else
 *                     $IBGW_RACK_STATE/fabric.sock)
 *   --name NODE       node name sent in HELLO ($IBGW_NODE, else $SIM_HOST)
 *   --qkey Q          the QP's Q_Key (default 0x0b1b) and, for send, the DETH Q_Key
 *   --pkey P          the QP's P_Key (must be in the port's table; default: entry 0)
 *   --mtu BYTES       override the active MTU read by SMP
 *   --attach MGID/MLID  attach the QP to a multicast group (repeatable)
 *   --count N         send N datagrams / exit after N received (default 1 / unlimited)
 *   --timeout SEC     recv: exit after SEC seconds (default 10)
 *   --size BYTES      payload size (default: the --payload text, else 64)
 *   --payload TEXT    payload (repeated to --size)
 *   --send-qkey Q     DETH Q_Key to send (default: --qkey)
 *   --send-pkey P     BTH P_Key to send (default: the QP's)
 *   --dgid GID        add a GRH with this DGID (unicast off-path or multicast)
 *   --gsi             send from QP1 (a GMP) with Q_Key 0x80010000
 *   --bad KIND        damage what is sent: icrc, vcrc, length, slid, sgid
 *   --interval MS     pause between sends
 * For multicast: `send 0xc000 0xffffff --dgid ff12:401b:ffff::ffff:ffff`.
 *
 * Output: `port NAME lid L lmc M sm_lid S guid 0x.. gid G mtu B pkeys 0x..,0x..` for
 * info; recv prints `ready qpn 0xN lid L` once attached, then per packet
 * `pkt qpn=0xN slid=L dlid=L sqpn=0xN pkey=0xP qkey=0xQ len=N [dgid=G] data=HEX16`
 * and `state down|active` on PORT_STATE; send prints `sent N qpn 0xN`.
 * Exit status: 0 (recv: at least one packet, or --count reached), 1 error, 3 recv
 * timed out with nothing received.
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/umad.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/ib_bytes.h"
#include "lib/ib_gid.h"
#include "lib/ib_packet.h"
#include "lib/ib_simfab.h"
#include "lib/ib_types.h"

#define ATTACH_MAX 8

struct opts {
	const char *socket, *name, *payload, *bad;
	uint32_t qkey, send_qkey;
	int pkey, send_pkey;
	unsigned mtu, count, size, interval_ms;
	int timeout;
	bool gsi, have_dgid;
	union ib_gid dgid;
	unsigned n_attach;
	union ib_gid mgid[ATTACH_MAX];
	uint16_t mlid[ATTACH_MAX];
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "simport: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(1);
}

static unsigned long num(const char *s, unsigned long max, const char *what)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || *end || end == s || v > max || *s == '-')
		die("bad %s", what);
	return v;
}

/* PortInfo (attribute 0x0015) by a LID-routed SMP to our own LID: NeighborMTU is the
 * high nibble of octet 36 of the attribute, which starts at octet 64 of the SMP. */
static int read_mtu(const char *ca, int portnum, unsigned lid, unsigned *mtu_code)
{
	uint8_t *mad;
	void *umad;
	int fd, agent, len = 256, rc = -1;

	fd = umad_open_port(ca, portnum);
	if (fd < 0)
		return -1;
	agent = umad_register(fd, 0x01 /* SM LID-routed */, 1, 0, NULL);
	umad = umad_alloc(1, umad_size() + 256);
	if (agent < 0 || !umad)
		goto out;
	memset(umad, 0, umad_size() + 256);
	mad = umad_get_mad(umad);
	mad[0] = 1;    /* BaseVersion */
	mad[1] = 0x01; /* MgmtClass: SM, LID routed */
	mad[2] = 1;    /* ClassVersion */
	mad[3] = 0x01; /* Get */
	ib_put_be64(mad + 8, 0x5349ull << 32 | (unsigned)getpid());
	ib_put_be16(mad + 16, 0x0015); /* PortInfo */
	ib_put_be32(mad + 20, (uint32_t)portnum);
	umad_set_addr(umad, (int)lid, 0, 0, 0);
	if (umad_send(fd, agent, umad, 256, 1000, 2) < 0)
		goto out;
	if (umad_recv(fd, umad, &len, 3000) < 0 || umad_status(umad) != 0)
		goto out;
	if (ib_get_be16(mad + 4) != 0)
		goto out;
	*mtu_code = mad[64 + 36] >> 4;
	rc = 0;
out:
	free(umad);
	umad_close_port(fd);
	return rc;
}

static void read_port(const struct opts *o, struct simfab_port_info *pi)
{
	umad_port_t port;
	unsigned mtu = 0;

	memset(pi, 0, sizeof(*pi));
	if (umad_init() < 0)
		die("umad_init failed%s", "");
	if (umad_get_port(NULL, 0, &port) < 0)
		die("no active IB port (umad_get_port)%s", "");
	snprintf(pi->name, sizeof(pi->name), "%s", o->name);
	pi->port_num = (uint8_t)port.portnum;
	pi->lid = (uint16_t)port.base_lid;
	pi->lmc = (uint8_t)port.lmc;
	pi->sm_lid = (uint16_t)port.sm_lid;
	pi->gid_prefix = be64toh(port.gid_prefix);
	pi->port_guid = be64toh(port.port_guid);
	pi->n_pkeys =
	    (uint16_t)(port.pkeys_size < SIMFAB_PKEYS_MAX ? port.pkeys_size : SIMFAB_PKEYS_MAX);
	for (unsigned i = 0; i < pi->n_pkeys; i++)
		pi->pkeys[i] = port.pkeys[i];
	if (o->mtu)
		pi->mtu = (uint8_t)ib_mtu_code(o->mtu);
	else if (read_mtu(port.ca_name, port.portnum, port.base_lid, &mtu) == 0)
		pi->mtu = (uint8_t)mtu;
	else
		die("PortInfo SMP failed; give --mtu%s", "");
	umad_release_port(&port);
	umad_done();
}

static int pkey_index(const struct simfab_port_info *pi, int pkey)
{
	if (pkey < 0)
		return 0;
	for (unsigned i = 0; i < pi->n_pkeys; i++)
		if (pi->pkeys[i] == pkey)
			return (int)i;
	die("P_Key not in the port's table%s", "");
	return -1;
}

static void print_info(const struct simfab_port_info *pi)
{
	char gid[IB_GID_STRLEN];
	union ib_gid g;

	ib_gid_set(&g, pi->gid_prefix, pi->port_guid);
	ib_gid_format(&g, gid, sizeof(gid));
	printf("port %s lid %u lmc %u sm_lid %u guid 0x%016llx gid %s mtu %u pkeys", pi->name,
	       pi->lid, pi->lmc, pi->sm_lid, (unsigned long long)pi->port_guid, gid,
	       simfab_mtu_bytes(pi->mtu));
	for (unsigned i = 0, n = 0; i < pi->n_pkeys; i++)
		if (pi->pkeys[i])
			printf("%s0x%04x", n++ ? "," : " ", pi->pkeys[i]);
	printf("\n");
}

static void damage(const char *bad, uint8_t *pkt, int *len)
{
	if (!strcmp(bad, "icrc")) {
		pkt[*len - 6] ^= 0x01; /* the ICRC's first octet; VCRC resealed */
		ib_packet_reseal_vcrc(pkt, (size_t)*len);
	} else if (!strcmp(bad, "vcrc")) {
		pkt[*len - 1] ^= 0x01;
	} else if (!strcmp(bad, "length")) {
		pkt[5] ^= 0x01; /* PktLen off by one word, VCRC resealed */
		ib_packet_reseal_vcrc(pkt, (size_t)*len);
	} else if (strcmp(bad, "slid") && strcmp(bad, "sgid")) {
		die("--bad is icrc, vcrc, length, slid or sgid, not %s", bad);
	}
}

static int do_send(struct simfab_client *c, const struct opts *o, struct simfab_port_info *pi,
		   uint32_t qpn, uint16_t qp_pkey, uint16_t dlid, uint32_t dqpn)
{
	static uint8_t payload[4096], pkt[IB_PACKET_MAX_LEN];
	struct simfab_port_info me = *pi;
	struct simfab_ud_dest d = { .dlid = dlid, .dqpn = dqpn };
	size_t plen = o->size ? o->size : o->payload ? strlen(o->payload) : 64;
	uint32_t src = o->gsi ? IB_QP1 : qpn;
	int n, rc;

	if (plen > sizeof(payload))
		die("--size above 4096%s", "");
	for (size_t i = 0; i < plen; i++)
		payload[i] = o->payload && *o->payload ? (uint8_t)o->payload[i % strlen(o->payload)]
						       : (uint8_t)i;
	d.qkey = o->gsi ? IB_QP1_QKEY : o->send_qkey;
	d.pkey = o->send_pkey >= 0 ? (uint16_t)o->send_pkey : qp_pkey;
	d.dgid = o->have_dgid ? &o->dgid : NULL;
	d.hop_limit = ib_gid_is_multicast(&o->dgid) ? 1 : 0xff;
	if (o->bad && !strcmp(o->bad, "slid"))
		me.lid = (uint16_t)(pi->lid + (1u << pi->lmc)); /* the next port's LID */
	if (o->bad && !strcmp(o->bad, "sgid"))
		me.port_guid ^= 0x100;
	for (unsigned k = 0; k < o->count && !stop; k++) {
		n = simfab_build_ud(&me, src, k, &d, payload, plen, pkt, sizeof(pkt));
		if (n < 0)
			die("cannot build the packet: %s", strerror(-n));
		if (o->bad)
			damage(o->bad, pkt, &n);
		while ((rc = simfab_client_send(c, src, pkt, (size_t)n)) == -EAGAIN)
			usleep(200);
		if (rc < 0)
			die("send: %s", strerror(-rc));
		if (o->interval_ms)
			usleep(o->interval_ms * 1000u);
	}
	printf("sent %u qpn 0x%x\n", o->count, src);
	return 0;
}

static int do_recv(struct simfab_client *c, const struct opts *o, uint32_t qpn,
		   const struct simfab_port_info *pi)
{
	struct timespec t0, t1;
	unsigned got = 0;

	printf("ready qpn 0x%x lid %u\n", qpn, pi->lid);
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!stop && (o->count == 0 || got < o->count)) {
		struct simfab_event ev;
		struct ib_packet p;
		long left;
		int rc;

		clock_gettime(CLOCK_MONOTONIC, &t1);
		left = (long)o->timeout * 1000 -
		       ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			break;
		rc = simfab_client_recv(c, &ev, left > 200 ? 200 : (int)left);
		if (rc == -EAGAIN)
			continue;
		if (rc < 0) {
			fprintf(stderr, "simport: recv: %s %s\n", strerror(-rc),
				simfab_client_errmsg(c));
			return 1;
		}
		if (ev.type == SIMFAB_PORT_STATE) {
			printf("state %s\n", ev.port_state == SIMFAB_PORT_DOWN ? "down" : "active");
			fflush(stdout);
			continue;
		}
		if (ib_packet_parse(ev.data, ev.len, &p) != IB_PKT_OK) {
			printf("pkt qpn=0x%x unparsable len=%zu\n", ev.qpn, ev.len);
			continue;
		}
		printf("pkt qpn=0x%x slid=%u dlid=%u sqpn=0x%x pkey=0x%04x qkey=0x%08x len=%zu",
		       ev.qpn, p.lrh.slid, p.lrh.dlid, p.deth.src_qp, p.bth.pkey, p.deth.qkey,
		       p.payload_len);
		if (p.has_grh) {
			char g[IB_GID_STRLEN];

			ib_gid_format(&p.grh.dgid, g, sizeof(g));
			printf(" dgid=%s", g);
		}
		printf(" data=");
		for (size_t i = 0; i < p.payload_len && i < 16; i++)
			printf("%02x", p.payload[i]);
		printf("\n");
		fflush(stdout);
		got++;
	}
	return got ? 0 : 3;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "name", required_argument, NULL, 'n' },
		{ "qkey", required_argument, NULL, 'q' },
		{ "pkey", required_argument, NULL, 'p' },
		{ "mtu", required_argument, NULL, 'm' },
		{ "attach", required_argument, NULL, 'a' },
		{ "count", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ "size", required_argument, NULL, 'z' },
		{ "payload", required_argument, NULL, 'P' },
		{ "send-qkey", required_argument, NULL, 'Q' },
		{ "send-pkey", required_argument, NULL, 'K' },
		{ "dgid", required_argument, NULL, 'd' },
		{ "gsi", no_argument, NULL, 'g' },
		{ "bad", required_argument, NULL, 'b' },
		{ "interval", required_argument, NULL, 'i' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .qkey = 0x0b1b, .pkey = -1, .send_pkey = -1, .timeout = 10 };
	struct simfab_port_info pi;
	struct simfab_client *c;
	bool send_qkey_set = false;
	char sockbuf[512], *slash;
	const char *cmd;
	uint32_t qpn;
	int opt, rc, idx;

	o.name = getenv("IBGW_NODE") ? getenv("IBGW_NODE") : getenv("SIM_HOST");
	o.socket = getenv("IBGW_FABRIC_SOCKET");
	while ((opt = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			o.socket = optarg;
			break;
		case 'n':
			o.name = optarg;
			break;
		case 'q':
			o.qkey = (uint32_t)num(optarg, 0xffffffffu, "--qkey");
			break;
		case 'p':
			o.pkey = (int)num(optarg, 0xffff, "--pkey");
			break;
		case 'm':
			o.mtu = (unsigned)num(optarg, 4096, "--mtu");
			break;
		case 'a':
			if (o.n_attach == ATTACH_MAX)
				die("at most 8 --attach%s", "");
			slash = strchr(optarg, '/');
			if (!slash)
				die("--attach MGID/MLID, not %s", optarg);
			*slash = 0;
			if (ib_gid_parse(optarg, &o.mgid[o.n_attach]) < 0)
				die("bad MGID %s", optarg);
			o.mlid[o.n_attach++] = (uint16_t)num(slash + 1, 0xffff, "MLID");
			break;
		case 'c':
			o.count = (unsigned)num(optarg, 100000000, "--count");
			break;
		case 't':
			o.timeout = (int)num(optarg, 3600, "--timeout");
			break;
		case 'z':
			o.size = (unsigned)num(optarg, 4096, "--size");
			break;
		case 'P':
			o.payload = optarg;
			break;
		case 'Q':
			o.send_qkey = (uint32_t)num(optarg, 0xffffffffu, "--send-qkey");
			send_qkey_set = true;
			break;
		case 'K':
			o.send_pkey = (int)num(optarg, 0xffff, "--send-pkey");
			break;
		case 'd':
			if (ib_gid_parse(optarg, &o.dgid) < 0)
				die("bad --dgid %s", optarg);
			o.have_dgid = true;
			break;
		case 'g':
			o.gsi = true;
			break;
		case 'b':
			o.bad = optarg;
			break;
		case 'i':
			o.interval_ms = (unsigned)num(optarg, 10000, "--interval");
			break;
		default:
			fprintf(stderr, "usage: simport [OPTIONS] info | send DLID DQPN | recv\n");
			return 1;
		}
	}
	if (optind >= argc)
		die("no command (info, send, recv)%s", "");
	cmd = argv[optind];
	if (!send_qkey_set)
		o.send_qkey = o.qkey;
	if (!o.name || !*o.name)
		die("no node name: --name, or run under sim/rack exec%s", "");
	if (!o.socket) {
		const char *st = getenv("IBGW_RACK_STATE");

		if (!st)
			die("no fabric socket: --socket, or run under sim/rack exec%s", "");
		snprintf(sockbuf, sizeof(sockbuf), "%s/fabric.sock", st);
		o.socket = sockbuf;
	}
	read_port(&o, &pi);
	if (!strcmp(cmd, "info")) {
		print_info(&pi);
		return 0;
	}
	if (strcmp(cmd, "send") && strcmp(cmd, "recv"))
		die("unknown command %s", cmd);
	if (!strcmp(cmd, "send") && optind + 3 != argc)
		die("usage: send DLID DQPN%s", "");
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	rc = simfab_client_connect(o.socket, &c);
	if (rc < 0)
		die("cannot connect to the fabric: %s", strerror(-rc));
	if ((rc = simfab_client_hello(c, &pi)) < 0)
		die("HELLO refused: %s",
		    simfab_client_errmsg(c)[0] ? simfab_client_errmsg(c) : strerror(-rc));
	idx = pkey_index(&pi, o.pkey);
	if ((rc = simfab_client_qp_create_pkey(c, SIMFAB_QP_UD, (uint16_t)idx, o.qkey, &qpn)) < 0)
		die("QP_CREATE refused: %s", simfab_client_errmsg(c));
	for (unsigned i = 0; i < o.n_attach; i++)
		if (simfab_client_mcast_attach(c, qpn, &o.mgid[i], o.mlid[i]) < 0)
			die("MCAST_ATTACH refused: %s", simfab_client_errmsg(c));
	if (!strcmp(cmd, "send")) {
		if (!o.count)
			o.count = 1;
		rc = do_send(c, &o, &pi, qpn, pi.pkeys[idx],
			     (uint16_t)num(argv[optind + 1], 0xffff, "DLID"),
			     (uint32_t)num(argv[optind + 2], 0xffffff, "DQPN"));
		/* Let the fabric read our packets before the connection closes. */
		usleep(50000);
	} else {
		rc = do_recv(c, &o, qpn, &pi);
	}
	simfab_client_close(c);
	return rc;
}
