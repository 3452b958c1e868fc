/*
 * kroute_sync: kernel/kroute on a small RIB that commands on stdin build, for the suite
 * test/integration/kroute.sh (run it inside a network namespace).
 *
 *   kroute_sync [-t TABLE] [-p PROTO] [-m PRIORITY] [-i IMPORT_TABLE] [-x IFINDEX]...
 *               [-s SOURCES] [-n]
 *     -t/-p/-m  export table, protocol, kernel priority (defaults of kroute.h)
 *     -i        also import this table: routes print as "import add|del ..."
 *     -x        a RIB interface not to export through (the Ethernet side); repeatable
 *     -s        exported sources, comma separated: connected,static,learned,kernel
 *     -n        no export (import only)
 *
 * Commands (one a line; each answered with "done N ret=R" in order, N counting from 1):
 *   addr ADDR/LEN IFINDEX                 rt_add_connected (RIB interfaces are numbers)
 *   route PREFIX SOURCE [metric M] via GW [dev IFINDEX] | dev IFINDEX | blackhole
 *                                         rt_replace (SOURCE: static, learned, ...)
 *   del PREFIX SOURCE [metric M]          rt_del
 *   kick                                  kroute_export_kick (the sync follows)
 *   sync | full                           kroute_export_sync now (full: read first)
 *   withdraw                              kroute_withdraw
 *   stats                                 one "stats exported=.. failed=.. ..." line
 *   quit
 * Imported routes print as "import add PREFIX metric M via GW dev K | dev K |
 * blackhole" and "import del PREFIX metric M" (K: the kernel's interface index; the
 * tool's map_ifindex is the identity). A line "synced" follows every export sync a
 * kick started (the tool watches the stats).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "kernel/kroute.h"
#include "table/route.h"
#include "lib/addr.h"
#include "lib/evloop.h"
#include "lib/log.h"

static struct rt_table *rt;
static struct kroute *kr;
static struct evloop *loop;
static unsigned ncmd;
static char inbuf[8192];
static size_t inlen;
static uint64_t last_syncs;
static struct evtimer *watch_t;

static const char *src_names[] = { "connected", "static", "learned", "kernel" };

static int source_of(const char *s)
{
	unsigned i;

	for (i = 0; i < 4; i++)
		if (strcmp(s, src_names[i]) == 0)
			return (int)i;
	return -1;
}

static void print_route(const char *what, int event, const struct rt_route *r)
{
	char b[IP_PREFIX_STRLEN], g[IP_ADDR_STRLEN];
	unsigned i;

	printf("%s %s %s metric %u", what, event == KROUTE_ADD ? "add" : "del",
	       ip_prefix_format(&r->prefix, b, sizeof(b)), r->metric);
	if (event == KROUTE_ADD)
		for (i = 0; i < r->nnh; i++) {
			const struct rt_nexthop *h = &r->nh[i];

			if (h->type == RT_NH_BLACKHOLE)
				printf(" blackhole");
			else if (h->type == RT_NH_GATEWAY)
				printf(" via %s dev %u", ip_addr_format(&h->gw, g, sizeof(g)),
				       h->ifindex);
			else
				printf(" dev %u", h->ifindex);
		}
	printf("\n");
	fflush(stdout);
}

static void on_import(void *ctx, int event, const struct rt_route *r)
{
	(void)ctx;
	print_route("import", event, r);
}

static uint32_t map_identity(void *ctx, int kernel_ifindex)
{
	(void)ctx;
	return (uint32_t)kernel_ifindex;
}

/* "route PREFIX SOURCE [metric M] via GW [dev N] | dev N | blackhole" and "del". */
static int cmd_route(char **tok, int n, bool del)
{
	struct rt_route r;
	int i = 3, s;

	memset(&r, 0, sizeof(r));
	if (n < 3 || ip_prefix_parse(tok[1], false, &r.prefix) < 0 || (s = source_of(tok[2])) < 0)
		return -EINVAL;
	r.source = (uint8_t)s;
	if (i + 1 < n && strcmp(tok[i], "metric") == 0) {
		r.metric = (uint32_t)strtoul(tok[i + 1], NULL, 10);
		i += 2;
	}
	if (del)
		return i == n ? rt_del(rt, &r.prefix, r.source, r.metric) : -EINVAL;
	r.nnh = 1;
	if (i < n && strcmp(tok[i], "blackhole") == 0) {
		r.nh[0].type = RT_NH_BLACKHOLE;
		i++;
	} else if (i + 1 < n && strcmp(tok[i], "via") == 0) {
		r.nh[0].type = RT_NH_GATEWAY;
		if (ip_addr_parse(tok[i + 1], &r.nh[0].gw) < 0)
			return -EINVAL;
		i += 2;
		if (i + 1 < n && strcmp(tok[i], "dev") == 0) {
			r.nh[0].ifindex = (uint32_t)strtoul(tok[i + 1], NULL, 10);
			i += 2;
		}
	} else if (i + 1 < n && strcmp(tok[i], "dev") == 0) {
		r.nh[0].type = RT_NH_CONNECTED;
		r.nh[0].ifindex = (uint32_t)strtoul(tok[i + 1], NULL, 10);
		i += 2;
	} else {
		return -EINVAL;
	}
	return i == n ? rt_replace(rt, &r) : -EINVAL;
}

