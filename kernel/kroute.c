/*
 * The gateway's routes in a kernel table and a kernel table read back (see
 * kernel/kroute.h).
 *
 * Two netlink sockets, like kernel/linkwatch.c: `ev` joined to the IPv4 and IPv6 route
 * groups, non-blocking, on the loop; `req` for requests and dumps, non-blocking too,
 * answered within a bounded poll. Requests go out in windows of BATCH messages, each
 * with NLM_F_ACK and its own sequence number; the answers (libnl parses them) are
 * matched by sequence number. Messages are built and parsed by libnl's rtnl_route.
 *
 * What the kernel holds of ours is kept in `have` (sorted by prefix: one route per
 * prefix, at our priority); a sync computes `want` from the RIB and merges the two.
 * Events caused by our own requests carry our socket's port id and are ignored; an
 * event about our routes from anyone else makes the next sync a full one.
 */
#include "kernel/kroute.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netlink/netlink.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "lib/evloop.h"
#include "lib/log.h"

#define BATCH         64   /* requests in flight before their answers are read */
#define ANSWER_MS     2000 /* the kernel answers at once; this only bounds a lost answer */
#define IMPORT_MS     10   /* event to re-read of the import table */
#define RETRY_MS      1000 /* after a failed dump */
#define DEF_DELAY_MS  20
#define DEF_RESYNC_MS 60000

enum {
	KS_INSTALLED,
	KS_FAILED,
	KS_DELETING
};
enum {
	OP_ADD,
	OP_REPLACE,
	OP_DEL
};

/* One exported route as the kernel holds it (or refused it). */
struct kent {
	struct ip_prefix p;
	uint8_t type;  /* RTN_UNREACHABLE or RTN_BLACKHOLE */
	uint8_t state; /* KS_* */
};

struct kop {
	uint8_t op;
	struct kent e;
	uint32_t prio; /* OP_DEL of a stale route: its priority */
	uint32_t seq;
	int err;    /* -errno from the kernel */
	bool done;  /* answered */
	bool quiet; /* refused before: do not log it again */
	size_t at;  /* index in the merged list (OP_DEL of stale routes: SIZE_MAX) */
};

struct kimp {
	struct rt_route r;
};

struct kroute {
	struct evloop *loop;
	struct kroute_config cfg;
	struct nl_sock *ev, *req;
	struct nl_cb *req_cb;
	struct evtimer *sync_t, *resync_t, *import_t;
	bool started;   /* export: the first sync ran (and no withdraw since) */
	bool need_full; /* export: read the table before the next sync */
	/* exported: sorted by prefix */
	struct kent *have;
	size_t n_have, cap_have;
	/* imported: sorted by (prefix, metric) */
	struct kimp *imp;
	size_t n_imp;
	/* the answers being collected */
	struct kop *ops;
	size_t n_ops;
	/* a dump being collected */
	int (*dump_fn)(struct kroute *k, struct nl_msg *msg);
	bool dump_done;
	int dump_err;
	struct kent *dump_have; /* full export resync */
	size_t n_dump_have, cap_dump_have;
	struct kop *stale; /* our routes at another priority or with a TOS */
	size_t n_stale, cap_stale;
	struct kimp *dump_imp;
	size_t n_dump_imp, cap_dump_imp;
	struct kroute_stats st;
};

static int nlerr(int e)
{
	switch (e < 0 ? -e : e) {
	case NLE_NOMEM:
		return -ENOMEM;
	case NLE_PERM:
		return -EPERM;
	case NLE_AGAIN:
		return -EAGAIN;
	case NLE_INVAL:
		return -EINVAL;
	default:
		return -EIO;
	}
}

static int grow(void **p, size_t *cap, size_t n, size_t size)
{
	size_t c;
	void *np;

	if (n < *cap)
		return 0;
	c = *cap ? *cap * 2 : 64;
	np = realloc(*p, c * size);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = c;
	return 0;
}

static int cmp_prefix(const struct ip_prefix *a, const struct ip_prefix *b)
{
	int c;

	if (a->addr.family != b->addr.family)
		return a->addr.family == AF_INET ? -1 : 1;
	c = memcmp(a->addr.bytes, b->addr.bytes, a->addr.family == AF_INET ? 4 : 16);
	if (c)
		return c;
	return (int)a->len - (int)b->len;
}

static int cmp_kent(const void *a, const void *b)
{
	return cmp_prefix(&((const struct kent *)a)->p, &((const struct kent *)b)->p);
}

static int cmp_kimp(const void *a, const void *b)
{
	const struct rt_route *x = &((const struct kimp *)a)->r, *y = &((const struct kimp *)b)->r;
	int c = cmp_prefix(&x->prefix, &y->prefix);

	if (c)
		return c;
	return x->metric < y->metric ? -1 : x->metric > y->metric;
}

static uint32_t eff_prio(const struct kroute *k, int family)
{
	/* The kernel stores IPv6 routes without a priority at 1024 (IP6_RT_PRIO_USER). */
	if (family == AF_INET6 && k->cfg.priority == 0)
		return 1024;
	return k->cfg.priority;
}

static char *pfx(const struct ip_prefix *p, char *buf)
{
	return ip_prefix_format(p, buf, IP_PREFIX_STRLEN);
}

/* ---- reading route objects --------------------------------------------------------------- */

