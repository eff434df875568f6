/*
 * mktrace.c -- writes deterministic synthetic .tmrun traces with the library
 * writer, for tmdb's transcript tests, the bundled example
 * (examples/divergence.tmrun) and the performance checks.
 *
 * The trace pretends to be a recording of the toy transformer in model.py
 * (shipped next to this file): model -> embed, layers.0..L-1 (attn, mlp
 * (fc1, act, fc2), norm), head, with their parameters.  Each step has the
 * forward ENTER/EXIT events with level-2 stats (model.head at level 1), one
 * backward event per module, and one PARAM event per parameter.  In step
 * --gap-step the events of model.layers.1 are dropped (a BACKPRESSURE gap);
 * at step --nan-step a NaN first appears in model.layers.2.mlp.fc2:out and
 * then spreads through the rest of the forward pass, the gradients, and from
 * the next step on, everything.
 *
 *   mktrace -o FILE [--steps N | --events N] [--layers N] [--nan-step S|-1]
 *           [--gap-step S|-1] [--source PATH] [--abandon] [--truncate BYTES]
 *           [--chunk-bytes N] [--level 0|1|2] [--crash-step S]
 *           [--payload ADDRESS] [--payload-inf S] [--payload-dim N]
 *           [--split-params] [--no-finite-stats] [--requests N] [--ops]
 *           [--raise-step S]
 *
 * --raise-step S: at step S model.layers.1.mlp.act raises (a RAISE event,
 * after the "exception" annotation FloatingPointError / "overflow
 * encountered in gelu"), and so do mlp, layers.1 and model as the
 * exception leaves them; the script catches it and skips the step (no
 * backward, no parameter events), then goes on.
 * --no-finite-stats leaves min, max, mean, abs_max, l2, std and the
 * histogram out of a tensor whose every element is NaN, as the library's
 * stats (and so a real recording) do; by default they are made up.
 *
 * --ops records op events (TM_EV_OP) inside each model.layers.N.attn call:
 * five op sites (mm, bmm, div, softmax, bmm at model.py lines 15-17).
 * --requests N annotates each step as a serving probe does: step S served
 * requests cmpl-S .. cmpl-(S+N-1) (TQL `request`).
 *
 * --batched N and --one-request N serve N requests req-0 .. req-(N-1),
 * --steps forwards each, without backward (inference, the vllm probe):
 * --batched all of them in every step, each forward tensor followed by
 * each request's rows (out[rJ], as the serving probe records them);
 * --one-request each alone, req-0's forwards first (an HF reference).
 * Request J's k-th forward has the same stats in both: its rows in one,
 * the whole tensor in the other.  --drift K (with --batched): from
 * forward K on, the last request's rows of model.layers.1.mlp.act:out
 * have a mean 0.01 higher.
 *
 * --split-params writes each parameter's data and grad as two PARAM
 * events (grad first, as the PyTorch probe's gradient hook fires before
 * and an addressed term must find either), instead of one with both.
 *
 * --payload gives the forward output of one module its full contents, as
 * a level-3 capture does (for heatmap and x): a smooth pattern of rows and
 * columns, with the NaNs the stats count spread evenly through it.  With
 * --payload-inf S, at step S its elements 1 and 2 are +Inf and -Inf;
 * --payload-dim N makes that output an N x N matrix (the render timing
 * uses 512).
 *
 * For the performance check of a false-condition continue over 10M events:
 *   mktrace -o big.tmrun --events 10000000 --nan-step -1 --level 1
 *   tmdb -batch -ex 'break model.** if tensor.nan_count > 1e9' -ex run big.tmrun
 *
 * Everything, including timestamps, is a function of the options, so the
 * same options give the same events.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensormorph.h"

#define MAX_NODES 4096
#define BATCH 4
#define SEQLEN 32
#define DIM 64
#define VOCAB 100

struct opts {
	const char *out;
	const char *source;
	uint64_t steps;
	uint64_t events;
	int layers;
	long nan_step;
	long gap_step;
	int abandon;
	long truncate;
	long chunk_bytes;
	int level;              /* highest probe level recorded (default 2) */
	long crash_step;        /* SIGSEGV inside model.layers.3.attn, then stop */
	long requests;          /* per step: a "request" annotation of this many */
	const char *payload;    /* node whose forward output carries contents */
	long payload_inf;
	long payload_dim;
	int split_params;       /* data and grad in separate PARAM events */
	int no_finite_stats;    /* all-NaN tensors lack the finite stats */
	long rank, world;       /* one rank of a distributed job (-1, 0: not) */
	int ops;                /* op events inside each attention's forward */
	long raise_step;        /* model.layers.1.mlp.act raises, then its callers */
	long batched;           /* N requests in each step, with their rows */
	long one_request;       /* N requests one a step */
	long drift;             /* --batched: the last request drifts from here */
	long per_request;       /* forwards a request (--steps) */
};

/* What mktrace knows about each node beyond the table entry. */
struct info {
	int kind;               /* tm_node_kind */
	int64_t shape[4];       /* output (or parameter) shape */
	int rank;
	int64_t in_shape[4];
	int in_rank;
	int in_dtype;
	int level;
	int is_norm;            /* LayerNorm: a NaN poisons its whole row */
	uint32_t op_first;      /* --ops: its first op site, nops of them */
	int nops;
};

struct gen {
	struct opts o;
	tm_writer *w;
	struct info info[MAX_NODES];
	uint32_t nnodes;
	/* module ids in forward order, for the backward pass */
	uint32_t exit_order[MAX_NODES];
	uint32_t nexit;
	uint32_t fc2_l2;        /* where the NaN first appears */
	uint32_t layer1;        /* dropped in the gap step */
	uint64_t seq;
	uint64_t step;
	double nan_now;         /* NaNs flowing through this step's forward */
	uint32_t crash_node;    /* model.layers.3.attn (or the last layer's) */
	uint32_t payload_node;  /* --payload, or TM_NODE_NONE */
	uint32_t raise_node;    /* model.layers.1.mlp.act */
	int raising;            /* an exception is leaving the forward */
	int crashed;
	int dropping;
	uint64_t drop_first, drop_count;
	uint64_t nevents;
};

