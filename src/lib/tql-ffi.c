/*
 * tql-ffi.c -- TQL extension functions: native functions loaded from shared
 * libraries (`tql-function load LIB SYMBOL(double, int64) -> bool`) and
 * called from the VM through libffi.
 *
 * This is trusted code by design: loading a library runs its constructors
 * and every call runs native code inside tmdb (or the probed process), with
 * no sandbox.  The signature text is all TQL knows about the function; a
 * wrong one is undefined behaviour in the callee, so only double, int64 and
 * bool are offered, which every C ABI passes plainly.
 *
 * Compiled programs point at the registry's entries: keep the tm_tql_funcs
 * alive for as long as any program compiled with it.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "tql-int.h"

struct tql_ext {
	char *name;
	void *dl;
	void *fn;
	ffi_cif cif;
	ffi_type *atypes[TQL_MAX_ARGS];
	uint8_t argt[TQL_MAX_ARGS];   /* TM_TQL_NUM / INT / BOOL */
	uint8_t nargs;
	uint8_t ret;
};

struct tm_tql_funcs {
	struct tql_ext **v;           /* pointers: entries never move */
	size_t n;
};

#define TQL_MAX_FUNCS 256

tm_tql_funcs *tm_tql_funcs_new(void)
{
	return calloc(1, sizeof(struct tm_tql_funcs));
}

static void ext_free(struct tql_ext *e)
{
	if (!e)
		return;
	if (e->dl)
		dlclose(e->dl);
	free(e->name);
	free(e);
}

void tm_tql_funcs_free(tm_tql_funcs *f)
{
	size_t i;

	if (!f)
		return;
	for (i = 0; i < f->n; i++)
		ext_free(f->v[i]);
	free(f->v);
	free(f);
}

const char *tm_tql_funcs_name(const tm_tql_funcs *f, size_t n)
{
	return f && n < f->n ? f->v[n]->name : NULL;
}

const struct tql_ext *tql_ext_find(const tm_tql_funcs *f, const char *name, size_t len)
{
	size_t i;

	if (!f)
		return NULL;
	for (i = 0; i < f->n; i++)
		if (strlen(f->v[i]->name) == len && !memcmp(f->v[i]->name, name, len))
			return f->v[i];
	return NULL;
}

int tql_ext_nargs(const struct tql_ext *e)
{
	return e->nargs;
}

int tql_ext_arg_type(const struct tql_ext *e, int i)
{
	return e->argt[i];
}

int tql_ext_ret_type(const struct tql_ext *e)
{
	return e->ret;
}

const char *tql_ext_name(const struct tql_ext *e)
{
	return e->name;
}

void tql_ext_call(const struct tql_ext *e, const struct tm_tql_value *args,
		  struct tm_tql_value *out)
{
	union {
		double d;
		int64_t i;
		uint8_t b;
	} store[TQL_MAX_ARGS];
	void *ptrs[TQL_MAX_ARGS];
	unsigned i;

	for (i = 0; i < e->nargs; i++) {
		switch (e->argt[i]) {
		case TM_TQL_NUM: store[i].d = args[i].v.d; break;
		case TM_TQL_INT: store[i].i = args[i].v.i; break;
		default: store[i].b = args[i].v.b != 0; break;
		}
		ptrs[i] = &store[i];
	}
	out->unknown_reason = 0;
	out->type = e->ret;
	switch (e->ret) {
	case TM_TQL_NUM: {
		double r;

		ffi_call((ffi_cif *)&e->cif, FFI_FN(e->fn), &r, ptrs);
		out->v.d = r;
		break;
	}
	case TM_TQL_INT: {
		int64_t r;

		ffi_call((ffi_cif *)&e->cif, FFI_FN(e->fn), &r, ptrs);
		out->v.i = r;
		break;
	}
	default: {
		/* small integer returns are widened to ffi_arg */
		ffi_arg r;

		ffi_call((ffi_cif *)&e->cif, FFI_FN(e->fn), &r, ptrs);
		out->v.b = (uint8_t)r != 0;
		break;
	}
	}
}

/* ---------------------------------------------------------------- loading */

static const char *skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* "double" | "int64" | "bool" at s; returns the end or NULL. */
static const char *parse_type(const char *s, uint8_t *t, ffi_type **ft)
{
	static const struct {
		const char *name;
		uint8_t t;
	} types[] = {
		{ "double", TM_TQL_NUM }, { "int64_t", TM_TQL_INT },
		{ "int64", TM_TQL_INT }, { "bool", TM_TQL_BOOL },
	};
	size_t i;

	for (i = 0; i < TM_ARRAY_LEN(types); i++) {
		size_t n = strlen(types[i].name);
		char c;

		if (strncmp(s, types[i].name, n))
			continue;
		c = s[n];
		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')
			continue;
		*t = types[i].t;
		*ft = *t == TM_TQL_NUM ? &ffi_type_double :
		      *t == TM_TQL_INT ? &ffi_type_sint64 : &ffi_type_uint8;
		return s + n;
	}
	return NULL;
}

static int fail(char **error, int rc, const char *fmt, const char *a, const char *b)
{
	if (error)
		*error = tm_asprintf(fmt, a, b);
	return rc;
}

#define SIG_HELP "write: LIB SYMBOL(TYPE, ...) -> TYPE, where TYPE is double, int64 or bool"

