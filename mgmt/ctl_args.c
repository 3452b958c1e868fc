/*
 * Write requests' arguments: JSON and gwctl's words to C and back (ctl_args.h).
 *
 * Every refusal writes one sentence to why naming the offending value, so that gwctl
 * and the daemon can hand it to the operator as is. User text quoted in a message is
 * cut (%.64s): a request may be 64 KiB and the message must stay one readable line.
 */
#include "mgmt/ctl_args.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <json-c/json.h>

static int fail(char why[CTL_ARGS_WHY_LEN], const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int fail(char why[CTL_ARGS_WHY_LEN], const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, CTL_ARGS_WHY_LEN, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static const char *family_name(const struct ip_addr *a)
{
	return a->family == AF_INET ? "IPv4" : "IPv6";
}

/* Not an address a neighbour or a gateway can have: unspecified, broadcast, multicast. */
static bool is_unicast(const struct ip_addr *a)
{
	static const uint8_t zero[16];

	if (a->family == AF_INET)
		return memcmp(a->bytes, zero, 4) && (a->bytes[0] & 0xf0) != 0xe0 &&
		       !(a->bytes[0] == 255 && a->bytes[1] == 255 && a->bytes[2] == 255 &&
			 a->bytes[3] == 255);
	return memcmp(a->bytes, zero, 16) && a->bytes[0] != 0xff;
}

/* ---- values ------------------------------------------------------------------------ */

static int parse_prefix(const char *text, struct ip_prefix *out, char why[CTL_ARGS_WHY_LEN])
{
	char buf[IP_PREFIX_STRLEN];

	if (ip_prefix_parse(text, false, out) == 0)
		return 0;
	if (ip_prefix_parse(text, true, out) == 0) {
		ip_prefix_mask(out);
		return fail(why, "'%.64s' has host bits set (the prefix is %s)", text,
			    ip_prefix_format(out, buf, sizeof(buf)));
	}
	return fail(why, "'%.64s' is not a prefix (10.1.0.0/16, fd00::/64)", text);
}

static int parse_addr(const char *text, const char *what, struct ip_addr *out,
		      char why[CTL_ARGS_WHY_LEN])
{
	if (ip_addr_parse(text, out) == 0)
		return 0;
	return fail(why, "%s '%.64s' is not an IP address", what, text);
}

/* Interface names: what the config accepts, printable and without blanks (they are
 * quoted into logs and messages). */
/* An interface's or tenant's name (what: "dev", "tenant"; noun: "an interface name"). */
static int parse_name(const char *text, const char *what, const char *noun, char out[CTL_NAME_MAX],
		      char why[CTL_ARGS_WHY_LEN])
{
	size_t n = strlen(text);

	if (n == 0)
		return fail(why, "%s needs %s", what, noun);
	if (n >= CTL_NAME_MAX)
		return fail(why, "%s '%.64s' is longer than %d characters", what, text,
			    CTL_NAME_MAX - 1);
	for (size_t i = 0; i < n; i++)
		if (!isgraph((unsigned char)text[i]))
			return fail(why, "%s name contains a blank or control character", what);
	memcpy(out, text, n + 1);
	return 0;
}

static int parse_dev(const char *text, char out[CTL_NAME_MAX], char why[CTL_ARGS_WHY_LEN])
{
	return parse_name(text, "dev", "an interface name", out, why);
}

/* A tenant's name; "default" (the tenant of what names none) is kept as "". */
static int parse_tenant(const char *text, char out[CTL_NAME_MAX], char why[CTL_ARGS_WHY_LEN])
{
	if (parse_name(text, "tenant", "a tenant name", out, why) < 0)
		return -EINVAL;
	if (!strcmp(out, "default"))
		out[0] = '\0';
	return 0;
}

static int parse_metric(const char *text, uint32_t *out, char why[CTL_ARGS_WHY_LEN])
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(text, &end, 10);
	if (!isdigit((unsigned char)text[0]) || *end || errno || v > UINT32_MAX)
		return fail(why, "metric '%.64s' is not a number 0..4294967295", text);
	*out = (uint32_t)v;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int ctl_lladdr_parse(const char *text, uint8_t out[CTL_LLADDR_MAX], char why[CTL_ARGS_WHY_LEN])
{
	const char *p = text;
	int n = 0;

	for (;;) {
		int hi = hexval(p[0]), lo = hi < 0 ? -1 : hexval(p[1]);

		if (lo < 0 || (p[2] != ':' && p[2] != '\0'))
			return fail(why,
				    "lladdr '%.64s' is not octets as two hex digits joined by "
				    "colons (02:1b:00:00:00:08)",
				    text);
		if (n == CTL_LLADDR_MAX) {
			snprintf(why, CTL_ARGS_WHY_LEN,
				 "lladdr '%.64s' is longer than %d octets: a MAC has 6, an IPoIB "
				 "hardware address 20",
				 text, CTL_LLADDR_MAX);
			return -EMSGSIZE;
		}
		out[n++] = (uint8_t)(hi << 4 | lo);
		if (p[2] == '\0')
			break;
		p += 3;
	}
	if (n != 6 && n != CTL_LLADDR_MAX) {
		snprintf(why, CTL_ARGS_WHY_LEN,
			 "lladdr has %d octets: a MAC has 6, an IPoIB hardware address 20", n);
		return -EMSGSIZE;
	}
	return n;
}

char *ctl_lladdr_format(const uint8_t *addr, size_t len, char *buf, size_t buflen)
{
	size_t o = 0;

	if (buflen)
		buf[0] = '\0';
	for (size_t i = 0; i < len && o + 3 <= buflen; i++)
		o += (size_t)snprintf(buf + o, buflen - o, "%s%02x", i ? ":" : "", addr[i]);
	return buf;
}

/* ---- checks common to both forms ------------------------------------------------------ */

static bool nh_equal(const struct ctl_nexthop *a, const struct ctl_nexthop *b)
{
	return a->has_gw == b->has_gw && (!a->has_gw || ip_addr_equal(&a->gw, &b->gw)) &&
	       !strcmp(a->dev, b->dev);
}

static int route_check(const struct ctl_route *r, bool for_add, char why[CTL_ARGS_WHY_LEN])
{
	char a[IP_ADDR_STRLEN], p[IP_PREFIX_STRLEN];

	if (r->blackhole && r->n_nh)
		return fail(why, "a blackhole route takes no gateway and no dev");
	if (for_add && !r->blackhole && !r->n_nh)
		return fail(why, "a route needs a gateway (via), a dev or type blackhole");
	for (unsigned i = 0; i < r->n_nh; i++) {
		const struct ctl_nexthop *nh = &r->nh[i];

		if (!nh->has_gw && r->n_nh > 1)
			return fail(why, "every next hop of a multipath route needs a gateway");
		if (!nh->has_gw)
			continue;
		ip_addr_format(&nh->gw, a, sizeof(a));
		if (nh->gw.family != r->dst.addr.family)
			return fail(why, "gateway %s is %s but %s is %s", a, family_name(&nh->gw),
				    ip_prefix_format(&r->dst, p, sizeof(p)),
				    family_name(&r->dst.addr));
		if (!is_unicast(&nh->gw))
			return fail(why, "gateway %s is not a unicast address", a);
		for (unsigned j = 0; j < i; j++)
			if (nh_equal(nh, &r->nh[j]))
				return fail(why, "next hop via %s is given twice", a);
	}
	return 0;
}

static int neigh_check(const struct ctl_neigh *n, bool for_add, char why[CTL_ARGS_WHY_LEN])
{
	char a[IP_ADDR_STRLEN];

	if (!is_unicast(&n->dst))
		return fail(why, "%s is not a unicast address",
			    ip_addr_format(&n->dst, a, sizeof(a)));
	if (!n->dev[0])
		return fail(why, "a neighbour needs dev NAME");
	if (for_add && !n->lladdr_len)
		return fail(why, "a neighbour add needs lladdr LLADDR");
	return 0;
}

/* ---- JSON -------------------------------------------------------------------------- */

/* Refuse keys outside the list; "keys" is the list as a phrase for the message. */
static int check_keys(struct json_object *o, const char *const *allowed, const char *what,
		      const char *keys, char why[CTL_ARGS_WHY_LEN])
{
	json_object_object_foreach(o, k, v)
	{
		bool known = false;

		(void)v;
		for (unsigned i = 0; allowed[i] && !known; i++)
			known = !strcmp(k, allowed[i]);
		if (!known)
			return fail(why, "%s takes only %s; unknown key \"%.64s\"", what, keys, k);
	}
	return 0;
}

/* *out: the string value, or NULL when absent (an error when required). */
static int get_string(struct json_object *o, const char *key, bool required, const char *what,
		      const char **out, char why[CTL_ARGS_WHY_LEN])
{
	struct json_object *v;

	*out = NULL;
	if (!o || !json_object_object_get_ex(o, key, &v)) {
		if (required)
			return fail(why, "%s needs \"%s\"", what, key);
		return 0;
	}
	if (!json_object_is_type(v, json_type_string))
		return fail(why, "\"%s\" must be a string", key);
	*out = json_object_get_string(v);
	return 0;
}

static int nh_from_json(const char *gw, const char *dev, struct ctl_nexthop *nh,
			char why[CTL_ARGS_WHY_LEN])
{
	memset(nh, 0, sizeof(*nh));
	if (gw) {
		if (parse_addr(gw, "gateway", &nh->gw, why) < 0)
			return -EINVAL;
		nh->has_gw = true;
	}
	if (dev && parse_dev(dev, nh->dev, why) < 0)
		return -EINVAL;
	return 0;
}

static int nexthops_from_json(struct json_object *a, struct ctl_route *r,
			      char why[CTL_ARGS_WHY_LEN])
{
	static const char *const keys[] = { "gateway", "dev", NULL };
	size_t n;

	if (!json_object_is_type(a, json_type_array) || json_object_array_length(a) == 0)
		return fail(why, "\"nexthops\" must be a non-empty array of objects");
	n = json_object_array_length(a);
	if (n > CTL_ROUTE_MAX_NH)
		return fail(why, "a route has at most %d next hops (%zu given)", CTL_ROUTE_MAX_NH,
			    n);
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		const char *gw, *dev;

		if (!json_object_is_type(e, json_type_object))
			return fail(why, "\"nexthops\" must be a non-empty array of objects");
		if (check_keys(e, keys, "a next hop", "\"gateway\" and \"dev\"", why) < 0 ||
		    get_string(e, "gateway", true, "a next hop in \"nexthops\"", &gw, why) < 0 ||
		    get_string(e, "dev", false, "a next hop", &dev, why) < 0 ||
		    nh_from_json(gw, dev, &r->nh[i], why) < 0)
			return -EINVAL;
	}
	r->n_nh = (unsigned)n;
	return 0;
}

static int metric_from_json(struct json_object *args, uint32_t *out, char why[CTL_ARGS_WHY_LEN])
{
	struct json_object *v;
	int64_t m;

	*out = 0;
	if (!json_object_object_get_ex(args, "metric", &v))
		return 0;
	if (!json_object_is_type(v, json_type_int))
		return fail(why, "\"metric\" must be an integer 0..4294967295");
	errno = 0;
	m = json_object_get_int64(v);
	if (errno || m < 0 || m > UINT32_MAX)
		return fail(why, "\"metric\" must be an integer 0..4294967295");
	*out = (uint32_t)m;
	return 0;
}

int ctl_route_from_json(struct json_object *args, bool for_add, struct ctl_route *out,
			char why[CTL_ARGS_WHY_LEN])
{
	static const char *const keys[] = { "dst",    "type",     "gateway", "dev",
					    "metric", "nexthops", "tenant",  NULL };
	const char *what = for_add ? "route add" : "route del";
	const char *dst, *type, *gw, *dev, *tenant;
	struct json_object *nhs = NULL;

	memset(out, 0, sizeof(*out));
	if (!args)
		return fail(why, "%s needs \"dst\"", what);
	if (check_keys(args, keys, what,
		       "\"dst\", \"type\", \"gateway\", \"dev\", \"metric\", \"nexthops\" and "
		       "\"tenant\"",
		       why) < 0 ||
	    get_string(args, "dst", true, what, &dst, why) < 0 ||
	    get_string(args, "tenant", false, what, &tenant, why) < 0 ||
	    (tenant && parse_tenant(tenant, out->tenant, why) < 0) ||
	    get_string(args, "type", false, what, &type, why) < 0 ||
	    get_string(args, "gateway", false, what, &gw, why) < 0 ||
	    get_string(args, "dev", false, what, &dev, why) < 0 ||
	    metric_from_json(args, &out->metric, why) < 0 || parse_prefix(dst, &out->dst, why) < 0)
		return -EINVAL;
	if (type && strcmp(type, "unicast") && strcmp(type, "blackhole"))
		return fail(why, "\"type\" must be \"unicast\" or \"blackhole\", not \"%.64s\"",
			    type);
	out->blackhole = type && !strcmp(type, "blackhole");
	json_object_object_get_ex(args, "nexthops", &nhs);
	if (nhs && (gw || dev))
		return fail(why, "give either \"gateway\"/\"dev\" or \"nexthops\", not both");
	if (nhs && nexthops_from_json(nhs, out, why) < 0)
		return -EINVAL;
	if (gw || dev) {
		if (nh_from_json(gw, dev, &out->nh[0], why) < 0)
			return -EINVAL;
		out->n_nh = 1;
	}
	return route_check(out, for_add, why);
}

int ctl_neigh_from_json(struct json_object *args, bool for_add, struct ctl_neigh *out,
			char why[CTL_ARGS_WHY_LEN])
{
	static const char *const keys[] = { "dst", "lladdr", "dev", NULL };
	const char *what = for_add ? "neigh add" : "neigh del";
	const char *dst, *ll, *dev;
	int n;

	memset(out, 0, sizeof(*out));
	if (!args)
		return fail(why, "%s needs \"dst\"", what);
	if (check_keys(args, keys, what, "\"dst\", \"lladdr\" and \"dev\"", why) < 0 ||
	    get_string(args, "dst", true, what, &dst, why) < 0 ||
	    get_string(args, "dev", true, what, &dev, why) < 0 ||
	    get_string(args, "lladdr", for_add, what, &ll, why) < 0 ||
	    parse_addr(dst, "neighbour", &out->dst, why) < 0 || parse_dev(dev, out->dev, why) < 0)
		return -EINVAL;
	if (ll) {
		n = ctl_lladdr_parse(ll, out->lladdr, why);
		if (n < 0)
			return -EINVAL;
		out->lladdr_len = (uint8_t)n;
	}
	return neigh_check(out, for_add, why);
}

int ctl_neigh_flush_from_json(struct json_object *args, struct ctl_neigh_flush *out,
			      char why[CTL_ARGS_WHY_LEN])
{
	static const char *const keys[] = { "dev", "to", NULL };
	const char *dev, *to;

	memset(out, 0, sizeof(*out));
	if (!args)
		return fail(why, "neigh flush needs \"dev\"");
	if (check_keys(args, keys, "neigh flush", "\"dev\" and \"to\"", why) < 0 ||
	    get_string(args, "dev", true, "neigh flush", &dev, why) < 0 ||
	    get_string(args, "to", false, "neigh flush", &to, why) < 0 ||
	    parse_dev(dev, out->dev, why) < 0)
		return -EINVAL;
	if (to && parse_prefix(to, &out->to, why) < 0)
		return -EINVAL;
	out->has_to = to != NULL;
	return 0;
}

int ctl_path_flush_from_json(struct json_object *args, struct ctl_path_flush *out,
			     char why[CTL_ARGS_WHY_LEN])
{
	static const char *const keys[] = { "gid", NULL };
	const char *gid, *gwhy = NULL;

	memset(out, 0, sizeof(*out));
	if (!args)
		return 0;
	if (check_keys(args, keys, "path flush", "\"gid\"", why) < 0 ||
	    get_string(args, "gid", false, "path flush", &gid, why) < 0)
		return -EINVAL;
	if (gid && ib_gid_parse_why(gid, &out->gid, &gwhy) < 0)
		return fail(why, "gid '%.64s' is not a GID: %s", gid, gwhy ? gwhy : "malformed");
	out->has_gid = gid != NULL;
	return 0;
}

static void add_str(struct json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, json_object_new_string(v));
}

