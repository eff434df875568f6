/*
 * test_tql.c -- TQL: the table-driven language tests (testsuite/tql/NAME.test)
 * and the API around them (errors, disassembly, prev/delta state, libffi
 * extension functions, allocation-free evaluation).
 *
 * A .test file is a list of blocks separated by blank lines, as in jq's
 * tests/jq.test; lines starting with '#' between blocks are comments:
 *
 *     [%%FAIL | %%COND | %%NONODES | %%DIS ...]   optional directives
 *     EXPRESSION
 *     EVENT [ ; EVENT ... ]                        one evaluation each
 *     EXPECTED [ ; EXPECTED ... ]                  tm_tql_value_format text
 *
 * %%FAIL: the block is EXPRESSION then the exact compile error text.
 * %%DIS: the block is EXPRESSION then the exact disassembly.
 * %%COND: compile as a condition (want_bool).  %%NONODES: no node table.
 *
 * An EVENT is "-" (no event) or space-separated words:
 *     step=N seq=N time=N phase=fwd|bwd node=ADDR call=N
 *     slot=out.1 dtype=f32 shape=4x32|scalar STAT=VALUE notensor
 *     @ADDR:SLOT [gap=REASON] STAT=VALUE ...   a tensor env->lookup finds
 *     $NAME=VALUE                              a convenience variable
 *     annot.KEY[@SEQ]=V1,V2,...                an annotation of the event's
 *                                              step made before event SEQ
 *                                              (default 0), "" for none
 *     ref@ADDR:SLOT [why=node|event|unmapped] STAT=VALUE ...
 *                                              the tensor of the reference
 *                                              event aligned with the run's
 *                                              event of ADDR (the one in
 *                                              focus, or an @ADDR's); with
 *                                              why=, none for that reason
 * Without a ref@ word there is no env->reference ("no reference").
 * The stats after an @ belong to that tensor; absent stats are unknown.
 */
#include "config.h"

#include <dirent.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensormorph.h"
#include "tm-test.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#ifndef TQL_TESTDIR
#define TQL_TESTDIR "tql"
#endif
#ifndef TQL_EXTLIB
#define TQL_EXTLIB "tql/.libs/tqlext.so"
#endif

/* ---------------------------------------------------------------- fixture */

static tm_nodetab *nodes;
static tm_tql_funcs *funcs;

static const struct {
	const char *address, *type;
	int kind;
} node_list[] = {
	{ "model", "Net", TM_NODE_MODULE },
	{ "model.embed", "Embedding", TM_NODE_MODULE },
	{ "model.layers", "ModuleList", TM_NODE_MODULE },
	{ "model.layers.0", "Block", TM_NODE_MODULE },
	{ "model.layers.0.mlp", "MLP", TM_NODE_MODULE },
	{ "model.layers.1", "Block", TM_NODE_MODULE },
	{ "model.fc1", "Linear", TM_NODE_MODULE },
	{ "model.fc1.weight", "Parameter", TM_NODE_PARAM },
};

static void make_nodes(void)
{
	size_t i;

	nodes = tm_nodetab_new();
	for (i = 0; i < N_ELEMS(node_list); i++) {
		struct tm_node n = { 0 };
		const char *dot = strrchr(node_list[i].address, '.');
		uint32_t id;

		n.address = node_list[i].address;
		n.type = node_list[i].type;
		n.kind = (uint8_t)node_list[i].kind;
		n.parent = TM_NODE_NONE;
		if (dot) {
			char parent[128];
			const struct tm_node *p;

			snprintf(parent, sizeof(parent), "%.*s",
				 (int)(dot - node_list[i].address), node_list[i].address);
			p = tm_nodetab_find(nodes, parent);
			if (p) {
				n.parent = p->id;
				n.depth = (uint16_t)(p->depth + 1);
			}
		}
		tm_nodetab_add(nodes, &n, &id);
	}
}

#define MAX_OTHERS 8
#define MAX_VARS 8
#define MAX_REFS 4

struct test_event {
	int none;                       /* "-": no event at all */
	int notensor;
	int nonodes;
	struct tm_event ev;
	struct tm_tensor t;
	int nothers;
	struct other {
		uint32_t node, call;
		uint32_t reason;
		struct tm_tensor t;
		struct tm_event ev;     /* what lookup answers with */
	} others[MAX_OTHERS];
	int nrefs;
	struct {
		uint32_t node;
		uint32_t why;
		struct tm_tensor t;
		struct tm_event ev;
	} refs[MAX_REFS];
	int nvars;
	struct {
		char name[32];
		char str[64];
		struct tm_tql_value v;
	} vars[MAX_VARS];
	int nannots;
	struct {
		struct tm_annot a;
		char key[TM_ANNOT_MAX_KEY];
		char buf[128];
		const char *vals[8];
	} annots[4];
};

static uint64_t annot_serial;

/* env->annotation: the latest of key made at or before the event. */
static const struct tm_annot *env_annotation(void *user, const struct tm_event *ev,
					     const char *key)
{
	struct test_event *te = user;
	const struct tm_annot *best = NULL;
	int i;

	for (i = 0; i < te->nannots; i++)
		if (!strcmp(te->annots[i].key, key) && te->annots[i].a.step == ev->step &&
		    te->annots[i].a.seq <= ev->seq)
			best = &te->annots[i].a;
	return best;
}

static const struct tm_tensor *env_lookup(void *user, uint32_t node, struct tm_slot slot,
					  uint32_t call, const struct tm_event **event,
					  uint32_t *reason)
{
	struct test_event *te = user;
	int i;

	for (i = 0; i < te->nothers; i++) {
		struct other *o = &te->others[i];

		if (o->node != node || o->t.slot.kind != slot.kind ||
		    o->t.slot.index != slot.index || (call && o->call && call != o->call))
			continue;
		if (o->reason) {
			*reason = o->reason;
			return NULL;
		}
		/* an event of that node, for ref. to align */
		o->ev = te->ev;
		o->ev.node = o->node;
		o->ev.call = o->call ? o->call : te->ev.call;
		o->ev.ntensors = 1;
		o->ev.tensors = &o->t;
		*event = &o->ev;
		return &o->t;
	}
	*reason = 0;
	return NULL;
}

/* env->reference: the ref@ tensor of ev's node and slot. */
static const struct tm_tensor *env_reference(void *user, const struct tm_event *ev,
					     struct tm_slot slot, int contents,
					     const struct tm_event **ref_event,
					     uint32_t *reason)
{
	struct test_event *te = user;
	int i;

	(void)contents;
	*ref_event = NULL;
	*reason = 0;
	if (!ev)
		return NULL;
	for (i = 0; i < te->nrefs; i++) {
		if (te->refs[i].node != ev->node || te->refs[i].t.slot.kind != slot.kind ||
		    te->refs[i].t.slot.index != slot.index)
			continue;
		if (te->refs[i].why) {
			*reason = te->refs[i].why;
			return NULL;
		}
		te->refs[i].ev = *ev;
		te->refs[i].ev.ntensors = 1;
		te->refs[i].ev.tensors = &te->refs[i].t;
		*ref_event = &te->refs[i].ev;
		return &te->refs[i].t;
	}
	*reason = TM_REF_NO_EVENT;
	return NULL;
}

static int env_variable(void *user, const char *name, struct tm_tql_value *out)
{
	struct test_event *te = user;
	int i;

	for (i = 0; i < te->nvars; i++)
		if (!strcmp(te->vars[i].name, name)) {
			*out = te->vars[i].v;
			return TM_OK;
		}
	return TM_ERR_NOT_FOUND;
}

static int parse_gap(const char *s, uint32_t *reason)
{
	static const char *const names[] = {
		"backpressure", "level", "filtered", "crash", "truncated"
	};
	size_t i;

	for (i = 0; i < 5; i++)
		if (!strcmp(s, names[i])) {
			*reason = 1u << i;
			return 0;
		}
	return -1;
}

static int parse_slot(const char *s, struct tm_slot *slot)
{
	return tm_slot_parse(s, slot);
}

static int parse_shape(const char *s, struct tm_tensor *t)
{
	t->rank = 0;
	if (!strcmp(s, "scalar"))
		return 0;
	while (*s && t->rank < TM_MAX_RANK) {
		char *end;

		t->shape[t->rank++] = strtoll(s, &end, 10);
		if (end == s)
			return -1;
		s = *end == 'x' ? end + 1 : end;
	}
	return 0;
}

