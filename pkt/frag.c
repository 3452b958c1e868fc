/*
 * IPv4 fragmentation (see frag.h).
 */
#include <string.h>

#include "pkt/frag.h"

static const char *const reason_names[FRAG_REASON_COUNT] = {
	[FRAG_OK] = "ok",
	[FRAG_BAD_PACKET] = "frag_bad_packet",
	[FRAG_DF_SET] = "frag_df_set",
	[FRAG_MTU_TOO_SMALL] = "frag_mtu_too_small",
	[FRAG_TOO_MANY] = "frag_too_many",
	[FRAG_BUF_TOO_SMALL] = "frag_buf_too_small",
};

const char *frag_reason_name(enum frag_reason r)
{
	if ((unsigned)r >= FRAG_REASON_COUNT)
		return "unknown";
	return reason_names[r];
}

/* Options of the second and later fragments: those with the copied flag, EOL-padded
 * to a multiple of 4. Options were checked by ip4_validate. Returns their length. */
static size_t copied_options(const uint8_t *opt, size_t len, uint8_t out[40])
{
	size_t i = 0, o = 0;

	while (i < len) {
		uint8_t t = opt[i];

		if (t == IP4_OPT_EOL)
			break;
		if (t == IP4_OPT_NOP) {
			i++;
			continue;
		}
		if (t & IP4_OPT_COPY) {
			memcpy(out + o, opt + i, opt[i + 1]);
			o += opt[i + 1];
		}
		i += opt[i + 1];
	}
	while (o & 3)
		out[o++] = IP4_OPT_EOL;
	return o;
}

struct plan {
	struct ip4_info info;
	uint8_t later_opts[40];
	size_t later_hl;
	size_t first_step, later_step; /* data octets per non-last fragment */
	size_t data;
};

static enum frag_reason make_plan(const uint8_t *pkt, size_t len, unsigned mtu, struct plan *pl,
				  enum ip_reason *ipwhy)
{
	enum ip_reason r = ip4_validate(pkt, len, &pl->info);

	if (ipwhy)
		*ipwhy = r;
	if (r != IP_OK)
		return FRAG_BAD_PACKET;
	if (mtu < IP4_MIN_MTU)
		return FRAG_MTU_TOO_SMALL;
	if (mtu > 65535)
		mtu = 65535;
	pl->later_hl = IP4_HDR_LEN + copied_options(pkt + IP4_HDR_LEN,
						    pl->info.hdr_len - IP4_HDR_LEN, pl->later_opts);
	pl->data = pl->info.tot_len - pl->info.hdr_len;
	if (pl->info.tot_len <= mtu) {
		pl->first_step = pl->later_step = pl->data ? pl->data : 1;
		return FRAG_OK;
	}
	if (pl->info.df)
		return FRAG_DF_SET;
	if (mtu < pl->info.hdr_len + 8u)
		return FRAG_MTU_TOO_SMALL; /* 60-octet header, 68 MTU: still room for 8 */
	pl->first_step = (mtu - pl->info.hdr_len) & ~(size_t)7;
	pl->later_step = (mtu - pl->later_hl) & ~(size_t)7;
	return FRAG_OK;
}

static size_t plan_count(const struct plan *pl)
{
	size_t left;

	if (pl->data <= pl->first_step)
		return 1;
	left = pl->data - pl->first_step;
	return 1 + (left + pl->later_step - 1) / pl->later_step;
}

size_t frag4_count(const uint8_t *pkt, size_t len, unsigned mtu)
{
	struct plan pl;

	if (make_plan(pkt, len, mtu, &pl, NULL) != FRAG_OK)
		return 0;
	return plan_count(&pl);
}

enum frag_reason frag4_fragment(const uint8_t *pkt, size_t len, unsigned mtu,
				struct frag4_piece *pieces, size_t npieces, size_t *n,
				enum ip_reason *ipwhy)
{
	struct plan pl;
	enum frag_reason fr = make_plan(pkt, len, mtu, &pl, ipwhy);
	size_t count, done = 0;
	uint16_t base_off;

	*n = 0;
	if (fr != FRAG_OK)
		return fr;
	count = plan_count(&pl);
	if (count > npieces)
		return FRAG_TOO_MANY;
	base_off = (uint16_t)(pl.info.frag_off / 8);
	for (size_t i = 0; i < count; i++) {
		bool first = i == 0, last = i == count - 1;
		size_t hl = first ? pl.info.hdr_len : pl.later_hl;
		size_t step = first ? pl.first_step : pl.later_step;
		size_t dl = last ? pl.data - done : step;
		uint8_t *b = pieces[i].buf;
		uint16_t fo;

		if (pieces[i].cap < hl + dl)
			return FRAG_BUF_TOO_SMALL;
		if (first) {
			memcpy(b, pkt, hl);
		} else {
			memcpy(b, pkt, IP4_HDR_LEN);
			memcpy(b + IP4_HDR_LEN, pl.later_opts, hl - IP4_HDR_LEN);
			b[0] = (uint8_t)(0x40 | hl / 4);
		}
		memcpy(b + hl, pkt + pl.info.hdr_len + done, dl);
		ip_put16(b + 2, (uint16_t)(hl + dl));
		fo = (uint16_t)(ip_be16(pkt + 6) & (IP4_F_RSVD | IP4_F_DF));
		fo |= (uint16_t)(base_off + done / 8);
		if (!last || pl.info.mf)
			fo |= IP4_F_MF;
		ip_put16(b + 6, fo);
		ip_put16(b + 10, 0);
		ip_put16(b + 10, ip_csum(b, hl));
		pieces[i].len = hl + dl;
		done += dl;
	}
	*n = count;
	return FRAG_OK;
}
