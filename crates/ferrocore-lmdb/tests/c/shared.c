/* One role of a process sharing a live environment with processes of the other library.
 * tests/shared_env.rs builds this once against LMDB's header and runs it on Debian's
 * LMDB 0.9 and, through LD_LIBRARY_PATH, on ferrocore's liblmdb.so.0, in every mix.
 *
 *   shared DIR incr N               N write txns, each adds 1 to the counter
 *   shared DIR open-incr N          N times: open the environment, add 1 to the counter in
 *                                   one write txn, close it
 *   shared DIR counter              prints the counter
 *   shared DIR churn N              N write txns, each rewrites every key "k000".."k199"
 *   shared DIR snapshot READY GO    reads every key in one read txn, creates READY, waits
 *                                   for GO, then checks the same txn still reads the same
 *                                   bytes (at the same addresses: zero-copy)
 *   shared DIR hold-write READY     a write txn that puts "uncommitted", creates READY and
 *                                   waits to be killed
 *   shared DIR hold-read READY      a read txn that creates READY and waits to be killed
 *   shared DIR hold-open READY      keeps the environment open (no txn), creates READY and
 *                                   waits to be killed
 *   shared DIR put KEY              one write txn that puts KEY
 *   shared DIR absent KEY           exits 1 unless KEY is absent
 *   shared DIR reader-check         prints "dead=N" (mdb_reader_check)
 *   shared DIR reader-list          mdb_reader_list to stdout
 *   shared DIR resize-wait MAP READY GO
 *                                   opens with map size MAP, creates READY, waits for GO;
 *                                   then expects MDB_MAP_RESIZED from mdb_txn_begin, adopts
 *                                   the new size with mdb_env_set_mapsize(0) and reads "big"
 *   shared DIR grow MAP BYTES       opens with map size MAP (0: the library's default) and
 *                                   puts BYTES of values under "big" and "fill*"
 *
 * Every role exits 0 on success and prints what failed otherwise; alarm() ends a role that
 * hangs (a writer lock nobody released). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lmdb.h"

#define KEYS 200
#define VALUE 100

static void fail(const char *what, int rc) {
	fprintf(stderr, "%s: %d (%s)\n", what, rc, mdb_strerror(rc));
	exit(1);
}
#define OK(call) do { int rc_ = (call); if (rc_) fail(#call, rc_); } while (0)

static MDB_val val(const void *p, size_t n) { MDB_val v; v.mv_size = n; v.mv_data = (void *)p; return v; }

static int exists(const char *path) { struct stat st; return stat(path, &st) == 0; }

static void touch(const char *path) {
	FILE *f = fopen(path, "w");
	if (!f) { perror(path); exit(1); }
	fclose(f);
}

static void wait_for(const char *path) {
	while (!exists(path)) usleep(2000);
}

static MDB_env *open_env(const char *dir, size_t map_size) {
	MDB_env *env;
	OK(mdb_env_create(&env));
	if (map_size) OK(mdb_env_set_mapsize(env, map_size));
	OK(mdb_env_open(env, dir, 0, 0644));
	return env;
}

/* The main DB's handle. */
static MDB_dbi main_dbi(MDB_txn *txn) {
	MDB_dbi dbi;
	OK(mdb_dbi_open(txn, NULL, 0, &dbi));
	return dbi;
}

static unsigned long long read_counter(MDB_txn *txn) {
	MDB_val k = val("counter", 7), d;
	unsigned long long n = 0;
	int rc = mdb_get(txn, main_dbi(txn), &k, &d);
	if (rc == MDB_NOTFOUND) return 0;
	if (rc) fail("mdb_get counter", rc);
	if (d.mv_size != sizeof n) fail("counter size", EINVAL);
	memcpy(&n, d.mv_data, sizeof n);
	return n;
}