/* ------------------------------------------------------------- node table */

static uint32_t add_node(struct gen *g, uint32_t parent, const char *addr,
			 const char *type, int kind, unsigned line, int rank,
			 const int64_t *shape)
{
	struct tm_node n;
	uint32_t id;
	int err, i;

	memset(&n, 0, sizeof(n));
	n.parent = parent;
	/* depth = number of dots */
	n.depth = 0;
	for (i = 0; addr[i]; i++)
		n.depth += addr[i] == '.';
	n.kind = (uint8_t)kind;
	n.address = addr;
	n.type = type;
	n.file = line ? g->o.source : NULL;
	n.line = line;
	err = tm_writer_node(g->w, &n, &id);
	if (err != TM_OK) {
		fprintf(stderr, "mktrace: node %s: %s\n", addr, tm_strerror(err));
		exit(1);
	}
	if (id >= MAX_NODES) {
		fprintf(stderr, "mktrace: too many nodes\n");
		exit(1);
	}
	g->info[id].kind = kind;
	g->info[id].rank = rank;
	for (i = 0; i < rank; i++)
		g->info[id].shape[i] = shape[i];
	g->info[id].level = g->o.level < 2 ? g->o.level : 2;
	g->info[id].in_dtype = TM_DT_F32;
	g->nnodes = id + 1;
	if (g->o.payload && !strcmp(addr, g->o.payload))
		g->payload_node = id;
	return id;
}

static void set_input(struct gen *g, uint32_t id, int rank, const int64_t *shape,
		      int dtype)
{
	int i;

	g->info[id].in_rank = rank;
	for (i = 0; i < rank; i++)
		g->info[id].in_shape[i] = shape[i];
	g->info[id].in_dtype = dtype;
}

/* --ops: the operations of an attention's forward (model.py lines 15-17),
 * as the PyTorch probe records them: op sites, children of the module. */
static const struct {
	const char *seg, *name;
	unsigned line;
} attn_ops[] = {
	{ "op_mm_15", "aten::mm", 15 },
	{ "op_bmm_16", "aten::bmm", 16 },
	{ "op_div_Tensor_16", "aten::div.Tensor", 16 },
	{ "op__softmax_17", "aten::_softmax", 17 },
	{ "op_bmm_17", "aten::bmm", 17 },
};

static uint32_t add_node(struct gen *g, uint32_t parent, const char *addr,
			 const char *type, int kind, unsigned line, int rank,
			 const int64_t *shape);

static void add_op_sites(struct gen *g, uint32_t attn, const char *layer)
{
	static const int64_t shape[] = { BATCH, SEQLEN, SEQLEN };
	char b[256];
	size_t k;
	uint32_t id;

	for (k = 0; k < sizeof(attn_ops) / sizeof(attn_ops[0]); k++) {
		snprintf(b, sizeof(b), "%s.attn.%s", layer, attn_ops[k].seg);
		id = add_node(g, attn, b, attn_ops[k].name, TM_NODE_OP, attn_ops[k].line, 3,
			      shape);
		if (!k)
			g->info[attn].op_first = id;
	}
	g->info[attn].nops = (int)k;
}

/* Model structure, in forward call order (so ids follow named_modules()). */
struct mod {
	uint32_t id;
	int nkids;
	struct mod *kids[104];   /* embed, up to 100 layers, head */
};

static struct mod mods[MAX_NODES];
static int nmods;

static struct mod *new_mod(uint32_t id)
{
	struct mod *m = &mods[nmods++];

	m->id = id;
	m->nkids = 0;
	return m;
}

static void kid(struct mod *p, struct mod *k)
{
	p->kids[p->nkids++] = k;
}

static struct mod *build_model(struct gen *g)
{
	static const int64_t x[] = { BATCH, SEQLEN, DIM };
	static const int64_t h[] = { BATCH, SEQLEN, 4 * DIM };
	static const int64_t logits[] = { BATCH, SEQLEN, VOCAB };
	static const int64_t tok[] = { BATCH, SEQLEN };
	static const int64_t emb_w[] = { VOCAB, DIM };
	static const int64_t qkv_w[] = { 3 * DIM, DIM };
	static const int64_t fc1_w[] = { 4 * DIM, DIM };
	static const int64_t fc1_b[] = { 4 * DIM };
	static const int64_t fc2_w[] = { DIM, 4 * DIM };
	static const int64_t vec[] = { DIM };
	char a[64], b[256];
	struct mod *root, *layer, *mlp;
	uint32_t model, embed, layers, id, lid, mid;
	int l;

