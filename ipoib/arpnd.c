/*
 * ARP (hardware type 32) and ND (IPoIB link-layer option) on the link: what arrives
 * (ipoib_link_input_ctl) teaches the neighbour table as Linux learns, requests for the
 * link's own addresses are answered in the gateway role, an ARP claiming one of them
 * from another hardware address is counted and refused (logged at most once a second);
 * the neighbour table's hooks send the ARP requests and NS that resolve a neighbour and
 * release the packets that waited for it. Also the link's addresses and the neighbours
 * learned elsewhere (the failover peer's state sync). Once the gateway has set the
 * link's subnets (ipoib_link_set_on_link), a sender outside them creates no entry
 * (issue 20: an attacker's off-subnet senders would fill the table), and the answer to
 * its request goes to the address it came from instead of resolving it.
 *
 * Threads: control thread (in the gateway ARP/ND reach it as punts from the workers;
 * what it sends goes back through cfg.post).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ipoib/ipoib_pvt.h"
#include "pkt/arp.h"
#include "pkt/ip.h"
#include "pkt/nd.h"
#include "lib/addr.h"
#include "lib/evloop.h"
#include "lib/log.h"

#define SPOOF_LOG_GAP_MS 1000

static bool is_own_v4(const struct ipoib_link *l, const uint8_t *a)
{
	for (unsigned i = 0; i < l->n_v4; i++)
		if (!memcmp(l->v4[i], a, 4))
			return true;
	return false;
}

static bool is_own_v6(const struct ipoib_link *l, const uint8_t *a)
{
	for (unsigned i = 0; i < l->n_v6; i++)
		if (!memcmp(l->v6[i], a, 16))
			return true;
	return false;
}

static struct neigh_link make_link(const struct ipoib_link *l, const struct ipoib_hwaddr *hw)
{
	struct neigh_link ll;

	memset(&ll, 0, sizeof(ll));
	ll.len = IPOIB_HWADDR_LEN;
	ipoib_hwaddr_encode(hw, ll.addr, sizeof(ll.addr));
	ll.qpn = hw->qpn;
	ll.mtu = l->mtu;
	return ll;
}

static void send_arp(struct ipoib_link *l, uint16_t op, const uint8_t *tha, uint32_t tpa,
		     uint32_t spa, const struct neigh_link *to_ll, const struct ipoib_hwaddr *to_hw)
{
	struct ibp_buf *b = ipoib_link_buf(l);
	size_t n;

	if (!b) {
		l->st.drops[IPOIB_DROP_TX_NOBUF]++;
		return;
	}
	n = arp_build(b->data + IPOIB_ENCAP_LEN, b->cap - IPOIB_ENCAP_LEN, ARP_HTYPE_IB, op,
		      l->hw_bytes, spa, tha, tpa);
	if (!n) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_NOBUF);
		return;
	}
	b->len = (uint32_t)n;
	l->st.tx_arp++;
	if (to_ll && to_ll->usable) {
		ipoib_encap_hdr(b, ETH_P_ARP);
		ipoib_post_ud(l, to_ll->ah, to_ll->qpn, b);
	} else if (to_hw) {
		ipoib_link_xmit_hw(l, to_hw, ETH_P_ARP, b);
	} else {
		ipoib_link_xmit_bcast(l, ETH_P_ARP, b);
	}
}

static const uint8_t *v6_source_for(const struct ipoib_link *l, const uint8_t *target)
{
	if (!l->n_v6)
		return NULL;
	if (!ip6_is_link_local(target))
		for (unsigned i = 0; i < l->n_v6; i++)
			if (!ip6_is_link_local(l->v6[i]))
				return l->v6[i];
	return l->v6[0]; /* the link-local address comes first */
}

static void send_nd(struct ipoib_link *l, struct ibp_buf *b, size_t n, const uint8_t *dst,
		    const struct neigh_link *to_ll)
{
	if (!n) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_NOBUF);
		return;
	}
	b->len = (uint32_t)n;
	l->st.tx_nd++;
	if (to_ll && to_ll->usable) {
		ipoib_encap_hdr(b, ETH_P_IPV6);
		ipoib_post_ud(l, to_ll->ah, to_ll->qpn, b);
	} else {
		ipoib_link_xmit_ip(l, AF_INET6, dst, ETH_P_IPV6, b);
	}
}