static void print_stats(void)
{
	struct kroute_stats st;

	kroute_stats(kr, &st);
	printf("stats exported=%u failed=%u imported=%u syncs=%llu full=%llu adds=%llu "
	       "replaces=%llu dels=%llu errors=%llu import_reads=%llu\n",
	       st.exported, st.failed, st.imported, (unsigned long long)st.syncs,
	       (unsigned long long)st.full_syncs, (unsigned long long)st.adds,
	       (unsigned long long)st.replaces, (unsigned long long)st.dels,
	       (unsigned long long)st.errors, (unsigned long long)st.import_reads);
}

static void command(char *line)
{
	char *tok[16], *save = NULL, *t;
	int n = 0, ret = -EINVAL;

	for (t = strtok_r(line, " \t", &save); t && n < 16; t = strtok_r(NULL, " \t", &save))
		tok[n++] = t;
	if (n == 0)
		return;
	ncmd++;
	if (strcmp(tok[0], "addr") == 0 && n == 3) {
		struct ip_prefix a;

		if (ip_prefix_parse(tok[1], true, &a) == 0)
			ret = rt_add_connected(rt, &a, (uint32_t)strtoul(tok[2], NULL, 10));
	} else if (strcmp(tok[0], "route") == 0) {
		ret = cmd_route(tok, n, false);
	} else if (strcmp(tok[0], "del") == 0) {
		ret = cmd_route(tok, n, true);
	} else if (strcmp(tok[0], "kick") == 0 && kr) {
		kroute_export_kick(kr);
		ret = 0;
	} else if ((strcmp(tok[0], "sync") == 0 || strcmp(tok[0], "full") == 0) && kr) {
		ret = kroute_export_sync(kr, tok[0][0] == 'f');
	} else if (strcmp(tok[0], "withdraw") == 0 && kr) {
		ret = kroute_withdraw(kr);
	} else if (strcmp(tok[0], "stats") == 0 && kr) {
		print_stats();
		ret = 0;
	} else if (strcmp(tok[0], "quit") == 0) {
		evloop_stop(loop);
		ret = 0;
	}
	printf("done %u ret=%d\n", ncmd, ret);
	fflush(stdout);
}

static void on_stdin(struct evloop *l, int fd, uint32_t events, void *arg)
{
	ssize_t n;
	char *nl;

	(void)arg;
	(void)events;
	n = read(fd, inbuf + inlen, sizeof(inbuf) - 1 - inlen);
	if (n <= 0) {
		evloop_stop(l);
		return;
	}
	inlen += (size_t)n;
	while ((nl = memchr(inbuf, '\n', inlen))) {
		size_t used = (size_t)(nl - inbuf) + 1;

		*nl = 0;
		command(inbuf);
		memmove(inbuf, inbuf + used, inlen - used);
		inlen -= used;
	}
	if (inlen == sizeof(inbuf) - 1)
		inlen = 0; /* a line too long: dropped */
}

static void on_watch(struct evloop *l, struct evtimer *t, void *arg)
{
	struct kroute_stats st;

	(void)l;
	(void)t;
	(void)arg;
	kroute_stats(kr, &st);
	if (st.syncs != last_syncs) {
		last_syncs = st.syncs;
		printf("synced\n");
		fflush(stdout);
	}
}

static unsigned parse_sources(const char *s)
{
	char buf[128], *save = NULL, *t;
	unsigned m = 0;
	int x;

	snprintf(buf, sizeof(buf), "%s", s);
	for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if ((x = source_of(t)) < 0) {
			fprintf(stderr, "kroute_sync: unknown source '%s'\n", t);
			exit(2);
		}
		m |= 1u << x;
	}
	return m;
}

int main(int argc, char **argv)
{
	struct kroute_config c = { 0 };
	struct rt_config rc = { 0 };
	bool export = true;
	int opt, ret;

	log_init("kroute_sync", LOG_TARGET_STDERR, LOG_DEBUG);
	while ((opt = getopt(argc, argv, "t:p:m:i:x:s:n")) != -1) {
		switch (opt) {
		case 't':
			c.table = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'p':
			c.protocol = (uint8_t)strtoul(optarg, NULL, 10);
			break;
		case 'm':
			c.priority = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'i':
			c.import_table = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'x':
			if (c.n_exclude < KROUTE_EXCLUDE_MAX)
				c.exclude_if[c.n_exclude++] = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 's':
			c.sources = parse_sources(optarg);
			break;
		case 'n':
			export = false;
			break;
		default:
			fprintf(stderr,
				"usage: kroute_sync [-t T] [-p P] [-m PRIO] [-i T] [-x IF]... "
				"[-s SOURCES] [-n]\n");
			return 2;
		}
	}
	if ((ret = evloop_new(&loop)) < 0 || (ret = rt_create(&rt, &rc)) < 0) {
		fprintf(stderr, "kroute_sync: %s\n", strerror(-ret));
		return 1;
	}
	c.rt = export ? rt : NULL;
	c.import_cb = on_import;
	c.map_ifindex = map_identity;
	if ((ret = kroute_new(loop, &c, &kr)) < 0) {
		fprintf(stderr, "kroute_sync: kroute_new: %s\n", strerror(-ret));
		return 1;
	}
	fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
	if (evloop_add_fd(loop, 0, EPOLLIN, on_stdin, NULL) < 0)
		return 1;
	watch_t = evtimer_new(loop, on_watch, NULL);
	evtimer_start(watch_t, 5, 5);
	printf("ready\n");
	fflush(stdout);
	ret = evloop_run(loop);
	evtimer_free(watch_t);
	kroute_free(kr);
	rt_destroy(rt);
	evloop_free(loop);
	return ret < 0;
}
