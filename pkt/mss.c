/*
 * TCP MSS clamping (see mss.h).
 */
#include "pkt/ip.h"
#include "pkt/mss.h"

static const char *const names[MSS_RESULT_COUNT] = {
	[MSS_CLAMPED] = "mss_clamped",
	[MSS_UNCHANGED] = "mss_unchanged",
	[MSS_NO_OPTION] = "mss_no_option",
	[MSS_NOT_SYN] = "mss_not_syn",
	[MSS_BAD_IP] = "mss_bad_ip",
	[MSS_TCP_TRUNCATED] = "mss_tcp_truncated",
	[MSS_TCP_BAD_DOFF] = "mss_tcp_bad_doff",
	[MSS_BAD_OPTION] = "mss_bad_option",
};

const char *mss_result_name(enum mss_result r)
{
	if ((unsigned)r >= MSS_RESULT_COUNT)
		return "unknown";
	return names[r];
}

enum mss_result mss_clamp_tcp(uint8_t *tcp, size_t len, uint16_t max_mss, uint16_t *old_mss)
{
	size_t doff, i;

	if (len < 20)
		return MSS_TCP_TRUNCATED;
	if (!(tcp[13] & 0x02)) /* SYN */
		return MSS_NOT_SYN;
	doff = (size_t)(tcp[12] >> 4) * 4;
	if (doff < 20)
		return MSS_TCP_BAD_DOFF;
	if (doff > len)
		return MSS_TCP_TRUNCATED;
	for (i = 20; i < doff;) {
		uint8_t kind = tcp[i];
		size_t l;

		if (kind == 0)
			break;
		if (kind == 1) {
			i++;
			continue;
		}
		if (i + 1 >= doff)
			return MSS_BAD_OPTION;
		l = tcp[i + 1];
		if (l < 2 || i + l > doff)
			return MSS_BAD_OPTION;
		if (kind == 2) {
			uint16_t mss, ck;

			if (l != 4)
				return MSS_BAD_OPTION;
			mss = ip_be16(tcp + i + 2);
			if (old_mss)
				*old_mss = mss;
			if (mss <= max_mss)
				return MSS_UNCHANGED;
			ip_put16(tcp + i + 2, max_mss);
			ck = ip_be16(tcp + 16);
			if ((i + 2) & 1) /* odd offset: the octets sit swapped in the sum */
				ck = ip_csum_update16(ck, (uint16_t)(mss << 8 | mss >> 8),
						      (uint16_t)(max_mss << 8 | max_mss >> 8));
			else
				ck = ip_csum_update16(ck, mss, max_mss);
			ip_put16(tcp + 16, ck);
			return MSS_CLAMPED;
		}
		i += l;
	}
	return MSS_NO_OPTION;
}

enum mss_result mss_clamp4(uint8_t *pkt, size_t len, uint16_t max_mss, uint16_t *old_mss)
{
	struct ip4_info info;

	if (ip4_validate(pkt, len, &info) != IP_OK)
		return MSS_BAD_IP;
	if (info.proto != 6 || info.frag_off != 0)
		return MSS_NOT_SYN;
	return mss_clamp_tcp(pkt + info.hdr_len, info.tot_len - info.hdr_len, max_mss, old_mss);
}

enum mss_result mss_clamp6(uint8_t *pkt, size_t len, uint16_t max_mss, uint16_t *old_mss)
{
	struct ip6_info info;

	if (ip6_validate(pkt, len, &info) != IP_OK)
		return MSS_BAD_IP;
	if (info.proto != 6 || (info.is_frag && !info.frag_first))
		return MSS_NOT_SYN;
	return mss_clamp_tcp(pkt + info.l4_off, info.pkt_len - info.l4_off, max_mss, old_mss);
}