struct json_object *ctl_route_to_json(const struct ctl_route *r)
{
	struct json_object *o = json_object_new_object();
	char buf[IP_PREFIX_STRLEN];

	if (!o)
		return NULL;
	add_str(o, "dst", ip_prefix_format(&r->dst, buf, sizeof(buf)));
	if (r->blackhole)
		add_str(o, "type", "blackhole");
	json_object_object_add(o, "metric", json_object_new_int64(r->metric));
	if (r->tenant[0])
		add_str(o, "tenant", r->tenant);
	if (r->n_nh == 1) {
		if (r->nh[0].has_gw)
			add_str(o, "gateway", ip_addr_format(&r->nh[0].gw, buf, sizeof(buf)));
		if (r->nh[0].dev[0])
			add_str(o, "dev", r->nh[0].dev);
	} else if (r->n_nh > 1) {
		struct json_object *a = json_object_new_array();

		for (unsigned i = 0; i < r->n_nh; i++) {
			struct json_object *nh = json_object_new_object();

			if (r->nh[i].has_gw)
				add_str(nh, "gateway",
					ip_addr_format(&r->nh[i].gw, buf, sizeof(buf)));
			if (r->nh[i].dev[0])
				add_str(nh, "dev", r->nh[i].dev);
			json_object_array_add(a, nh);
		}
		json_object_object_add(o, "nexthops", a);
	}
	return o;
}

