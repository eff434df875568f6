/*
 * tm-types.h -- the event model shared by every part of tensormorph.
 *
 * This is ARCHITECTURE sections 4-6 written down as C: what one observation of
 * a module call looks like (an event carrying tensor summaries), the node table
 * events refer to by id, run metadata, gap and crash records, and the numbered
 * error codes every tm_* function returns.  The .tmrun file, the wire protocol,
 * TQL and tmdb all speak in these structures; nothing else defines them.
 *
 * Conventions: functions return 0 (TM_OK) or a positive tm_err code; handles
 * are opaque; every *_free(NULL) is a no-op; nothing here holds global state.
 */
#ifndef TM_TYPES_H
#define TM_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

/*
 * Stable numbered error codes (zstd style).  Numbers never change meaning once
 * released; new codes are appended.  tm_strerror() gives the one-line text.
 */
enum tm_err {
	TM_OK = 0,
	TM_ERR_GENERIC = 1,       /* unspecified failure */
	TM_ERR_NOMEM = 2,         /* out of memory */
	TM_ERR_IO = 3,            /* read/write/open failed (errno kept in detail) */
	TM_ERR_INVALID_ARG = 4,   /* caller passed something meaningless */
	TM_ERR_BAD_MAGIC = 5,     /* not a .tmrun file / not a tensormorph frame */
	TM_ERR_VERSION = 6,       /* format version this library cannot read */
	TM_ERR_CRC = 7,           /* checksum mismatch: the bytes are damaged */
	TM_ERR_TRUNCATED = 8,     /* data ends early (e.g. killed writer) */
	TM_ERR_TOO_LARGE = 9,     /* a declared size or count exceeds its cap */
	TM_ERR_CORRUPT = 10,      /* structurally invalid content */
	TM_ERR_NO_INDEX = 11,     /* file has no index; scanned instead */
	TM_ERR_NOT_FOUND = 12,    /* no such node / seq / record */
	TM_ERR_END = 13,          /* iteration reached the end (not a failure) */
	TM_ERR_ADDRESS = 14,      /* malformed node address or pattern */
	TM_ERR_TQL = 15,          /* TQL compile error (details in diagnostics) */
	TM_ERR_COMPRESS = 16,     /* zstd refused to (de)compress */
	TM_ERR_CLOSED = 17,       /* handle already closed / peer disconnected */
	TM_ERR_AGAIN = 18,        /* need more input (incremental decoders) */
	TM_ERR_RESERVED = 19,     /* reserved bits/fields set that must be zero */
	TM_ERR_UNSUPPORTED = 20,  /* valid but not supported by this build */
	TM_ERR__COUNT
};

/* One line, never NULL, for any int (unknown codes get a generic text). */
const char *tm_strerror(int err);
/* The symbolic name, e.g. "TM_ERR_CRC". */
const char *tm_errname(int err);

/* ---------------------------------------------------------------- time */

enum tm_phase {
	TM_PHASE_FWD = 0,
	TM_PHASE_BWD = 1
};
const char *tm_phase_name(int phase);  /* "fwd" / "bwd" */

/*
 * What a module-call boundary an event stands for.  A forward call gives an
 * ENTER (inputs) and an EXIT (outputs); backward gives one BWD event per
 * module with grad_out/grad_in slots; parameters give PARAM events (data and
 * grad stats, once per step at level >= 2).
 */
enum tm_event_kind {
	TM_EV_ENTER = 0,
	TM_EV_EXIT = 1,
	TM_EV_BWD = 2,
	TM_EV_PARAM = 3,
	/* An exception left a module's forward (instead of its EXIT): no
	 * tensors; what was raised is the step's "exception" annotation at
	 * the event (values: the type's name, the message), TQL
	 * exception.type / exception.message. */
	TM_EV_RAISE = 4,
	TM_EV_OP = 5,           /* one tensor operation inside a module call */
	TM_EV__COUNT
};
const char *tm_event_kind_name(int kind);

/* ---------------------------------------------------------------- slots */

/* ARCHITECTURE 3: NODE:out.N, :in.N, :grad_out.N, :grad_in.N, :data, :grad */
enum tm_slot_kind {
	TM_SLOT_OUT = 0,
	TM_SLOT_IN = 1,
	TM_SLOT_GRAD_OUT = 2,
	TM_SLOT_GRAD_IN = 3,
	TM_SLOT_DATA = 4,
	TM_SLOT_GRAD = 5,
	TM_SLOT__COUNT
};