/* The prefix of a route object; false when it is malformed. */
static bool get_prefix(struct rtnl_route *r, struct ip_prefix *p)
{
	struct nl_addr *d = rtnl_route_get_dst(r);
	int family = rtnl_route_get_family(r);
	unsigned alen = family == AF_INET ? 4 : 16, plen;

	if (family != AF_INET && family != AF_INET6)
		return false;
	memset(p, 0, sizeof(*p));
	p->addr.family = (uint8_t)family;
	if (!d)
		return true; /* default route: no RTA_DST */
	plen = nl_addr_get_prefixlen(d);
	if (plen > alen * 8)
		return false;
	if (nl_addr_get_len(d) != 0) {
		if (nl_addr_get_family(d) != family || nl_addr_get_len(d) != alen)
			return false;
		memcpy(p->addr.bytes, nl_addr_get_binary_addr(d), alen);
	} else if (plen) {
		return false;
	}
	p->len = (uint8_t)plen;
	ip_prefix_mask(p);
	return true;
}

static bool is_discard(uint8_t type)
{
	return type == RTN_BLACKHOLE || type == RTN_UNREACHABLE || type == RTN_PROHIBIT;
}

/* A route object of the import table as an rt_route: true when importable. */
static bool import_route(struct rtnl_route *r, uint8_t proto, kroute_map_fn map, void *ctx,
			 struct rt_route *out)
{
	uint8_t type = rtnl_route_get_type(r);
	int i, n;

	memset(out, 0, sizeof(*out));
	if (rtnl_route_get_tos(r) || (rtnl_route_get_flags(r) & RTM_F_CLONED) ||
	    rtnl_route_get_protocol(r) == proto || !get_prefix(r, &out->prefix))
		return false;
	out->source = RT_SRC_KERNEL;
	out->metric = rtnl_route_get_priority(r);
	if (is_discard(type)) {
		out->nnh = 1;
		out->nh[0].type = RT_NH_BLACKHOLE;
		return true;
	}
	if (type != RTN_UNICAST)
		return false;
	n = rtnl_route_get_nnexthops(r);
	for (i = 0; i < n && out->nnh < RT_ECMP_MAX; i++) {
		struct rtnl_nexthop *h = rtnl_route_nexthop_n(r, i);
		struct nl_addr *gw;
		struct rt_nexthop *x = &out->nh[out->nnh];
		int oif;
		uint32_t ifx;

		if (!h)
			continue;
		gw = rtnl_route_nh_get_gateway(h);
		oif = rtnl_route_nh_get_ifindex(h);
		ifx = map && oif > 0 ? map(ctx, oif) : 0;
		if (gw && nl_addr_get_len(gw)) {
			unsigned alen = out->prefix.addr.family == AF_INET ? 4 : 16;

			if (nl_addr_get_family(gw) != out->prefix.addr.family ||
			    nl_addr_get_len(gw) != alen)
				continue; /* IPv4 via IPv6 (RTA_VIA) and the malformed */
			x->type = RT_NH_GATEWAY;
			x->gw.family = out->prefix.addr.family;
			memcpy(x->gw.bytes, nl_addr_get_binary_addr(gw), alen);
			x->ifindex = ifx;
		} else if (rtnl_route_nh_get_via(h)) {
			continue;
		} else {
			if (!ifx)
				continue; /* a device the gateway does not own */
			x->type = RT_NH_CONNECTED;
			x->ifindex = ifx;
		}
		out->nnh++;
	}
	return out->nnh > 0;
}

/* libnl 3.7 trusts what the kernel sends; the fuzz harness found two inputs it does not
 * survive, which the kernel never sends: an RTA_MULTIPATH entry whose rtnh_len is 0 or
 * whose aligned length passes the attribute's end (an endless loop allocating next
 * hops: its size_t count wraps), and an RTA_VIA shorter than struct rtvia (a memcpy of
 * -2 octets), at the top or inside a next hop. Checked here first. */
static bool via_ok(struct nlattr *tb[])
{
	return !tb[RTA_VIA] || nla_len(tb[RTA_VIA]) >= (int)sizeof(struct rtvia);
}

static bool multipath_sane(const struct nlmsghdr *h)
{
	struct nlattr *tb[RTA_MAX + 1];
	const struct rtnexthop *nh;
	int left;

	if (nlmsg_parse((struct nlmsghdr *)h, sizeof(struct rtmsg), tb, RTA_MAX, NULL) < 0 ||
	    !via_ok(tb))
		return false;
	if (!tb[RTA_MULTIPATH])
		return true;
	nh = nla_data(tb[RTA_MULTIPATH]);
	left = nla_len(tb[RTA_MULTIPATH]);
	while (left > 0) {
		if (left < (int)sizeof(*nh) || nh->rtnh_len < sizeof(*nh) ||
		    (int)RTNH_ALIGN(nh->rtnh_len) > left)
			return false;
		if (nh->rtnh_len > sizeof(*nh)) {
			struct nlattr *ntb[RTA_MAX + 1];

			if (nla_parse(ntb, RTA_MAX, (struct nlattr *)RTNH_DATA(nh),
				      nh->rtnh_len - (int)sizeof(*nh), NULL) < 0 ||
			    !via_ok(ntb))
				return false;
		}
		left -= RTNH_ALIGN(nh->rtnh_len);
		nh = RTNH_NEXT(nh);
	}
	return true;
}

