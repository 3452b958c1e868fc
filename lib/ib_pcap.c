/*
 * pcap/ERF writer for InfiniBand packets (see ib_pcap.h for the record layout).
 * Buffers are built byte by byte so files are the same on any host byte order.
 */
#include "lib/ib_pcap.h"
#include "lib/ib_bytes.h"

#include <errno.h>
#include <string.h>

#define ERF_FLAG_VLEN   0x04
#define ERF_MAX_PAYLOAD (0xffff - IB_ERF_HDR_LEN)

int ib_pcap_file_header(uint8_t *buf, size_t len, uint32_t snaplen, uint32_t linktype)
{
	if (len < IB_PCAP_FILE_HDR_LEN)
		return -ENOSPC;
	ib_put_le32(buf, 0xa1b2c3d4u); /* microsecond timestamps */
	ib_put_le16(buf + 4, 2);
	ib_put_le16(buf + 6, 4);
	ib_put_le32(buf + 8, 0);  /* thiszone */
	ib_put_le32(buf + 12, 0); /* sigfigs */
	ib_put_le32(buf + 16, snaplen);
	ib_put_le32(buf + 20, linktype);
	return IB_PCAP_FILE_HDR_LEN;
}

int ib_erf_record(uint8_t *buf, size_t len, const uint8_t *pkt, size_t pkt_len, uint64_t ts_ns)
{
	size_t rlen = IB_ERF_HDR_LEN + pkt_len, total = IB_PCAP_REC_HDR_LEN + rlen;
	uint64_t sec = ts_ns / 1000000000u, nsec = ts_ns % 1000000000u;
	/* ERF fraction: nsec / 1e9 scaled to 2^32, rounded down. */
	uint64_t frac = (nsec << 32) / 1000000000u;
	uint8_t *erf = buf + IB_PCAP_REC_HDR_LEN;

	if (pkt_len > ERF_MAX_PAYLOAD)
		return -EMSGSIZE;
	if (len < total)
		return -ENOSPC;
	ib_put_le32(buf, (uint32_t)sec);
	ib_put_le32(buf + 4, (uint32_t)(nsec / 1000u));
	ib_put_le32(buf + 8, (uint32_t)rlen);
	ib_put_le32(buf + 12, (uint32_t)rlen);

	ib_put_le32(erf, (uint32_t)frac);
	ib_put_le32(erf + 4, (uint32_t)sec);
	erf[8] = IB_ERF_TYPE_INFINIBAND;
	erf[9] = ERF_FLAG_VLEN;
	ib_put_be16(erf + 10, (uint16_t)rlen);
	ib_put_be16(erf + 12, 0);
	ib_put_be16(erf + 14, (uint16_t)pkt_len);
	if (pkt_len)
		memcpy(erf + IB_ERF_HDR_LEN, pkt, pkt_len);
	return (int)total;
}

int ib_pcap_write_header(FILE *f)
{
	uint8_t hdr[IB_PCAP_FILE_HDR_LEN];

	(void)ib_pcap_file_header(hdr, sizeof(hdr), 65535, IB_PCAP_LINKTYPE_ERF);
	if (fwrite(hdr, 1, sizeof(hdr), f) != sizeof(hdr))
		return -EIO;
	return 0;
}

int ib_pcap_write_packet(FILE *f, const uint8_t *pkt, size_t pkt_len, uint64_t ts_ns)
{
	uint8_t rec[IB_PCAP_REC_HDR_LEN + IB_ERF_HDR_LEN + 8192];
	int n = ib_erf_record(rec, sizeof(rec), pkt, pkt_len, ts_ns);

	if (n < 0)
		return n;
	if (fwrite(rec, 1, (size_t)n, f) != (size_t)n)
		return -EIO;
	return 0;
}
