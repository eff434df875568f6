/*
 * test_address.c -- addresses as users type them (ARCHITECTURE 3): parsing,
 * the canonical spelling, errors with their columns, segment-wise glob
 * matching, "did you mean" suggestions; and the node table behind them.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tensormorph.h"
#include "tm-test.h"

/* Parses text and returns its canonical spelling (static buffer), or NULL. */
static const char *canon(const char *text)
{
	static char buf[TM_ADDRESS_MAX + 64];
	tm_address *a;
	int r;

	if (tm_address_parse(text, &a, NULL, NULL))
		return NULL;
	r = tm_address_format(a, buf, sizeof(buf));
	tm_address_free(a);
	return r ? NULL : buf;
}

static void check_canon(const char *text, const char *want)
{
	const char *got = canon(text);

	CU_ASSERT_PTR_NOT_NULL(got);
	if (!got) {
		fprintf(stderr, "\n  parse failed: \"%s\"\n", text);
		return;
	}
	CU_ASSERT_STRING_EQUAL(got, want);
	if (strcmp(got, want))
		fprintf(stderr, "\n  \"%s\" -> \"%s\", want \"%s\"\n", text, got, want);
	/* The canonical spelling is a fixed point. */
	CU_ASSERT_STRING_EQUAL(canon(want), want);
}

static void test_parse_canonical(void)
{
	check_canon("model.layers.3.mlp", "model.layers.3.mlp");
	check_canon("model", "model");
	check_canon("  model.layers.3.mlp\t\n", "model.layers.3.mlp");
	check_canon("model.layers[3].mlp", "model.layers.3.mlp");
	check_canon("model.layers[3][12]", "model.layers.3.12");
	check_canon("model.layers[*].mlp", "model.layers.*.mlp");
	check_canon("model.blocks[**]", "model.blocks.**");
	check_canon("model.layers.3.mlp:out", "model.layers.3.mlp:out");
	check_canon("model.layers.3.mlp:out.0", "model.layers.3.mlp:out");
	check_canon("model.layers.3.mlp:out.1", "model.layers.3.mlp:out.1");
	check_canon("model.x:in.0", "model.x:in");
	check_canon("model.x:in.2", "model.x:in.2");
	check_canon("model.x:grad_out.0", "model.x:grad_out");
	check_canon("model.x:grad_in.0", "model.x:grad_in");
	check_canon("model.x:grad_in.3", "model.x:grad_in.3");
	check_canon("model.fc1.weight:data", "model.fc1.weight:data");
	check_canon("model.fc1.weight:grad", "model.fc1.weight:grad");
	check_canon("model.shared#2", "model.shared#2");
	check_canon("model.shared#2:out", "model.shared#2:out");
	check_canon("model.shared#10:out.1", "model.shared#10:out.1");
	check_canon("model.layers.*.mlp", "model.layers.*.mlp");
	check_canon("model.**", "model.**");
	check_canon("**", "**");
	check_canon("model.**.**.fc", "model.**.fc");
	check_canon("model.layer*", "model.layer*");
	check_canon("model.*_proj", "model.*_proj");
	check_canon("model.x:out.*", "model.x:out.*");
	check_canon("model.h_\xc3\xa9t\xc3\xa9", "model.h_\xc3\xa9t\xc3\xa9");
	check_canon("model.layers.65535:out.32767", "model.layers.65535:out.32767");
	/* a request's rows, as stop lines print them */
	check_canon("model.x:out[r1]", "model.x:out[r1]");
	check_canon("model.x:out.0[r0]", "model.x:out[r0]");
	check_canon("model.x:in.2[r127]", "model.x:in.2[r127]");
	check_canon("model.x#2:grad_out[r3]", "model.x#2:grad_out[r3]");
}

static void test_accessors(void)
{
	tm_address *a;
	struct tm_slot s;
	int any = -1;

	CU_ASSERT_EQUAL_FATAL(tm_address_parse(" model.layers[2].mlp#3:grad_in.1 ",
					       &a, NULL, NULL), TM_OK);
	CU_ASSERT_STRING_EQUAL(tm_address_path(a), "model.layers.2.mlp");
	CU_ASSERT_EQUAL(tm_address_call(a), 3);
	CU_ASSERT(tm_address_has_slot(a));
	CU_ASSERT(!tm_address_is_pattern(a));
	s = tm_address_slot(a, &any);
	CU_ASSERT_EQUAL(s.kind, TM_SLOT_GRAD_IN);
	CU_ASSERT_EQUAL(s.index, 1);
	CU_ASSERT_EQUAL(any, 0);
	tm_address_free(a);

	CU_ASSERT_EQUAL_FATAL(tm_address_parse("model.x:out.*", &a, NULL, NULL), TM_OK);
	CU_ASSERT(tm_address_is_pattern(a));
	s = tm_address_slot(a, &any);
	CU_ASSERT_EQUAL(s.kind, TM_SLOT_OUT);
	CU_ASSERT_EQUAL(any, 1);
	CU_ASSERT_EQUAL(tm_address_call(a), 0);
	tm_address_free(a);

	CU_ASSERT_EQUAL_FATAL(tm_address_parse("model.*", &a, NULL, NULL), TM_OK);
	CU_ASSERT(tm_address_is_pattern(a));
	CU_ASSERT(!tm_address_has_slot(a));
	tm_address_free(a);

	tm_address_free(NULL);
	CU_ASSERT_EQUAL(tm_address_parse(NULL, &a, NULL, NULL), TM_ERR_INVALID_ARG);
	CU_ASSERT_PTR_NULL(a);
}

static void test_format_buffer(void)
{
	tm_address *a;
	char buf[64];

	CU_ASSERT_EQUAL_FATAL(tm_address_parse("model.a#2:out.1", &a, NULL, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_address_format(a, buf, 15), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_address_format(a, buf, 16), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "model.a#2:out.1");
	tm_address_free(a);
}

struct err_case {
	const char *text;
	int col;
	const char *msg;        /* a substring of the message */
};

/* Each text fails to parse with its column and a message containing msg. */
static void expect_parse_errors(const struct err_case *cases, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		tm_address *a = (tm_address *)1;
		const char *msg = NULL;
		int col = -2;
		int r = tm_address_parse(cases[i].text, &a, &col, &msg);

		CU_ASSERT_EQUAL(r, TM_ERR_ADDRESS);
		CU_ASSERT_PTR_NULL(a);
		CU_ASSERT_EQUAL(col, cases[i].col);
		CU_ASSERT(msg && strstr(msg, cases[i].msg));
		if (r != TM_ERR_ADDRESS || col != cases[i].col || !msg ||
		    !strstr(msg, cases[i].msg))
			fprintf(stderr, "\n  \"%s\": r=%d col=%d msg=%s\n", cases[i].text,
				r, col, msg ? msg : "(null)");
	}
}

