/*
 * cmd-compare.c -- a run beside a reference recording: `compare FILE
 * [-map RUN=REF ...]`, `info compare`, the TQL environment's reference
 * (ref.tensor.*, maxabsdiff(), ...), and the reference shown beside the
 * run by print and info stats.  Alignment is the library's (tm-compare.h).
 */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tmdb.h"

/*
 * A reference: one recording, or a distributed job's run manifest, whose
 * rank R is the reference of the run's rank R.
 */
struct tm_ref {
	tm_align **al;          /* by rank; one for a single recording */
	char **paths;
	int nal;
	int manifest;
	char *path;             /* as given */
	uint64_t nevents;       /* the reference's, from the summaries */
	int by_request;         /* steps aligned by request ids */
};

static void ref_free(struct tm_ref *ref)
{
	int i;

	if (!ref)
		return;
	for (i = 0; i < ref->nal; i++) {
		tm_align_free(ref->al[i]);
		free(ref->paths[i]);
	}
	free(ref->al);
	free(ref->paths);
	free(ref->path);
	free(ref);
}

void tm_compare_free(struct tm_session *s)
{
	ref_free(s->ref);
	s->ref = NULL;
}

/* The aligner for ev's rank (aligners by rank: al, n of them). */
static tm_align *rank_align(struct tm_session *s, tm_align **al, int n,
			    const struct tm_event *ev)
{
	int r;

	if (n == 1)
		return al[0];
	r = tm_event_rank(s, ev);
	return r >= 0 && r < n ? al[r] : NULL;
}

/* The run address the map sees: a multi-rank table's "@R:" set aside
 * (a reference's addresses are one process's; its rank is the aligner). */
static const char *run_address(struct tm_session *s, uint32_t node)
{
	const char *a = tm_node_name(s, node), *c;

	if (a[0] == '@' && (c = strchr(a, ':')) != NULL)
		return c + 1;
	return a;
}

const struct tm_tensor *tm_compare_reference(void *user, const struct tm_event *ev,
					     struct tm_slot slot, int contents,
					     const struct tm_event **ref_event,
					     uint32_t *reason)
{
	struct tm_session *s = user;
	const struct tm_event *rev = NULL;
	const struct tm_tensor *t;
	struct tm_slot rslot;
	tm_align *al;
	uint32_t why = 0;
	int rc;

	*ref_event = NULL;
	if (!s->ref) {
		*reason = TM_REF_NONE;
		return NULL;
	}
	if (!ev) {
		*reason = 0;
		return NULL;
	}
	al = rank_align(s, s->ref->al, s->ref->nal, ev);
	if (!al) {
		*reason = TM_REF_NONE;  /* the reference job has no such rank */
		return NULL;
	}
	rc = tm_align_tensor(al, run_address(s, ev->node), ev, slot, &rev, &rslot, &why);
	if (rc) {
		/* an unreadable reference step reads as damaged, not as zero */
		*reason = rc == TM_ERR_NOT_FOUND ? why : TM_GAP_DAMAGED;
		return NULL;
	}
	t = tm_event_tensor(rev, rslot);
	if (!t) {
		/* a request's rows the reference's batch did not record */
		*reason = tm_slot_is_row(rslot) ? TM_REF_BATCH : TM_REF_NO_EVENT;
		return NULL;
	}
	if (contents) {
		rc = tm_align_contents(al, rev, rslot, &t);
		if (rc) {
			*reason = rc == TM_ERR_NOT_FOUND ? TM_GAP_LEVEL : TM_GAP_DAMAGED;
			return NULL;
		}
	}
	*ref_event = rev;
	return t;
}

/* ------------------------------------------------------------- compare */

/* The run's request ids of step (ev tells the rank), for the aligner. */
static const struct tm_annot *run_requests(void *user, const struct tm_event *ev,
					   uint64_t step)
{
	struct tm_session *s = user;
	struct tm_event e = *ev;

	if (!s->probe || !s->probe->ops->annotation)
		return NULL;
	e.step = step;
	e.seq = UINT64_MAX;     /* the step's last word on it */
	return s->probe->ops->annotation(s->probe, &e, "request");
}

static int serving_kind(const char *k)
{
	return k && (!strcmp(k, "vllm") || !strcmp(k, "sglang"));
}

