/* mdb_cursor_put with MDB_MULTIPLE: on every return data[1].mv_size is the number of
 * values stored (0 when the call is refused before the first one), and data[0].mv_data has
 * moved to the last value stored, or to the value that failed. Built and run by
 * tests/c_programs.rs on the real LMDB (the oracle) and on ferrocore; argv[1] is an empty
 * directory. Exits 0 when every check passed, else prints the failed checks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lmdb.h"

static int failures = 0;
#define CHECK(expr) do { if (!(expr)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #expr); failures++; } } while (0)
#define RC(call, want) do { int rc_ = (call); if (rc_ != (want)) { fprintf(stderr, "%s:%d: %s returned %d (%s), wanted %d\n", __FILE__, __LINE__, #call, rc_, mdb_strerror(rc_), (want)); failures++; } } while (0)
#define OK(call) RC(call, MDB_SUCCESS)

static MDB_val val(const char *s) { MDB_val v; v.mv_size = strlen(s); v.mv_data = (void *)s; return v; }

/* Sets `m` to `count` values of 4 bytes at `values`. */
static void multi(MDB_val m[2], unsigned int *values, size_t count) {
	m[0].mv_size = sizeof(unsigned int);
	m[0].mv_data = values;
	m[1].mv_size = count;
	m[1].mv_data = NULL;
}

/* The number of values of `key` in the cursor's DB, or -1 if it is missing. */
static long values_of(MDB_cursor *c, const char *key) {
	MDB_val k = val(key), d;
	size_t n = 0;
	if (mdb_cursor_get(c, &k, &d, MDB_SET) != 0) return -1;
	if (mdb_cursor_count(c, &n) != 0) return -2;
	return (long)n;
}

/* True if `key` holds the 4-byte value `v`. */
static int has_value(MDB_cursor *c, const char *key, unsigned int v) {
	MDB_val k = val(key), d;
	d.mv_size = sizeof v;
	d.mv_data = &v;
	return mdb_cursor_get(c, &k, &d, MDB_GET_BOTH) == 0;
}

