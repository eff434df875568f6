/*
 * _hook.c -- the probe's per-call fast path, in C.
 *
 * Between the model's kernels a probe's Python runs cold: a module call
 * cost the Python probe some 5 us at level 0 (two frames, a dozen
 * attribute reads, struct packing, a ctypes call for the stats), where the
 * model's own call of a small module costs about 2.  Here the common cases
 * are one C function each, packing records straight into the probe's batch
 * buffer and calling libtensormorph's stats itself:
 *   - a module call (Forward): a non-root node below level 2, or one whose
 *     only argument is a tensor, with one tensor out;
 *   - a one-tensor event (ProbeBase._event1), with the batch's reuse lookup;
 *   - a gradient hook (GradHook), shared by the calls that want the same
 *     tensor's gradient.
 * Everything else -- roots, containers, kwargs, device tensors, a
 * debugger's single-event submit -- goes to the probe's Python methods
 * (_enter, _exit, _event1_py, _submit, _submit_live), on the same state:
 *   ProbeBase  the base class of probe.Probe: the batch counters and buffer
 *              addresses both sides read and write (_nev, _nt, ...)
 *   NodeBase   the base class of probe._Node: a node's id, level and call
 *              counters
 *
 * The batch layout is libtensormorph's struct tm_rec_event and struct
 * tm_rec_tensor (tm-recorder.h), mirrored here so that the extension
 * builds from the probe's sources alone (pip); the build tree compiles it
 * against the header as well, and in every build the probe compares each
 * offset, size and constant of layout() with the library's own table
 * (tm_layout) before it uses this module.  No libtensormorph symbol is linked: the probe hands over
 * the address of tm_recorder_stats.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define MAX_RANK 8
#define STAT_COUNT 12
#define HIST_BINS 32

struct rec_tensor {
	uint64_t data;
	uint64_t numel;
	uint32_t have;
	uint16_t slot_index;
	uint16_t device_index;
	uint8_t slot_kind;
	uint8_t dtype;
	uint8_t rank;
	uint8_t device_type;
	uint8_t level;
	uint8_t capture;
	uint8_t have_hist;
	uint8_t done;
	int64_t shape[MAX_RANK];
	double stat[STAT_COUNT];
	double hist_lo, hist_hi;
	uint32_t hist[HIST_BINS];
};

struct rec_event {
	uint64_t step;
	uint64_t time_ns;
	uint64_t start_ns;
	uint64_t end_ns;
	uint32_t node;
	uint32_t call;
	uint16_t ntensors;
	uint16_t op_index;              /* op events only (_ops.py): 0 here */
	uint8_t kind;
	uint8_t phase;
	uint8_t level;
	uint8_t op_flags;               /* op events only: 0 here */
};

_Static_assert(sizeof(struct rec_tensor) == 336, "struct tm_rec_tensor");
_Static_assert(sizeof(struct rec_event) == 48, "struct tm_rec_event");

#ifdef TM_HOOK_HEADER
#include "tm-recorder.h"
_Static_assert(sizeof(struct rec_tensor) == sizeof(struct tm_rec_tensor), "tensor size");
_Static_assert(offsetof(struct rec_tensor, shape) == offsetof(struct tm_rec_tensor, shape),
	       "tensor shape");
_Static_assert(offsetof(struct rec_tensor, done) == offsetof(struct tm_rec_tensor, done),
	       "tensor done");
_Static_assert(sizeof(struct rec_event) == sizeof(struct tm_rec_event), "event size");
_Static_assert(offsetof(struct rec_event, ntensors) == offsetof(struct tm_rec_event, ntensors),
	       "event ntensors");
#endif

/* enum tm_event_kind, tm_phase, tm_slot_kind */
enum { EV_ENTER = 0, EV_EXIT = 1, EV_BWD = 2, EV_PARAM = 3 };
enum { PHASE_FWD = 0, PHASE_BWD = 1 };
/* int64 per event in a compiled region's plan (_compiled._META, which
 * checks it against the module's META_INTS) */
enum { META_INTS = 8 };
enum { SLOT_OUT = 0, SLOT_IN = 1, SLOT_GRAD_OUT = 2, SLOT_GRAD_IN = 3 };

typedef int (*stats_fn)(void *recorder, struct rec_tensor *t, size_t n);

typedef struct {
	PyObject_HEAD
	unsigned int nev, nt;           /* filled in the batch */
	unsigned int bev, bt;           /* its capacity */
	unsigned long long step;        /* step_count */
	int active;                     /* observed calls in flight */
	int eval_depth;                 /* evaluation scopes in flight (_loop.py) */
	char scaler_watch;              /* a GradScaler runs: gradients go to
					 * _grad_check before their events */
	long long t0;                   /* CLOCK_MONOTONIC ns at the start */
	char closed;
	char force_dev;                 /* device_stats_on_cpu: no host path */
	char rows_on;                   /* a forward with requests' rows
					 * (Probe.set_rows): Python's path */
	unsigned long long evaddr, taddr;       /* the batch's arrays */
	unsigned long long bnev_addr;   /* struct tm_rec_batch's nev */
	unsigned long long live_addr;   /* the server's state word, 0 if none */
	unsigned long long stats_addr;  /* tm_recorder_stats */
	unsigned long long reuse_min1, reuse_min2;      /* _REUSE_MIN[1], [2] */
	unsigned long long reused;      /* summaries copied, not recomputed */
	PyObject *dtypes;               /* torch.dtype -> enum tm_dtype */
	PyObject *seen;                 /* the reuse table (Probe._reuse) */
	PyObject *keep;                 /* level-3 copies until submitted */
	PyObject *grad_pending;         /* pid -> (pid, node, param): PARAM grad
					 * events of the backward in flight */
	char grad_queued;               /* _grads_done is queued on autograd */
	/* The last tensor this batch summarised from a contiguous host
	 * buffer, held (so the object cannot be another one at the same
	 * address): in a chain of modules it is the next one's input, found
	 * by identity instead of a lookup in seen (last_reuse).  Probe sets
	 * _last to None wherever it empties the batch. */
	PyObject *last;
	unsigned int last_idx;
	int last_level;
	unsigned long long last_data;
	long long last_version;
	unsigned long long last_min;    /* elements: _LAST_MIN */
} ProbeBase;

typedef struct {
	PyObject_HEAD
	unsigned int id;
	int level;
	char observed;
	char is_root;
	char ops;                       /* an op recorder follows its calls (_ops.py) */
	int depth;                      /* calls in flight */
	long long epoch;                /* step whose calls count counts */
	unsigned long long count;       /* calls in that step */
} NodeBase;

typedef struct {
	PyObject_HEAD
	ProbeBase *probe;               /* NULL once released */
	NodeBase *node;
	PyObject *module;
	PyObject *inner;                /* the forward it wraps, bound */
	PyObject *dict;                 /* functools.update_wrapper's attributes */
	PyObject *name;                 /* the method it stands for: "forward", or a
					 * framework's root method ("training_step") */
	int scope;                      /* an evaluation scope while it runs */
	int bound;                      /* called as a method bound to module (its
					 * first argument), else as the module's
					 * instance attribute: see forward_call */
	vectorcallfunc vectorcall;
} Forward;

/* nn.Module.__call__ while the probe looks for the model (model=None):
 * the probe's _discover first when nothing observed is in flight, then
 * the original, with no Python frame of the probe's in between. */
typedef struct {
	PyObject_HEAD
	PyObject *probe;                /* a weak reference */
	PyObject *orig;
	vectorcallfunc vectorcall;
} Discover;

static PyTypeObject ProbeBaseType, NodeBaseType, ForwardType, DiscoverType, ParamHookType;

/* set once by setup(): torch.Tensor, torch.strided, torch.is_grad_enabled */
static PyObject *tensor_type, *strided, *grad_enabled;
static PyObject *s_enter, *s_exit, *s_submit, *s_submit_live, *s_forward, *s_shape,
	*s_dtype, *s_is_cpu, *s_layout, *s_is_contiguous, *s_data_ptr, *s_event1_py,
	*s_is_inference, *s_version, *s_stride, *s_detach, *s_contiguous, *s_clone,
	*s_requires_grad, *s_backward_hooks, *s_reversed, *s_register_hook, *s_discover,
	*s_grad_check, *s_grad, *s_grads_queue, *s_raise, *s_root_depth, *s_root_call,
	*s_micro;

static long long
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* What the crash handler reads: stored after the event is complete. */
static void
publish(ProbeBase *p)
{
	__atomic_store_n((uint32_t *)(uintptr_t)p->bnev_addr, p->nev, __ATOMIC_RELEASE);
}

static int
call_method0(ProbeBase *p, PyObject *name)
{
	PyObject *r = PyObject_CallMethodNoArgs((PyObject *)p, name);

	if (r == NULL)
		return -1;
	Py_DECREF(r);
	return 0;
}

/* After an event is filled: a subscribed debugger gets it at once (and may
 * pause the model in there). */
static int
after_event(ProbeBase *p)
{
	p->nev++;
	publish(p);
	if (p->live_addr && (__atomic_load_n((uint32_t *)(uintptr_t)p->live_addr,
					     __ATOMIC_ACQUIRE) & 1))
		return call_method0(p, s_submit_live);
	return 0;
}

static int
room(ProbeBase *p, unsigned int ntensors)
{
	if (p->nev >= p->bev || p->nt + ntensors > p->bt)
		return call_method0(p, s_submit);
	return 0;
}

static void
put_event(ProbeBase *p, int kind, int phase, unsigned int node, unsigned long long call,
	  long long t, long long start, long long end, int level, unsigned int ntensors)
{
	struct rec_event *e = (struct rec_event *)(uintptr_t)p->evaddr + p->nev;

	e->step = p->step;
	e->time_ns = (uint64_t)t;
	e->start_ns = (uint64_t)start;
	e->end_ns = (uint64_t)end;
	e->node = node;
	e->call = (uint32_t)call;
	e->ntensors = (uint16_t)ntensors;
	e->op_index = 0;
	e->kind = (uint8_t)kind;
	e->phase = (uint8_t)phase;
	e->level = (uint8_t)level;
	e->op_flags = 0;
}

static int
get_bool(PyObject *x, PyObject *name, int method)
{
	PyObject *r = method ? PyObject_CallMethodNoArgs(x, name) : PyObject_GetAttr(x, name);
	int v;

	if (r == NULL)
		return -1;
	v = r == Py_True;
	Py_DECREF(r);
	return v;
}

/* One event of one tensor, as Probe._event1 takes it. */
struct ev1 {
	int kind, phase, slot_kind, level, slot_index;
	unsigned int node;
	unsigned long long call;
	long long t, start, end;
};

static void
untrack(PyObject *o)
{
	if (PyObject_IS_GC(o) && PyObject_GC_IsTracked(o))
		PyObject_GC_UnTrack(o);
}

static int
referent_is(PyObject *ref, PyObject *x)
{
#if PY_VERSION_HEX >= 0x030D0000
	PyObject *o = NULL;
	int is = PyWeakref_GetRef(ref, &o) > 0 && o == x;

	Py_XDECREF(o);
	return is;
#else
	return PyWeakref_GetObject(ref) == x;
#endif
}

static int
same(PyObject *a, PyObject *b)
{
	int r;

	if (a == b)
		return 1;
	if ((r = PyObject_RichCompareBool(a, b, Py_EQ)) < 0)
		PyErr_Clear();          /* not comparable: not the same */
	return r == 1;
}

/*
 * Probe._reuse: a tensor summarised before in this batch, unchanged (the
 * same object, version, address, shape, strides, dtype and level), gets
 * that summary copied to idx.  The table is Probe._seen, shared with
 * Python and emptied by each submit.  1: copied, 0: not (x is entered), -1:
 * error.
 */