static int is_reserved(const char *name, size_t len)
{
	static const char *const words[] = {
		"true", "false", "and", "or", "not", "inf", "nan", "tensor", "node",
		"step", "phase", "seq", "time", "rank"
	};
	size_t i;

	if (tql_builtin_find(name, len) >= 0)
		return 1;
	for (i = 0; i < TM_ARRAY_LEN(words); i++)
		if (strlen(words[i]) == len && !memcmp(words[i], name, len))
			return 1;
	return 0;
}

/*
 * spec := LIB SYMBOL "(" [ type { "," type } ] ")" "->" type
 * type := "double" | "int64" | "bool"
 */
int tm_tql_funcs_load(tm_tql_funcs *f, const char *spec, char **error)
{
	struct tql_ext *e;
	const char *s, *lib, *sym;
	char *libname, *symname;
	size_t liblen, symlen;
	struct tql_ext **nv;

	if (error)
		*error = NULL;
	if (!f || !spec)
		return TM_ERR_INVALID_ARG;
	if (f->n >= TQL_MAX_FUNCS)
		return fail(error, TM_ERR_TOO_LARGE, "too many TQL functions loaded%s%s",
			    "", "");
	s = skip_ws(spec);
	lib = s;
	while (*s && *s != ' ' && *s != '\t')
		s++;
	liblen = (size_t)(s - lib);
	s = skip_ws(s);
	sym = s;
	if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')
		while ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		       (*s >= '0' && *s <= '9') || *s == '_')
			s++;
	symlen = (size_t)(s - sym);
	if (!liblen || !symlen)
		return fail(error, TM_ERR_INVALID_ARG,
			    "bad function signature '%s': " SIG_HELP "%s", spec, "");
	if (symlen > 64 || is_reserved(sym, symlen) || tql_ext_find(f, sym, symlen)) {
		char name[80];

		snprintf(name, sizeof(name), "%.*s", (int)(symlen > 64 ? 64 : symlen), sym);
		return fail(error, TM_ERR_INVALID_ARG,
			    "cannot load '%s': %s", name,
			    symlen > 64 ? "the name is too long" :
			    tql_ext_find(f, sym, symlen) ?
			    "a function of that name is already loaded" :
			    "the name is a TQL builtin or keyword");
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return TM_ERR_NOMEM;
	s = skip_ws(s);
	if (*s != '(') {
		ext_free(e);
		return fail(error, TM_ERR_INVALID_ARG,
			    "bad function signature '%s': expected '(' after the symbol; "
			    SIG_HELP "%s", spec, "");
	}
	s = skip_ws(s + 1);
	if (*s != ')') {
		for (;;) {
			if (e->nargs == TQL_MAX_ARGS) {
				ext_free(e);
				return fail(error, TM_ERR_INVALID_ARG,
					    "bad function signature '%s': at most 8 arguments%s",
					    spec, "");
			}
			s = parse_type(skip_ws(s), &e->argt[e->nargs], &e->atypes[e->nargs]);
			if (!s) {
				ext_free(e);
				return fail(error, TM_ERR_INVALID_ARG,
					    "bad function signature '%s': unknown argument type; "
					    SIG_HELP "%s", spec, "");
			}
			e->nargs++;
			s = skip_ws(s);
			if (*s != ',')
				break;
			s++;
		}
	}
	if (*s != ')') {
		ext_free(e);
		return fail(error, TM_ERR_INVALID_ARG,
			    "bad function signature '%s': expected ',' or ')'; " SIG_HELP "%s",
			    spec, "");
	}
	s = skip_ws(s + 1);
	{
		ffi_type *rt = NULL;

		if (strncmp(s, "->", 2) || !(s = parse_type(skip_ws(s + 2), &e->ret, &rt)) ||
		    *skip_ws(s)) {
			ext_free(e);
			return fail(error, TM_ERR_INVALID_ARG,
				    "bad function signature '%s': expected '-> TYPE' at the end; "
				    SIG_HELP "%s", spec, "");
		}
		if (ffi_prep_cif(&e->cif, FFI_DEFAULT_ABI, e->nargs, rt, e->atypes) != FFI_OK) {
			ext_free(e);
			return fail(error, TM_ERR_UNSUPPORTED,
				    "libffi cannot call '%s'%s", spec, "");
		}
	}
	libname = malloc(liblen + 1);
	symname = malloc(symlen + 1);
	if (!libname || !symname) {
		free(libname);
		free(symname);
		ext_free(e);
		return TM_ERR_NOMEM;
	}
	memcpy(libname, lib, liblen);
	libname[liblen] = '\0';
	memcpy(symname, sym, symlen);
	symname[symlen] = '\0';
	e->name = symname;
	dlerror();
	e->dl = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
	if (!e->dl) {
		const char *why = dlerror();
		int rc = fail(error, TM_ERR_NOT_FOUND, "cannot load library '%s': %s",
			      libname, why ? why : "unknown reason");

		free(libname);
		ext_free(e);
		return rc;
	}
	dlerror();
	e->fn = dlsym(e->dl, symname);
	if (!e->fn) {
		int rc = fail(error, TM_ERR_NOT_FOUND, "no symbol '%s' in library '%s'",
			      symname, libname);

		free(libname);
		ext_free(e);
		return rc;
	}
	free(libname);
	nv = realloc(f->v, (f->n + 1) * sizeof(*nv));
	if (!nv) {
		ext_free(e);
		return TM_ERR_NOMEM;
	}
	f->v = nv;
	f->v[f->n++] = e;
	return TM_OK;
}