int kroute_parse(const void *buf, size_t len, uint32_t table, uint8_t proto, kroute_map_fn map,
		 void *ctx, struct rt_route *out)
{
	const struct nlmsghdr *h = buf;
	struct rtnl_route *r = NULL;
	int ret;

	if (len < NLMSG_HDRLEN || h->nlmsg_len < NLMSG_HDRLEN || h->nlmsg_len > len ||
	    (h->nlmsg_type != RTM_NEWROUTE && h->nlmsg_type != RTM_DELROUTE))
		return 0;
	if (!multipath_sane(h))
		return 0;
	ret = rtnl_route_parse((struct nlmsghdr *)h, &r);
	if (ret < 0)
		return ret == -NLE_NOMEM ? -ENOMEM : 0;
	ret = rtnl_route_get_table(r) == table && import_route(r, proto, map, ctx, out);
	rtnl_route_put(r);
	return ret;
}

/* ---- requests and answers ---------------------------------------------------------------- */

static struct kop *op_by_seq(struct kroute *k, uint32_t seq)
{
	size_t i;

	/* Answers come in order: the first unanswered one matches almost always. */
	for (i = 0; i < k->n_ops; i++)
		if (!k->ops[i].done && k->ops[i].seq == seq)
			return &k->ops[i];
	return NULL;
}

static int on_ack(struct nl_msg *msg, void *arg)
{
	struct kroute *k = arg;
	struct kop *o = op_by_seq(k, nlmsg_hdr(msg)->nlmsg_seq);

	if (o) {
		o->done = true;
		o->err = 0;
	}
	return NL_OK;
}

static int on_err(struct sockaddr_nl *nla, struct nlmsgerr *e, void *arg)
{
	struct kroute *k = arg;
	struct kop *o = op_by_seq(k, e->msg.nlmsg_seq);

	(void)nla;
	if (o) {
		o->done = true;
		o->err = e->error < 0 ? e->error : -e->error;
	} else if (k->dump_fn && !k->dump_done) {
		k->dump_err = e->error < 0 ? e->error : -e->error;
		k->dump_done = true;
	}
	return NL_SKIP;
}

static int seq_any(struct nl_msg *msg, void *arg)
{
	(void)msg;
	(void)arg;
	return NL_OK;
}

static int on_valid(struct nl_msg *msg, void *arg)
{
	struct kroute *k = arg;

	if (k->dump_fn && !k->dump_done) {
		int r = k->dump_fn(k, msg);

		if (r < 0 && !k->dump_err)
			k->dump_err = r;
	}
	return NL_OK;
}

static int on_finish(struct nl_msg *msg, void *arg)
{
	struct kroute *k = arg;

	(void)msg;
	k->dump_done = true;
	return NL_OK;
}

/* Read answers until done() or ANSWER_MS pass; 0 or -ETIMEDOUT / -errno. */
static int wait_answers(struct kroute *k, bool (*done)(struct kroute *k))
{
	uint64_t end = evloop_now_ms() + ANSWER_MS;
	struct pollfd pfd = { .fd = nl_socket_get_fd(k->req), .events = POLLIN };

	while (!done(k)) {
		uint64_t now = evloop_now_ms();
		int r;

		if (now >= end)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, (int)(end - now));
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		r = nl_recvmsgs(k->req, k->req_cb);
		if (r < 0 && r != -NLE_AGAIN) {
			if (r == -NLE_NOMEM) /* ENOBUFS: answers were lost */
				return -ENOBUFS;
			return nlerr(r);
		}
	}
	return 0;
}

static bool ops_done(struct kroute *k)
{
	size_t i;

	for (i = 0; i < k->n_ops; i++)
		if (!k->ops[i].done)
			return false;
	return true;
}

static bool dump_finished(struct kroute *k)
{
	return k->dump_done;
}

/* The request for one export operation. */
static int build_op(struct kroute *k, const struct kop *o, struct nl_msg **msg)
{
	struct rtnl_route *r = rtnl_route_alloc();
	struct nl_addr *dst;
	int fam = o->e.p.addr.family, ret;

	if (!r)
		return -ENOMEM;
	dst = nl_addr_build(fam, o->e.p.addr.bytes, fam == AF_INET ? 4 : 16);
	if (!dst) {
		rtnl_route_put(r);
		return -ENOMEM;
	}
	nl_addr_set_prefixlen(dst, o->e.p.len);
	rtnl_route_set_family(r, (uint8_t)fam);
	rtnl_route_set_dst(r, dst);
	nl_addr_put(dst);
	rtnl_route_set_table(r, k->cfg.table);
	rtnl_route_set_protocol(r, k->cfg.protocol);
	if (o->op == OP_DEL) {
		/* Our protocol in a delete: the kernel matches only our route. The type
		 * too (IPv4 matches it; libnl's default is unicast). */
		rtnl_route_set_scope(r, RT_SCOPE_NOWHERE);
		rtnl_route_set_type(r, o->e.type);
		rtnl_route_set_priority(r, o->prio);
		ret = rtnl_route_build_del_request(r, 0, msg);
	} else {
		rtnl_route_set_scope(r, RT_SCOPE_UNIVERSE);
		rtnl_route_set_type(r, o->e.type);
		if (k->cfg.priority)
			rtnl_route_set_priority(r, k->cfg.priority);
		ret = rtnl_route_build_add_request(
		    r, o->op == OP_ADD ? NLM_F_CREATE | NLM_F_EXCL : NLM_F_REPLACE, msg);
	}
	rtnl_route_put(r);
	return ret < 0 ? nlerr(ret) : 0;
}

/* Send ops[0..n) in windows of BATCH and collect each answer into op->err. Returns 0,
 * or a socket-level -errno (answers lost: the caller resyncs). */
