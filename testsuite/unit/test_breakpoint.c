/*
 * test_breakpoint.c -- the one definition of a stop (tm-breakpoint.h):
 * locations bound to nodes and slots, patterns growing with the node
 * table, the condition over candidate tensors, unknown counts, what a
 * probe can evaluate, and the matcher the probe-side server and tmdb share.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tensormorph.h"
#include "tm-test.h"

static tm_nodetab *nodes;

/* model (0), model.fc1 (1), model.fc1.weight (2), model.fc2 (3) */
static uint32_t add_node(const char *addr, int kind, uint32_t parent, uint16_t depth)
{
	struct tm_node n;
	uint32_t id = 0;

	memset(&n, 0, sizeof(n));
	n.address = addr;
	n.kind = (uint8_t)kind;
	n.parent = parent;
	n.depth = depth;
	n.type = kind == TM_NODE_MODULE ? "Linear" : "Parameter";
	CU_ASSERT_EQUAL(tm_nodetab_add(nodes, &n, &id), TM_OK);
	return id;
}

static void setup_nodes(void)
{
	nodes = tm_nodetab_new();
	add_node("model", TM_NODE_MODULE, TM_NODE_NONE, 0);
	add_node("model.fc1", TM_NODE_MODULE, 0, 1);
	add_node("model.fc1.weight", TM_NODE_PARAM, 1, 2);
	add_node("model.fc2", TM_NODE_MODULE, 0, 1);
}

static void tensor(struct tm_tensor *t, int slot, uint16_t index, double nans)
{
	memset(t, 0, sizeof(*t));
	t->slot.kind = (uint8_t)slot;
	t->slot.index = index;
	t->rank = 1;
	t->shape[0] = 4;
	t->have = TM_STAT_BIT(TM_STAT_NUMEL) | TM_STAT_BIT(TM_STAT_NAN_COUNT);
	t->stat[TM_STAT_NUMEL] = 4;
	t->stat[TM_STAT_NAN_COUNT] = nans;
}

static void event(struct tm_event *ev, int kind, uint32_t node, uint32_t call,
		  struct tm_tensor *ts, uint32_t n)
{
	memset(ev, 0, sizeof(*ev));
	ev->seq = 7;
	ev->kind = (uint8_t)kind;
	ev->node = node;
	ev->call = call;
	ev->level = 1;
	ev->tensors = ts;
	ev->ntensors = n;
}

static tm_tql_prog *compile(const char *src)
{
	struct tm_tql_compile_opts o;
	tm_tql_prog *p = NULL;

	memset(&o, 0, sizeof(o));
	o.nodes = nodes;
	o.want_bool = 1;
	CU_ASSERT_EQUAL_FATAL(tm_tql_compile(src, &o, &p, NULL), TM_OK);
	return p;
}

static int match(struct tm_breakpoint *b, const struct tm_event *ev, uint32_t *focus)
{
	struct tm_tql_ctx ctx;

	memset(&ctx, 0, sizeof(ctx));
	ctx.event = ev;
	ctx.nodes = nodes;
	return tm_breakpoint_match(b, &ctx, focus);
}