struct json_object *ctl_neigh_to_json(const struct ctl_neigh *n)
{
	struct json_object *o = json_object_new_object();
	char buf[3 * CTL_LLADDR_MAX];

	if (!o)
		return NULL;
	add_str(o, "dst", ip_addr_format(&n->dst, buf, sizeof(buf)));
	add_str(o, "dev", n->dev);
	if (n->lladdr_len)
		add_str(o, "lladdr", ctl_lladdr_format(n->lladdr, n->lladdr_len, buf, sizeof(buf)));
	return o;
}

struct json_object *ctl_neigh_flush_to_json(const struct ctl_neigh_flush *f)
{
	struct json_object *o = json_object_new_object();
	char buf[IP_PREFIX_STRLEN];

	if (!o)
		return NULL;
	add_str(o, "dev", f->dev);
	if (f->has_to)
		add_str(o, "to", ip_prefix_format(&f->to, buf, sizeof(buf)));
	return o;
}

struct json_object *ctl_path_flush_to_json(const struct ctl_path_flush *p)
{
	struct json_object *o = json_object_new_object();
	char buf[IB_GID_STRLEN];

	if (!o)
		return NULL;
	if (p->has_gid) {
		ib_gid_format(&p->gid, buf, sizeof(buf));
		add_str(o, "gid", buf);
	}
	return o;
}