static int run_ops(struct kroute *k, struct kop *ops, size_t n)
{
	size_t i, j;
	int ret = 0;

	for (i = 0; i < n; i += BATCH) {
		size_t m = n - i < BATCH ? n - i : BATCH;

		k->ops = ops + i;
		k->n_ops = m;
		for (j = 0; j < m; j++) {
			struct kop *o = &ops[i + j];
			struct nl_msg *msg = NULL;
			int r = build_op(k, o, &msg);

			if (r == 0) {
				r = nl_send_auto(k->req, msg);
				r = r < 0 ? nlerr(r) : 0;
				o->seq = nlmsg_hdr(msg)->nlmsg_seq;
			}
			if (msg)
				nlmsg_free(msg);
			if (r < 0) {
				o->done = true;
				o->err = r;
			}
		}
		ret = wait_answers(k, ops_done);
		for (j = 0; j < m; j++)
			if (!ops[i + j].done) {
				ops[i + j].done = true;
				ops[i + j].err = ret ? ret : -EIO;
			}
		k->ops = NULL;
		k->n_ops = 0;
		if (ret < 0) {
			for (j = i + m; j < n; j++) {
				ops[j].done = true;
				ops[j].err = ret;
			}
			break;
		}
	}
	return ret;
}

/* Dump one family's routes of table (the kernel filters when it can: strict checking;
 * the callbacks filter again). */
static int dump(struct kroute *k, int family, uint32_t table,
		int (*fn)(struct kroute *k, struct nl_msg *msg))
{
	struct rtmsg rtm = { .rtm_family = (uint8_t)family };
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETROUTE, NLM_F_DUMP);
	int ret;

	if (!msg)
		return -ENOMEM;
	rtm.rtm_table = table < 256 ? (uint8_t)table : RT_TABLE_UNSPEC;
	if (nlmsg_append(msg, &rtm, sizeof(rtm), NLMSG_ALIGNTO) < 0 ||
	    nla_put_u32(msg, RTA_TABLE, table) < 0) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	k->dump_fn = fn;
	k->dump_done = false;
	k->dump_err = 0;
	ret = nl_send_auto(k->req, msg);
	nlmsg_free(msg);
	if (ret < 0) {
		k->dump_fn = NULL;
		return nlerr(ret);
	}
	ret = wait_answers(k, dump_finished);
	k->dump_fn = NULL;
	if (ret == 0)
		ret = k->dump_err;
	return ret == -ENOENT ? 0 : ret; /* strict dumps of a table never used: ENOENT */
}

/* ---- export ------------------------------------------------------------------------------ */

static int dump_export_one(struct kroute *k, struct nl_msg *msg)
{
	struct rtnl_route *r = NULL;
	struct ip_prefix p;
	int ret = 0;

	if (nlmsg_hdr(msg)->nlmsg_type != RTM_NEWROUTE)
		return 0;
	if (rtnl_route_parse(nlmsg_hdr(msg), &r) < 0)
		return 0;
	if (rtnl_route_get_table(r) != k->cfg.table ||
	    rtnl_route_get_protocol(r) != k->cfg.protocol || !get_prefix(r, &p))
		goto out;
	if (rtnl_route_get_tos(r) || rtnl_route_get_priority(r) != eff_prio(k, p.addr.family) ||
	    (rtnl_route_get_type(r) != RTN_UNREACHABLE &&
	     rtnl_route_get_type(r) != RTN_BLACKHOLE)) {
		/* Ours, but not in a form we make now (an earlier config): delete it. */
		if ((ret = grow((void **)&k->stale, &k->cap_stale, k->n_stale, sizeof(*k->stale))))
			goto out;
		struct kop *o = &k->stale[k->n_stale++];

		memset(o, 0, sizeof(*o));
		o->op = OP_DEL;
		o->e.p = p;
		o->e.type = rtnl_route_get_type(r);
		o->prio = rtnl_route_get_priority(r);
		o->at = SIZE_MAX;
		goto out;
	}
	if ((ret = grow((void **)&k->dump_have, &k->cap_dump_have, k->n_dump_have,
			sizeof(*k->dump_have))))
		goto out;
	k->dump_have[k->n_dump_have++] =
	    (struct kent){ .p = p, .type = rtnl_route_get_type(r), .state = KS_INSTALLED };
out:
	rtnl_route_put(r);
	return ret;
}

struct want_ctx {
	struct kroute *k;
	struct kent *v;
	size_t n, cap;
	int err;
};

static bool excluded_if(const struct kroute *k, uint32_t ifindex)
{
	unsigned i;

	for (i = 0; i < k->cfg.n_exclude; i++)
		if (k->cfg.exclude_if[i] == ifindex)
			return true;
	return false;
}

/* The kernel route type for a RIB route, or 0 when it is not exported. */
static uint8_t export_type(const struct kroute *k, const struct rt_route *r)
{
	unsigned i;

	if (!(r->flags & RT_F_SELECTED) || (r->flags & RT_F_UNRESOLVED) ||
	    !(k->cfg.sources & (1u << r->source)) || r->nnh == 0)
		return 0;
	if (r->nh[0].type == RT_NH_LOCAL)
		return 0;
	if (r->nh[0].type == RT_NH_BLACKHOLE)
		return RTN_BLACKHOLE;
	for (i = 0; i < r->nnh; i++)
		if ((r->nh_resolved & (1u << i)) && !excluded_if(k, r->nh[i].ifindex))
			return RTN_UNREACHABLE;
	return 0;
}