/* Parses one EVENT description; returns 0 or -1 with a message printed. */
static int parse_event(char *text, struct test_event *te)
{
	struct tm_tensor *cur;
	char *save = NULL, *w;

	memset(te, 0, sizeof(*te));
	te->t.dtype = TM_DT_F32;
	cur = &te->t;
	te->ev.ntensors = 1;
	te->ev.tensors = &te->t;
	te->ev.kind = TM_EV_EXIT;
	for (w = strtok_r(text, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(w, '=');
		const char *val = eq ? eq + 1 : "";
		int stat;

		if (eq)
			*eq = '\0';
		if (!strcmp(w, "-")) {
			te->none = 1;
		} else if (!strcmp(w, "notensor")) {
			te->notensor = 1;
		} else if (!strcmp(w, "nonodes")) {
			te->nonodes = 1;
		} else if (w[0] == '@') {
			char *colon = strchr(w, ':'), *hash;
			const struct tm_node *n;
			struct other *o;

			if (!colon || te->nothers == MAX_OTHERS)
				return -1;
			*colon = '\0';
			o = &te->others[te->nothers++];
			memset(o, 0, sizeof(*o));
			o->t.dtype = TM_DT_F32;
			hash = strchr(w, '#');
			if (hash) {
				*hash = '\0';
				o->call = (uint32_t)atoi(hash + 1);
			}
			n = tm_nodetab_find(nodes, w + 1);
			if (!n || parse_slot(colon + 1, &o->t.slot))
				return -1;
			o->node = n->id;
			cur = &o->t;
		} else if (!strncmp(w, "ref@", 4)) {
			char *colon = strchr(w, ':');
			const struct tm_node *n;
			int i = te->nrefs;

			if (!colon || i == MAX_REFS)
				return -1;
			*colon = '\0';
			memset(&te->refs[i], 0, sizeof(te->refs[i]));
			te->refs[i].t.dtype = TM_DT_F32;
			n = tm_nodetab_find(nodes, w + 4);
			if (!n || parse_slot(colon + 1, &te->refs[i].t.slot))
				return -1;
			te->refs[i].node = n->id;
			te->nrefs++;
			cur = &te->refs[i].t;
		} else if (!strcmp(w, "why")) {
			if (!te->nrefs)
				return -1;
			te->refs[te->nrefs - 1].why = !strcmp(val, "node") ? TM_REF_NO_NODE :
				!strcmp(val, "event") ? TM_REF_NO_EVENT :
				!strcmp(val, "unmapped") ? TM_REF_UNMAPPED : 0;
			if (!te->refs[te->nrefs - 1].why)
				return -1;
		} else if (!strcmp(w, "gap")) {
			if (!te->nothers || parse_gap(val, &te->others[te->nothers - 1].reason))
				return -1;
		} else if (w[0] == '$') {
			int i = te->nvars++;

			if (i >= MAX_VARS)
				return -1;
			snprintf(te->vars[i].name, sizeof(te->vars[i].name), "%s", w + 1);
			if (val[0] == '"') {
				snprintf(te->vars[i].str, sizeof(te->vars[i].str), "%s", val + 1);
				te->vars[i].str[strcspn(te->vars[i].str, "\"")] = '\0';
				te->vars[i].v.type = TM_TQL_STR;
				te->vars[i].v.v.str.s = te->vars[i].str;
				te->vars[i].v.v.str.len = strlen(te->vars[i].str);
			} else if (!strcmp(val, "true") || !strcmp(val, "false")) {
				te->vars[i].v.type = TM_TQL_BOOL;
				te->vars[i].v.v.b = val[0] == 't';
			} else if (strpbrk(val, ".en")) {
				te->vars[i].v.type = TM_TQL_NUM;
				te->vars[i].v.v.d = strtod(val, NULL);
			} else {
				te->vars[i].v.type = TM_TQL_INT;
				te->vars[i].v.v.i = strtoll(val, NULL, 10);
			}
		} else if (!strncmp(w, "annot.", 6)) {
			char *at = strchr(w, '@'), *save2 = NULL, *v;
			int i = te->nannots++;

			if (i >= 4)
				return -1;
			if (at)
				*at = '\0';
			snprintf(te->annots[i].key, sizeof(te->annots[i].key), "%s", w + 6);
			snprintf(te->annots[i].buf, sizeof(te->annots[i].buf), "%s", val);
			te->annots[i].a.key = te->annots[i].key;
			te->annots[i].a.seq = at ? strtoull(at + 1, NULL, 10) : 0;
			te->annots[i].a.values = te->annots[i].vals;
			for (v = strtok_r(te->annots[i].buf, ",", &save2);
			     v && te->annots[i].a.nvalues < 8; v = strtok_r(NULL, ",", &save2))
				te->annots[i].vals[te->annots[i].a.nvalues++] = v;
			te->annots[i].a.count = te->annots[i].a.nvalues;
			/* one buffer for every event's values: each its own
			 * annotation, as a reader's (answers about a list are kept) */
			te->annots[i].a.time_ns = ++annot_serial;
		} else if (!strcmp(w, "step")) {
			te->ev.step = strtoull(val, NULL, 10);
		} else if (!strcmp(w, "seq")) {
			te->ev.seq = strtoull(val, NULL, 10);
		} else if (!strcmp(w, "time")) {
			te->ev.time_ns = strtoull(val, NULL, 10);
		} else if (!strcmp(w, "call")) {
			te->ev.call = (uint32_t)atoi(val);
		} else if (!strcmp(w, "level")) {
			te->ev.level = (uint8_t)atoi(val);
		} else if (!strcmp(w, "phase")) {
			te->ev.phase = !strcmp(val, "bwd") ? TM_PHASE_BWD : TM_PHASE_FWD;
		} else if (!strcmp(w, "node")) {
			const struct tm_node *n = tm_nodetab_find(nodes, val);

			te->ev.node = n ? n->id : 999;
		} else if (!strcmp(w, "slot")) {
			if (parse_slot(val, &cur->slot))
				return -1;
		} else if (!strcmp(w, "dtype")) {
			cur->dtype = (uint8_t)tm_dtype_from_name(val);
		} else if (!strcmp(w, "shape")) {
			if (parse_shape(val, cur))
				return -1;
		} else if ((stat = tm_stat_from_name(w)) >= 0) {
			cur->stat[stat] = strtod(val, NULL);
			cur->have |= TM_STAT_BIT(stat);
		} else {
			printf("\n  bad event word '%s'\n", w);
			return -1;
		}
	}
	return 0;
}

/* ---------------------------------------------------------------- tables */

struct block {
	const char *file;
	int line;
	int fail, cond, nonodes, dis;
	char *expr;
	char *events;
	char *expected;             /* value list, error text or listing */
};

static char *split_next(char **s)
{
	char *r = *s, *sep;

	if (!r)
		return NULL;
	sep = strstr(r, " ; ");
	if (sep) {
		*sep = '\0';
		*s = sep + 3;
	} else {
		*s = NULL;
	}
	return r;
}

static int run_values(struct block *b, tm_tql_prog *p)
{
	char *evs = b->events, *exp = b->expected, *e, *x;
	int ok = 1, n = 0;

	while ((e = split_next(&evs))) {
		struct test_event te;
		struct tm_tql_env env = { 0 };
		struct tm_tql_ctx ctx = { 0 };
		struct tm_tql_value v;
		char got[256];

		n++;
		x = split_next(&exp);
		if (!x) {
			printf("\n  %s:%d: more events than expected values\n", b->file, b->line);
			return 0;
		}
		if (parse_event(e, &te)) {
			printf("\n  %s:%d: bad event description\n", b->file, b->line);
			return 0;
		}
		env.user = &te;
		env.lookup = env_lookup;
		env.variable = env_variable;
		env.annotation = env_annotation;
		if (te.nrefs)
			env.reference = env_reference;
		for (int i = 0; i < te.nannots; i++)
			te.annots[i].a.step = te.ev.step;
		ctx.event = te.none ? NULL : &te.ev;
		ctx.tensor = te.none || te.notensor ? NULL : &te.t;
		ctx.nodes = te.nonodes ? NULL : nodes;
		ctx.env = &env;
		if (tm_tql_eval(p, &ctx, &v) != TM_OK) {
			printf("\n  %s:%d: eval failed\n", b->file, b->line);
			return 0;
		}
		if (tm_tql_value_format(&v, got, sizeof(got)))
			snprintf(got, sizeof(got), "(format failed)");
		if (strcmp(got, x)) {
			printf("\n  %s:%d: %s\n    event %d: expected %s, got %s\n",
			       b->file, b->line, b->expr, n, x, got);
			ok = 0;
		}
	}
	if (exp) {
		printf("\n  %s:%d: more expected values than events\n", b->file, b->line);
		return 0;
	}
	return ok;
}

static int run_block(struct block *b)
{
	struct tm_tql_compile_opts opts = { 0 };
	tm_tql_prog *p = NULL;
	char *errors = NULL;
	int rc, ok = 1;

	opts.nodes = b->nonodes ? NULL : nodes;
	opts.funcs = funcs;
	opts.want_bool = b->cond;
	rc = tm_tql_compile(b->expr, &opts, &p, &errors);
	if (b->fail) {
		if (rc != TM_ERR_TQL || !errors || strcmp(errors, b->expected)) {
			printf("\n  %s:%d: %s\n    expected error:\n%s    got (rc %d):\n%s",
			       b->file, b->line, b->expr, b->expected, rc,
			       errors ? errors : "(none)\n");
			ok = 0;
		}
	} else if (rc != TM_OK) {
		printf("\n  %s:%d: %s\n    unexpected compile failure (rc %d):\n%s",
		       b->file, b->line, b->expr, rc, errors ? errors : "");
		ok = 0;
	} else if (b->dis) {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);

		tm_tql_disassemble(p, f);
		fclose(f);
		if (strcmp(buf, b->expected)) {
			printf("\n  %s:%d: %s\n    expected listing:\n%s    got:\n%s",
			       b->file, b->line, b->expr, b->expected, buf);
			ok = 0;
		}
		free(buf);
	} else {
		ok = run_values(b, p);
	}
	free(errors);
	tm_tql_free(p);
	return ok;
}

