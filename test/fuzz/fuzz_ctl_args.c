/*
 * Fuzz gwctl's word parsers for the write requests (mgmt/ctl_args.h): the input's first
 * octet picks the parser, the rest is split into words at blanks. Any input must be
 * accepted or refused with a reason; what is accepted must survive the trip through
 * the wire's JSON and back to the same arguments, and a route's text form must parse
 * back to the same text (what the daemon logs is what an operator can type). Octet 5
 * also feeds gwctl capture's words to their parser, octet 0 its text to base64 (how a
 * capture's records cross the wire): what decodes must encode back to the same text.
 *
 * Octets '6' and '7' lead to gwctl's whole grammar (mgmt/ctl_cmd.h): '6' a command line
 * (options, object and verb in either order, help), '7' a -batch line split as gwctl
 * splits it; a command that parses hands its argument words on to the parser above that
 * its request uses, as gwctl does.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "lib/base64.h"
#include "mgmt/ctl_args.h"
#include "mgmt/ctl_cmd.h"
#include "mgmt/ctl_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_WORDS 48

static int split(char *text, char **argv)
{
	int n = 0;

	for (char *w = strtok(text, " \t\n"); w && n < MAX_WORDS; w = strtok(NULL, " \t\n"))
		argv[n++] = w;
	return n;
}

static void route(int argc, char **argv, bool add)
{
	struct ctl_route r, back;
	char why[CTL_ARGS_WHY_LEN] = "", text[CTL_ROUTE_STRLEN], again[CTL_ROUTE_STRLEN];
	char copy[CTL_ROUTE_STRLEN], *words[4 * CTL_ROUTE_MAX_NH + 8];
	struct json_object *j;

	if (ctl_route_parse_argv(argc, argv, add, &r, why) < 0) {
		if (!why[0])
			abort();
		return;
	}
	ctl_route_format(&r, text, sizeof(text));
	j = ctl_route_to_json(&r);
	if (ctl_route_from_json(j, add, &back, why) < 0)
		abort(); /* what gwctl sends, the daemon must take */
	json_object_put(j);
	if (strcmp(ctl_route_format(&back, again, sizeof(again)), text))
		abort();
	memcpy(copy, text, sizeof(copy));
	if (ctl_route_parse_argv(split(copy, words), words, add, &back, why) < 0 ||
	    strcmp(ctl_route_format(&back, again, sizeof(again)), text))
		abort();
}

static void neigh(int argc, char **argv, bool add)
{
	struct ctl_neigh n, back;
	char why[CTL_ARGS_WHY_LEN] = "";
	struct json_object *j;

	if (ctl_neigh_parse_argv(argc, argv, add, &n, why) < 0) {
		if (!why[0])
			abort();
		return;
	}
	j = ctl_neigh_to_json(&n);
	if (ctl_neigh_from_json(j, add, &back, why) < 0 || memcmp(&n, &back, sizeof(n)))
		abort();
	json_object_put(j);
}

static void flushes(int argc, char **argv)
{
	struct ctl_neigh_flush f, fb;
	struct ctl_path_flush p, pb;
	char why[CTL_ARGS_WHY_LEN] = "";
	struct json_object *j;

	if (ctl_neigh_flush_parse_argv(argc, argv, &f, why) == 0) {
		j = ctl_neigh_flush_to_json(&f);
		if (ctl_neigh_flush_from_json(j, &fb, why) < 0 || memcmp(&f, &fb, sizeof(f)))
			abort();
		json_object_put(j);
	}
	if (ctl_path_flush_parse_argv(argc, argv, &p, why) == 0) {
		j = ctl_path_flush_to_json(&p);
		if (ctl_path_flush_from_json(j, &pb, why) < 0 || memcmp(&p, &pb, sizeof(p)))
			abort();
		json_object_put(j);
	}
}

static void capture(int argc, char **argv)
{
	struct ctl_capture c, back;
	char why[CTL_ARGS_WHY_LEN] = "";
	const char *file;
	struct json_object *j;

	if (ctl_capture_parse_argv(argc, argv, &c, &file, why) < 0) {
		if (!why[0])
			abort();
		return;
	}
	j = ctl_capture_to_json(&c);
	if (ctl_capture_from_json(j, &back, why) < 0 || memcmp(&c, &back, sizeof(c)))
		abort();
	json_object_put(j);
}