static void test_parse_errors(void)
{
	static const struct err_case cases[] = {
		{ "", 0, "empty address" },
		{ "model..x", 6, "empty segment" },
		{ ".model", 0, "empty segment" },
		{ "model.", 6, "empty segment" },
		{ "  model..x", 8, "empty segment" },
		{ "model.la-yer", 8, "unexpected character" },
		{ "model.x y", 7, "unexpected space" },
		{ "model. x", 6, "unexpected space" },
		{ "model.lay**er", 9, "whole segment" },
		{ "model.***", 8, "too many '*'" },
		{ "model.x:foo", 8, "bad slot name" },
		{ "model.x:", 8, "expected a slot name" },
		{ "model.x:OUT", 8, "expected a slot name" },
		{ "model.x:out.", 12, "expected a slot index" },
		{ "model.x:out.x", 12, "expected a slot index" },
		{ "model.x:out.65536", 12, "slot index too large" },
		{ "model.x:out.32768", 12, "slot index too large" },
		{ "model.x:data.1", 12, "take no index" },
		{ "model.x:grad.0", 12, "take no index" },
		{ "model.x:out[r128]", 13, "request number too large" },
		{ "model.x:out[1]", 12, "expected 'r'" },
		{ "model.x:out[r]", 13, "expected a request number" },
		{ "model.x:out[r1", 14, "expected ']'" },
		{ "model.x:out.*[r1]", 13, "takes no request rows" },
		{ "model.x:out.256[r1]", 15, "too large for request rows" },
		{ "model.x#", 8, "expected a call number" },
		{ "model.x#0", 8, "start at 1" },
		{ "model.x#4294967296", 8, "call number too large" },
		{ "model.x[", 8, "expected an index" },
		{ "model.x[3", 9, "expected ']'" },
		{ "model.x[a]", 8, "expected an index" },
		{ "model.x[3*]", 8, "bad index" },
		{ "model.x[***]", 8, "bad index" },
		{ ":out", 0, "missing node path" },
		{ "#2", 0, "missing node path" },
		{ "model.x:out junk", 11, "unexpected space" },
		{ "model.x:out.1.2", 13, "unexpected character" },
		{ "model.x:out:in", 11, "unexpected character" },
		{ "model.x#2#3", 9, "unexpected character" },
		{ "model/x", 5, "unexpected character" },
	};
	expect_parse_errors(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_parse_limits(void)
{
	char *s = malloc(4 * TM_ADDRESS_MAX);
	const char *msg = NULL;
	tm_address *a;
	int col, i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	/* Longest accepted: TM_ADDRESS_MAX - 1 bytes. */
	memset(s, 'a', TM_ADDRESS_MAX - 1);
	s[TM_ADDRESS_MAX - 1] = '\0';
	CU_ASSERT_EQUAL(tm_address_parse(s, &a, &col, &msg), TM_OK);
	tm_address_free(a);
	memset(s, 'a', TM_ADDRESS_MAX);
	s[TM_ADDRESS_MAX] = '\0';
	CU_ASSERT_EQUAL(tm_address_parse(s, &a, &col, &msg), TM_ERR_ADDRESS);
	CU_ASSERT(msg && strstr(msg, "too long"));

	/* TM_ADDRESS_MAX_SEGMENTS segments are fine, one more is not. */
	for (i = 0; i < TM_ADDRESS_MAX_SEGMENTS; i++) {
		s[2 * i] = 'a';
		s[2 * i + 1] = '.';
	}
	s[2 * TM_ADDRESS_MAX_SEGMENTS - 1] = '\0';
	CU_ASSERT_EQUAL(tm_address_parse(s, &a, &col, &msg), TM_OK);
	tm_address_free(a);
	s[2 * TM_ADDRESS_MAX_SEGMENTS - 1] = '.';
	s[2 * TM_ADDRESS_MAX_SEGMENTS] = 'a';
	s[2 * TM_ADDRESS_MAX_SEGMENTS + 1] = '\0';
	CU_ASSERT_EQUAL(tm_address_parse(s, &a, &col, &msg), TM_ERR_ADDRESS);
	CU_ASSERT(msg && strstr(msg, "too many segments"));
	CU_ASSERT_EQUAL(col, 2 * TM_ADDRESS_MAX_SEGMENTS);
	free(s);
}

struct glob_case {
	const char *pattern;
	const char *path;
	int want;
};

static void test_glob(void)
{
	static const struct glob_case cases[] = {
		{ "model.layers.*.mlp", "model.layers.3.mlp", 1 },
		{ "model.layers.*.mlp", "model.layers.3.attn", 0 },
		{ "model.layers.*.mlp", "model.layers.mlp", 0 },
		{ "model.layers.*.mlp", "model.layers.3.4.mlp", 0 },
		{ "model.**", "model", 1 },
		{ "model.**", "model.a.b.c", 1 },
		{ "model.**", "other", 0 },
		{ "model.**", "modelx.a", 0 },
		{ "**.mlp", "model.layers.3.mlp", 1 },
		{ "**.mlp", "mlp", 1 },
		{ "**.mlp", "model.mlp.fc", 0 },
		{ "**.mlp", "model.xmlp", 0 },
		{ "model.**.fc1", "model.fc1", 1 },
		{ "model.**.fc1", "model.layers.3.mlp.fc1", 1 },
		{ "model.**.fc1", "model.layers.3.mlp.fc2", 0 },
		{ "model.**.fc1", "model.fc1.weight", 0 },
		{ "**", "model", 1 },
		{ "**", "model.a.b", 1 },
		{ "model.**.mlp.**", "model.layers.0.mlp", 1 },
		{ "model.**.mlp.**", "model.layers.0.mlp.fc1", 1 },
		{ "model.**.mlp.**", "model.attn", 0 },
		{ "a.**.b.**.c", "a.b.x.b.y.c", 1 },
		{ "a.**.b.**.c", "a.b.c.b", 0 },
		{ "a.**.b.c", "a.b.b.b.c", 1 },
		{ "model.**.*.fc", "model.fc", 0 },
		{ "model.**.*.fc", "model.a.fc", 1 },
		{ "model.**.*.fc", "model.a.b.fc", 1 },
		{ "model.layer*", "model.layers", 1 },
		{ "model.layer*", "model.layer", 1 },
		{ "model.layer*", "model.layers.3", 0 },
		{ "model.layer*", "model.alayers", 0 },
		{ "model.*_proj", "model.q_proj", 1 },
		{ "model.*_proj", "model.proj", 0 },
		{ "model.*a*b*", "model.xaybz", 1 },
		{ "model.*a*b*", "model.ba", 0 },
		{ "model.*a*b", "model.aabab", 1 },
		{ "model.layers.*.mlp.fc*", "model.layers.10.mlp.fc2", 1 },
		{ "model.*", "model", 0 },
		{ "model.*", "model.a", 1 },
		{ "*", "model", 1 },
		{ "*", "model.a", 0 },
		{ "model.x", "model.x", 1 },
		{ "model.x", "model.xy", 0 },
		{ "model.x", "model", 0 },
		{ "model.layers[*].mlp", "model.layers.7.mlp", 1 },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r = tm_path_glob(cases[i].pattern, cases[i].path);

		CU_ASSERT_EQUAL(r, cases[i].want);
		if (r != cases[i].want)
			fprintf(stderr, "\n  glob \"%s\" \"%s\": %d\n", cases[i].pattern,
				cases[i].path, r);
	}
	CU_ASSERT_EQUAL(tm_path_glob("model..x", "model.x"), -1);
	CU_ASSERT_EQUAL(tm_path_glob("model.x:out", "model.x"), -1);
	CU_ASSERT_EQUAL(tm_path_glob("model.x#2", "model.x"), -1);
	CU_ASSERT_EQUAL(tm_path_glob(NULL, "model.x"), -1);
}

static struct tm_slot slot(int kind, int index)
{
	struct tm_slot s;

	s.kind = (uint8_t)kind;
	s.index = (uint16_t)index;
	return s;
}

static void test_match_slots_and_calls(void)
{
	tm_address *a;

	CU_ASSERT_EQUAL_FATAL(tm_address_parse("model.x:out", &a, NULL, NULL), TM_OK);
	CU_ASSERT(tm_address_match(a, "model.x", 1, slot(TM_SLOT_OUT, 0)));
	CU_ASSERT(tm_address_match(a, "model.x", 5, slot(TM_SLOT_OUT, 0)));
	CU_ASSERT(!tm_address_match(a, "model.x", 1, slot(TM_SLOT_OUT, 1)));
	CU_ASSERT(!tm_address_match(a, "model.x", 1, slot(TM_SLOT_IN, 0)));
	CU_ASSERT(!tm_address_match(a, "model.y", 1, slot(TM_SLOT_OUT, 0)));
	CU_ASSERT(tm_address_match_path(a, "model.x"));
	tm_address_free(a);

	CU_ASSERT_EQUAL_FATAL(tm_address_parse("model.x:out.*", &a, NULL, NULL), TM_OK);
	CU_ASSERT(tm_address_match(a, "model.x", 1, slot(TM_SLOT_OUT, 0)));
	CU_ASSERT(tm_address_match(a, "model.x", 1, slot(TM_SLOT_OUT, 3)));
	CU_ASSERT(!tm_address_match(a, "model.x", 1, slot(TM_SLOT_GRAD_OUT, 3)));
	tm_address_free(a);

	CU_ASSERT_EQUAL_FATAL(tm_address_parse("model.x#2", &a, NULL, NULL), TM_OK);
	CU_ASSERT(tm_address_match(a, "model.x", 2, slot(TM_SLOT_OUT, 0)));
	CU_ASSERT(tm_address_match(a, "model.x", 2, slot(TM_SLOT_GRAD_IN, 1)));
	CU_ASSERT(!tm_address_match(a, "model.x", 1, slot(TM_SLOT_OUT, 0)));
	/* match_path ignores #N and the slot. */
	CU_ASSERT(tm_address_match_path(a, "model.x"));
	tm_address_free(a);

	CU_ASSERT_EQUAL_FATAL(tm_address_parse("model.*#2:grad_in.1", &a, NULL, NULL), TM_OK);
	CU_ASSERT(tm_address_match(a, "model.fc", 2, slot(TM_SLOT_GRAD_IN, 1)));
	CU_ASSERT(!tm_address_match(a, "model.fc", 2, slot(TM_SLOT_GRAD_IN, 0)));
	CU_ASSERT(!tm_address_match(a, "model.fc", 3, slot(TM_SLOT_GRAD_IN, 1)));
	CU_ASSERT(!tm_address_match(a, "model.fc.w", 2, slot(TM_SLOT_GRAD_IN, 1)));
	tm_address_free(a);

	CU_ASSERT_EQUAL_FATAL(tm_address_parse("model.fc.weight:grad", &a, NULL, NULL), TM_OK);
	CU_ASSERT(tm_address_match(a, "model.fc.weight", 1, slot(TM_SLOT_GRAD, 0)));
	CU_ASSERT(!tm_address_match(a, "model.fc.weight", 1, slot(TM_SLOT_DATA, 0)));
	tm_address_free(a);

	/* No slot, no #N: every call and slot. */
	CU_ASSERT_EQUAL_FATAL(tm_address_parse("model.**", &a, NULL, NULL), TM_OK);
	CU_ASSERT(tm_address_match(a, "model.a.b", 7, slot(TM_SLOT_IN, 2)));
	CU_ASSERT(!tm_address_match(a, NULL, 7, slot(TM_SLOT_IN, 2)));
	tm_address_free(a);
	CU_ASSERT(!tm_address_match(NULL, "model", 1, slot(TM_SLOT_OUT, 0)));
}

static void test_slot_parse(void)
{
	struct tm_slot s;

	CU_ASSERT_EQUAL(tm_slot_parse("out", &s), TM_OK);
	CU_ASSERT(s.kind == TM_SLOT_OUT && s.index == 0);
	CU_ASSERT_EQUAL(tm_slot_parse("out.1", &s), TM_OK);
	CU_ASSERT(s.kind == TM_SLOT_OUT && s.index == 1);
	CU_ASSERT_EQUAL(tm_slot_parse("grad_in.0", &s), TM_OK);
	CU_ASSERT(s.kind == TM_SLOT_GRAD_IN && s.index == 0);
	CU_ASSERT_EQUAL(tm_slot_parse("grad_out.32767", &s), TM_OK);
	CU_ASSERT(s.kind == TM_SLOT_GRAD_OUT && s.index == 32767);
	CU_ASSERT_EQUAL(tm_slot_parse("grad_out.32768", &s), TM_ERR_ADDRESS);
	CU_ASSERT_EQUAL(tm_slot_parse("data", &s), TM_OK);
	CU_ASSERT(s.kind == TM_SLOT_DATA);
	CU_ASSERT_EQUAL(tm_slot_parse("grad", &s), TM_OK);
	CU_ASSERT(s.kind == TM_SLOT_GRAD);
	CU_ASSERT_EQUAL(tm_slot_parse("in", &s), TM_OK);
	CU_ASSERT(s.kind == TM_SLOT_IN);
	CU_ASSERT_EQUAL(tm_slot_parse("out.65536", &s), TM_ERR_ADDRESS);
	CU_ASSERT_EQUAL(tm_slot_parse("out.", &s), TM_ERR_ADDRESS);
	CU_ASSERT_EQUAL(tm_slot_parse("out.*", &s), TM_ERR_ADDRESS);
	CU_ASSERT_EQUAL(tm_slot_parse("out.1x", &s), TM_ERR_ADDRESS);
	CU_ASSERT_EQUAL(tm_slot_parse("data.1", &s), TM_ERR_ADDRESS);
	CU_ASSERT_EQUAL(tm_slot_parse("outs", &s), TM_ERR_ADDRESS);
	CU_ASSERT_EQUAL(tm_slot_parse("", &s), TM_ERR_ADDRESS);
	CU_ASSERT_EQUAL(tm_slot_parse(NULL, &s), TM_ERR_INVALID_ARG);
}

static void test_edit_distance(void)
{
	char *a, *b;

	CU_ASSERT_EQUAL(tm_edit_distance("kitten", "sitting", 10), 3);
	CU_ASSERT_EQUAL(tm_edit_distance("sitting", "kitten", 10), 3);
	CU_ASSERT_EQUAL(tm_edit_distance("kitten", "sitting", 2), 3);
	CU_ASSERT_EQUAL(tm_edit_distance("kitten", "sitting", 3), 3);
	CU_ASSERT_EQUAL(tm_edit_distance("", "abc", 5), 3);
	CU_ASSERT_EQUAL(tm_edit_distance("abc", "", 1), 2);
	CU_ASSERT_EQUAL(tm_edit_distance("abc", "abc", 0), 0);
	CU_ASSERT_EQUAL(tm_edit_distance("abc", "abd", 0), 1);
	CU_ASSERT_EQUAL(tm_edit_distance("flaw", "lawn", 5), 2);
	CU_ASSERT_EQUAL(tm_edit_distance("abcdef", "azcdxf", SIZE_MAX), 2);
	CU_ASSERT_EQUAL(tm_edit_distance("model.layers.3.mlp", "model.layers.3.mpl", 4), 2);

	/* Longer than the stack row: the heap path gives the same answers. */
	a = malloc(3001);
	b = malloc(3001);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	memset(a, 'x', 3000);
	memset(b, 'x', 3000);
	a[3000] = b[3000] = '\0';
	b[1500] = 'y';
	CU_ASSERT_EQUAL(tm_edit_distance(a, b, 5), 1);
	b[2999] = '\0';
	CU_ASSERT_EQUAL(tm_edit_distance(a, b, 5), 2);
	CU_ASSERT_EQUAL(tm_edit_distance(a, b, 1), 2);
	free(a);
	free(b);
}

/* ------------------------------------------------------------- node table */

static uint32_t add(tm_nodetab *t, const char *address, uint32_t parent)
{
	struct tm_node n;
	uint32_t id = 12345;

	memset(&n, 0, sizeof(n));
	n.address = address;
	n.parent = parent;
	n.type = "Linear";
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, &id), TM_OK);
	return id;
}