/* ---- gwctl's words -------------------------------------------------------------------- */

/*
 * The index of word in the NULL-terminated list: an exact match, else the one keyword
 * it is a prefix of. -1 (unknown) or -2 (ambiguous) otherwise.
 */
static int keyword(const char *word, const char *const *list)
{
	size_t n = strlen(word);
	int found = -1;

	if (n == 0)
		return -1;
	for (int i = 0; list[i]; i++) {
		if (!strcmp(word, list[i]))
			return i;
		if (!strncmp(word, list[i], n))
			found = found == -1 ? i : -2;
	}
	return found;
}

static int bad_keyword(const char *word, int k, const char *expected, char why[CTL_ARGS_WHY_LEN])
{
	return fail(why, "%s '%.64s'; expected %s", k == -2 ? "ambiguous word" : "unknown word",
		    word, expected);
}

/* The value after argv[*i] (a keyword): advances *i. */
static int value(int argc, char **argv, int *i, const char *kw, const char **out,
		 char why[CTL_ARGS_WHY_LEN])
{
	*out = NULL;
	if (*i + 1 >= argc)
		return fail(why, "%s needs a value", kw);
	*i += 1;
	*out = argv[*i];
	return 0;
}

/* Route types ip(8) knows that this gateway does not let an operator add. */
static int route_type_refused(const char *word, char why[CTL_ARGS_WHY_LEN])
{
	static const char *const other[] = { "broadcast", "unreachable", "prohibit", "throw",
					     "anycast",   "multicast",   "nat",      NULL };

	if (!strcmp(word, "local"))
		return fail(why, "local routes come from the interfaces' addresses; they cannot "
				 "be added or deleted");
	for (int i = 0; other[i]; i++)
		if (!strcmp(word, other[i]))
			return fail(why, "%s routes are not supported (unicast or blackhole)",
				    word);
	return 0;
}

enum {
	RK_VIA,
	RK_DEV,
	RK_METRIC,
	RK_NEXTHOP,
	RK_WEIGHT,
	RK_PROTO,
	RK_SCOPE,
	RK_SRC,
	RK_UNRESOLVED,
	RK_INACTIVE,
	RK_TENANT,
};
static const char *const route_kw[] = { "via",   "dev", "metric",     "nexthop",  "weight", "proto",
					"scope", "src", "unresolved", "inactive", "tenant", NULL };
#define ROUTE_KW_LIST                                                                              \
	"via, dev, metric, nexthop, weight, proto, scope, unresolved, inactive or tenant"

