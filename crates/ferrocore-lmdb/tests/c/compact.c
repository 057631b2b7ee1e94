/* mdb_env_copy2 and mdb_env_copyfd2 with MDB_CP_COMPACT: after updates and deletes have
 * left free pages, the compact copy has none (an empty free DB, and exactly the pages the
 * DBs' statistics count plus the two metas), is smaller, and holds the same data. Built
 * and run by tests/c_programs.rs on the real LMDB (the oracle) and on ferrocore; argv[1] is
 * an empty directory. Exits 0 when every check passed, else prints the failed checks. */
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

static MDB_val bytes(void *p, size_t n) { MDB_val v; v.mv_size = n; v.mv_data = p; return v; }

static size_t pages_of(const MDB_stat *st) {
	return st->ms_branch_pages + st->ms_leaf_pages + st->ms_overflow_pages;
}

static int same_stat(const MDB_stat *a, const MDB_stat *b) {
	return a->ms_depth == b->ms_depth && a->ms_branch_pages == b->ms_branch_pages &&
		a->ms_leaf_pages == b->ms_leaf_pages && a->ms_overflow_pages == b->ms_overflow_pages &&
		a->ms_entries == b->ms_entries;
}

/* True if the DBs `da` of `ta` and `db` of `tb` hold the same items; the value of key
 * `skip` (a named DB's record, whose root the copy renumbers) is not compared. */
static int same_items(MDB_txn *ta, MDB_dbi da, MDB_txn *tb, MDB_dbi db, const char *skip) {
	MDB_cursor *ca, *cb;
	MDB_val ka, va, kb, vb;
	int ra, rb, same = 1;
	if (mdb_cursor_open(ta, da, &ca) || mdb_cursor_open(tb, db, &cb)) return 0;
	do {
		ra = mdb_cursor_get(ca, &ka, &va, MDB_NEXT);
		rb = mdb_cursor_get(cb, &kb, &vb, MDB_NEXT);
		if (ra != rb) { same = 0; break; }
		if (ra) break;
		if (ka.mv_size != kb.mv_size || memcmp(ka.mv_data, kb.mv_data, ka.mv_size)) { same = 0; break; }
		if (skip && ka.mv_size == strlen(skip) && !memcmp(ka.mv_data, skip, ka.mv_size)) continue;
		if (va.mv_size != vb.mv_size || memcmp(va.mv_data, vb.mv_data, va.mv_size)) { same = 0; break; }
	} while (1);
	mdb_cursor_close(ca);
	mdb_cursor_close(cb);
	return same && ra == MDB_NOTFOUND;
}

/* Opens the copy at `path` and checks it against the source `src`. */
static void check_copy(MDB_env *src, const char *path, unsigned int flags) {
	MDB_env *env;
	MDB_txn *txn, *stxn;
	MDB_dbi main_dbi, named, smain, snamed;
	MDB_stat free_st, main_st, named_st, s_main, s_named;
	MDB_envinfo info, sinfo;
	struct stat fs;
	OK(mdb_env_create(&env));
	OK(mdb_env_set_maxdbs(env, 2));
	OK(mdb_env_open(env, path, flags | MDB_RDONLY, 0644));
	OK(mdb_env_info(env, &info));
	OK(mdb_env_info(src, &sinfo));
	OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	OK(mdb_txn_begin(src, NULL, MDB_RDONLY, &stxn));
	OK(mdb_dbi_open(txn, NULL, 0, &main_dbi));
	OK(mdb_dbi_open(txn, "named", 0, &named));
	OK(mdb_dbi_open(stxn, NULL, 0, &smain));
	OK(mdb_dbi_open(stxn, "named", 0, &snamed));
	OK(mdb_stat(txn, 0, &free_st)); /* FREE_DBI */
	OK(mdb_stat(txn, main_dbi, &main_st));
	OK(mdb_stat(txn, named, &named_st));
	OK(mdb_stat(stxn, smain, &s_main));
	OK(mdb_stat(stxn, snamed, &s_named));

	CHECK(free_st.ms_entries == 0 && free_st.ms_depth == 0 && pages_of(&free_st) == 0);
	CHECK(info.me_last_txnid == 1);
	/* Every page is a page of a DB: no free page, nothing else. */
	CHECK(info.me_last_pgno == 1 + pages_of(&main_st) + pages_of(&named_st));
	CHECK(info.me_last_pgno < sinfo.me_last_pgno);
	CHECK(same_stat(&main_st, &s_main) && same_stat(&named_st, &s_named));
	CHECK(same_items(stxn, smain, txn, main_dbi, "named"));
	CHECK(same_items(stxn, snamed, txn, named, NULL));
	char file[512];
	snprintf(file, sizeof file, "%s%s", path, (flags & MDB_NOSUBDIR) ? "" : "/data.mdb");
	CHECK(stat(file, &fs) == 0);
	CHECK((size_t)fs.st_size == (info.me_last_pgno + 1) * main_st.ms_psize);
	mdb_txn_abort(stxn);
	mdb_txn_abort(txn);
	mdb_env_close(env);
}