int main(int argc, char **argv) {
	if (argc != 2) { fprintf(stderr, "usage: multiple DIR\n"); return 2; }
	MDB_env *env;
	OK(mdb_env_create(&env));
	OK(mdb_env_set_maxdbs(env, 4));
	OK(mdb_env_open(env, argv[1], 0, 0644));
	MDB_txn *txn;
	OK(mdb_txn_begin(env, NULL, 0, &txn));
	MDB_dbi fixed, plain, dups;
	OK(mdb_dbi_open(txn, "fixed", MDB_CREATE | MDB_DUPSORT | MDB_DUPFIXED, &fixed));
	OK(mdb_dbi_open(txn, "plain", MDB_CREATE, &plain));
	OK(mdb_dbi_open(txn, "dups", MDB_CREATE | MDB_DUPSORT, &dups));
	MDB_cursor *c;
	OK(mdb_cursor_open(txn, fixed, &c));
	MDB_val m[2], k, d;

	/* Every value stored: the count, and mv_data on the last value. */
	unsigned int three[3] = { 1, 2, 3 };
	multi(m, three, 3);
	k = val("a");
	OK(mdb_cursor_put(c, &k, m, MDB_MULTIPLE));
	CHECK(m[1].mv_size == 3);
	CHECK(m[0].mv_data == &three[2]);
	OK(mdb_cursor_get(c, &k, &d, MDB_GET_CURRENT));
	CHECK(d.mv_size == 4 && *(unsigned int *)d.mv_data == 3);
	CHECK(values_of(c, "a") == 3);

	/* NODUPDATA stops at a value already there: the ones before it stay, and the count
	 * says how many they are. */
	unsigned int five[5] = { 10, 11, 2, 12, 13 };
	multi(m, five, 5);
	k = val("a");
	RC(mdb_cursor_put(c, &k, m, MDB_MULTIPLE | MDB_NODUPDATA), MDB_KEYEXIST);
	CHECK(m[1].mv_size == 2);
	CHECK(m[0].mv_data == &five[2]);
	CHECK(values_of(c, "a") == 5);
	CHECK(has_value(c, "a", 10) && has_value(c, "a", 11));
	CHECK(!has_value(c, "a", 12) && !has_value(c, "a", 13));

	/* The first value is already there: nothing stored. */
	unsigned int first_exists[2] = { 1, 20 };
	multi(m, first_exists, 2);
	k = val("a");
	RC(mdb_cursor_put(c, &k, m, MDB_MULTIPLE | MDB_NODUPDATA), MDB_KEYEXIST);
	CHECK(m[1].mv_size == 0);
	CHECK(m[0].mv_data == &first_exists[0]);
	CHECK(!has_value(c, "a", 20));

	/* A new key whose values repeat one. */
	unsigned int repeat[4] = { 7, 8, 7, 9 };
	multi(m, repeat, 4);
	k = val("b");
	RC(mdb_cursor_put(c, &k, m, MDB_MULTIPLE | MDB_NODUPDATA), MDB_KEYEXIST);
	CHECK(m[1].mv_size == 2);
	CHECK(m[0].mv_data == &repeat[2]);
	CHECK(values_of(c, "b") == 2);
	CHECK(!has_value(c, "b", 9));

	/* Without NODUPDATA a repeat is no error. */
	multi(m, repeat, 4);
	k = val("b");
	OK(mdb_cursor_put(c, &k, m, MDB_MULTIPLE));
	CHECK(m[1].mv_size == 4);
	CHECK(m[0].mv_data == &repeat[3]);
	CHECK(values_of(c, "b") == 3);

	/* A count of 0: LMDB stores the first value anyway and says 1. */
	unsigned int one[1] = { 5 };
	multi(m, one, 0);
	k = val("c");
	OK(mdb_cursor_put(c, &k, m, MDB_MULTIPLE));
	CHECK(m[1].mv_size == 1);
	CHECK(m[0].mv_data == &one[0]);
	CHECK(values_of(c, "c") == 1 && has_value(c, "c", 5));

	/* A value bigger than the largest key: refused before the first, the txn goes on. */
	static char big[2 * 600];
	m[0].mv_size = 600; m[0].mv_data = big;
	m[1].mv_size = 2;
	k = val("d");
	RC(mdb_cursor_put(c, &k, m, MDB_MULTIPLE), MDB_BAD_VALSIZE);
	CHECK(m[1].mv_size == 0);
	CHECK(m[0].mv_data == big);
	CHECK(values_of(c, "d") == -1);

	/* An empty key: refused, count 0. */
	multi(m, three, 3);
	k.mv_size = 0; k.mv_data = "";
	RC(mdb_cursor_put(c, &k, m, MDB_MULTIPLE), MDB_BAD_VALSIZE);
	CHECK(m[1].mv_size == 0);
	CHECK(m[0].mv_data == &three[0]);

	/* The txn is still good after those refusals. */
	multi(m, three, 3);
	k = val("e");
	OK(mdb_cursor_put(c, &k, m, MDB_MULTIPLE));
	CHECK(m[1].mv_size == 3);
	mdb_cursor_close(c);

	/* A DB that is not DUPFIXED: MDB_INCOMPATIBLE, count 0, nothing stored. */
	MDB_dbi not_fixed[2] = { plain, dups };
	for (int i = 0; i < 2; i++) {
		OK(mdb_cursor_open(txn, not_fixed[i], &c));
		multi(m, three, 3);
		k = val("a");
		RC(mdb_cursor_put(c, &k, m, MDB_MULTIPLE), MDB_INCOMPATIBLE);
		CHECK(m[1].mv_size == 0);
		CHECK(m[0].mv_data == &three[0]);
		RC(mdb_get(txn, not_fixed[i], &k, &d), MDB_NOTFOUND);
		mdb_cursor_close(c);
	}
	OK(mdb_txn_commit(txn));

	/* A read-only txn: EACCES, count 0. */
	OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	OK(mdb_cursor_open(txn, fixed, &c));
	multi(m, three, 3);
	k = val("f");
	RC(mdb_cursor_put(c, &k, m, MDB_MULTIPLE), EACCES);
	CHECK(m[1].mv_size == 0);
	CHECK(values_of(c, "a") == 5);
	CHECK(values_of(c, "b") == 3);
	CHECK(values_of(c, "e") == 3);
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	mdb_env_close(env);

	if (failures) { fprintf(stderr, "%d checks failed\n", failures); return 1; }
	printf("multiple: all checks passed\n");
	return 0;
}
