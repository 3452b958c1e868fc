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

#define TOKENS_MAX 6

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

/* Unsigned decimal integer up to max. */
static bool uint_ok(const char *s, uint32_t max, uint32_t *out)
{
	uint64_t v = 0;

	if (!*s || strlen(s) > 10)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (v > max)
		return false;
	*out = (uint32_t)v;
	return true;
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
	return fail(why, "unknown command (link, loss, delay, capture, stats)");
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