static tm_nodetab *sample_table(void)
{
	tm_nodetab *t = tm_nodetab_new();
	char buf[64];
	uint32_t root, layers, i;

	root = add(t, "model", TM_NODE_NONE);
	add(t, "model.embed", root);
	layers = add(t, "model.layers", root);
	for (i = 0; i < 4; i++) {
		uint32_t l;

		snprintf(buf, sizeof(buf), "model.layers.%u", i);
		l = add(t, buf, layers);
		snprintf(buf, sizeof(buf), "model.layers.%u.attn", i);
		add(t, buf, l);
		snprintf(buf, sizeof(buf), "model.layers.%u.mlp", i);
		add(t, buf, l);
		snprintf(buf, sizeof(buf), "model.layers.%u.mlp.fc1", i);
		add(t, buf, l);
	}
	add(t, "model.head", root);
	return t;
}

static void test_nodetab_basics(void)
{
	tm_nodetab *t = tm_nodetab_new();
	struct tm_node n;
	char addr[32] = "model.fc1", type[16] = "Linear", file[32] = "net.py";
	const struct tm_node *got;
	uint32_t id;

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	CU_ASSERT_EQUAL(tm_nodetab_count(t), 0);
	CU_ASSERT_PTR_NULL(tm_nodetab_find(t, "model"));
	memset(&n, 0, sizeof(n));
	n.id = 99;      /* ignored by add */
	n.parent = TM_NODE_NONE;
	n.address = "model";
	n.type = "Net";
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, &id), TM_OK);
	CU_ASSERT_EQUAL(id, 0);
	n.address = addr;
	n.type = type;
	n.file = file;
	n.line = 42;
	n.parent = 0;
	n.depth = 1;
	n.kind = TM_NODE_MODULE;
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, &id), TM_OK);
	CU_ASSERT_EQUAL(id, 1);
	/* The table keeps its own copies. */
	strcpy(addr, "model.zzz");
	strcpy(type, "Zzz");
	strcpy(file, "zzz.py");
	got = tm_nodetab_find(t, "model.fc1");
	CU_ASSERT_PTR_NOT_NULL_FATAL(got);
	CU_ASSERT_EQUAL(got->id, 1);
	CU_ASSERT_STRING_EQUAL(got->type, "Linear");
	CU_ASSERT_STRING_EQUAL(got->file, "net.py");
	CU_ASSERT_EQUAL(got->line, 42);
	CU_ASSERT_EQUAL(got->depth, 1);
	CU_ASSERT_PTR_EQUAL(tm_nodetab_get(t, 1), got);
	CU_ASSERT_PTR_NULL(tm_nodetab_find(t, "model.zzz"));
	CU_ASSERT_PTR_NULL(tm_nodetab_get(t, 2));
	CU_ASSERT_PTR_NULL(tm_nodetab_get(t, TM_NODE_NONE));
	CU_ASSERT_PTR_NULL(tm_nodetab_get(t, 0)->file);

	/* Duplicates name the existing id. */
	n.address = "model.fc1";
	id = 77;
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, &id), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(id, 1);
	/* Only canonical node paths get in. */
	n.address = "model.layers[1]";
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, &id), TM_ERR_ADDRESS);
	n.address = "model.*";
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, &id), TM_ERR_ADDRESS);
	n.address = "model.x:out";
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, &id), TM_ERR_ADDRESS);
	n.address = "";
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, &id), TM_ERR_ADDRESS);
	n.address = NULL;
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, &id), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_nodetab_count(t), 2);
	tm_nodetab_free(t);
	tm_nodetab_free(NULL);
	CU_ASSERT_EQUAL(tm_nodetab_count(NULL), 0);
}