/* Whether one of the reference's first steps carries request ids. */
static int has_request_ids(tm_reader *ref)
{
	const struct tm_summary *sum = tm_reader_summary(ref);
	uint64_t st;

	if (!sum->nevents)
		return 0;
	for (st = sum->first_step; st <= sum->last_step && st - sum->first_step < 16; st++) {
		const struct tm_annot *an = NULL;

		if (tm_reader_annotation(ref, st, "request", &an) == TM_OK && an->nvalues)
			return 1;
	}
	return 0;
}

/*
 * -by request / -by step, or by default request ids when the run was
 * recorded by a serving plugin and the reference too, or the reference's
 * steps carry request ids.
 */
static int want_by_request(struct tm_session *s, int by, tm_reader *ref)
{
	struct tm_probe_info pi;
	const struct tm_run_meta *rm = tm_reader_meta(ref);

	if (by >= 0)
		return by;
	memset(&pi, 0, sizeof(pi));
	if (!s->probe)
		return 0;
	s->probe->ops->describe(s->probe, &pi);
	if (!pi.meta || !serving_kind(pi.meta->probe_kind) || !rm)
		return 0;
	if (serving_kind(rm->probe_kind))
		return 1;
	/* a reference run one request at a time (transformers under the
	 * PyTorch probe) that annotated its steps with their requests */
	return has_request_ids(ref);
}

static int align_setup(struct tm_session *s, tm_align *al, int by_request)
{
	return by_request ? tm_align_set_requests(al, run_requests, s) : TM_OK;
}

static void show_reference(struct tm_session *s)
{
	const tm_cmp_map *m;
	size_t i;

	if (!s->ref) {
		tm_out(s, "No reference loaded (compare FILE loads one).\n");
		return;
	}
	m = tm_align_map(s->ref->al[0]);
	if (s->ref->manifest)
		tm_out(s, "Reference: %s (%d ranks, %" PRIu64 " events).\n", s->ref->path,
		       s->ref->nal, s->ref->nevents);
	else
		tm_out(s, "Reference: %s (%" PRIu64 " events).\n", s->ref->path,
		       s->ref->nevents);
	for (i = 0; i < tm_cmp_map_count(m); i++)
		tm_out(s, "  map %s\n", tm_cmp_map_rule(m, i));
	if (s->ref->by_request)
		tm_out(s, "  steps aligned by request ids\n");
}

/* Splits args into words (quotes '' and "" group), at most cap. */
static int split_words(const char *args, char *buf, size_t len, char **w, int cap)
{
	const char *p = args;
	size_t o = 0;
	int n = 0;

	for (;;) {
		char q = 0;

		p = tm_skip_ws(p);
		if (!*p)
			return n;
		if (n == cap)
			return -1;
		w[n++] = buf + o;
		while (*p && (q || (*p != ' ' && *p != '\t'))) {
			if (!q && (*p == '\'' || *p == '"')) {
				q = *p++;
				continue;
			}
			if (q && *p == q) {
				q = 0;
				p++;
				continue;
			}
			if (o + 2 >= len)
				return -1;
			buf[o++] = *p++;
		}
		if (q)
			return -2;
		buf[o++] = 0;
	}
}

/* Opens a reader and an aligner for each path (by rank). */
static int ref_open_paths(struct tm_ref *ref, const char *const *paths, int n,
			  const tm_cmp_map *map, char **detail)
{
	int i, rc;

	ref->al = calloc((size_t)n, sizeof(*ref->al));
	ref->paths = calloc((size_t)n, sizeof(*ref->paths));
	if (!ref->al || !ref->paths)
		return TM_ERR_NOMEM;
	for (i = 0; i < n; i++) {
		tm_reader *r = NULL;

		ref->paths[i] = strdup(paths[i]);
		if (!ref->paths[i])
			return TM_ERR_NOMEM;
		rc = tm_reader_open(paths[i], 0, &r, detail);
		if (rc)
			return rc;
		rc = tm_align_new(r, map, &ref->al[i]);
		if (rc) {
			tm_reader_close(r);
			return rc;
		}
		ref->nal = i + 1;
		ref->nevents += tm_reader_summary(r)->nevents;
	}
	return TM_OK;
}

