/*
 * Packet captures of InfiniBand packets that tshark and Wireshark open: classic pcap
 * files of link type ERF (197) whose records are ERF type 21 (InfiniBand), as Mellanox's
 * ibdump writes them. (tshark 4.0 does not open LINKTYPE_INFINIBAND, 247.)
 *
 * One record is a 16-octet pcap record header (little endian: seconds, microseconds,
 * captured length, original length), then the 16-octet ERF header (big endian except
 * the timestamp):
 *   0-7: timestamp, little-endian 64-bit: seconds << 32 | binary fraction of a second
 *   8: type (21)  9: flags (0x04, "varying length record")  10-11: rlen (record length,
 *   header included)  12-13: loss counter (0)  14-15: wlen (packet length on the wire)
 * then the packet from its LRH through its VCRC.
 */
#ifndef IBGW_LIB_IB_PCAP_H
#define IBGW_LIB_IB_PCAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define IB_PCAP_FILE_HDR_LEN   24
#define IB_PCAP_REC_HDR_LEN    16
#define IB_ERF_HDR_LEN         16
#define IB_PCAP_LINKTYPE_ERF   197
#define IB_ERF_TYPE_INFINIBAND 21

/* A pcap file header (magic 0xa1b2c3d4 little endian, version 2.4) with snaplen and
 * linktype: this file's records use 65535 and IB_PCAP_LINKTYPE_ERF; gwctl capture
 * writes the ones the daemon's capture gives. Returns IB_PCAP_FILE_HDR_LEN or -ENOSPC. */
int ib_pcap_file_header(uint8_t *buf, size_t len, uint32_t snaplen, uint32_t linktype);

/* One pcap record holding one ERF type-21 record of pkt (pkt_len octets) stamped
 * ts_ns nanoseconds since the epoch. Returns the record's length (32 + pkt_len),
 * -ENOSPC, or -EMSGSIZE if pkt_len is over 65535 - 16 (ERF's rlen is 16 bits). */
int ib_erf_record(uint8_t *buf, size_t len, const uint8_t *pkt, size_t pkt_len, uint64_t ts_ns);

/* Convenience for files: write the header once, then records. 0 or -errno. */
int ib_pcap_write_header(FILE *f);
int ib_pcap_write_packet(FILE *f, const uint8_t *pkt, size_t pkt_len, uint64_t ts_ns);

#endif