/* Many nodes: the hash grows, and pointers handed out earlier stay valid. */
static void test_nodetab_growth(void)
{
	tm_nodetab *t = tm_nodetab_new();
	const struct tm_node *first;
	char buf[64];
	uint32_t i;

	add(t, "model", TM_NODE_NONE);
	first = tm_nodetab_get(t, 0);
	for (i = 0; i < 5000; i++) {
		snprintf(buf, sizeof(buf), "model.blocks.%u.conv", i);
		CU_ASSERT_EQUAL(add(t, buf, 0), i + 1);
	}
	CU_ASSERT_EQUAL(tm_nodetab_count(t), 5001);
	CU_ASSERT_PTR_EQUAL(tm_nodetab_get(t, 0), first);
	CU_ASSERT_STRING_EQUAL(first->address, "model");
	for (i = 0; i < 5000; i += 7) {
		const struct tm_node *n;

		snprintf(buf, sizeof(buf), "model.blocks.%u.conv", i);
		n = tm_nodetab_find(t, buf);
		CU_ASSERT_PTR_NOT_NULL_FATAL(n);
		CU_ASSERT_EQUAL(n->id, i + 1);
	}
	CU_ASSERT_PTR_NULL(tm_nodetab_find(t, "model.blocks.5000.conv"));
	tm_nodetab_free(t);
}