	model = add_node(g, TM_NODE_NONE, "model", "Model", TM_NODE_MODULE, 73, 3, logits);
	set_input(g, model, 2, tok, TM_DT_I64);
	root = new_mod(model);
	embed = add_node(g, model, "model.embed", "Embedding", TM_NODE_MODULE, 62, 3, x);
	set_input(g, embed, 2, tok, TM_DT_I64);
	add_node(g, embed, "model.embed.weight", "Parameter", TM_NODE_PARAM, 0, 2, emb_w);
	kid(root, new_mod(embed));
	layers = add_node(g, model, "model.layers", "ModuleList", TM_NODE_MODULE, 0, 0, NULL);
	for (l = 0; l < g->o.layers; l++) {
		snprintf(a, sizeof(a), "model.layers.%d", l);
		lid = add_node(g, layers, a, "Block", TM_NODE_MODULE, 40, 3, x);
		set_input(g, lid, 3, x, TM_DT_F32);
		layer = new_mod(lid);
		kid(root, layer);
		if (l == 1)
			g->layer1 = lid;

		snprintf(b, sizeof(b), "%s.attn", a);
		id = add_node(g, lid, b, "Attention", TM_NODE_MODULE, 14, 3, x);
		if (l <= 3)
			g->crash_node = id;
		set_input(g, id, 3, x, TM_DT_F32);
		kid(layer, new_mod(id));
		snprintf(b, sizeof(b), "%s.attn.in_proj_weight", a);
		add_node(g, id, b, "Parameter", TM_NODE_PARAM, 0, 2, qkv_w);
		if (g->o.ops)
			add_op_sites(g, id, a);

		snprintf(b, sizeof(b), "%s.mlp", a);
		mid = add_node(g, lid, b, "MLP", TM_NODE_MODULE, 27, 3, x);
		set_input(g, mid, 3, x, TM_DT_F32);
		mlp = new_mod(mid);
		kid(layer, mlp);

		snprintf(b, sizeof(b), "%s.mlp.fc1", a);
		id = add_node(g, mid, b, "Linear", TM_NODE_MODULE, 47, 3, h);
		set_input(g, id, 3, x, TM_DT_F32);
		kid(mlp, new_mod(id));
		snprintf(b, sizeof(b), "%s.mlp.fc1.weight", a);
		add_node(g, id, b, "Parameter", TM_NODE_PARAM, 0, 2, fc1_w);
		snprintf(b, sizeof(b), "%s.mlp.fc1.bias", a);
		add_node(g, id, b, "Parameter", TM_NODE_PARAM, 0, 1, fc1_b);

		snprintf(b, sizeof(b), "%s.mlp.act", a);
		id = add_node(g, mid, b, "GELU", TM_NODE_MODULE, 52, 3, h);
		if (l == 1)
			g->raise_node = id;
		set_input(g, id, 3, h, TM_DT_F32);
		kid(mlp, new_mod(id));

		snprintf(b, sizeof(b), "%s.mlp.fc2", a);
		id = add_node(g, mid, b, "Linear", TM_NODE_MODULE, 47, 3, x);
		set_input(g, id, 3, h, TM_DT_F32);
		kid(mlp, new_mod(id));
		if (l == 2)
			g->fc2_l2 = id;
		snprintf(b, sizeof(b), "%s.mlp.fc2.weight", a);
		add_node(g, id, b, "Parameter", TM_NODE_PARAM, 0, 2, fc2_w);
		snprintf(b, sizeof(b), "%s.mlp.fc2.bias", a);
		add_node(g, id, b, "Parameter", TM_NODE_PARAM, 0, 1, vec);

		snprintf(b, sizeof(b), "%s.norm", a);
		id = add_node(g, lid, b, "LayerNorm", TM_NODE_MODULE, 57, 3, x);
		set_input(g, id, 3, x, TM_DT_F32);
		g->info[id].is_norm = 1;
		kid(layer, new_mod(id));
		snprintf(b, sizeof(b), "%s.norm.weight", a);
		add_node(g, id, b, "Parameter", TM_NODE_PARAM, 0, 1, vec);
		snprintf(b, sizeof(b), "%s.norm.bias", a);
		add_node(g, id, b, "Parameter", TM_NODE_PARAM, 0, 1, vec);
	}
	id = add_node(g, model, "model.head", "Linear", TM_NODE_MODULE, 47, 3, logits);
	set_input(g, id, 3, x, TM_DT_F32);
	g->info[id].level = g->o.level < 1 ? g->o.level : 1;
	kid(root, new_mod(id));
	add_node(g, id, "model.head.weight", "Parameter", TM_NODE_PARAM, 0, 2, emb_w);
	if (g->o.layers < 3)
		g->fc2_l2 = TM_NODE_NONE;
	if (g->o.layers < 2)
		g->layer1 = TM_NODE_NONE;
	return root;
}

/* ------------------------------------------------------------- stats */

/* A small deterministic hash to vary the numbers. */
static double wobble(uint32_t node, uint64_t step, int salt)
{
	uint64_t x = (uint64_t)node * 0x9E3779B97F4A7C15ull ^
		     (step + 1) * 0xC2B2AE3D27D4EB4Full ^ (uint64_t)salt * 0x165667B19E3779F9ull;

	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 32;
	return (double)(x % 10000) / 10000.0;   /* [0, 1) */
}

/* Six significant digits, so that printed values read cleanly. */
static double r6(double x)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%.6g", x);
	return strtod(buf, NULL);
}