/* Runs every block of one file; returns the number of failures. */
static int run_file(const char *path, const char *name, int *count)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	char *lines[64];
	int nlines = 0, lineno = 0, start = 0, fails = 0, i;

	if (!f) {
		printf("\n  cannot open %s\n", path);
		return 1;
	}
	for (;;) {
		char *got = fgets(line, sizeof(line), f);
		size_t n = got ? strlen(line) : 0;

		if (got) {
			lineno++;
			if (n && line[n - 1] == '\n')
				line[--n] = '\0';
		}
		if (got && nlines == 0 && line[0] == '#')
			continue;
		if (got && n > 0) {
			if (nlines == 0)
				start = lineno;
			if (nlines < 64)
				lines[nlines++] = strdup(line);
			continue;
		}
		if (nlines) {
			struct block b = { .file = name, .line = start };
			int k = 0;
			size_t tot = 1;

			while (k < nlines && !strncmp(lines[k], "%%", 2)) {
				b.fail |= !!strstr(lines[k], "FAIL");
				b.cond |= !!strstr(lines[k], "COND");
				b.nonodes |= !!strstr(lines[k], "NONODES");
				b.dis |= !!strstr(lines[k], "DIS");
				k++;
			}
			if (k < nlines)
				b.expr = lines[k++];
			if (b.fail || b.dis) {
				for (i = k; i < nlines; i++)
					tot += strlen(lines[i]) + 1;
				b.expected = calloc(1, tot);
				for (i = k; i < nlines; i++) {
					strcat(b.expected, lines[i]);
					strcat(b.expected, "\n");
				}
			} else if (k + 2 == nlines) {
				b.events = lines[k];
				b.expected = strdup(lines[k + 1]);
			}
			if (!b.expr || !b.expected) {
				printf("\n  %s:%d: malformed block\n", name, start);
				fails++;
			} else {
				++*count;
				fails += !run_block(&b);
			}
			free(b.expected);
			for (i = 0; i < nlines; i++)
				free(lines[i]);
			nlines = 0;
		}
		if (!got)
			break;
	}
	fclose(f);
	return fails;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_tables(void)
{
	DIR *d = opendir(TQL_TESTDIR);
	struct dirent *de;
	char *names[64];
	int n = 0, i, fails = 0, count = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	while ((de = readdir(d)) && n < 64) {
		size_t len = strlen(de->d_name);

		if (len > 5 && !strcmp(de->d_name + len - 5, ".test"))
			names[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof(*names), cmp_names);
	CU_ASSERT(n >= 5);
	for (i = 0; i < n; i++) {
		char path[1024];
		int f;

		snprintf(path, sizeof(path), "%s/%s", TQL_TESTDIR, names[i]);
		f = run_file(path, names[i], &count);
		CU_ASSERT_EQUAL(f, 0);
		fails += f;
		free(names[i]);
	}
	printf("\n  %d table tests, %d failed ", count, fails);
	CU_ASSERT(count > 100);
}

/* ---------------------------------------------------------------- API */

static tm_tql_prog *compile_ok(const char *src, int want_bool)
{
	struct tm_tql_compile_opts opts = { nodes, funcs, want_bool, 0 };
	tm_tql_prog *p = NULL;
	char *err = NULL;
	int rc = tm_tql_compile(src, &opts, &p, &err);

	if (rc)
		printf("\n  %s: %s", src, err ? err : "?");
	CU_ASSERT_EQUAL(rc, TM_OK);
	free(err);
	return p;
}

static void test_api_edges(void)
{
	tm_tql_prog *p = NULL;
	struct tm_tql_value v;
	char *err = (char *)1;

	tm_tql_free(NULL);
	tm_tql_funcs_free(NULL);
	CU_ASSERT_EQUAL(tm_tql_compile("1", NULL, NULL, NULL), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_tql_compile(NULL, NULL, &p, &err), TM_ERR_INVALID_ARG);
	CU_ASSERT_PTR_NULL(err);
	CU_ASSERT_EQUAL(tm_tql_eval(NULL, NULL, &v), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_tql_test(NULL, NULL), -1);
	CU_ASSERT_PTR_NULL(tm_tql_source(NULL));
	CU_ASSERT_EQUAL(tm_tql_disassemble(NULL, stdout), TM_ERR_INVALID_ARG);

	/* no options at all: a plain expression, evaluated without a ctx */
	CU_ASSERT_EQUAL(tm_tql_compile("1 + 2 * 3", NULL, &p, NULL), TM_OK);
	CU_ASSERT_STRING_EQUAL(tm_tql_source(p), "1 + 2 * 3");
	CU_ASSERT_EQUAL(tm_tql_result_type(p), TM_TQL_INT);
	CU_ASSERT_EQUAL(tm_tql_uses_lookup(p), 0);
	CU_ASSERT_EQUAL(tm_tql_eval(p, NULL, &v), TM_OK);
	CU_ASSERT_EQUAL(v.type, TM_TQL_INT);
	CU_ASSERT_EQUAL(v.v.i, 7);
	tm_tql_free(p);

	p = compile_ok("model.layers.0:out.std / model.embed:out.std", 0);
	CU_ASSERT_EQUAL(tm_tql_uses_lookup(p), 1);
	CU_ASSERT_EQUAL(tm_tql_result_type(p), TM_TQL_NUM);
	/* no env: unknown, not a crash */
	CU_ASSERT_EQUAL(tm_tql_eval(p, NULL, &v), TM_OK);
	CU_ASSERT_EQUAL(v.type, TM_TQL_UNKNOWN);
	tm_tql_free(p);

	p = compile_ok("$x", 0);
	CU_ASSERT_EQUAL(tm_tql_result_type(p), TM_TQL_UNKNOWN);
	tm_tql_free(p);
}

static void test_test_convenience(void)
{
	struct tm_tensor t = { .have = TM_STAT_BIT(TM_STAT_NAN_COUNT) };
	struct tm_event ev = { .step = 200, .ntensors = 1, .tensors = &t };
	struct tm_tql_ctx ctx = { &ev, &t, nodes, NULL, 0 };
	tm_tql_prog *p = compile_ok("tensor.nan_count > 0 && step > 100", 1);

	t.stat[TM_STAT_NAN_COUNT] = 3;
	CU_ASSERT_EQUAL(tm_tql_test(p, &ctx), 1);
	t.stat[TM_STAT_NAN_COUNT] = 0;
	CU_ASSERT_EQUAL(tm_tql_test(p, &ctx), 0);
	t.have = 0;
	CU_ASSERT_EQUAL(tm_tql_test(p, &ctx), -1);
	ev.step = 5;    /* unknown && false is false */
	CU_ASSERT_EQUAL(tm_tql_test(p, &ctx), 0);
	tm_tql_free(p);
}

static void test_error_report(void)
{
	struct tm_tql_compile_opts opts = { nodes, NULL, 1, 0 };
	tm_tql_prog *p = (tm_tql_prog *)1;
	char *err = NULL;

	/* several errors in one pass, in source order, each with its caret */
	CU_ASSERT_EQUAL(tm_tql_compile("tensor.nan_cnt > 0 &&\n  stpe > \"x\" || sqr(2)",
				       &opts, &p, &err), TM_ERR_TQL);
	CU_ASSERT_PTR_NULL(p);
	CU_ASSERT_PTR_NOT_NULL_FATAL(err);
	CU_ASSERT_STRING_EQUAL(err,
		"tql:1:1: error: unknown field 'tensor.nan_cnt'; did you mean 'tensor.nan_count'?\n"
		"tensor.nan_cnt > 0 &&\n"
		"^~~~~~~~~~~~~~\n"
		"tql:2:3: error: unknown name 'stpe'; did you mean 'step'?\n"
		"  stpe > \"x\" || sqr(2)\n"
		"  ^~~~\n"
		"tql:2:17: error: unknown function 'sqr'; did you mean 'sqrt'?\n"
		"  stpe > \"x\" || sqr(2)\n"
		"                ^~~\n");
	free(err);

	/* errors == NULL is allowed */
	CU_ASSERT_EQUAL(tm_tql_compile("1 +", &opts, &p, NULL), TM_ERR_TQL);
}

static void test_limits(void)
{
	size_t n = 100000, i;
	char *src = malloc(n + 1);
	tm_tql_prog *p = NULL;
	char *err = NULL;

	/* too long */
	memset(src, '1', n);
	src[n] = '\0';
	CU_ASSERT_EQUAL(tm_tql_compile(src, NULL, &p, &err), TM_ERR_TQL);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "too long"));
	free(err);
	/* too deep: an error, not a stack overflow */
	for (i = 0; i < 5000; i++)
		src[i] = '(';
	src[5000] = '1';
	src[5001] = '\0';
	CU_ASSERT_EQUAL(tm_tql_compile(src, NULL, &p, &err), TM_ERR_TQL);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "nested too deeply"));
	free(err);
	/* deep but allowed: folds to a constant */
	for (i = 0; i < 150; i++)
		src[i] = '(';
	src[150] = '1';
	for (i = 0; i < 150; i++)
		src[151 + i] = ')';
	src[301] = '\0';
	CU_ASSERT_EQUAL(tm_tql_compile(src, NULL, &p, &err), TM_OK);
	tm_tql_free(p);
	/* a long chain makes a deep tree: fine up to the cap, then an error */
	for (i = 0; i + 4 < 3600; i += 4)
		memcpy(src + i, "1 + ", 4);
	memcpy(src + i, "1", 2);
	CU_ASSERT_EQUAL(tm_tql_compile(src, NULL, &p, &err), TM_OK);
	tm_tql_free(p);
	for (i = 0; i + 4 < 40000; i += 4)
		memcpy(src + i, "1 + ", 4);
	memcpy(src + i, "1", 2);
	CU_ASSERT_EQUAL(tm_tql_compile(src, NULL, &p, &err), TM_ERR_TQL);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "too complex"));
	free(err);
	/* a slot index is 16 bits, from 32768 on requests' rows: 65536 must
	 * not wrap onto slot 0, nor 32768 read a request's rows (32767
	 * passes the index check and only lacks a node table here) */
	CU_ASSERT_EQUAL(tm_tql_compile("model.fc1:out.32767.std", NULL, &p, &err), TM_ERR_TQL);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "no node table"));
	free(err);
	CU_ASSERT_EQUAL(tm_tql_compile("model.fc1:out.32768.std", NULL, &p, &err), TM_ERR_TQL);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "bad slot index '32768'"));
	free(err);
	CU_ASSERT_EQUAL(tm_tql_compile("model.fc1:out.65536.std", NULL, &p, &err), TM_ERR_TQL);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "bad slot index '65536'"));
	free(err);
	CU_ASSERT_EQUAL(tm_tql_compile("model.fc1:out.1[r2].std", NULL, &p, &err), TM_ERR_TQL);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "no node table"));
	free(err);
	free(src);
}

static void test_disassemble(void)
{
	tm_tql_prog *p = compile_ok("tensor.nan_count > 0 && step > 100", 1);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CU_ASSERT_EQUAL(tm_tql_disassemble(p, f), TM_OK);
	fclose(f);
	CU_ASSERT_STRING_EQUAL(buf,
		"   0  STAT_GT_IK  tensor.nan_count, 0\n"
		"   1  JFALSE      -> 4\n"
		"   2  EV_GT_IK    step, 100\n"
		"   3  AND\n"
		"   4  RET\n");
	free(buf);
	tm_tql_free(p);
}