static int want_one(void *arg, const struct rt_route *r)
{
	struct want_ctx *w = arg;
	uint8_t type = export_type(w->k, r);

	if (!type)
		return 0;
	if (grow((void **)&w->v, &w->cap, w->n, sizeof(*w->v)))
		return w->err = -ENOMEM;
	w->v[w->n++] = (struct kent){ .p = r->prefix, .type = type, .state = KS_INSTALLED };
	return 0;
}

static void log_refused(const struct kroute *k, const struct kop *o)
{
	char b[IP_PREFIX_STRLEN];
	const char *why = o->err == -EEXIST ? " (another protocol's route holds the key)" : "";

	log_warning("kroute: table %u: %s %s refused: %s%s", k->cfg.table,
		    o->op == OP_DEL ? "deleting" : "exporting", pfx(&o->e.p, b), strerror(-o->err),
		    why);
}

int kroute_export_sync(struct kroute *k, bool full)
{
	struct want_ctx w = { .k = k };
	struct kent *next = NULL;
	struct kop *ops = NULL;
	size_t n_next = 0, cap_next = 0, n_ops = 0, cap_ops = 0, i, j;
	int ret = 0, first = 0;

	if (!k->cfg.rt)
		return 0;
	evtimer_stop(k->sync_t);
	k->started = true;
	full = full || k->need_full;
	k->st.syncs++;
	if (full) {
		int fams[2] = { AF_INET, AF_INET6 };

		k->n_dump_have = 0;
		k->n_stale = 0;
		for (i = 0; i < 2 && ret == 0; i++)
			ret = dump(k, fams[i], k->cfg.table, dump_export_one);
		if (ret < 0) {
			log_error("kroute: reading table %u: %s", k->cfg.table, strerror(-ret));
			k->st.errors++;
			k->need_full = true;
			evtimer_start(k->sync_t, RETRY_MS, 0);
			return ret;
		}
		k->st.full_syncs++;
		qsort(k->dump_have, k->n_dump_have, sizeof(*k->dump_have), cmp_kent);
		/* What the kernel refused before stays known as refused (logged once). */
		n_next = k->n_dump_have;
		for (i = 0; i < k->n_have; i++)
			if (k->have[i].state == KS_FAILED &&
			    !bsearch(&k->have[i], k->dump_have, n_next, sizeof(*k->have),
				     cmp_kent)) {
				if (grow((void **)&k->dump_have, &k->cap_dump_have, k->n_dump_have,
					 sizeof(*k->dump_have)) < 0)
					return -ENOMEM;
				k->dump_have[k->n_dump_have++] = k->have[i];
			}
		n_next = 0;
		qsort(k->dump_have, k->n_dump_have, sizeof(*k->dump_have), cmp_kent);
		/* Two of ours for one prefix cannot be: the priority is one. Copy. */
		if (grow((void **)&k->have, &k->cap_have, k->n_dump_have, sizeof(*k->have)) < 0)
			return -ENOMEM;
		memcpy(k->have, k->dump_have, k->n_dump_have * sizeof(*k->have));
		k->n_have = k->n_dump_have;
		k->need_full = false;
	}
	ret = rt_walk(k->cfg.rt, 0, want_one, &w);
	if (w.err || ret) {
		free(w.v);
		return w.err ? w.err : ret;
	}
	qsort(w.v, w.n, sizeof(*w.v), cmp_kent);

	/* Merge want and have into next, and the operations that make the kernel so. */
	for (i = 0, j = 0; i < w.n || j < k->n_have;) {
		int c = i == w.n ? 1 : j == k->n_have ? -1 : cmp_kent(&w.v[i], &k->have[j]);
		struct kent e;
		int op = -1;
		bool quiet = false;

		if (c < 0) { /* new */
			e = w.v[i++];
			op = OP_ADD;
		} else if (c > 0) { /* gone */
			e = k->have[j++];
			if (e.state == KS_FAILED)
				continue;
			e.state = KS_DELETING;
			op = OP_DEL;
		} else {
			struct kent *h = &k->have[j++];

			e = w.v[i++];
			if (h->state == KS_FAILED) {
				quiet = h->type == e.type;
				if (full || h->type != e.type)
					op = OP_ADD;
				else
					e.state = KS_FAILED;
			} else if (h->type != e.type) {
				op = OP_REPLACE;
			}
		}
		if (grow((void **)&next, &cap_next, n_next, sizeof(*next)) < 0 ||
		    (op >= 0 && grow((void **)&ops, &cap_ops, n_ops, sizeof(*ops)) < 0)) {
			ret = -ENOMEM;
			goto out;
		}
		if (op >= 0) {
			ops[n_ops++] = (struct kop){ .op = (uint8_t)op,
						     .e = e,
						     .prio = eff_prio(k, e.p.addr.family),
						     .quiet = quiet,
						     .at = n_next };
		}
		next[n_next++] = e;
	}
	/* Stale routes of ours go first. */
	if (k->n_stale) {
		ret = run_ops(k, k->stale, k->n_stale);
		for (i = 0; i < k->n_stale; i++) {
			if (k->stale[i].err == 0)
				k->st.dels++;
			else if (k->stale[i].err != -ESRCH && k->stale[i].err != -ENOENT) {
				log_refused(k, &k->stale[i]);
				k->st.errors++;
			}
		}
		k->n_stale = 0;
	}
	if (ret == 0 && n_ops)
		ret = run_ops(k, ops, n_ops);
	for (i = 0; i < n_ops; i++) {
		struct kop *o = &ops[i];
		struct kent *e = &next[o->at];

		if (o->err == 0) {
			if (o->op == OP_DEL)
				k->st.dels++;
			else if (o->op == OP_ADD)
				k->st.adds++;
			else
				k->st.replaces++;
			continue;
		}
		if (o->op == OP_DEL && (o->err == -ESRCH || o->err == -ENOENT))
			continue; /* gone already */
		if (!first)
			first = o->err;
		k->st.errors++;
		if (o->err == -ENOBUFS || o->err == -ETIMEDOUT || o->err == -EIO ||
		    o->err == -ENOMEM) {
			/* We do not know what the kernel did: read it back soon. */
			k->need_full = true;
			if (o->op == OP_DEL)
				e->state = KS_INSTALLED;
			continue;
		}
		if (o->op == OP_DEL) {
			log_refused(k, o);
			e->state = KS_INSTALLED;
		} else if (o->op == OP_REPLACE) {
			log_refused(k, o);
			k->need_full = true; /* it was ours; what is it now? */
		} else {
			if (!o->quiet)
				log_refused(k, o); /* once */
			e->state = KS_FAILED;
		}
	}
	/* Compact: deleted entries leave. */
	for (i = 0, j = 0; i < n_next; i++)
		if (next[i].state != KS_DELETING)
			next[j++] = next[i];
	n_next = j;
	free(k->have);
	k->have = next;
	k->n_have = n_next;
	k->cap_have = cap_next;
	next = NULL;
	if (k->need_full)
		evtimer_start(k->sync_t, RETRY_MS, 0);
	ret = first;
out:
	free(next);
	free(ops);
	free(w.v);
	return ret;
}