static void fill_tensor(struct tm_tensor *t, int kind, int index, int dtype,
			int rank, const int64_t *shape, int level,
			double mean, double std, double nan)
{
	double numel = 1, lo, hi, finite;
	int i;

	memset(t, 0, sizeof(*t));
	t->slot.kind = (uint8_t)kind;
	t->slot.index = (uint16_t)index;
	t->dtype = (uint8_t)dtype;
	t->rank = (uint8_t)rank;
	t->device_type = 1;
	for (i = 0; i < rank; i++) {
		t->shape[i] = shape[i];
		numel *= (double)shape[i];
	}
	if (level < 1)
		return;
	if (nan > numel)
		nan = numel;
	finite = numel - nan;
	if (dtype == TM_DT_I64) {
		mean = (VOCAB - 1) / 2.0;
		std = 28.0;
		lo = 0;
		hi = VOCAB - 1;
	} else {
		lo = mean - 3 * std;
		hi = mean + 3 * std;
	}
	t->stat[TM_STAT_NUMEL] = numel;
	t->stat[TM_STAT_NAN_COUNT] = nan;
	t->stat[TM_STAT_INF_COUNT] = 0;
	t->stat[TM_STAT_POSINF_COUNT] = 0;
	t->stat[TM_STAT_NEGINF_COUNT] = 0;
	mean = r6(mean);
	std = r6(std);
	lo = r6(lo);
	hi = r6(hi);
	t->stat[TM_STAT_MIN] = lo;
	t->stat[TM_STAT_MAX] = hi;
	t->stat[TM_STAT_MEAN] = mean;
	t->stat[TM_STAT_ABS_MAX] = fabs(lo) > fabs(hi) ? fabs(lo) : fabs(hi);
	t->stat[TM_STAT_L2] = r6(sqrt(finite * (std * std + mean * mean)));
	t->have = TM_STATS_L1_MASK;
	if (level < 2)
		return;
	t->stat[TM_STAT_STD] = std;
	t->stat[TM_STAT_ZERO_COUNT] = kind == TM_SLOT_OUT && dtype == TM_DT_I64 ? 4 : 0;
	t->have = TM_STATS_L2_MASK;
	t->have_hist = 1;
	t->hist_lo = lo;
	t->hist_hi = hi;
	{
		/* A bell over the 32 bins, adding up to the finite count. */
		double w[TM_HIST_BINS], sum = 0, acc = 0;

		for (i = 0; i < TM_HIST_BINS; i++) {
			double z = (i + 0.5 - TM_HIST_BINS / 2.0) / (TM_HIST_BINS / 6.0);

			w[i] = exp(-z * z / 2);
			sum += w[i];
		}
		for (i = 0; i < TM_HIST_BINS; i++) {
			t->hist[i] = (uint32_t)(finite * w[i] / sum);
			acc += t->hist[i];
		}
		t->hist[TM_HIST_BINS / 2] += (uint32_t)(finite - acc);
	}
}

static double numel_of(int rank, const int64_t *shape)
{
	double n = 1;
	int i;

	for (i = 0; i < rank; i++)
		n *= (double)shape[i];
	return n;
}

/* ------------------------------------------------------------- events */

static void emit(struct gen *g, struct tm_event *e)
{
	int err;

	e->seq = g->seq++;
	e->step = g->step;
	if (g->o.no_finite_stats) {
		uint32_t i;

		for (i = 0; i < e->ntensors; i++) {
			struct tm_tensor *t = &e->tensors[i];

			if (!(t->have & TM_STAT_BIT(TM_STAT_NAN_COUNT)) ||
			    t->stat[TM_STAT_NAN_COUNT] < t->stat[TM_STAT_NUMEL])
				continue;
			t->have &= ~(uint32_t)(TM_STAT_BIT(TM_STAT_MIN) |
				TM_STAT_BIT(TM_STAT_MAX) | TM_STAT_BIT(TM_STAT_MEAN) |
				TM_STAT_BIT(TM_STAT_ABS_MAX) | TM_STAT_BIT(TM_STAT_L2) |
				TM_STAT_BIT(TM_STAT_STD));
			t->have_hist = 0;
		}
	}
	if (g->dropping) {
		if (!g->drop_count)
			g->drop_first = e->seq;
		g->drop_count++;
		return;
	}
	err = tm_writer_event(g->w, e);
	if (err != TM_OK) {
		fprintf(stderr, "mktrace: event %llu: %s (%s)\n",
			(unsigned long long)e->seq, tm_strerror(err),
			tm_writer_detail(g->w));
		exit(1);
	}
	g->nevents++;
}

static uint64_t time_of(uint64_t seq)
{
	return 1000000 + seq * 1000;
}

static int after_nan(struct gen *g)
{
	return g->o.nan_step >= 0 && (long)g->step > g->o.nan_step;
}

/*
 * Full contents for a level-3 capture: row r, column c of each matrix is
 * mean + std * sin(0.4 r) * cos(0.15 c), nan elements spread evenly.
 */
static void add_payload(struct gen *g, struct tm_event *e, struct tm_tensor *t,
			double nan)
{
	uint64_t n = (uint64_t)numel_of(t->rank, t->shape), i, every;
	int64_t cols = t->rank ? t->shape[t->rank - 1] : 1;
	int64_t rows = t->rank > 1 ? t->shape[t->rank - 2] : 1;
	double mean = t->stat[TM_STAT_MEAN], std = t->stat[TM_STAT_STD];
	float *f = malloc(n * sizeof(float));

	if (!f) {
		fprintf(stderr, "mktrace: out of memory\n");
		exit(1);
	}
	if (!(t->have & TM_STAT_BIT(TM_STAT_STD)))
		std = 1;
	for (i = 0; i < n; i++) {
		int64_t c = (int64_t)(i % (uint64_t)cols);
		int64_t r = (int64_t)(i / (uint64_t)cols % (uint64_t)rows);

		f[i] = (float)(mean + std * sin(0.4 * (double)r) * cos(0.15 * (double)c));
	}
	every = nan >= 1 ? (uint64_t)((double)n / nan) : 0;
	for (i = 0; every && i < (uint64_t)nan && i * every < n; i++)
		f[i * every] = NAN;
	if ((long)g->step == g->o.payload_inf && n > 2) {
		f[1] = INFINITY;
		f[2] = -INFINITY;
		t->stat[TM_STAT_INF_COUNT] = 2;
		t->stat[TM_STAT_POSINF_COUNT] = 1;
		t->stat[TM_STAT_NEGINF_COUNT] = 1;
	}
	t->payload = f;
	t->payload_len = n * sizeof(float);
	e->level = 3;
}

/* The forward pass of one module call, recursively. */
/* --batched / --one-request: how many requests, and the one being served
 * alone (--one-request) and its forward. */
static long serving(const struct gen *g)
{
	return g->o.batched > 0 ? g->o.batched : g->o.one_request;
}