static void neigh_solicit(void *ctx, const struct neigh_entry *e, const struct neigh_link *ll)
{
	struct ipoib_link *l = ctx;
	const uint8_t *a = neigh_entry_addr(e);

	if (!l->up)
		return;
	if (neigh_entry_family(e) == AF_INET) {
		uint32_t tpa, spa;

		if (!l->n_v4)
			return;
		memcpy(&tpa, a, 4);
		memcpy(&spa, l->v4[0], 4);
		send_arp(l, ARP_OP_REQUEST, NULL, ntohl(tpa), ntohl(spa), ll, NULL);
	} else {
		const uint8_t *src = v6_source_for(l, a);
		uint8_t sn[16];
		struct ibp_buf *b;
		size_t n;

		if (!src || !(b = ipoib_link_buf(l))) {
			l->st.drops[IPOIB_DROP_TX_NOBUF] += src != NULL;
			return;
		}
		n = nd_build_ns(b->data + IPOIB_ENCAP_LEN, b->cap - IPOIB_ENCAP_LEN, ND_LINK_IB,
				src, ll ? a : NULL, a, l->hw_bytes);
		nd_solicited_node(a, sn);
		send_nd(l, b, n, ll ? a : sn, ll);
	}
}

static void neigh_xmit(void *ctx, const struct neigh_entry *e, const struct neigh_link *ll,
		       void *pkt)
{
	struct ipoib_link *l = ctx;
	struct ipoib_hwaddr hw;

	(void)e;
	if (!l->cm || !ipoib_ll_peer(ll, &hw)) {
		ipoib_post_ud(l, ll->ah, ll->qpn, pkt);
		return;
	}
	ipoib_send_ucast(l, &hw, ll->conn ? ll->conn : ipoib_conn_find(l, &hw), ll->ah,
			 ll->conn ? l->mtu : ll->mtu, pkt);
}

static void neigh_drop(void *ctx, void *pkt)
{
	ipoib_drop_buf(ctx, pkt, IPOIB_DROP_TX_NEIGH);
}

const struct neigh_ops ipoib_neigh_ops = {
	.solicit = neigh_solicit,
	.xmit = neigh_xmit,
	.drop = neigh_drop,
	.release = ipoib_neigh_release,
};

/* ---- the link's addresses, neighbours learned elsewhere ------------------------------ */

int ipoib_link_add_addr(struct ipoib_link *l, int family, const uint8_t *addr)
{
	if (family == AF_INET) {
		if (is_own_v4(l, addr))
			return 0;
		if (l->n_v4 == IPOIB_LINK_MAX_ADDRS)
			return -ENOSPC;
		memcpy(l->v4[l->n_v4++], addr, 4);
		return 0;
	}
	if (family != AF_INET6)
		return -EAFNOSUPPORT;
	if (is_own_v6(l, addr))
		return 0;
	if (l->n_v6 == IPOIB_LINK_MAX_ADDRS)
		return -ENOSPC;
	memcpy(l->v6[l->n_v6++], addr, 16);
	if (l->started) {
		uint8_t sn[16];
		union ib_gid mgid;

		nd_solicited_node(addr, sn);
		ipoib_mgid_from_ipv6(sn, l->pkey, l->scope, &mgid);
		ipoib_mcast_get(l, &mgid, true);
	}
	return 0;
}

int ipoib_link_set_on_link(struct ipoib_link *l, const struct ip_prefix *p, unsigned n)
{
	struct ip_prefix *c = NULL;

	if (n) {
		c = calloc(n, sizeof(*c));
		if (!c)
			return -ENOMEM;
		memcpy(c, p, n * sizeof(*c));
	}
	free(l->on_link);
	l->on_link = c;
	l->n_on_link = n;
	l->on_link_set = true;
	return 0;
}

/* NEIGH_F_CREATE when a sender heard on the link may create an entry (see
 * ipoib_link_set_on_link), else NEIGH_F_OFF_LINK (the table counts the refusal). */