static void test_value_format(void)
{
	struct tm_tql_value v = { 0 };
	static const int64_t dims[] = { 4, 32 };
	char buf[64];

	v.type = TM_TQL_NUM;
	v.v.d = 15000;
	CU_ASSERT_EQUAL(tm_tql_value_format(&v, buf, sizeof(buf)), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "15000");
	v.v.d = 1.5e6;
	tm_tql_value_format(&v, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "1.5e+06");
	v.v.d = 2.5e-7;
	tm_tql_value_format(&v, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "2.5e-07");
	v.v.d = 1234567;
	tm_tql_value_format(&v, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "1234567");
	v.v.d = -0.001;
	tm_tql_value_format(&v, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "-0.001");
	v.v.d = 0.1;
	tm_tql_value_format(&v, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "0.1");
	v.type = TM_TQL_STR;
	v.v.str.s = "model.\"fc1\"";
	v.v.str.len = strlen(v.v.str.s);
	tm_tql_value_format(&v, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "\"model.\\\"fc1\\\"\"");
	CU_ASSERT_EQUAL(tm_tql_value_format(&v, buf, 5), TM_ERR_INVALID_ARG);
	v.type = TM_TQL_SHAPE;
	v.v.shape.dims = dims;
	v.v.shape.rank = 2;
	tm_tql_value_format(&v, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "[4, 32]");
	CU_ASSERT_EQUAL(tm_tql_value_format(&v, buf, 4), TM_ERR_INVALID_ARG);
	v.type = TM_TQL_UNKNOWN;
	v.unknown_reason = TM_GAP_LEVEL;
	tm_tql_value_format(&v, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "<unknown: level>");
	v.unknown_reason = 0;
	tm_tql_value_format(&v, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "<unknown>");
	v.type = 99;
	CU_ASSERT_EQUAL(tm_tql_value_format(&v, buf, sizeof(buf)), TM_ERR_INVALID_ARG);
}

static void test_field_names(void)
{
	const char *const *names = tm_tql_field_names();
	int s;

	for (s = 0; s < TM_STAT__COUNT; s++) {
		char want[64];
		int found = 0, i;

		snprintf(want, sizeof(want), "tensor.%s", tm_stat_table[s].name);
		for (i = 0; names[i]; i++)
			found |= !strcmp(names[i], want);
		CU_ASSERT(found);
	}
	/* and every listed name compiles */
	for (; *names; names++) {
		tm_tql_prog *p = compile_ok(*names, 0);

		tm_tql_free(p);
	}
}

/* prev() forgets on reset; the history is per (node, slot) */
static void test_prev_reset(void)
{
	struct tm_tensor t = { .have = TM_STAT_BIT(TM_STAT_STD) };
	struct tm_event ev = { .node = 3, .ntensors = 1, .tensors = &t };
	struct tm_tql_ctx ctx = { &ev, &t, nodes, NULL, 0 };
	tm_tql_prog *p = compile_ok("delta(tensor.std)", 0);
	struct tm_tql_value v;

	t.stat[TM_STAT_STD] = 1;
	tm_tql_eval(p, &ctx, &v);
	CU_ASSERT_EQUAL(v.type, TM_TQL_UNKNOWN);
	t.stat[TM_STAT_STD] = 4;
	tm_tql_eval(p, &ctx, &v);
	CU_ASSERT_EQUAL(v.type, TM_TQL_NUM);
	CU_ASSERT_DOUBLE_EQUAL(v.v.d, 3, 1e-12);
	tm_tql_reset(p);
	tm_tql_eval(p, &ctx, &v);
	CU_ASSERT_EQUAL(v.type, TM_TQL_UNKNOWN);
	tm_tql_free(p);
}

/* Past the cap of remembered (node, slot) pairs prev() is unknown. */
static void test_prev_cap(void)
{
	struct tm_tensor t = { .have = TM_STAT_BIT(TM_STAT_STD) };
	struct tm_event ev = { .ntensors = 1, .tensors = &t };
	struct tm_tql_ctx ctx = { &ev, &t, NULL, NULL, 0 };
	tm_tql_prog *p;
	struct tm_tql_value v;
	uint32_t n, known = 0;

	CU_ASSERT_EQUAL_FATAL(tm_tql_compile("prev(tensor.std)", NULL, &p, NULL), TM_OK);
	for (int round = 0; round < 2; round++)
		for (n = 0; n < 5000; n++) {
			ev.node = n;
			tm_tql_eval(p, &ctx, &v);
			known += round == 1 && v.type == TM_TQL_NUM;
		}
	CU_ASSERT(known >= 1024 && known < 5000);
	tm_tql_free(p);
}

static void test_no_allocation(void)
{
#if defined(__SANITIZE_ADDRESS__)
	CU_PASS("allocation count not measurable under ASan");
#else
	struct tm_tensor t = { .have = TM_STAT_BIT(TM_STAT_STD) | TM_STAT_BIT(TM_STAT_NAN_COUNT) };
	struct tm_event ev = { .ntensors = 1, .tensors = &t };
	struct tm_tql_ctx ctx = { &ev, &t, nodes, NULL, 0 };
	tm_tql_prog *p = compile_ok("delta(tensor.std) > 1 || node.path =~ \"model.*\" && "
				    "tensor.nan_count + prev(tensor.nan_count) > 3", 1);
	struct mallinfo2 before, after;
	struct tm_tql_value v;
	int i;

	tm_tql_eval(p, &ctx, &v);
	before = mallinfo2();
	for (i = 0; i < 10000; i++) {
		ev.node = (uint32_t)(i % 8);
		t.stat[TM_STAT_STD] = i;
		tm_tql_eval(p, &ctx, &v);
	}
	after = mallinfo2();
	CU_ASSERT_EQUAL(before.uordblks, after.uordblks);
	CU_ASSERT_EQUAL(before.hblkhd, after.hblkhd);
	tm_tql_free(p);
#endif
}

static void test_ffi_load(void)
{
	tm_tql_funcs *f = tm_tql_funcs_new();
	char *err = NULL;

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(tm_tql_funcs_load(f, "/nonexistent/libx.so f(double) -> double", &err),
			TM_ERR_NOT_FOUND);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "cannot load library '/nonexistent/libx.so'"));
	free(err);
	CU_ASSERT_EQUAL(tm_tql_funcs_load(f, TQL_EXTLIB " nosuch(double) -> double", &err),
			TM_ERR_NOT_FOUND);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "no symbol 'nosuch' in library"));
	free(err);
	CU_ASSERT_EQUAL(tm_tql_funcs_load(f, TQL_EXTLIB " tqlext_hypot(double, float) -> double",
					  &err), TM_ERR_INVALID_ARG);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "unknown argument type"));
	free(err);
	CU_ASSERT_EQUAL(tm_tql_funcs_load(f, TQL_EXTLIB " tqlext_hypot(double, double)", &err),
			TM_ERR_INVALID_ARG);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "expected '-> TYPE'"));
	free(err);
	CU_ASSERT_EQUAL(tm_tql_funcs_load(f, TQL_EXTLIB " sqrt(double) -> double", &err),
			TM_ERR_INVALID_ARG);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "builtin"));
	free(err);
	CU_ASSERT_EQUAL(tm_tql_funcs_load(f, "justoneword", &err), TM_ERR_INVALID_ARG);
	free(err);
	CU_ASSERT_EQUAL(tm_tql_funcs_load(f, TQL_EXTLIB " tqlext_hypot(double, double) -> double",
					  &err), TM_OK);
	CU_ASSERT_PTR_NULL(err);
	CU_ASSERT_EQUAL(tm_tql_funcs_load(f, TQL_EXTLIB " tqlext_hypot(double, double) -> double",
					  &err), TM_ERR_INVALID_ARG);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "already loaded"));
	free(err);
	CU_ASSERT_STRING_EQUAL(tm_tql_funcs_name(f, 0), "tqlext_hypot");
	CU_ASSERT_PTR_NULL(tm_tql_funcs_name(f, 1));
	tm_tql_funcs_free(f);
}

/* The table tests call these; loaded once for the whole suite. */
static void load_funcs(void)
{
	static const char *const specs[] = {
		TQL_EXTLIB " tqlext_hypot(double, double) -> double",
		TQL_EXTLIB " tqlext_add(int64, int64) -> int64",
		TQL_EXTLIB " tqlext_odd(int64) -> bool",
		TQL_EXTLIB " tqlext_pick(bool, double, double) -> double",
		TQL_EXTLIB " tqlext_answer() -> double",
	};
	size_t i;

	funcs = tm_tql_funcs_new();
	for (i = 0; i < N_ELEMS(specs); i++) {
		char *err = NULL;

		if (tm_tql_funcs_load(funcs, specs[i], &err))
			fprintf(stderr, "test_tql: %s\n", err ? err : "load failed");
		free(err);
	}
}

/* ---------------------------------------------------------------- ranks */

/* `rank` is the process's rank from the ctx, with or without an event, on
 * every path the VM has for event fields (plain load, the fused compare,
 * arithmetic); tensor.rank stays the number of dimensions. */
