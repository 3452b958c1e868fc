/*
 * Following interfaces through rtnetlink (see kernel/linkwatch.h). The event socket's
 * RTM_NEWLINK/RTM_DELLINK messages are parsed with libnl's rtnl_link objects and
 * compared with the last known state of each watched interface; only real changes of
 * presence, up/down, MAC or MTU reach the callback (the kernel sends NEWLINK for many
 * other reasons: statistics, promiscuity counts, qdisc changes).
 */
#include "kernel/linkwatch.h"

#include <errno.h>
#include <linux/rtnetlink.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "lib/evloop.h"
#include "lib/log.h"

struct watched {
	struct linkwatch_state st;
};

struct linkwatch {
	struct evloop *loop;
	linkwatch_cb cb;
	void *arg;
	struct nl_sock *ev;    /* RTNLGRP_LINK events, non-blocking, on the loop */
	struct nl_sock *query; /* synchronous requests */
	struct watched *w;
	unsigned n, cap;
	unsigned resyncs;
};

static int nlerr(int e)
{
	switch (-e) {
	case NLE_NOMEM:
		return -ENOMEM;
	case NLE_OBJ_NOTFOUND:
	case NLE_NODEV:
		return -ENODEV;
	case NLE_PERM:
		return -EPERM;
	default:
		return -EIO;
	}
}

static struct watched *find_name(struct linkwatch *w, const char *name)
{
	unsigned i;

	for (i = 0; i < w->n; i++)
		if (strcmp(w->w[i].st.name, name) == 0)
			return &w->w[i];
	return NULL;
}

/* The state a link object describes (the watched name is kept). */
static void from_link(struct rtnl_link *l, struct linkwatch_state *st)
{
	struct nl_addr *a = rtnl_link_get_addr(l);

	st->present = true;
	st->ifindex = rtnl_link_get_ifindex(l);
	st->flags = rtnl_link_get_flags(l);
	st->up = (st->flags & IFF_UP) && (st->flags & IFF_RUNNING);
	st->mtu = rtnl_link_get_mtu(l);
	memset(st->mac, 0, sizeof(st->mac));
	if (a && nl_addr_get_len(a) == sizeof(st->mac))
		memcpy(st->mac, nl_addr_get_binary_addr(a), sizeof(st->mac));
}

static void gone(struct linkwatch_state *st)
{
	char name[IF_NAMESIZE];

	memcpy(name, st->name, sizeof(name));
	memset(st, 0, sizeof(*st));
	memcpy(st->name, name, sizeof(name));
}

static unsigned diff(const struct linkwatch_state *a, const struct linkwatch_state *b)
{
	unsigned c = 0;

	if (a->present != b->present || a->ifindex != b->ifindex)
		c |= LINKWATCH_CHG_PRESENT;
	if (a->up != b->up)
		c |= LINKWATCH_CHG_UP;
	if (memcmp(a->mac, b->mac, sizeof(a->mac)) != 0)
		c |= LINKWATCH_CHG_MAC;
	if (a->mtu != b->mtu)
		c |= LINKWATCH_CHG_MTU;
	return c;
}

/* Store a new state and report what changed. */
static void update(struct linkwatch *w, struct watched *x, const struct linkwatch_state *now)
{
	unsigned c = diff(&x->st, now);

	x->st = *now;
	if (c && w->cb)
		w->cb(&x->st, c, w->arg);
}

/* Read one interface's state from the kernel. */
static int read_state(struct linkwatch *w, const char *name, struct linkwatch_state *st)
{
	struct rtnl_link *l = NULL;
	int r;

	memset(st, 0, sizeof(*st));
	memcpy(st->name, name, strlen(name) + 1);
	r = rtnl_link_get_kernel(w->query, 0, name, &l);
	if (r < 0) {
		r = nlerr(r);
		return r == -ENODEV ? 0 : r; /* absent is a state, not an error */
	}
	from_link(l, st);
	rtnl_link_put(l);
	return 0;
}

static void resync(struct linkwatch *w)
{
	struct linkwatch_state st;
	unsigned i;

	w->resyncs++;
	for (i = 0; i < w->n; i++)
		if (read_state(w, w->w[i].st.name, &st) == 0)
			update(w, &w->w[i], &st);
}

struct parse_ctx {
	struct linkwatch *w;
	int type;
};