/* Readers restore tables with their own ids, which must be dense. */
static void test_nodetab_put(void)
{
	tm_nodetab *t = tm_nodetab_new();
	struct tm_node n;
	char *big;

	memset(&n, 0, sizeof(n));
	n.address = "model";
	n.parent = TM_NODE_NONE;
	n.id = 1;
	CU_ASSERT_EQUAL(tm_nodetab_put(t, &n), TM_ERR_CORRUPT);
	n.id = 0;
	CU_ASSERT_EQUAL(tm_nodetab_put(t, &n), TM_OK);
	CU_ASSERT_EQUAL(tm_nodetab_put(t, &n), TM_ERR_CORRUPT);  /* id 0 again */
	n.id = 1;
	CU_ASSERT_EQUAL(tm_nodetab_put(t, &n), TM_ERR_CORRUPT);  /* same address */
	n.address = "model.a";
	n.kind = 9;
	CU_ASSERT_EQUAL(tm_nodetab_put(t, &n), TM_ERR_CORRUPT);  /* bad kind */
	n.kind = TM_NODE_PARAM;
	n.address = "model..a";
	CU_ASSERT_EQUAL(tm_nodetab_put(t, &n), TM_ERR_CORRUPT);
	n.address = "model.a";
	CU_ASSERT_EQUAL(tm_nodetab_put(t, &n), TM_OK);
	CU_ASSERT_EQUAL(tm_nodetab_count(t), 2);
	CU_ASSERT_EQUAL(tm_nodetab_find(t, "model.a")->kind, TM_NODE_PARAM);

	/* Strings are capped. */
	big = malloc(TM_ADDRESS_MAX + 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(big);
	memset(big, 'b', TM_ADDRESS_MAX + 1);
	big[TM_ADDRESS_MAX + 1] = '\0';
	n.id = 2;
	n.address = big;
	CU_ASSERT_EQUAL(tm_nodetab_put(t, &n), TM_ERR_TOO_LARGE);
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, NULL), TM_ERR_INVALID_ARG);
	CU_ASSERT_PTR_NULL(tm_nodetab_find(t, big));
	big[TM_ADDRESS_MAX - 1] = '\0';
	CU_ASSERT_EQUAL(tm_nodetab_put(t, &n), TM_OK);
	CU_ASSERT_PTR_NOT_NULL(tm_nodetab_find(t, big));
	free(big);
	CU_ASSERT_EQUAL(tm_nodetab_put(t, NULL), TM_ERR_INVALID_ARG);
	tm_nodetab_free(t);
}

/* ------------------------------------------------------------- suggestions */

static void test_suggest_typo(void)
{
	tm_nodetab *t = sample_table();
	const char *out[5];
	size_t n;

	n = tm_address_suggest(t, "model.layers.3.mpl", out, 5);
	CU_ASSERT_FATAL(n >= 1);
	CU_ASSERT_STRING_EQUAL(out[0], "model.layers.3.mlp");

	n = tm_address_suggest(t, "model.layer.3.mlp", out, 5);
	CU_ASSERT_FATAL(n >= 1);
	CU_ASSERT_STRING_EQUAL(out[0], "model.layers.3.mlp");

	n = tm_address_suggest(t, "model.embd", out, 5);
	CU_ASSERT_FATAL(n >= 1);
	CU_ASSERT_STRING_EQUAL(out[0], "model.embed");

	/* Normalised before comparing. */
	n = tm_address_suggest(t, " model.layers[2].mlp.fc2 ", out, 5);
	CU_ASSERT_FATAL(n >= 1);
	CU_ASSERT_STRING_EQUAL(out[0], "model.layers.2.mlp.fc1");

	n = tm_address_suggest(t, "completely.different.thing", out, 5);
	CU_ASSERT_EQUAL(n, 0);
	n = tm_address_suggest(t, "", out, 5);
	CU_ASSERT_EQUAL(n, 0);
	tm_nodetab_free(t);
}

static void test_suggest_missing_root(void)
{
	tm_nodetab *t = sample_table();
	const char *out[8];
	size_t n;

	n = tm_address_suggest(t, "layers.3.mlp", out, 3);
	CU_ASSERT_FATAL(n >= 1);
	CU_ASSERT_STRING_EQUAL(out[0], "model.layers.3.mlp");

	n = tm_address_suggest(t, "layers.1.mlp.fc1", out, 3);
	CU_ASSERT_FATAL(n >= 1);
	CU_ASSERT_STRING_EQUAL(out[0], "model.layers.1.mlp.fc1");

	/* A bare last segment: every node ending in it, in table order. */
	n = tm_address_suggest(t, "mlp", out, 8);
	CU_ASSERT_EQUAL_FATAL(n, 4);
	CU_ASSERT_STRING_EQUAL(out[0], "model.layers.0.mlp");
	CU_ASSERT_STRING_EQUAL(out[1], "model.layers.1.mlp");
	CU_ASSERT_STRING_EQUAL(out[2], "model.layers.2.mlp");
	CU_ASSERT_STRING_EQUAL(out[3], "model.layers.3.mlp");
	tm_nodetab_free(t);
}

static void test_suggest_order(void)
{
	tm_nodetab *t = sample_table();
	const char *a[4], *b[4];
	size_t na, nb, i;

	/* Distance 1 from .0, .1, .2, .3 all: ties in table order, max honoured. */
	na = tm_address_suggest(t, "model.layers.9", a, 2);
	CU_ASSERT_EQUAL_FATAL(na, 2);
	CU_ASSERT_STRING_EQUAL(a[0], "model.layers.0");
	CU_ASSERT_STRING_EQUAL(a[1], "model.layers.1");
	nb = tm_address_suggest(t, "model.layers.9", b, 2);
	CU_ASSERT_EQUAL(na, nb);
	for (i = 0; i < na; i++)
		CU_ASSERT_PTR_EQUAL(a[i], b[i]);
	/* An exact address comes first. */
	na = tm_address_suggest(t, "model.layers.1", a, 4);
	CU_ASSERT_FATAL(na >= 1);
	CU_ASSERT_STRING_EQUAL(a[0], "model.layers.1");
	CU_ASSERT_EQUAL(tm_address_suggest(t, "model", a, 0), 0);
	CU_ASSERT_EQUAL(tm_address_suggest(NULL, "model", a, 4), 0);
	tm_nodetab_free(t);
}

