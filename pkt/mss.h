/*
 * TCP MSS clamping (like Linux's TCPMSS --clamp-mss-to-pmtu): a SYN or SYN-ACK that
 * crosses to a link whose MTU cannot carry the advertised MSS gets the MSS option
 * lowered to mtu - 40 (IPv4) or mtu - 60 (IPv6), with the TCP checksum fixed
 * incrementally (RFC 1624; an MSS value at an odd offset is handled). The option walk
 * is bounded by the TCP data offset and refuses malformed options with a reason. A SYN
 * without an MSS option is left alone: the defaults (536, RFC 9293; 1220, RFC 8200)
 * already fit any legal MTU, so no option is ever inserted and the packet never grows.
 * Only the first fragment (or an unfragmented packet) carries the TCP header.
 */
#ifndef IBGW_PKT_MSS_H
#define IBGW_PKT_MSS_H

#include <stddef.h>
#include <stdint.h>

enum mss_result {
	MSS_CLAMPED = 0,   /* the option was lowered */
	MSS_UNCHANGED,     /* SYN whose MSS already fits */
	MSS_NO_OPTION,     /* SYN without an MSS option */
	MSS_NOT_SYN,       /* not TCP, not a SYN, or a non-first fragment: nothing to do */
	MSS_BAD_IP,        /* the IP header failed validation */
	MSS_TCP_TRUNCATED, /* TCP header (data offset) runs past the packet */
	MSS_TCP_BAD_DOFF,  /* data offset < 5 */
	MSS_BAD_OPTION,    /* option length < 2 or past the header, MSS length != 4 */
	MSS_RESULT_COUNT
};

const char *mss_result_name(enum mss_result r);

/* The MSS a link of this MTU carries. */
static inline uint16_t mss_for_mtu4(unsigned mtu)
{
	return (uint16_t)(mtu > 65535 ? 65535 - 40 : mtu < 88 ? 48 : mtu - 40);
}

static inline uint16_t mss_for_mtu6(unsigned mtu)
{
	return (uint16_t)(mtu > 65535 ? 65535 - 60 : mtu < 1280 ? 1220 : mtu - 60);
}

/* Clamp in place: pkt is an IPv4 / IPv6 packet (no link header). *old_mss (if not NULL)
 * gets the MSS found. */
enum mss_result mss_clamp4(uint8_t *pkt, size_t len, uint16_t max_mss, uint16_t *old_mss);
enum mss_result mss_clamp6(uint8_t *pkt, size_t len, uint16_t max_mss, uint16_t *old_mss);

/* Clamp the TCP segment tcp[len] (header and data); the checksum covers it, so only the
 * incremental update is needed. */
enum mss_result mss_clamp_tcp(uint8_t *tcp, size_t len, uint16_t max_mss, uint16_t *old_mss);

#endif
