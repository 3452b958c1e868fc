/*
 * The fabric's control side that needs no socket: parsing one command line, and the
 * stats/state report as JSON. Kept apart from the switching path (fabric.c) so each
 * reads alone; the program (main.c) runs the commands.
 *
 * Commands are short words separated by blanks; every token is checked (node names
 * as ibsim's, numbers without signs or exponents, one decimal point at most), and any
 * other byte than printable ASCII is refused, so the reply can quote the line safely.
 */
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/fabric/fabric.h"
#include "sim/fabric/router.h"

#define TOKENS_MAX 7

static int fail(const char **why, const char *reason)
{
	if (why)
		*why = reason;
	return -EINVAL;
}

static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= SIMFAB_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' || *s == '.'))
			return false;
	return true;
}

/* Decimal digits only, at most maxlen of them: their value. */
static bool dec_ok(const char *s, size_t maxlen, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s || strlen(s) > maxlen)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return true;
}

/* Unsigned decimal integer up to max. */
static bool uint_ok(const char *s, uint32_t max, uint32_t *out)
{
	uint64_t v;

	if (!dec_ok(s, 10, &v) || v > max)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* Unsigned number up to max: decimal, or hexadecimal after 0x (at most 16 digits). */
static bool num_ok(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	uint32_t d;

	if (s[0] == '0' && s[1] == 'x') {
		s += 2;
		if (!*s || strlen(s) > 16)
			return false;
		for (; *s; s++) {
			if (*s >= '0' && *s <= '9')
				d = (uint32_t)(*s - '0');
			else if (*s >= 'a' && *s <= 'f')
				d = (uint32_t)(*s - 'a' + 10);
			else if (*s >= 'A' && *s <= 'F')
				d = (uint32_t)(*s - 'A' + 10);
			else
				return false;
			v = v << 4 | d;
		}
	} else if (!dec_ok(s, 19, &v)) {
		return false;
	}
	if (v > max)
		return false;
	*out = v;
	return true;
}

/* The router commands: router, route, mcast, mcast-proxy (tok[0] already matched). */
static int router_cmd_parse(char **tok, int n, struct fabric_cmd *cmd, const char **why)
{
	uint64_t v;

	if (n < 2 || !name_ok(tok[1]))
		return fail(why, "node name: 1..63 of A-Z a-z 0-9 _ - .");
	cmd->name = tok[1];
	if (!strcmp(tok[0], "router")) {
		if (n != 7)
			return fail(why, "usage: router NODE PORT LID GUID PREFIX MTU");
		if (!num_ok(tok[2], ROUTER_PORTS_MAX, &v) || v == 0)
			return fail(why, "router: port 1..8");
		cmd->port = (uint32_t)v;
		if (!num_ok(tok[3], IB_LID_MC_FIRST - 1, &v) || v == 0)
			return fail(why, "router: LID 1..0xbfff");
		cmd->lid = (uint32_t)v;
		if (!num_ok(tok[4], UINT64_MAX, &cmd->guid) || cmd->guid == 0)
			return fail(why, "router: GUID a nonzero 64-bit number");
		if (!num_ok(tok[5], UINT64_MAX, &cmd->prefix))
			return fail(why, "router: GID prefix a 64-bit number");
		if (!num_ok(tok[6], 4096, &v))
			return fail(why, "router: MTU 256, 512, 1024, 2048 or 4096");
		for (uint8_t m = SIMFAB_MTU_256; m <= SIMFAB_MTU_4096; m++)
			if (simfab_mtu_bytes(m) == v)
				cmd->mtu = m;
		if (!cmd->mtu)
			return fail(why, "router: MTU 256, 512, 1024, 2048 or 4096");
		cmd->kind = FABRIC_CMD_ROUTER_PORT;
		return 0;
	}
	if (!strcmp(tok[0], "mcast-proxy")) {
		char *slash;

		if (n != 3)
			return fail(why, "usage: mcast-proxy NODE MGID/LEN");
		slash = strchr(tok[2], '/');
		if (!slash || !num_ok(slash + 1, 128, &v) || v < 8 ||
		    (slash[1] == '0' && slash[2] == 'x'))
			return fail(why, "mcast-proxy: prefix is MGID/LEN, LEN 8..128");
		cmd->plen = (uint8_t)v;
		*slash = 0;
		if (ib_gid_parse(tok[2], &cmd->gid) < 0 || !ib_gid_is_multicast(&cmd->gid))
			return fail(why, "mcast-proxy: prefix is not a multicast GID");
		cmd->kind = FABRIC_CMD_MCAST_PROXY;
		return 0;
	}
	if (!strcmp(tok[0], "route")) {
		char *slash;

		if (n != 5)
			return fail(why, "usage: route NODE GID/LEN PORT direct|LID");
		slash = strchr(tok[2], '/');
		if (!slash || !num_ok(slash + 1, 128, &v) || (slash[1] == '0' && slash[2] == 'x'))
			return fail(why, "route: prefix is GID/LEN, LEN 0..128");
		cmd->plen = (uint8_t)v;
		*slash = 0;
		if (ib_gid_parse(tok[2], &cmd->gid) < 0)
			return fail(why, "route: prefix is not a GID");
		if (!num_ok(tok[3], ROUTER_PORTS_MAX, &v) || v == 0)
			return fail(why, "route: port 1..8");
		cmd->port = (uint32_t)v;
		if (!strcmp(tok[4], "direct"))
			cmd->lid = 0;
		else if (num_ok(tok[4], IB_LID_MC_FIRST - 1, &v) && v != 0)
			cmd->lid = (uint32_t)v;
		else
			return fail(why, "route: next hop is 'direct' or a LID 1..0xbfff");
		cmd->kind = FABRIC_CMD_ROUTE;
		return 0;
	}
	if (n != 5)
		return fail(why, "usage: mcast NODE MGID PORT MLID");
	if (ib_gid_parse(tok[2], &cmd->gid) < 0 || !ib_gid_is_multicast(&cmd->gid))
		return fail(why, "mcast: not a multicast GID");
	if (!num_ok(tok[3], ROUTER_PORTS_MAX, &v) || v == 0)
		return fail(why, "mcast: port 1..8");
	cmd->port = (uint32_t)v;
	if (!num_ok(tok[4], IB_LID_PERMISSIVE - 1, &v) || (v && v < IB_LID_MC_FIRST))
		return fail(why, "mcast: MLID 0xc000..0xfffe, or 0 to leave");
	cmd->lid = (uint32_t)v;
	cmd->kind = FABRIC_CMD_MCAST;
	return 0;
}

/* Percent 0..100 with at most 4 decimals, as parts per million. */
static bool percent_ok(const char *s, uint32_t *ppm)
{
	uint64_t whole = 0, frac = 0;
	int digits = 0, fdigits = 0;

	for (; *s >= '0' && *s <= '9'; s++, digits++)
		if (digits < 4)
			whole = whole * 10 + (uint64_t)(*s - '0');
	if (digits == 0 || digits > 3)
		return false;
	if (*s == '.') {
		for (s++; *s >= '0' && *s <= '9'; s++, fdigits++)
			if (fdigits < 4)
				frac = frac * 10 + (uint64_t)(*s - '0');
		if (fdigits == 0 || fdigits > 4)
			return false;
	}
	if (*s)
		return false;
	for (int i = fdigits; i < 4; i++)
		frac *= 10;
	if (whole * 10000 + frac > 1000000)
		return false;
	*ppm = (uint32_t)(whole * 10000 + frac);
	return true;
}

int fabric_cmd_parse(const char *line, size_t len, struct fabric_cmd *cmd, const char **why)
{
	char *tok[TOKENS_MAX];
	int n = 0;
	char *p;

	memset(cmd, 0, sizeof(*cmd));
	while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	if (len == 0)
		return fail(why, "empty command");
	if (len >= sizeof(cmd->text))
		return fail(why, "command longer than 511 octets");
	for (size_t i = 0; i < len; i++)
		if ((line[i] < 0x20 || line[i] > 0x7e) && line[i] != '\t')
			return fail(why, "command has a byte that is not printable ASCII");
	memcpy(cmd->text, line, len);
	cmd->text[len] = 0;
	for (p = cmd->text; *p;) {
		while (*p == ' ' || *p == '\t')
			*p++ = 0;
		if (!*p)
			break;
		if (n == TOKENS_MAX)
			return fail(why, "too many words");
		tok[n++] = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
	}
	if (n == 0)
		return fail(why, "empty command");

	if (!strcmp(tok[0], "stats")) {
		if (n != 1)
			return fail(why, "usage: stats");
		cmd->kind = FABRIC_CMD_STATS;
		return 0;
	}
	if (!strcmp(tok[0], "link")) {
		if (n != 3 && n != 4)
			return fail(why, "usage: link NODE down|up [PORT]");
		if (!name_ok(tok[1]))
			return fail(why, "node name: 1..63 of A-Z a-z 0-9 _ - .");
		if (strcmp(tok[2], "up") && strcmp(tok[2], "down"))
			return fail(why, "link state is 'down' or 'up'");
		cmd->value = 0;
		if (n == 4 &&
		    (!uint_ok(tok[3], FABRIC_LINK_PORT_MAX, &cmd->value) || cmd->value == 0))
			return fail(why, "link: port 1..63");
		cmd->kind = FABRIC_CMD_LINK;
		cmd->name = tok[1];
		cmd->up = !strcmp(tok[2], "up");
		return 0;
	}
	if (!strcmp(tok[0], "loss") || !strcmp(tok[0], "delay")) {
		bool loss = tok[0][0] == 'l';

		if (n != 2 && n != 3)
			return fail(why,
				    loss ? "usage: loss PERCENT [NODE]" : "usage: delay MS [NODE]");
		if (loss && !percent_ok(tok[1], &cmd->value))
			return fail(why, "loss: a percentage 0..100 with at most 4 decimals");
		if (!loss && !uint_ok(tok[1], FABRIC_DELAY_MAX, &cmd->value))
			return fail(why, "delay: milliseconds 0..60000");
		if (n == 3 && !name_ok(tok[2]))
			return fail(why, "node name: 1..63 of A-Z a-z 0-9 _ - .");
		cmd->kind = loss ? FABRIC_CMD_LOSS : FABRIC_CMD_DELAY;
		cmd->name = n == 3 ? tok[2] : NULL;
		return 0;
	}
	if (!strcmp(tok[0], "capture")) {
		if (n >= 2 && !strcmp(tok[1], "stop")) {
			if (n != 2)
				return fail(why, "usage: capture stop");
			cmd->kind = FABRIC_CMD_CAPTURE_STOP;
			return 0;
		}
		if (n < 3 || n > 4 || strcmp(tok[1], "start"))
			return fail(why, "usage: capture start FILE [SECONDS] | capture stop");
		if (tok[2][0] != '/')
			return fail(why, "capture file must be an absolute path");
		if (n == 4 && (!uint_ok(tok[3], 86400, &cmd->value) || cmd->value == 0))
			return fail(why, "capture seconds: 1..86400");
		cmd->kind = FABRIC_CMD_CAPTURE_START;
		cmd->file = tok[2];
		return 0;
	}
	if (!strcmp(tok[0], "router") || !strcmp(tok[0], "route") || !strcmp(tok[0], "mcast") ||
	    !strcmp(tok[0], "mcast-proxy"))
		return router_cmd_parse(tok, n, cmd, why);
	return fail(why,
		    "unknown command (link, loss, delay, capture, stats, router, route, mcast, "
		    "mcast-proxy)");
}

/* ---- JSON ------------------------------------------------------------------------ */

static json_object *drops_obj(const uint64_t *c)
{
	json_object *o = json_object_new_object();

	for (int r = 1; r < FABRIC_DROP_COUNT; r++)
		json_object_object_add(o, fabric_drop_name(r),
				       json_object_new_int64((int64_t)c[r]));
	return o;
}

static void add_counters(json_object *o, const struct fabric_port_stats *ps)
{
	json_object_object_add(o, "rx_packets", json_object_new_int64((int64_t)ps->rx_packets));
	json_object_object_add(o, "rx_bytes", json_object_new_int64((int64_t)ps->rx_bytes));
	json_object_object_add(o, "tx_packets", json_object_new_int64((int64_t)ps->tx_packets));
	json_object_object_add(o, "tx_bytes", json_object_new_int64((int64_t)ps->tx_bytes));
	json_object_object_add(o, "drops_in", drops_obj(ps->drop_in));
	json_object_object_add(o, "drops_out", drops_obj(ps->drop_out));
}

static const char *mtu_name(uint8_t mtu)
{
	static const char *const names[] = { "?", "256", "512", "1024", "2048", "4096" };

	return mtu <= 5 ? names[mtu] : "?";
}

/* Each router's ports, routes and groups. */
static json_object *routers_json(const struct fabric *f)
{
	json_object *arr = json_object_new_array();
	char buf[64];

	for (int i = 0; i < FABRIC_ROUTERS_MAX; i++) {
		const char *name;
		const struct router *rt = fabric_router_get(f, i, &name);
		json_object *o, *ports, *routes, *groups, *proxies;

		if (!rt)
			continue;
		o = json_object_new_object();
		ports = json_object_new_array();
		routes = json_object_new_array();
		groups = json_object_new_array();
		proxies = json_object_new_array();
		for (unsigned x = 0; x < rt->n_proxies; x++) {
			char pb[sizeof(buf) + 8];

			ib_gid_format(&rt->proxy[x].prefix, buf, sizeof(buf));
			snprintf(pb, sizeof(pb), "%s/%u", buf, rt->proxy[x].plen);
			json_object_array_add(proxies, json_object_new_string(pb));
		}
		json_object_object_add(o, "node", json_object_new_string(name));
		for (unsigned p = 1; p <= ROUTER_PORTS_MAX; p++) {
			json_object *po;

			if (!rt->port[p].used)
				continue;
			po = json_object_new_object();
			json_object_object_add(po, "port", json_object_new_int((int)p));
			json_object_object_add(po, "lid", json_object_new_int(rt->port[p].lid));
			snprintf(buf, sizeof(buf), "0x%016" PRIx64, rt->port[p].gid_prefix);
			json_object_object_add(po, "gid_prefix", json_object_new_string(buf));
			json_object_array_add(ports, po);
		}
		for (unsigned r = 0; r < rt->n_routes; r++) {
			json_object *ro = json_object_new_object();
			int n;

			ib_gid_format(&rt->route[r].prefix, buf, sizeof(buf) - 5);
			n = (int)strlen(buf);
			snprintf(buf + n, sizeof(buf) - (size_t)n, "/%u", rt->route[r].plen);
			json_object_object_add(ro, "prefix", json_object_new_string(buf));
			json_object_object_add(ro, "port", json_object_new_int(rt->route[r].port));
			json_object_object_add(ro, "next_hop",
					       rt->route[r].next_hop
						   ? json_object_new_int(rt->route[r].next_hop)
						   : json_object_new_string("direct"));
			json_object_array_add(routes, ro);
		}
		for (unsigned g = 0; g < rt->n_groups; g++) {
			json_object *go = json_object_new_object(), *ml = json_object_new_object();

			ib_gid_format(&rt->group[g].mgid, buf, sizeof(buf));
			json_object_object_add(go, "mgid", json_object_new_string(buf));
			for (unsigned p = 1; p <= ROUTER_PORTS_MAX; p++) {
				char k[8];

				if (!rt->group[g].mlid[p])
					continue;
				snprintf(k, sizeof(k), "%u", p);
				snprintf(buf, sizeof(buf), "0x%04x", rt->group[g].mlid[p]);
				json_object_object_add(ml, k, json_object_new_string(buf));
			}
			json_object_object_add(go, "mlid", ml);
			json_object_array_add(groups, go);
		}
		json_object_object_add(o, "ports", ports);
		json_object_object_add(o, "routes", routes);
		json_object_object_add(o, "groups", groups);
		json_object_object_add(o, "mcast_proxy", proxies);
		json_object_array_add(arr, o);
	}
	return arr;
}

char *fabric_stats_json(const struct fabric *f)
{
	json_object *root = json_object_new_object(), *ports = json_object_new_array(), *parse;
	struct fabric_stats st;
	char buf[64], *out = NULL;
	uint64_t total = 0;

	fabric_stats(f, &st);
	for (int r = 1; r < FABRIC_DROP_COUNT; r++)
		total += st.drops[r];
	json_object_object_add(root, "packets", json_object_new_int64((int64_t)st.packets));
	json_object_object_add(root, "delivered", json_object_new_int64((int64_t)st.delivered));
	json_object_object_add(root, "routed", json_object_new_int64((int64_t)st.routed));
	json_object_object_add(root, "dropped", json_object_new_int64((int64_t)total));
	json_object_object_add(root, "held", json_object_new_int64(st.held));
	json_object_object_add(root, "drops", drops_obj(st.drops));
	parse = json_object_new_object();
	for (int e = 1; e < IB_PKT_ERR_COUNT; e++)
		json_object_object_add(parse, ib_pkt_err_name(e),
				       json_object_new_int64((int64_t)st.parse[e]));
	json_object_object_add(root, "parse_errors", parse);
	for (int i = 0; i < FABRIC_PORTS_MAX; i++) {
		const struct simfab_port_info *info = fabric_port_info(f, i);
		const struct fabric_port_stats *ps = fabric_port_stats(f, i);
		json_object *o, *pk;
		union ib_gid gid;

		if (!info)
			continue;
		o = json_object_new_object();
		json_object_object_add(o, "node", json_object_new_string(info->name));
		json_object_object_add(o, "port", json_object_new_int(info->port_num));
		json_object_object_add(
		    o, "state", json_object_new_string(fabric_port_up(f, i) ? "active" : "down"));
		json_object_object_add(o, "lid", json_object_new_int(info->lid));
		json_object_object_add(o, "lmc", json_object_new_int(info->lmc));
		json_object_object_add(o, "sm_lid", json_object_new_int(info->sm_lid));
		snprintf(buf, sizeof(buf), "0x%016" PRIx64, info->port_guid);
		json_object_object_add(o, "port_guid", json_object_new_string(buf));
		ib_gid_set(&gid, info->gid_prefix, info->port_guid);
		ib_gid_format(&gid, buf, sizeof(buf));
		json_object_object_add(o, "gid", json_object_new_string(buf));
		json_object_object_add(o, "mtu", json_object_new_string(mtu_name(info->mtu)));
		json_object_object_add(
		    o, "privileged",
		    json_object_new_boolean(info->flags & SIMFAB_HELLO_PRIVILEGED));
		pk = json_object_new_array();
		for (unsigned k = 0; k < info->n_pkeys; k++) {
			snprintf(buf, sizeof(buf), "0x%04x", info->pkeys[k]);
			json_object_array_add(pk, json_object_new_string(buf));
		}
		json_object_object_add(o, "pkeys", pk);
		add_counters(o, ps);
		json_object_array_add(ports, o);
	}
	json_object_object_add(root, "ports", ports);
	json_object_object_add(root, "routers", routers_json(f));
	{
		struct fabric_settings fs;
		json_object *nodes = json_object_new_array();

		fabric_get_settings(f, -1, &fs);
		json_object_object_add(root, "loss_ppm", json_object_new_int64(fs.loss_ppm));
		json_object_object_add(root, "delay_ms", json_object_new_int64(fs.delay_ms));
		for (int i = 0; fabric_get_settings(f, i, &fs) == 0; i++) {
			json_object *o = json_object_new_object();

			json_object_object_add(o, "node", json_object_new_string(fs.name));
			json_object_object_add(o, "link",
					       json_object_new_string(fs.down ? "down" : "up"));
			if (fs.ports_down) {
				json_object *pd = json_object_new_array();

				for (int b = 1; b <= FABRIC_LINK_PORT_MAX; b++)
					if (fs.ports_down >> b & 1)
						json_object_array_add(pd, json_object_new_int(b));
				json_object_object_add(o, "ports_down", pd);
			}
			json_object_object_add(o, "loss_ppm", json_object_new_int64(fs.loss_ppm));
			json_object_object_add(o, "delay_ms", json_object_new_int64(fs.delay_ms));
			add_counters(o, fs.st);
			json_object_array_add(nodes, o);
		}
		json_object_object_add(root, "nodes", nodes);
	}
	{
		const char *s = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);

		if (s)
			out = strdup(s);
	}
	json_object_put(root);
	return out;
}