static void on_object(struct nl_object *obj, void *arg)
{
	struct parse_ctx *ctx = arg;
	struct linkwatch *w = ctx->w;
	struct rtnl_link *l = (struct rtnl_link *)obj;
	const char *name = rtnl_link_get_name(l);
	int ifindex = rtnl_link_get_ifindex(l);
	struct linkwatch_state st;
	unsigned i;

	for (i = 0; i < w->n; i++) {
		struct watched *x = &w->w[i];

		/* By index once known (a rename keeps the index); by name otherwise. */
		if (x->st.present ? x->st.ifindex != ifindex : !name || strcmp(name, x->st.name))
			continue;
		st = x->st;
		if (ctx->type == RTM_DELLINK)
			gone(&st);
		else
			from_link(l, &st);
		update(w, x, &st);
	}
}

static int on_msg(struct nl_msg *msg, void *arg)
{
	struct parse_ctx ctx = { .w = arg, .type = nlmsg_hdr(msg)->nlmsg_type };

	if (ctx.type == RTM_NEWLINK || ctx.type == RTM_DELLINK)
		nl_msg_parse(msg, on_object, &ctx);
	return NL_OK;
}

static void on_readable(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct linkwatch *w = arg;
	int r;

	(void)loop;
	(void)fd;
	(void)events;
	for (;;) {
		r = nl_recvmsgs_default(w->ev);
		if (r >= 0)
			continue;
		if (r == -NLE_AGAIN)
			break;
		if (r == -NLE_NOMEM) { /* ENOBUFS: events were lost */
			log_warning("netlink: link event socket overran; re-reading %u interfaces",
				    w->n);
			resync(w);
			continue;
		}
		log_warning("netlink: receive: %s", nl_geterror(r));
		break;
	}
}

int linkwatch_new(struct evloop *loop, linkwatch_cb cb, void *arg, struct linkwatch **out)
{
	struct linkwatch *w = calloc(1, sizeof(*w));
	int r = -ENOMEM;

	if (!w)
		return -ENOMEM;
	w->loop = loop;
	w->cb = cb;
	w->arg = arg;
	w->ev = nl_socket_alloc();
	w->query = nl_socket_alloc();
	if (!w->ev || !w->query)
		goto fail;
	nl_socket_disable_seq_check(w->ev);
	nl_socket_modify_cb(w->ev, NL_CB_VALID, NL_CB_CUSTOM, on_msg, w);
	if ((r = nl_connect(w->ev, NETLINK_ROUTE)) < 0 ||
	    (r = nl_socket_add_membership(w->ev, RTNLGRP_LINK)) < 0 ||
	    (r = nl_socket_set_nonblocking(w->ev)) < 0 ||
	    (r = nl_connect(w->query, NETLINK_ROUTE)) < 0) {
		log_error("netlink: %s", nl_geterror(r));
		r = nlerr(r);
		goto fail;
	}
	nl_socket_set_buffer_size(w->ev, 1 << 20, 0);
	r = evloop_add_fd(loop, nl_socket_get_fd(w->ev), EPOLLIN, on_readable, w);
	if (r < 0)
		goto fail;
	*out = w;
	return 0;
fail:
	if (w->ev)
		nl_socket_free(w->ev);
	if (w->query)
		nl_socket_free(w->query);
	free(w);
	return r;
}

void linkwatch_free(struct linkwatch *w)
{
	if (!w)
		return;
	evloop_del_fd(w->loop, nl_socket_get_fd(w->ev));
	nl_socket_free(w->ev);
	nl_socket_free(w->query);
	free(w->w);
	free(w);
}

int linkwatch_add(struct linkwatch *w, const char *ifname, struct linkwatch_state *st)
{
	struct watched *x;
	struct linkwatch_state now;
	int r;

	if (!ifname || !*ifname || strlen(ifname) >= IF_NAMESIZE)
		return -EINVAL;
	if (find_name(w, ifname))
		return -EEXIST;
	if (w->n == w->cap) {
		unsigned cap = w->cap ? w->cap * 2 : 8;
		struct watched *nw = realloc(w->w, cap * sizeof(*nw));

		if (!nw)
			return -ENOMEM;
		w->w = nw;
		w->cap = cap;
	}
	r = read_state(w, ifname, &now);
	if (r < 0)
		return r;
	x = &w->w[w->n++];
	x->st = now;
	if (st)
		*st = now;
	return 0;
}

int linkwatch_del(struct linkwatch *w, const char *ifname)
{
	struct watched *x = find_name(w, ifname);

	if (!x)
		return -ENOENT;
	*x = w->w[--w->n];
	return 0;
}

int linkwatch_get(struct linkwatch *w, const char *ifname, struct linkwatch_state *st)
{
	struct watched *x = find_name(w, ifname);

	if (!x)
		return -ENOENT;
	*st = x->st;
	return 0;
}

unsigned linkwatch_resyncs(const struct linkwatch *w)
{
	return w->resyncs;
}