struct tm_slot {
	uint8_t kind;    /* enum tm_slot_kind */
	uint16_t index;  /* out.N; always 0 for data/grad */
};
const char *tm_slot_kind_name(int kind);  /* "out", "in", ... */
/* The event kind that carries a slot (ARCHITECTURE 4): in -> ENTER,
 * out -> EXIT, grad_out/grad_in -> BWD, data/grad -> PARAM. */
int tm_slot_event_kind(int slot_kind);
/* Canonical text: index 0 prints bare ("out", "grad_in"), others "out.1";
 * a request's rows (below) "out[r1]", "out.2[r0]". */
int tm_slot_format(struct tm_slot s, char *buf, size_t len);

/*
 * One request's rows of a batched tensor (doc/serving.md, "Requests batched
 * together"): a serving forward flattens its requests' tokens into one
 * [num_tokens, ...] tensor, whose stats mix the requests.  The serving probe
 * adds, after an event's tensors, the stats of each request's rows of those
 * whose leading dimension (leading 1s aside) is num_tokens, in a slot of
 * the same kind whose index has TM_SLOT_ROWS set: bits 0-7 are the batch
 * tensor's index, bits 8-14 the request's place in the step's `request`
 * annotation (from 0).  Readers that do not know them read them as slots
 * out.32768 and so on.
 */
#define TM_SLOT_ROWS 0x8000u
#define TM_SLOT_ROW_MAX 128u            /* requests one row slot can name */
#define TM_SLOT_ROW_INDEX_MAX 256u      /* batch tensor indexes it can name */
int tm_slot_is_row(struct tm_slot s);
unsigned tm_slot_row(struct tm_slot s);            /* the request's place */
struct tm_slot tm_slot_row_base(struct tm_slot s); /* the batch tensor's slot */
/* The slot of request's rows of base (request < TM_SLOT_ROW_MAX, base's
 * index < TM_SLOT_ROW_INDEX_MAX). */
struct tm_slot tm_slot_row_of(struct tm_slot base, unsigned request);

/* ---------------------------------------------------------------- dtypes */

enum tm_dtype {
	TM_DT_UNKNOWN = 0,
	TM_DT_F32, TM_DT_F64, TM_DT_F16, TM_DT_BF16,
	TM_DT_F8E4M3, TM_DT_F8E5M2,
	TM_DT_I8, TM_DT_I16, TM_DT_I32, TM_DT_I64,
	TM_DT_U8, TM_DT_U16, TM_DT_U32, TM_DT_U64,
	TM_DT_BOOL,
	TM_DT_C64, TM_DT_C128,
	TM_DT__COUNT
};
const char *tm_dtype_name(int dt);          /* "f32", "bf16", ... */
int tm_dtype_from_name(const char *name);   /* also torch names; UNKNOWN if none */
size_t tm_dtype_size(int dt);               /* bytes per element, 0 if unknown */

/* ---------------------------------------------------------------- stats */

/*
 * The statistics of ARCHITECTURE 5, one index each so that TQL, the encoder
 * and the views address them uniformly.  A stat is present only when its bit
 * is set in tm_tensor.have; an absent stat is *unknown* (never zero).
 * min/max/mean/abs_max/l2/std are over finite elements.
 */
enum tm_stat {
	/* level 1: health */
	TM_STAT_NUMEL = 0,
	TM_STAT_NAN_COUNT,
	TM_STAT_INF_COUNT,       /* pos + neg */
	TM_STAT_POSINF_COUNT,
	TM_STAT_NEGINF_COUNT,
	TM_STAT_MIN,
	TM_STAT_MAX,
	TM_STAT_MEAN,
	TM_STAT_ABS_MAX,
	TM_STAT_L2,
	/* level 2 */
	TM_STAT_STD,
	TM_STAT_ZERO_COUNT,
	TM_STAT__COUNT
};
#define TM_STAT_BIT(s) (UINT32_C(1) << (s))
#define TM_STATS_L1_MASK \
	(TM_STAT_BIT(TM_STAT_NUMEL) | TM_STAT_BIT(TM_STAT_NAN_COUNT) | \
	 TM_STAT_BIT(TM_STAT_INF_COUNT) | TM_STAT_BIT(TM_STAT_POSINF_COUNT) | \
	 TM_STAT_BIT(TM_STAT_NEGINF_COUNT) | TM_STAT_BIT(TM_STAT_MIN) | \
	 TM_STAT_BIT(TM_STAT_MAX) | TM_STAT_BIT(TM_STAT_MEAN) | \
	 TM_STAT_BIT(TM_STAT_ABS_MAX) | TM_STAT_BIT(TM_STAT_L2))