int main(int argc, char **argv) {
	if (argc != 2) { fprintf(stderr, "usage: compact DIR\n"); return 2; }
	char path[512];
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi main_dbi, named;
	MDB_val k, d;
	char value[10000];
	memset(value, 0, sizeof value); /* written whole by the large values: no undefined bytes */
	OK(mdb_env_create(&env));
	OK(mdb_env_set_maxdbs(env, 2));
	OK(mdb_env_set_mapsize(env, 64 << 20));
	snprintf(path, sizeof path, "%s/src", argv[1]);
	CHECK(mkdir(path, 0755) == 0);
	OK(mdb_env_open(env, path, 0, 0644));

	OK(mdb_txn_begin(env, NULL, 0, &txn));
	OK(mdb_dbi_open(txn, NULL, 0, &main_dbi));
	/* DUPSORT, with a few values per key: sub-pages, which the DB's page counts include
	 * (the pages of sub-DBs are counted differently by LMDB versions). */
	OK(mdb_dbi_open(txn, "named", MDB_CREATE | MDB_DUPSORT, &named));
	for (unsigned int i = 0; i < 3000; i++) {
		unsigned int key = __builtin_bswap32(i * 7919u); /* big-endian: spread, ordered */
		memset(value, (int)(i & 0xff), 100);
		k = bytes(&key, sizeof key);
		d = bytes(value, i % 500 == 0 ? sizeof value : 100); /* some overflow values */
		OK(mdb_put(txn, main_dbi, &k, &d, 0));
		unsigned int dup = i % 300;
		k = bytes(&dup, sizeof dup);
		d = bytes(&i, sizeof i);
		OK(mdb_put(txn, named, &k, &d, 0));
	}
	OK(mdb_txn_commit(txn));
	for (int round = 0; round < 3; round++) {
		OK(mdb_txn_begin(env, NULL, 0, &txn));
		for (unsigned int i = (unsigned int)round; i < 3000; i += 3) {
			unsigned int key = __builtin_bswap32(i * 7919u);
			k = bytes(&key, sizeof key);
			if (i % 2 == 0)
				OK(mdb_del(txn, main_dbi, &k, NULL));
			unsigned int dup = i % 300;
			k = bytes(&dup, sizeof dup);
			d = bytes(&i, sizeof i);
			if (i % 5 != 0)
				OK(mdb_del(txn, named, &k, &d));
		}
		OK(mdb_txn_commit(txn));
	}
	MDB_stat free_st;
	OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	OK(mdb_stat(txn, 0, &free_st));
	CHECK(free_st.ms_entries > 0); /* the source has free pages */
	mdb_txn_abort(txn);

	snprintf(path, sizeof path, "%s/compact", argv[1]);
	CHECK(mkdir(path, 0755) == 0);
	OK(mdb_env_copy2(env, path, MDB_CP_COMPACT));
	check_copy(env, path, 0);

	snprintf(path, sizeof path, "%s/compact.fd", argv[1]);
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
	CHECK(fd >= 0);
	OK(mdb_env_copyfd2(env, fd, MDB_CP_COMPACT));
	close(fd);
	check_copy(env, path, MDB_NOSUBDIR);

	/* Without the flag: a plain copy, as large as the source. */
	snprintf(path, sizeof path, "%s/plain", argv[1]);
	CHECK(mkdir(path, 0755) == 0);
	OK(mdb_env_copy2(env, path, 0));
	struct stat fs;
	snprintf(path, sizeof path, "%s/plain/data.mdb", argv[1]);
	CHECK(stat(path, &fs) == 0);
	MDB_envinfo info;
	MDB_stat st;
	OK(mdb_env_info(env, &info));
	OK(mdb_env_stat(env, &st));
	CHECK((size_t)fs.st_size == (info.me_last_pgno + 1) * st.ms_psize);
	mdb_env_close(env);
	return failures ? 1 : 0;
}