void kroute_export_kick(struct kroute *k)
{
	if (!k->cfg.rt || evtimer_pending(k->sync_t))
		return;
	k->started = true;
	evtimer_start(k->sync_t, k->cfg.delay_ms, 0);
}

int kroute_withdraw(struct kroute *k)
{
	struct kop *ops;
	size_t i, n = 0;
	int ret, first = 0;

	if (!k->cfg.rt)
		return 0;
	evtimer_stop(k->sync_t);
	k->started = false;
	/* Read what is there: routes of ours the module did not know go too. */
	k->n_dump_have = 0;
	k->n_stale = 0;
	for (i = 0, ret = 0; i < 2 && ret == 0; i++)
		ret = dump(k, i ? AF_INET6 : AF_INET, k->cfg.table, dump_export_one);
	if (ret < 0) {
		log_error("kroute: reading table %u: %s", k->cfg.table, strerror(-ret));
		return ret;
	}
	ops = calloc(k->n_dump_have + k->n_stale + 1, sizeof(*ops));
	if (!ops)
		return -ENOMEM;
	for (i = 0; i < k->n_dump_have; i++)
		ops[n++] = (struct kop){ .op = OP_DEL,
					 .e = k->dump_have[i],
					 .prio = eff_prio(k, k->dump_have[i].p.addr.family) };
	for (i = 0; i < k->n_stale; i++)
		ops[n++] = k->stale[i];
	k->n_stale = 0;
	ret = run_ops(k, ops, n);
	for (i = 0; i < n; i++) {
		if (ops[i].err == 0) {
			k->st.dels++;
		} else if (ops[i].err != -ESRCH && ops[i].err != -ENOENT) {
			if (!first)
				first = ops[i].err;
			k->st.errors++;
			log_refused(k, &ops[i]);
		}
	}
	free(ops);
	k->n_have = 0;
	k->need_full = true;
	return first ? first : ret;
}

static void on_sync_timer(struct evloop *loop, struct evtimer *t, void *arg)
{
	struct kroute *k = arg;

	(void)loop;
	(void)t;
	if (k->started)
		(void)kroute_export_sync(k, false); /* failures are logged */
}

static void on_resync_timer(struct evloop *loop, struct evtimer *t, void *arg)
{
	struct kroute *k = arg;

	(void)loop;
	(void)t;
	if (k->started)
		(void)kroute_export_sync(k, true);
}

/* ---- import ------------------------------------------------------------------------------ */

static int dump_import_one(struct kroute *k, struct nl_msg *msg)
{
	struct nlmsghdr *h = nlmsg_hdr(msg);
	struct rt_route r;
	int ret = kroute_parse(h, h->nlmsg_len, k->cfg.import_table, k->cfg.protocol,
			       k->cfg.map_ifindex, k->cfg.ctx, &r);

	if (ret <= 0)
		return ret;
	if (grow((void **)&k->dump_imp, &k->cap_dump_imp, k->n_dump_imp, sizeof(*k->dump_imp)))
		return -ENOMEM;
	k->dump_imp[k->n_dump_imp++].r = r;
	return 0;
}

static bool same_route(const struct rt_route *a, const struct rt_route *b)
{
	unsigned i;

	if (a->nnh != b->nnh)
		return false;
	for (i = 0; i < a->nnh; i++)
		if (a->nh[i].type != b->nh[i].type || a->nh[i].ifindex != b->nh[i].ifindex ||
		    (a->nh[i].type == RT_NH_GATEWAY && !ip_addr_equal(&a->nh[i].gw, &b->nh[i].gw)))
			return false;
	return true;
}