static void test_rank_field(void)
{
	static const int64_t dims[] = { 4, 32 };
	struct tm_tensor t = { 0 };
	struct tm_event ev = { .step = 7, .ntensors = 1, .tensors = &t };
	struct tm_tql_ctx ctx = { &ev, &t, nodes, NULL, 0 };
	struct tm_tql_value v;
	tm_tql_prog *eq = compile_ok("rank == 1", 1);
	tm_tql_prog *load = compile_ok("rank", 0);
	tm_tql_prog *arith = compile_ok("rank * 10 + step", 0);
	tm_tql_prog *both = compile_ok("rank >= 1 && tensor.rank == 2", 1);
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)dims;
	t.rank = 2;
	t.shape[0] = 4;
	t.shape[1] = 32;
	CU_ASSERT_EQUAL(tm_tql_result_type(load), TM_TQL_INT);
	/* a zeroed ctx is rank 0 */
	CU_ASSERT_EQUAL(tm_tql_test(eq, &ctx), 0);
	CU_ASSERT_EQUAL(tm_tql_eval(load, &ctx, &v), TM_OK);
	CU_ASSERT_EQUAL(v.type, TM_TQL_INT);
	CU_ASSERT_EQUAL(v.v.i, 0);
	ctx.rank = 1;
	CU_ASSERT_EQUAL(tm_tql_test(eq, &ctx), 1);
	CU_ASSERT_EQUAL(tm_tql_test(both, &ctx), 1);
	CU_ASSERT_EQUAL(tm_tql_eval(arith, &ctx, &v), TM_OK);
	CU_ASSERT_EQUAL(v.type, TM_TQL_INT);
	CU_ASSERT_EQUAL(v.v.i, 17);
	ctx.rank = 3;
	CU_ASSERT_EQUAL(tm_tql_test(eq, &ctx), 0);
	CU_ASSERT_EQUAL(tm_tql_eval(load, &ctx, &v), TM_OK);
	CU_ASSERT_EQUAL(v.v.i, 3);
	t.rank = 1;
	CU_ASSERT_EQUAL(tm_tql_test(both, &ctx), 0);
	/* known without an event (print rank) */
	ctx.event = NULL;
	ctx.tensor = NULL;
	CU_ASSERT_EQUAL(tm_tql_test(eq, &ctx), 0);
	ctx.rank = 1;
	CU_ASSERT_EQUAL(tm_tql_test(eq, &ctx), 1);
	/* negative: not known */
	ctx.rank = -1;
	CU_ASSERT_EQUAL(tm_tql_test(eq, &ctx), -1);
	CU_ASSERT_EQUAL(tm_tql_eval(load, &ctx, &v), TM_OK);
	CU_ASSERT_EQUAL(v.type, TM_TQL_UNKNOWN);
	/* no ctx at all */
	CU_ASSERT_EQUAL(tm_tql_test(eq, NULL), -1);

	f = open_memstream(&buf, &len);
	CU_ASSERT_EQUAL(tm_tql_disassemble(eq, f), TM_OK);
	fclose(f);
	CU_ASSERT_STRING_EQUAL(buf,
		"   0  EV_EQ_IK    rank, 1\n"
		"   1  RET\n");
	free(buf);
	tm_tql_free(eq);
	tm_tql_free(load);
	tm_tql_free(arith);
	tm_tql_free(both);
}

static void test_rank_names(void)
{
	struct tm_tql_compile_opts opts = { nodes, NULL, 0, 0 };
	const char *const *names = tm_tql_field_names();
	tm_tql_prog *p = NULL;
	char *err = NULL;
	int found = 0;

	for (; *names; names++)
		found |= !strcmp(*names, "rank");
	CU_ASSERT(found);
	CU_ASSERT_EQUAL(tm_tql_compile("rnak > 0", &opts, &p, &err), TM_ERR_TQL);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "did you mean 'rank'?"));
	free(err);
	CU_ASSERT_EQUAL(tm_tql_compile("zzzzzzzzzz > 0", &opts, &p, &err), TM_ERR_TQL);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "step, phase, seq, time, rank)"));
	free(err);
	/* an extension function cannot take the name */
	{
		tm_tql_funcs *f = tm_tql_funcs_new();

		CU_ASSERT_NOT_EQUAL(tm_tql_funcs_load(f, TQL_EXTLIB " rank(int64) -> int64",
						      &err), TM_OK);
		free(err);
		tm_tql_funcs_free(f);
	}
}

struct node_def {
	const char *address;
	int kind;
};

/* A node table of these nodes, in this order (ids 0, 1, ...). */
static tm_nodetab *nodes_of(const struct node_def *list, size_t n)
{
	tm_nodetab *t = tm_nodetab_new();
	size_t i;

	for (i = 0; t && i < n; i++) {
		struct tm_node nd = { 0 };

		nd.address = list[i].address;
		nd.kind = (uint8_t)list[i].kind;
		nd.parent = TM_NODE_NONE;
		if (tm_nodetab_add(t, &nd, NULL) != TM_OK) {
			tm_nodetab_free(t);
			return NULL;
		}
	}
	return t;
}

/* A multi-rank node table, as tmdb builds it: every rank's nodes "@R:". */
static tm_nodetab *rank_nodes(void)
{
	static const struct node_def list[] = {
		{ "@0:model", TM_NODE_MODULE },         /* 0 */
		{ "@0:model.fc", TM_NODE_MODULE },      /* 1 */
		{ "@1:model", TM_NODE_MODULE },         /* 2 */
		{ "@1:model.fc", TM_NODE_MODULE },      /* 3 */
		{ "@1:model.fc.weight", TM_NODE_PARAM },/* 4 */
	};
	return nodes_of(list, N_ELEMS(list));
}

/* Answers every lookup with a tensor whose std is the node id, so that a
 * value tells which node a term resolved to. */
static const struct tm_tensor *id_lookup(void *user, uint32_t node, struct tm_slot slot,
					 uint32_t call, const struct tm_event **event,
					 uint32_t *reason)
{
	static struct tm_tensor t;
	static struct tm_event ev;

	(void)user;
	(void)call;
	memset(&t, 0, sizeof(t));
	t.slot = slot;
	t.have = TM_STAT_BIT(TM_STAT_STD);
	t.stat[TM_STAT_STD] = node;
	ev.node = node;
	*event = &ev;
	*reason = 0;
	return &t;
}

/* The reference of the run event ev: std 100 + the event's node id. */
static const struct tm_tensor *id_reference(void *user, const struct tm_event *ev,
					    struct tm_slot slot, int contents,
					    const struct tm_event **ref_event, uint32_t *reason)
{
	static struct tm_tensor t;

	(void)user;
	(void)contents;
	*reason = 0;
	*ref_event = ev;
	if (!ev)
		return NULL;
	memset(&t, 0, sizeof(t));
	t.slot = slot;
	t.have = TM_STAT_BIT(TM_STAT_STD);
	t.stat[TM_STAT_STD] = 100 + ev->node;
	return &t;
}

static void expect_error(tm_nodetab *t, int32_t rank, const char *src, const char *msg);

/* ref.@R:PATH: the reference of the run's event of that rank's node. */
static void test_rank_ref(void)
{
	tm_nodetab *t = rank_nodes();
	struct tm_tql_compile_opts opts = { t, NULL, 0, 0 };
	struct tm_tql_env env = { NULL, id_lookup, NULL, NULL, NULL, id_reference };
	struct tm_tql_ctx ctx = { NULL, NULL, t, &env, 0 };
	struct tm_tql_value v;
	tm_tql_prog *p = NULL;
	char *err = NULL;

	CU_ASSERT_EQUAL_FATAL(tm_tql_compile("ref.@1:model.fc:out.std - @1:model.fc.std", &opts,
					     &p, &err), TM_OK);
	CU_ASSERT_EQUAL(tm_tql_uses_reference(p), 1);
	CU_ASSERT_EQUAL(tm_tql_eval(p, &ctx, &v), TM_OK);
	CU_ASSERT_EQUAL(v.type, TM_TQL_NUM);
	CU_ASSERT_EQUAL(v.v.d, 100);
	tm_tql_free(p);
	/* without "@R:", the session's rank (opts.rank 1): node 3 */
	opts.rank = 1;
	CU_ASSERT_EQUAL_FATAL(tm_tql_compile("ref.model.fc:out.std", &opts, &p, &err), TM_OK);
	CU_ASSERT_EQUAL(tm_tql_eval(p, &ctx, &v), TM_OK);
	CU_ASSERT_EQUAL(v.v.d, 103);
	tm_tql_free(p);
	expect_error(t, 0, "max(ref.@*:model.fc:out.std)", "'ref.' reads one rank's term");
	expect_error(t, 0, "ref.@*:model.fc:out.std", "'@*:' names every rank");
	expect_error(t, 0, "ref.@9:model.fc:out.std", "no node '@9:model.fc'");
	expect_error(t, 0, "ref.@:model.fc:out.std", "a rank is written '@R:'");
	tm_nodetab_free(t);
}

/* The node id an expression's addressed term resolved to, -1 on a compile
 * error (its text in *errp when errp is not NULL). */
static int resolved(tm_nodetab *t, int32_t rank, const char *src, char **errp)
{
	struct tm_tql_compile_opts opts = { t, NULL, 0, rank };
	struct tm_tql_env env = { NULL, id_lookup, NULL, NULL, NULL, NULL };
	struct tm_tql_ctx ctx = { NULL, NULL, t, &env, 0 };
	struct tm_tql_value v;
	tm_tql_prog *p = NULL;
	char *err = NULL;
	int id = -1;

	if (tm_tql_compile(src, &opts, &p, &err) == TM_OK) {
		if (tm_tql_eval(p, &ctx, &v) == TM_OK && v.type == TM_TQL_NUM)
			id = (int)v.v.d;
		else
			id = -2;
	}
	if (errp)
		*errp = err;
	else
		free(err);
	tm_tql_free(p);
	return id;
}

static void expect_error(tm_nodetab *t, int32_t rank, const char *src, const char *msg)
{
	char *err = NULL;

	CU_ASSERT_EQUAL(resolved(t, rank, src, &err), -1);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, msg));
	if (!err || !strstr(err, msg))
		printf("\n  %s: want \"%s\", got %s", src, msg, err ? err : "(none)");
	free(err);
}

/* The step's request ids, from env->annotation: == / != / =~ test every
 * id, request.count is the batch's true size, and no annotation is unknown. */
