/*
 * YAML text to a node tree, for the config loader (see config_yaml.h).
 *
 * libyaml's event API rather than its document loader, because the loader expands
 * aliases (a "billion laughs" file is a few hundred bytes) and has no depth limit; here
 * every anchor, alias and tag is refused where it appears and nesting is counted. The
 * tree keeps each node's 1-based line and column so that every later message can point
 * at the offending text. libyaml stops at its first syntax error; everything found
 * before it is kept.
 */
#include "gateway/config_yaml.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

void gw_cfg_err(struct gw_cfg_errs *e, unsigned line, unsigned col, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	if (e->n >= GW_CFG_MAX_ERRORS) {
		if (!e->overflow) {
			e->over_line = line;
			e->over_col = col;
		}
		e->overflow = true;
		return;
	}
	if (e->n == e->cap) {
		unsigned cap = e->cap ? e->cap * 2 : 8;
		struct gw_cfg_err *v = realloc(e->v, cap * sizeof(*v));

		if (!v) {
			e->oom = true;
			return;
		}
		e->v = v;
		e->cap = cap;
	}
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0) {
		e->oom = true;
		msg = NULL;
	}
	va_end(ap);
	if (!msg)
		return;
	e->v[e->n++] = (struct gw_cfg_err){ .line = line, .col = col, .msg = msg };
}

void gw_ynode_free(struct gw_ynode *n)
{
	if (!n)
		return;
	for (unsigned i = 0; i < n->n; i++)
		gw_ynode_free(n->kids[i]);
	free(n->kids);
	free(n->str);
	free(n);
}

static struct gw_ynode *node_new(enum gw_ynode_kind kind, yaml_mark_t m)
{
	struct gw_ynode *n = calloc(1, sizeof(*n));

	if (n) {
		n->kind = kind;
		n->line = (unsigned)m.line + 1;
		n->col = (unsigned)m.column + 1;
	}
	return n;
}

static int node_add(struct gw_ynode *parent, struct gw_ynode *kid)
{
	if ((parent->n & (parent->n - 1)) == 0) { /* grow at powers of two */
		unsigned cap = parent->n ? parent->n * 2 : 4;
		struct gw_ynode **k = realloc(parent->kids, cap * sizeof(*k));

		if (!k)
			return -1;
		parent->kids = k;
	}
	parent->kids[parent->n++] = kid;
	return 0;
}