static int
reuse(ProbeBase *p, PyObject *x, unsigned int idx, uint64_t data, PyObject *shape,
      PyObject *dt, const struct ev1 *e)
{
	PyObject *key = NULL, *version = NULL, *strides = NULL, *hit, *entry, *wr;
	struct rec_tensor *base = (struct rec_tensor *)(uintptr_t)p->taddr;
	int inf, match = 0, ret = -1;

	if ((inf = get_bool(x, s_is_inference, 1)) != 0)
		return inf < 0 ? -1 : 0;        /* no version counter to trust */
	if ((key = PyLong_FromVoidPtr(x)) == NULL ||
	    (version = PyObject_GetAttr(x, s_version)) == NULL ||
	    (strides = PyObject_CallMethodNoArgs(x, s_stride)) == NULL)
		goto out;
	hit = PyDict_GetItemWithError(p->seen, key);
	if (hit == NULL && PyErr_Occurred())
		goto out;
	if (hit != NULL && PyTuple_Check(hit) && PyTuple_GET_SIZE(hit) == 8) {
		PyObject *ref = PyTuple_GET_ITEM(hit, 1);
		unsigned long long hdata = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(hit, 3));
		long hidx = PyLong_AsLong(PyTuple_GET_ITEM(hit, 0));

		if (PyErr_Occurred())
			goto out;
		match = PyWeakref_Check(ref) && referent_is(ref, x) && hdata == data &&
			same(PyTuple_GET_ITEM(hit, 2), version) &&
			same(PyTuple_GET_ITEM(hit, 4), shape) && PyTuple_GET_ITEM(hit, 5) == dt &&
			PyLong_AsLong(PyTuple_GET_ITEM(hit, 6)) == e->level &&
			same(PyTuple_GET_ITEM(hit, 7), strides) && hidx >= 0 &&
			(unsigned long)hidx < idx;
		if (match) {
			base[idx] = base[hidx];
			base[idx].slot_index = (uint16_t)e->slot_index;
			base[idx].slot_kind = (uint8_t)e->slot_kind;
			p->reused++;
			ret = 1;
			goto out;
		}
	}
	if ((wr = PyWeakref_NewRef(x, NULL)) == NULL)
		goto out;
	entry = Py_BuildValue("(INOKOOiO)", idx, wr, version, (unsigned long long)data, shape, dt,
			      e->level, strides);
	if (entry == NULL)
		goto out;
	/* An entry, its weak reference (no callback) and its shape and
	 * strides (ints) hold nothing that can lead back to them: out of the
	 * cyclic GC, which would otherwise walk a batch's worth of them at
	 * each collection and promote them to the old generations. */
	untrack(entry);
	untrack(wr);
	untrack(shape);
	untrack(strides);
	ret = PyDict_SetItem(p->seen, key, entry) < 0 ? -1 : 0;
	Py_DECREF(entry);
out:
	Py_XDECREF(key);
	Py_XDECREF(version);
	Py_XDECREF(strides);
	return ret;
}

static uint64_t
data_ptr(PyObject *x)
{
	PyObject *ptr = PyObject_CallMethodNoArgs(x, s_data_ptr);
	uint64_t v;

	if (ptr == NULL)
		return 0;
	v = PyLong_AsUnsignedLongLong(ptr);
	Py_DECREF(ptr);
	return v;
}

/*
 * x is the last tensor summarised (ProbeBase.last) and unchanged: the same
 * object, version, address, shape, dtype and level, contiguous then and
 * now (so its elements are read in the same order): that summary copied
 * to idx.  About three attribute reads against a pass over the data.
 * 1: copied, 0: not, -1: error.
 */
static int
last_reuse(ProbeBase *p, PyObject *x, unsigned int idx, const int64_t *dims, Py_ssize_t rank,
	   long dtype, uint64_t numel, const struct ev1 *e)
{
	struct rec_tensor *base = (struct rec_tensor *)(uintptr_t)p->taddr, *h;
	PyObject *version;
	long long ver;
	uint64_t data;
	int c;

	if (p->last != x || p->last_idx >= idx || p->last_level != (e->level >= 2 ? 2 : 1))
		return 0;
	h = &base[p->last_idx];
	if (h->numel != numel || h->rank != (uint8_t)rank || h->dtype != (uint8_t)dtype ||
	    h->capture || memcmp(h->shape, dims, (size_t)rank * sizeof(dims[0])))
		return 0;
	if ((version = PyObject_GetAttr(x, s_version)) == NULL)
		return -1;
	ver = PyLong_AsLongLong(version);
	Py_DECREF(version);
	if (ver == -1 && PyErr_Occurred())
		return -1;
	if (ver != p->last_version)
		return 0;
	if ((c = get_bool(x, s_is_contiguous, 1)) <= 0)
		return c;
	data = data_ptr(x);
	if (PyErr_Occurred())
		return -1;
	if (data != p->last_data || h->data != data)
		return 0;
	base[idx] = *h;
	base[idx].slot_index = (uint16_t)e->slot_index;
	base[idx].slot_kind = (uint8_t)e->slot_kind;
	p->reused++;
	return 1;
}

/* x, contiguous, was summarised at idx: remember it for last_reuse. */
static void
last_remember(ProbeBase *p, PyObject *x, unsigned int idx, int level, uint64_t data)
{
	PyObject *version = PyObject_GetAttr(x, s_version);
	long long ver = version != NULL ? PyLong_AsLongLong(version) : -1;

	Py_XDECREF(version);
	if (PyErr_Occurred()) {         /* an inference tensor: no version */
		PyErr_Clear();
		Py_CLEAR(p->last);
		return;
	}
	Py_INCREF(x);
	Py_XSETREF(p->last, x);
	p->last_idx = idx;
	p->last_level = level;
	p->last_data = data;
	p->last_version = ver;
}

/*
 * x's metadata as a summary row takes it, for event1 (eager mode) and
 * host_stats (compiled regions): dims (its first MAX_RANK sizes), rank
 * (all of them), numel and the code of its dtype in dtypes (-1: none yet).
 * *shape and *dt get new references or NULL, the caller's to drop (on
 * error too; event1's reuse keeps them).  0, or -1 with an exception set
 * (a shape that is not a tuple of sizes).
 */
static int
read_meta(PyObject *x, PyObject *dtypes, int64_t *dims, Py_ssize_t *rank, uint64_t *numel,
	  long *dtype, PyObject **shape, PyObject **dt)
{
	PyObject *code;
	Py_ssize_t i;

	*dt = NULL;
	*numel = 1;
	*dtype = -1;
	if ((*shape = PyObject_GetAttr(x, s_shape)) == NULL)
		return -1;
	if (!PyTuple_Check(*shape)) {
		PyErr_SetString(PyExc_TypeError, "a tensor's shape is not a tuple");
		goto fail;
	}
	*rank = PyTuple_GET_SIZE(*shape);
	for (i = 0; i < *rank; i++) {
		long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(*shape, i));

		if (d < 0) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_ValueError, "a tensor's size is negative");
			goto fail;
		}
		if (i < MAX_RANK)
			dims[i] = d;
		*numel *= (uint64_t)d;
	}
	if ((*dt = PyObject_GetAttr(x, s_dtype)) == NULL)
		goto fail;
	code = PyDict_GetItemWithError(dtypes, *dt);
	if (code == NULL)
		return PyErr_Occurred() ? -1 : 0;
	if ((*dtype = PyLong_AsLong(code)) == -1 && PyErr_Occurred())
		return -1;
	if (*dtype < 0 || *dtype > 255)
		*dtype = -1;
	return 0;
fail:
	Py_CLEAR(*shape);
	Py_CLEAR(*dt);
	return -1;
}

/*
 * Probe._event1 for a host tensor: its summary at the batch's next tensor
 * slot, its stats computed now (the tensor may change in place after the
 * hook), the event after it.  Returns 1 when written, 0 when x is for
 * Python's _event1 after all (a device tensor, a shape of over 8
 * dimensions, a dtype not in the table; nothing written), -1 on error.
 */
static int
event1(ProbeBase *p, const struct ev1 *e, PyObject *x)
{
	struct rec_tensor *rt;
	PyObject *shape = NULL, *dt = NULL, *y = NULL;
	int64_t dims[MAX_RANK];
	uint64_t numel = 1, data = 0;
	Py_ssize_t rank;
	int v, clevel = 0, capture = 0, reused = 0, ret = 0;
	unsigned int idx;
	long dtype;

	if (p->dtypes == NULL || p->seen == NULL || p->keep == NULL || p->force_dev ||
	    p->rows_on)
		return 0;
	if ((v = get_bool(x, s_is_cpu, 0)) <= 0)
		goto python;
	if (room(p, 1) < 0)
		return -1;
	idx = p->nt;
	if (read_meta(x, p->dtypes, dims, &rank, &numel, &dtype, &shape, &dt) < 0 ||
	    rank > MAX_RANK || dtype < 0)
		goto python;            /* a dtype not in the table */
	if (e->level >= 1) {
		PyObject *layout = PyObject_GetAttr(x, s_layout);

		if (layout == NULL)
			goto python;
		v = layout == strided;
		Py_DECREF(layout);
	}
	if (e->level >= 1 && v) {
		unsigned long long min = e->level == 1 ? p->reuse_min1 : p->reuse_min2;

		/* the last tensor summarised first: no lookup */
		if (x == p->last && numel >= p->last_min && e->kind != EV_PARAM && e->level < 3 &&
		    (reused = last_reuse(p, x, idx, dims, rank, dtype, numel, e)) < 0)
			goto python;
		if (!reused && numel >= min && e->kind != EV_PARAM) {
			uint64_t addr = data_ptr(x);

			if (PyErr_Occurred())
				goto python;
			if ((reused = reuse(p, x, idx, addr, shape, dt, e)) < 0)
				goto python;
		}
		if (!reused) {
			if ((v = get_bool(x, s_is_contiguous, 1)) < 0)
				goto python;
			y = v ? (Py_INCREF(x), x) : PyObject_CallMethodNoArgs(x, s_detach);
			if (y != NULL && !v)    /* a copy, alive until read below */
				Py_SETREF(y, PyObject_CallMethodNoArgs(y, s_contiguous));
			if (y != NULL && e->level >= 3) {
				Py_SETREF(y, PyObject_CallMethodNoArgs(y, s_detach));
				if (y != NULL)
					Py_SETREF(y, PyObject_CallMethodNoArgs(y, s_clone));
				if (y != NULL && PyList_Append(p->keep, y) < 0)
					Py_CLEAR(y);
				capture = 1;
			}
			if (y == NULL)
				goto fail;
			data = data_ptr(y);
			if (PyErr_Occurred())
				goto fail;
			clevel = e->level >= 2 ? 2 : 1;
		}
	}
	rt = (struct rec_tensor *)(uintptr_t)p->taddr + idx;
	if (!reused) {
		rt->data = data;
		rt->numel = numel;
		rt->have = 0;
		rt->slot_index = (uint16_t)e->slot_index;
		rt->device_index = 0;
		rt->slot_kind = (uint8_t)e->slot_kind;
		rt->dtype = (uint8_t)dtype;
		rt->rank = (uint8_t)rank;
		rt->device_type = 0;
		rt->level = (uint8_t)clevel;
		rt->capture = (uint8_t)capture;
		rt->have_hist = 0;
		rt->done = 0;
		memcpy(rt->shape, dims, (size_t)rank * sizeof(dims[0]));
	}
	put_event(p, e->kind, e->phase, e->node, e->call, e->t, e->start, e->end, e->level, 1);
	if (clevel) {
		/* a level-3 copy is read before submit copies it as the payload;
		 * an empty tensor (no address) gets its counts */
		((stats_fn)(uintptr_t)p->stats_addr)(NULL, rt, 1);
		if (!capture && y == x && numel >= p->last_min && e->kind != EV_PARAM)
			last_remember(p, x, idx, clevel, data);
	}
	Py_XDECREF(y);
	Py_DECREF(shape);
	Py_DECREF(dt);
	p->nt = idx + 1;
	return after_event(p) < 0 ? -1 : 1;

python:
	if (PyErr_Occurred()) {
		if (!PyErr_ExceptionMatches(PyExc_Exception))
			ret = -1;       /* KeyboardInterrupt and the like go on */
		else
			PyErr_Clear();  /* Python's path says what it can */
	}
	goto out;
fail:
	ret = -1;
out:
	Py_XDECREF(y);
	Py_XDECREF(shape);
	Py_XDECREF(dt);
	return ret;
}

