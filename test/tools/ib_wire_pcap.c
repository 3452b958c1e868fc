/*
 * Test helper for test/integration/wire_tshark.sh: builds a few UD packets with
 * lib/ib_packet.h (local and global, IPoIB ARP and IPv4 ICMP payloads), writes them
 * to a pcap/ERF file with lib/ib_pcap.h, and prints, one line per packet, the field
 * values tshark should decode from them, in the order the script asks tshark for:
 *
 *   ib_wire_pcap FILE.pcap   ->  stdout: "field=value field=value ..." per packet
 *
 * Values are printed the way `tshark -T fields` prints them (decimal integers for
 * integer fields, 0x-hex for the CRCs, IPv6 text for GIDs), so the script can compare
 * strings. The CRCs are printed as the four (two) octets at their position read most
 * significant first, because that is how tshark shows them: it checks position, the
 * unit tests check the values.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ib_bytes.h"
#include "lib/ib_packet.h"
#include "lib/ib_pcap.h"
#include "lib/ipoib.h"

static void put_ipv4_csum(uint8_t *ip)
{
	uint32_t sum = 0;

	ip[10] = ip[11] = 0;
	for (int i = 0; i < 20; i += 2)
		sum += ib_get_be16(ip + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	ib_put_be16(ip + 10, (uint16_t)~sum);
}

/* IPoIB encap + ARP (RFC 4391 section 4.1: htype 32, hlen 20). */
static size_t arp_payload(uint8_t *p, uint16_t op, const struct ipoib_hwaddr *sha, uint32_t sip,
			  const struct ipoib_hwaddr *tha, uint32_t tip)
{
	struct ipoib_encap e = { .ethertype = 0x0806 };
	size_t n = (size_t)ipoib_encap_encode(&e, p, 4);

	ib_put_be16(p + n, 32);
	ib_put_be16(p + n + 2, 0x0800);
	p[n + 4] = IPOIB_HWADDR_LEN;
	p[n + 5] = 4;
	ib_put_be16(p + n + 6, op);
	n += 8;
	n += (size_t)ipoib_hwaddr_encode(sha, p + n, IPOIB_HWADDR_LEN);
	ib_put_be32(p + n, sip);
	n += 4;
	n += (size_t)ipoib_hwaddr_encode(tha, p + n, IPOIB_HWADDR_LEN);
	ib_put_be32(p + n, tip);
	return n + 4;
}

/* IPoIB encap + IPv4 + ICMP echo request with `extra` data bytes (odd, to need pad). */
static size_t icmp_payload(uint8_t *p, uint32_t src, uint32_t dst, size_t extra)
{
	struct ipoib_encap e = { .ethertype = 0x0800 };
	size_t n = (size_t)ipoib_encap_encode(&e, p, 4);
	uint8_t *ip = p + n, *icmp = ip + 20;
	size_t icmp_len = 8 + extra;
	uint32_t sum = 0;

	memset(ip, 0, 20);
	ip[0] = 0x45;
	ib_put_be16(ip + 2, (uint16_t)(20 + icmp_len));
	ib_put_be16(ip + 4, 0x1234);
	ip[8] = 64;
	ip[9] = 1;
	ib_put_be32(ip + 12, src);
	ib_put_be32(ip + 16, dst);
	put_ipv4_csum(ip);
	memset(icmp, 0, icmp_len);
	icmp[0] = 8;
	ib_put_be16(icmp + 4, 0x77);
	ib_put_be16(icmp + 6, 1);
	for (size_t i = 0; i < extra; i++)
		icmp[8 + i] = (uint8_t)('a' + i % 26);
	for (size_t i = 0; i < icmp_len; i += 2)
		sum += (uint32_t)icmp[i] << 8 | (i + 1 < icmp_len ? icmp[i + 1] : 0);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	ib_put_be16(icmp + 2, (uint16_t)~sum);
	return n + 20 + icmp_len;
}

static void gid_text(const union ib_gid *g, char *buf)
{
	/* tshark prints with inet_ntop's rules, which agree with ib_gid_format for these */
	(void)ib_gid_format(g, buf, IB_GID_STRLEN);
}

static void print_expect(const struct ib_packet *pkt, const uint8_t *buf, size_t len,
			 const char *payload_kind, const char *extra)
{
	char s[IB_GID_STRLEN], d[IB_GID_STRLEN];
	size_t words = len - IB_VCRC_LEN;

	printf("lrh.vl=%u lrh.lver=%u lrh.sl=%u lrh.lnh=%u lrh.dlid=%u lrh.pktlen=%u "
	       "lrh.slid=%u",
	       pkt->lrh.vl, pkt->lrh.lver, pkt->lrh.sl, pkt->has_grh ? 3u : 2u, pkt->lrh.dlid,
	       (unsigned)(words / 4), pkt->lrh.slid);
	if (pkt->has_grh) {
		gid_text(&pkt->grh.sgid, s);
		gid_text(&pkt->grh.dgid, d);
		printf(" grh.ipver=6 grh.tclass=%u grh.flowlabel=%u grh.paylen=%u grh.nxthdr=27 "
		       "grh.hoplmt=%u grh.sgid=%s grh.dgid=%s",
		       pkt->grh.tclass, pkt->grh.flow_label,
		       (unsigned)(words - IB_LRH_LEN - IB_GRH_LEN), pkt->grh.hop_limit, s, d);
	}
	printf(" bth.opcode=%u bth.se=%s bth.m=%s bth.padcnt=%u bth.tver=0 bth.p_key=%u "
	       "bth.destqp=%u bth.a=%s bth.psn=%u deth.q_key=%u deth.srcqp=%u",
	       pkt->bth.opcode, pkt->bth.se ? "1" : "0", pkt->bth.mig ? "1" : "0",
	       (unsigned)((4 - pkt->payload_len % 4) % 4), pkt->bth.pkey, pkt->bth.dqpn,
	       pkt->bth.ack_req ? "1" : "0", pkt->bth.psn, pkt->deth.qkey, pkt->deth.src_qp);
	printf(" invariant.crc=0x%08x variant.crc=0x%04x payload=%s%s%s\n",
	       ib_get_be32(buf + words - 4), ib_get_be16(buf + words), payload_kind,
	       extra[0] ? " " : "", extra);
}

