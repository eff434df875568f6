/*
 * nodetab.c -- the node table: every graph node of a run, by dense id and by
 * address.
 *
 * Events carry node ids; everything that prints, filters or completes an
 * address comes through here.  A table is filled once (by the probe as it
 * walks named_modules(), or by a reader restoring a trace) and then read a
 * great deal, so lookups are an open-addressing hash probe with no
 * allocation, and each node is one allocation holding the struct and its
 * strings, so the pointers handed out stay valid for the table's lifetime.
 *
 * Tables restored from files are untrusted: string lengths are capped and
 * addresses must be canonical node paths (tm_path_valid) before they enter.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tm-internal.h"
#include "tm-address.h"

/* Caps on the other strings of a node; an address is capped by TM_ADDRESS_MAX. */
#define NODE_TYPE_MAX 256
#define NODE_FILE_MAX 4096
/* Ids are dense uint32 with TM_NODE_NONE reserved; keep well below. */
#define NODETAB_MAX_NODES (UINT32_C(1) << 28)

struct tm_nodetab {
	struct tm_node **nodes;         /* by id */
	uint32_t n;
	uint32_t cap;
	uint32_t *slots;                /* hash -> id + 1; 0 is empty */
	uint32_t nslots;                /* power of two, > 2 * n */
};

/* FNV-1a: addresses are short, and this is cheap and well spread for them. */
static uint32_t hash_str(const char *s, size_t len)
{
	uint32_t h = 2166136261u;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= (uint8_t)s[i];
		h *= 16777619u;
	}
	return h;
}

tm_nodetab *tm_nodetab_new(void)
{
	return calloc(1, sizeof(struct tm_nodetab));
}

void tm_nodetab_free(tm_nodetab *t)
{
	uint32_t i;

	if (!t)
		return;
	for (i = 0; i < t->n; i++)
		free(t->nodes[i]);
	free(t->nodes);
	free(t->slots);
	free(t);
}

uint32_t tm_nodetab_count(const tm_nodetab *t)
{
	return t ? t->n : 0;
}

const struct tm_node *tm_nodetab_get(const tm_nodetab *t, uint32_t id)
{
	if (!t || id >= t->n)
		return NULL;
	return t->nodes[id];
}

/* Returns the slot index holding address, or the empty slot where it would go. */
static uint32_t probe_slot(const tm_nodetab *t, const char *address, size_t len)
{
	uint32_t mask = t->nslots - 1;
	uint32_t i = hash_str(address, len) & mask;

	for (;;) {
		uint32_t v = t->slots[i];

		if (v == 0)
			return i;
		if (!strcmp(t->nodes[v - 1]->address, address))
			return i;
		i = (i + 1) & mask;
	}
}

const struct tm_node *tm_nodetab_find(const tm_nodetab *t, const char *address)
{
	uint32_t v;
	size_t len;

	if (!t || !address || !t->nslots)
		return NULL;
	len = strlen(address);
	if (len >= TM_ADDRESS_MAX)
		return NULL;
	v = t->slots[probe_slot(t, address, len)];
	return v ? t->nodes[v - 1] : NULL;
}

/* Keeps the load factor under one half so probes stay short. */
static int grow_slots(tm_nodetab *t)
{
	uint32_t nslots = t->nslots ? t->nslots * 2 : 64;
	uint32_t *slots, i;

	slots = calloc(nslots, sizeof(*slots));
	if (!slots)
		return TM_ERR_NOMEM;
	free(t->slots);
	t->slots = slots;
	t->nslots = nslots;
	for (i = 0; i < t->n; i++) {
		const char *a = t->nodes[i]->address;

		slots[probe_slot(t, a, strlen(a))] = i + 1;
	}
	return TM_OK;
}

/* Length of an optional string, or SIZE_MAX if it is longer than max. */
static size_t capped_len(const char *s, size_t max)
{
	const char *nul;

	if (!s)
		return 0;
	nul = memchr(s, '\0', max + 1);
	return nul ? (size_t)(nul - s) : SIZE_MAX;
}