/* Probe._event1(kind, phase, node, call, t, start, end, x, slot_kind,
 * level, slot_index), with Probe._event1_py for what event1() leaves. */
/* event1(), or Probe._event1_py for what event1() leaves to Python. */
static int
emit1(ProbeBase *p, const struct ev1 *e, PyObject *x)
{
	PyObject *a[12], *r;
	int i, done = PyObject_TypeCheck(x, (PyTypeObject *)tensor_type) ? event1(p, e, x) : 0;

	if (done != 0)
		return done < 0 ? -1 : 0;
	a[0] = (PyObject *)p;
	a[1] = PyLong_FromLong(e->kind);
	a[2] = PyLong_FromLong(e->phase);
	a[3] = PyLong_FromUnsignedLong(e->node);
	a[4] = PyLong_FromUnsignedLongLong(e->call);
	a[5] = PyLong_FromLongLong(e->t);
	a[6] = PyLong_FromLongLong(e->start);
	a[7] = PyLong_FromLongLong(e->end);
	a[8] = x;
	a[9] = PyLong_FromLong(e->slot_kind);
	a[10] = PyLong_FromLong(e->level);
	a[11] = PyLong_FromLong(e->slot_index);
	for (i = 1, r = NULL; i < 12; i++)
		if (a[i] == NULL)
			goto out;
	r = PyObject_VectorcallMethod(s_event1_py, a, 12, NULL);
out:
	for (i = 1; i < 12; i++)
		if (i != 8)
			Py_XDECREF(a[i]);
	if (r == NULL)
		return -1;
	Py_DECREF(r);
	return 0;
}

/* Probe._event1(kind, phase, node, call, t, start, end, x, slot_kind,
 * level, slot_index). */
static PyObject *
probe_event1(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
	struct ev1 e;

	if (nargs != 11) {
		PyErr_SetString(PyExc_TypeError, "_event1 takes 11 arguments");
		return NULL;
	}
	e.kind = (int)PyLong_AsLong(args[0]);
	e.phase = (int)PyLong_AsLong(args[1]);
	e.node = (unsigned int)PyLong_AsUnsignedLong(args[2]);
	e.call = PyLong_AsUnsignedLongLong(args[3]);
	e.t = PyLong_AsLongLong(args[4]);
	e.start = PyLong_AsLongLong(args[5]);
	e.end = PyLong_AsLongLong(args[6]);
	e.slot_kind = (int)PyLong_AsLong(args[8]);
	e.level = (int)PyLong_AsLong(args[9]);
	e.slot_index = (int)PyLong_AsLong(args[10]);
	if (PyErr_Occurred() || emit1((ProbeBase *)self, &e, args[7]) < 0)
		return NULL;
	Py_RETURN_NONE;
}

/* ------------------------------------------------------------ GradHook */

/*
 * The gradient hook of one tensor: a BWD event for each (node, call, slot)
 * that wants its gradient, in the order they asked.  The output of one
 * call is usually the input of the next, and both want its gradient
 * (grad_out.0 of the first, grad_in.0 of the second): one hook serves
 * both, as long as no other hook was registered on the tensor in between
 * (that one could change the gradient the second sees).
 *
 * A leaf's hook (a tensor that requires grad and has no grad_fn, such as
 * learnt queries fed to a decoder each step) outlives the forward that
 * asked: the next forward finds it and adds its own calls.  So its calls
 * are those of the forwards since its last backward: the hook forgets them
 * once it has reported them, and a forward of a later step drops what an
 * earlier one's left (a forward with no backward).  Otherwise each step
 * would report every earlier call again, without end.
 */
struct gentry {
	NodeBase *node;
	unsigned long long call;
	int slot_kind, index;
};

typedef struct {
	PyObject_HEAD
	ProbeBase *probe;
	struct gentry *e;
	Py_ssize_t n, cap;
	char leaf;
	unsigned long long step;        /* of the calls in e (a leaf's) */
	vectorcallfunc vectorcall;
} GradHook;

static void gradhook_forget(GradHook *g);

static PyTypeObject GradHookType;

static PyObject *
gradhook_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
	GradHook *g = (GradHook *)self;
	ProbeBase *p = g->probe;
	Py_ssize_t i;

	if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
		PyErr_SetString(PyExc_TypeError, "a gradient hook takes the gradient");
		return NULL;
	}
	if (p == NULL)
		Py_RETURN_NONE;
	Py_INCREF(p);
	if (p->scaler_watch && !p->closed) {
		/* whether the scaler will skip this step, known before the
		 * events that show why (scaler.skipped) */
		PyObject *r = PyObject_CallMethodOneArg((PyObject *)p, s_grad_check, args[0]);

		if (r == NULL) {
			Py_DECREF(p);
			return NULL;
		}
		Py_DECREF(r);
	}
	for (i = 0; i < g->n && !p->closed; i++) {
		NodeBase *n = g->e[i].node;
		long long t = now_ns() - p->t0;
		struct ev1 e = { EV_BWD, PHASE_BWD, g->e[i].slot_kind, n->level, g->e[i].index,
				 n->id, g->e[i].call, t, t, t };

		if (emit1(p, &e, args[0]) < 0) {
			Py_DECREF(p);
			return NULL;
		}
	}
	if (g->leaf)
		gradhook_forget(g);
	Py_DECREF(p);
	Py_RETURN_NONE;
}

static int
gradhook_add(GradHook *g, NodeBase *n, unsigned long long call, int slot_kind, int index)
{
	if (g->leaf && g->step != g->probe->step) {
		gradhook_forget(g);
		g->step = g->probe->step;
	}
	if (g->n == g->cap) {
		Py_ssize_t cap = g->cap ? 2 * g->cap : 2;
		struct gentry *e = PyMem_Realloc(g->e, (size_t)cap * sizeof(*e));

		if (e == NULL) {
			PyErr_NoMemory();
			return -1;
		}
		g->e = e;
		g->cap = cap;
	}
	Py_INCREF(n);
	g->e[g->n].node = n;
	g->e[g->n].call = call;
	g->e[g->n].slot_kind = slot_kind;
	g->e[g->n].index = index;
	g->n++;
	return 0;
}

static int
gradhook_traverse(GradHook *g, visitproc visit, void *arg)
{
	Py_ssize_t i;

	Py_VISIT(g->probe);
	for (i = 0; i < g->n; i++)
		Py_VISIT(g->e[i].node);
	return 0;
}

/* Drops g's calls. */
static void
gradhook_forget(GradHook *g)
{
	Py_ssize_t n = g->n;

	g->n = 0;
	while (n > 0) {
		n--;            /* not inside Py_CLEAR, which names its argument twice */
		Py_CLEAR(g->e[n].node);
	}
}

static int
gradhook_clear(GradHook *g)
{
	gradhook_forget(g);
	Py_CLEAR(g->probe);
	return 0;
}

static void
gradhook_dealloc(GradHook *g)
{
	PyObject_GC_UnTrack(g);
	gradhook_clear(g);
	PyMem_Free(g->e);
	Py_TYPE(g)->tp_free((PyObject *)g);
}

static PyTypeObject GradHookType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tensormorph_probe._hook.GradHook",
	.tp_basicsize = sizeof(GradHook),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
	.tp_doc = "A tensor's gradient hook: the BWD events of the calls that want it.",
	.tp_dealloc = (destructor)gradhook_dealloc,
	.tp_traverse = (traverseproc)gradhook_traverse,
	.tp_clear = (inquiry)gradhook_clear,
	.tp_call = PyVectorcall_Call,
	.tp_vectorcall_offset = offsetof(GradHook, vectorcall),
};

/*
 * Tensor.register_hook(x, hook) without its Python frame and its
 * RemovableHandle (the probe never removes a gradient hook: it goes with
 * the tensor): the same steps, for a plain tensor with no torch function
 * mode in force; anything else goes through torch's method.  The key is
 * an int of the probe's own range, far above RemovableHandle's.
 */
static PyObject *has_torch_function_unary, *ordered_dict, *s_grad_fn, *s_register_hook_dict;
static unsigned long long hook_key = 1ULL << 62;

static PyObject *
register_hook(PyObject *x, PyObject *hook, PyObject *hooks_read, int *leaf)
{
	PyObject *hooks, *r, *key;
	int tf;

	if (!Py_IS_TYPE(x, (PyTypeObject *)tensor_type) || has_torch_function_unary == NULL)
		return PyObject_CallMethodOneArg(x, s_register_hook, hook);
	if ((r = PyObject_CallOneArg(has_torch_function_unary, x)) == NULL)
		return NULL;
	tf = r == Py_True;
	Py_DECREF(r);
	if (tf)
		return PyObject_CallMethodOneArg(x, s_register_hook, hook);
	if (hooks_read != NULL)
		hooks = Py_NewRef(hooks_read);
	else if ((hooks = PyObject_GetAttr(x, s_backward_hooks)) == NULL)
		return NULL;
	if (hooks == Py_None) {
		PyObject *fn;

		Py_DECREF(hooks);
		if ((hooks = PyObject_CallNoArgs(ordered_dict)) == NULL)
			return NULL;
		if (PyObject_SetAttr(x, s_backward_hooks, hooks) < 0 ||
		    (fn = PyObject_GetAttr(x, s_grad_fn)) == NULL) {
			Py_DECREF(hooks);
			return NULL;
		}
		*leaf = fn == Py_None;
		r = fn == Py_None ? Py_NewRef(Py_None) :
			PyObject_CallMethodOneArg(fn, s_register_hook_dict, x);
		Py_DECREF(fn);
		if (r == NULL) {
			Py_DECREF(hooks);
			return NULL;
		}
		Py_DECREF(r);
	}
	key = PyLong_FromUnsignedLongLong(hook_key++);
	if (key == NULL || PyObject_SetItem(hooks, key, hook) < 0) {
		Py_XDECREF(key);
		Py_DECREF(hooks);
		return NULL;
	}
	Py_DECREF(key);
	Py_DECREF(hooks);
	Py_RETURN_NONE;
}

/*
 * The hook registered last on x, when it is one of this probe's; *read:
 * x._backward_hooks as read here (a new reference, for register_hook), or
 * NULL.
 */
static GradHook *
last_gradhook(ProbeBase *p, PyObject *x, PyObject **read)
{
	PyObject *hooks = PyObject_GetAttr(x, s_backward_hooks), *it = NULL, *key = NULL, *v;
	GradHook *g = NULL;

	if (hooks == NULL || !PyDict_Check(hooks) || PyDict_GET_SIZE(hooks) == 0)
		goto out;
	if (PyDict_GET_SIZE(hooks) == 1) {
		/* the usual case, the previous call's hook alone: the last
		 * without reversed() and its iterator */
		Py_ssize_t pos = 0;

		if (!PyDict_Next(hooks, &pos, NULL, &v))
			goto out;
	} else if ((it = PyObject_CallMethodNoArgs(hooks, s_reversed)) == NULL ||
		   (key = PyIter_Next(it)) == NULL) {
		goto out;
	} else {
		v = PyDict_GetItemWithError(hooks, key);
	}
	if (v != NULL && Py_IS_TYPE(v, &GradHookType) && ((GradHook *)v)->probe == p)
		g = (GradHook *)v;
out:
	Py_XDECREF(key);
	Py_XDECREF(it);
	*read = hooks;
	PyErr_Clear();          /* no _backward_hooks to read: a hook of its own */
	return g;
}

/*
 * Probe._grad_hook: (node, call) wants x's gradient as slot_kind.index,
 * if x requires one and autograd records (or, with any, whether it
 * records now or not: a compiled region's leaf, its forward run with
 * autograd off).  0 or -1.
 */