/* An annotation of the step at the next seq: n of key's count values. */
static void put_annot(struct gen *g, const char *key, const char *const *vals, long n,
		      long count)
{
	struct tm_annot a;

	memset(&a, 0, sizeof(a));
	a.seq = g->seq;
	a.step = g->step;
	a.time_ns = time_of(g->seq);
	a.key = key;
	a.values = vals;
	a.nvalues = (uint32_t)n;
	a.count = (uint32_t)count;
	if (tm_writer_annot(g->w, &a) != TM_OK) {
		fprintf(stderr, "mktrace: annotation: %s\n", tm_writer_detail(g->w));
		exit(1);
	}
}

/*
 * A forward tensor as the serving modes write it, into ts (1 + N tensors
 * at most): --one-request the request's own stats, --batched the batch's
 * and each request's rows.  Returns how many.
 */
static uint32_t serve_tensors(struct gen *g, struct tm_tensor *ts, uint32_t node, int kind,
			      int dtype, int rank, const int64_t *shape, int level, int salt)
{
	int64_t row[4];
	long j, n = serving(g), k = (long)g->step, first = 0, last = n;
	uint32_t nt = 0;
	int i;

	for (i = 0; i < rank && i < 4; i++)
		row[i] = i ? shape[i] : 1;
	if (g->o.one_request > 0) {
		first = k / g->o.per_request;
		last = first + 1;
		k %= g->o.per_request;
	} else {
		fill_tensor(&ts[nt++], kind, 0, dtype, rank, shape, level,
			    0.02 * (wobble(node, g->step, salt) - 0.5),
			    0.8 + 0.4 * wobble(node, g->step, salt + 1), 0);
	}
	for (j = first; j < last; j++) {
		struct tm_tensor *t = &ts[nt++];
		uint64_t key = 1000 + (uint64_t)k * 64 + (uint64_t)j;
		double mean = 0.02 * (wobble(node, key, salt) - 0.5);

		if (g->o.batched > 0 && node == g->raise_node && kind == TM_SLOT_OUT &&
		    g->o.drift >= 0 && k >= g->o.drift && j == n - 1)
			mean += 0.01;
		fill_tensor(t, kind, 0, dtype, rank, row, level, mean,
			    0.8 + 0.4 * wobble(node, key, salt + 1), 0);
		if (g->o.batched > 0)
			t->slot = tm_slot_row_of(t->slot, (unsigned)j);
	}
	return nt;
}

