/*
 * gwctl's grammar, in iproute2's habits: the global options, the objects and their
 * commands, and the words of a -batch line. gwctl.c owns what a command sends and how
 * its reply prints; this file owns which words name which request.
 *
 *   gwctl [OPTIONS] OBJECT [COMMAND [ARGS]]     gwctl route show 10.1.0.0/16
 *   gwctl [OPTIONS] show OBJECT [ARGS]          gwctl show routes 10.1.0.0/16
 *   gwctl [OPTIONS] OBJECT help | help [OBJECT]
 *
 * Each object has a canonical name and aliases (plurals, spellings: neigh, neighbour,
 * neighbours, neighbor, neighbors); "show" also answers to "list" and "ls", "del" to
 * "delete". An object alone runs its first command (show, for those that have one), as
 * `ip route` does. Every word may be shortened: as in ip(8), a prefix picks the first
 * word of the table it begins, in the order of the tables below (so "s" is show, "r"
 * route, "l" link, "c" config, "d" del); an exact word always wins.
 *
 * Options take one or two dashes and may be shortened the same way: -j -json, -p
 * -pretty, -s -stats, -d -details, -S -socket SOCKET, -t -timeout SECONDS, -b -batch
 * FILE, -force, -V -version, -h -help.
 *
 * Everything here is pure (no I/O but the help text's FILE, no globals that change) and
 * is fuzzed with the argument parsers it leads to (test/fuzz/fuzz_ctl_args.c).
 */
#ifndef IBGW_MGMT_CTL_CMD_H
#define IBGW_MGMT_CTL_CMD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define CTL_CMD_WHY_LEN    256
#define CTL_BATCH_MAX_ARGS 512 /* words of one -batch line (a route with 16 next hops: ~70) */

/* One request gwctl can send: object and verb as help prints them. */
struct ctl_cmd {
	const char *object;    /* canonical name: "route" */
	const char *verb;      /* "show", "add", ...; NULL: the object is the command (reload) */
	uint16_t type;         /* enum ctl_msg_type */
	bool write;            /* changes something: needs the privileged socket */
	const char *arg_usage; /* the words after the verb, "" none but options, NULL none */
	const char *help;
};

struct ctl_object {
	const char *name;                  /* canonical, singular: "neigh" */
	const char *const *aliases;        /* NULL-terminated: "neighbour", "neighbours", ... */
	const char *help;                  /* one line */
	const struct ctl_cmd *const *cmds; /* NULL-terminated; the first runs by default */
};

/* The objects in the grammar's order; *n their number. */
const struct ctl_object *ctl_objects(unsigned *n);

/* What a command line asks for. */
struct ctl_parsed {
	bool help; /* print help (for object, or everything when NULL) */
	const struct ctl_object *object;
	const struct ctl_cmd *cmd; /* !help: the request */
	int argi;                  /* !help: index in argv of the first argument word */
};

/*
 * argv: the words after the options. Returns 0, or -EINVAL with why (a usage error:
 * unknown or missing word, what was expected).
 */
int ctl_cmd_parse(int argc, char **argv, struct ctl_parsed *out, char why[CTL_CMD_WHY_LEN]);

struct ctl_opts {
	bool json, pretty, stats, details, force;
	bool help, version; /* -h, -V: print and exit */
	const char *socket; /* NULL: the default */
	double timeout_s;   /* 0: the default */
	const char *batch;  /* -batch FILE ("-": stdin), NULL: none */
};

/*
 * The options in front of the command. Returns the index of the first word that is not
 * an option (argc when none is left; a lone "--" ends the options and is skipped), or
 * -EINVAL with why.
 */
int ctl_opts_parse(int argc, char **argv, struct ctl_opts *out, char why[CTL_CMD_WHY_LEN]);

/*
 * One -batch line in place into words: blanks separate them, double or single quotes
 * group blanks into one, a word starting with '#' starts a comment to the end of the
 * line. Returns the number of words (0: blank or comment line), or -EINVAL with why
 * (an unterminated quote, more than max words).
 */
int ctl_batch_split(char *line, char **argv, int max, char why[CTL_CMD_WHY_LEN]);

/* Help: every object's synopsis (object NULL), or one object's commands. */
void ctl_cmd_help(FILE *f, const struct ctl_object *object);
/* The options' help lines. */
void ctl_opts_help(FILE *f);

#endif