static int
add_grad_hook(ProbeBase *p, PyObject *x, NodeBase *n, unsigned long long call, int slot_kind,
	      int index, int any)
{
	PyObject *on, *r, *hooks;
	GradHook *g;
	int v, leaf = -1;

	if ((v = get_bool(x, s_requires_grad, 0)) <= 0)
		return v;
	if (!any) {
		if ((on = PyObject_CallNoArgs(grad_enabled)) == NULL)
			return -1;
		v = on == Py_True;
		Py_DECREF(on);
		if (!v)
			return 0;
	}
	if ((g = last_gradhook(p, x, &hooks)) != NULL) {
		Py_XDECREF(hooks);
		return gradhook_add(g, n, call, slot_kind, index);
	}
	g = PyObject_GC_New(GradHook, &GradHookType);
	if (g == NULL) {
		Py_XDECREF(hooks);
		return -1;
	}
	Py_INCREF(p);
	g->probe = p;
	g->e = NULL;
	g->n = g->cap = 0;
	g->leaf = 0;
	g->vectorcall = gradhook_call;
	PyObject_GC_Track(g);
	if (gradhook_add(g, n, call, slot_kind, index) < 0) {
		Py_XDECREF(hooks);
		Py_DECREF(g);
		return -1;
	}
	/* nothing ran since that read: the same dict (or None) */
	r = register_hook(x, (PyObject *)g, hooks, &leaf);
	Py_XDECREF(hooks);
	if (r != NULL && leaf < 0) {        /* register_hook did not read grad_fn */
		PyObject *fn = PyObject_GetAttr(x, s_grad_fn);

		if (fn == NULL)
			Py_CLEAR(r);
		else
			leaf = fn == Py_None;
		Py_XDECREF(fn);
	}
	g->leaf = leaf > 0;
	g->step = p->step;
	Py_DECREF(g);
	if (r == NULL)
		return -1;
	Py_DECREF(r);
	return 0;
}

static PyObject *
probe_grad_hook(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
	unsigned long long call;
	int slot_kind, index, any;

	if ((nargs != 5 && nargs != 6) || !PyObject_TypeCheck(args[1], &NodeBaseType)) {
		PyErr_SetString(PyExc_TypeError,
				"_grad_hook(x, node, call, slot_kind, index[, grad_off_too])");
		return NULL;
	}
	call = PyLong_AsUnsignedLongLong(args[2]);
	slot_kind = (int)PyLong_AsLong(args[3]);
	index = (int)PyLong_AsLong(args[4]);
	any = nargs == 6 ? PyObject_IsTrue(args[5]) : 0;
	if (PyErr_Occurred() || any < 0 ||
	    add_grad_hook((ProbeBase *)self, args[0], (NodeBase *)args[1], call, slot_kind,
			  index, any) < 0)
		return NULL;
	Py_RETURN_NONE;
}

/* ------------------------------------------------------------ parameters */

/*
 * Probe._param_events(entries, slot_kind, phase, call, t, grad): the PARAM
 * events of a step's parameters (values after optimizer.step, gradients
 * when a backward ends), one loop here rather than a Python one.  entries
 * is a list (or dict values) of (pid, node, param).
 */
static PyObject *
probe_param_events(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
	ProbeBase *p = (ProbeBase *)self;
	PyObject *seq, *item;
	struct ev1 e;
	int grad;
	Py_ssize_t i, n;

	if (nargs != 6) {
		PyErr_SetString(PyExc_TypeError,
				"_param_events(entries, slot_kind, phase, call, t, grad)");
		return NULL;
	}
	e.kind = EV_PARAM;
	e.slot_kind = (int)PyLong_AsLong(args[1]);
	e.phase = (int)PyLong_AsLong(args[2]);
	e.call = PyLong_AsUnsignedLongLong(args[3]);
	e.t = e.start = e.end = PyLong_AsLongLong(args[4]);
	e.slot_index = 0;
	if (PyErr_Occurred() || (grad = PyObject_IsTrue(args[5])) < 0)
		return NULL;
	if ((seq = PySequence_Fast(args[0], "_param_events needs a sequence")) == NULL)
		return NULL;
	n = PySequence_Fast_GET_SIZE(seq);
	for (i = 0; i < n && !p->closed; i++) {
		PyObject *x;
		NodeBase *node;
		int r;

		item = PySequence_Fast_GET_ITEM(seq, i);
		if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3 ||
		    !PyObject_TypeCheck(PyTuple_GET_ITEM(item, 1), &NodeBaseType)) {
			PyErr_SetString(PyExc_TypeError, "_param_events: (pid, node, param) expected");
			goto fail;
		}
		node = (NodeBase *)PyTuple_GET_ITEM(item, 1);
		if (node->level < 2)
			continue;
		e.level = node->level;
		e.node = (unsigned int)PyLong_AsUnsignedLong(PyTuple_GET_ITEM(item, 0));
		if (PyErr_Occurred())
			goto fail;
		x = PyTuple_GET_ITEM(item, 2);
		if (grad) {
			if ((x = PyObject_GetAttr(x, s_grad)) == NULL)
				goto fail;
		} else {
			Py_INCREF(x);
		}
		r = x == Py_None ? 0 : emit1(p, &e, x);
		Py_DECREF(x);
		if (r < 0)
			goto fail;
	}
	Py_DECREF(seq);
	Py_RETURN_NONE;
fail:
	Py_DECREF(seq);
	return NULL;
}

/*
 * A parameter's post-accumulate-grad hook: its gradient is ready in this
 * backward.  A level-2 parameter's PARAM grad event waits for the end of
 * the backward (after DDP's averaging): it goes into grad_pending, and the
 * first of a backward queues Probe._grads_done (_grads_queue).  The check
 * of a GradScaler run (_grad_check) stays in Python.
 */
typedef struct {
	PyObject_HEAD
	ProbeBase *probe;
	PyObject *pid;                  /* None: only the scaler's check */
	PyObject *node;
	vectorcallfunc vectorcall;
} ParamHook;

static PyObject *
paramhook_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
	ParamHook *h = (ParamHook *)self;
	ProbeBase *p = h->probe;
	PyObject *g, *entry, *r;
	int ret = -1;

	if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
		PyErr_SetString(PyExc_TypeError, "a parameter hook takes the parameter");
		return NULL;
	}
	if (p == NULL || p->closed)
		Py_RETURN_NONE;
	if ((g = PyObject_GetAttr(args[0], s_grad)) == NULL)
		return NULL;
	Py_INCREF(p);
	if (g == Py_None) {
		ret = 0;
		goto out;
	}
	if (p->scaler_watch) {
		if ((r = PyObject_CallMethodOneArg((PyObject *)p, s_grad_check, g)) == NULL)
			goto out;
		Py_DECREF(r);
	}
	if (h->pid == Py_None || !PyObject_TypeCheck(h->node, &NodeBaseType) ||
	    ((NodeBase *)h->node)->level < 2 || p->grad_pending == NULL ||
	    !PyDict_Check(p->grad_pending)) {
		ret = 0;
		goto out;
	}
	entry = PyTuple_Pack(3, h->pid, h->node, args[0]);
	if (entry == NULL)
		goto out;
	ret = PyDict_SetItem(p->grad_pending, h->pid, entry);
	Py_DECREF(entry);
	if (ret == 0 && !p->grad_queued) {
		if ((r = PyObject_CallMethodNoArgs((PyObject *)p, s_grads_queue)) == NULL)
			ret = -1;
		else
			Py_DECREF(r);
	}
out:
	Py_DECREF(g);
	Py_DECREF(p);
	if (ret < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *
paramhook_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	static char *names[] = { "probe", "pid", "node", NULL };
	PyObject *probe, *pid, *node;
	ParamHook *h;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OO:ParamHook", names, &ProbeBaseType,
					 &probe, &pid, &node))
		return NULL;
	h = (ParamHook *)type->tp_alloc(type, 0);
	if (h == NULL)
		return NULL;
	h->probe = (ProbeBase *)Py_NewRef(probe);
	h->pid = Py_NewRef(pid);
	h->node = Py_NewRef(node);
	h->vectorcall = paramhook_call;
	return (PyObject *)h;
}

static int
paramhook_traverse(ParamHook *h, visitproc visit, void *arg)
{
	Py_VISIT(h->probe);
	Py_VISIT(h->pid);
	Py_VISIT(h->node);
	return 0;
}

static int
paramhook_clear(ParamHook *h)
{
	Py_CLEAR(h->probe);
	Py_CLEAR(h->pid);
	Py_CLEAR(h->node);
	return 0;
}

static void
paramhook_dealloc(ParamHook *h)
{
	PyObject_GC_UnTrack(h);
	paramhook_clear(h);
	Py_TYPE(h)->tp_free((PyObject *)h);
}

static PyTypeObject ParamHookType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tensormorph_probe._hook.ParamHook",
	.tp_basicsize = sizeof(ParamHook),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
	.tp_doc = "ParamHook(probe, pid, node): a parameter's post-accumulate-grad hook.",
	.tp_new = paramhook_new,
	.tp_dealloc = (destructor)paramhook_dealloc,
	.tp_traverse = (traverseproc)paramhook_traverse,
	.tp_clear = (inquiry)paramhook_clear,
	.tp_call = PyVectorcall_Call,
	.tp_vectorcall_offset = offsetof(ParamHook, vectorcall),
};

/*
 * The ENTER of a non-root node, as Probe._enter does it: without tensors
 * at level 0, else with x (the call's one positional argument, a tensor),
 * and its gradient hook from level 2.  Returns the call's start and
 * number.
 */
static int
c_enter(ProbeBase *p, NodeBase *n, PyObject *x, long long *start, unsigned long long *call)
{
	long long t = now_ns() - p->t0;
	int level = n->level;

	n->depth++;
	if (n->epoch != (long long)p->step) {
		n->epoch = (long long)p->step;
		n->count = 0;
	}
	*call = ++n->count;
	*start = t;
	p->active++;
	if (level < 1) {
		if (room(p, 0) < 0)
			goto fail;
		put_event(p, EV_ENTER, PHASE_FWD, n->id, *call, t, t, 0, level, 0);
		if (after_event(p) < 0)
			goto fail;
	} else {
		struct ev1 e = { EV_ENTER, PHASE_FWD, SLOT_IN, level, 0, n->id, *call, t, t, 0 };

		if ((level >= 2 && add_grad_hook(p, x, n, *call, SLOT_GRAD_IN, 0, 0) < 0) ||
		    emit1(p, &e, x) < 0)
			goto fail;
	}
	return 0;
fail:
	/* the call does not happen: as if it never began */
	n->depth--;
	n->count--;
	p->active--;
	return -1;
}

/* The EXIT of a non-root node whose output is one tensor, as Probe._exit. */
static int
c_exit(ProbeBase *p, NodeBase *n, long long start, unsigned long long call, PyObject *out)
{
	long long t = now_ns() - p->t0;
	int level = n->level;
	struct ev1 e = { EV_EXIT, PHASE_FWD, SLOT_OUT, level, 0, n->id, call, t, start, t };

	n->depth--;
	p->active--;
	if (emit1(p, &e, out) < 0)
		return -1;
	return level >= 2 ? add_grad_hook(p, out, n, call, SLOT_GRAD_OUT, 0, 0) : 0;
}

static PyObject *
args_tuple(PyObject *const *args, Py_ssize_t nargs)
{
	PyObject *t = PyTuple_New(nargs);
	Py_ssize_t i;

	if (t == NULL)
		return NULL;
	for (i = 0; i < nargs; i++) {
		Py_INCREF(args[i]);
		PyTuple_SET_ITEM(t, i, args[i]);
	}
	return t;
}