static void forward(struct gen *g, struct mod *m)
{
	struct tm_tensor ts[1 + 64];
	struct info *in = &g->info[m->id];
	struct tm_tensor t;
	struct tm_event e;
	uint64_t start;
	double nan_in, nan_out, numel;
	int i, later = after_nan(g);
	int is_tokens = in->in_dtype == TM_DT_I64;

	numel = numel_of(in->in_rank, in->in_shape);
	nan_in = is_tokens ? 0 : later ? numel : g->nan_now;
	if (nan_in > numel)
		nan_in = numel;

	if (g->step == (uint64_t)g->o.gap_step && m->id == g->layer1 && g->o.gap_step >= 0)
		g->dropping = 1;

	memset(&e, 0, sizeof(e));
	e.phase = TM_PHASE_FWD;
	e.kind = TM_EV_ENTER;
	e.level = (uint8_t)in->level;
	e.node = m->id;
	e.call = 1;
	e.time_ns = time_of(g->seq);
	e.start_ns = e.time_ns;
	e.ntensors = 1;
	e.tensors = &t;
	fill_tensor(&t, TM_SLOT_IN, 0, in->in_dtype, in->in_rank, in->in_shape,
		    in->level, 0.01 * wobble(m->id, g->step, 1),
		    0.5 + wobble(m->id, g->step, 2), nan_in);
	if (serving(g)) {
		e.tensors = ts;
		e.ntensors = serve_tensors(g, ts, m->id, TM_SLOT_IN, in->in_dtype, in->in_rank,
					   in->in_shape, in->level, 1);
	}
	start = e.time_ns;
	emit(g, &e);

	if (g->o.crash_step >= 0 && (long)g->step == g->o.crash_step &&
	    m->id == g->crash_node) {
		/* What the probe's fatal-signal handler records. */
		struct tm_crash c;

		memset(&c, 0, sizeof(c));
		c.seq = g->seq - 1;
		c.step = g->step;
		c.time_ns = time_of(g->seq);
		c.signo = 11;
		c.node = m->id;
		c.phase = TM_PHASE_FWD;
		c.nframes = 3;
		c.frames[0] = "0x7f3a1c2b4e10 at::native::softmax_kernel+0x1a0";
		c.frames[1] = "0x7f3a1c2b9a44 at::_ops::_softmax::call+0x64";
		c.frames[2] = "0x7f3a20010b2c _PyEval_EvalFrameDefault+0x6c";
		if (tm_writer_crash(g->w, &c) != TM_OK) {
			fprintf(stderr, "mktrace: crash: %s\n", tm_writer_detail(g->w));
			exit(1);
		}
		g->crashed = 1;
		return;
	}

	for (i = 0; i < in->nops; i++) {
		/* the attention's ops: finite until the NaN reaches every
		 * layer, then passing it on (their inputs were not finite) */
		uint32_t site = in->op_first + (uint32_t)i;
		struct info *oi = &g->info[site];
		double n = numel_of(oi->rank, oi->shape);

		memset(&e, 0, sizeof(e));
		e.phase = TM_PHASE_FWD;
		e.kind = TM_EV_OP;
		e.level = (uint8_t)in->level;
		e.node = site;
		e.call = 1;
		e.op_index = (uint32_t)i + 1;
		e.op_flags = later ? TM_OPF_INPUTS_CHECKED : 0;
		e.time_ns = time_of(g->seq);
		e.start_ns = e.time_ns - 200;
		e.end_ns = e.time_ns;
		e.ntensors = 1;
		e.tensors = &t;
		fill_tensor(&t, TM_SLOT_OUT, 0, TM_DT_F32, oi->rank, oi->shape, in->level,
			    0.1 * (wobble(site, g->step, 3) - 0.5),
			    1.0 + wobble(site, g->step, 4), later ? n : 0);
		emit(g, &e);
	}
	for (i = 0; i < m->nkids && !g->crashed && !g->raising; i++)
		forward(g, m->kids[i]);
	if (g->crashed)
		return;
	if (!g->raising && g->o.raise_step >= 0 && (long)g->step == g->o.raise_step &&
	    m->id == g->raise_node) {
		/* what the probe records for an exception: the annotation
		 * naming it, then a RAISE per call it leaves */
		static const char *const vals[2] = {
			"FloatingPointError", "overflow encountered in gelu"
		};

		put_annot(g, "exception", vals, 2, 2);
		g->raising = 1;
	}
	if (g->raising) {
		memset(&e, 0, sizeof(e));
		e.phase = TM_PHASE_FWD;
		e.kind = TM_EV_RAISE;
		e.level = (uint8_t)in->level;
		e.node = m->id;
		e.call = 1;
		e.time_ns = time_of(g->seq);
		e.start_ns = start;
		e.end_ns = e.time_ns;
		emit(g, &e);
		return;
	}

	numel = numel_of(in->rank, in->shape);
	if (g->nan_now && in->is_norm)
		g->nan_now = 12 * DIM;  /* 12 rows of 64 */
	if (later)
		nan_out = numel;
	else if (g->nan_now)
		nan_out = g->nan_now;
	else if (m->id == g->fc2_l2 && g->o.nan_step >= 0 &&
		 (long)g->step == g->o.nan_step) {
		nan_out = 12;
		g->nan_now = 12;
	} else {
		nan_out = 0;
	}
	if (nan_out > numel)
		nan_out = numel;

	memset(&e, 0, sizeof(e));
	e.phase = TM_PHASE_FWD;
	e.kind = TM_EV_EXIT;
	e.level = (uint8_t)in->level;
	e.node = m->id;
	e.call = 1;
	e.time_ns = time_of(g->seq);
	e.start_ns = start;
	e.end_ns = e.time_ns;
	e.ntensors = 1;
	e.tensors = &t;
	fill_tensor(&t, TM_SLOT_OUT, 0, TM_DT_F32, in->rank, in->shape, in->level,
		    0.02 * (wobble(m->id, g->step, 3) - 0.5),
		    0.8 + 0.4 * wobble(m->id, g->step, 4), nan_out);
	if (g->payload_node == m->id)
		add_payload(g, &e, &t, nan_out);
	if (serving(g)) {
		e.tensors = ts;
		e.ntensors = serve_tensors(g, ts, m->id, TM_SLOT_OUT, TM_DT_F32, in->rank,
					   in->shape, in->level, 3);
	}
	emit(g, &e);
	free((void *)t.payload);
	g->exit_order[g->nexit++] = m->id;

	if (g->dropping && m->id == g->layer1) {
		struct tm_gap gap;

		g->dropping = 0;
		memset(&gap, 0, sizeof(gap));
		gap.first_seq = g->drop_first;
		gap.last_seq = g->drop_first + g->drop_count - 1;
		gap.count = g->drop_count;
		gap.reason = TM_GAP_BACKPRESSURE;
		gap.time_ns = time_of(g->seq);
		gap.step = g->step;
		if (tm_writer_gap(g->w, &gap) != TM_OK) {
			fprintf(stderr, "mktrace: gap: %s\n", tm_writer_detail(g->w));
			exit(1);
		}
		g->drop_count = 0;
	}
}

static void backward(struct gen *g)
{
	struct tm_tensor t[2];
	struct tm_event e;
	uint32_t k;
	int nan = g->o.nan_step >= 0 && (long)g->step >= g->o.nan_step;

	for (k = g->nexit; k > 0; k--) {
		uint32_t id = g->exit_order[k - 1];
		struct info *in = &g->info[id];
		double numel = numel_of(in->rank, in->shape);

		memset(&e, 0, sizeof(e));
		e.phase = TM_PHASE_BWD;
		e.kind = TM_EV_BWD;
		e.level = (uint8_t)in->level;
		e.node = id;
		e.call = 1;
		e.time_ns = time_of(g->seq);
		e.start_ns = e.time_ns - 500;
		e.end_ns = e.time_ns;
		e.tensors = t;
		e.ntensors = in->level >= 2 ? 2 : 1;
		fill_tensor(&t[0], TM_SLOT_GRAD_OUT, 0, TM_DT_F32, in->rank, in->shape,
			    in->level, 1e-4 * (wobble(id, g->step, 5) - 0.5),
			    1e-3 * (1 + wobble(id, g->step, 6)), nan ? numel : 0);
		fill_tensor(&t[1], TM_SLOT_GRAD_IN, 0, in->in_dtype, in->in_rank,
			    in->in_shape, in->level,
			    1e-4 * (wobble(id, g->step, 7) - 0.5),
			    1e-3 * (1 + wobble(id, g->step, 8)),
			    nan && in->in_dtype != TM_DT_I64 ?
			    numel_of(in->in_rank, in->in_shape) : 0);
		emit(g, &e);
	}
}