static unsigned learn_create(const struct ipoib_link *l, int family, const uint8_t *addr)
{
	if (!l->on_link_set || neigh_on_link(l->on_link, l->n_on_link, family, addr))
		return NEIGH_F_CREATE;
	return NEIGH_F_OFF_LINK;
}

int ipoib_link_neigh_learn(struct ipoib_link *l, int family, const uint8_t *addr,
			   const uint8_t hwaddr[IPOIB_HWADDR_LEN])
{
	struct ipoib_hwaddr hw;
	struct neigh_link ll;
	struct neigh_entry *e;

	if (family != AF_INET && family != AF_INET6)
		return -EAFNOSUPPORT;
	if (ipoib_hwaddr_decode(hwaddr, IPOIB_HWADDR_LEN, &hw) < 0 ||
	    !ipoib_hwaddr_is_unicast(hwaddr))
		return -EINVAL;
	if (neigh_lookup(l->neigh, family, addr))
		return 0;
	ll = make_link(l, &hw);
	e = neigh_update(l->neigh, family, addr, &ll, NEIGH_F_CREATE);
	if (!e)
		return -ENOSPC;
	ipoib_bind_neigh(l, e);
	return 1;
}

int ipoib_link_del_addr(struct ipoib_link *l, int family, const uint8_t *addr)
{
	if (family == AF_INET) {
		for (unsigned i = 0; i < l->n_v4; i++)
			if (!memcmp(l->v4[i], addr, 4)) {
				memcpy(l->v4[i], l->v4[--l->n_v4], 4);
				return 0;
			}
		return -ENOENT;
	}
	if (family != AF_INET6)
		return -EAFNOSUPPORT;
	for (unsigned i = 0; i < l->n_v6; i++)
		if (!memcmp(l->v6[i], addr, 16)) {
			memcpy(l->v6[i], l->v6[--l->n_v6], 16);
			return 0;
		}
	return -ENOENT;
}

/* ---- ARP and ND received ----------------------------------------------------------- */

static void spoof_log(struct ipoib_link *l, uint32_t spa, const uint8_t *sha)
{
	uint64_t now = evloop_now_ms();
	struct ipoib_hwaddr hw;
	char hs[IPOIB_HWADDR_STRLEN] = "?";
	struct in_addr ia = { .s_addr = htonl(spa) };
	char as[INET_ADDRSTRLEN];

	if (now - l->last_spoof_log < SPOOF_LOG_GAP_MS && l->last_spoof_log) {
		l->spoof_suppressed++;
		return;
	}
	if (ipoib_hwaddr_decode(sha, IPOIB_HWADDR_LEN, &hw) == 0)
		ipoib_hwaddr_format(&hw, hs, sizeof(hs));
	inet_ntop(AF_INET, &ia, as, sizeof(as));
	log_warning("%s: ARP claims our address %s from %s (%s; %llu more suppressed)", l->name, as,
		    hs, l->cfg.accept_spoofed_arp ? "accepted" : "ignored",
		    (unsigned long long)l->spoof_suppressed);
	l->spoof_suppressed = 0;
	l->last_spoof_log = now;
}

