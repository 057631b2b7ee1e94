/* Every exported function of lmdb.h, and every error code an application can provoke,
 * exercised through the C ABI. Built and run by tests/c_programs.rs; argv[1] is an empty
 * directory. Exits 0 when every check passed, else prints the failed check. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "lmdb.h"

static int failures = 0;
#define CHECK(expr) do { if (!(expr)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #expr); failures++; } } while (0)
#define RC(call, want) do { int rc_ = (call); if (rc_ != (want)) { fprintf(stderr, "%s:%d: %s returned %d (%s), wanted %d\n", __FILE__, __LINE__, #call, rc_, mdb_strerror(rc_), (want)); failures++; } } while (0)
#define OK(call) RC(call, MDB_SUCCESS)

static MDB_val val(const char *s) { MDB_val v; v.mv_size = strlen(s); v.mv_data = (void *)s; return v; }
static int val_is(MDB_val v, const char *s) { return v.mv_size == strlen(s) && memcmp(v.mv_data, s, v.mv_size) == 0; }

/* Reverse byte order, to check that C comparators are called. */
static int reverse_cmp(const MDB_val *a, const MDB_val *b) {
	size_t n = a->mv_size < b->mv_size ? a->mv_size : b->mv_size;
	int c = memcmp(b->mv_data, a->mv_data, n);
	if (c) return c;
	return (int)b->mv_size - (int)a->mv_size;
}

/* memcmp order: the default, set explicitly to check mdb_set_dupsort. */
static int bytes_cmp(const MDB_val *a, const MDB_val *b) {
	size_t n = a->mv_size < b->mv_size ? a->mv_size : b->mv_size;
	int c = memcmp(a->mv_data, b->mv_data, n);
	if (c) return c;
	return a->mv_size < b->mv_size ? -1 : a->mv_size > b->mv_size;
}

static int lines = 0;
static int count_lines(const char *msg, void *ctx) { (void)msg; (*(int *)ctx)++; lines++; return 0; }