static void params(struct gen *g)
{
	struct tm_tensor t[2];
	struct tm_event e;
	uint32_t id;
	int nan_grad = g->o.nan_step >= 0 && (long)g->step >= g->o.nan_step;
	int nan_data = after_nan(g);

	for (id = 0; id < g->nnodes; id++) {
		struct info *in = &g->info[id];
		double numel;

		if (in->kind != TM_NODE_PARAM)
			continue;
		numel = numel_of(in->rank, in->shape);
		memset(&e, 0, sizeof(e));
		e.phase = TM_PHASE_BWD;
		e.kind = TM_EV_PARAM;
		e.level = (uint8_t)in->level;
		e.node = id;
		e.call = 1;
		e.time_ns = time_of(g->seq);
		e.start_ns = e.time_ns;
		e.end_ns = e.time_ns;
		e.tensors = t;
		e.ntensors = 2;
		/* Weights drift a little every step, so watchpoints see changes. */
		fill_tensor(&t[0], TM_SLOT_DATA, 0, TM_DT_F32, in->rank, in->shape, in->level,
			    0.001 * wobble(id, 0, 9),
			    0.02 + 0.0001 * (double)g->step, nan_data ? numel : 0);
		fill_tensor(&t[1], TM_SLOT_GRAD, 0, TM_DT_F32, in->rank, in->shape, in->level,
			    1e-5 * (wobble(id, g->step, 10) - 0.5),
			    1e-4 * (1 + wobble(id, g->step, 11)), nan_grad ? numel : 0);
		if (g->o.split_params) {
			struct tm_tensor data = t[0];

			t[0] = t[1];
			e.ntensors = 1;
			emit(g, &e);
			t[0] = data;
			e.time_ns = time_of(g->seq);
			e.start_ns = e.time_ns;
			e.end_ns = e.time_ns;
		}
		emit(g, &e);
	}
}

/* --batched / --one-request: the step's requests, as the serving probe
 * (or the reference script) annotates them. */
static void annotate_served(struct gen *g)
{
	static char ids[64][24];
	const char *vals[64];
	long j, first = 0, n = serving(g);

	if (g->o.one_request > 0) {
		first = (long)g->step / g->o.per_request;
		n = 1;
	}
	for (j = 0; j < n; j++) {
		snprintf(ids[j], sizeof(ids[j]), "req-%ld", first + j);
		vals[j] = ids[j];
	}
	put_annot(g, "request", vals, n, n);
}

/*
 * --requests N: as a serving probe annotates each forward, step S serves
 * requests cmpl-S .. cmpl-(S+N-1), so request cmpl-K is in steps K-N+1..K.
 */
static void annotate_requests(struct gen *g)
{
	static char ids[64][24];
	const char *vals[64];
	long j, n = g->o.requests < 64 ? g->o.requests : 64;

	for (j = 0; j < n; j++) {
		snprintf(ids[j], sizeof(ids[j]), "cmpl-%llu",
			 (unsigned long long)g->step + (unsigned long long)j);
		vals[j] = ids[j];
	}
	put_annot(g, "request", vals, n, g->o.requests);
}

/* ------------------------------------------------------------- main */

static void usage(void)
{
	fprintf(stderr,
		"usage: mktrace -o FILE [--steps N | --events N] [--layers N]\n"
		"               [--nan-step S|-1] [--gap-step S|-1] [--source PATH]\n"
		"               [--abandon] [--truncate BYTES] [--chunk-bytes N]\n"
		"               [--level 0|1|2] [--crash-step S]\n"
		"               [--payload ADDRESS] [--payload-inf S] [--payload-dim N]\n"
		"               [--split-params] [--no-finite-stats]\n"
		"               [--rank R --world W] [--requests N] [--ops] [--raise-step S]\n"
		"               [--batched N [--drift K] | --one-request N]\n");
	exit(2);
}

static long num_arg(int argc, char **argv, int *i)
{
	char *end;
	long v;

	if (*i + 1 >= argc)
		usage();
	errno = 0;
	v = strtol(argv[++*i], &end, 10);
	if (errno || *end)
		usage();
	return v;
}