int main(int argc, char **argv)
{
	uint8_t payload[512], pkt_buf[IB_PACKET_MAX_LEN];
	struct ipoib_hwaddr a, b;
	struct ib_packet pkt;
	union ib_gid bcast;
	uint64_t ts = 1700000000ull * 1000000000ull;
	FILE *f;
	int n;

	if (argc != 2) {
		fprintf(stderr, "usage: ib_wire_pcap FILE.pcap\n");
		return 2;
	}
	f = fopen(argv[1], "wb");
	if (!f || ib_pcap_write_header(f) < 0) {
		perror(argv[1]);
		return 1;
	}

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.flags = IPOIB_HWADDR_F_RC;
	a.qpn = 0x48;
	ib_gid_set(&a.gid, IB_GID_LINK_LOCAL_PREFIX, 0x0002c90300011234ull);
	b.qpn = 0x4a;
	ib_gid_set(&b.gid, IB_GID_LINK_LOCAL_PREFIX, 0x0002c90300015678ull);
	(void)ipoib_mgid_broadcast(0xffff, IB_MGID_SCOPE_LINK, &bcast);

	for (int i = 0; i < 4; i++) {
		char extra[160] = "";
		const char *kind;

		memset(&pkt, 0, sizeof(pkt));
		pkt.lrh.sl = (uint8_t)i;
		pkt.lrh.vl = (uint8_t)(i + 1);
		pkt.lrh.slid = 4;
		pkt.bth.opcode = IB_OP_UD_SEND_ONLY;
		pkt.bth.pkey = 0xffff;
		pkt.bth.se = i == 2;
		pkt.bth.psn = 0x100 + (uint32_t)i;
		pkt.deth.qkey = IPOIB_QKEY_BROADCAST;
		pkt.deth.src_qp = a.qpn;
		pkt.payload = payload;
		switch (i) {
		case 0: /* ARP request to the broadcast group: multicast needs a GRH */
			pkt.has_grh = true;
			pkt.lrh.dlid = 0xc000;
			pkt.bth.dqpn = IB_QPN_MULTICAST;
			pkt.grh.ipver = 6;
			pkt.grh.next_hdr = IB_GRH_NXTHDR_BTH;
			pkt.grh.hop_limit = 1;
			pkt.grh.sgid = a.gid;
			pkt.grh.dgid = bcast;
			pkt.payload_len = arp_payload(payload, 1, &a, 0x0a000001, &b, 0x0a000002);
			kind = "arp";
			snprintf(extra, sizeof(extra),
				 "arp.opcode=1 arp.hw.type=32 arp.src.proto_ipv4=10.0.0.1 "
				 "arp.dst.proto_ipv4=10.0.0.2");
			break;
		case 1: /* ARP reply, unicast, local */
			pkt.lrh.dlid = 6;
			pkt.bth.dqpn = b.qpn;
			pkt.payload_len = arp_payload(payload, 2, &b, 0x0a000002, &a, 0x0a000001);
			kind = "arp";
			snprintf(extra, sizeof(extra),
				 "arp.opcode=2 arp.hw.type=32 arp.src.proto_ipv4=10.0.0.2 "
				 "arp.dst.proto_ipv4=10.0.0.1");
			break;
		case 2: /* ICMP echo, local, payload length not a multiple of 4 */
			pkt.lrh.dlid = 6;
			pkt.bth.dqpn = b.qpn;
			pkt.payload_len = icmp_payload(payload, 0x0a000001, 0x0a000002, 13);
			kind = "icmp";
			snprintf(extra, sizeof(extra),
				 "ip.src=10.0.0.1 ip.dst=10.0.0.2 icmp.type=8 ip.len=41");
			break;
		default: /* ICMP echo to another subnet, through a router: GRH */
			pkt.has_grh = true;
			pkt.lrh.dlid = 9;
			pkt.bth.dqpn = b.qpn;
			pkt.grh.ipver = 6;
			pkt.grh.next_hdr = IB_GRH_NXTHDR_BTH;
			pkt.grh.tclass = 0xa5;
			pkt.grh.flow_label = 0x12345;
			pkt.grh.hop_limit = 64;
			pkt.grh.sgid = a.gid;
			(void)ib_gid_parse("fec0:0:0:1::1234", &pkt.grh.dgid);
			pkt.payload_len = icmp_payload(payload, 0x0a000001, 0xc0a80102, 30);
			kind = "icmp";
			snprintf(extra, sizeof(extra),
				 "ip.src=10.0.0.1 ip.dst=192.168.1.2 icmp.type=8 ip.len=58");
			break;
		}
		n = ib_packet_build(&pkt, pkt_buf, sizeof(pkt_buf));
		if (n < 0) {
			fprintf(stderr, "packet %d: build failed: %d\n", i, n);
			return 1;
		}
		if (ib_pcap_write_packet(f, pkt_buf, (size_t)n, ts + (uint64_t)i * 1000) < 0) {
			perror("write");
			return 1;
		}
		print_expect(&pkt, pkt_buf, (size_t)n, kind, extra);
	}
	if (fclose(f) != 0) {
		perror("close");
		return 1;
	}
	return 0;
}