static void test_bind_module_and_param(void)
{
	struct tm_breakpoint b;

	setup_nodes();
	CU_ASSERT_EQUAL(tm_breakpoint_init(&b, "model.fc1", NULL, NULL), TM_OK);
	CU_ASSERT_STRING_EQUAL(b.where, "model.fc1");
	CU_ASSERT_EQUAL(tm_breakpoint_bind(&b, nodes), TM_OK);
	CU_ASSERT_EQUAL(b.nmatch, 1);
	CU_ASSERT_EQUAL(b.nkinds, 4);
	/* a module without a slot: its EXIT */
	CU_ASSERT_EQUAL(b.kinds[1], 1u << TM_EV_EXIT);
	CU_ASSERT_EQUAL(b.kinds[2], 0);
	tm_breakpoint_clear(&b);

	CU_ASSERT_EQUAL(tm_breakpoint_init(&b, "model.fc1.weight", NULL, NULL), TM_OK);
	tm_breakpoint_bind(&b, nodes);
	CU_ASSERT_EQUAL(b.kinds[2], 1u << TM_EV_PARAM);
	tm_breakpoint_clear(&b);

	/* a slot: its event kind; canonical spelling */
	CU_ASSERT_EQUAL_FATAL(tm_breakpoint_init(&b, "model.fc1:in.0", NULL, NULL), TM_OK);
	CU_ASSERT_STRING_EQUAL(b.where, "model.fc1:in");
	CU_ASSERT(b.has_slot);
	tm_breakpoint_bind(&b, nodes);
	CU_ASSERT_EQUAL(b.kinds[1], 1u << TM_EV_ENTER);
	tm_breakpoint_clear(&b);

	CU_ASSERT_EQUAL(tm_breakpoint_init(&b, "model.*", NULL, NULL), TM_OK);
	tm_breakpoint_bind(&b, nodes);
	CU_ASSERT_EQUAL(b.nmatch, 2);
	tm_breakpoint_clear(&b);
	tm_nodetab_free(nodes);
}

static void test_malformed(void)
{
	struct tm_breakpoint b;
	const char *msg = NULL;
	int col = -1;

	CU_ASSERT_EQUAL(tm_breakpoint_init(&b, "model..fc1", &col, &msg), TM_ERR_ADDRESS);
	CU_ASSERT_PTR_NOT_NULL(msg);
	CU_ASSERT(col >= 0);
	CU_ASSERT_PTR_NULL(b.addr);
	tm_breakpoint_clear(&b);

	/* set_where leaves a breakpoint alone when the new location is bad */
	CU_ASSERT_EQUAL(tm_breakpoint_init(&b, "model.fc2", NULL, NULL), TM_OK);
	CU_ASSERT_EQUAL(tm_breakpoint_set_where(&b, "model:", NULL, NULL), TM_ERR_ADDRESS);
	CU_ASSERT_STRING_EQUAL(b.where, "model.fc2");
	tm_breakpoint_clear(&b);
}

static void test_match_kind_and_call(void)
{
	struct tm_breakpoint b;
	struct tm_tensor t[2];
	struct tm_event ev;
	uint32_t focus;

	setup_nodes();
	tm_breakpoint_init(&b, "model.fc1#2", NULL, NULL);
	tm_breakpoint_bind(&b, nodes);
	tensor(&t[0], TM_SLOT_OUT, 0, 0);
	event(&ev, TM_EV_EXIT, 1, 2, t, 1);
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 1);
	CU_ASSERT_EQUAL(focus, 0);
	ev.call = 1;
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 0);
	CU_ASSERT_EQUAL(focus, UINT32_MAX);
	ev.call = 2;
	ev.kind = TM_EV_ENTER;
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 0);
	ev.kind = TM_EV_EXIT;
	ev.node = 3;
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 0);
	tm_breakpoint_clear(&b);
	tm_nodetab_free(nodes);
}