static PyObject *
kwargs_dict(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *d = PyDict_New();
	Py_ssize_t i, nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;

	if (d == NULL)
		return NULL;
	for (i = 0; i < nkw; i++) {
		if (PyDict_SetItem(d, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0) {
			Py_DECREF(d);
			return NULL;
		}
	}
	return d;
}

/* Python's _exit(node, start, call, out); out NULL: the forward raised,
 * _raise(node, start, call, exception) instead, and the exception is kept
 * whatever _raise does. */
static int
slow_exit(ProbeBase *p, NodeBase *n, long long start, unsigned long long call, PyObject *out)
{
	PyObject *et = NULL, *ev = NULL, *tb = NULL, *r, *a[5];

	if (out == NULL) {
		PyErr_Fetch(&et, &ev, &tb);
		PyErr_NormalizeException(&et, &ev, &tb);
		if (tb && ev)
			PyException_SetTraceback(ev, tb);
	}
	a[0] = (PyObject *)p;
	a[1] = (PyObject *)n;
	a[2] = PyLong_FromLongLong(start);
	a[3] = PyLong_FromUnsignedLongLong(call);
	a[4] = out ? out : ev ? ev : Py_None;
	r = (a[2] && a[3]) ? PyObject_VectorcallMethod(out ? s_exit : s_raise, a,
						     5 | PY_VECTORCALL_ARGUMENTS_OFFSET,
						     NULL) : NULL;
	Py_XDECREF(a[2]);
	Py_XDECREF(a[3]);
	Py_XDECREF(r);
	if (out == NULL) {
		if (r == NULL)
			PyErr_Clear();  /* the forward's own error is the one to see */
		PyErr_Restore(et, ev, tb);
		return -1;
	}
	return r ? 0 : -1;
}

static PyObject *
forward_body(Forward *f, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
	Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
	ProbeBase *p = f->probe;
	NodeBase *n = f->node;
	PyObject *module, *inner, *out, *r;
	long long start;
	unsigned long long call;
	int fast;

	if (nargs < 1) {
		PyErr_SetString(PyExc_TypeError, "forward() needs its module");
		return NULL;
	}
	module = args[0];
	if (p == NULL || module != f->module) {
		/* a copy (deepcopy rebinds the method), or the probe is gone:
		 * the class's forward, as if never wrapped */
		PyObject *fn = PyObject_GetAttr((PyObject *)Py_TYPE(module),
						f->name ? f->name : s_forward);

		if (fn == NULL)
			return NULL;
		r = PyObject_Vectorcall(fn, args, nargsf, kwnames);
		Py_DECREF(fn);
		return r;
	}
	/* held: close() may release this wrapper during the forward */
	Py_INCREF(p);
	Py_INCREF(n);
	inner = f->inner;
	Py_INCREF(inner);
	if (f->scope)
		p->eval_depth++;
	/* the common call in C: a node at level 0, or one whose only
	 * argument is a tensor; roots and the rest go to Python */
	fast = n->observed && !n->is_root && !n->ops && !p->closed && p->evaddr &&
	       (n->level < 1 || (nargs == 2 && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0) &&
				 Py_IS_TYPE(args[1], (PyTypeObject *)tensor_type)));
	if (fast) {
		if (c_enter(p, n, nargs == 2 ? args[1] : NULL, &start, &call) < 0) {
			out = NULL;
			goto done;
		}
	} else {
		PyObject *a[4], *sc;

		a[0] = (PyObject *)p;
		a[1] = (PyObject *)n;
		a[2] = args_tuple(args + 1, nargs - 1);
		a[3] = a[2] ? kwargs_dict(args + 1, nargs - 1, kwnames) : NULL;
		sc = a[3] ? PyObject_VectorcallMethod(s_enter, a, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET,
						      NULL) : NULL;
		Py_XDECREF(a[2]);
		Py_XDECREF(a[3]);
		if (sc == NULL) {
			out = NULL;
			goto done;
		}
		if (!PyTuple_Check(sc) || PyTuple_GET_SIZE(sc) != 2) {
			Py_DECREF(sc);
			PyErr_SetString(PyExc_SystemError, "Probe._enter must return (start, call)");
			out = NULL;
			goto done;
		}
		start = PyLong_AsLongLong(PyTuple_GET_ITEM(sc, 0));
		call = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(sc, 1));
		Py_DECREF(sc);
		if (PyErr_Occurred()) {
			out = NULL;
			goto done;
		}
	}
	out = PyObject_Vectorcall(inner, args + 1, (size_t)(nargs - 1), kwnames);
	if (out == NULL) {
		slow_exit(p, n, start, call, NULL);
		goto done;
	}
	/* (the probe may have closed during the call) */
	if (n->observed && !n->is_root && !n->ops && !p->closed && p->evaddr &&
	    Py_IS_TYPE(out, (PyTypeObject *)tensor_type)) {
		if (c_exit(p, n, start, call, out) < 0)
			Py_CLEAR(out);
		goto done;
	}
	if (slow_exit(p, n, start, call, out) < 0)
		Py_CLEAR(out);
done:
	if (f->scope)
		p->eval_depth--;
	Py_DECREF(inner);
	Py_DECREF(n);
	Py_DECREF(p);
	return out;
}

/* A Forward is either bound to its module as a method (a framework's root
 * method) or, for forward itself, the module's instance attribute called
 * without the module: dynamo, tracing a bound method, reaches the module a
 * second way (module.forward.__self__) and guards that both are the same
 * object with a Python lambda per module, evaluated on every call of the
 * compiled code; the attribute leaves it nothing to alias.  Copies of the
 * module get their own forward (forward_deepcopy). */
static PyObject *
forward_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
	Forward *f = (Forward *)self;
	Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), total;
	PyObject *small[8], **stack, *tmp, *r;

	if (f->bound)
		return forward_body(f, args, nargsf, kwnames);
	if (f->probe == NULL || f->module == NULL) {
		/* released: another tool that wrapped ours calls it */
		if (f->inner == NULL) {
			PyErr_SetString(PyExc_RuntimeError, "forward() of a released module");
			return NULL;
		}
		return PyObject_Vectorcall(f->inner, args, nargsf, kwnames);
	}
	if (nargsf & PY_VECTORCALL_ARGUMENTS_OFFSET) {
		/* the caller lets args[-1] be borrowed: the module goes there */
		PyObject **a = (PyObject **)args - 1;

		tmp = a[0];
		a[0] = f->module;
		r = forward_body(f, a, (size_t)(nargs + 1), kwnames);
		a[0] = tmp;
		return r;
	}
	total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
	stack = total < 8 ? small : PyMem_Malloc((size_t)(total + 1) * sizeof(PyObject *));
	if (stack == NULL)
		return PyErr_NoMemory();
	stack[0] = f->module;
	memcpy(stack + 1, args, (size_t)total * sizeof(PyObject *));
	r = forward_body(f, stack, (size_t)(nargs + 1), kwnames);
	if (stack != small)
		PyMem_Free(stack);
	return r;
}

/* ------------------------------------------------------------ Forward */

static PyObject *
forward_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	static char *names[] = { "probe", "node", "module", "inner", "name", "scope", "bound",
				 NULL };
	PyObject *probe, *node, *module, *inner, *name = NULL;
	int scope = 0, bound = 1;
	Forward *f;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!OO|U$pp:Forward", names, &ProbeBaseType,
					 &probe, &NodeBaseType, &node, &module, &inner, &name,
					 &scope, &bound))
		return NULL;
	if (tensor_type == NULL) {
		PyErr_SetString(PyExc_RuntimeError, "_hook.setup() was not called");
		return NULL;
	}
	f = (Forward *)type->tp_alloc(type, 0);
	if (f == NULL)
		return NULL;
	f->probe = (ProbeBase *)(Py_INCREF(probe), probe);
	f->node = (NodeBase *)(Py_INCREF(node), node);
	f->module = (Py_INCREF(module), module);
	f->inner = (Py_INCREF(inner), inner);
	f->name = name ? (Py_INCREF(name), name) : NULL;
	f->scope = scope;
	f->bound = bound;
	f->vectorcall = forward_call;
	return (PyObject *)f;
}

static int
forward_traverse(Forward *f, visitproc visit, void *arg)
{
	Py_VISIT(f->probe);
	Py_VISIT(f->node);
	Py_VISIT(f->module);
	Py_VISIT(f->inner);
	Py_VISIT(f->dict);
	Py_VISIT(f->name);
	return 0;
}

static int
forward_clear(Forward *f)
{
	Py_CLEAR(f->probe);
	Py_CLEAR(f->node);
	Py_CLEAR(f->module);
	Py_CLEAR(f->inner);
	Py_CLEAR(f->dict);
	Py_CLEAR(f->name);
	return 0;
}

static void
forward_dealloc(Forward *f)
{
	PyObject_GC_UnTrack(f);
	forward_clear(f);
	Py_TYPE(f)->tp_free((PyObject *)f);
}

/* Lets go of the probe, the node and the module: a copy of the module
 * made while it was observed keeps this object, and must keep nothing.
 * An attribute (not bound) keeps the forward it wraps, which another tool
 * that wrapped it may still call: no copy holds it (forward_deepcopy). */
static PyObject *
forward_release(PyObject *self, PyObject *unused)
{
	Forward *f = (Forward *)self;

	(void)unused;
	Py_CLEAR(f->probe);
	Py_CLEAR(f->node);
	Py_CLEAR(f->module);
	if (f->bound)
		Py_CLEAR(f->inner);
	Py_RETURN_NONE;
}

/* A deep copy of an observed module (an EMA copy, a compiled twin) is not
 * observed: its forward is the one this wraps, bound to the copy. */
static PyObject *
forward_deepcopy(PyObject *self, PyObject *memo)
{
	Forward *f = (Forward *)self;
	PyObject *copy, *r;

	if (f->inner == NULL)
		Py_RETURN_NONE;
	copy = PyImport_ImportModule("copy");
	if (copy == NULL)
		return NULL;
	r = PyObject_CallMethod(copy, "deepcopy", "OO", f->inner, memo);
	Py_DECREF(copy);
	return r;
}

/* Pickled as a bound method is, getattr(module, name): unpickled, the
 * module's class forward. */
static PyObject *
forward_reduce(PyObject *self, PyObject *unused)
{
	Forward *f = (Forward *)self;
	PyObject *owner = f->module, *b, *ga;

	(void)unused;
	if (owner == NULL && f->inner != NULL && PyMethod_Check(f->inner))
		owner = PyMethod_GET_SELF(f->inner);
	if (owner == NULL) {
		PyErr_SetString(PyExc_TypeError, "cannot pickle a released forward");
		return NULL;
	}
	b = PyImport_ImportModule("builtins");
	ga = b != NULL ? PyObject_GetAttrString(b, "getattr") : NULL;
	Py_XDECREF(b);
	if (ga == NULL)
		return NULL;
	return Py_BuildValue("N(OO)", ga, owner, f->name ? f->name : s_forward);
}

static PyMethodDef forward_methods[] = {
	{ "release", forward_release, METH_NOARGS,
	  "Stops observing: calls go to the class's forward from now." },
	{ "__deepcopy__", forward_deepcopy, METH_O,
	  "The forward it wraps, bound to the module's copy." },
	{ "__reduce__", forward_reduce, METH_NOARGS,
	  "getattr(module, name), as a bound method pickles." },
	{ NULL, NULL, 0, NULL }
};

/* What the traced path (_compiled.py) reads: dynamo reads these members
 * and guards on what it read. */
static PyMemberDef forward_members[] = {
	{ "_tm_probe", T_OBJECT, offsetof(Forward, probe), READONLY, NULL },
	{ "_tm_node", T_OBJECT, offsetof(Forward, node), READONLY, NULL },
	{ "_tm_module", T_OBJECT, offsetof(Forward, module), READONLY, NULL },
	{ "_tm_inner", T_OBJECT, offsetof(Forward, inner), READONLY, NULL },
	{ "_tm_bound", T_INT, offsetof(Forward, bound), READONLY, NULL },
	{ NULL, 0, 0, 0, NULL }
};

/* What may change of a node while compiled code runs, as one int that
 * dynamo reads and guards on (_compiled.traced_call): the node's level
 * << 1 | 1 if it is observed, -1 once released.  The rest of what the
 * traced path reads never changes for one Forward and reaches dynamo as a
 * constant (_compiled._static), with no guard evaluated on each call. */
static PyObject *
forward_mode(PyObject *self, void *unused)
{
	Forward *f = (Forward *)self;

	(void)unused;
	if (f->probe == NULL || f->node == NULL)
		return PyLong_FromLong(-1);
	return PyLong_FromLong((long)f->node->level * 2 + (f->node->observed ? 1 : 0));
}

/* No __dict__ attribute, though a Forward keeps attributes in its dict
 * (tp_dictoffset): dynamo guards that an object it calls has no __call__
 * in its __dict__, a dictionary lookup per module on every call of the
 * compiled code, unless the object has no __dict__ to look in. */