int main(int argc, char **argv) {
	if (argc < 2) { fprintf(stderr, "usage: api DIR\n"); return 2; }
	const char *dir = argv[1];
	char path[4096];
	int major = -1, minor = -1, patch = -1;
	char *version = mdb_version(&major, &minor, &patch);
	CHECK(major == 0 && minor == 9 && patch >= 0 && version != NULL);
	if (getenv("EXPECT_FERROCORE")) CHECK(strstr(version, "ferrocore") != NULL);

	/* strerror: LMDB's texts. */
	CHECK(strcmp(mdb_strerror(MDB_NOTFOUND), "MDB_NOTFOUND: No matching key/data pair found") == 0);
	CHECK(strcmp(mdb_strerror(MDB_KEYEXIST), "MDB_KEYEXIST: Key/data pair already exists") == 0);
	CHECK(strcmp(mdb_strerror(MDB_BAD_DBI), "MDB_BAD_DBI: The specified DBI handle was closed/changed unexpectedly") == 0);
	CHECK(strcmp(mdb_strerror(0), "Successful return: 0") == 0);
	/* Every LMDB code has LMDB's text (the program also runs on the real LMDB). */
	static const struct { int code; const char *text; } texts[] = {
		{ MDB_KEYEXIST, "MDB_KEYEXIST: Key/data pair already exists" },
		{ MDB_NOTFOUND, "MDB_NOTFOUND: No matching key/data pair found" },
		{ MDB_PAGE_NOTFOUND, "MDB_PAGE_NOTFOUND: Requested page not found" },
		{ MDB_CORRUPTED, "MDB_CORRUPTED: Located page was wrong type" },
		{ MDB_PANIC, "MDB_PANIC: Update of meta page failed or environment had fatal error" },
		{ MDB_VERSION_MISMATCH, "MDB_VERSION_MISMATCH: Database environment version mismatch" },
		{ MDB_INVALID, "MDB_INVALID: File is not an LMDB file" },
		{ MDB_MAP_FULL, "MDB_MAP_FULL: Environment mapsize limit reached" },
		{ MDB_DBS_FULL, "MDB_DBS_FULL: Environment maxdbs limit reached" },
		{ MDB_READERS_FULL, "MDB_READERS_FULL: Environment maxreaders limit reached" },
		{ MDB_TLS_FULL, "MDB_TLS_FULL: Thread-local storage keys full - too many environments open" },
		{ MDB_TXN_FULL, "MDB_TXN_FULL: Transaction has too many dirty pages - transaction too big" },
		{ MDB_CURSOR_FULL, "MDB_CURSOR_FULL: Internal error - cursor stack limit reached" },
		{ MDB_PAGE_FULL, "MDB_PAGE_FULL: Internal error - page has no more space" },
		{ MDB_MAP_RESIZED, "MDB_MAP_RESIZED: Database contents grew beyond environment mapsize" },
		{ MDB_INCOMPATIBLE, "MDB_INCOMPATIBLE: Operation and DB incompatible, or DB flags changed" },
		{ MDB_BAD_RSLOT, "MDB_BAD_RSLOT: Invalid reuse of reader locktable slot" },
		{ MDB_BAD_TXN, "MDB_BAD_TXN: Transaction must abort, has a child, or is invalid" },
		{ MDB_BAD_VALSIZE, "MDB_BAD_VALSIZE: Unsupported size of key/DB name/data, or wrong DUPFIXED size" },
		{ MDB_BAD_DBI, "MDB_BAD_DBI: The specified DBI handle was closed/changed unexpectedly" },
	};
	for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		if (strcmp(mdb_strerror(texts[i].code), texts[i].text) != 0) {
			fprintf(stderr, "mdb_strerror(%d) = \"%s\"\n", texts[i].code, mdb_strerror(texts[i].code));
			failures++;
		}
	}
	CHECK(strcmp(mdb_strerror(ENOENT), strerror(ENOENT)) == 0);

	MDB_env *env;
	OK(mdb_env_create(&env));
	OK(mdb_env_set_mapsize(env, 64 << 20));
	OK(mdb_env_set_maxdbs(env, 4));
	OK(mdb_env_set_maxreaders(env, 16));
	RC(mdb_env_set_maxreaders(env, 0), EINVAL);
	unsigned int readers = 0;
	OK(mdb_env_get_maxreaders(env, &readers));
	CHECK(readers == 16);
	int ctx_word = 42;
	OK(mdb_env_set_userctx(env, &ctx_word));
	CHECK(mdb_env_get_userctx(env) == &ctx_word);
	OK(mdb_env_set_assert(env, NULL));
	RC(mdb_env_set_flags(env, MDB_RDONLY, 1), EINVAL);
	OK(mdb_env_set_flags(env, MDB_NOSYNC, 1));
	mdb_filehandle_t fd = 0;
	OK(mdb_env_get_fd(env, &fd));
	CHECK(fd == -1);
	const char *got_path = (const char *)1;
	OK(mdb_env_get_path(env, &got_path));
	CHECK(got_path == NULL);
	/* A missing directory: ENOENT, and the handle can still open another. */
	snprintf(path, sizeof path, "%s/missing/dir", dir);
	RC(mdb_env_open(env, path, 0, 0664), ENOENT);
	RC(mdb_env_open(env, dir, 0x2 /* not an env flag */, 0664), EINVAL);
	OK(mdb_env_open(env, dir, 0, 0664));
	RC(mdb_env_open(env, dir, 0, 0664), EINVAL); /* already open */
	RC(mdb_env_set_maxdbs(env, 8), EINVAL);
	OK(mdb_env_get_path(env, &got_path));
	CHECK(strcmp(got_path, dir) == 0);
	OK(mdb_env_get_fd(env, &fd));
	CHECK(fd >= 0);
	unsigned int flags = 0;
	OK(mdb_env_get_flags(env, &flags));
	CHECK(flags & MDB_NOSYNC);
	OK(mdb_env_set_flags(env, MDB_NOSYNC, 0));
	OK(mdb_env_get_flags(env, &flags));
	CHECK(!(flags & MDB_NOSYNC));
	CHECK(mdb_env_get_maxkeysize(env) == 511);

	/* The main DB: put, get, NOOVERWRITE, RESERVE, APPEND, del. */
	MDB_txn *txn;
	MDB_dbi main_dbi, dups, ints, rev;
	OK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_txn_env(txn) == env);
	CHECK(mdb_txn_id(txn) == 1);
	OK(mdb_dbi_open(txn, NULL, 0, &main_dbi));
	MDB_val k = val("apple"), d = val("red"), out;
	OK(mdb_put(txn, main_dbi, &k, &d, 0));
	d = val("green");
	RC(mdb_put(txn, main_dbi, &k, &d, MDB_NOOVERWRITE), MDB_KEYEXIST);
	CHECK(val_is(d, "red")); /* the existing value comes back */
	RC(mdb_put(txn, main_dbi, &k, &d, MDB_CURRENT), EINVAL);
	MDB_val empty = { 0, NULL };
	RC(mdb_put(txn, main_dbi, &empty, &d, 0), MDB_BAD_VALSIZE);
	char big[600]; memset(big, 'k', sizeof big);
	MDB_val bigkey = { sizeof big, big };
	RC(mdb_put(txn, main_dbi, &bigkey, &d, 0), MDB_BAD_VALSIZE);
	k = val("banana"); d.mv_size = 6; d.mv_data = NULL;
	OK(mdb_put(txn, main_dbi, &k, &d, MDB_RESERVE));
	CHECK(d.mv_data != NULL);
	memcpy(d.mv_data, "yellow", 6);
	k = val("cherry"); d = val("dark");
	OK(mdb_put(txn, main_dbi, &k, &d, MDB_APPEND));
	k = val("aaa");
	RC(mdb_put(txn, main_dbi, &k, &d, MDB_APPEND), MDB_KEYEXIST);
	k = val("banana");
	OK(mdb_get(txn, main_dbi, &k, &out));
	CHECK(val_is(out, "yellow"));
	k = val("nothing");
	RC(mdb_get(txn, main_dbi, &k, &out), MDB_NOTFOUND);
	RC(mdb_del(txn, main_dbi, &k, NULL), MDB_NOTFOUND);
	RC(mdb_get(txn, 77, &k, &out), EINVAL);
	RC(mdb_get(txn, main_dbi, NULL, &out), EINVAL);

	/* Named DBs. */
	OK(mdb_dbi_open(txn, "dups", MDB_CREATE | MDB_DUPSORT, &dups));
	OK(mdb_dbi_open(txn, "ints", MDB_CREATE | MDB_INTEGERKEY, &ints));
	OK(mdb_dbi_open(txn, "rev", MDB_CREATE, &rev));
	MDB_dbi none;
	RC(mdb_dbi_open(txn, "absent", 0, &none), MDB_NOTFOUND);
	RC(mdb_dbi_open(txn, "apple", 0, &none), MDB_INCOMPATIBLE); /* a plain key */
	MDB_dbi extra;
	OK(mdb_dbi_open(txn, "fourth", MDB_CREATE, &extra));
	RC(mdb_dbi_open(txn, "fifth", MDB_CREATE, &none), MDB_DBS_FULL);
	OK(mdb_dbi_flags(txn, dups, &flags));
	CHECK(flags == MDB_DUPSORT);
	OK(mdb_set_compare(txn, rev, reverse_cmp));
	OK(mdb_set_relfunc(txn, rev, NULL));
	OK(mdb_set_relctx(txn, rev, NULL));
	MDB_val a = val("a"), b = val("b");
	CHECK(mdb_cmp(txn, main_dbi, &a, &b) < 0);
	CHECK(mdb_cmp(txn, rev, &a, &b) > 0);
	CHECK(mdb_dcmp(txn, dups, &a, &b) < 0);
	const char *words[] = { "x", "y", "z" };
	for (int i = 0; i < 3; i++) {
		k = val(words[i]); d = val(words[i]);
		OK(mdb_put(txn, rev, &k, &d, 0));
	}
	for (int i = 0; i < 5; i++) {
		char v[8]; snprintf(v, sizeof v, "v%d", 4 - i);
		k = val("key"); d.mv_size = strlen(v); d.mv_data = v;
		OK(mdb_put(txn, dups, &k, &d, 0));
	}
	k = val("key"); d = val("v2");
	RC(mdb_put(txn, dups, &k, &d, MDB_NODUPDATA), MDB_KEYEXIST);
	for (size_t i = 1; i <= 3; i++) {
		size_t n = i * 100;
		MDB_val ik = { sizeof n, &n };
		d = val("int");
		OK(mdb_put(txn, ints, &ik, &d, 0));
	}
	MDB_stat st;
	OK(mdb_stat(txn, dups, &st));
	CHECK(st.ms_entries == 5 && st.ms_depth == 1);
	OK(mdb_txn_commit(txn));

	/* Cursors on a read txn; renew. */
	OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	OK(mdb_set_compare(txn, rev, reverse_cmp));
	OK(mdb_set_dupsort(txn, dups, bytes_cmp));
	MDB_cursor *cur;
	OK(mdb_cursor_open(txn, rev, &cur));
	CHECK(mdb_cursor_txn(cur) == txn && mdb_cursor_dbi(cur) == rev);
	OK(mdb_cursor_get(cur, &k, &d, MDB_FIRST));
	CHECK(val_is(k, "z")); /* the C comparator orders the DB */
	OK(mdb_cursor_get(cur, &k, &d, MDB_NEXT));
	CHECK(val_is(k, "y"));
	OK(mdb_cursor_get(cur, &k, &d, MDB_LAST));
	CHECK(val_is(k, "x"));
	RC(mdb_cursor_get(cur, &k, &d, MDB_NEXT), MDB_NOTFOUND);
	RC(mdb_cursor_get(cur, &k, &d, 99), EINVAL);
	mdb_cursor_close(cur);
	OK(mdb_cursor_open(txn, dups, &cur));
	k = val("key");
	OK(mdb_cursor_get(cur, &k, &d, MDB_SET));
	CHECK(val_is(d, "v0"));
	size_t count = 0;
	OK(mdb_cursor_count(cur, &count));
	CHECK(count == 5);
	OK(mdb_cursor_get(cur, &k, &d, MDB_LAST_DUP));
	CHECK(val_is(d, "v4"));
	d = val("v25");
	OK(mdb_cursor_get(cur, &k, &d, MDB_GET_BOTH_RANGE));
	CHECK(val_is(d, "v3"));
	d = val("v25");
	RC(mdb_cursor_get(cur, &k, &d, MDB_GET_BOTH), MDB_NOTFOUND);
	k = val("x");
	RC(mdb_cursor_put(cur, &k, &d, 0), EACCES);
	RC(mdb_cursor_del(cur, 0), EACCES);
	k = val("q"); d = val("q");
	RC(mdb_put(txn, dups, &k, &d, 0), EACCES);
	RC(mdb_del(txn, dups, &k, NULL), EACCES);
	RC(mdb_drop(txn, dups, 0), EACCES);
	RC(mdb_dbi_open(txn, "absent", MDB_CREATE, &none), MDB_DBS_FULL); /* no handle left */
	size_t id = mdb_txn_id(txn);
	CHECK(id == 1);
	mdb_txn_reset(txn);
	RC(mdb_cursor_get(cur, &k, &d, MDB_FIRST), MDB_BAD_TXN);
	OK(mdb_txn_renew(txn));
	RC(mdb_txn_renew(txn), EINVAL);
	OK(mdb_cursor_renew(txn, cur));
	OK(mdb_cursor_get(cur, &k, &d, MDB_FIRST));
	CHECK(val_is(k, "key") && val_is(d, "v0"));
	mdb_cursor_close(cur);
	OK(mdb_cursor_open(txn, main_dbi, &cur));
	OK(mdb_cursor_get(cur, &k, &d, MDB_FIRST));
	RC(mdb_cursor_count(cur, &count), MDB_INCOMPATIBLE);
	mdb_cursor_close(cur);
	int nlines = 0;
	CHECK(mdb_reader_list(env, count_lines, &nlines) == 0);
	CHECK(nlines == 2); /* header + this reader */
	int dead = -1;
	OK(mdb_reader_check(env, &dead));
	CHECK(dead == 0);
	OK(mdb_txn_commit(txn));
	/* Without MDB_NOTLS the thread keeps its reader slot, idle, for its next read txn. */
	nlines = 0;
	CHECK(mdb_reader_list(env, count_lines, &nlines) == 0);
	CHECK(nlines == 2); /* header + the idle slot */
	OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	nlines = 0;
	CHECK(mdb_reader_list(env, count_lines, &nlines) == 0);
	CHECK(nlines == 2); /* the same slot, taken again */
	mdb_txn_abort(txn);

	/* Handles used after they ended: freed memory in LMDB (so only checked on ferrocore),
	 * an error code here: EINVAL from a call that names a DB (the txn knows none, as LMDB's
	 * reset and ended txns; tests/c/finished_txns.c), MDB_BAD_TXN from the others. */
	if (getenv("EXPECT_FERROCORE")) {
		MDB_txn *ended;
		MDB_cursor *closed;
		OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &ended));
		OK(mdb_cursor_open(ended, main_dbi, &closed));
		mdb_cursor_close(closed);
		RC(mdb_cursor_get(closed, &k, &d, MDB_FIRST), EINVAL);
		mdb_cursor_close(closed); /* a second close is ignored */
		OK(mdb_txn_commit(ended));
		k = val("apple");
		RC(mdb_get(ended, main_dbi, &k, &out), EINVAL);
		RC(mdb_txn_commit(ended), MDB_BAD_TXN);
		mdb_txn_abort(ended);
	}

	/* Write cursors: several at once, fixed up when the other writes. */
	OK(mdb_txn_begin(env, NULL, 0, &txn));
	MDB_cursor *c1, *c2;
	OK(mdb_cursor_open(txn, main_dbi, &c1));
	OK(mdb_cursor_open(txn, main_dbi, &c2));
	k = val("banana");
	OK(mdb_cursor_get(c1, &k, &d, MDB_SET));
	OK(mdb_cursor_get(c2, &k, &d, MDB_SET));
	OK(mdb_cursor_del(c2, 0)); /* c1 stood on it */
	OK(mdb_cursor_get(c1, &k, &d, MDB_NEXT));
	CHECK(val_is(k, "cherry"));
	k = val("date"); d = val("brown");
	OK(mdb_cursor_put(c2, &k, &d, 0));
	OK(mdb_cursor_get(c2, &k, &d, MDB_GET_CURRENT));
	CHECK(val_is(k, "date"));
	d = val("BROWN");
	OK(mdb_cursor_put(c2, &k, &d, MDB_CURRENT));
	OK(mdb_cursor_get(c1, &k, &d, MDB_NEXT));
	CHECK(val_is(k, "date") && val_is(d, "BROWN"));
	mdb_cursor_close(c2);
	/* Nested txns: abort discards, commit keeps; the parent is blocked meanwhile. */
	MDB_txn *child;
	OK(mdb_txn_begin(env, txn, 0, &child));
	k = val("kiwi"); d = val("green");
	OK(mdb_put(child, main_dbi, &k, &d, 0));
	RC(mdb_get(txn, main_dbi, &k, &out), MDB_BAD_TXN);
	RC(mdb_txn_begin(env, txn, MDB_RDONLY, &txn), MDB_BAD_TXN);
	mdb_txn_abort(child);
	RC(mdb_get(txn, main_dbi, &k, &out), MDB_NOTFOUND);
	OK(mdb_txn_begin(env, txn, 0, &child));
	OK(mdb_put(child, main_dbi, &k, &d, 0));
	OK(mdb_txn_commit(child));
	OK(mdb_get(txn, main_dbi, &k, &out));
	CHECK(val_is(out, "green"));
	/* DUPFIXED and MULTIPLE. */
	MDB_dbi fixed;
	OK(mdb_drop(txn, extra, 1));
	RC(mdb_get(txn, extra, &k, &out), EINVAL); /* the handle went with the DB */
	OK(mdb_dbi_open(txn, "fixed", MDB_CREATE | MDB_DUPSORT | MDB_DUPFIXED, &fixed));
	unsigned int vals[4] = { 4, 1, 3, 2 };
	MDB_val multi[2];
	multi[0].mv_size = sizeof(unsigned int); multi[0].mv_data = vals;
	multi[1].mv_size = 4; multi[1].mv_data = NULL;
	MDB_cursor *fc;
	OK(mdb_cursor_open(txn, fixed, &fc));
	k = val("f");
	OK(mdb_cursor_put(fc, &k, multi, MDB_MULTIPLE));
	CHECK(multi[1].mv_size == 4);
	OK(mdb_cursor_get(fc, &k, &d, MDB_FIRST));
	OK(mdb_cursor_get(fc, &k, &d, MDB_GET_MULTIPLE));
	CHECK(d.mv_size == 4 * sizeof(unsigned int));
	OK(mdb_cursor_del(fc, MDB_NODUPDATA));
	RC(mdb_cursor_get(fc, &k, &d, MDB_FIRST), MDB_NOTFOUND);
	OK(mdb_drop(txn, dups, 0));
	OK(mdb_stat(txn, dups, &st));
	CHECK(st.ms_entries == 0);
	RC(mdb_drop(txn, dups, 2), EINVAL);
	OK(mdb_txn_commit(txn)); /* frees c1 and fc */

	/* Statistics, info, sync, copies. */
	MDB_envinfo info;
	OK(mdb_env_info(env, &info));
	CHECK(info.me_maxreaders == 16 && info.me_last_txnid == 2 && info.me_mapsize == (64 << 20));
	OK(mdb_env_stat(env, &st));
	CHECK(st.ms_psize >= 4096);
	OK(mdb_env_sync(env, 1));
	snprintf(path, sizeof path, "%s/copy", dir);
	CHECK(mkdir(path, 0755) == 0);
	OK(mdb_env_copy(env, path));
	RC(mdb_env_copy(env, path), EEXIST);
	snprintf(path, sizeof path, "%s/copy2", dir);
	CHECK(mkdir(path, 0755) == 0);
	OK(mdb_env_copy2(env, path, MDB_CP_COMPACT));
	snprintf(path, sizeof path, "%s/copy.fd", dir);
	int cfd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	CHECK(cfd >= 0);
	OK(mdb_env_copyfd(env, cfd));
	OK(mdb_env_copyfd2(env, cfd, 0));
	close(cfd);
	OK(mdb_env_set_mapsize(env, 128 << 20));
	mdb_dbi_close(env, ints);
	OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	RC(mdb_get(txn, ints, &k, &out), EINVAL); /* closed handle */
	mdb_txn_abort(txn);
	mdb_env_close(env);

	/* The copy opens and holds the data. */
	snprintf(path, sizeof path, "%s/copy", dir);
	OK(mdb_env_create(&env));
	OK(mdb_env_set_maxdbs(env, 4));
	OK(mdb_env_open(env, path, MDB_RDONLY, 0664));
	OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	OK(mdb_dbi_open(txn, NULL, 0, &main_dbi));
	k = val("kiwi");
	OK(mdb_get(txn, main_dbi, &k, &out));
	CHECK(val_is(out, "green"));
	RC(mdb_txn_begin(env, NULL, 0, &child), EACCES);
	mdb_txn_abort(txn);
	mdb_env_close(env);

	/* A small map fills: MDB_MAP_FULL. */
	snprintf(path, sizeof path, "%s/small", dir);
	CHECK(mkdir(path, 0755) == 0);
	OK(mdb_env_create(&env));
	OK(mdb_env_set_mapsize(env, 256 << 10));
	OK(mdb_env_open(env, path, 0, 0664));
	OK(mdb_txn_begin(env, NULL, 0, &txn));
	OK(mdb_dbi_open(txn, NULL, 0, &main_dbi));
	int rc = 0;
	char value[1000]; memset(value, 'v', sizeof value);
	for (int i = 0; i < 10000 && rc == 0; i++) {
		char key[16]; snprintf(key, sizeof key, "%08d", i);
		k = val(key); d.mv_size = sizeof value; d.mv_data = value;
		rc = mdb_put(txn, main_dbi, &k, &d, 0);
	}
	CHECK(rc == MDB_MAP_FULL);
	RC(mdb_txn_commit(txn), MDB_BAD_TXN);
	mdb_env_close(env);

	/* Every reader slot taken: MDB_READERS_FULL. */
	snprintf(path, sizeof path, "%s/readers", dir);
	CHECK(mkdir(path, 0755) == 0);
	OK(mdb_env_create(&env));
	OK(mdb_env_set_maxreaders(env, 2));
	OK(mdb_env_open(env, path, MDB_NOTLS, 0664));
	MDB_txn *r1, *r2, *r3;
	OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r1));
	OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r2));
	RC(mdb_txn_begin(env, NULL, MDB_RDONLY, &r3), MDB_READERS_FULL);
	mdb_txn_abort(r1);
	OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r3));
	mdb_txn_abort(r3);
	mdb_txn_abort(r2);
	nlines = 0;
	CHECK(mdb_reader_list(env, count_lines, &nlines) == 0);
	CHECK(nlines == 1); /* "(no active readers)": with MDB_NOTLS no slot stays */
	mdb_env_close(env);

	/* Not an LMDB file: MDB_INVALID. */
	snprintf(path, sizeof path, "%s/garbage", dir);
	CHECK(mkdir(path, 0755) == 0);
	{
		char file[4200];
		snprintf(file, sizeof file, "%s/data.mdb", path);
		FILE *f = fopen(file, "w");
		CHECK(f != NULL);
		for (int i = 0; i < 8192; i++) fputc('x', f);
		fclose(f);
	}
	OK(mdb_env_create(&env));
	RC(mdb_env_open(env, path, 0, 0664), MDB_INVALID);
	mdb_env_close(env);

	if (failures) { fprintf(stderr, "%d checks failed\n", failures); return 1; }
	printf("api: all checks passed\n");
	return 0;
}