static int cmd_compare_exec(struct tm_session *s, const char *args, int from_tty)
{
	char buf[8192], *w[64], *detail = NULL, *err = NULL;
	const char *file = NULL;
	tm_cmp_map *map;
	tm_reader *r = NULL;
	struct tm_ref *ref;
	int n, i, rc, by = -1;

	(void)from_tty;
	n = split_words(args, buf, sizeof(buf), w, 64);
	if (n < 0) {
		tm_error(s, n == -2 ? "Unterminated quote." : "Too many words.");
		return -1;
	}
	if (n == 0) {
		show_reference(s);
		return 0;
	}
	if (n == 1 && !strcmp(w[0], "off")) {
		if (!s->ref) {
			tm_error(s, "No reference loaded.");
			return -1;
		}
		tm_out(s, "Reference %s unloaded.\n", s->ref->path);
		tm_compare_free(s);
		return 0;
	}
	map = tm_cmp_map_new();
	if (!map) {
		tm_error(s, "Out of memory.");
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (!strcmp(w[i], "-map") || !strcmp(w[i], "--map")) {
			if (i + 1 >= n) {
				tm_error(s, "-map needs a rule RUN=REF, e.g. "
					 "-map 'model.model.layers.*=model.blocks.*'.");
				goto fail;
			}
			if (tm_cmp_map_add(map, w[++i], &err)) {
				tm_error(s, "Bad %s.", err ? err : "map rule");
				free(err);
				goto fail;
			}
		} else if (!strcmp(w[i], "-by") || !strcmp(w[i], "--by")) {
			if (i + 1 >= n || (strcmp(w[i + 1], "step") &&
					   strcmp(w[i + 1], "request"))) {
				tm_error(s, "-by needs 'step' or 'request'.");
				goto fail;
			}
			by = !strcmp(w[++i], "request");
		} else if (w[i][0] == '-') {
			tm_error(s, "Unknown option '%s' (compare FILE [-map RUN=REF ...] "
				 "[-by step|request]).", w[i]);
			goto fail;
		} else if (file) {
			tm_error(s, "One reference at a time ('%s' and '%s').", file, w[i]);
			goto fail;
		} else {
			file = w[i];
		}
	}
	if (!file) {
		tm_error(s, "Argument required (the reference recording).");
		goto fail;
	}
	ref = calloc(1, sizeof(*ref));
	if (!ref || !(ref->path = strdup(file))) {
		free(ref);
		tm_error(s, "Out of memory.");
		goto fail;
	}
	/* a run manifest: a reference by rank */
	rc = tm_reader_open(file, 0, &r, &detail);
	if (rc == TM_ERR_BAD_MAGIC) {
		struct tm_manifest *mf = NULL;
		char *mdetail = NULL;

		if (tm_manifest_read(file, &mf, &mdetail) == TM_OK) {
			free(detail);
			detail = NULL;
			rc = ref_open_paths(ref, (const char *const *)mf->paths,
					    mf->world_size, map, &detail);
			ref->manifest = 1;
			tm_manifest_free(mf);
		}
		free(mdetail);
	} else if (rc == TM_OK) {
		const char *one = file;

		tm_reader_close(r);
		rc = ref_open_paths(ref, &one, 1, map, &detail);
	}
	if (!rc) {
		ref->by_request = want_by_request(s, by, tm_align_reader(ref->al[0]));
		for (i = 0; i < ref->nal && !rc; i++)
			rc = align_setup(s, ref->al[i], ref->by_request);
	}
	if (rc) {
		tm_error(s, "%s.", detail ? detail : tm_strerror(rc));
		free(detail);
		ref_free(ref);
		goto fail;
	}
	tm_cmp_map_free(map);
	tm_compare_free(s);
	s->ref = ref;
	/* conditions over ref. terms must not keep answers about the old one */
	tm_lookup_invalidate(s);
	show_reference(s);
	return 0;
fail:
	tm_cmp_map_free(map);
	return -1;
}