static const struct tm_annot *annot_of(void *user, const struct tm_event *ev,
				       const char *key)
{
	const struct tm_annot *a = user;

	return a && ev->step == a->step && !strcmp(key, a->key) ? a : NULL;
}

static void test_request_field(void)
{
	static const char *const ids[] = { "cmpl-7-0", "chatcmpl-9", "cmpl-12-1" };
	struct tm_annot a = { .step = 3, .key = "request", .values = ids, .nvalues = 3,
			      .count = 5 };
	struct tm_tql_env env = { .user = &a, .annotation = annot_of };
	struct tm_event ev = { .step = 3 };
	struct tm_tql_ctx ctx = { &ev, NULL, nodes, &env, 0 };
	struct tm_tql_value v;
	char buf[128];
	/* other: on a step without ids, which is an empty list for == / !=
	 * / =~ and an unknown count */
	static const struct { const char *src; int want, other; } conds[] = {
		{ "request == \"chatcmpl-9\"", 1, 0 },
		{ "\"chatcmpl-9\" == request", 1, 0 },
		{ "request == \"cmpl-7\"", 0, 0 },
		{ "request != \"cmpl-7\"", 1, 1 },
		{ "request != \"cmpl-12-1\"", 0, 1 },
		{ "request =~ \"cmpl-12-*\"", 1, 0 },
		{ "request =~ \"chat*\" && request.count == 5", 1, 0 },
		{ "request =~ \"cmpl-[89]*\"", 0, 0 },
		{ "request.count > 4 || step == 0", 1, -1 },
	};
	size_t i;

	for (i = 0; i < sizeof(conds) / sizeof(conds[0]); i++) {
		tm_tql_prog *p = compile_ok(conds[i].src, 1);

		CU_ASSERT_EQUAL(tm_tql_test(p, &ctx), conds[i].want);
		if (tm_tql_test(p, &ctx) != conds[i].want)
			printf("\n  %s: want %d", conds[i].src, conds[i].want);
		/* another step's batch is not known */
		ev.step = 4;
		CU_ASSERT_EQUAL(tm_tql_test(p, &ctx), conds[i].other);
		ev.step = 3;
		tm_tql_free(p);
	}
	{
		tm_tql_prog *p = compile_ok("request", 0);

		CU_ASSERT_EQUAL(tm_tql_result_type(p), TM_TQL_LIST);
		CU_ASSERT_EQUAL(tm_tql_eval(p, &ctx, &v), TM_OK);
		CU_ASSERT_EQUAL(v.type, TM_TQL_LIST);
		CU_ASSERT_EQUAL(tm_tql_value_format(&v, buf, sizeof(buf)), TM_OK);
		CU_ASSERT_STRING_EQUAL(buf,
			"[\"cmpl-7-0\", \"chatcmpl-9\", \"cmpl-12-1\", ... (2 more)]");
		/* no env, or an env without annotations: unknown */
		ctx.env = NULL;
		CU_ASSERT_EQUAL(tm_tql_eval(p, &ctx, &v), TM_OK);
		CU_ASSERT_EQUAL(v.type, TM_TQL_UNKNOWN);
		ctx.env = &env;
		tm_tql_free(p);
	}
	/* A reader reuses one buffer for every step's ids: an answer kept
	 * for one step's list is not the next step's. */
	{
		static const char *idbuf[2];
		struct tm_annot b = { .seq = 30, .step = 3, .key = "request", .values = idbuf,
				      .nvalues = 2, .count = 2 };
		struct tm_tql_env benv = { .user = &b, .annotation = annot_of };
		tm_tql_prog *eq = compile_ok("request == \"x\"", 1);
		tm_tql_prog *m = compile_ok("request =~ \"y*\" || request =~ \"z*\"", 1);

		ctx.env = &benv;
		idbuf[0] = "a", idbuf[1] = "x";
		CU_ASSERT_EQUAL(tm_tql_test(eq, &ctx), 1);
		CU_ASSERT_EQUAL(tm_tql_test(m, &ctx), 0);
		CU_ASSERT_EQUAL(tm_tql_test(eq, &ctx), 1);     /* kept */
		idbuf[0] = "b", idbuf[1] = "y1";
		b.seq = 40, b.step = ev.step = 4;
		CU_ASSERT_EQUAL(tm_tql_test(eq, &ctx), 0);
		CU_ASSERT_EQUAL(tm_tql_test(m, &ctx), 1);
		idbuf[0] = "z", b.nvalues = 1;
		b.seq = 50, b.step = ev.step = 5;
		CU_ASSERT_EQUAL(tm_tql_test(m, &ctx), 1);
		idbuf[0] = "q";
		b.seq = 60, b.step = ev.step = 6;
		CU_ASSERT_EQUAL(tm_tql_test(m, &ctx), 0);
		ctx.env = &env;
		ev.step = 3;
		tm_tql_free(eq);
		tm_tql_free(m);
	}
	expect_error(nodes, 0, "request > 3", "list of request ids");
	expect_error(nodes, 0, "request + 1", "list of request ids");
	expect_error(nodes, 0, "\"x\" =~ request", "list of request ids");
	expect_error(nodes, 0, "request == 3", "list of request ids");
	expect_error(nodes, 0, "request && step > 1", "true or false");
}

static void test_rank_resolution(void)
{
	tm_nodetab *t = rank_nodes();

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	/* unqualified: the opts' rank, 0 in a zeroed opts */
	CU_ASSERT_EQUAL(resolved(t, 0, "model.fc:out.std", NULL), 1);
	CU_ASSERT_EQUAL(resolved(t, 1, "model.fc:out.std", NULL), 3);
	CU_ASSERT_EQUAL(resolved(t, 1, "model.fc.std", NULL), 3);
	CU_ASSERT_EQUAL(resolved(t, 1, "model.fc.weight.std", NULL), 4);
	CU_ASSERT_EQUAL(resolved(t, 1, "model.fc.weight:grad.std", NULL), 4);
	/* qualified: as written, whatever the opts say */
	CU_ASSERT_EQUAL(resolved(t, 0, "@1:model.fc:out.std", NULL), 3);
	CU_ASSERT_EQUAL(resolved(t, 1, "@0:model.fc:out.std", NULL), 1);
	CU_ASSERT_EQUAL(resolved(t, 0, "@01:model.fc:out.std", NULL), 3);
	CU_ASSERT_EQUAL(resolved(t, 0, "@1:model.fc#2:out.1.std", NULL), 3);
	/* 3 / 1: both ranks in one expression */
	CU_ASSERT_EQUAL(resolved(t, 0, "@1:model.fc.std / @0:model.fc.std", NULL), 3);
	/* errors */
	expect_error(t, 0, "model.fc.weight.std", "no node 'model.fc.weight'");
	expect_error(t, -1, "model.fc:out.std", "no node 'model.fc'");
	expect_error(t, 0, "@2:model.fc:out.std", "no node '@2:model.fc'");
	expect_error(t, 0, "@0:model.fc.weight.std", "no node '@0:model.fc.weight'");
	expect_error(t, 0, "@*:model.fc:out.std", "'@*:' names every rank");
	expect_error(t, 0, "@70000:model.fc:out.std", "rank too large");
	expect_error(t, 0, "@1:model > 0", "names a node but no field");
	expect_error(t, 0, "@1:model.fc > 0", "'@1:model.fc' is a node, not a value");
	expect_error(t, 1, "model.fc > 0", "'model.fc' is a node, not a value");
	expect_error(t, 1, "@01:model.fc > 0", "'@1:model.fc' is a node, not a value");
	expect_error(t, 0, "@1model.fc.std", "a rank is written '@R:'");
	expect_error(t, 0, "@:model.fc.std", "a rank is written '@R:'");
	expect_error(t, 0, "@1:", "a rank is written '@R:'");
	expect_error(t, 0, "@1:model.fcc:out.std", "did you mean '@1:model.fc'");
	/* a single-process table: names resolve as written for any rank */
	CU_ASSERT_EQUAL(resolved(nodes, 3, "model.fc1:out.std", NULL),
			(int)tm_nodetab_find(nodes, "model.fc1")->id);
	tm_nodetab_free(t);
}

/* node.path in a multi-rank table is the prefixed address; globs follow
 * the address rules for ranks. */
static void test_rank_node_path(void)
{
	tm_nodetab *t = rank_nodes();
	struct tm_tql_compile_opts opts = { t, NULL, 1, 0 };
	struct tm_event ev = { .node = 3 };
	struct tm_tql_ctx ctx = { &ev, NULL, t, NULL, 1 };
	static const struct {
		const char *src;
		int want;
	} cases[] = {
		{ "node.path == \"@1:model.fc\"", 1 },
		{ "node.path =~ \"model.*\"", 1 },
		{ "node.path =~ \"@*:model.*\"", 1 },
		{ "node.path =~ \"@1:model.*\"", 1 },
		{ "node.path =~ \"@0:model.*\"", 0 },
		{ "node.path =~ \"@0:model.*\" || rank == 1", 1 },
	};
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	for (i = 0; i < N_ELEMS(cases); i++) {
		tm_tql_prog *p = NULL;
		char *err = NULL;

		CU_ASSERT_EQUAL(tm_tql_compile(cases[i].src, &opts, &p, &err), TM_OK);
		CU_ASSERT_EQUAL(tm_tql_test(p, &ctx), cases[i].want);
		if (tm_tql_test(p, &ctx) != cases[i].want)
			printf("\n  %s: %s", cases[i].src, err ? err : "wrong value");
		free(err);
		tm_tql_free(p);
	}
	tm_nodetab_free(t);
}

/* ------------------------------------------------------ cross-rank aggregates */

/*
 * A three-rank session: every rank has model, model.fc and its weight;
 * model.head exists on ranks 0 and 2 only (a rank-specific module), and
 * rank 1's nodes were added out of rank order.
 */
