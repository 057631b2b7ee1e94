/* Read requests as a server makes them, through LMDB's C API: each request a read txn of
 * its own (mode 0: mdb_txn_begin, mdb_get, mdb_txn_abort) or one txn handle per thread
 * reset after each request and renewed before the next (mode 1). 10,000 entries of 16-byte
 * keys and 100-byte values; THREADS threads make N requests each. Prints requests a second.
 *
 *   requests DIR N MODE THREADS [notls]
 *
 * Linked against whichever liblmdb.so.0 the loader finds: scripts/requests.sh runs it on
 * Debian's LMDB and on ferrocore's library in turn. */
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                             \
	do {                                                                 \
		int rc_ = (x);                                               \
		if (rc_) {                                                   \
			fprintf(stderr, "%s: %s\n", #x, mdb_strerror(rc_)); \
			exit(1);                                             \
		}                                                            \
	} while (0)

static MDB_env *env;
static MDB_dbi dbi;
static int n, mode;

static void key_of(unsigned i, char *k)
{
	snprintf(k, 17, "%016llx", (unsigned long long)i * 0x9E3779B97F4A7C15ull);
}

static void *run(void *arg)
{
	char k[17];
	MDB_val key, val;
	MDB_txn *txn = NULL;
	unsigned seed = (unsigned)(size_t)arg;
	if (mode == 1) {
		CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
		mdb_txn_reset(txn);
	}
	for (int i = 0; i < n; i++) {
		key_of((i * 7u + seed) % 10000, k);
		key.mv_data = k;
		key.mv_size = 16;
		if (mode == 0)
			CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
		else
			CHECK(mdb_txn_renew(txn));
		CHECK(mdb_get(txn, dbi, &key, &val));
		if (val.mv_size != 100)
			exit(2);
		if (mode == 0)
			mdb_txn_abort(txn);
		else
			mdb_txn_reset(txn);
	}
	if (mode == 1)
		mdb_txn_abort(txn);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: requests DIR N MODE THREADS [notls]\n");
		return 1;
	}
	n = atoi(argv[2]);
	mode = atoi(argv[3]);
	int threads = atoi(argv[4]);
	if (threads < 1 || threads > 64)
		return 1;
	CHECK(mdb_env_create(&env));
	CHECK(mdb_env_set_mapsize(env, 1 << 28));
	CHECK(mdb_env_open(env, argv[1], argc > 5 ? MDB_NOTLS : 0, 0644));
	MDB_txn *txn;
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
	char k[17], v[100];
	memset(v, 7, sizeof v);
	MDB_val key = { 16, k }, val = { sizeof v, v };
	for (unsigned i = 0; i < 10000; i++) {
		key_of(i, k);
		CHECK(mdb_put(txn, dbi, &key, &val, 0));
	}
	CHECK(mdb_txn_commit(txn));
	pthread_t t[64];
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, run, (void *)(size_t)i);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double secs = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
	printf("%.0f\n", threads * (double)n / secs);
	mdb_env_close(env);
	return 0;
}