const struct cmd_entry cmd_compare_entry = {
	.name = "compare",
	.usage = "compare [FILE [-map RUN=REF ...] [-by step|request] | off]",
	.help = "Load a recording as the reference of this run (live or replayed).\n"
		"Each event of the run is aligned with the reference's event of the\n"
		"same address, call number, step and kind; -map RUN=REF renames\n"
		"addresses for trees named differently (\"*\" matches one segment,\n"
		"the rest of the address is kept; an empty REF leaves the address\n"
		"out): -map 'model.model.layers.*=model.blocks.*'.  Then TQL's\n"
		"ref.tensor.FIELD reads the aligned reference event (unknown, with\n"
		"the reason, where there is none), reldiff(a, b), maxabsdiff(),\n"
		"relerr() and cosine() measure the difference, print and info stats\n"
		"show the reference beside the run, and info compare summarises.\n"
		"-by request aligns steps by the serving plugins' request ids (a\n"
		"request's k-th forward with its k-th in the reference), the default\n"
		"when both recordings are a serving plugin's; -by step by number.\n"
		"With no argument: the reference loaded.  \"compare off\" unloads it.",
	.exec = cmd_compare_exec, .klass = "data",
};

/* ------------------------------------------------------------- info compare */

/* The stats compared, with the measure's name. */
static const int measured[] = {
	TM_STAT_MEAN, TM_STAT_STD, TM_STAT_ABS_MAX, TM_STAT_L2, TM_STAT_MIN,
	TM_STAT_MAX, TM_STAT_NAN_COUNT, TM_STAT_INF_COUNT,
};
#define NMEAS (sizeof(measured) / sizeof(measured[0]))

struct where {
	int have;
	uint64_t seq, step;
	uint32_t node, call;
	uint8_t kind;
	struct tm_slot slot;
	double run, ref, d;
};

struct node_miss {
	uint64_t n;
	uint32_t reason;
};

struct tally {
	struct tm_session *s;
	tm_reader *r;
	int rank;               /* of a reference job, else -1 */
	int last_known;         /* the reference has events ... */
	uint64_t last_step;     /* ... up to this step */
	uint64_t ref_unmatched;
	/* the reference's unaligned events, by its node id */
	uint64_t *ref_miss;
	uint32_t nref;
};

static void note(struct where *w, const struct tm_event *ev, const struct tm_tensor *t,
		 double run, double ref, double d)
{
	w->have = 1;
	w->seq = ev->seq;
	w->step = ev->step;
	w->node = ev->node;
	w->call = ev->call;
	w->kind = ev->kind;
	w->slot = t->slot;
	w->run = run;
	w->ref = ref;
	w->d = d;
}

static void ref_missed(void *user, const struct tm_event *rev)
{
	struct tally *ta = user;

	ta->ref_unmatched++;
	if (rev->node < ta->nref)
		ta->ref_miss[rev->node]++;
}

static void print_where(struct tm_session *s, const struct where *w, int integer)
{
	char sb[32], rn[32], rf[32], cs[16];

	tm_slot_format(w->slot, sb, sizeof(sb));
	if (integer) {
		snprintf(rn, sizeof(rn), "%.0f", w->run);
		snprintf(rf, sizeof(rf), "%.0f", w->ref);
	} else {
		snprintf(rn, sizeof(rn), "%.6g", w->run);
		snprintf(rf, sizeof(rf), "%.6g", w->ref);
	}
	cs[0] = 0;
	if (w->call > 1)
		snprintf(cs, sizeof(cs), "#%u", w->call);
	tm_out(s, "%s%s:%s step %" PRIu64 " seq %" PRIu64 " (run %s, ref %s)",
	       tm_node_name(s, w->node), cs, sb, w->step, w->seq, rn, rf);
}

/* "model.layers.*.mlp": an address with its numbered segments as "*",
 * so that what fails to align in every layer is one line. */
static void generalise(const char *a, char *buf, size_t len)
{
	size_t o = 0;

	while (*a && o + 2 < len) {
		const char *e = a + strcspn(a, ".");
		size_t k;

		for (k = 0; a + k < e && a[k] >= '0' && a[k] <= '9'; k++)
			;
		if (k && a + k == e) {
			buf[o++] = '*';
		} else {
			size_t n = (size_t)(e - a);

			if (o + n + 2 >= len)
				break;
			memcpy(buf + o, a, n);
			o += n;
		}
		a = e;
		if (*a == '.') {
			buf[o++] = '.';
			a++;
		}
	}
	buf[o] = 0;
}

struct group {
	char name[TM_ADDRESS_MAX + 1];
	char one[TM_ADDRESS_MAX + 16];  /* the address, while the group has one node */
	uint32_t reason;
	uint64_t nodes, events;
};