static int input_arp(struct ipoib_link *l, const struct ipoib_rx *rx)
{
	struct arp_pkt a;
	struct ipoib_hwaddr sha;
	enum arp_reason r = arp_parse(rx->data, rx->len, ARP_HTYPE_IB, &a);
	uint8_t spa[4], tpa[4];
	uint32_t be;
	struct neigh_link ll;
	struct neigh_entry *e;
	unsigned flags;

	l->st.rx_arp++;
	if (r != ARP_OK || ipoib_hwaddr_decode(a.sha, IPOIB_HWADDR_LEN, &sha) < 0) {
		l->st.drops[IPOIB_DROP_RX_BAD_ARP]++;
		return -EINVAL;
	}
	if (!memcmp(a.sha, l->hw_bytes, IPOIB_HWADDR_LEN))
		return -EALREADY; /* our own, looped back */
	be = htonl(a.spa);
	memcpy(spa, &be, 4);
	be = htonl(a.tpa);
	memcpy(tpa, &be, 4);
	if (a.spa && is_own_v4(l, spa)) {
		l->st.drops[IPOIB_DROP_ARP_SPOOF]++;
		spoof_log(l, a.spa, a.sha);
		if (!l->cfg.accept_spoofed_arp)
			return -EPERM;
		return 0;
	}
	if (!a.spa)
		return 0; /* a probe (RFC 5227): nothing to learn */
	ll = make_link(l, &sha);
	if (is_own_v4(l, tpa)) {
		/* To us: a request teaches the sender (STALE); a reply confirms it. */
		flags = learn_create(l, AF_INET, spa) | NEIGH_F_OVERRIDE;
		if (a.op == ARP_OP_REPLY)
			flags |= NEIGH_F_SOLICITED;
		e = neigh_update(l->neigh, AF_INET, spa, &ll, flags);
		if (e)
			ipoib_bind_neigh(l, e);
		if (a.op == ARP_OP_REQUEST && l->cfg.role == IPOIB_ROLE_GATEWAY)
			send_arp(l, ARP_OP_REPLY, a.sha, a.spa, a.tpa,
				 e ? neigh_entry_link(e) : NULL, &sha);
	} else {
		/* Someone else's conversation or a gratuitous ARP: update only what we
		 * know (Linux without arp_accept). */
		e = neigh_update(l->neigh, AF_INET, spa, &ll, NEIGH_F_OVERRIDE);
		if (e)
			ipoib_bind_neigh(l, e);
	}
	return 0;
}

/*
 * The NA answering an NS for one of our addresses (gateway role). On the asker's
 * neighbour entry when there is one (made or updated by the NS, or known before); else
 * straight to its source link-layer option, as an ARP request is answered at its sender
 * hardware address; else to where the datagram came from (its QPN, and the GID its GRH
 * or connection gives). Only a sender the link may learn is resolved instead: resolving
 * one outside the link's subnets would create the very entry the learning guard refused
 * (issue 20), and send a solicitation for it too. Such a sender with no address to
 * answer at (a unicast NS without the option and without a GRH, or a source no
 * neighbour can have) is not answered, and counted in the table's learn_refused.
 */
static void answer_ns(struct ipoib_link *l, const struct ipoib_rx *rx, const struct nd_msg *m,
		      struct neigh_entry *e, const struct ipoib_hwaddr *sllao)
{
	const struct ipoib_hwaddr *to = NULL;
	struct ipoib_hwaddr src = { .qpn = rx->src_qpn, .gid = rx->sgid };
	uint8_t raw[IPOIB_HWADDR_LEN];
	struct ibp_buf *b;
	size_t n;

	if (!e)
		e = neigh_lookup(l->neigh, AF_INET6, m->src);
	if (!e && sllao) {
		to = sllao;
	} else if (!e && learn_create(l, AF_INET6, m->src) != NEIGH_F_CREATE) {
		if ((!rx->has_grh && !rx->rc) ||
		    ipoib_hwaddr_encode(&src, raw, sizeof(raw)) != IPOIB_HWADDR_LEN ||
		    !ipoib_hwaddr_is_unicast(raw)) {
			(void)neigh_update(l->neigh, AF_INET6, m->src, NULL, NEIGH_F_OFF_LINK);
			return;
		}
		to = &src;
	}
	b = ipoib_link_buf(l);
	if (!b) {
		l->st.drops[IPOIB_DROP_TX_NOBUF]++;
		return;
	}
	n = nd_build_na_reply(b->data + IPOIB_ENCAP_LEN, b->cap - IPOIB_ENCAP_LEN, ND_LINK_IB, m,
			      m->target, ND_NA_OVERRIDE, l->hw_bytes);
	if (!to) {
		send_nd(l, b, n, m->src, e ? neigh_entry_link(e) : NULL);
		return;
	}
	if (!n) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_NOBUF);
		return;
	}
	b->len = (uint32_t)n;
	l->st.tx_nd++;
	(void)ipoib_link_xmit_hw(l, to, ETH_P_IPV6, b);
}