/* What the words said, before it becomes a ctl_route. */
struct route_words {
	bool is_default;
	bool have_metric, have_dev, have_tenant;
	char dev[CTL_NAME_MAX]; /* before any nexthop: applies to the via addresses */
	unsigned n_via, n_groups, n_total;
	struct ctl_nexthop via[CTL_ROUTE_MAX_NH];
	/* The nexthop group being read (in r->nh), or scratch past the limit: the words
	 * are still checked, the count is refused at the end. */
	struct ctl_nexthop *cur, scratch;
};

static void add_via(struct route_words *w, const struct ip_addr *gw)
{
	if (++w->n_total > CTL_ROUTE_MAX_NH)
		return;
	memset(&w->via[w->n_via], 0, sizeof(w->via[0]));
	w->via[w->n_via].has_gw = true;
	w->via[w->n_via].gw = *gw;
	w->n_via++;
}

static void start_group(struct route_words *w, struct ctl_route *r)
{
	w->cur = ++w->n_total > CTL_ROUTE_MAX_NH ? &w->scratch : &r->nh[w->n_groups++];
	memset(w->cur, 0, sizeof(*w->cur));
}

static int route_via(int argc, char **argv, int *i, struct route_words *w,
		     char why[CTL_ARGS_WHY_LEN])
{
	const char *v = NULL;
	struct ip_addr a;

	if (value(argc, argv, i, "via", &v, why) < 0 || parse_addr(v, "gateway", &a, why) < 0)
		return -EINVAL;
	if (w->cur) {
		if (w->cur->has_gw)
			return fail(why, "a nexthop takes one via address");
		w->cur->has_gw = true;
		w->cur->gw = a;
		return 0;
	}
	if (w->n_groups)
		return fail(why, "use either via or nexthop groups, not both");
	add_via(w, &a);
	/* "via A B C": more gateways follow until a keyword. */
	while (*i + 1 < argc && ip_addr_parse(argv[*i + 1], &a) == 0) {
		*i += 1;
		add_via(w, &a);
	}
	return 0;
}

static int route_dev(int argc, char **argv, int *i, struct route_words *w,
		     char why[CTL_ARGS_WHY_LEN])
{
	const char *v = NULL;

	if (value(argc, argv, i, "dev", &v, why) < 0)
		return -EINVAL;
	if (w->cur) {
		if (w->cur->dev[0])
			return fail(why, "a nexthop takes one dev");
		return parse_dev(v, w->cur->dev, why);
	}
	if (w->have_dev)
		return fail(why, "dev is given twice");
	w->have_dev = true;
	return parse_dev(v, w->dev, why);
}

static int route_word(int argc, char **argv, int *i, struct route_words *w, struct ctl_route *r,
		      char why[CTL_ARGS_WHY_LEN])
{
	const char *v = NULL;
	int k = keyword(argv[*i], route_kw);

	switch (k) {
	case RK_VIA:
		return route_via(argc, argv, i, w, why);
	case RK_DEV:
		return route_dev(argc, argv, i, w, why);
	case RK_METRIC:
		if (w->have_metric)
			return fail(why, "metric is given twice");
		w->have_metric = true;
		return value(argc, argv, i, "metric", &v, why) < 0
			   ? -EINVAL
			   : parse_metric(v, &r->metric, why);
	case RK_NEXTHOP:
		if (w->n_via)
			return fail(why, "use either via or nexthop groups, not both");
		if (w->have_dev)
			return fail(why, "give dev inside each nexthop, not before them");
		start_group(w, r);
		return 0;
	case RK_WEIGHT:
		if (!w->cur)
			return fail(why, "weight belongs to a nexthop");
		if (value(argc, argv, i, "weight", &v, why) < 0)
			return -EINVAL;
		if (strcmp(v, "1"))
			return fail(why,
				    "weight %.16s: next hops share traffic equally here (weight 1)",
				    v);
		return 0;
	case RK_PROTO:
		if (value(argc, argv, i, "proto", &v, why) < 0)
			return -EINVAL;
		if (strcmp(v, "static"))
			return fail(why,
				    "proto %.32s: only static routes can be added or deleted "
				    "(kernel and learned routes are the gateway's own)",
				    v);
		return 0;
	case RK_SCOPE:
		if (value(argc, argv, i, "scope", &v, why) < 0)
			return -EINVAL;
		if (!strcmp(v, "host"))
			return fail(why, "scope host routes are the gateway's own addresses");
		if (strcmp(v, "link") && strcmp(v, "global") && strcmp(v, "universe"))
			return fail(why, "scope '%.32s' is not link or global", v);
		return 0;
	case RK_SRC:
		return fail(why, "src: operator routes take no preferred source address");
	case RK_UNRESOLVED:
	case RK_INACTIVE:
		return 0; /* state flags of a shown route: nothing to add */
	case RK_TENANT:
		if (w->have_tenant)
			return fail(why, "tenant is given twice");
		w->have_tenant = true;
		return value(argc, argv, i, "tenant", &v, why) < 0
			   ? -EINVAL
			   : parse_tenant(v, r->tenant, why);
	default:
		return bad_keyword(argv[*i], k, ROUTE_KW_LIST, why);
	}
}