static void import_read(struct kroute *k)
{
	struct kimp *old = k->imp, *now;
	size_t n_old = k->n_imp, n_now, i, j;
	int ret = 0;

	k->n_dump_imp = 0;
	ret = dump(k, AF_INET, k->cfg.import_table, dump_import_one);
	if (ret == 0)
		ret = dump(k, AF_INET6, k->cfg.import_table, dump_import_one);
	if (ret < 0) {
		log_error("kroute: reading table %u: %s", k->cfg.import_table, strerror(-ret));
		k->st.errors++;
		evtimer_start(k->import_t, RETRY_MS, 0);
		return;
	}
	k->st.import_reads++;
	qsort(k->dump_imp, k->n_dump_imp, sizeof(*k->dump_imp), cmp_kimp);
	/* Two kernel routes with one (prefix, priority) differ in TOS only, which is not
	 * imported: keep the first. */
	for (i = 0, j = 0; i < k->n_dump_imp; i++)
		if (!j || cmp_kimp(&k->dump_imp[j - 1], &k->dump_imp[i]))
			k->dump_imp[j++] = k->dump_imp[i];
	n_now = j;
	now = malloc((n_now ? n_now : 1) * sizeof(*now));
	if (!now) {
		evtimer_start(k->import_t, RETRY_MS, 0);
		return;
	}
	memcpy(now, k->dump_imp, n_now * sizeof(*now));
	k->imp = now;
	k->n_imp = n_now;
	/* Withdrawals first, then additions and changes. */
	for (i = 0, j = 0; i < n_old; i++) {
		while (j < n_now && cmp_kimp(&now[j], &old[i]) < 0)
			j++;
		if (j == n_now || cmp_kimp(&now[j], &old[i]) != 0)
			if (k->cfg.import_cb)
				k->cfg.import_cb(k->cfg.ctx, KROUTE_DEL, &old[i].r);
	}
	for (i = 0, j = 0; i < n_now; i++) {
		while (j < n_old && cmp_kimp(&old[j], &now[i]) < 0)
			j++;
		if (j == n_old || cmp_kimp(&old[j], &now[i]) != 0 ||
		    !same_route(&old[j].r, &now[i].r))
			if (k->cfg.import_cb)
				k->cfg.import_cb(k->cfg.ctx, KROUTE_ADD, &now[i].r);
	}
	free(old);
}

static void on_import_timer(struct evloop *loop, struct evtimer *t, void *arg)
{
	(void)loop;
	(void)t;
	import_read(arg);
}

/* ---- events ------------------------------------------------------------------------------ */

static bool have_type(const struct kroute *k, const struct ip_prefix *p, uint8_t *type)
{
	struct kent key = { .p = *p };
	const struct kent *e = bsearch(&key, k->have, k->n_have, sizeof(*k->have), cmp_kent);

	if (!e || e->state != KS_INSTALLED)
		return false;
	*type = e->type;
	return true;
}

static int on_event(struct nl_msg *msg, void *arg)
{
	struct kroute *k = arg;
	struct nlmsghdr *h = nlmsg_hdr(msg);
	struct rtnl_route *r = NULL;
	struct ip_prefix p;
	uint32_t table;

	if (h->nlmsg_type != RTM_NEWROUTE && h->nlmsg_type != RTM_DELROUTE)
		return NL_OK;
	if (rtnl_route_parse(h, &r) < 0)
		return NL_OK;
	table = rtnl_route_get_table(r);
	if (k->cfg.import_table && table == k->cfg.import_table &&
	    rtnl_route_get_protocol(r) != k->cfg.protocol && !evtimer_pending(k->import_t))
		evtimer_start(k->import_t, IMPORT_MS, 0);
	if (k->started && table == k->cfg.table &&
	    h->nlmsg_pid != nl_socket_get_local_port(k->req) && get_prefix(r, &p)) {
		uint8_t type;
		bool ours = rtnl_route_get_protocol(r) == k->cfg.protocol;
		bool known = have_type(k, &p, &type);

		/* Someone else touched one of ours (deleted, replaced, flushed), or put a
		 * route of ours there: read the table back and put ours right. */
		if (ours || (known && h->nlmsg_type == RTM_NEWROUTE && !rtnl_route_get_tos(r) &&
			     rtnl_route_get_priority(r) == eff_prio(k, p.addr.family))) {
			k->need_full = true;
			if (!evtimer_pending(k->sync_t))
				evtimer_start(k->sync_t, k->cfg.delay_ms, 0);
		}
	}
	rtnl_route_put(r);
	return NL_OK;
}

static void on_readable(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct kroute *k = arg;
	int r;

	(void)loop;
	(void)fd;
	(void)events;
	for (;;) {
		r = nl_recvmsgs_default(k->ev);
		if (r > 0)
			continue;
		if (r == 0 || r == -NLE_AGAIN)
			break;
		if (r == -NLE_NOMEM) { /* ENOBUFS: events were lost */
			log_warning("kroute: route event socket overran; reading the tables again");
			if (k->started) {
				k->need_full = true;
				if (!evtimer_pending(k->sync_t))
					evtimer_start(k->sync_t, k->cfg.delay_ms, 0);
			}
			if (k->cfg.import_table && !evtimer_pending(k->import_t))
				evtimer_start(k->import_t, IMPORT_MS, 0);
			continue;
		}
		log_warning("kroute: receive: %s", nl_geterror(r));
		break;
	}
}

/* ---- life -------------------------------------------------------------------------------- */