static tm_nodetab *ddp_nodes(void)
{
	static const struct node_def list[] = {
		{ "@0:model", TM_NODE_MODULE },
		{ "@0:model.fc", TM_NODE_MODULE },
		{ "@0:model.fc.weight", TM_NODE_PARAM },
		{ "@0:model.head", TM_NODE_MODULE },
		{ "@2:model", TM_NODE_MODULE },
		{ "@2:model.fc", TM_NODE_MODULE },
		{ "@2:model.fc.weight", TM_NODE_PARAM },
		{ "@2:model.head", TM_NODE_MODULE },
		{ "@1:model", TM_NODE_MODULE },
		{ "@1:model.fc", TM_NODE_MODULE },
		{ "@1:model.fc.weight", TM_NODE_PARAM },
	};
	return nodes_of(list, N_ELEMS(list));
}

/*
 * The fake debugger behind lookup_step: the l2 of each rank's tensors per
 * step (steps 5..8), NaN marking "not at this step" (answered NULL with a
 * backpressure gap).  Rank 1 diverges at step 6; at step 7 it has no
 * value.  lookup (latest at the playhead) answers a different value on
 * purpose and counts its calls: the aggregates must not use it.
 */
struct ddp_env {
	const tm_nodetab *nodes;
	uint64_t steps_seen[8];
	int nsteps;
	int lookups, step_lookups;
	struct tm_slot last_slot;
	struct tm_tensor t;
	struct tm_event ev;
};

static const double ddp_l2[4][3] = {
	{ 2.0, 2.0, 2.0 },      /* step 5 */
	{ 2.0, 2.5, 2.0 },      /* step 6 */
	{ 2.0, NAN, 2.0 },      /* step 7: rank 1 has not got there */
	{ 3.0, 3.0, NAN },      /* step 8: rank 2 has not got there */
};

static const struct tm_tensor *ddp_lookup(void *user, uint32_t node, struct tm_slot slot,
					  uint32_t call, const struct tm_event **event,
					  uint32_t *reason)
{
	struct ddp_env *e = user;

	(void)node;
	(void)slot;
	(void)call;
	e->lookups++;
	memset(&e->t, 0, sizeof(e->t));
	e->t.have = TM_STAT_BIT(TM_STAT_L2);
	e->t.stat[TM_STAT_L2] = 1000;
	*event = &e->ev;
	*reason = 0;
	return &e->t;
}

static const struct tm_tensor *ddp_lookup_step(void *user, uint32_t node,
					       struct tm_slot slot, uint32_t call,
					       uint64_t step, const struct tm_event **event,
					       uint32_t *reason)
{
	struct ddp_env *e = user;
	const struct tm_node *n = tm_nodetab_get(e->nodes, node);
	int rank = n ? tm_address_node_rank(n->address, NULL) : -1;

	(void)call;
	e->step_lookups++;
	e->last_slot = slot;
	if (e->nsteps < (int)N_ELEMS(e->steps_seen))
		e->steps_seen[e->nsteps++] = step;
	if (rank < 0 || rank > 2 || step < 5 || step > 8 || isnan(ddp_l2[step - 5][rank])) {
		*reason = TM_GAP_BACKPRESSURE;
		return NULL;
	}
	memset(&e->t, 0, sizeof(e->t));
	e->t.slot = slot;
	e->t.have = TM_STAT_BIT(TM_STAT_L2) | TM_STAT_BIT(TM_STAT_NAN_COUNT);
	e->t.stat[TM_STAT_L2] = ddp_l2[step - 5][rank];
	e->t.stat[TM_STAT_NAN_COUNT] = 10 * rank + (double)step;
	e->ev.step = step;
	*event = &e->ev;
	*reason = 0;
	return &e->t;
}

/* Evaluates src at an event of `step` (-1: no event) and formats it. */
static void ddp_eval(tm_nodetab *t, struct ddp_env *de, const char *src, int64_t step,
		     char *out, size_t len)
{
	struct tm_tql_compile_opts opts = { t, NULL, 0, 0 };
	struct tm_tql_env env = { de, ddp_lookup, NULL, ddp_lookup_step, NULL, NULL };
	struct tm_event ev = { .step = (uint64_t)step, .node = 1 };
	struct tm_tql_ctx ctx = { step >= 0 ? &ev : NULL, NULL, t, &env, 0 };
	struct tm_tql_value v;
	tm_tql_prog *p = NULL;
	char *err = NULL;

	snprintf(out, len, "(compile error)");
	if (tm_tql_compile(src, &opts, &p, &err) != TM_OK) {
		printf("\n  %s: %s", src, err ? err : "?");
		free(err);
		return;
	}
	CU_ASSERT_EQUAL(tm_tql_uses_lookup(p), 1);
	if (tm_tql_eval(p, &ctx, &v) != TM_OK || tm_tql_value_format(&v, out, len))
		snprintf(out, len, "(eval failed)");
	tm_tql_free(p);
}

static void expect_value(tm_nodetab *t, const char *src, int64_t step, const char *want)
{
	struct ddp_env de = { .nodes = t };
	char got[128];

	ddp_eval(t, &de, src, step, got, sizeof(got));
	CU_ASSERT_STRING_EQUAL(got, want);
	if (strcmp(got, want))
		printf("\n  %s at step %lld: want %s, got %s", src, (long long)step, want, got);
	/* only the single-rank term in one case below reads "latest" */
	CU_ASSERT_EQUAL(de.lookups, strstr(src, "@1:") ? 1 : 0);
}

static void test_rankset_values(void)
{
	tm_nodetab *t = ddp_nodes();

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	/* the DDP hunt: ranks agree at step 5 and disagree at step 6 */
	expect_value(t, "spread(@*:model.fc.weight:data.l2)", 5, "0");
	expect_value(t, "spread(@*:model.fc.weight:data.l2)", 6, "0.5");
	expect_value(t, "spread(@*:model.fc.weight:data.l2) > 1e-6", 5, "false");
	expect_value(t, "spread(@*:model.fc.weight:data.l2) > 1e-6", 6, "true");
	expect_value(t, "max(@*:model.fc.weight:data.l2)", 6, "2.5");
	expect_value(t, "min(@*:model.fc.weight:data.l2)", 6, "2");
	/* a parameter without :SLOT reads :data, as a single term does */
	expect_value(t, "spread(@*:model.fc.weight.l2)", 6, "0.5");
	/* an integer field stays an integer: nan_count = 10 * rank + step */
	expect_value(t, "max(@*:model.fc:out.nan_count)", 6, "26");
	expect_value(t, "min(@*:model.fc:out.nan_count)", 6, "6");
	expect_value(t, "spread(@*:model.fc:out.nan_count)", 6, "20");
	/* only the ranks that have the node: model.head is on 0 and 2 */
	expect_value(t, "spread(@*:model.head:out.nan_count)", 5, "20");
	/* inside larger expressions, prev() and with single-rank terms */
	expect_value(t, "spread(@*:model.fc.weight.l2) * 2 + @1:model.fc.weight.l2", 6, "1001");
	expect_value(t, "max(spread(@*:model.fc.weight.l2), 0.25)", 6, "0.5");
	/* unknown members: the whole aggregate is unknown, with their reason */
	expect_value(t, "spread(@*:model.fc.weight:data.l2)", 7, "<unknown: backpressure>");
	expect_value(t, "max(@*:model.fc.weight:data.l2)", 8, "<unknown: backpressure>");
	expect_value(t, "max(@*:model.fc.weight:data.l2) > 0", 7, "<unknown: backpressure>");
	/* ... and a known false still wins an && */
	expect_value(t, "step == 1 && spread(@*:model.fc.weight:data.l2) > 0", 7, "false");
	/* no event: no step to align on */
	expect_value(t, "spread(@*:model.fc.weight:data.l2)", -1, "<unknown>");
	tm_nodetab_free(t);
}

/* Each member is read at the step of the event evaluated; without
 * lookup_step the aggregate is unknown rather than read through lookup. */
static void test_rankset_step(void)
{
	tm_nodetab *t = ddp_nodes();
	struct ddp_env de;
	struct tm_tql_compile_opts opts;
	struct tm_tql_env env;
	struct tm_event ev = { .step = 6 };
	struct tm_tql_ctx ctx = { &ev, NULL, NULL, &env, 1 };
	struct tm_tql_value v;
	tm_tql_prog *p = NULL;
	char got[64];
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	memset(&de, 0, sizeof(de));
	de.nodes = t;
	ddp_eval(t, &de, "spread(@*:model.fc.weight:data.l2)", 6, got, sizeof(got));
	CU_ASSERT_EQUAL(de.step_lookups, 3);
	CU_ASSERT_EQUAL(de.nsteps, 3);
	for (i = 0; i < de.nsteps; i++)
		CU_ASSERT_EQUAL(de.steps_seen[i], 6);
	CU_ASSERT_EQUAL(de.last_slot.kind, TM_SLOT_DATA);

	memset(&opts, 0, sizeof(opts));
	opts.nodes = t;
	memset(&env, 0, sizeof(env));
	memset(&de, 0, sizeof(de));
	de.nodes = t;
	env.user = &de;
	env.lookup = ddp_lookup;
	ctx.nodes = t;
	CU_ASSERT_EQUAL_FATAL(tm_tql_compile("max(@*:model.fc.weight:data.l2)", &opts, &p, NULL),
			      TM_OK);
	CU_ASSERT_EQUAL(tm_tql_eval(p, &ctx, &v), TM_OK);
	CU_ASSERT_EQUAL(v.type, TM_TQL_UNKNOWN);
	CU_ASSERT_EQUAL(v.unknown_reason, 0);
	CU_ASSERT_EQUAL(de.lookups, 0);
	CU_ASSERT_EQUAL(tm_tql_test(p, &ctx), -1);
	/* no environment at all */
	ctx.env = NULL;
	CU_ASSERT_EQUAL(tm_tql_eval(p, &ctx, &v), TM_OK);
	CU_ASSERT_EQUAL(v.type, TM_TQL_UNKNOWN);
	CU_ASSERT_EQUAL(tm_tql_eval(p, NULL, &v), TM_OK);
	CU_ASSERT_EQUAL(v.type, TM_TQL_UNKNOWN);
	CU_ASSERT_EQUAL(tm_tql_result_type(p), TM_TQL_NUM);
	tm_tql_free(p);
	tm_nodetab_free(t);
}