static PyGetSetDef forward_getset[] = {
	{ "_tm_mode", forward_mode, NULL, "level << 1 | observed, -1 released (_compiled.py)",
	  NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

static PyTypeObject ForwardType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tensormorph_probe._hook.Forward",
	.tp_basicsize = sizeof(Forward),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
	.tp_doc = "Forward(probe, node, module, inner): a module's forward, observed; "
		  "bound to the module as its forward method.",
	.tp_new = forward_new,
	.tp_dealloc = (destructor)forward_dealloc,
	.tp_traverse = (traverseproc)forward_traverse,
	.tp_clear = (inquiry)forward_clear,
	.tp_call = PyVectorcall_Call,
	.tp_vectorcall_offset = offsetof(Forward, vectorcall),
	.tp_dictoffset = offsetof(Forward, dict),
	.tp_methods = forward_methods,
	.tp_members = forward_members,
	.tp_getset = forward_getset,
};

/* ------------------------------------------------------------ Discover */

/* Whether module's forward is one this probe wraps: a module known to the
 * probe, which _discover would return from at once (the model's and a
 * loss's calls, every step). */
static int
wrapped_by(ProbeBase *p, PyObject *module)
{
	PyObject *d = PyObject_GenericGetDict(module, NULL), *fw;
	int known;

	if (d == NULL || !PyDict_Check(d)) {
		PyErr_Clear();
		Py_XDECREF(d);
		return 0;
	}
	fw = PyDict_GetItemWithError(d, s_forward);
	if (fw != NULL && Py_IS_TYPE(fw, &ForwardType))
		known = ((Forward *)fw)->probe == p && ((Forward *)fw)->module == module;
	else
		known = fw != NULL && PyMethod_Check(fw) &&
			Py_IS_TYPE(PyMethod_GET_FUNCTION(fw), &ForwardType) &&
			((Forward *)PyMethod_GET_FUNCTION(fw))->probe == p &&
			PyMethod_GET_SELF(fw) == module;
	PyErr_Clear();
	Py_DECREF(d);
	return known;
}

static PyObject *
discover_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
	Discover *d = (Discover *)self;
	PyObject *p = NULL, *r;

	if (PyVectorcall_NARGS(nargsf) < 1) {
		PyErr_SetString(PyExc_TypeError, "__call__() needs its module");
		return NULL;
	}
#if PY_VERSION_HEX >= 0x030D0000
	if (d->probe && PyWeakref_GetRef(d->probe, &p) < 0)
		return NULL;
#else
	if (d->probe) {
		p = PyWeakref_GetObject(d->probe);
		if (p == Py_None)
			p = NULL;
		Py_XINCREF(p);
	}
#endif
	if (p != NULL) {
		ProbeBase *pb = (ProbeBase *)p;

		if (!pb->active && !pb->closed && !wrapped_by(pb, args[0])) {
			r = PyObject_CallMethodOneArg(p, s_discover, args[0]);
			if (r == NULL) {
				Py_DECREF(p);
				return NULL;
			}
			Py_DECREF(r);
		}
		Py_DECREF(p);
	}
	return PyObject_Vectorcall(d->orig, args, nargsf, kwnames);
}

static PyObject *
discover_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	static char *names[] = { "probe", "orig", NULL };
	PyObject *probe, *orig;
	Discover *d;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O:Discover", names, &ProbeBaseType,
					 &probe, &orig))
		return NULL;
	d = (Discover *)type->tp_alloc(type, 0);
	if (d == NULL)
		return NULL;
	if ((d->probe = PyWeakref_NewRef(probe, NULL)) == NULL) {
		Py_DECREF(d);
		return NULL;
	}
	d->orig = (Py_INCREF(orig), orig);
	d->vectorcall = discover_call;
	return (PyObject *)d;
}

/* As a class attribute it binds like a function: module(x) calls it with
 * the module first. */
static PyObject *
discover_get(PyObject *self, PyObject *obj, PyObject *type)
{
	(void)type;
	if (obj == NULL || obj == Py_None)
		return Py_NewRef(self);
	return PyMethod_New(self, obj);
}

static int
discover_traverse(Discover *d, visitproc visit, void *arg)
{
	Py_VISIT(d->probe);
	Py_VISIT(d->orig);
	return 0;
}

static int
discover_clear(Discover *d)
{
	Py_CLEAR(d->probe);
	Py_CLEAR(d->orig);
	return 0;
}

static void
discover_dealloc(Discover *d)
{
	PyObject_GC_UnTrack(d);
	discover_clear(d);
	Py_TYPE(d)->tp_free((PyObject *)d);
}

static PyMemberDef discover_members[] = {
	{ "__wrapped__", T_OBJECT, offsetof(Discover, orig), READONLY, NULL },
	{ NULL, 0, 0, 0, NULL }
};

static PyTypeObject DiscoverType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tensormorph_probe._hook.Discover",
	.tp_basicsize = sizeof(Discover),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
		    Py_TPFLAGS_METHOD_DESCRIPTOR,
	.tp_doc = "Discover(probe, orig): nn.Module.__call__ while the probe looks for the model.",
	.tp_new = discover_new,
	.tp_dealloc = (destructor)discover_dealloc,
	.tp_traverse = (traverseproc)discover_traverse,
	.tp_clear = (inquiry)discover_clear,
	.tp_call = PyVectorcall_Call,
	.tp_vectorcall_offset = offsetof(Discover, vectorcall),
	.tp_descr_get = discover_get,
	.tp_members = discover_members,
};

/* ------------------------------------------------------------ ProbeBase */

static int
probe_traverse(ProbeBase *p, visitproc visit, void *arg)
{
	Py_VISIT(p->dtypes);
	Py_VISIT(p->seen);
	Py_VISIT(p->keep);
	Py_VISIT(p->grad_pending);
	Py_VISIT(p->last);
	return 0;
}

static int
probe_clear(ProbeBase *p)
{
	Py_CLEAR(p->dtypes);
	Py_CLEAR(p->seen);
	Py_CLEAR(p->keep);
	Py_CLEAR(p->grad_pending);
	Py_CLEAR(p->last);
	return 0;
}

static PyMethodDef probe_methods[] = {
	{ "_event1", (PyCFunction)(void (*)(void))probe_event1, METH_FASTCALL,
	  "_event1(kind, phase, node, call, t, start, end, x, slot_kind, level, slot_index)" },
	{ "_grad_hook", (PyCFunction)(void (*)(void))probe_grad_hook, METH_FASTCALL,
	  "_grad_hook(x, node, call, slot_kind, index)" },
	{ "_param_events", (PyCFunction)(void (*)(void))probe_param_events, METH_FASTCALL,
	  "_param_events(entries, slot_kind, phase, call, t, grad): a PARAM event for each "
	  "(pid, node, param) of entries whose node is at level >= 2 (of param.grad when grad)" },
	{ NULL, NULL, 0, NULL }
};

/* Also the last step of a subclass instance's dealloc, whose type
 * (a heap type) subtype_dealloc releases itself. */
static void
probe_dealloc(ProbeBase *p)
{
	PyObject_GC_UnTrack(p);
	probe_clear(p);
	Py_TYPE(p)->tp_free((PyObject *)p);
}

#define M(name, type, field) { name, type, offsetof(ProbeBase, field), 0, NULL }
static PyMemberDef probe_members[] = {
	M("_nev", T_UINT, nev),
	M("_nt", T_UINT, nt),
	M("_bev", T_UINT, bev),
	M("_bt", T_UINT, bt),
	M("step_count", T_ULONGLONG, step),
	M("_active", T_INT, active),
	M("_eval_depth", T_INT, eval_depth),
	M("_scaler_watch", T_BOOL, scaler_watch),
	M("_t0", T_LONGLONG, t0),
	M("_closed", T_BOOL, closed),
	M("_force_dev", T_BOOL, force_dev),
	M("_rows_on", T_BOOL, rows_on),
	M("_evaddr", T_ULONGLONG, evaddr),
	M("_taddr", T_ULONGLONG, taddr),
	M("_bnev_addr", T_ULONGLONG, bnev_addr),
	M("_live_addr", T_ULONGLONG, live_addr),
	M("_stats_addr", T_ULONGLONG, stats_addr),
	M("_reuse_min1", T_ULONGLONG, reuse_min1),
	M("_reuse_min2", T_ULONGLONG, reuse_min2),
	M("reused", T_ULONGLONG, reused),
	M("_dtypes", T_OBJECT, dtypes),
	M("_seen", T_OBJECT, seen),
	M("_keep", T_OBJECT, keep),
	M("_grad_pending", T_OBJECT, grad_pending),
	M("_grad_queued", T_BOOL, grad_queued),
	M("_last", T_OBJECT, last),
	M("_last_min", T_ULONGLONG, last_min),
	{ NULL, 0, 0, 0, NULL }
};
#undef M

static PyTypeObject ProbeBaseType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tensormorph_probe._hook.ProbeBase",
	.tp_basicsize = sizeof(ProbeBase),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
	.tp_doc = "The probe's batch state, shared by Python and the C fast path.",
	.tp_new = PyType_GenericNew,
	.tp_dealloc = (destructor)probe_dealloc,
	.tp_traverse = (traverseproc)probe_traverse,
	.tp_clear = (inquiry)probe_clear,
	.tp_members = probe_members,
	.tp_methods = probe_methods,
};

/* ------------------------------------------------------------ NodeBase */

#define M(name, type, field) { name, type, offsetof(NodeBase, field), 0, NULL }
static PyMemberDef node_members[] = {
	M("id", T_UINT, id),
	M("level", T_INT, level),
	M("observed", T_BOOL, observed),
	M("is_root", T_BOOL, is_root),
	M("ops", T_BOOL, ops),
	M("depth", T_INT, depth),
	M("epoch", T_LONGLONG, epoch),
	M("count", T_ULONGLONG, count),
	{ NULL, 0, 0, 0, NULL }
};
#undef M

static PyTypeObject NodeBaseType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tensormorph_probe._hook.NodeBase",
	.tp_basicsize = sizeof(NodeBase),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "A node's id, level and call counters, shared with the C fast path.",
	.tp_new = PyType_GenericNew,
	.tp_members = node_members,
};

/* ------------------------------------------------------------ module */

static PyObject *
setup(PyObject *mod, PyObject *args)
{
	PyObject *tensor, *strd, *enabled;

	(void)mod;
	if (!PyArg_ParseTuple(args, "O!OO:setup", &PyType_Type, &tensor, &strd, &enabled))
		return NULL;
	Py_INCREF(tensor);
	Py_INCREF(strd);
	Py_INCREF(enabled);
	Py_XDECREF(tensor_type);
	Py_XDECREF(strided);
	Py_XDECREF(grad_enabled);
	tensor_type = tensor;
	strided = strd;
	grad_enabled = enabled;
	/* what register_hook() needs; without them torch's own method */
	if (has_torch_function_unary == NULL) {
		PyObject *c = PyImport_ImportModule("torch._C"), *coll = NULL;

		if (c != NULL)
			has_torch_function_unary = PyObject_GetAttrString(c, "_has_torch_function_unary");
		if (c != NULL && (coll = PyImport_ImportModule("collections")) != NULL)
			ordered_dict = PyObject_GetAttrString(coll, "OrderedDict");
		Py_XDECREF(c);
		Py_XDECREF(coll);
		if (has_torch_function_unary == NULL || ordered_dict == NULL) {
			Py_CLEAR(has_torch_function_unary);
			Py_CLEAR(ordered_dict);
		}
		PyErr_Clear();
	}
	Py_RETURN_NONE;
}

/*
 * What this file mirrors, by libtensormorph's names (tm_layout): every
 * field's offset and size, the structs' sizes and the constants.  The
 * probe compares each with the library's table before it uses this module
 * and refuses a difference by name.
 */