static void test_condition_over_slots(void)
{
	struct tm_breakpoint b;
	struct tm_tensor t[3];
	struct tm_event ev;
	uint32_t focus;

	setup_nodes();
	tensor(&t[0], TM_SLOT_OUT, 0, 0);
	tensor(&t[1], TM_SLOT_OUT, 1, 3);
	tensor(&t[2], TM_SLOT_OUT, 2, 0);
	event(&ev, TM_EV_EXIT, 1, 1, t, 3);

	/* without a slot every output is a candidate: the second fires */
	tm_breakpoint_init(&b, "model.fc1", NULL, NULL);
	tm_breakpoint_bind(&b, nodes);
	tm_breakpoint_set_cond(&b, compile("tensor.nan_count > 0"));
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 1);
	CU_ASSERT_EQUAL(focus, 1);
	tm_breakpoint_clear(&b);

	/* :out.2 looks at that output only */
	tm_breakpoint_init(&b, "model.fc1:out.2", NULL, NULL);
	tm_breakpoint_bind(&b, nodes);
	tm_breakpoint_set_cond(&b, compile("tensor.nan_count > 0"));
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 0);
	tm_breakpoint_set_cond(&b, compile("tensor.nan_count == 0"));
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 1);
	CU_ASSERT_EQUAL(focus, 2);
	tm_breakpoint_clear(&b);

	/* :out.* any output; a slot the event lacks never fires */
	tm_breakpoint_init(&b, "model.fc1:out.*", NULL, NULL);
	tm_breakpoint_bind(&b, nodes);
	tm_breakpoint_set_cond(&b, compile("tensor.nan_count > 0"));
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 1);
	CU_ASSERT_EQUAL(focus, 1);
	tm_breakpoint_clear(&b);
	tm_breakpoint_init(&b, "model.fc1:out.5", NULL, NULL);
	tm_breakpoint_bind(&b, nodes);
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 0);
	tm_breakpoint_clear(&b);
	tm_nodetab_free(nodes);
}

static void test_level0_and_unknown(void)
{
	struct tm_breakpoint b;
	struct tm_tensor t;
	struct tm_event ev;
	uint32_t focus;

	setup_nodes();
	/* a level-0 event has no tensor: the condition runs once without */
	event(&ev, TM_EV_EXIT, 1, 1, NULL, 0);
	tm_breakpoint_init(&b, "model.fc1", NULL, NULL);
	tm_breakpoint_bind(&b, nodes);
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 1);
	CU_ASSERT_EQUAL(focus, UINT32_MAX);
	tm_breakpoint_set_cond(&b, compile("tensor.nan_count > 0"));
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), -1);
	CU_ASSERT_EQUAL(b.unknown, 1);
	/* a stat the event's level did not capture is unknown too */
	tensor(&t, TM_SLOT_OUT, 0, 0);
	t.have = 0;
	event(&ev, TM_EV_EXIT, 1, 1, &t, 1);
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), -1);
	CU_ASSERT_EQUAL(b.unknown, 2);
	tm_breakpoint_clear(&b);
	tm_nodetab_free(nodes);
}

static void test_grows_with_nodes(void)
{
	struct tm_breakpoint b;
	struct tm_tensor t;
	struct tm_event ev;
	uint32_t focus, id;

	setup_nodes();
	/* pending: the pattern matches nothing yet */
	tm_breakpoint_init(&b, "model.layers.*", NULL, NULL);
	tm_breakpoint_bind(&b, nodes);
	CU_ASSERT_EQUAL(b.nmatch, 0);
	id = add_node("model.layers", TM_NODE_MODULE, 0, 1);
	id = add_node("model.layers.0", TM_NODE_MODULE, id, 2);
	tensor(&t, TM_SLOT_OUT, 0, 0);
	event(&ev, TM_EV_EXIT, id, 1, &t, 1);
	/* the event names a node past the bound table: bound again */
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 1);
	CU_ASSERT_EQUAL(b.nmatch, 1);
	CU_ASSERT_EQUAL(b.nkinds, 6);
	tm_breakpoint_clear(&b);
	tm_nodetab_free(nodes);
}

static void test_every_node_and_kind(void)
{
	struct tm_breakpoint b;
	struct tm_tensor t;
	struct tm_event ev;
	uint32_t focus;

	setup_nodes();
	tensor(&t, TM_SLOT_IN, 0, 1);
	event(&ev, TM_EV_ENTER, 3, 1, &t, 1);
	tm_breakpoint_init_every(&b);
	tm_breakpoint_set_cond(&b, compile("tensor.nan_count > 0"));
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 1);
	tm_breakpoint_clear(&b);

	/* find ... in PATTERN: every kind of the nodes, not only EXIT */
	tm_breakpoint_init(&b, "model.fc2", NULL, NULL);
	b.every_kind = 1;
	tm_breakpoint_bind(&b, nodes);
	CU_ASSERT_EQUAL(b.kinds[3], 0xf | (1u << TM_EV_RAISE));
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 1);
	tm_breakpoint_clear(&b);

	/* "": every node (a catchpoint), its condition choosing the events */
	CU_ASSERT_EQUAL(tm_breakpoint_init(&b, "", NULL, NULL), TM_OK);
	CU_ASSERT(b.every_node);
	tm_breakpoint_set_cond(&b, compile("event == \"raise\""));
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 0);
	event(&ev, TM_EV_RAISE, 3, 1, NULL, 0);
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 1);
	tm_breakpoint_clear(&b);
	tm_nodetab_free(nodes);
}