static void base64(const char *text, size_t len)
{
	static uint8_t out[4096];
	static char again[4096 / 3 * 4 + 8];
	long n = base64_decode(text, len, out, sizeof(out));

	if (n == -ENOSPC || n == -EINVAL)
		return;
	if (n < 0 || base64_encode(out, (size_t)n, again) != len || memcmp(again, text, len))
		abort();
}

static void lladdr(const char *text)
{
	uint8_t a[CTL_LLADDR_MAX], b[CTL_LLADDR_MAX];
	char why[CTL_ARGS_WHY_LEN] = "", out[3 * CTL_LLADDR_MAX];
	int n = ctl_lladdr_parse(text, a, why);

	if (n < 0) {
		if (!why[0])
			abort();
		return;
	}
	if (n != 6 && n != CTL_LLADDR_MAX)
		abort();
	ctl_lladdr_format(a, (size_t)n, out, sizeof(out));
	if (ctl_lladdr_parse(out, b, why) != n || memcmp(a, b, (size_t)n))
		abort();
}

/* A parsed command's words to its request's parser. */
static void command_args(const struct ctl_parsed *p, int argc, char **argv)
{
	argc -= p->argi;
	argv += p->argi;
	switch (p->cmd->type) {
	case CTL_ROUTE_ADD:
	case CTL_ROUTE_DEL:
		route(argc, argv, p->cmd->type == CTL_ROUTE_ADD);
		break;
	case CTL_NEIGH_ADD:
	case CTL_NEIGH_DEL:
		neigh(argc, argv, p->cmd->type == CTL_NEIGH_ADD);
		break;
	case CTL_NEIGH_FLUSH:
	case CTL_PATH_FLUSH:
		flushes(argc, argv);
		break;
	default:
		break;
	}
}

static void command(int argc, char **argv, bool with_options)
{
	struct ctl_opts o;
	struct ctl_parsed p;
	char why[CTL_CMD_WHY_LEN] = "";
	int first = 0;

	if (with_options) {
		first = ctl_opts_parse(argc, argv, &o, why);
		if (first < 0) {
			if (!why[0])
				abort();
			return;
		}
		if (first > argc || (o.timeout_s && !(o.timeout_s > 0 && o.timeout_s <= 3600)))
			abort();
	}
	if (ctl_cmd_parse(argc - first, argv + first, &p, why) < 0) {
		if (!why[0])
			abort();
		return;
	}
	if (p.help)
		return;
	if (!p.cmd || !p.object || p.argi < 1 || p.argi > argc - first)
		abort();
	command_args(&p, argc - first, argv + first);
}

static void batch_line(char *text)
{
	char *words[CTL_BATCH_MAX_ARGS], why[CTL_CMD_WHY_LEN] = "";
	int n = ctl_batch_split(text, words, CTL_BATCH_MAX_ARGS, why);

	if (n < 0) {
		if (!why[0])
			abort();
		return;
	}
	for (int i = 0; i < n; i++)
		if (!words[i])
			abort();
	if (n)
		command(n, words, false);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[4096], *argv[MAX_WORDS];
	int argc;

	if (size < 1 || size > sizeof(text))
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	if (strlen(text) != size - 1)
		return 0; /* words come from argv: no NUL inside */
	switch (data[0] % 8) {
	case 0:
		lladdr(text);
		base64(text, size - 1);
		return 0;
	case 1:
		argc = split(text, argv);
		route(argc, argv, true);
		return 0;
	case 2:
		argc = split(text, argv);
		route(argc, argv, false);
		return 0;
	case 3:
		argc = split(text, argv);
		neigh(argc, argv, true);
		return 0;
	case 4:
		argc = split(text, argv);
		neigh(argc, argv, false);
		return 0;
	case 5:
		argc = split(text, argv);
		flushes(argc, argv);
		capture(argc, argv);
		return 0;
	case 6:
		argc = split(text, argv);
		command(argc, argv, true);
		return 0;
	default:
		batch_line(text);
		return 0;
	}
}