/* Which events a breakpoint address selects on which nodes. */
static void test_bind_event_kinds(void)
{
	static const struct {
		const char *address;
		uint8_t kind;
		int parent;
	} nodes[] = {
		{ "model", TM_NODE_MODULE, -1 },
		{ "model.fc1", TM_NODE_MODULE, 0 },
		{ "model.fc1.weight", TM_NODE_PARAM, 1 },
		{ "model.fc2", TM_NODE_MODULE, 0 },
	};
	static const struct {
		const char *where;
		uint8_t want[4];
		uint32_t nmatch;
	} cases[] = {
		{ "model.fc1", { 0, 1u << TM_EV_EXIT, 0, 0 }, 1 },
		{ "model.fc1:in", { 0, 1u << TM_EV_ENTER, 0, 0 }, 1 },
		{ "model.fc1:grad_out.1", { 0, 1u << TM_EV_BWD, 0, 0 }, 1 },
		{ "model.fc1.weight", { 0, 0, 1u << TM_EV_PARAM, 0 }, 1 },
		{ "model.fc1.weight:grad", { 0, 0, 1u << TM_EV_PARAM, 0 }, 1 },
		/* a parameter slot never selects a module, nor the reverse */
		{ "model.fc1:data", { 0, 0, 0, 0 }, 0 },
		{ "model.fc1.weight:out", { 0, 0, 0, 0 }, 0 },
		{ "model.**:grad", { 0, 0, 1u << TM_EV_PARAM, 0 }, 1 },
		{ "model.*", { 0, 1u << TM_EV_EXIT, 0, 1u << TM_EV_EXIT }, 2 },
	};
	tm_nodetab *t = tm_nodetab_new();
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	for (i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		struct tm_node n = { 0 };
		uint32_t id;

		n.address = nodes[i].address;
		n.kind = nodes[i].kind;
		n.parent = nodes[i].parent < 0 ? TM_NODE_NONE : (uint32_t)nodes[i].parent;
		CU_ASSERT_EQUAL_FATAL(tm_nodetab_add(t, &n, &id), TM_OK);
	}
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tm_address *a;
		uint8_t *k;
		uint32_t nm;

		CU_ASSERT_EQUAL_FATAL(tm_address_parse(cases[i].where, &a, NULL, NULL), TM_OK);
		CU_ASSERT_EQUAL_FATAL(tm_address_bind(a, t, &k, &nm), TM_OK);
		CU_ASSERT_EQUAL(nm, cases[i].nmatch);
		if (memcmp(k, cases[i].want, 4))
			CU_FAIL(cases[i].where);
		free(k);
		tm_address_free(a);
	}
	CU_ASSERT_EQUAL(tm_slot_event_kind(TM_SLOT_GRAD_IN), TM_EV_BWD);
	CU_ASSERT_EQUAL(tm_slot_event_kind(TM_SLOT_DATA), TM_EV_PARAM);
	tm_nodetab_free(t);
}

/* ------------------------------------------------------------- ranks */

/* "@R:" and "@*:" (multi-rank sessions): canonical spelling, accessors. */
static void test_rank_parse(void)
{
	tm_address *a;

	check_canon("@1:model.layers.3.mlp:out", "@1:model.layers.3.mlp:out");
	check_canon("  @0:model.fc#2:out.1 ", "@0:model.fc#2:out.1");
	check_canon("@*:model.**", "@*:model.**");
	check_canon("@007:model.layers[2]", "@7:model.layers.2");
	check_canon("@65535:model", "@65535:model");

	CU_ASSERT_EQUAL_FATAL(tm_address_parse("@12:model.fc:out", &a, NULL, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_address_rank(a), 12);
	CU_ASSERT_STRING_EQUAL(tm_address_path(a), "model.fc");
	CU_ASSERT(tm_address_has_slot(a));
	CU_ASSERT(!tm_address_is_pattern(a));
	tm_address_free(a);
	CU_ASSERT_EQUAL_FATAL(tm_address_parse("@*:model.*", &a, NULL, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_address_rank(a), TM_RANK_ANY);
	CU_ASSERT_STRING_EQUAL(tm_address_path(a), "model.*");
	tm_address_free(a);
	CU_ASSERT_EQUAL_FATAL(tm_address_parse("model.fc", &a, NULL, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_address_rank(a), TM_RANK_NONE);
	tm_address_free(a);
	CU_ASSERT_EQUAL(tm_address_rank(NULL), TM_RANK_NONE);
}

static void test_rank_format_buffer(void)
{
	tm_address *a;
	char buf[64];

	/* "@1:model.a:out" is 14 bytes: the prefix counts against the buffer */
	CU_ASSERT_EQUAL_FATAL(tm_address_parse("@1:model.a:out", &a, NULL, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_address_format(a, buf, 14), TM_ERR_INVALID_ARG);
	CU_ASSERT_EQUAL(tm_address_format(a, buf, 15), TM_OK);
	CU_ASSERT_STRING_EQUAL(buf, "@1:model.a:out");
	tm_address_free(a);
}

static void test_rank_parse_errors(void)
{
	static const struct err_case cases[] = {
		{ "@x:model", 1, "expected a rank" },
		{ "@1model", 2, "expected ':'" },
		{ "@:model", 1, "expected a rank" },
		{ "@99999999:model", 1, "rank too large" },
		{ "@65536:model", 1, "rank too large" },
		{ "@", 1, "expected a rank" },
		{ "@1", 2, "expected ':'" },
		{ "@1:", 3, "missing node path" },
		{ "  @*model", 4, "expected ':'" },
		{ "@**:model", 2, "expected ':'" },
		{ "@-1:model", 1, "expected a rank" },
		{ "@1: model", 3, "unexpected space" },
		{ "@1:@2:model", 3, "unexpected character" },
		{ "model@1:x", 5, "unexpected character" },
		{ "@1::out", 3, "missing node path" },
	};
	expect_parse_errors(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_node_rank(void)
{
	const char *rest = NULL;

	CU_ASSERT_EQUAL(tm_address_node_rank("@3:model.fc", &rest), 3);
	CU_ASSERT_STRING_EQUAL(rest, "model.fc");
	CU_ASSERT_EQUAL(tm_address_node_rank("@0:model", &rest), 0);
	CU_ASSERT_STRING_EQUAL(rest, "model");
	CU_ASSERT_EQUAL(tm_address_node_rank("@65535:m", &rest), 65535);
	CU_ASSERT_STRING_EQUAL(rest, "m");
	CU_ASSERT_EQUAL(tm_address_node_rank("model.fc", &rest), TM_RANK_NONE);
	CU_ASSERT_STRING_EQUAL(rest, "model.fc");
	/* only the canonical spelling is a prefix */
	CU_ASSERT_EQUAL(tm_address_node_rank("@01:model", &rest), TM_RANK_NONE);
	CU_ASSERT_STRING_EQUAL(rest, "@01:model");
	CU_ASSERT_EQUAL(tm_address_node_rank("@65536:model", NULL), TM_RANK_NONE);
	CU_ASSERT_EQUAL(tm_address_node_rank("@*:model", NULL), TM_RANK_NONE);
	CU_ASSERT_EQUAL(tm_address_node_rank("@1", NULL), TM_RANK_NONE);
	CU_ASSERT_EQUAL(tm_address_node_rank("@", NULL), TM_RANK_NONE);
	CU_ASSERT_EQUAL(tm_address_node_rank(NULL, &rest), TM_RANK_NONE);
	CU_ASSERT_PTR_NULL(rest);
}

static int matches(const char *pattern, const char *node)
{
	tm_address *a;
	int r;

	if (tm_address_parse(pattern, &a, NULL, NULL))
		return -1;
	r = tm_address_match_path(a, node);
	tm_address_free(a);
	return r;
}

/* Unqualified and "@*:" take every rank and unprefixed nodes; "@R:" only
 * nodes prefixed "@R:". */
static void test_rank_match(void)
{
	struct tm_slot out = { TM_SLOT_OUT, 0 };
	tm_address *a;

	CU_ASSERT_EQUAL(matches("model.fc", "@0:model.fc"), 1);
	CU_ASSERT_EQUAL(matches("model.fc", "@1:model.fc"), 1);
	CU_ASSERT_EQUAL(matches("model.fc", "model.fc"), 1);
	CU_ASSERT_EQUAL(matches("model.fc", "@1:model.fc2"), 0);
	CU_ASSERT_EQUAL(matches("model.**", "@1:model.layers.3.mlp"), 1);
	CU_ASSERT_EQUAL(matches("@*:model.**", "@1:model.layers.3.mlp"), 1);
	CU_ASSERT_EQUAL(matches("@*:model.fc", "model.fc"), 1);
	CU_ASSERT_EQUAL(matches("@1:model.fc", "@1:model.fc"), 1);
	CU_ASSERT_EQUAL(matches("@1:model.fc", "@0:model.fc"), 0);
	CU_ASSERT_EQUAL(matches("@1:model.fc", "model.fc"), 0);
	CU_ASSERT_EQUAL(matches("@1:model.fc", "@11:model.fc"), 0);
	CU_ASSERT_EQUAL(matches("@1:model.*", "@1:model.fc"), 1);
	CU_ASSERT_EQUAL(matches("@1:model.*", "@2:model.fc"), 0);
	CU_ASSERT_EQUAL(matches("@0:**", "@0:model.layers.0"), 1);
	CU_ASSERT_EQUAL(matches("@0:**", "model.layers.0"), 0);
	/* the prefix is not a segment: "*" does not swallow it */
	CU_ASSERT_EQUAL(matches("*.fc", "@1:model.fc"), 1);
	CU_ASSERT_EQUAL(matches("*", "@1:model"), 1);
	CU_ASSERT_EQUAL(tm_path_glob("@1:model.*", "@1:model.fc"), 1);
	CU_ASSERT_EQUAL(tm_path_glob("@1:model.*", "@0:model.fc"), 0);
	CU_ASSERT_EQUAL(tm_path_glob("model.*", "@0:model.fc"), 1);

	CU_ASSERT_EQUAL_FATAL(tm_address_parse("@1:model.fc#2:out", &a, NULL, NULL), TM_OK);
	CU_ASSERT(tm_address_match(a, "@1:model.fc", 2, out));
	CU_ASSERT(!tm_address_match(a, "@0:model.fc", 2, out));
	CU_ASSERT(!tm_address_match(a, "@1:model.fc", 1, out));
	tm_address_free(a);
}

/* One table for every rank, as tmdb builds it for a distributed run. */
static tm_nodetab *rank_table(void)
{
	static const struct {
		const char *address;
		int kind;
	} nodes[] = {
		{ "@0:model", TM_NODE_MODULE },
		{ "@0:model.fc", TM_NODE_MODULE },
		{ "@0:model.fc.weight", TM_NODE_PARAM },
		{ "@1:model", TM_NODE_MODULE },
		{ "@1:model.fc", TM_NODE_MODULE },
		{ "@1:model.fc.weight", TM_NODE_PARAM },
	};
	tm_nodetab *t = tm_nodetab_new();
	size_t i;

	if (!t)
		return NULL;
	for (i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		struct tm_node n = { 0 };

		n.address = nodes[i].address;
		n.kind = (uint8_t)nodes[i].kind;
		n.parent = TM_NODE_NONE;
		if (tm_nodetab_add(t, &n, NULL)) {
			tm_nodetab_free(t);
			return NULL;
		}
	}
	return t;
}

static void test_rank_nodetab(void)
{
	tm_nodetab *t = rank_table();
	struct tm_node n = { 0 };

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	CU_ASSERT_PTR_NOT_NULL(tm_nodetab_find(t, "@1:model.fc"));
	CU_ASSERT_PTR_NULL(tm_nodetab_find(t, "model.fc"));
	/* only canonical prefixes enter a table */
	n.parent = TM_NODE_NONE;
	n.address = "@01:model";
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, NULL), TM_ERR_ADDRESS);
	n.address = "@*:model";
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, NULL), TM_ERR_ADDRESS);
	n.address = "@1:";
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, NULL), TM_ERR_ADDRESS);
	n.address = "@65536:model";
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, NULL), TM_ERR_ADDRESS);
	n.address = "@1:model.@2";
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, NULL), TM_ERR_ADDRESS);
	n.address = "@2:model";
	CU_ASSERT_EQUAL(tm_nodetab_add(t, &n, NULL), TM_OK);
	tm_nodetab_free(t);
}