/* The words collected -> r's next hops. */
static int route_finish(struct route_words *w, struct ctl_route *r, char why[CTL_ARGS_WHY_LEN])
{
	if (w->n_total > CTL_ROUTE_MAX_NH)
		return fail(why, "a route has at most %d next hops (%u given)", CTL_ROUTE_MAX_NH,
			    w->n_total);
	for (unsigned i = 0; i < w->n_groups; i++)
		if (!r->nh[i].has_gw)
			return fail(why, "nexthop %u needs via ADDR", i + 1);
	if (w->n_groups) {
		r->n_nh = w->n_groups;
	} else if (w->n_via) {
		for (unsigned i = 0; i < w->n_via; i++) {
			r->nh[i] = w->via[i];
			memcpy(r->nh[i].dev, w->dev, sizeof(w->dev));
		}
		r->n_nh = w->n_via;
	} else if (w->have_dev) {
		memset(&r->nh[0], 0, sizeof(r->nh[0]));
		memcpy(r->nh[0].dev, w->dev, sizeof(w->dev));
		r->n_nh = 1;
	}
	if (w->is_default) {
		/* "default" as `show routes` prints it, for either family: the gateways say
		 * which. */
		if (!r->n_nh || !r->nh[0].has_gw)
			return fail(why, "default needs a gateway to tell IPv4 from IPv6 (or write "
					 "0.0.0.0/0 or ::/0)");
		memset(&r->dst, 0, sizeof(r->dst));
		r->dst.addr.family = r->nh[0].gw.family;
	}
	return 0;
}

int ctl_route_parse_argv(int argc, char **argv, bool for_add, struct ctl_route *out,
			 char why[CTL_ARGS_WHY_LEN])
{
	struct route_words w = { 0 };
	int i = 0;

	memset(out, 0, sizeof(*out));
	if (argc > 0 && (!strcmp(argv[0], "unicast") || !strcmp(argv[0], "blackhole"))) {
		out->blackhole = argv[0][0] == 'b';
		i++;
	} else if (argc > 0 && route_type_refused(argv[0], why) < 0) {
		return -EINVAL;
	}
	if (i >= argc)
		return fail(why, "the route's PREFIX is missing");
	if (!strcmp(argv[i], "default"))
		w.is_default = true;
	else if (parse_prefix(argv[i], &out->dst, why) < 0)
		return -EINVAL;
	for (i++; i < argc; i++)
		if (route_word(argc, argv, &i, &w, out, why) < 0)
			return -EINVAL;
	if (route_finish(&w, out, why) < 0)
		return -EINVAL;
	return route_check(out, for_add, why);
}

static bool neigh_state_word(const char *w)
{
	static const char *const states[] = { "INCOMPLETE", "REACHABLE", "STALE",
					      "DELAY",      "PROBE",     "FAILED",
					      "NOARP",      "PERMANENT", NULL };

	for (int i = 0; states[i]; i++)
		if (!strcasecmp(w, states[i]))
			return true;
	return false;
}

enum {
	NK_DEV,
	NK_LLADDR,
	NK_PATH
};
static const char *const neigh_kw[] = { "dev", "lladdr", "path", NULL };
/* After "path": what `show neighbours` prints about the path (its value, if any, is
 * skipped: the path is resolved again, never set by hand). */
static const char *const path_kw[] = { "dlid", "sl", "mtu", "mode", "grh", NULL };
#define PATH_KW_FLAG 4 /* path_kw[4..] take no value */

static int neigh_lladdr(const char *v, struct ctl_neigh *out, char why[CTL_ARGS_WHY_LEN])
{
	int n;

	if (out->lladdr_len)
		return fail(why, "lladdr is given twice");
	n = ctl_lladdr_parse(v, out->lladdr, why);
	if (n < 0)
		return -EINVAL;
	out->lladdr_len = (uint8_t)n;
	return 0;
}

int ctl_neigh_parse_argv(int argc, char **argv, bool for_add, struct ctl_neigh *out,
			 char why[CTL_ARGS_WHY_LEN])
{
	bool in_path = false;
	const char *v = NULL;

	memset(out, 0, sizeof(*out));
	if (argc < 1)
		return fail(why, "the neighbour's ADDR is missing");
	if (parse_addr(argv[0], "neighbour", &out->dst, why) < 0)
		return -EINVAL;
	for (int i = 1; i < argc; i++) {
		int k;

		if (neigh_state_word(argv[i]))
			continue; /* the state of a shown entry: an added one is PERMANENT */
		if (in_path) {
			k = keyword(argv[i], path_kw);
			if (k < 0)
				return bad_keyword(argv[i], k, "dlid, sl, mtu, mode or grh", why);
			if (k < PATH_KW_FLAG && value(argc, argv, &i, path_kw[k], &v, why) < 0)
				return -EINVAL;
			continue;
		}
		k = keyword(argv[i], neigh_kw);
		if (k == NK_PATH) {
			in_path = true;
			continue;
		}
		if (k < 0)
			return bad_keyword(argv[i], k, "dev, lladdr, path or a state", why);
		if (value(argc, argv, &i, neigh_kw[k], &v, why) < 0)
			return -EINVAL;
		if (k == NK_DEV && out->dev[0])
			return fail(why, "dev is given twice");
		if (k == NK_DEV ? parse_dev(v, out->dev, why) < 0 : neigh_lladdr(v, out, why) < 0)
			return -EINVAL;
	}
	return neigh_check(out, for_add, why);
}