/*
 * Validates n and appends a copy with the next id.  bad is the code for
 * invalid content: callers adding their own nodes get INVALID_ARG/ADDRESS,
 * readers restoring a file get CORRUPT.
 */
static int append(tm_nodetab *t, const struct tm_node *n, int bad, uint32_t *id)
{
	size_t alen, tlen, flen;
	struct tm_node *c;
	char *s;
	uint32_t slot;

	if (id)
		*id = TM_NODE_NONE;
	if (!n->address)
		return bad;
	alen = capped_len(n->address, TM_ADDRESS_MAX - 1);
	tlen = capped_len(n->type, NODE_TYPE_MAX);
	flen = capped_len(n->file, NODE_FILE_MAX);
	if (alen == SIZE_MAX || tlen == SIZE_MAX || flen == SIZE_MAX)
		return bad == TM_ERR_CORRUPT ? TM_ERR_TOO_LARGE : bad;
	if (!tm_path_valid(n->address, alen))
		return bad == TM_ERR_CORRUPT ? bad : TM_ERR_ADDRESS;
	/* parent is not checked: tm_nodetab_get() bounds it for whoever follows it. */
	if (n->kind > TM_NODE_OP)
		return bad;
	if (t->n >= NODETAB_MAX_NODES)
		return TM_ERR_TOO_LARGE;

	if (2 * (t->n + 1) > t->nslots) {
		int err = grow_slots(t);

		if (err)
			return err;
	}
	slot = probe_slot(t, n->address, alen);
	if (t->slots[slot]) {
		if (id)
			*id = t->slots[slot] - 1;
		return bad == TM_ERR_CORRUPT ? TM_ERR_CORRUPT : TM_ERR_INVALID_ARG;
	}
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 64;
		struct tm_node **nodes = realloc(t->nodes, cap * sizeof(*nodes));

		if (!nodes)
			return TM_ERR_NOMEM;
		t->nodes = nodes;
		t->cap = cap;
	}

	/* One block: the struct, then address, type and file. */
	c = malloc(sizeof(*c) + alen + 1 + (n->type ? tlen + 1 : 0) +
		   (n->file ? flen + 1 : 0));
	if (!c)
		return TM_ERR_NOMEM;
	*c = *n;
	c->id = t->n;
	s = (char *)(c + 1);
	memcpy(s, n->address, alen);
	s[alen] = '\0';
	c->address = s;
	s += alen + 1;
	if (n->type) {
		memcpy(s, n->type, tlen);
		s[tlen] = '\0';
		c->type = s;
		s += tlen + 1;
	}
	if (n->file) {
		memcpy(s, n->file, flen);
		s[flen] = '\0';
		c->file = s;
	}
	t->nodes[t->n] = c;
	t->slots[slot] = t->n + 1;
	if (id)
		*id = t->n;
	t->n++;
	return TM_OK;
}

int tm_nodetab_add(tm_nodetab *t, const struct tm_node *n, uint32_t *id)
{
	if (id)
		*id = TM_NODE_NONE;
	if (!t || !n)
		return TM_ERR_INVALID_ARG;
	return append(t, n, TM_ERR_INVALID_ARG, id);
}

/* Readers restore tables record by record; ids must arrive as 0, 1, 2, ... */
int tm_nodetab_put(tm_nodetab *t, const struct tm_node *n)
{
	if (!t || !n)
		return TM_ERR_INVALID_ARG;
	if (n->id != t->n)
		return TM_ERR_CORRUPT;
	return append(t, n, TM_ERR_CORRUPT, NULL);
}

/*
 * Forgets the nodes with ids >= n (recovery drops a chunk that failed half
 * way).  Removing the most recent entries of a linear-probing table in
 * reverse order is safe: no entry inserted before them probed past them.
 */
void tm_nodetab_truncate(tm_nodetab *t, uint32_t n)
{
	while (t && t->n > n) {
		struct tm_node *nd = t->nodes[t->n - 1];

		t->slots[probe_slot(t, nd->address, strlen(nd->address))] = 0;
		free(nd);
		t->n--;
	}
}