int main(int argc, char **argv) {
	if (argc < 3) { fprintf(stderr, "usage: shared DIR ROLE ARGS...\n"); return 2; }
	const char *dir = argv[1], *role = argv[2];
	alarm(120);
	MDB_txn *txn;

	if (!strcmp(role, "resize-wait") && argc == 6) {
		MDB_env *env = open_env(dir, strtoull(argv[3], NULL, 10));
		touch(argv[4]);
		wait_for(argv[5]);
		int rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
		if (rc != MDB_MAP_RESIZED) fail("mdb_txn_begin after the other grew the map", rc);
		OK(mdb_env_set_mapsize(env, 0));
		MDB_envinfo info;
		OK(mdb_env_info(env, &info));
		OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
		MDB_val k = val("big", 3), d;
		OK(mdb_get(txn, main_dbi(txn), &k, &d));
		for (size_t i = 0; i < d.mv_size; i++)
			if (((unsigned char *)d.mv_data)[i] != (unsigned char)i) fail("big's bytes", EINVAL);
		mdb_txn_abort(txn);
		OK(mdb_txn_begin(env, NULL, 0, &txn));
		k = val("after resize", 12);
		OK(mdb_put(txn, main_dbi(txn), &k, &k, 0));
		OK(mdb_txn_commit(txn));
		printf("mapsize=%zu big=%zu\n", info.me_mapsize, d.mv_size);
		mdb_env_close(env);
		return 0;
	}
	if (!strcmp(role, "grow") && argc == 5) {
		MDB_env *env = open_env(dir, strtoull(argv[3], NULL, 10));
		size_t bytes = strtoull(argv[4], NULL, 10), big = 64 * 1024;
		unsigned char *buf = malloc(big);
		for (size_t i = 0; i < big; i++) buf[i] = (unsigned char)i;
		OK(mdb_txn_begin(env, NULL, 0, &txn));
		MDB_val k = val("big", 3), d = val(buf, big);
		OK(mdb_put(txn, main_dbi(txn), &k, &d, 0));
		for (size_t done = big, i = 0; done < bytes; done += big, i++) {
			char name[32];
			snprintf(name, sizeof name, "fill%06zu", i);
			k = val(name, strlen(name));
			OK(mdb_put(txn, main_dbi(txn), &k, &d, 0));
		}
		OK(mdb_txn_commit(txn));
		free(buf);
		mdb_env_close(env);
		return 0;
	}

	if (!strcmp(role, "open-incr") && argc == 4) {
		long n = strtol(argv[3], NULL, 10);
		for (long i = 0; i < n; i++) {
			MDB_env *env = open_env(dir, 64 << 20);
			OK(mdb_txn_begin(env, NULL, 0, &txn));
			unsigned long long c = read_counter(txn) + 1;
			MDB_val k = val("counter", 7), d = val(&c, sizeof c);
			OK(mdb_put(txn, main_dbi(txn), &k, &d, 0));
			OK(mdb_txn_commit(txn));
			mdb_env_close(env);
		}
		return 0;
	}

	MDB_env *env = open_env(dir, 64 << 20);
	if (!strcmp(role, "incr") && argc == 4) {
		long n = strtol(argv[3], NULL, 10);
		for (long i = 0; i < n; i++) {
			OK(mdb_txn_begin(env, NULL, 0, &txn));
			unsigned long long c = read_counter(txn) + 1;
			MDB_val k = val("counter", 7), d = val(&c, sizeof c);
			OK(mdb_put(txn, main_dbi(txn), &k, &d, 0));
			OK(mdb_txn_commit(txn));
		}
	} else if (!strcmp(role, "counter")) {
		OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
		printf("%llu\n", read_counter(txn));
		mdb_txn_abort(txn);
	} else if (!strcmp(role, "churn") && argc == 4) {
		long n = strtol(argv[3], NULL, 10);
		for (long round = 0; round < n; round++) {
			OK(mdb_txn_begin(env, NULL, 0, &txn));
			for (int i = 0; i < KEYS; i++) {
				char name[8], value[VALUE];
				snprintf(name, sizeof name, "k%03d", i);
				memset(value, 'a' + (int)(round % 26), sizeof value);
				MDB_val k = val(name, 4), d = val(value, sizeof value);
				OK(mdb_put(txn, main_dbi(txn), &k, &d, 0));
			}
			OK(mdb_txn_commit(txn));
		}
	} else if (!strcmp(role, "snapshot") && argc == 5) {
		OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
		static char copy[KEYS][VALUE];
		void *where[KEYS];
		for (int i = 0; i < KEYS; i++) {
			char name[8];
			snprintf(name, sizeof name, "k%03d", i);
			MDB_val k = val(name, 4), d;
			OK(mdb_get(txn, main_dbi(txn), &k, &d));
			if (d.mv_size != VALUE) fail("value size", EINVAL);
			memcpy(copy[i], d.mv_data, VALUE);
			where[i] = d.mv_data;
		}
		touch(argv[3]);
		wait_for(argv[4]);
		for (int i = 0; i < KEYS; i++) {
			char name[8];
			snprintf(name, sizeof name, "k%03d", i);
			MDB_val k = val(name, 4), d;
			OK(mdb_get(txn, main_dbi(txn), &k, &d));
			if (d.mv_data != where[i] || memcmp(where[i], copy[i], VALUE))
				fail("the snapshot changed under its reader", EINVAL);
		}
		mdb_txn_abort(txn);
		/* A new txn sees the other process's commits. */
		OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
		MDB_val k = val("k000", 4), d;
		OK(mdb_get(txn, main_dbi(txn), &k, &d));
		if (!memcmp(d.mv_data, copy[0], VALUE)) fail("the other's commits are not seen", EINVAL);
		mdb_txn_abort(txn);
	} else if (!strcmp(role, "hold-write") && argc == 4) {
		OK(mdb_txn_begin(env, NULL, 0, &txn));
		MDB_val k = val("uncommitted", 11);
		OK(mdb_put(txn, main_dbi(txn), &k, &k, 0));
		touch(argv[3]);
		for (;;) pause();
	} else if (!strcmp(role, "hold-read") && argc == 4) {
		OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
		touch(argv[3]);
		for (;;) pause();
	} else if (!strcmp(role, "hold-open") && argc == 4) {
		touch(argv[3]);
		for (;;) pause();
	} else if (!strcmp(role, "put") && argc == 4) {
		OK(mdb_txn_begin(env, NULL, 0, &txn));
		MDB_val k = val(argv[3], strlen(argv[3]));
		OK(mdb_put(txn, main_dbi(txn), &k, &k, 0));
		OK(mdb_txn_commit(txn));
	} else if (!strcmp(role, "absent") && argc == 4) {
		OK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
		MDB_val k = val(argv[3], strlen(argv[3])), d;
		int rc = mdb_get(txn, main_dbi(txn), &k, &d);
		if (rc != MDB_NOTFOUND) fail("mdb_get of a key that must be absent", rc);
		mdb_txn_abort(txn);
	} else if (!strcmp(role, "reader-check")) {
		int dead = -1;
		OK(mdb_reader_check(env, &dead));
		printf("dead=%d\n", dead);
	} else if (!strcmp(role, "reader-list")) {
		if (mdb_reader_list(env, (MDB_msg_func *)fputs, stdout) < 0) fail("mdb_reader_list", EIO);
	} else {
		fprintf(stderr, "unknown role or arguments: %s\n", role);
		return 2;
	}
	mdb_env_close(env);
	return 0;
}