#define TM_STATS_L2_MASK \
	(TM_STATS_L1_MASK | TM_STAT_BIT(TM_STAT_STD) | TM_STAT_BIT(TM_STAT_ZERO_COUNT))

struct tm_stat_info {
	const char *name;   /* TQL field name after "tensor.": "nan_count" */
	uint8_t level;      /* lowest probe level that captures it */
	uint8_t integer;    /* 1: a count (TQL integer), 0: a real number */
	const char *help;
};
/* Table indexed by enum tm_stat. */
extern const struct tm_stat_info tm_stat_table[TM_STAT__COUNT];
int tm_stat_from_name(const char *name);  /* -1 if none */

#define TM_HIST_BINS 32
/*
 * The kinds of histogram (tm_tensor.have_hist): 32 even bins over [min,
 * max] (files of .tmrun 1.2 and before), or 32 bins by sign and binary
 * exponent (what tm_stats_compute fills from 1.3 on; see tm-stats.h).
 */
#define TM_HIST_LINEAR 1
#define TM_HIST_LOG2 2
#define TM_MAX_RANK 8

/*
 * One tensor summary inside an event: the slot it fills, what it is, and the
 * stats the probe level captured.  payload, when present (level 3 or an
 * explicit capture), is the raw little-endian contents, row-major.
 */
struct tm_tensor {
	struct tm_slot slot;
	uint8_t dtype;                  /* enum tm_dtype */
	uint8_t rank;                   /* <= TM_MAX_RANK */
	uint8_t device_type;            /* 0 cpu, 1 cuda, 2 other */
	uint16_t device_index;
	int64_t shape[TM_MAX_RANK];
	uint32_t have;                  /* TM_STAT_BIT()s of the stats present */
	double stat[TM_STAT__COUNT];    /* counts stored exactly (< 2^53) */
	uint8_t have_hist;              /* level 2: 32-bin histogram present, of
					 * kind TM_HIST_LINEAR or TM_HIST_LOG2 */
	double hist_lo, hist_hi;        /* LINEAR: bin range (finite min .. max);
					 * LOG2: exponents E - 15 and E */
	uint32_t hist[TM_HIST_BINS];
	const void *payload;            /* NULL if not captured */
	uint64_t payload_len;           /* bytes */
};

/* ---------------------------------------------------------------- events */

#define TM_NODE_NONE UINT32_MAX
#define TM_MAX_TENSORS 64           /* per event; more are a gap (LEVEL) */

/*
 * One event: a boundary of one module call (or one parameter observation).
 * time_ns is the event's moment since run start: the call start for ENTER,
 * the call end for EXIT/BWD.  start_ns/end_ns are the call's span, both
 * known at EXIT (0 at ENTER for end_ns).
 */
/*
 * An OP event (TM_EV_OP) is one tensor operation (an aten overload) run
 * directly in a module's forward: its node is the op's site, a node of kind
 * TM_NODE_OP whose parent is the module, whose type is the overload's name
 * ("aten::div.Tensor") and whose file and line are the caller's source
 * line; call is the module's call number; its tensors are the op's
 * outputs (out.N).  op_index is the op's place in that call, from 1;
 * op_flags are TM_OPF_* bits.  Both are 0 for other kinds.
 */
enum tm_op_flags {
	TM_OPF_INPUTS_CHECKED = 1u << 0,    /* the inputs' finiteness is known */
	TM_OPF_INPUTS_FINITE = 1u << 1,     /* ... and every input was finite */
	TM_OPF__ALL = 0x3
};

struct tm_event;
/*
 * Producer, not propagator: 1 when the op event (forward) made non-finite
 * values -- an output holds NaN or Inf and every input was finite --, 0
 * when it did not (finite outputs, or non-finite inputs passed on), -1 when
 * unknown (not an op event, stats or input check missing).
 */
int tm_event_op_made_nonfinite(const struct tm_event *ev);

