/* What the calls on DBs answer where LMDB's checks decide it, checked against Debian's
 * LMDB 0.9.24: flags given to open an existing DB (ignored: it opens with its own),
 * INTEGERDUP and REVERSEDUP without DUPSORT (kept, doing nothing), a main DB with DUPSORT
 * (no named DBs in it), keys longer than the limit looked up (not found), a named DB's
 * record in the main DB (a put with MDB_NOOVERWRITE answers MDB_KEYEXIST with the record;
 * a delete is refused and fails the txn), a txn that dirtied a page and freed it again
 * (it commits), and the free DB's handle 0. Built and run by tests/c_programs.rs on the
 * real LMDB (the oracle) and on ferrocore; argv[1] is an empty directory. Exits 0 when
 * every check passed, else prints the failed checks. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "lmdb.h"

static int failures = 0;
#define CHECK(expr) do { if (!(expr)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #expr); failures++; } } while (0)
#define RC(call, want) do { int rc_ = (call); if (rc_ != (want)) { fprintf(stderr, "%s:%d: %s returned %d (%s), wanted %d\n", __FILE__, __LINE__, #call, rc_, mdb_strerror(rc_), (want)); failures++; } } while (0)
#define OK(call) RC(call, MDB_SUCCESS)

static MDB_env *open_env(const char *dir) {
	MDB_env *env = NULL;
	OK(mdb_env_create(&env));
	OK(mdb_env_set_maxdbs(env, 8));
	OK(mdb_env_open(env, dir, MDB_NOSYNC, 0644));
	return env;
}

static size_t last_txnid(MDB_env *env) {
	MDB_envinfo info;
	OK(mdb_env_info(env, &info));
	return info.me_last_txnid;
}

int main(int argc, char **argv) {
	if (argc != 2) return 2;
	MDB_env *env = open_env(argv[1]);
	MDB_txn *txn;
	MDB_dbi main_dbi, dups, plain, other;
	MDB_cursor *cur;
	MDB_stat st;
	unsigned int flags;
	MDB_val k = { 3, "abc" }, v = { 3, "def" }, out;
	char long_key[600];
	memset(long_key, 'x', sizeof long_key);
	MDB_val lk = { sizeof long_key, long_key }, empty = { 0, "" };

	OK(mdb_txn_begin(env, NULL, 0, &txn));
	OK(mdb_dbi_open(txn, NULL, 0, &main_dbi));
	OK(mdb_dbi_open(txn, "dups", MDB_CREATE | MDB_DUPSORT, &dups));
	OK(mdb_dbi_open(txn, "plain", MDB_CREATE, &plain));
	/* INTEGERDUP and REVERSEDUP without DUPSORT: kept, and the DB holds one value a key. */
	OK(mdb_dbi_open(txn, "intdup", MDB_CREATE | MDB_INTEGERDUP, &other));
	OK(mdb_dbi_flags(txn, other, &flags));
	CHECK(flags == MDB_INTEGERDUP);
	OK(mdb_put(txn, other, &k, &v, 0));
	OK(mdb_put(txn, other, &k, &k, 0));
	OK(mdb_stat(txn, other, &st));
	CHECK(st.ms_entries == 1);
	OK(mdb_dbi_open(txn, "revdup", MDB_CREATE | MDB_REVERSEDUP, &other));
	OK(mdb_dbi_flags(txn, other, &flags));
	CHECK(flags == MDB_REVERSEDUP);
	/* An open DB opened again with other flags: the same handle, its own flags. */
	OK(mdb_dbi_open(txn, "dups", MDB_INTEGERKEY, &other));
	CHECK(other == dups);
	OK(mdb_dbi_open(txn, "plain", MDB_CREATE | MDB_DUPSORT, &other));
	CHECK(other == plain);
	OK(mdb_put(txn, plain, &k, &v, 0));
	OK(mdb_put(txn, dups, &k, &v, 0));
	OK(mdb_txn_commit(txn));
	mdb_env_close(env);

	/* After a reopen, the DB is not open yet: the flags given are ignored all the same. */
	env = open_env(argv[1]);
	OK(mdb_txn_begin(env, NULL, 0, &txn));
	OK(mdb_dbi_open(txn, NULL, 0, &main_dbi));
	OK(mdb_dbi_open(txn, "plain", MDB_DUPSORT | MDB_REVERSEKEY, &plain));
	OK(mdb_dbi_flags(txn, plain, &flags));
	CHECK(flags == 0);
	MDB_val v2 = { 3, "ghi" };
	OK(mdb_put(txn, plain, &k, &v2, 0)); /* replaces: not a DUPSORT DB */
	OK(mdb_stat(txn, plain, &st));
	CHECK(st.ms_entries == 1);
	OK(mdb_dbi_open(txn, "dups", MDB_INTEGERKEY, &dups));
	OK(mdb_dbi_flags(txn, dups, &flags));
	CHECK(flags == MDB_DUPSORT);

	/* Keys longer than the limit are looked up, and not found; an empty one is refused. */
	RC(mdb_get(txn, plain, &lk, &out), MDB_NOTFOUND);
	RC(mdb_del(txn, plain, &lk, NULL), MDB_NOTFOUND);
	RC(mdb_get(txn, plain, &empty, &out), MDB_BAD_VALSIZE);
	RC(mdb_del(txn, plain, &empty, NULL), MDB_BAD_VALSIZE);
	RC(mdb_put(txn, plain, &lk, &v, 0), MDB_BAD_VALSIZE);
	OK(mdb_cursor_open(txn, plain, &cur));
	RC(mdb_cursor_get(cur, &lk, &out, MDB_SET), MDB_NOTFOUND);
	mdb_cursor_close(cur);

	/* A named DB's record in the main DB. */
	MDB_val name = { 5, "plain" };
	MDB_val data = v;
	RC(mdb_put(txn, main_dbi, &name, &data, MDB_NOOVERWRITE), MDB_KEYEXIST);
	CHECK(data.mv_size == 48); /* the record, as the existing value */
	data = v;
	RC(mdb_put(txn, main_dbi, &name, &data, 0), MDB_INCOMPATIBLE);
	OK(mdb_get(txn, main_dbi, &name, &out));
	CHECK(out.mv_size == 48);
	OK(mdb_txn_commit(txn));
	size_t before = last_txnid(env);
	OK(mdb_txn_begin(env, NULL, 0, &txn));
	RC(mdb_del(txn, main_dbi, &name, NULL), MDB_INCOMPATIBLE);
	RC(mdb_put(txn, plain, &k, &v, 0), MDB_BAD_TXN); /* the txn failed */
	RC(mdb_txn_commit(txn), MDB_BAD_TXN);
	CHECK(last_txnid(env) == before);

	/* A txn that dirtied a page and freed it again commits (its id is used); one that
	 * changed nothing does not. */
	OK(mdb_txn_begin(env, NULL, 0, &txn));
	MDB_val nk = { 3, "new" };
	OK(mdb_put(txn, main_dbi, &nk, &v, 0));
	OK(mdb_del(txn, main_dbi, &nk, NULL));
	OK(mdb_txn_commit(txn));
	CHECK(last_txnid(env) == before + 1);
	OK(mdb_txn_begin(env, NULL, 0, &txn));
	RC(mdb_put(txn, plain, &k, &v, MDB_NOOVERWRITE), MDB_KEYEXIST);
	RC(mdb_del(txn, plain, &nk, NULL), MDB_NOTFOUND);
	OK(mdb_txn_commit(txn));
	CHECK(last_txnid(env) == before + 1);

	/* The free DB's handle 0: statistics, and a read txn's cursor; nothing else. */
	OK(mdb_txn_begin(env, NULL, 0, &txn));
	OK(mdb_stat(txn, 0, &st));
	RC(mdb_dbi_flags(txn, 0, &flags), EINVAL);
	RC(mdb_get(txn, 0, &k, &out), EINVAL);
	RC(mdb_put(txn, 0, &k, &v, 0), EINVAL);
	RC(mdb_del(txn, 0, &k, NULL), EINVAL);
	RC(mdb_drop(txn, 0, 0), EINVAL);
	RC(mdb_cursor_open(txn, 0, &cur), EINVAL);
	mdb_txn_abort(txn);
	OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	OK(mdb_stat(txn, 0, &st));
	RC(mdb_get(txn, 0, &k, &out), EINVAL);
	OK(mdb_cursor_open(txn, 0, &cur));
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);

	/* A main DB with DUPSORT holds no named DB: a new name is refused (or not found), but
	 * a DB open already keeps its handle. (Not committed: LMDB then fails an assertion,
	 * writing the named DBs' records into a DUPSORT main DB.) */
	OK(mdb_txn_begin(env, NULL, 0, &txn));
	OK(mdb_dbi_open(txn, NULL, MDB_DUPSORT, &main_dbi));
	RC(mdb_dbi_open(txn, "another", MDB_CREATE, &other), MDB_INCOMPATIBLE);
	RC(mdb_dbi_open(txn, "another", 0, &other), MDB_NOTFOUND);
	OK(mdb_dbi_open(txn, "plain", 0, &other));
	CHECK(other == plain);
	mdb_txn_abort(txn);
	mdb_env_close(env);
	/* In an environment of its own, committed: a read txn says so before it finds itself
	 * read-only. */
	char path[4096];
	snprintf(path, sizeof path, "%s/dupsort-main.mdb", argv[1]);
	OK(mdb_env_create(&env));
	OK(mdb_env_set_maxdbs(env, 8));
	OK(mdb_env_open(env, path, MDB_NOSUBDIR | MDB_NOSYNC, 0644));
	OK(mdb_txn_begin(env, NULL, 0, &txn));
	OK(mdb_dbi_open(txn, NULL, MDB_DUPSORT, &main_dbi));
	MDB_val fresh = { 3, "xyz" }; /* v points into the closed environment's map */
	OK(mdb_put(txn, main_dbi, &k, &fresh, 0));
	OK(mdb_txn_commit(txn));
	OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	RC(mdb_dbi_open(txn, "another", MDB_CREATE, &other), MDB_INCOMPATIBLE);
	RC(mdb_dbi_open(txn, "another", 0, &other), MDB_NOTFOUND);
	mdb_txn_abort(txn);

	mdb_env_close(env);
	if (failures) {
		fprintf(stderr, "%d checks failed\n", failures);
		return 1;
	}
	return 0;
}