int ctl_neigh_flush_parse_argv(int argc, char **argv, struct ctl_neigh_flush *out,
			       char why[CTL_ARGS_WHY_LEN])
{
	static const char *const kw[] = { "dev", "to", NULL };
	const char *v = NULL;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < argc; i++) {
		int k = keyword(argv[i], kw);

		if (k < 0)
			return bad_keyword(argv[i], k, "dev or to", why);
		if (k == 0 ? out->dev[0] != '\0' : out->has_to)
			return fail(why, "%s is given twice", kw[k]);
		if (value(argc, argv, &i, kw[k], &v, why) < 0)
			return -EINVAL;
		if (k == 0 && parse_dev(v, out->dev, why) < 0)
			return -EINVAL;
		if (k == 1 && parse_prefix(v, &out->to, why) < 0)
			return -EINVAL;
		out->has_to |= k == 1;
	}
	if (!out->dev[0])
		return fail(why, "neigh flush needs dev NAME");
	return 0;
}

int ctl_path_flush_parse_argv(int argc, char **argv, struct ctl_path_flush *out,
			      char why[CTL_ARGS_WHY_LEN])
{
	const char *gwhy = NULL;

	memset(out, 0, sizeof(*out));
	if (argc > 1)
		return fail(why, "path flush takes at most one GID");
	if (argc == 1 && ib_gid_parse_why(argv[0], &out->gid, &gwhy) < 0)
		return fail(why, "'%.64s' is not a GID: %s", argv[0], gwhy ? gwhy : "malformed");
	out->has_gid = argc == 1;
	return 0;
}

/* ---- text ----------------------------------------------------------------------------- */

char *ctl_route_format(const struct ctl_route *r, char *buf, size_t len)
{
	char a[IP_PREFIX_STRLEN];
	size_t o = 0;
	bool one_dev = true;

#define PUT(...)                                                                                   \
	do {                                                                                       \
		int n_ = snprintf(buf + o, o < len ? len - o : 0, __VA_ARGS__);                    \
		o += n_ > 0 ? (size_t)n_ : 0;                                                      \
	} while (0)

	if (len)
		buf[0] = '\0';
	PUT("%s%s", r->blackhole ? "blackhole " : "", ip_prefix_format(&r->dst, a, sizeof(a)));
	for (unsigned i = 1; i < r->n_nh; i++)
		one_dev &= !strcmp(r->nh[i].dev, r->nh[0].dev);
	if (one_dev) {
		for (unsigned i = 0; i < r->n_nh; i++)
			if (r->nh[i].has_gw)
				PUT("%s %s", i ? "" : " via",
				    ip_addr_format(&r->nh[i].gw, a, sizeof(a)));
		if (r->n_nh && r->nh[0].dev[0])
			PUT(" dev %s", r->nh[0].dev);
	} else {
		for (unsigned i = 0; i < r->n_nh; i++) {
			PUT(" nexthop via %s", ip_addr_format(&r->nh[i].gw, a, sizeof(a)));
			if (r->nh[i].dev[0])
				PUT(" dev %s", r->nh[i].dev);
		}
	}
	if (r->metric)
		PUT(" metric %u", r->metric);
	if (r->tenant[0])
		PUT(" tenant %s", r->tenant);
#undef PUT
	return buf;
}

/* ---- capture --------------------------------------------------------------------- */

static int capture_check(const struct ctl_capture *c, char why[CTL_ARGS_WHY_LEN])
{
	if (!c->dev[0])
		return fail(why, "capture needs an interface (DEV)");
	if (c->dirs & ~(CTL_CAPTURE_DIR_IN | CTL_CAPTURE_DIR_OUT))
		return fail(why, "direction must be in, out or both");
	for (const char *p = c->filter; *p; p++)
		if (iscntrl((unsigned char)*p))
			return fail(why, "the filter contains a control character");
	return 0;
}

/* A non-negative integer member up to max, absent: 0. */
static int get_count(struct json_object *o, const char *key, uint64_t max, uint64_t *out,
		     char why[CTL_ARGS_WHY_LEN])
{
	struct json_object *v;
	int64_t n;

	*out = 0;
	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	errno = 0;
	n = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
	if (errno || n < 0 || (uint64_t)n > max)
		return fail(why, "\"%s\" must be an integer 0..%llu", key, (unsigned long long)max);
	*out = (uint64_t)n;
	return 0;
}

int ctl_capture_from_json(struct json_object *args, struct ctl_capture *out,
			  char why[CTL_ARGS_WHY_LEN])
{
	static const char *const keys[] = { "dev",     "filter",    "count", "duration_ms",
					    "snaplen", "direction", NULL };
	const char *dev, *filter, *dir;
	uint64_t dur, snap;

	memset(out, 0, sizeof(*out));
	if (!args)
		return fail(why, "capture needs \"dev\"");
	if (check_keys(args, keys, "capture",
		       "\"dev\", \"filter\", \"count\", \"duration_ms\", \"snaplen\" and "
		       "\"direction\"",
		       why) < 0 ||
	    get_string(args, "dev", true, "capture", &dev, why) < 0 ||
	    get_string(args, "filter", false, "capture", &filter, why) < 0 ||
	    get_string(args, "direction", false, "capture", &dir, why) < 0 ||
	    parse_dev(dev, out->dev, why) < 0 ||
	    get_count(args, "count", UINT64_MAX >> 1, &out->count, why) < 0 ||
	    get_count(args, "duration_ms", UINT32_MAX, &dur, why) < 0 ||
	    get_count(args, "snaplen", UINT32_MAX, &snap, why) < 0)
		return -EINVAL;
	out->duration_ms = (uint32_t)dur;
	out->snaplen = (uint32_t)snap;
	if (filter) {
		if (strlen(filter) >= sizeof(out->filter))
			return fail(why, "the filter is longer than %d characters",
				    CTL_CAPTURE_FILTER_MAX - 1);
		strcpy(out->filter, filter);
	}
	if (!dir || !strcmp(dir, "both"))
		out->dirs = CTL_CAPTURE_DIR_IN | CTL_CAPTURE_DIR_OUT;
	else if (!strcmp(dir, "in"))
		out->dirs = CTL_CAPTURE_DIR_IN;
	else if (!strcmp(dir, "out"))
		out->dirs = CTL_CAPTURE_DIR_OUT;
	else
		return fail(why, "\"direction\" must be \"in\", \"out\" or \"both\"");
	return capture_check(out, why);
}

