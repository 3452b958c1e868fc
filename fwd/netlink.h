/*
 * Link state, MAC and MTU of the interfaces the gateway uses, followed through
 * rtnetlink (libnl-3 route): a control-thread object on lib/evloop (prefix nl_watch_)
 * that reports each change of a watched interface through a callback, so the control
 * thread can take a port down when its link goes down (ethp set_link) and re-read its
 * MTU and MAC.
 *
 * One netlink socket subscribed to RTNLGRP_LINK, non-blocking, on the loop; a second
 * socket for synchronous queries (the state when an interface is added, and a full
 * re-read when the kernel reports that the event socket overran: ENOBUFS).
 *
 * "up" means administratively up and running (IFF_UP and IFF_RUNNING: carrier
 * present); a veth whose peer goes down loses IFF_RUNNING.
 *
 * Threads: everything here runs on the loop's thread (the control thread).
 */
#ifndef IBGW_FWD_NETLINK_H
#define IBGW_FWD_NETLINK_H

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

struct evloop;
struct nl_watch;

struct nl_link_state {
	char name[IF_NAMESIZE];
	int ifindex;  /* 0 while the interface does not exist */
	bool present; /* the interface exists */
	bool up;      /* IFF_UP and IFF_RUNNING */
	uint8_t mac[6];
	uint32_t mtu;
	unsigned flags; /* IFF_* */
};

/* Which attributes changed (bit mask given to the callback). */
#define NL_CHG_PRESENT 0x1 /* appeared or disappeared */
#define NL_CHG_UP      0x2
#define NL_CHG_MAC     0x4
#define NL_CHG_MTU     0x8

typedef void (*nl_watch_cb)(const struct nl_link_state *st, unsigned changes, void *arg);

/* Create the watcher on loop. Returns 0 or -errno. */
int nl_watch_new(struct evloop *loop, nl_watch_cb cb, void *arg, struct nl_watch **out);
void nl_watch_free(struct nl_watch *w);

/* Watch an interface by name (it need not exist yet). Its current state is read now
 * and stored in *st if st is not NULL; the callback runs only for later changes.
 * Returns 0, -EEXIST if already watched, -EINVAL for a bad name, -ENOMEM. */
int nl_watch_add(struct nl_watch *w, const char *ifname, struct nl_link_state *st);
int nl_watch_del(struct nl_watch *w, const char *ifname);
/* The last known state of a watched interface: 0 or -ENOENT. */
int nl_watch_get(struct nl_watch *w, const char *ifname, struct nl_link_state *st);
/* How many times the event socket overran and everything was re-read (for tests). */
unsigned nl_watch_resyncs(const struct nl_watch *w);

#endif