/* Lists what did not align, a line per generalised address and reason:
 * the run's (miss, by node) or the reference's (ta). */
static void print_groups(struct tm_session *s, const struct node_miss *miss, uint32_t nn,
			 const struct tally *tas, int ntas)
{
	struct group *g = NULL, *ng;
	size_t ng_n = 0, j;
	uint32_t i;
	int ref = tas != NULL, k;
	char name[TM_ADDRESS_MAX + 1], rs[128], addr[TM_ADDRESS_MAX + 16];

	for (k = 0; k < (ref ? ntas : 1); k++)
	for (i = 0; i < (ref ? tas[k].nref : nn); i++) {
		const struct tally *ta = ref ? &tas[k] : NULL;
		uint64_t c = ref ? ta->ref_miss[i] : miss[i].n;
		uint32_t why = ref ? 0 : miss[i].reason;

		if (!c)
			continue;
		if (ref && ta->rank >= 0)
			snprintf(addr, sizeof(addr), "@%d:%s", ta->rank,
				 tm_nodetab_get(tm_reader_nodes(ta->r), i)->address);
		else
			snprintf(addr, sizeof(addr), "%s", ref ?
				 tm_nodetab_get(tm_reader_nodes(ta->r), i)->address :
				 tm_node_name(s, i));
		generalise(addr, name, sizeof(name));
		for (j = 0; j < ng_n; j++)
			if (g[j].reason == why && !strcmp(g[j].name, name))
				break;
		if (j == ng_n) {
			ng = realloc(g, (ng_n + 1) * sizeof(*g));
			if (!ng)
				break;
			g = ng;
			memset(&g[j], 0, sizeof(g[j]));
			snprintf(g[j].name, sizeof(g[j].name), "%s", name);
			g[j].reason = why;
			snprintf(g[j].one, sizeof(g[j].one), "%s", addr);
			ng_n++;
		}
		g[j].nodes++;
		g[j].events += c;
	}
	for (j = 0; j < ng_n; j++) {
		char nodes[32] = "";

		if (g[j].nodes > 1)
			snprintf(nodes, sizeof(nodes), "%" PRIu64 " nodes, ", g[j].nodes);
		tm_out(s, "  %-40s %s%" PRIu64 " event%s",
		       g[j].nodes == 1 ? g[j].one : g[j].name, nodes, g[j].events,
		       g[j].events == 1 ? "" : "s");
		if (!ref) {
			tm_tql_reason_format(g[j].reason, rs, sizeof(rs));
			tm_out(s, ": %s", rs);
		}
		tm_out(s, "\n");
	}
	free(g);
}

static uint64_t numel_of(const struct tm_tensor *t)
{
	uint64_t n = 1;
	int i;

	for (i = 0; i < t->rank; i++)
		n *= t->shape[i] > 0 ? (uint64_t)t->shape[i] : 0;
	return n;
}

static int same_numel(const struct tm_tensor *a, const struct tm_tensor *b)
{
	return numel_of(a) == numel_of(b);
}