#define HF(T, CT, f) \
	{ #CT "." #f ".offset", (long long)offsetof(struct T, f) }, \
	{ #CT "." #f ".sizeof", (long long)sizeof(((struct T *)0)->f) }
static const struct {
	const char *name;
	long long value;
} hook_layout[] = {
	{ "tm_rec_tensor.sizeof", (long long)sizeof(struct rec_tensor) },
	HF(rec_tensor, tm_rec_tensor, data), HF(rec_tensor, tm_rec_tensor, numel),
	HF(rec_tensor, tm_rec_tensor, have), HF(rec_tensor, tm_rec_tensor, slot_index),
	HF(rec_tensor, tm_rec_tensor, device_index), HF(rec_tensor, tm_rec_tensor, slot_kind),
	HF(rec_tensor, tm_rec_tensor, dtype), HF(rec_tensor, tm_rec_tensor, rank),
	HF(rec_tensor, tm_rec_tensor, device_type), HF(rec_tensor, tm_rec_tensor, level),
	HF(rec_tensor, tm_rec_tensor, capture), HF(rec_tensor, tm_rec_tensor, have_hist),
	HF(rec_tensor, tm_rec_tensor, done), HF(rec_tensor, tm_rec_tensor, shape),
	HF(rec_tensor, tm_rec_tensor, stat), HF(rec_tensor, tm_rec_tensor, hist_lo),
	HF(rec_tensor, tm_rec_tensor, hist_hi), HF(rec_tensor, tm_rec_tensor, hist),
	{ "tm_rec_event.sizeof", (long long)sizeof(struct rec_event) },
	HF(rec_event, tm_rec_event, step), HF(rec_event, tm_rec_event, time_ns),
	HF(rec_event, tm_rec_event, start_ns), HF(rec_event, tm_rec_event, end_ns),
	HF(rec_event, tm_rec_event, node), HF(rec_event, tm_rec_event, call),
	HF(rec_event, tm_rec_event, ntensors), HF(rec_event, tm_rec_event, op_index),
	HF(rec_event, tm_rec_event, kind), HF(rec_event, tm_rec_event, phase),
	HF(rec_event, tm_rec_event, level), HF(rec_event, tm_rec_event, op_flags),
	{ "TM_MAX_RANK", MAX_RANK }, { "TM_STAT__COUNT", STAT_COUNT },
	{ "TM_HIST_BINS", HIST_BINS },
	{ "TM_EV_ENTER", EV_ENTER }, { "TM_EV_EXIT", EV_EXIT }, { "TM_EV_BWD", EV_BWD },
	{ "TM_EV_PARAM", EV_PARAM }, { "TM_PHASE_FWD", PHASE_FWD },
	{ "TM_PHASE_BWD", PHASE_BWD }, { "TM_SLOT_OUT", SLOT_OUT },
	{ "TM_SLOT_IN", SLOT_IN }, { "TM_SLOT_GRAD_OUT", SLOT_GRAD_OUT },
	{ "TM_SLOT_GRAD_IN", SLOT_GRAD_IN },
};

/* hook_layout as a dict {name: value}. */
static PyObject *
layout(PyObject *mod, PyObject *unused)
{
	PyObject *d = PyDict_New(), *v;
	size_t i;

	(void)mod;
	(void)unused;
	if (d == NULL)
		return NULL;
	for (i = 0; i < sizeof(hook_layout) / sizeof(hook_layout[0]); i++) {
		v = PyLong_FromLongLong(hook_layout[i].value);
		if (v == NULL || PyDict_SetItemString(d, hook_layout[i].name, v) < 0) {
			Py_XDECREF(v);
			Py_DECREF(d);
			return NULL;
		}
		Py_DECREF(v);
	}
	return d;
}

/*
 * host_stats' table of the rows reduced first, by address (open
 * addressing, row index + 1, half full at most): the row of data ptr with
 * the same numel, dtype and level, or -1 with *slot the empty entry for
 * it.  A prefix view or a reinterpretation of the same address is another
 * row.
 */
static Py_ssize_t
first_row(const struct rec_tensor *rows, const Py_ssize_t *firsts, size_t mask, uint64_t ptr,
	  uint64_t numel, long dtype, int lv, size_t *slot)
{
	size_t h = (size_t)((ptr >> 4) * 0x9E3779B97F4A7C15ULL) & mask;

	for (; firsts[h]; h = (h + 1) & mask) {
		const struct rec_tensor *r = &rows[firsts[h] - 1];

		if (r->data == ptr && r->numel == numel && r->dtype == (uint8_t)dtype &&
		    r->level == lv)
			return firsts[h] - 1;
	}
	*slot = h;
	return -1;
}

/*
 * host_stats(xs, levels, dtypes, out, stats): _compiled.host_stats's rows,
 * in one call: for each host tensor of xs a struct tm_rec_tensor at out
 * (an address, len(xs) rows, zeroed) with its metadata, its slot from
 * levels (pairs: level | slot kind << 2 | first slot index << 8, and how
 * many tensors take the next indexes) and its stats computed by
 * tm_recorder_stats (the address stats), as eager mode computes them.  A
 * tensor passed again (a module's output is the next one's input) is
 * reduced once.  Rows as the batch takes them: no address, level 0, not
 * done.
 */
static PyObject *
host_stats(PyObject *unused, PyObject *args)
{
	PyObject *xs, *levels, *dtypes, *hold = NULL, *shape = NULL, *dt = NULL, *y = NULL;
	unsigned long long out_addr, stats_addr;
	struct rec_tensor *rows, *rt;
	Py_ssize_t n, nl, i, k, j, rank;
	long long *codes = NULL;
	Py_ssize_t *src = NULL, *firsts = NULL;
	size_t mask = 1, h = 0;

	(void)unused;
	if (!PyArg_ParseTuple(args, "O!O!O!KK:host_stats", &PyList_Type, &xs, &PyList_Type,
			      &levels, &PyDict_Type, &dtypes, &out_addr, &stats_addr))
		return NULL;
	n = PyList_GET_SIZE(xs);
	nl = PyList_GET_SIZE(levels);
	rows = (struct rec_tensor *)(uintptr_t)out_addr;
	/* first_row's table: a region passes a few hundred tensors, half of
	 * them again */
	while (mask < 2 * (size_t)n)
		mask <<= 1;
	codes = PyMem_Calloc((size_t)n + 1, sizeof(*codes));
	src = PyMem_Calloc((size_t)n + 1, sizeof(*src));
	firsts = PyMem_Calloc(mask, sizeof(*firsts));
	mask--;
	hold = PyList_New(0);
	if (codes == NULL || src == NULL || firsts == NULL || hold == NULL) {
		PyErr_NoMemory();
		goto fail;
	}
	for (k = 0, i = 0; k + 1 < nl; k += 2) {
		long long code = PyLong_AsLongLong(PyList_GET_ITEM(levels, k));
		long long cnt = PyLong_AsLongLong(PyList_GET_ITEM(levels, k + 1));

		if (PyErr_Occurred())
			goto fail;
		for (j = 0; j < cnt && i < n; j++)
			codes[i++] = code + j * 256;
	}
	for (i = 0; i < n; i++) {
		PyObject *x = PyList_GET_ITEM(xs, i);
		long long code = codes[i];
		int lv = (int)(code & 3) > 2 ? 2 : (int)(code & 3), v;
		uint64_t numel, ptr = 0;
		int64_t dims[MAX_RANK];
		long dtype;

		src[i] = -1;
		if (read_meta(x, dtypes, dims, &rank, &numel, &dtype, &shape, &dt) < 0)
			goto fail;
		if (rank > MAX_RANK) {          /* as the Python path cuts it */
			dims[MAX_RANK - 1] = -1;
			rank = MAX_RANK;
		}
		if (dtype < 0)
			dtype = 0;              /* as the Python path: _DTYPES.get(dtype, 0) */
		Py_CLEAR(shape);
		Py_CLEAR(dt);
		if (lv) {
			if ((v = get_bool(x, s_is_contiguous, 1)) < 0)
				goto fail;
			if (v) {
				ptr = data_ptr(x);
				if (PyErr_Occurred())
					goto fail;
				/* the same data at the same level: reduced once */
				j = ptr ? first_row(rows, firsts, mask, ptr, numel, dtype, lv, &h) : -1;
				if (j >= 0) {
					src[i] = j;
					ptr = 0;
					lv = 0;
				} else if (ptr) {
					firsts[h] = i + 1;
				}
			} else {
				y = PyObject_CallMethodNoArgs(x, s_contiguous);
				if (y == NULL || PyList_Append(hold, y) < 0)
					goto fail;
				ptr = data_ptr(y);
				Py_CLEAR(y);
				if (PyErr_Occurred())
					goto fail;
			}
		}
		rt = rows + i;
		rt->data = ptr;
		rt->numel = numel;
		rt->have = 0;
		rt->slot_index = (uint16_t)(code >> 8);
		rt->device_index = 0;
		rt->slot_kind = (uint8_t)((code >> 2) & 63);
		rt->dtype = (uint8_t)dtype;
		rt->rank = (uint8_t)rank;
		rt->device_type = 0;
		rt->level = (uint8_t)lv;
		rt->capture = 0;
		rt->have_hist = 0;
		rt->done = 0;
		memcpy(rt->shape, dims, (size_t)rank * sizeof(dims[0]));
	}
	if (n && ((stats_fn)(uintptr_t)stats_addr)(NULL, rows, (size_t)n) != 0) {
		PyErr_SetString(PyExc_RuntimeError, "host_stats: tm_recorder_stats failed");
		goto fail;
	}
	for (i = 0; i < n; i++) {
		rt = rows + i;
		if (src[i] >= 0) {
			const struct rec_tensor *st = rows + src[i];

			rt->have = st->have;
			rt->have_hist = st->have_hist;
			memcpy(rt->stat, st->stat, sizeof(*rt) - offsetof(struct rec_tensor, stat));
		}
	}
	for (i = 0; i < n; i++) {
		rows[i].data = 0;
		rows[i].level = 0;
		rows[i].done = 0;
	}
	PyMem_Free(codes);
	PyMem_Free(src);
	PyMem_Free(firsts);
	Py_DECREF(hold);
	Py_RETURN_NONE;
fail:
	PyMem_Free(codes);
	PyMem_Free(src);
	PyMem_Free(firsts);
	Py_XDECREF(hold);
	Py_XDECREF(shape);
	Py_XDECREF(dt);
	Py_XDECREF(y);
	return NULL;
}

/* Probe._micro = call: the root call's number. */
static int
set_micro(ProbeBase *p, unsigned long long call)
{
	PyObject *v = PyLong_FromUnsignedLongLong(call);
	int r;

	if (v == NULL)
		return -1;
	r = PyObject_SetAttr((PyObject *)p, s_micro, v);
	Py_DECREF(v);
	return r;
}

/* Probe._root_depth += d (an attribute of the Python probe). */
static int
root_depth_add(ProbeBase *p, long d)
{
	PyObject *v = PyObject_GetAttr((PyObject *)p, s_root_depth), *nv;
	long depth;
	int r;

	if (v == NULL)
		return -1;
	depth = PyLong_AsLong(v);
	Py_DECREF(v);
	if (depth == -1 && PyErr_Occurred())
		return -1;
	if ((nv = PyLong_FromLong(depth + d)) == NULL)
		return -1;
	r = PyObject_SetAttr((PyObject *)p, s_root_depth, nv);
	Py_DECREF(nv);
	return r;
}

/*
 * flush_events(p, meta, nevents, e, by_id, hb, h, t, callv, first, levels,
 * sb): a compiled region's events from e on into p's batch, as
 * _compiled.run_flush packs them, while they are its common kinds: host
 * tensors only (their rows at hb, from row h on), and level-0 events of
 * static sizes (their rows constant, at sb, made once by _compiled._plan).
 * A root call's ENTER moves the step as an eager one does, by
 * Probe._root_call (Python); the
 * region's first event (e 0) calls first(p, node, levels) after its call
 * is counted, as run_flush does (the step's regions).  A model compiled as
 * one region is then one call here a step, no event of it in Python.
 * meta: META_INTS int64 per event (kind, node, level, tensors, per-tensor
 * ints, their offset in the table, the event's ENTER for an EXIT, its
 * first row at sb or -1); callv: int64
 * per event, the call numbers (an EXIT's read from its ENTER's).  Returns
 * (the first event left to Python, h).
 */
static PyObject *
flush_events(PyObject *unused, PyObject *args)
{
	ProbeBase *p;
	PyObject *by_id, *first, *levels, *r;
	unsigned long long meta_addr, hb_addr, callv_addr, sb_addr;
	Py_ssize_t nevents, e, h;
	long long t, *callv;
	const long long *meta;
	const struct rec_tensor *hb, *sb;
	NodeBase *node = NULL;

	(void)unused;
	if (!PyArg_ParseTuple(args, "O!KnnO!KnLKOOK:flush_events", &ProbeBaseType, &p, &meta_addr,
			      &nevents, &e, &PyDict_Type, &by_id, &hb_addr, &h, &t, &callv_addr,
			      &first, &levels, &sb_addr))
		return NULL;
	meta = (const long long *)(uintptr_t)meta_addr;
	callv = (long long *)(uintptr_t)callv_addr;
	hb = (const struct rec_tensor *)(uintptr_t)hb_addr;
	sb = (const struct rec_tensor *)(uintptr_t)sb_addr;
	for (; e < nevents; e++) {
		const long long *m = meta + META_INTS * e;
		int kind = (int)m[0], level = (int)m[2], root = 0;
		unsigned int nid = (unsigned int)m[1], n = (unsigned int)m[3];
		unsigned long long call;
		PyObject *key, *o;

		if ((m[4] && (m[7] < 0 || sb == NULL)) || (n && !m[4] && hb == NULL) ||
		    !p->evaddr)
			break;
		if ((key = PyLong_FromUnsignedLong(nid)) == NULL)
			return NULL;
		o = PyDict_GetItemWithError(by_id, key);
		Py_DECREF(key);
		if (o == NULL && PyErr_Occurred())
			return NULL;
		if (o == NULL || !PyObject_TypeCheck(o, &NodeBaseType) ||
		    (kind != EV_ENTER && (m[6] < 0 || m[6] >= e)))
			break;
		/* held: the Python called below may change by_id */
		Py_INCREF(o);
		node = (NodeBase *)o;
		if (kind == EV_ENTER && node->is_root) {
			/* a root call as Probe._enter counts it (the step, the
			 * micro-batch); its arguments stayed in the compiled
			 * code: a serving probe reads its batch from the worker */
			PyObject *none_args = PyTuple_New(0);

			if (none_args == NULL)
				goto fail;
			r = PyObject_CallMethodObjArgs((PyObject *)p, s_root_call, none_args, Py_None,
						       NULL);
			Py_DECREF(none_args);
			if (r == NULL)
				goto fail;
			root = PyObject_IsTrue(r);
			Py_DECREF(r);
			if (root < 0)
				goto fail;
		}
		if (kind == EV_ENTER) {
			node->depth++;
			if (node->epoch != (long long)p->step) {
				node->epoch = (long long)p->step;
				node->count = 0;
			}
			call = ++node->count;
			if (root && set_micro(p, call) < 0)
				goto fail;
		} else {
			call = (unsigned long long)callv[m[6]];
			node->depth--;
		}
		callv[e] = (long long)call;
		if (!e && first != Py_None) {
			r = PyObject_CallFunctionObjArgs(first, (PyObject *)p, o, levels, NULL);
			if (r == NULL)
				goto fail;
			Py_DECREF(r);
		}
		if (room(p, n) < 0)
			goto fail;
		/* the event's rows: its constant ones, else host_stats' next */
		if (n)
			memcpy((struct rec_tensor *)(uintptr_t)p->taddr + p->nt,
			       m[7] >= 0 ? sb + m[7] : hb + h, n * sizeof(struct rec_tensor));
		if (m[7] < 0)
			h += n;
		put_event(p, kind, PHASE_FWD, nid, call, t, t, kind == EV_ENTER ? 0 : t, level, n);
		p->nt += n;
		/* a root call ended, as run_flush counts it (before a debugger
		 * subscribed to the event may pause the model in after_event) */
		if (kind != EV_ENTER && node->is_root && root_depth_add(p, -1) < 0)
			goto fail;
		Py_CLEAR(node);
		if (after_event(p) < 0)
			return NULL;
	}
	return Py_BuildValue("nn", e, h);
fail:
	Py_XDECREF(node);
	return NULL;
}

/* set_trace_call(fn): Forward.__call__ becomes fn for whoever looks it up
 * in the type's dictionary -- torch.compile's dynamo does, to trace a call
 * of a Forward -- while calls keep going through tp_call and vectorcall
 * (forward_call): the dictionary is changed without type_setattro, which
 * would point tp_call at fn.  fn is _compiled.traced_call, code dynamo can
 * trace where forward_call is C it cannot. */
static PyObject *
set_trace_call(PyObject *unused, PyObject *fn)
{
	(void)unused;
	if (!PyCallable_Check(fn)) {
		PyErr_SetString(PyExc_TypeError, "set_trace_call needs a function");
		return NULL;
	}
	if (PyDict_SetItemString(ForwardType.tp_dict, "__call__", fn) < 0)
		return NULL;
	PyType_Modified(&ForwardType);
	Py_RETURN_NONE;
}

/* set_discover_trace_call(fn): the same for Discover (nn.Module.__call__
 * while the probe looks for the model), so that a compiled function that
 * calls the model traces fn (_compiled.traced_discover), not C. */
static PyObject *
set_discover_trace_call(PyObject *unused, PyObject *fn)
{
	(void)unused;
	if (!PyCallable_Check(fn)) {
		PyErr_SetString(PyExc_TypeError, "set_discover_trace_call needs a function");
		return NULL;
	}
	if (PyDict_SetItemString(DiscoverType.tp_dict, "__call__", fn) < 0)
		return NULL;
	PyType_Modified(&DiscoverType);
	Py_RETURN_NONE;
}

/*
 * A stop is a stop (tm_server_pause_handler): the server's thread asks,
 * without the GIL, for tm_server_hold to run in the main thread at its
 * next bytecode; there it holds the program, the GIL released, until the
 * debugger resumes it.  The library's entry points come as addresses:
 * this module does not link it (pip builds it from the probe's sources).
 */
static int (*pause_hold)(void *srv);
static void *pause_srv;
static PyObject *pause_after;   /* called after a hold: a kill ends the run there */

static int
run_hold(void *unused)
{
	int (*hold)(void *) = pause_hold;
	void *srv = pause_srv;
	int held = -1;

	(void)unused;
	if (hold && srv) {
		Py_BEGIN_ALLOW_THREADS
		held = hold(srv);
		Py_END_ALLOW_THREADS
	}
	if (held == 0 && pause_after) {
		PyObject *r = PyObject_CallNoArgs(pause_after);

		if (r == NULL)
			return -1;      /* raised in the program, as a signal handler's would */
		Py_DECREF(r);
	}
	return 0;
}

static void
request_hold(void *unused)
{
	(void)unused;
	/* -1 (the queue is full): the model stops at its next event anyway */
	(void)Py_AddPendingCall(run_hold, NULL);
}

/* pause_entry(hold, srv, after) -> the address of the pause function to
 * give tm_server_pause_handler; hold is tm_server_hold's address, srv the
 * server's, after a callable run when a hold ends (0, 0, None: forget
 * them, before the server stops). */
static PyObject *
pause_entry(PyObject *unused, PyObject *args)
{
	unsigned long long hold, srv;
	PyObject *after;

	(void)unused;
	if (!PyArg_ParseTuple(args, "KKO", &hold, &srv, &after))
		return NULL;
	pause_hold = (int (*)(void *))(uintptr_t)hold;
	pause_srv = (void *)(uintptr_t)srv;
	Py_CLEAR(pause_after);
	if (after != Py_None) {
		Py_INCREF(after);
		pause_after = after;
	}
	return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)request_hold);
}