int main(int argc, char **argv)
{
	struct tm_writer_opts wo;
	struct tm_run_meta meta;
	struct gen *g;
	struct mod *root;
	uint64_t per_step;
	int i, err;

	g = calloc(1, sizeof(*g));
	if (!g)
		return 1;
	g->o.steps = 8;
	g->o.layers = 4;
	g->o.nan_step = 5;
	g->o.gap_step = 3;
	g->o.source = "model.py";
	g->o.level = 2;
	g->o.crash_step = -1;
	g->o.raise_step = -1;
	g->o.payload_inf = -1;
	g->o.rank = -1;
	g->o.drift = -1;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-o") && i + 1 < argc)
			g->o.out = argv[++i];
		else if (!strcmp(a, "--steps"))
			g->o.steps = (uint64_t)num_arg(argc, argv, &i);
		else if (!strcmp(a, "--events"))
			g->o.events = (uint64_t)num_arg(argc, argv, &i);
		else if (!strcmp(a, "--layers"))
			g->o.layers = (int)num_arg(argc, argv, &i);
		else if (!strcmp(a, "--nan-step"))
			g->o.nan_step = num_arg(argc, argv, &i);
		else if (!strcmp(a, "--gap-step"))
			g->o.gap_step = num_arg(argc, argv, &i);
		else if (!strcmp(a, "--source") && i + 1 < argc)
			g->o.source = argv[++i];
		else if (!strcmp(a, "--abandon"))
			g->o.abandon = 1;
		else if (!strcmp(a, "--truncate"))
			g->o.truncate = num_arg(argc, argv, &i);
		else if (!strcmp(a, "--raise-step"))
			g->o.raise_step = num_arg(argc, argv, &i);
		else if (!strcmp(a, "--crash-step"))
			g->o.crash_step = num_arg(argc, argv, &i);
		else if (!strcmp(a, "--level"))
			g->o.level = (int)num_arg(argc, argv, &i);
		else if (!strcmp(a, "--payload") && i + 1 < argc)
			g->o.payload = argv[++i];
		else if (!strcmp(a, "--ops"))
			g->o.ops = 1;
		else if (!strcmp(a, "--payload-inf"))
			g->o.payload_inf = num_arg(argc, argv, &i);
		else if (!strcmp(a, "--payload-dim"))
			g->o.payload_dim = num_arg(argc, argv, &i);
		else if (!strcmp(a, "--split-params"))
			g->o.split_params = 1;
		else if (!strcmp(a, "--no-finite-stats"))
			g->o.no_finite_stats = 1;
		else if (!strcmp(a, "--chunk-bytes"))
			g->o.chunk_bytes = num_arg(argc, argv, &i);
		else if (!strcmp(a, "--requests"))
			g->o.requests = num_arg(argc, argv, &i);
		else if (!strcmp(a, "--batched"))
			g->o.batched = num_arg(argc, argv, &i);
		else if (!strcmp(a, "--one-request"))
			g->o.one_request = num_arg(argc, argv, &i);
		else if (!strcmp(a, "--drift"))
			g->o.drift = num_arg(argc, argv, &i);
		else if (!strcmp(a, "--rank"))
			g->o.rank = num_arg(argc, argv, &i);
		else if (!strcmp(a, "--world"))
			g->o.world = num_arg(argc, argv, &i);
		else
			usage();
	}
	if (!g->o.out || g->o.layers < 1 || g->o.layers > 100 || g->o.level < 0 ||
	    g->o.level > 2 || g->o.batched < 0 || g->o.batched > 64 ||
	    g->o.one_request < 0 || g->o.one_request > 64 ||
	    (g->o.batched && g->o.one_request))
		usage();

	tm_writer_opts_default(&wo);
	wo.max_age_ns = UINT64_MAX / 2;     /* chunking by size only: deterministic */
	wo.flush_thread = 0;
	wo.chunk_bytes = g->o.chunk_bytes > 0 ? (size_t)g->o.chunk_bytes : 256 * 1024;
	err = tm_writer_open(g->o.out, &wo, &g->w);
	if (err != TM_OK) {
		fprintf(stderr, "mktrace: %s: %s\n", g->o.out, tm_strerror(err));
		return 1;
	}
	memset(&meta, 0, sizeof(meta));
	/* a serving probe's recording, and its reference a script's */
	meta.probe_kind = g->o.batched > 0 ? "vllm" : "synthetic";
	meta.default_level = (uint8_t)g->o.level;
	meta.torch_version = "2.5.1";
	meta.host = "mktrace";
	/* the ranks of a job start half an event apart: they interleave */
	meta.start_unix_ns = UINT64_C(1700000000000000000) +
			     (uint64_t)(g->o.rank > 0 ? g->o.rank : 0) * 500;
	meta.rank = (int32_t)g->o.rank;
	meta.world_size = (int32_t)g->o.world;
	meta.command = "python train.py --toy";
	if (tm_writer_meta(g->w, &meta) != TM_OK) {
		fprintf(stderr, "mktrace: meta: %s\n", tm_writer_detail(g->w));
		return 1;
	}
	g->payload_node = TM_NODE_NONE;
	root = build_model(g);
	if (g->o.payload) {
		if (g->payload_node == TM_NODE_NONE ||
		    g->info[g->payload_node].kind != TM_NODE_MODULE) {
			fprintf(stderr, "mktrace: --payload: no module %s\n", g->o.payload);
			return 1;
		}
		if (g->o.payload_dim > 0 && g->o.payload_dim <= 2048) {
			g->info[g->payload_node].rank = 2;
			g->info[g->payload_node].shape[0] = g->o.payload_dim;
			g->info[g->payload_node].shape[1] = g->o.payload_dim;
		}
	}

	/* Events per step: 2 per module call, 1 bwd per module call, 1 per param. */
	per_step = 0;
	for (i = 0; i < (int)g->nnodes; i++)
		per_step += g->info[i].kind == TM_NODE_PARAM ?
			    1 + (uint64_t)g->o.split_params : 0;
	per_step += 3 * (uint64_t)nmods;
	if (g->o.events)
		g->o.steps = (g->o.events + per_step - 1) / per_step;

	g->o.per_request = g->o.steps ? (long)g->o.steps : 1;
	if (g->o.one_request > 0)
		g->o.steps *= (uint64_t)g->o.one_request;
	for (g->step = 0; g->step < g->o.steps && !g->crashed; g->step++) {
		g->nan_now = 0;
		g->nexit = 0;
		if (g->o.requests > 0)
			annotate_requests(g);
		if (serving(g))
			annotate_served(g);
		forward(g, root);
		if (g->crashed)
			break;
		if (serving(g))
			continue;       /* inference: no backward */
		if (g->raising) {
			g->raising = 0;         /* caught: the step is skipped */
			continue;
		}
		backward(g);
		params(g);
	}
	if (g->o.abandon || g->crashed) {
		/* A crashed run's writer flushes but never writes the index. */
		tm_writer_flush(g->w);
		tm_writer_abandon(g->w);
	} else if ((err = tm_writer_close(g->w)) != TM_OK) {
		fprintf(stderr, "mktrace: close: %s\n", tm_strerror(err));
		return 1;
	}
	if (g->o.truncate > 0) {
		FILE *fp = fopen(g->o.out, "rb");
		long size;

		if (!fp || fseek(fp, 0, SEEK_END) || (size = ftell(fp)) < 0) {
			fprintf(stderr, "mktrace: %s: cannot size\n", g->o.out);
			return 1;
		}
		fclose(fp);
		if (truncate(g->o.out, size > g->o.truncate ? size - g->o.truncate : 0)) {
			fprintf(stderr, "mktrace: truncate: %s\n", strerror(errno));
			return 1;
		}
	}
	free(g);
	return 0;
}