struct json_object *ctl_capture_to_json(const struct ctl_capture *c)
{
	struct json_object *o = json_object_new_object();
	unsigned both = CTL_CAPTURE_DIR_IN | CTL_CAPTURE_DIR_OUT;

	if (!o)
		return NULL;
	add_str(o, "dev", c->dev);
	if (c->filter[0])
		add_str(o, "filter", c->filter);
	if (c->count)
		json_object_object_add(o, "count", json_object_new_int64((int64_t)c->count));
	if (c->duration_ms)
		json_object_object_add(o, "duration_ms", json_object_new_int64(c->duration_ms));
	if (c->snaplen)
		json_object_object_add(o, "snaplen", json_object_new_int64(c->snaplen));
	if (c->dirs && (c->dirs & both) != both)
		add_str(o, "direction", c->dirs == CTL_CAPTURE_DIR_IN ? "in" : "out");
	return o;
}

/* A decimal number 0..max (count and snaplen). */
static int parse_count(const char *text, const char *kw, uint64_t max, uint64_t *out,
		       char why[CTL_ARGS_WHY_LEN])
{
	char *end;

	errno = 0;
	*out = strtoull(text, &end, 10);
	if (!isdigit((unsigned char)text[0]) || *end || errno || *out > max)
		return fail(why, "%s needs a number 0..%llu, not '%.32s'", kw,
			    (unsigned long long)max, text);
	return 0;
}

/* Appends a word of the filter expression (blank-separated). */
static int filter_word(struct ctl_capture *c, size_t *flen, const char *w,
		       char why[CTL_ARGS_WHY_LEN])
{
	size_t wl = strlen(w);

	if (*flen + wl + 1 >= sizeof(c->filter))
		return fail(why, "the filter is longer than %d characters",
			    CTL_CAPTURE_FILTER_MAX - 1);
	if (*flen)
		c->filter[(*flen)++] = ' ';
	memcpy(c->filter + *flen, w, wl + 1);
	*flen += wl;
	return 0;
}

int ctl_capture_parse_argv(int argc, char **argv, struct ctl_capture *out, const char **file,
			   char why[CTL_ARGS_WHY_LEN])
{
	/* Whole words only: a prefix ("d", "s") may well be the filter's first word. */
	static const char *const kw[] = { "count",     "duration", "snaplen",
					  "direction", "filter",   NULL };
	bool in_filter = false;
	size_t flen = 0;
	const char *v;
	uint64_t n;

	memset(out, 0, sizeof(*out));
	*file = NULL;
	out->dirs = CTL_CAPTURE_DIR_IN | CTL_CAPTURE_DIR_OUT;
	if (argc < 1)
		return fail(why, "capture needs an interface (DEV)");
	if (parse_dev(argv[0], out->dev, why) < 0)
		return -EINVAL;
	for (int i = 1; i < argc; i++) {
		int k = -1;

		if (!strcmp(argv[i], "-w")) {
			if (*file)
				return fail(why, "-w is given twice");
			if (value(argc, argv, &i, "-w", file, why) < 0)
				return -EINVAL;
			continue;
		}
		if (in_filter) {
			if (filter_word(out, &flen, argv[i], why) < 0)
				return -EINVAL;
			continue;
		}
		if (argv[i][0] == '-')
			return fail(why, "unknown option '%.32s' (only -w FILE)", argv[i]);
		for (int j = 0; kw[j] && k < 0; j++)
			if (!strcmp(argv[i], kw[j]))
				k = j;
		if (k < 0 || k == 4) { /* the filter begins (tcpdump's way, or after "filter") */
			in_filter = true;
			if (k < 0 && filter_word(out, &flen, argv[i], why) < 0)
				return -EINVAL;
			continue;
		}
		if (value(argc, argv, &i, kw[k], &v, why) < 0)
			return -EINVAL;
		if (k == 0 && parse_count(v, "count", UINT64_MAX >> 1, &out->count, why) < 0)
			return -EINVAL;
		if (k == 1) {
			char *end;
			double sec = strtod(v, &end);

			if (*end || !(sec >= 0.001) || sec > 4294967.0)
				return fail(
				    why, "duration needs seconds (0.001..4294967), not '%.32s'", v);
			out->duration_ms = (uint32_t)(sec * 1000.0 + 0.5);
		}
		if (k == 2) {
			if (parse_count(v, "snaplen", UINT32_MAX, &n, why) < 0)
				return -EINVAL;
			out->snaplen = (uint32_t)n;
		}
		if (k == 3) {
			if (!strcmp(v, "in"))
				out->dirs = CTL_CAPTURE_DIR_IN;
			else if (!strcmp(v, "out"))
				out->dirs = CTL_CAPTURE_DIR_OUT;
			else if (!strcmp(v, "both"))
				out->dirs = CTL_CAPTURE_DIR_IN | CTL_CAPTURE_DIR_OUT;
			else
				return fail(why, "direction is in, out or both, not '%.32s'", v);
		}
	}
	return capture_check(out, why);
}
