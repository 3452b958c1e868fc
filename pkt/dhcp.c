/*
 * DHCPv4 for the relay agent: parse, the two rewrites, where a reply goes (see dhcp.h).
 * The option walk covers the options field only: option overload (52) moves options
 * into sname / file, which a relay leaves alone (RFC 3046 2.1 puts option 82 in the
 * options field).
 *
 * Threads: any (pure functions).
 */
#include <string.h>

#include "pkt/dhcp.h"

static const char *const result_names[DHCP_RESULT_COUNT] = {
	[DHCP_OK] = "ok",
	[DHCP_SHORT] = "short",
	[DHCP_BAD_OP] = "bad_op",
	[DHCP_BAD_HLEN] = "bad_hlen",
	[DHCP_BAD_MAGIC] = "bad_magic",
	[DHCP_BAD_OPTION] = "bad_option",
	[DHCP_NO_END] = "no_end",
	[DHCP_TOO_LONG] = "too_long",
	[DHCP_HOPS_EXCEEDED] = "hops_exceeded",
	[DHCP_NO_ROOM] = "no_room",
};

const char *dhcp_result_name(enum dhcp_result r)
{
	return (unsigned)r < DHCP_RESULT_COUNT ? result_names[r] : "unknown";
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

enum dhcp_result dhcp_parse(const uint8_t *p, size_t len, struct dhcp_info *out)
{
	size_t i = DHCP_OPT_OFF;
	bool have_type = false;

	memset(out, 0, sizeof(*out));
	if (len < DHCP_OPT_OFF)
		return DHCP_SHORT;
	if (len > DHCP_MAX_LEN)
		return DHCP_TOO_LONG;
	if (p[0] != DHCP_OP_REQUEST && p[0] != DHCP_OP_REPLY)
		return DHCP_BAD_OP;
	if (p[2] > 16)
		return DHCP_BAD_HLEN;
	if (be32(p + DHCP_FIXED_LEN) != DHCP_MAGIC)
		return DHCP_BAD_MAGIC;
	out->op = p[0];
	out->htype = p[1];
	out->hlen = p[2];
	out->hops = p[3];
	out->xid = be32(p + 4);
	out->flags = (uint16_t)(p[10] << 8 | p[11]);
	memcpy(out->ciaddr, p + 12, 4);
	memcpy(out->yiaddr, p + 16, 4);
	memcpy(out->siaddr, p + 20, 4);
	memcpy(out->giaddr, p + 24, 4);
	memcpy(out->chaddr, p + 28, 16);
	while (i < len) {
		uint8_t code = p[i], olen;

		if (code == DHCP_OPT_PAD) {
			i++;
			continue;
		}
		if (code == DHCP_OPT_END) {
			out->end_off = i;
			return DHCP_OK;
		}
		if (i + 2 > len || i + 2 + (size_t)(olen = p[i + 1]) > len)
			return DHCP_BAD_OPTION;
		switch (code) {
		case DHCP_OPT_MSG_TYPE:
			if (olen != 1 || have_type)
				return DHCP_BAD_OPTION;
			have_type = true;
			out->msg_type = p[i + 2];
			break;
		case DHCP_OPT_CLIENT_ID:
			if (!out->client_id) { /* the first one counts */
				out->client_id = p + i + 2;
				out->client_id_len = olen;
			}
			break;
		case DHCP_OPT_RELAY:
			out->has_relay_info = true;
			break;
		default:
			break;
		}
		i += 2 + (size_t)olen;
	}
	return DHCP_NO_END;
}

/* Option 82 with its sub-options at out (room checked by the caller): its length. */
static size_t put_opt82(uint8_t *out, const struct dhcp_relay_params *rp)
{
	size_t n = 2;

	out[0] = DHCP_OPT_RELAY;
	if (rp->circuit_len) {
		out[n++] = DHCP_RAI_CIRCUIT;
		out[n++] = (uint8_t)rp->circuit_len;
		memcpy(out + n, rp->circuit_id, rp->circuit_len);
		n += rp->circuit_len;
	}
	if (rp->remote_len) {
		out[n++] = DHCP_RAI_REMOTE;
		out[n++] = (uint8_t)rp->remote_len;
		memcpy(out + n, rp->remote_id, rp->remote_len);
		n += rp->remote_len;
	}
	out[1] = (uint8_t)(n - 2);
	return n;
}

size_t dhcp_relay_request(const uint8_t *p, size_t len, const struct dhcp_info *d,
			  const struct dhcp_relay_params *rp, uint8_t *out, size_t cap,
			  bool *added82, enum dhcp_result *why)
{
	static const uint8_t zero[4];
	size_t n = len, o82 = 0;

	*added82 = false;
	if (d->hops >= rp->max_hops || d->hops >= DHCP_HOPS_MAX) {
		*why = DHCP_HOPS_EXCEEDED;
		return 0;
	}
	if (rp->option82 && !d->has_relay_info && (rp->circuit_len || rp->remote_len) &&
	    rp->circuit_len <= 255 && rp->remote_len <= 255) {
		o82 = 2 + (rp->circuit_len ? 2 + rp->circuit_len : 0) +
		      (rp->remote_len ? 2 + rp->remote_len : 0);
		/* Appended before END; what follows END (padding) is dropped with it. */
		if (o82 - 2 > DHCP_OPT82_MAX || d->end_off + o82 + 1 > DHCP_MAX_LEN ||
		    d->end_off + o82 + 1 > cap)
			o82 = 0; /* RFC 3046 2.1: not added, not truncated: sent as it is */
		else
			n = d->end_off + o82 + 1;
	}
	if (n > cap) {
		*why = DHCP_NO_ROOM;
		return 0;
	}
	if (o82) {
		memcpy(out, p, d->end_off);
		put_opt82(out + d->end_off, rp);
		out[d->end_off + o82] = DHCP_OPT_END;
		*added82 = true;
	} else {
		memcpy(out, p, len);
	}
	out[3] = (uint8_t)(d->hops + 1);
	if (!memcmp(d->giaddr, zero, 4))
		memcpy(out + 24, rp->giaddr, 4);
	*why = DHCP_OK;
	return n;
}

size_t dhcp_relay_reply(const uint8_t *p, size_t len, const struct dhcp_info *d, uint8_t *out,
			size_t cap)
{
	size_t i = DHCP_OPT_OFF, n = DHCP_OPT_OFF;

	if (!d->has_relay_info) {
		if (len > cap)
			return 0;
		memcpy(out, p, len);
		return len;
	}
	if (d->end_off + 1 > cap)
		return 0;
	memcpy(out, p, DHCP_OPT_OFF);
	/* The walk dhcp_parse made already: every option ends inside the message. */
	while (i < d->end_off) {
		size_t olen = p[i] == DHCP_OPT_PAD ? 1 : 2 + (size_t)p[i + 1];

		if (p[i] != DHCP_OPT_RELAY) {
			memcpy(out + n, p + i, olen);
			n += olen;
		}
		i += olen;
	}
	out[n++] = DHCP_OPT_END;
	return n;
}

void dhcp_reply_dest(const struct dhcp_info *d, bool ib, struct dhcp_dest *out)
{
	static const uint8_t zero[4];

	memset(out, 0, sizeof(*out));
	out->kind = DHCP_DEST_BCAST;
	memset(out->ip, 0xff, 4);
	if ((d->flags & DHCP_FLAG_BCAST) || d->msg_type == DHCP_NAK)
		return;
	if (memcmp(d->ciaddr, zero, 4)) {
		out->kind = DHCP_DEST_CIADDR;
		memcpy(out->ip, d->ciaddr, 4);
		return;
	}
	if (!memcmp(d->yiaddr, zero, 4))
		return;
	if (ib) {
		if (d->client_id && d->client_id_len == 1 + DHCP_IPOIB_HWLEN &&
		    d->client_id[0] == DHCP_HTYPE_IPOIB) {
			out->kind = DHCP_DEST_YIADDR_HW;
			memcpy(out->ip, d->yiaddr, 4);
			memcpy(out->hw, d->client_id + 1, DHCP_IPOIB_HWLEN);
			out->hw_len = DHCP_IPOIB_HWLEN;
		} else {
			out->ib_no_hw = true;
		}
		return;
	}
	if (d->htype == DHCP_HTYPE_ETHER && d->hlen == 6) {
		out->kind = DHCP_DEST_YIADDR_HW;
		memcpy(out->ip, d->yiaddr, 4);
		memcpy(out->hw, d->chaddr, 6);
		out->hw_len = 6;
	}
}

void dhcp_ipoib_client_id(const uint8_t hw[DHCP_IPOIB_HWLEN], uint8_t out[1 + DHCP_IPOIB_HWLEN])
{
	out[0] = DHCP_HTYPE_IPOIB;
	memcpy(out + 1, hw, DHCP_IPOIB_HWLEN);
}
