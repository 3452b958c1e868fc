/*
 * Proxy ARP / ND decisions (see proxy.h).
 */
#include <string.h>
#include <sys/socket.h>

#include "pkt/proxy.h"

static const char *const reason_names[PROXY_REASON_COUNT] = {
	[PROXY_R_ANSWERED] = "proxy_answered",
	[PROXY_R_RESOLVE] = "proxy_resolve",
	[PROXY_R_DISABLED] = "proxy_disabled",
	[PROXY_R_NOT_REQUEST] = "proxy_not_request",
	[PROXY_R_GRATUITOUS] = "proxy_gratuitous",
	[PROXY_R_FROM_OURSELVES] = "proxy_from_ourselves",
	[PROXY_R_SENDER_OTHER_SIDE] = "proxy_sender_other_side",
	[PROXY_R_TARGET_SELF] = "proxy_target_self",
	[PROXY_R_TARGET_ASKER_SIDE] = "proxy_target_asker_side",
	[PROXY_R_TARGET_UNKNOWN] = "proxy_target_unknown",
	[PROXY_R_DAD_NOT_DEFENDED] = "proxy_dad_not_defended",
	[PROXY_R_RATE_LIMITED] = "proxy_rate_limited",
	[PROXY_R_NO_SPACE] = "proxy_no_space",
	[PROXY_R_WRONG_LINK] = "proxy_wrong_link",
};

const char *proxy_reason_name(enum proxy_reason r)
{
	if ((unsigned)r >= PROXY_REASON_COUNT)
		return "unknown";
	return reason_names[r];
}

static struct proxy_decision ignore(enum proxy_reason r)
{
	struct proxy_decision d = { PROXY_IGNORE, r, 0 };

	return d;
}

/* Same link address? IPoIB addresses compare without the flags octet (a peer may
 * advertise RC or not; QPN + GID name the port). */
static bool same_lladdr(bool ib, const uint8_t *a, const uint8_t *b)
{
	return ib ? memcmp(a + 1, b + 1, 19) == 0 : memcmp(a, b, 6) == 0;
}

/* The target checks common to ARP and ND. Returns PROXY_R_ANSWERED to answer. */
static enum proxy_reason judge(const struct proxy_env *env, int family, const uint8_t *sender,
			       const uint8_t *target, bool dad)
{
	enum proxy_where w;

	if (sender && env->lookup(env->ctx, family, sender) == PROXY_WHERE_OTHER_SIDE)
		return PROXY_R_SENDER_OTHER_SIDE;
	w = env->lookup(env->ctx, family, target);
	switch (w) {
	case PROXY_WHERE_SELF:
		return PROXY_R_TARGET_SELF;
	case PROXY_WHERE_ASKER_SIDE:
		return PROXY_R_TARGET_ASKER_SIDE;
	case PROXY_WHERE_UNKNOWN:
		return PROXY_R_TARGET_UNKNOWN;
	case PROXY_WHERE_OTHER_PREFIX:
		if (dad) /* defend only what is known to be in use */
			return PROXY_R_TARGET_UNKNOWN;
		if (!env->cfg->answer_unresolved)
			return PROXY_R_RESOLVE;
		break;
	case PROXY_WHERE_OTHER_SIDE:
		break;
	}
	if (dad && !env->cfg->defend_dad)
		return PROXY_R_DAD_NOT_DEFENDED;
	if (env->rl && sender && !icmp_rl_allow(env->rl, family, sender, 0, 0, env->now_ns))
		return PROXY_R_RATE_LIMITED;
	return PROXY_R_ANSWERED;
}