static void expect_rank_error(tm_nodetab *t, const char *src, const char *msg)
{
	struct tm_tql_compile_opts opts = { t, NULL, 1, 0 };
	tm_tql_prog *p = NULL;
	char *err = NULL;

	CU_ASSERT_EQUAL(tm_tql_compile(src, &opts, &p, &err), TM_ERR_TQL);
	CU_ASSERT_PTR_NULL(p);
	CU_ASSERT_PTR_NOT_NULL(err && strstr(err, msg));
	if (!err || !strstr(err, msg))
		printf("\n  %s: want \"%s\", got %s", src, msg, err ? err : "(none)");
	free(err);
	tm_tql_free(p);
}

static void test_rankset_errors(void)
{
	tm_nodetab *t = ddp_nodes();

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	/* "@*:" outside max/min/spread */
	expect_rank_error(t, "@*:model.fc:out.std > 0",
			  "tql:1:1: error: '@*:' names every rank: it is allowed only as "
			  "the one argument of max(), min() or spread(), e.g. "
			  "'spread(@*:model.fc:out.std)'");
	expect_rank_error(t, "abs(@*:model.fc:out.std) > 0",
			  "tql:1:5: error: '@*:' names every rank: it is allowed only");
	expect_rank_error(t, "max(-@*:model.fc:out.std) > 0",
			  "tql:1:6: error: '@*:' names every rank: it is allowed only");
	expect_rank_error(t, "prev(@*:model.fc:out.std) > 0", "it is allowed only");
	/* in max beside another argument */
	expect_rank_error(t, "max(@*:model.fc:out.std, 1) > 0",
			  "tql:1:5: error: '@*:' must be the only argument of max()");
	expect_rank_error(t, "min(1, @*:model.fc:out.std) > 0",
			  "tql:1:8: error: '@*:' must be the only argument of min()");
	expect_rank_error(t, "spread(@*:model.fc:out.std, @*:model.fc:out.std) > 0",
			  "only argument of spread()");
	/* spread needs a rank set */
	expect_rank_error(t, "spread(tensor.std) > 0", "spread() takes one '@*:' term");
	expect_rank_error(t, "spread(@1:model.fc:out.std) > 0", "spread() takes one '@*:' term");
	/* no rank has the node: caret on the path, suggestions as "@*:" */
	expect_rank_error(t, "spread(@*:model.fcc:out.std) > 0",
			  "tql:1:8: error: no rank has node 'model.fcc'; did you mean "
			  "'@*:model.fc'");
	expect_rank_error(t, "spread(@*:model.fcc:out.std) > 0",
			  "spread(@*:model.fcc:out.std) > 0\n"
			  "       ^~~~~~~~~~~~\n");
	expect_rank_error(t, "max(@*:zzzzzzzzzzzz:out.std) > 0",
			  "no rank has node 'zzzzzzzzzzzz' (no '@R:zzzzzzzzzzzz' in the node table)");
	/* a single-process table has no ranks at all */
	expect_rank_error(nodes, "spread(@*:model.fc1:out.std) > 0",
			  "no rank has node 'model.fc1': '@*:' reads nodes '@R:model.fc1' "
			  "of a multi-rank session, and this node table has no ranks");
	/* the rest of an addressed term's rules still hold */
	expect_rank_error(t, "spread(@*:model.fc) > 0", "'@*:model.fc' is a node, not a value");
	expect_rank_error(t, "spread(@*:model.fc:out.shape) > 0",
			  "'spread' needs a number, not a shape");
	expect_rank_error(t, "spread(@*:model.fc:out.stdd) > 0",
			  "unknown tensor field 'stdd'; did you mean 'std'?");
	expect_rank_error(t, "spread(@*:model.fc:bogus.std) > 0", "unknown slot 'bogus'");
	expect_rank_error(t, "sprad(@*:model.fc:out.std) > 0", "did you mean 'spread'?");
	tm_nodetab_free(t);
}

static void test_rankset_disassemble(void)
{
	tm_nodetab *t = ddp_nodes();
	struct tm_tql_compile_opts opts = { NULL, NULL, 1, 0 };
	tm_tql_prog *p = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	opts.nodes = t;
	CU_ASSERT_EQUAL_FATAL(tm_tql_compile("spread(@*:model.fc.weight:data.l2) > 1e-6 || "
					     "max(@*:model.head.nan_count) > 0",
					     &opts, &p, NULL), TM_OK);
	f = open_memstream(&buf, &len);
	CU_ASSERT_EQUAL(tm_tql_disassemble(p, f), TM_OK);
	fclose(f);
	CU_ASSERT_STRING_EQUAL(buf,
		"   0  RANKS_SPREAD  @0:model.fc.weight:data.l2 .. @2:model.fc.weight:data.l2 (3 ranks)\n"
		"   1  GT_NK       1e-06\n"
		"   2  JTRUE       -> 6\n"
		"   3  RANKS_MAX   @0:model.head.nan_count .. @2:model.head.nan_count (2 ranks)\n"
		"   4  GT_IK       0\n"
		"   5  OR\n"
		"   6  RET\n");
	free(buf);
	tm_tql_free(p);
	tm_nodetab_free(t);
}

/* The largest world a manifest allows: one instruction, one loop, no
 * allocation per evaluation. */
static const struct tm_tensor *big_lookup_step(void *user, uint32_t node,
					       struct tm_slot slot, uint32_t call,
					       uint64_t step, const struct tm_event **event,
					       uint32_t *reason)
{
	static struct tm_tensor t;
	static struct tm_event ev;
	const struct tm_node *n = tm_nodetab_get(user, node);
	int rank = n ? tm_address_node_rank(n->address, NULL) : -1;

	(void)slot;
	(void)call;
	if (rank < 0) {
		*reason = TM_GAP_LEVEL;
		return NULL;
	}
	/* at step 1 the last rank has not got there */
	if (step == 1 && rank == 4095) {
		*reason = TM_GAP_LEVEL;
		return NULL;
	}
	t.have = TM_STAT_BIT(TM_STAT_STD);
	t.stat[TM_STAT_STD] = rank == 1234 ? -0.5 : (double)(rank % 7);
	*event = &ev;
	*reason = 0;
	return &t;
}

static void test_rankset_world(void)
{
	tm_nodetab *t = tm_nodetab_new();
	struct tm_tql_compile_opts opts = { NULL, NULL, 0, 0 };
	struct tm_tql_env env = { NULL, NULL, NULL, big_lookup_step, NULL, NULL };
	struct tm_event ev = { .step = 2 };
	struct tm_tql_ctx ctx = { &ev, NULL, NULL, &env, 0 };
	struct tm_tql_value v;
	tm_tql_prog *p = NULL;
	char addr[32];
	int r, i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	/* ranks added from the last one down: the expansion sorts them */
	for (r = 4095; r >= 0; r--) {
		struct tm_node n = { 0 };

		snprintf(addr, sizeof(addr), "@%d:m", r);
		n.address = addr;
		n.parent = TM_NODE_NONE;
		CU_ASSERT_EQUAL_FATAL(tm_nodetab_add(t, &n, NULL), TM_OK);
	}
	env.user = t;
	opts.nodes = t;
	ctx.nodes = t;
	CU_ASSERT_EQUAL_FATAL(tm_tql_compile("spread(@*:m:out.std)", &opts, &p, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_tql_eval(p, &ctx, &v), TM_OK);
	CU_ASSERT_EQUAL(v.type, TM_TQL_NUM);
	CU_ASSERT_DOUBLE_EQUAL(v.v.d, 6.5, 1e-12);
	ev.step = 1;
	CU_ASSERT_EQUAL(tm_tql_eval(p, &ctx, &v), TM_OK);
	CU_ASSERT_EQUAL(v.type, TM_TQL_UNKNOWN);
	CU_ASSERT_EQUAL(v.unknown_reason, TM_GAP_LEVEL);
#if !defined(__SANITIZE_ADDRESS__)
	{
		struct mallinfo2 before, after;

		ev.step = 2;
		before = mallinfo2();
		for (i = 0; i < 200; i++)
			tm_tql_eval(p, &ctx, &v);
		after = mallinfo2();
		CU_ASSERT_EQUAL(before.uordblks, after.uordblks);
		CU_ASSERT_EQUAL(before.hblkhd, after.hblkhd);
	}
#else
	(void)i;
#endif
	tm_tql_free(p);
	tm_nodetab_free(t);
}

int main(void)
{
	static const struct tm_test_case cases[] = {
		TM_TEST(test_tables),
		TM_TEST(test_api_edges),
		TM_TEST(test_test_convenience),
		TM_TEST(test_error_report),
		TM_TEST(test_limits),
		TM_TEST(test_disassemble),
		TM_TEST(test_value_format),
		TM_TEST(test_field_names),
		TM_TEST(test_prev_reset),
		TM_TEST(test_prev_cap),
		TM_TEST(test_no_allocation),
		TM_TEST(test_ffi_load),
		TM_TEST(test_rank_field),
		TM_TEST(test_request_field),
		TM_TEST(test_rank_names),
		TM_TEST(test_rank_resolution), TM_TEST(test_rank_ref),
		TM_TEST(test_rank_node_path),
		TM_TEST(test_rankset_values),
		TM_TEST(test_rankset_step),
		TM_TEST(test_rankset_errors),
		TM_TEST(test_rankset_disassemble),
		TM_TEST(test_rankset_world),
		{ NULL, NULL }
	};
	int rc;

	make_nodes();
	load_funcs();
	rc = tm_test_run("tql", cases);
	tm_tql_funcs_free(funcs);
	tm_nodetab_free(nodes);
	return rc;
}
