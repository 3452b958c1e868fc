/*
 * Internal to the config loader: a YAML document as a small tree of nodes with their
 * positions, and the error collector every stage of loading writes to.
 *
 * libyaml's event parser builds the tree; the loader refuses here what must never reach
 * the schema walk: anchors and aliases (exponential expansion), tags, more than one
 * document, nesting deeper than GW_CFG_MAX_DEPTH, and whatever libyaml itself cannot
 * read (syntax, tabs, invalid UTF-8), each with its line and column.
 */
#ifndef IBGW_GATEWAY_CONFIG_YAML_H
#define IBGW_GATEWAY_CONFIG_YAML_H

#include <stdbool.h>
#include <stddef.h>

#define GW_CFG_MAX_DEPTH  32
#define GW_CFG_MAX_ERRORS 100
#define GW_CFG_MAX_BYTES  (16u << 20)

enum gw_ynode_kind {
	GW_YN_NULL,
	GW_YN_SCALAR,
	GW_YN_SEQ,
	GW_YN_MAP
};

struct gw_ynode {
	enum gw_ynode_kind kind;
	unsigned line, col; /* 1-based */
	bool plain;         /* scalar written without quotes */
	char *str;          /* scalar text (NUL-terminated; may hold NULs, see len) */
	size_t len;
	struct gw_ynode **kids; /* sequence items; for a mapping key, value, key, value... */
	unsigned n;             /* number of kids */
};

struct gw_cfg_err {
	unsigned line, col;
	char *msg;
};

/* Errors of one load, in the order found; sorted by position at the end. */
struct gw_cfg_errs {
	const char *name; /* file name for messages */
	struct gw_cfg_err *v;
	unsigned n, cap;
	bool overflow;                /* GW_CFG_MAX_ERRORS reached; later errors dropped */
	unsigned over_line, over_col; /* where the first dropped one was */
	bool oom;
};

void gw_cfg_err(struct gw_cfg_errs *e, unsigned line, unsigned col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Parse buf into a tree. Returns 0 with *root set (NULL for an empty stream), or -1
 * after recording the problems in e. */
int gw_yaml_parse(const char *buf, size_t len, struct gw_cfg_errs *e, struct gw_ynode **root);
void gw_ynode_free(struct gw_ynode *n);

#endif