/* YAML 1.2 core schema nulls: an empty plain scalar, "~" and the three spellings. */
static bool plain_is_null(const char *s, size_t len)
{
	return len == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
	       strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

/* Line and column (in characters) of a byte offset, for libyaml's reader errors,
 * which give an offset rather than a mark. */
static void offset_to_pos(const char *buf, size_t len, size_t off, unsigned *line, unsigned *col)
{
	unsigned l = 1, c = 1;

	if (off > len)
		off = len;
	for (size_t i = 0; i < off; i++) {
		if (buf[i] == '\n') {
			l++;
			c = 1;
		} else if (((unsigned char)buf[i] & 0xc0) != 0x80) {
			c++;
		}
	}
	*line = l;
	*col = c;
}

/* The byte at a libyaml mark (line/column in characters), or -1. */
static int byte_at(const char *buf, size_t len, yaml_mark_t m)
{
	size_t i = 0, line = 0, col = 0;

	while (i < len && line < m.line)
		if (buf[i++] == '\n')
			line++;
	while (i < len && buf[i] != '\n') {
		if (((unsigned char)buf[i] & 0xc0) != 0x80) {
			if (col == m.column)
				return (unsigned char)buf[i];
			col++;
		}
		i++;
	}
	return -1;
}

static void report_parser_error(yaml_parser_t *p, const char *buf, size_t len,
				struct gw_cfg_errs *e)
{
	unsigned line, col;

	switch (p->error) {
	case YAML_READER_ERROR:
		offset_to_pos(buf, len, p->problem_offset, &line, &col);
		if (p->problem_value >= 0)
			gw_cfg_err(e, line, col, "%s (0x%02x); the file must be UTF-8 text",
				   p->problem ? p->problem : "unreadable input",
				   (unsigned)p->problem_value);
		else
			gw_cfg_err(e, line, col, "%s; the file must be UTF-8 text",
				   p->problem ? p->problem : "unreadable input");
		break;
	case YAML_SCANNER_ERROR:
	case YAML_PARSER_ERROR:
		line = (unsigned)p->problem_mark.line + 1;
		col = (unsigned)p->problem_mark.column + 1;
		if (byte_at(buf, len, p->problem_mark) == '\t')
			gw_cfg_err(e, line, col, "tab character; YAML indentation must use spaces");
		else if (p->context)
			gw_cfg_err(e, line, col, "%s (%s at line %u, column %u)",
				   p->problem ? p->problem : "syntax error", p->context,
				   (unsigned)p->context_mark.line + 1,
				   (unsigned)p->context_mark.column + 1);
		else
			gw_cfg_err(e, line, col, "%s", p->problem ? p->problem : "syntax error");
		break;
	default:
		gw_cfg_err(e, 1, 1, "out of memory while reading YAML");
		break;
	}
}

static void refuse_anchor_tag(struct gw_cfg_errs *e, yaml_mark_t m, const yaml_char_t *anchor,
			      const yaml_char_t *tag)
{
	if (anchor)
		gw_cfg_err(e, (unsigned)m.line + 1, (unsigned)m.column + 1,
			   "anchors and aliases are not supported (found anchor '&%.40s')",
			   (const char *)anchor);
	if (tag)
		gw_cfg_err(e, (unsigned)m.line + 1, (unsigned)m.column + 1,
			   "tags are not supported (found '%.40s')", (const char *)tag);
}

int gw_yaml_parse(const char *buf, size_t len, struct gw_cfg_errs *e, struct gw_ynode **root)
{
	struct gw_ynode *stack[GW_CFG_MAX_DEPTH + 1];
	struct gw_ynode *top = NULL;
	unsigned depth = 0, docs = 0, errs0 = e->n;
	yaml_parser_t p;
	yaml_event_t ev;
	bool done = false;

	*root = NULL;
	if (!yaml_parser_initialize(&p)) {
		gw_cfg_err(e, 1, 1, "out of memory while reading YAML");
		return -1;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
	yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);
	while (!done) {
		struct gw_ynode *n = NULL;

		if (!yaml_parser_parse(&p, &ev)) {
			report_parser_error(&p, buf, len, e);
			break;
		}
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1) {
				gw_cfg_err(
				    e, (unsigned)ev.start_mark.line + 1,
				    (unsigned)ev.start_mark.column + 1,
				    "a second YAML document; the file must hold exactly one");
				done = true;
			}
			break;
		case YAML_ALIAS_EVENT:
			gw_cfg_err(e, (unsigned)ev.start_mark.line + 1,
				   (unsigned)ev.start_mark.column + 1,
				   "anchors and aliases are not supported (found alias '*%.40s')",
				   (const char *)ev.data.alias.anchor);
			n = node_new(GW_YN_NULL, ev.start_mark);
			break;
		case YAML_SCALAR_EVENT:
			refuse_anchor_tag(e, ev.start_mark, ev.data.scalar.anchor,
					  ev.data.scalar.tag);
			n = node_new(GW_YN_SCALAR, ev.start_mark);
			if (!n)
				break;
			n->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
			n->len = ev.data.scalar.length;
			n->str = malloc(n->len + 1);
			if (!n->str) {
				free(n);
				n = NULL;
				break;
			}
			memcpy(n->str, ev.data.scalar.value, n->len);
			n->str[n->len] = '\0';
			if (n->plain && plain_is_null(n->str, n->len))
				n->kind = GW_YN_NULL;
			break;
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT:
			if (ev.type == YAML_SEQUENCE_START_EVENT)
				refuse_anchor_tag(e, ev.start_mark, ev.data.sequence_start.anchor,
						  ev.data.sequence_start.tag);
			else
				refuse_anchor_tag(e, ev.start_mark, ev.data.mapping_start.anchor,
						  ev.data.mapping_start.tag);
			if (depth == GW_CFG_MAX_DEPTH) {
				gw_cfg_err(e, (unsigned)ev.start_mark.line + 1,
					   (unsigned)ev.start_mark.column + 1,
					   "nesting deeper than %d levels", GW_CFG_MAX_DEPTH);
				done = true;
				break;
			}
			n = node_new(ev.type == YAML_SEQUENCE_START_EVENT ? GW_YN_SEQ : GW_YN_MAP,
				     ev.start_mark);
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			if (depth > 0)
				top = --depth > 0 ? stack[depth - 1] : NULL;
			break;
		default:
			break;
		}
		if (n) {
			bool container = n->kind == GW_YN_SEQ || n->kind == GW_YN_MAP;

			if (top ? node_add(top, n) < 0 : *root != NULL) {
				gw_ynode_free(n);
				e->oom = true;
				done = true;
			} else {
				if (!top)
					*root = n;
				if (container) {
					stack[depth++] = n;
					top = n;
				}
			}
		} else if (ev.type == YAML_SCALAR_EVENT || ev.type == YAML_ALIAS_EVENT ||
			   ((ev.type == YAML_SEQUENCE_START_EVENT ||
			     ev.type == YAML_MAPPING_START_EVENT) &&
			    !done)) {
			e->oom = true; /* node_new or its string failed */
			done = true;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	if (e->oom && e->n == errs0)
		gw_cfg_err(e, 1, 1, "out of memory while reading YAML");
	if (e->n != errs0 || e->oom) {
		gw_ynode_free(*root);
		*root = NULL;
		return -1;
	}
	return 0;
}
