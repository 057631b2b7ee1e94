/* The codes a txn answers once it was reset or has ended, or while it has a child, as
 * LMDB's checks give them in their order: a call that names a DB checks the DB handle
 * first, and a reset or ended txn knows no DB (EINVAL); the other calls check the txn's
 * state (MDB_BAD_TXN); a write through a read txn, reset or not, is refused first
 * (EACCES). Built and run by tests/c_programs.rs on the real LMDB (the oracle) and on
 * ferrocore; argv[1] is an empty directory. Exits 0 when every check passed, else prints
 * the failed checks. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "lmdb.h"

static int failures = 0;
#define RC(call, want) do { int rc_ = (call); if (rc_ != (want)) { fprintf(stderr, "%s:%d: %s returned %d (%s), wanted %d\n", __FILE__, __LINE__, #call, rc_, mdb_strerror(rc_), (want)); failures++; } } while (0)
#define OK(call) RC(call, MDB_SUCCESS)

static int cmp_bytes(const MDB_val *a, const MDB_val *b) {
	size_t n = a->mv_size < b->mv_size ? a->mv_size : b->mv_size;
	int c = memcmp(a->mv_data, b->mv_data, n);
	return c ? c : (a->mv_size > b->mv_size) - (a->mv_size < b->mv_size);
}

int main(int argc, char **argv) {
	if (argc != 2) return 2;
	MDB_env *env;
	MDB_txn *w, *r, *parent, *child, *other;
	MDB_dbi dbi, bad = 77;
	MDB_cursor *cur, *other_cur;
	MDB_stat st;
	unsigned int flags;
	MDB_val key = { 3, "abc" }, data = { 3, "def" }, out;

	OK(mdb_env_create(&env));
	OK(mdb_env_set_maxdbs(env, 4));
	OK(mdb_env_open(env, argv[1], MDB_NOSYNC, 0644));
	OK(mdb_txn_begin(env, NULL, 0, &w));
	OK(mdb_dbi_open(w, NULL, 0, &dbi));
	OK(mdb_put(w, dbi, &key, &data, 0));
	OK(mdb_txn_commit(w));

	/* An active read txn: a write is refused (EACCES), but an unknown DB first (EINVAL). */
	OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	RC(mdb_put(r, dbi, &key, &data, 0), EACCES);
	RC(mdb_put(r, bad, &key, &data, 0), EINVAL);
	RC(mdb_del(r, dbi, &key, NULL), EACCES);
	RC(mdb_del(r, bad, &key, NULL), EINVAL);
	RC(mdb_drop(r, dbi, 0), EACCES);
	RC(mdb_drop(r, bad, 0), EINVAL);
	RC(mdb_get(r, bad, &key, &out), EINVAL);
	OK(mdb_cursor_open(r, dbi, &cur));
	RC(mdb_cursor_put(cur, &key, &data, 0), EACCES);
	RC(mdb_cursor_del(cur, 0), EACCES);
	RC(mdb_txn_begin(env, r, 0, &child), EINVAL);

	/* Reset: it knows no DB until renewed. */
	mdb_txn_reset(r);
	RC(mdb_get(r, dbi, &key, &out), EINVAL);
	RC(mdb_put(r, dbi, &key, &data, 0), EINVAL);
	RC(mdb_del(r, dbi, &key, NULL), EINVAL);
	RC(mdb_drop(r, dbi, 0), EINVAL);
	RC(mdb_stat(r, dbi, &st), EINVAL);
	RC(mdb_dbi_flags(r, dbi, &flags), EINVAL);
	RC(mdb_cursor_open(r, dbi, &other_cur), EINVAL);
	RC(mdb_cursor_renew(r, cur), EINVAL);
	RC(mdb_set_compare(r, dbi, cmp_bytes), EINVAL);
	RC(mdb_set_dupsort(r, dbi, cmp_bytes), EINVAL);
	RC(mdb_set_relctx(r, dbi, NULL), EINVAL);
	RC(mdb_cursor_get(cur, &key, &out, MDB_FIRST), MDB_BAD_TXN);
	RC(mdb_cursor_put(cur, &key, &data, 0), EACCES);
	RC(mdb_cursor_del(cur, 0), EACCES);
	RC(mdb_dbi_open(r, NULL, 0, &dbi), MDB_BAD_TXN);
	RC(mdb_txn_begin(env, r, 0, &child), EINVAL);
	/* Renewed, it reads again. */
	OK(mdb_txn_renew(r));
	OK(mdb_cursor_renew(r, cur));
	OK(mdb_cursor_get(cur, &key, &out, MDB_FIRST));
	OK(mdb_get(r, dbi, &key, &out));
	mdb_cursor_close(cur);
	mdb_txn_reset(r);
	OK(mdb_txn_commit(r));

	/* A parent with a child: every call on it is refused (MDB_BAD_TXN). */
	OK(mdb_txn_begin(env, NULL, 0, &parent));
	OK(mdb_txn_begin(env, parent, 0, &child));
	RC(mdb_get(parent, dbi, &key, &out), MDB_BAD_TXN);
	RC(mdb_put(parent, dbi, &key, &data, 0), MDB_BAD_TXN);
	RC(mdb_stat(parent, dbi, &st), MDB_BAD_TXN);
	RC(mdb_cursor_open(parent, dbi, &other_cur), MDB_BAD_TXN);
	RC(mdb_dbi_open(parent, NULL, 0, &dbi), MDB_BAD_TXN);
	RC(mdb_txn_begin(env, parent, 0, &other), MDB_BAD_TXN);
	OK(mdb_txn_commit(child));
	OK(mdb_txn_commit(parent));

	/* The ended write txn: LMDB keeps the top-level write txn's handle for the next one
	 * (me_txn0), knowing no DB; ferrocore keeps its handle too. */
	RC(mdb_put(parent, dbi, &key, &data, 0), EINVAL);
	RC(mdb_get(parent, dbi, &key, &out), EINVAL);
	RC(mdb_del(parent, dbi, &key, NULL), EINVAL);
	RC(mdb_drop(parent, dbi, 0), EINVAL);
	RC(mdb_stat(parent, dbi, &st), EINVAL);
	RC(mdb_dbi_flags(parent, dbi, &flags), EINVAL);
	RC(mdb_cursor_open(parent, dbi, &other_cur), EINVAL);
	RC(mdb_set_compare(parent, dbi, cmp_bytes), EINVAL);
	RC(mdb_dbi_open(parent, NULL, 0, &dbi), MDB_BAD_TXN);

	mdb_env_close(env);
	if (failures) {
		fprintf(stderr, "%d checks failed\n", failures);
		return 1;
	}
	return 0;
}
