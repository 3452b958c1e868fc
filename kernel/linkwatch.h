/*
 * Link state, MAC and MTU of the interfaces the gateway uses, followed through
 * rtnetlink (libnl-3 route): a control-thread object on lib/evloop (prefix linkwatch_)
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
#ifndef IBGW_KERNEL_LINKWATCH_H
#define IBGW_KERNEL_LINKWATCH_H

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

struct evloop;
struct linkwatch;

struct linkwatch_state {
	char name[IF_NAMESIZE];
	int ifindex;  /* 0 while the interface does not exist */
	bool present; /* the interface exists */
	bool up;      /* IFF_UP and IFF_RUNNING */
	uint8_t mac[6];
	uint32_t mtu;
	unsigned flags; /* IFF_* */
};

/* Which attributes changed (bit mask given to the callback). */
#define LINKWATCH_CHG_PRESENT 0x1 /* appeared or disappeared */
#define LINKWATCH_CHG_UP      0x2
#define LINKWATCH_CHG_MAC     0x4
#define LINKWATCH_CHG_MTU     0x8

typedef void (*linkwatch_cb)(const struct linkwatch_state *st, unsigned changes, void *arg);

/* Create the watcher on loop. Returns 0 or -errno. */
int linkwatch_new(struct evloop *loop, linkwatch_cb cb, void *arg, struct linkwatch **out);
void linkwatch_free(struct linkwatch *w);

/* Watch an interface by name (it need not exist yet). Its current state is read now
 * and stored in *st if st is not NULL; the callback runs only for later changes.
 * Returns 0, -EEXIST if already watched, -EINVAL for a bad name, -ENOMEM. */
int linkwatch_add(struct linkwatch *w, const char *ifname, struct linkwatch_state *st);
int linkwatch_del(struct linkwatch *w, const char *ifname);
/* The last known state of a watched interface: 0 or -ENOENT. */
int linkwatch_get(struct linkwatch *w, const char *ifname, struct linkwatch_state *st);
/* How many times the event socket overran and everything was re-read (for tests). */
unsigned linkwatch_resyncs(const struct linkwatch *w);

#endif