struct proxy_decision proxy_arp(const struct proxy_env *env, const struct arp_pkt *req,
				const uint8_t *frame_src, uint8_t *out, size_t cap)
{
	const struct proxy_link *l = env->link;
	struct proxy_decision d = { PROXY_ANSWER, PROXY_R_ANSWERED, 0 };
	uint8_t spa[4], tpa[4];
	enum arp_kind k;
	enum proxy_reason r;

	if (!env->cfg->enabled)
		return ignore(PROXY_R_DISABLED);
	if (req->htype != (l->ib ? ARP_HTYPE_IB : ARP_HTYPE_ETHER))
		return ignore(PROXY_R_WRONG_LINK);
	k = arp_classify(req);
	if (k == ARP_KIND_REPLY)
		return ignore(PROXY_R_NOT_REQUEST);
	if (k == ARP_KIND_ANNOUNCE || k == ARP_KIND_GRATUITOUS_REPLY)
		return ignore(PROXY_R_GRATUITOUS);
	if (same_lladdr(l->ib, req->sha, l->lladdr) ||
	    (frame_src && same_lladdr(l->ib, frame_src, l->lladdr)))
		return ignore(PROXY_R_FROM_OURSELVES);
	ip_put32(spa, req->spa);
	ip_put32(tpa, req->tpa);
	r = judge(env, AF_INET, k == ARP_KIND_PROBE ? NULL : spa, tpa, k == ARP_KIND_PROBE);
	if (r == PROXY_R_RESOLVE) {
		d.action = PROXY_RESOLVE;
		d.reason = r;
		return d;
	}
	if (r != PROXY_R_ANSWERED)
		return ignore(r);
	d.len = arp_build_reply(out, cap, req, l->lladdr);
	if (!d.len)
		return ignore(PROXY_R_NO_SPACE);
	return d;
}

struct proxy_decision proxy_nd(const struct proxy_env *env, const struct nd_msg *ns,
			       const uint8_t *frame_src, uint8_t *out, size_t cap)
{
	const struct proxy_link *l = env->link;
	struct proxy_decision d = { PROXY_ANSWER, PROXY_R_ANSWERED, 0 };
	enum nd_link link = l->ib ? ND_LINK_IB : ND_LINK_ETHER;
	enum proxy_reason r;
	uint8_t target[16];

	if (!env->cfg->enabled)
		return ignore(PROXY_R_DISABLED);
	if (ns->type == ND_NA)
		return ignore(ip6_is_multicast(ns->dst) && !(ns->flags & ND_NA_SOLICITED)
				  ? PROXY_R_GRATUITOUS
				  : PROXY_R_NOT_REQUEST);
	if (ns->type != ND_NS)
		return ignore(PROXY_R_NOT_REQUEST);
	if ((ns->sllao && same_lladdr(l->ib, ns->sllao, l->lladdr)) ||
	    (frame_src && same_lladdr(l->ib, frame_src, l->lladdr)))
		return ignore(PROXY_R_FROM_OURSELVES);
	r = judge(env, AF_INET6, ns->dad ? NULL : ns->src, ns->target, ns->dad);
	if (r == PROXY_R_RESOLVE) {
		d.action = PROXY_RESOLVE;
		d.reason = r;
		return d;
	}
	if (r != PROXY_R_ANSWERED)
		return ignore(r);
	memcpy(target, ns->target, 16);
	d.len = nd_build_na_reply(out, cap, link, ns, l->ip6_src ? l->ip6_src : target,
				  env->cfg->router ? ND_NA_ROUTER : 0, l->lladdr);
	if (!d.len)
		return ignore(PROXY_R_NO_SPACE);
	return d;
}

size_t proxy_announce_arp(const struct proxy_link *link, uint32_t addr, bool as_reply, uint8_t *out,
			  size_t cap)
{
	return arp_build_gratuitous(out, cap, link->ib ? ARP_HTYPE_IB : ARP_HTYPE_ETHER,
				    link->lladdr, addr, as_reply);
}

size_t proxy_announce_nd(const struct proxy_link *link, const uint8_t addr[16], bool router,
			 uint8_t *out, size_t cap)
{
	return nd_build_unsolicited_na(out, cap, link->ib ? ND_LINK_IB : ND_LINK_ETHER, addr,
				       router, link->lladdr);
}