static int input_nd(struct ipoib_link *l, const struct ipoib_rx *rx)
{
	struct nd_msg m;
	enum nd_reason r = nd_parse(rx->data, rx->len, ND_LINK_IB, &m);
	struct ipoib_hwaddr hw;
	struct neigh_link ll;
	struct neigh_entry *e = NULL;
	unsigned flags;

	l->st.rx_nd++;
	if (r != ND_OK) {
		l->st.drops[IPOIB_DROP_RX_BAD_ND]++;
		return -EINVAL;
	}
	/* Another port giving one of our addresses as its source (the NS of a DAD has
	 * none): a conflict or a spoof, as ARP's (input_arp); learning it would make a
	 * neighbour entry for our own address. */
	if ((m.type == ND_NS || m.type == ND_RS || m.type == ND_RA) && !ip6_is_unspecified(m.src) &&
	    is_own_v6(l, m.src) && (!m.sllao || memcmp(m.sllao, l->hw_bytes, IPOIB_HWADDR_LEN))) {
		l->st.drops[IPOIB_DROP_ND_SPOOF]++;
		return -EPERM;
	}
	switch (m.type) {
	case ND_NS: {
		bool have_hw = false;

		if (m.dad || !is_own_v6(l, m.target))
			return 0;
		if (m.sllao && ipoib_hwaddr_decode(m.sllao, IPOIB_HWADDR_LEN, &hw) == 0 &&
		    memcmp(m.sllao, l->hw_bytes, IPOIB_HWADDR_LEN)) {
			have_hw = true;
			ll = make_link(l, &hw);
			e = neigh_update(l->neigh, AF_INET6, m.src, &ll,
					 learn_create(l, AF_INET6, m.src) | NEIGH_F_OVERRIDE);
			if (e)
				ipoib_bind_neigh(l, e);
		}
		if (l->cfg.role == IPOIB_ROLE_GATEWAY)
			answer_ns(l, rx, &m, e, have_hw ? &hw : NULL);
		return 0;
	}
	case ND_NA:
		if (!m.tllao && !(m.flags & ND_NA_SOLICITED))
			return 0;
		if (m.tllao) {
			if (ipoib_hwaddr_decode(m.tllao, IPOIB_HWADDR_LEN, &hw) < 0 ||
			    !memcmp(m.tllao, l->hw_bytes, IPOIB_HWADDR_LEN))
				return 0;
			ll = make_link(l, &hw);
		}
		flags = 0;
		if (m.flags & ND_NA_SOLICITED)
			flags |= NEIGH_F_SOLICITED;
		if (m.flags & ND_NA_OVERRIDE)
			flags |= NEIGH_F_OVERRIDE;
		/* The host role's kernel asked: the link learns what it hears. */
		if (l->cfg.role == IPOIB_ROLE_HOST && m.tllao && !ip6_is_multicast(m.dst))
			flags |= learn_create(l, AF_INET6, m.target);
		e = neigh_update(l->neigh, AF_INET6, m.target, m.tllao ? &ll : NULL, flags);
		if (e)
			ipoib_bind_neigh(l, e);
		return 0;
	case ND_RA:
	case ND_RS:
		if (m.sllao && !ip6_is_unspecified(m.src) &&
		    ipoib_hwaddr_decode(m.sllao, IPOIB_HWADDR_LEN, &hw) == 0 &&
		    memcmp(m.sllao, l->hw_bytes, IPOIB_HWADDR_LEN)) {
			ll = make_link(l, &hw);
			e = neigh_update(l->neigh, AF_INET6, m.src, &ll,
					 (m.type == ND_RA ? learn_create(l, AF_INET6, m.src) : 0) |
					     NEIGH_F_OVERRIDE);
			if (e)
				ipoib_bind_neigh(l, e);
		}
		return 0;
	default:
		return 0; /* Redirect: validated, not taken */
	}
}

int ipoib_link_input_ctl(struct ipoib_link *l, const struct ipoib_rx *rx)
{
	if (rx->kind == IPOIB_RX_ARP)
		return input_arp(l, rx);
	if (rx->kind == IPOIB_RX_ND)
		return input_nd(l, rx);
	return -EINVAL;
}