static int cmd_info_compare(struct tm_session *s, const char *args)
{
	struct where first[NMEAS], worst[NMEAS];
	struct node_miss *miss = NULL;
	struct tally *tas = NULL;
	struct tm_record rec;
	tm_align **als = NULL;
	char *detail = NULL;
	uint64_t ref_unmatched = 0;
	int nal, j, ret = -1;
	double tol = 0;
	uint64_t matched = 0, unmatched = 0, total = 0, noslot = 0, limit = UINT64_MAX;
	uint64_t matched_ref = 0;       /* reference events aligned */
	const struct tm_event *refs[TM_MAX_TENSORS];
	uint32_t nrefs;
	uint32_t nn, i, k;
	int rc, err, live, inputs = 0, ref_last_known;
	uint64_t shapes = 0, past = 0, ref_last;

	memset(first, 0, sizeof(first));
	memset(worst, 0, sizeof(worst));
	for (;;) {
		args = tm_skip_ws(args);
		if (!strncmp(args, "-tol", 4) && (args[4] == ' ' || args[4] == '\t')) {
			char *end;

			tol = strtod(args + 4, &end);
			if (end == args + 4 || !(tol >= 0)) {
				tm_error(s, "-tol needs a number >= 0, e.g. info compare -tol 1e-4.");
				return -1;
			}
			args = end;
		} else if (!strncmp(args, "-inputs", 7) &&
			   (!args[7] || args[7] == ' ' || args[7] == '\t')) {
			inputs = 1;
			args += 7;
		} else {
			break;
		}
	}
	if (*args) {
		tm_error(s, "Usage: info compare [-tol X] [-inputs].");
		return -1;
	}
	if (!s->ref) {
		tm_error(s, "No reference loaded (compare FILE loads one).");
		return -1;
	}
	if (tm_need_trace(s))
		return -1;
	/* The scan has its own aligners: the session's keep their windows. */
	nal = s->ref->nal;
	als = calloc((size_t)nal, sizeof(*als));
	tas = calloc((size_t)nal, sizeof(*tas));
	nn = tm_nodetab_count(s->nodes);
	miss = calloc(nn ? nn : 1, sizeof(*miss));
	if (!als || !tas || !miss) {
		tm_error(s, "Out of memory.");
		goto out;
	}
	ref_last = 0;
	ref_last_known = 0;
	for (j = 0; j < nal; j++) {
		tm_reader *r = NULL;

		rc = tm_reader_open(s->ref->paths[j], 0, &r, &detail);
		if (!rc)
			rc = tm_align_new(r, tm_align_map(s->ref->al[0]), &als[j]);
		if (!rc && (rc = align_setup(s, als[j], s->ref->by_request)) != TM_OK)
			r = NULL;       /* the aligner has it */
		if (rc) {
			if (r && !als[j])
				tm_reader_close(r);
			tm_error(s, "Cannot read the reference: %s.",
				 detail ? detail : tm_strerror(rc));
			free(detail);
			goto out;
		}
		tas[j].s = s;
		tas[j].r = r;
		tas[j].rank = s->ref->manifest ? j : -1;
		tas[j].last_known = tm_reader_summary(r)->nevents > 0;
		tas[j].last_step = tm_reader_summary(r)->last_step;
		if (tas[j].last_known && (!ref_last_known || tas[j].last_step > ref_last)) {
			ref_last = tas[j].last_step;
			ref_last_known = 1;
		}
		tas[j].nref = tm_nodetab_count(tm_reader_nodes(r));
		tas[j].ref_miss = calloc(tas[j].nref ? tas[j].nref : 1, sizeof(*tas[j].ref_miss));
		if (!tas[j].ref_miss) {
			tm_error(s, "Out of memory.");
			goto out;
		}
		tm_align_set_unmatched(als[j], ref_missed, &tas[j]);
		/* one pass forwards: the reference is decoded a few steps
		 * ahead by a thread of the aligner (without one it is read
		 * as asked) */
		(void)tm_align_set_prefetch(als[j], 1);
	}
	/* A live run is read up to the playhead: reading on would resume it. */
	live = s->probe->ops->process != NULL;
	if (live)
		limit = tm_playhead_seq(s);
	err = s->probe->ops->seek(s->probe, TM_SEEK_START, 0);
	while (err == TM_OK) {
		const struct tm_event *ev = &rec.u.event, *rev;
		tm_align *al;
		uint32_t why;
		int rk;

		if (live && total && rec.type == TM_REC_EVENT && ev->seq >= limit)
			break;
		err = s->probe->ops->next_event(s->probe, TM_DIR_FWD, &rec);
		if (err)
			break;
		if (rec.type != TM_REC_EVENT)
			continue;
		if ((++total & 0xfff) == 0 && tm_interrupted)
			break;
		al = rank_align(s, als, nal, ev);
		rk = nal == 1 ? 0 : tm_event_rank(s, ev);
		rc = al ? tm_align_event(al, run_address(s, ev->node), ev, &rev, &why) :
			  TM_ERR_NOT_FOUND;
		if (!al)
			why = TM_REF_NONE;
		/* a step batched otherwise: its requests' rows may align */
		nrefs = 0;
		if (rc == TM_ERR_NOT_FOUND && (why & TM_REF_BATCH)) {
			for (i = 0; i < ev->ntensors; i++) {
				const struct tm_event *re;
				struct tm_slot rs;
				uint32_t w2;

				rc = tm_align_tensor(al, run_address(s, ev->node), ev,
						     ev->tensors[i].slot, &re, &rs, &w2);
				if (rc == TM_ERR_NOT_FOUND)
					continue;
				if (rc)
					break;
				for (k = 0; k < nrefs && refs[k] != re; k++)
					;
				if (k == nrefs)
					refs[nrefs++] = re;
			}
			rc = rc && rc != TM_ERR_NOT_FOUND ? rc :
			     nrefs ? TM_OK : TM_ERR_NOT_FOUND;
		}
		if (rc == TM_ERR_NOT_FOUND) {
			unmatched++;
			/* a longer run than its reference: one line, not a
			 * line per node */
			if (al && !tm_align_by_requests(al) && tas[rk].last_known &&
			    ev->step > tas[rk].last_step) {
				past++;
				continue;
			}
			if (ev->node < nn) {
				miss[ev->node].n++;
				miss[ev->node].reason |= why;
			}
			continue;
		}
		if (rc) {
			tm_error(s, "Cannot read the reference: %s.", tm_strerror(rc));
			break;
		}
		matched++;
		matched_ref += nrefs ? nrefs : 1;
		for (i = 0; i < ev->ntensors; i++) {
			const struct tm_tensor *t = &ev->tensors[i];
			const struct tm_tensor *rt = NULL;
			const struct tm_event *re = rev;
			struct tm_slot rs = t->slot;
			uint32_t w2;

			/* Inputs are how a module is called, which two
			 * implementations may do differently (HF passes a mask
			 * where another passes rotary tables): left out unless
			 * asked for. */
			if (t->slot.kind == TM_SLOT_IN && !inputs)
				continue;
			/* by request ids: a request's rows, and with them a
			 * batch tensor whose reference is another place of the
			 * reference's; by step the slot of the aligned event */
			if (!tm_align_by_requests(al))
				rt = tm_event_tensor(rev, t->slot);
			else if (tm_align_tensor(al, run_address(s, ev->node), ev, t->slot, &re,
						 &rs, &w2) == TM_OK)
				rt = tm_event_tensor(re, rs);
			if (!rt) {
				/* a batch tensor of a step whose rows align has
				 * no reference of its own: not a missing slot */
				if (!nrefs)
					noslot++;
				continue;
			}
			if (!same_numel(t, rt)) {
				shapes++;
				continue;
			}
			for (k = 0; k < NMEAS; k++) {
				int st = measured[k];
				double a, b, d;

				if (!(t->have & rt->have & TM_STAT_BIT(st)))
					continue;
				a = t->stat[st];
				b = rt->stat[st];
				d = tm_stat_table[st].integer ? fabs(a - b) : tm_reldiff(a, b);
				if (isnan(d))
					continue;
				if (!first[k].have && d > tol)
					note(&first[k], ev, t, a, b, d);
				if (!worst[k].have || d > worst[k].d)
					note(&worst[k], ev, t, a, b, d);
			}
		}
	}
	for (j = 0; j < nal; j++) {
		tm_align_finish(als[j]);
		ref_unmatched += tas[j].ref_unmatched;
	}
	tm_progress(s, 0, 1);
	tm_cursor_restore(s);

	tm_out(s, "Reference %s%s.\n", s->ref->path, live ? " (the run up to the playhead)" : "");
	tm_out(s, "Run events: %" PRIu64 ", aligned %" PRIu64 ", not aligned %" PRIu64 ".\n",
	       matched + unmatched, matched, unmatched);
	print_groups(s, miss, nn, NULL, 0);
	if (past) {
		if (nal > 1)
			tm_out(s, "  %" PRIu64 " event%s in steps after the last of their "
			       "rank's reference\n", past, past == 1 ? "" : "s");
		else
			tm_out(s, "  %" PRIu64 " event%s in steps after the reference's last (%"
			       PRIu64 ")\n", past, past == 1 ? "" : "s", ref_last);
	}
	if (noslot)
		tm_out(s, "Tensors with no reference tensor in their slot: %" PRIu64 ".\n",
		       noslot);
	if (shapes)
		tm_out(s, "Tensors whose reference has another number of elements "
		       "(not compared): %" PRIu64 ".\n", shapes);
	tm_out(s, "Reference events not aligned: %" PRIu64 " of %" PRIu64 ".\n",
	       s->ref->nevents > matched_ref ? s->ref->nevents - matched_ref : 0,
	       s->ref->nevents);
	print_groups(s, NULL, 0, tas, nal);
	if (s->ref->nevents > matched_ref + ref_unmatched)
		tm_out(s, "  %" PRIu64 " in steps the run does not reach\n",
		       s->ref->nevents - matched_ref - ref_unmatched);
	tm_out(s, "First divergence of %s (reldiff > %g; counts: any difference):\n",
	       inputs ? "every tensor" : "outputs, gradients and parameters", tol);
	for (k = 0; k < NMEAS; k++) {
		int st = measured[k], integer = tm_stat_table[st].integer;

		if (!worst[k].have)
			continue;
		tm_out(s, "  %-10s ", tm_stat_table[st].name);
		if (first[k].have) {
			if (integer)
				tm_out(s, "differs by %.0f at ", first[k].d);
			else
				tm_out(s, "%.2e at ", first[k].d);
			print_where(s, &first[k], integer);
			tm_out(s, "\n");
		} else {
			tm_out(s, "none (max %s %.2e)\n", integer ? "difference" : "reldiff",
			       worst[k].d);
		}
	}
	ret = 0;
out:
	free(miss);
	for (j = 0; tas && j < nal; j++) {
		free(tas[j].ref_miss);
		tm_align_free(als[j]);
	}
	free(tas);
	free(als);
	return ret;
}