struct tm_event {
	uint64_t seq;
	uint64_t step;
	uint8_t phase;          /* enum tm_phase */
	uint8_t kind;           /* enum tm_event_kind */
	uint8_t level;          /* probe level that produced it (0-3) */
	uint32_t node;          /* node id */
	uint32_t call;          /* occurrence within the step, 1-based: NODE#call */
	uint64_t time_ns;
	uint64_t start_ns;
	uint64_t end_ns;
	uint32_t ntensors;
	struct tm_tensor *tensors;
	uint32_t op_index;      /* TM_EV_OP: the op's index in the call, from 1 */
	uint8_t op_flags;       /* TM_EV_OP: enum tm_op_flags */
};

/* The tensor of ev in slot, NULL when ev holds none. */
const struct tm_tensor *tm_event_tensor(const struct tm_event *ev,
					struct tm_slot slot);
/* Whether ev carries a tensor for slot (NULL: always). */
int tm_event_holds_slot(const struct tm_event *ev, const struct tm_slot *slot);
/* The slot an event of this kind stands for when nothing narrowed it:
 * in (ENTER), out (EXIT), grad_out (BWD), data (PARAM).  Returns 0. */
int tm_event_slot(const struct tm_event *ev, struct tm_slot *slot);

/* ---------------------------------------------------------------- gaps */

/*
 * ARCHITECTURE 6: dropped events still consume seqs; a gap names the range.
 * Reasons are a bitmask since one range can be lost for several reasons.
 */
enum tm_gap_reason {
	TM_GAP_BACKPRESSURE = 1u << 0,  /* ring full, consumer behind */
	TM_GAP_LEVEL = 1u << 1,         /* not captured at this level */
	TM_GAP_FILTERED = 1u << 2,      /* excluded by a node filter */
	TM_GAP_CRASH = 1u << 3,         /* writer died */
	TM_GAP_TRUNCATED = 1u << 4,     /* file ends early */
	TM_GAP_DAMAGED = 1u << 5,       /* recovery dropped a damaged chunk */
	TM_GAP_WRITE_ERROR = 1u << 6,   /* the writer could not write (disk full) */
	TM_GAP_NOT_KEPT = 1u << 7,      /* flight mode: outside the window kept */
	TM_GAP__ALL = 0xff
};
/* "backpressure|level" into buf; returns TM_OK or TM_ERR_INVALID_ARG. */
int tm_gap_reason_format(uint32_t reasons, char *buf, size_t len);

struct tm_gap {
	uint64_t first_seq;
	uint64_t last_seq;      /* inclusive */
	uint64_t count;         /* events lost (may be < range if unknown) */
	uint32_t reason;        /* tm_gap_reason bits */
	uint64_t time_ns;       /* when the drop was noticed */
	uint64_t step;
};

/* ---------------------------------------------------------------- crashes */

#define TM_MAX_FRAMES 64

struct tm_crash {
	uint64_t seq;           /* seq of the last event before the crash */
	uint64_t step;
	uint64_t time_ns;
	int32_t signo;
	uint32_t node;          /* node being executed, or TM_NODE_NONE */
	uint8_t phase;
	uint32_t nframes;
	const char *frames[TM_MAX_FRAMES];  /* "0x... symbol+off" lines */
};

/* ---------------------------------------------------------------- annotations */

/*
 * What a step was about, beyond the tensors: a serving probe's step is one
 * model forward over a batch of requests, and the annotation "request" names
 * them.  One record per (step, key), written before the step's first event;
 * it applies to every event of that step.  values keeps at most
 * TM_ANNOT_MAX_VALUES strings of under TM_ANNOT_MAX_VALUE bytes; count is
 * how many the step really had, so a reader can tell a list was cut short.
 */
#define TM_ANNOT_MAX_VALUES 1024
#define TM_ANNOT_MAX_VALUE 256
#define TM_ANNOT_MAX_KEY 64

struct tm_annot {
	uint64_t seq;           /* seq of the step's first event (the next seq) */
	uint64_t step;
	uint64_t time_ns;
	const char *key;        /* "request" */
	uint32_t count;         /* values the step had (>= nvalues) */
	uint32_t nvalues;
	const char *const *values;
};

/* ---------------------------------------------------------------- nodes */