static void test_rank_bind(void)
{
	static const struct {
		const char *where;
		uint8_t want[6];
		uint32_t nmatch;
	} cases[] = {
#define X (1u << TM_EV_EXIT)
#define P (1u << TM_EV_PARAM)
		{ "model.fc", { 0, X, 0, 0, X, 0 }, 2 },
		{ "@*:model.fc", { 0, X, 0, 0, X, 0 }, 2 },
		{ "@1:model.fc", { 0, 0, 0, 0, X, 0 }, 1 },
		{ "@0:model.fc:out", { 0, X, 0, 0, 0, 0 }, 1 },
		{ "@0:model.**", { X, X, P, 0, 0, 0 }, 3 },
		{ "@1:model.fc.weight:grad", { 0, 0, 0, 0, 0, P }, 1 },
		{ "model.*.weight", { 0, 0, P, 0, 0, P }, 2 },
		{ "@2:model.fc", { 0, 0, 0, 0, 0, 0 }, 0 },
		{ "model", { X, 0, 0, X, 0, 0 }, 2 },
#undef X
#undef P
	};
	tm_nodetab *t = rank_table();
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tm_address *a;
		uint8_t *k;
		uint32_t nm;

		CU_ASSERT_EQUAL_FATAL(tm_address_parse(cases[i].where, &a, NULL, NULL), TM_OK);
		CU_ASSERT_EQUAL_FATAL(tm_address_bind(a, t, &k, &nm), TM_OK);
		CU_ASSERT_EQUAL(nm, cases[i].nmatch);
		if (memcmp(k, cases[i].want, 6))
			CU_FAIL(cases[i].where);
		free(k);
		tm_address_free(a);
	}
	tm_nodetab_free(t);
}

static void test_rank_suggest(void)
{
	tm_nodetab *t = rank_table();
	const char *out[3];
	size_t n;

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	/* unqualified: compared with the paths of every rank */
	n = tm_address_suggest(t, "model.fx", out, 3);
	CU_ASSERT(n >= 2);
	if (n >= 2) {
		CU_ASSERT_STRING_EQUAL(out[0], "@0:model.fc");
		CU_ASSERT_STRING_EQUAL(out[1], "@1:model.fc");
	}
	n = tm_address_suggest(t, "fc", out, 3);
	CU_ASSERT(n >= 1 && !strcmp(out[0], "@0:model.fc"));
	/* qualified: the rank written counts */
	n = tm_address_suggest(t, "@1:model.fx", out, 1);
	CU_ASSERT_EQUAL(n, 1);
	if (n == 1)
		CU_ASSERT_STRING_EQUAL(out[0], "@1:model.fc");
	tm_nodetab_free(t);
}

/* ------------------------------------------------------------- ops */