int tm_compare_loaded(struct tm_session *s, struct tm_compare_state *out)
{
	memset(out, 0, sizeof(*out));
	if (!s->ref)
		return 0;
	out->path = s->ref->path;
	out->ranks = s->ref->nal;
	out->manifest = s->ref->manifest;
	out->events = s->ref->nevents;
	out->by_request = s->ref->by_request;
	out->map = tm_align_map(s->ref->al[0]);
	return 1;
}

int tm_info_compare(struct tm_session *s, const char *args)
{
	return cmd_info_compare(s, args);
}

/* ------------------------------------------------------------- beside */

/*
 * print EXPR with a reference loaded: when EXPR is the tensor in focus or
 * one of its fields, the reference's value follows on its own line.
 */
void tm_compare_print_beside(struct tm_session *s, const char *expr)
{
	const struct tm_tensor *t, *rt;
	const struct tm_event *ev, *rev;
	struct tm_tql_value v;
	struct tm_tql_ctx ctx;
	tm_tql_prog *p = NULL;
	char src[256], buf[512], rs[128];
	uint32_t why = 0;
	size_t len;

	if (!s->ref || !s->have_cur)
		return;
	expr = tm_skip_ws(expr);
	len = strlen(expr);
	while (len && (expr[len - 1] == ' ' || expr[len - 1] == '\t'))
		len--;
	if (!(len == 6 && !strncmp(expr, "tensor", 6)) &&
	    !(len > 7 && len < 64 && !strncmp(expr, "tensor.", 7)))
		return;
	ev = &s->cur;
	t = tm_focus_tensor(s);
	if (!t)
		return;
	rt = tm_compare_reference(s, ev, t->slot, 0, &rev, &why);
	if (!rt) {
		tm_tql_reason_format(why, rs, sizeof(rs));
		tm_out(s, "  reference: <unknown: %s>\n", rs);
		return;
	}
	if (len == 6) {
		tm_tensor_format(rt, buf, sizeof(buf));
		tm_out(s, "  reference: %s\n", buf);
		return;
	}
	snprintf(src, sizeof(src), "ref.%.*s", (int)len, expr);
	if (tm_tql_compile(src, &(struct tm_tql_compile_opts){ .rank = -1 }, &p, NULL))
		return;
	tm_tql_ctx_init(s, &ctx, ev, t);
	if (tm_tql_eval(p, &ctx, &v) == TM_OK) {
		tm_tql_format(&v, buf, sizeof(buf));
		if (v.type == TM_TQL_NUM || v.type == TM_TQL_INT) {
			double b = v.type == TM_TQL_NUM ? v.v.d : (double)v.v.i;
			int st = tm_stat_from_name(expr + 7);

			if (st >= 0 && (t->have & TM_STAT_BIT(st)))
				tm_out(s, "  reference: %s (reldiff %.2e)\n", buf,
				       tm_reldiff(t->stat[st], b));
			else
				tm_out(s, "  reference: %s\n", buf);
		} else {
			tm_out(s, "  reference: %s\n", buf);
		}
	}
	tm_tql_free(p);
}
