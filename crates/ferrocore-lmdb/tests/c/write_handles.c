/* Write txn handles: one after another on one environment, from two threads at once,
 * mixed with read and nested txns, a write txn refused at its begin, a use after the end,
 * and an environment closed and another opened after its write txns. LMDB begins every
 * top-level write txn of an environment in the same handle (me_txn0); ferrocore keeps the
 * last one's ended handle for the next (MDB_env::write_handle). Built and run by
 * tests/c_programs.rs on the real LMDB (the oracle) and on ferrocore; argv[1] is an empty
 * directory. Exits 0 when every check passed, else prints the failed checks. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lmdb.h"

static int failures = 0;
#define CHECK(expr) do { if (!(expr)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #expr); failures++; } } while (0)
#define RC(call, want) do { int rc_ = (call); if (rc_ != (want)) { fprintf(stderr, "%s:%d: %s returned %d (%s), wanted %d\n", __FILE__, __LINE__, #call, rc_, mdb_strerror(rc_), (want)); failures++; } } while (0)
#define OK(call) RC(call, MDB_SUCCESS)

#define PER_THREAD 300

static MDB_env *open_env(const char *dir, unsigned int flags) {
	MDB_env *env = NULL;
	OK(mdb_env_create(&env));
	OK(mdb_env_set_mapsize(env, 16 << 20));
	OK(mdb_env_open(env, dir, flags | MDB_NOSYNC, 0644));
	return env;
}

/* Puts key `k` (a number) with value `v` in a write txn of its own, committed (or aborted
 * every 7th time, then put again and committed). */
static void put_one(MDB_env *env, unsigned int k, unsigned int v) {
	for (int attempt = 0; attempt < 2; attempt++) {
		MDB_txn *txn;
		MDB_dbi dbi;
		OK(mdb_txn_begin(env, NULL, 0, &txn));
		OK(mdb_dbi_open(txn, NULL, 0, &dbi));
		MDB_val key = { sizeof k, &k }, data = { sizeof v, &v };
		OK(mdb_put(txn, dbi, &key, &data, 0));
		if (attempt == 0 && k % 7 == 0) {
			mdb_txn_abort(txn);
			continue;
		}
		OK(mdb_txn_commit(txn));
		return;
	}
}

struct writer { MDB_env *env; unsigned int first; };

static void *write_keys(void *arg) {
	struct writer *w = arg;
	for (unsigned int i = 0; i < PER_THREAD; i++) {
		put_one(w->env, w->first + i, i);
		if (i % 50 == 0) {
			/* A read txn between the writes, in the same thread. */
			MDB_txn *r;
			OK(mdb_txn_begin(w->env, NULL, MDB_RDONLY, &r));
			mdb_txn_abort(r);
		}
	}
	return NULL;
}

/* The number of entries in the main DB. */
static size_t entries(MDB_env *env) {
	MDB_txn *txn;
	MDB_stat st;
	MDB_dbi main_db;
	memset(&st, 0, sizeof st);
	OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	OK(mdb_dbi_open(txn, NULL, 0, &main_db));
	OK(mdb_stat(txn, main_db, &st));
	mdb_txn_abort(txn);
	return st.ms_entries;
}

int main(int argc, char **argv) {
	if (argc < 2) return 2;
	const char *dir = argv[1];
	MDB_env *env = open_env(dir, 0);

	/* Write txns one after another: the same handle each time (LMDB's me_txn0). */
	MDB_txn *first, *second, *read, *nested;
	MDB_dbi dbi;
	OK(mdb_txn_begin(env, NULL, 0, &first));
	OK(mdb_dbi_open(first, NULL, 0, &dbi));
	OK(mdb_txn_commit(first));
	OK(mdb_txn_begin(env, NULL, 0, &second));
	CHECK(second == first);
	unsigned int k = 1, v = 1;
	MDB_val key = { sizeof k, &k }, data = { sizeof v, &v };
	OK(mdb_put(second, dbi, &key, &data, 0));
	/* A nested txn and a read txn while the write txn lives. */
	OK(mdb_txn_begin(env, second, 0, &nested));
	CHECK(nested != second);
	k = 2;
	OK(mdb_put(nested, dbi, &key, &data, 0));
	OK(mdb_txn_commit(nested));
	OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &read));
	CHECK(read != second);
	mdb_txn_abort(read);
	OK(mdb_txn_commit(second));
	/* A use after the end: refused (the handle knows no DB), nothing written. */
	k = 3;
	RC(mdb_put(second, dbi, &key, &data, 0), EINVAL);
	CHECK(entries(env) == 2);

	/* Two threads writing at once: each waits for the other's txn to end. */
	pthread_t threads[2];
	struct writer writers[2] = { { env, 1000 }, { env, 100000 } };
	for (int i = 0; i < 2; i++) CHECK(pthread_create(&threads[i], NULL, write_keys, &writers[i]) == 0);
	for (int i = 0; i < 2; i++) CHECK(pthread_join(threads[i], NULL) == 0);
	CHECK(entries(env) == 2 + 2 * PER_THREAD);
	mdb_env_close(env);

	/* A write txn refused at its begin (a read-only environment) counts no live txn: the
	 * map size may be set, which LMDB and ferrocore refuse while a txn lives. */
	env = open_env(dir, MDB_RDONLY);
	MDB_txn *refused = NULL;
	RC(mdb_txn_begin(env, NULL, 0, &refused), EACCES);
	OK(mdb_env_set_mapsize(env, 32 << 20));
	CHECK(entries(env) == 2 + 2 * PER_THREAD);
	mdb_env_close(env);

	/* Opened again after the close: write txns begin and commit as before. */
	env = open_env(dir, 0);
	for (unsigned int i = 0; i < 20; i++) put_one(env, 500000 + i, i);
	CHECK(entries(env) == 2 + 2 * PER_THREAD + 20);
	mdb_env_close(env);

	if (failures) {
		fprintf(stderr, "%d checks failed\n", failures);
		return 1;
	}
	return 0;
}