static PyMethodDef module_methods[] = {
	{ "pause_entry", pause_entry, METH_VARARGS,
	  "pause_entry(tm_server_hold address, server address, after) -> pause function address" },
	{ "host_stats", host_stats, METH_VARARGS,
	  "host_stats(xs, levels, dtypes, out, stats): compiled regions' host tensors summarised" },
	{ "flush_events", flush_events, METH_VARARGS,
	  "flush_events(p, meta, nevents, e, by_id, hb, h, t, callv, first, levels, sb): "
	  "a compiled region's events" },
	{ "set_trace_call", set_trace_call, METH_O,
	  "set_trace_call(fn): the Python __call__ dynamo traces in place of a Forward's C call" },
	{ "set_discover_trace_call", set_discover_trace_call, METH_O,
	  "set_discover_trace_call(fn): the Python __call__ dynamo traces in place of Discover's" },
	{ "setup", setup, METH_VARARGS, "setup(torch.Tensor, torch.strided, torch.is_grad_enabled)" },
	{ "layout", layout, METH_NOARGS,
	  "{name: value}: the offsets, sizes and constants this module mirrors "
	  "(libtensormorph's tm_layout names)" },
	{ NULL, NULL, 0, NULL }
};

static struct PyModuleDef hook_module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "tensormorph_probe._hook",
	.m_doc = "The probe's per-call fast path (see _hook.c).",
	.m_size = -1,
	.m_methods = module_methods,
};

static int
intern(PyObject **slot, const char *s)
{
	*slot = PyUnicode_InternFromString(s);
	return *slot ? 0 : -1;
}

PyMODINIT_FUNC
PyInit__hook(void)
{
	PyObject *m;

	if (intern(&s_enter, "_enter") || intern(&s_exit, "_exit") || intern(&s_raise, "_raise") ||
	    intern(&s_root_depth, "_root_depth") || intern(&s_root_call, "_root_call") ||
	    intern(&s_micro, "_micro") ||
	    intern(&s_submit, "_submit") || intern(&s_submit_live, "_submit_live") ||
	    intern(&s_forward, "forward") || intern(&s_shape, "shape") ||
	    intern(&s_dtype, "dtype") || intern(&s_is_cpu, "is_cpu") ||
	    intern(&s_layout, "layout") || intern(&s_is_contiguous, "is_contiguous") ||
	    intern(&s_data_ptr, "data_ptr") || intern(&s_event1_py, "_event1_py") ||
	    intern(&s_is_inference, "is_inference") || intern(&s_version, "_version") ||
	    intern(&s_stride, "stride") || intern(&s_detach, "detach") ||
	    intern(&s_contiguous, "contiguous") || intern(&s_clone, "clone") ||
	    intern(&s_requires_grad, "requires_grad") ||
	    intern(&s_backward_hooks, "_backward_hooks") || intern(&s_reversed, "__reversed__") ||
	    intern(&s_register_hook, "register_hook") || intern(&s_discover, "_discover") ||
	    intern(&s_grad_check, "_grad_check") || intern(&s_grad, "grad") ||
	    intern(&s_grad_fn, "grad_fn") ||
	    intern(&s_register_hook_dict, "_register_hook_dict") ||
	    intern(&s_grads_queue, "_grads_queue"))
		return NULL;
	if (PyType_Ready(&ProbeBaseType) < 0 || PyType_Ready(&NodeBaseType) < 0 ||
	    PyType_Ready(&ForwardType) < 0 || PyType_Ready(&GradHookType) < 0 ||
	    PyType_Ready(&DiscoverType) < 0 || PyType_Ready(&ParamHookType) < 0)
		return NULL;
	m = PyModule_Create(&hook_module);
	if (m == NULL)
		return NULL;
	if (PyModule_AddObjectRef(m, "ProbeBase", (PyObject *)&ProbeBaseType) < 0 ||
	    PyModule_AddObjectRef(m, "NodeBase", (PyObject *)&NodeBaseType) < 0 ||
	    PyModule_AddObjectRef(m, "Forward", (PyObject *)&ForwardType) < 0 ||
	    PyModule_AddObjectRef(m, "Discover", (PyObject *)&DiscoverType) < 0 ||
	    PyModule_AddObjectRef(m, "ParamHook", (PyObject *)&ParamHookType) < 0 ||
	    PyModule_AddIntConstant(m, "META_INTS", META_INTS) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