/* "!OP": an op inside a call, by index, name glob or source line. */
static void test_op_parse(void)
{
	static const struct err_case bad[] = {
		{ "model.attn!", 11, "expected an op index, name or '@LINE'" },
		{ "model.attn!0", 11, "op indexes start at 1" },
		{ "model.attn!99999999999", 11, "op index too large" },
		{ "model.attn!div@", 15, "expected a source line" },
		{ "model.attn!div@0", 15, "expected a source line" },
		{ "model.attn!.div", 11, "bad op name" },
		{ "model.attn!div-x", 14, "unexpected character" },
		{ "!div", 0, "missing node path" },
		{ "model.attn!3@12", 12, "unexpected character" },
	};
	tm_address *a;

	check_canon("model.attn!div", "model.attn!div");
	check_canon(" model.attn!aten::div.Tensor ", "model.attn!aten::div.Tensor");
	check_canon("model.attn#2!3", "model.attn#2!3");
	check_canon("model.attn!@42", "model.attn!@42");
	check_canon("model.attn!div@42:out", "model.attn!div@42:out");
	check_canon("model.layers[*].attn!*mm*", "model.layers.*.attn!*mm*");
	check_canon("main!log", "main!log");
	expect_parse_errors(bad, sizeof(bad) / sizeof(bad[0]));
	CU_ASSERT_EQUAL_FATAL(tm_address_parse("model.attn#2!3:out", &a, NULL, NULL), TM_OK);
	CU_ASSERT(tm_address_has_op(a));
	CU_ASSERT_EQUAL(tm_address_op_index(a), 3);
	CU_ASSERT_EQUAL(tm_address_call(a), 2);
	CU_ASSERT_STRING_EQUAL(tm_address_path(a), "model.attn");
	tm_address_free(a);
	CU_ASSERT_EQUAL_FATAL(tm_address_parse("model.attn", &a, NULL, NULL), TM_OK);
	CU_ASSERT(!tm_address_has_op(a));
	CU_ASSERT_EQUAL(tm_address_op_index(a), 0);
	tm_address_free(a);
	/* an op address is no node pattern */
	CU_ASSERT_EQUAL(tm_path_glob("model!div", "model"), -1);
}

static void test_op_name_match(void)
{
	CU_ASSERT(tm_op_name_match("div", "aten::div.Tensor"));
	CU_ASSERT(tm_op_name_match("div.Tensor", "aten::div.Tensor"));
	CU_ASSERT(tm_op_name_match("aten::div", "aten::div.Tensor"));
	CU_ASSERT(tm_op_name_match("aten::div.Tensor", "aten::div.Tensor"));
	CU_ASSERT(tm_op_name_match("*mm", "aten::bmm"));
	CU_ASSERT(tm_op_name_match("", "aten::bmm"));
	CU_ASSERT(!tm_op_name_match("div.Scalar", "aten::div.Tensor"));
	CU_ASSERT(!tm_op_name_match("di", "aten::div.Tensor"));
	CU_ASSERT(!tm_op_name_match("mul", "aten::div.Tensor"));
	CU_ASSERT(tm_op_name_match("add", "prims::add") == 0);
	CU_ASSERT(tm_op_name_match("prims::add", "prims::add"));
}

/* An op address selects op sites (at OP events) by module, name and line;
 * no other address selects an op site. */
static void test_op_bind(void)
{
	static const struct {
		const char *address, *type;
		uint8_t kind;
		int parent;
		uint32_t line;
	} nodes[] = {
		{ "model", "Net", TM_NODE_MODULE, -1, 0 },
		{ "model.attn", "Attn", TM_NODE_MODULE, 0, 0 },
		{ "model.attn.op_div_Tensor_12", "aten::div.Tensor", TM_NODE_OP, 1, 12 },
		{ "model.attn.op_bmm_11", "aten::bmm", TM_NODE_OP, 1, 11 },
		{ "main", "main", TM_NODE_MODULE, -1, 0 },
		{ "main.op_log_30", "aten::log", TM_NODE_OP, 4, 30 },
	};
	enum { O = 1u << TM_EV_OP, X = 1u << TM_EV_EXIT };
	static const struct {
		const char *where;
		uint8_t want[6];
		uint32_t nmatch;
	} cases[] = {
		{ "model.attn!div", { 0, 0, O, 0, 0, 0 }, 1 },
		{ "model.attn!*", { 0, 0, O, O, 0, 0 }, 2 },
		{ "model.attn!@11", { 0, 0, 0, O, 0, 0 }, 1 },
		{ "model.attn!div@11", { 0, 0, 0, 0, 0, 0 }, 0 },
		{ "model.attn!3", { 0, 0, O, O, 0, 0 }, 2 },
		{ "model.**!log", { 0, 0, 0, 0, 0, 0 }, 0 },
		{ "**!log", { 0, 0, 0, 0, 0, O }, 1 },
		{ "model.attn!div:out", { 0, 0, O, 0, 0, 0 }, 1 },
		{ "model.attn!div:in", { 0, 0, 0, 0, 0, 0 }, 0 },
		/* module patterns never select an op site */
		{ "model.**", { X, X, 0, 0, 0, 0 }, 2 },
		{ "**", { X, X, 0, 0, X, 0 }, 3 },
	};
	tm_nodetab *t = tm_nodetab_new();
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	for (i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		struct tm_node n = { 0 };
		uint32_t id;

		n.address = nodes[i].address;
		n.type = nodes[i].type;
		n.kind = nodes[i].kind;
		n.line = nodes[i].line;
		n.parent = nodes[i].parent < 0 ? TM_NODE_NONE : (uint32_t)nodes[i].parent;
		CU_ASSERT_EQUAL_FATAL(tm_nodetab_add(t, &n, &id), TM_OK);
	}
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tm_address *a;
		uint8_t *k;
		uint32_t nm;

		CU_ASSERT_EQUAL_FATAL(tm_address_parse(cases[i].where, &a, NULL, NULL), TM_OK);
		CU_ASSERT_EQUAL_FATAL(tm_address_bind(a, t, &k, &nm), TM_OK);
		CU_ASSERT_EQUAL(nm, cases[i].nmatch);
		if (memcmp(k, cases[i].want, 6))
			CU_FAIL(cases[i].where);
		free(k);
		tm_address_free(a);
	}
	tm_nodetab_free(t);
}

int main(void)
{
	static const struct tm_test_case cases[] = {
		TM_TEST(test_parse_canonical),
		TM_TEST(test_accessors),
		TM_TEST(test_format_buffer),
		TM_TEST(test_parse_errors),
		TM_TEST(test_parse_limits),
		TM_TEST(test_glob),
		TM_TEST(test_match_slots_and_calls),
		TM_TEST(test_slot_parse),
		TM_TEST(test_edit_distance),
		TM_TEST(test_nodetab_basics),
		TM_TEST(test_nodetab_growth),
		TM_TEST(test_nodetab_put),
		TM_TEST(test_suggest_typo),
		TM_TEST(test_suggest_missing_root),
		TM_TEST(test_suggest_order),
		TM_TEST(test_bind_event_kinds),
		TM_TEST(test_rank_parse),
		TM_TEST(test_rank_format_buffer),
		TM_TEST(test_rank_parse_errors),
		TM_TEST(test_node_rank),
		TM_TEST(test_rank_match),
		TM_TEST(test_rank_nodetab),
		TM_TEST(test_rank_bind),
		TM_TEST(test_rank_suggest),
		TM_TEST(test_op_parse),
		TM_TEST(test_op_name_match),
		TM_TEST(test_op_bind),
		{ NULL, NULL }
	};
	return tm_test_run("address", cases);
}