static void test_portable(void)
{
	const char *why = NULL;
	tm_tql_prog *p;

	setup_nodes();
	CU_ASSERT(tm_breakpoint_cond_portable(NULL, &why));
	CU_ASSERT_PTR_NULL(why);
	p = compile("tensor.nan_count > 0 && step > 3");
	CU_ASSERT(tm_breakpoint_cond_portable(p, &why));
	tm_tql_free(p);
	p = compile("model.fc1:out.nan_count > 0");
	CU_ASSERT(!tm_breakpoint_cond_portable(p, &why));
	CU_ASSERT_PTR_NOT_NULL(why);
	CU_ASSERT_PTR_NOT_NULL(why ? strstr(why, "addressed") : NULL);
	tm_tql_free(p);
	/* $variables are the debugger's: never dropped, refused by name */
	p = compile("tensor.nan_count > $limit");
	CU_ASSERT(tm_tql_uses_variables(p));
	CU_ASSERT(!tm_breakpoint_cond_portable(p, &why));
	CU_ASSERT_PTR_NOT_NULL(why ? strstr(why, "$variables") : NULL);
	tm_tql_free(p);
	/* a '$' inside a string is not a variable */
	p = compile("node.path == \"a$b\"");
	CU_ASSERT(!tm_tql_uses_variables(p));
	CU_ASSERT(tm_breakpoint_cond_portable(p, NULL));
	tm_tql_free(p);
	tm_nodetab_free(nodes);
}

/* The history of prev()/delta() belongs to the condition and is reset. */
static void test_history_reset(void)
{
	struct tm_breakpoint b;
	struct tm_tensor t;
	struct tm_event ev;
	uint32_t focus;

	setup_nodes();
	tm_breakpoint_init(&b, "model.fc1", NULL, NULL);
	tm_breakpoint_bind(&b, nodes);
	tm_breakpoint_set_cond(&b, compile("delta(tensor.nan_count) > 0"));
	tensor(&t, TM_SLOT_OUT, 0, 1);
	event(&ev, TM_EV_EXIT, 1, 1, &t, 1);
	CU_ASSERT(match(&b, &ev, &focus) != 1);     /* no previous value */
	t.stat[TM_STAT_NAN_COUNT] = 2;
	CU_ASSERT_EQUAL(match(&b, &ev, &focus), 1);
	tm_breakpoint_reset(&b);
	t.stat[TM_STAT_NAN_COUNT] = 3;
	CU_ASSERT(match(&b, &ev, &focus) != 1);     /* forgotten */
	tm_breakpoint_clear(&b);
	tm_breakpoint_clear(&b);                    /* twice is harmless */
	tm_nodetab_free(nodes);
}

int main(void)
{
	static const struct tm_test_case cases[] = {
		TM_TEST(test_bind_module_and_param),
		TM_TEST(test_malformed),
		TM_TEST(test_match_kind_and_call),
		TM_TEST(test_condition_over_slots),
		TM_TEST(test_level0_and_unknown),
		TM_TEST(test_grows_with_nodes),
		TM_TEST(test_every_node_and_kind),
		TM_TEST(test_portable),
		TM_TEST(test_history_reset),
		{ NULL, NULL }
	};

	return tm_test_run("breakpoint", cases);
}