static int set_strict(struct nl_sock *s)
{
	int one = 1;

	/* Kernels since 4.20 filter dumps by table and protocol; older ones answer with
	 * every route, which the callbacks filter. */
	(void)setsockopt(nl_socket_get_fd(s), SOL_NETLINK, NETLINK_GET_STRICT_CHK, &one,
			 sizeof(one));
	(void)setsockopt(nl_socket_get_fd(s), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	return 0;
}

int kroute_new(struct evloop *loop, const struct kroute_config *cfg, struct kroute **out)
{
	struct kroute *k;
	int r;

	if (!cfg || (!cfg->rt && !cfg->import_table))
		return -EINVAL;
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->loop = loop;
	k->cfg = *cfg;
	if (!k->cfg.table)
		k->cfg.table = KROUTE_TABLE;
	if (!k->cfg.protocol)
		k->cfg.protocol = KROUTE_PROTO;
	if (!k->cfg.sources)
		k->cfg.sources =
		    1u << RT_SRC_CONNECTED | 1u << RT_SRC_STATIC | 1u << RT_SRC_LEARNED;
	if (!k->cfg.delay_ms)
		k->cfg.delay_ms = DEF_DELAY_MS;
	if (!k->cfg.resync_ms)
		k->cfg.resync_ms = DEF_RESYNC_MS;
	if (k->cfg.protocol <= RTPROT_STATIC || k->cfg.n_exclude > KROUTE_EXCLUDE_MAX ||
	    (k->cfg.import_table && k->cfg.rt && k->cfg.import_table == k->cfg.table) ||
	    k->cfg.table == RT_TABLE_UNSPEC || k->cfg.table == RT_TABLE_LOCAL ||
	    k->cfg.table == RT_TABLE_MAIN || k->cfg.table == RT_TABLE_DEFAULT) {
		log_error("kroute: bad config (protocol %u, table %u, import table %u)",
			  k->cfg.protocol, k->cfg.table, k->cfg.import_table);
		free(k);
		return -EINVAL;
	}
	r = -ENOMEM;
	k->ev = nl_socket_alloc();
	k->req = nl_socket_alloc();
	k->req_cb = nl_cb_alloc(NL_CB_CUSTOM);
	k->sync_t = evtimer_new(loop, on_sync_timer, k);
	k->resync_t = evtimer_new(loop, on_resync_timer, k);
	k->import_t = evtimer_new(loop, on_import_timer, k);
	if (!k->ev || !k->req || !k->req_cb || !k->sync_t || !k->resync_t || !k->import_t)
		goto fail;
	nl_socket_disable_seq_check(k->ev);
	nl_socket_modify_cb(k->ev, NL_CB_VALID, NL_CB_CUSTOM, on_event, k);
	nl_cb_set(k->req_cb, NL_CB_SEQ_CHECK, NL_CB_CUSTOM, seq_any, NULL);
	nl_cb_set(k->req_cb, NL_CB_ACK, NL_CB_CUSTOM, on_ack, k);
	nl_cb_set(k->req_cb, NL_CB_VALID, NL_CB_CUSTOM, on_valid, k);
	nl_cb_set(k->req_cb, NL_CB_FINISH, NL_CB_CUSTOM, on_finish, k);
	nl_cb_err(k->req_cb, NL_CB_CUSTOM, on_err, k);
	if ((r = nl_connect(k->ev, NETLINK_ROUTE)) < 0 ||
	    (r = nl_socket_add_memberships(k->ev, RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE, 0)) < 0 ||
	    (r = nl_socket_set_nonblocking(k->ev)) < 0 ||
	    (r = nl_connect(k->req, NETLINK_ROUTE)) < 0 ||
	    (r = nl_socket_set_nonblocking(k->req)) < 0) {
		log_error("kroute: netlink: %s", nl_geterror(r));
		r = nlerr(r);
		goto fail;
	}
	nl_socket_disable_seq_check(k->req); /* the answers are matched by sequence number */
	set_strict(k->req);
	nl_socket_set_buffer_size(k->ev, 4 << 20, 0);
	nl_socket_set_buffer_size(k->req, 1 << 20, 0);
	r = evloop_add_fd(loop, nl_socket_get_fd(k->ev), EPOLLIN, on_readable, k);
	if (r < 0)
		goto fail;
	k->need_full = true; /* the first sync reads the table */
	if (k->cfg.rt)
		evtimer_start(k->resync_t, k->cfg.resync_ms, k->cfg.resync_ms);
	if (k->cfg.import_table)
		evtimer_start(k->import_t, 0, 0);
	*out = k;
	return 0;
fail:
	evtimer_free(k->sync_t);
	evtimer_free(k->resync_t);
	evtimer_free(k->import_t);
	if (k->req_cb)
		nl_cb_put(k->req_cb);
	if (k->ev)
		nl_socket_free(k->ev);
	if (k->req)
		nl_socket_free(k->req);
	free(k);
	return r;
}

void kroute_free(struct kroute *k)
{
	if (!k)
		return;
	evloop_del_fd(k->loop, nl_socket_get_fd(k->ev));
	evtimer_free(k->sync_t);
	evtimer_free(k->resync_t);
	evtimer_free(k->import_t);
	nl_cb_put(k->req_cb);
	nl_socket_free(k->ev);
	nl_socket_free(k->req);
	free(k->have);
	free(k->imp);
	free(k->dump_have);
	free(k->stale);
	free(k->dump_imp);
	free(k);
}

void kroute_stats(const struct kroute *k, struct kroute_stats *out)
{
	size_t i;

	*out = k->st;
	out->exported = out->failed = 0;
	for (i = 0; i < k->n_have; i++) {
		if (k->have[i].state == KS_INSTALLED)
			out->exported++;
		else if (k->have[i].state == KS_FAILED)
			out->failed++;
	}
	out->imported = (uint32_t)k->n_imp;
}