enum tm_node_kind {
	TM_NODE_MODULE = 0,
	TM_NODE_PARAM = 1,
	TM_NODE_BUFFER = 2,
	TM_NODE_OP = 3          /* an op site (TM_EV_OP): parent is its module */
};

/* A graph node: a module or a parameter, named by its address. */
struct tm_node {
	uint32_t id;
	uint32_t parent;        /* TM_NODE_NONE for the root */
	uint16_t depth;         /* root = 0 */
	uint8_t kind;           /* enum tm_node_kind */
	const char *address;    /* "model.layers.3.mlp" (normalised) */
	const char *type;       /* module class, "Linear"; "Parameter" */
	const char *file;       /* source of forward(), may be NULL */
	uint32_t line;          /* 0 if unknown */
};

/*
 * The node table: an append-only set of nodes indexed by id (ids are dense,
 * 0..n-1) and by address.  Owns copies of all strings.
 */
typedef struct tm_nodetab tm_nodetab;

tm_nodetab *tm_nodetab_new(void);
void tm_nodetab_free(tm_nodetab *t);
/* Adds a node; n->id is ignored and the new id is returned in *id.  An
 * address already present returns TM_ERR_INVALID_ARG with *id = existing. */
int tm_nodetab_add(tm_nodetab *t, const struct tm_node *n, uint32_t *id);
/* Adds a node with a caller-chosen id (readers restoring a table).  Ids must
 * arrive dense; gaps or duplicates give TM_ERR_CORRUPT. */
int tm_nodetab_put(tm_nodetab *t, const struct tm_node *n);
uint32_t tm_nodetab_count(const tm_nodetab *t);
const struct tm_node *tm_nodetab_get(const tm_nodetab *t, uint32_t id);
/* Exact (normalised) address lookup; NULL if none. */
const struct tm_node *tm_nodetab_find(const tm_nodetab *t, const char *address);

/* ---------------------------------------------------------------- run meta */

#define TM_META_MAX_PAIRS 64

/* Run metadata, written once at the start of a trace. */
struct tm_run_meta {
	const char *probe_kind;     /* "pytorch", "replay", "vllm", "sglang", "synthetic" */
	uint8_t default_level;      /* 0..3 */
	const char *torch_version;
	const char *host;
	uint64_t start_unix_ns;     /* wall clock at run start */
	int32_t rank;               /* -1 when not distributed */
	int32_t world_size;         /* 0 when not distributed */
	const char *command;        /* argv joined, may be NULL */
	/* free-form extras: node-level overrides ("model.layers.3.**=3"), etc */
	uint32_t npairs;
	const char *keys[TM_META_MAX_PAIRS];
	const char *values[TM_META_MAX_PAIRS];
};

/* ---------------------------------------------------------------- records */

/* Record types of the shared encoding (.tmrun chunks and wire frames). */
enum tm_record_type {
	TM_REC_META = 1,
	TM_REC_NODE = 2,
	TM_REC_EVENT = 3,
	TM_REC_GAP = 4,
	TM_REC_CRASH = 5,
	TM_REC_ANNOT = 6,
	/* 64..127 are wire-protocol messages (doc/wire.md) */
	TM_REC__FILE_MAX = 63
};

/* A decoded record, as handed out by readers. Pointers stay valid until the
 * next call on the handle that produced it. */
struct tm_record {
	uint8_t type;       /* enum tm_record_type */
	union {
		struct tm_run_meta meta;
		struct tm_node node;
		struct tm_event event;
		struct tm_gap gap;
		struct tm_crash crash;
		struct tm_annot annot;
	} u;
};

const char *tm_version_string(void);   /* "tensormorph 0.1.0" */

/*
 * What bindings that mirror this library's structs check at load: one
 * item per struct size ("tm_rec_tensor.sizeof"), field offset and size
 * ("tm_rec_tensor.have.offset", "tm_rec_tensor.have.sizeof") and constant
 * ("TM_MAX_RANK", "TM_ERR_AGAIN", "TM_EV_PARAM"), filled by the compiler
 * from these headers (layout.c).  The Python probe refuses to load on any
 * difference from its mirrors and names it (tensormorph_probe/_lib.py).
 */
struct tm_layout_item {
	const char *name;
	int64_t value;
};
const struct tm_layout_item *tm_layout(size_t *n);

#ifdef __cplusplus
}
#endif
#endif /* TM_TYPES_H */
