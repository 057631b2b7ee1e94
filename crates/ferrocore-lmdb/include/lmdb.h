/*
 * lmdb.h — the C API of ferrocore, compatible with LMDB 0.9.
 *
 * Written for the ferrocore project. It declares the same names, types, struct layouts,
 * flag and error values and cursor-op order as LMDB 0.9's own header, so that a program
 * compiled against either header links and runs against either library (ferrocore's
 * liblmdb.so, or LMDB's). The behaviour behind each call is LMDB's documented behaviour;
 * where ferrocore differs, crates/ferrocore-lmdb/README.md says so.
 *
 * Handles and lifetimes, in short:
 *  - MDB_env: from mdb_env_create, configured, opened once, freed by mdb_env_close.
 *  - MDB_txn: from mdb_txn_begin; mdb_txn_commit and mdb_txn_abort free it. A read txn
 *    may instead be reset (mdb_txn_reset) and renewed (mdb_txn_renew).
 *  - MDB_cursor: from mdb_cursor_open. A write txn's cursors are freed when the txn ends;
 *    a read txn's cursors are freed by mdb_cursor_close and may be renewed.
 *  - MDB_val data returned by a call points into the database: valid until the txn ends,
 *    and in a write txn until the next write. Never modify it.
 *
 * Apache-2.0, as the rest of ferrocore.
 */
#ifndef _LMDB_H_
#define _LMDB_H_

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Version ---------------------------------------------------------------------- */

/** Library major version (LMDB 0.9.32 compatible). */
#define MDB_VERSION_MAJOR	0
/** Library minor version. */
#define MDB_VERSION_MINOR	9
/** Library patch version. */
#define MDB_VERSION_PATCH	32
/** Packs a version into one integer. */
#define MDB_VERINT(a,b,c)	(((a) << 24) | ((b) << 16) | (c))
/** This library's version as one integer. */
#define MDB_VERSION_FULL	\
	MDB_VERINT(MDB_VERSION_MAJOR,MDB_VERSION_MINOR,MDB_VERSION_PATCH)
/** Release date of the LMDB version matched. */
#define MDB_VERSION_DATE	"January 29, 2024"
/** Builds the version string. */
#define MDB_VERSTR(a,b,c,d)	"LMDB " #a "." #b "." #c ": (" d ")"
/** Helper of MDB_VERSION_STRING. */
#define MDB_VERFOO(a,b,c,d)	MDB_VERSTR(a,b,c,d)
/** The version string of the LMDB release matched (mdb_version names ferrocore). */
#define MDB_VERSION_STRING	\
	MDB_VERFOO(MDB_VERSION_MAJOR,MDB_VERSION_MINOR,MDB_VERSION_PATCH,MDB_VERSION_DATE)

/* ---- Types ------------------------------------------------------------------------ */

/** Unix permissions for created files. */
typedef mode_t mdb_mode_t;
/** An open file. */
typedef int mdb_filehandle_t;

/** An environment: one data file and its lock file. Opaque. */
typedef struct MDB_env MDB_env;
/** A transaction. Opaque. */
typedef struct MDB_txn MDB_txn;
/** A database handle. */
typedef unsigned int MDB_dbi;
/** A cursor. Opaque. */
typedef struct MDB_cursor MDB_cursor;

/** A key or a value: a size and an address. */
typedef struct MDB_val {
	size_t		 mv_size;	/**< size of the item */
	void		*mv_data;	/**< address of the item */
} MDB_val;

/** An application comparator: <0, 0 or >0, as memcmp. */
typedef int  (MDB_cmp_func)(const MDB_val *a, const MDB_val *b);

/** A relocation function (accepted and never called, as in LMDB 0.9). */
typedef void (MDB_rel_func)(MDB_val *item, void *oldptr, void *newptr, void *relctx);

/* ---- Environment flags (mdb_env_open) -------------------------------------------- */

/** Accepted; the map address is chosen by the system. */
#define MDB_FIXEDMAP	0x01
/** The path names the data file itself; the lock file is path + "-lock". */
#define MDB_NOSUBDIR	0x4000
/** Do not flush at commit: a crash may lose the last commits, never corrupt. */
#define MDB_NOSYNC	0x10000
/** Read only. Also the mdb_txn_begin flag for read-only txns. */
#define MDB_RDONLY	0x20000
/** Flush data at commit, but not the meta page. */
#define MDB_NOMETASYNC	0x40000
/** Accepted; ferrocore writes pages with pwrite. */
#define MDB_WRITEMAP	0x80000
/** Accepted (asynchronous flushes with WRITEMAP). */
#define MDB_MAPASYNC	0x100000
/** Read txns are not tied to a thread. */
#define MDB_NOTLS	0x200000
/** The application does all locking. */
#define MDB_NOLOCK	0x400000
/** Accepted (no readahead advice). */
#define MDB_NORDAHEAD	0x800000
/** Accepted (new pages are always zeroed). */
#define MDB_NOMEMINIT	0x1000000

/* ---- Database flags (mdb_dbi_open) ----------------------------------------------- */

/** Keys compare from their last byte backwards. */
#define MDB_REVERSEKEY	0x02
/** Sorted duplicate values per key. */
#define MDB_DUPSORT		0x04
/** Keys are native unsigned int or size_t, compared as integers. */
#define MDB_INTEGERKEY	0x08
/** With DUPSORT: all values of a key have one size. */
#define MDB_DUPFIXED	0x10
/** With DUPSORT: values are native unsigned integers. */
#define MDB_INTEGERDUP	0x20
/** With DUPSORT: values compare from their last byte backwards. */
#define MDB_REVERSEDUP	0x40
/** Create the database if it does not exist. */
#define MDB_CREATE		0x40000

/* ---- Write flags (mdb_put, mdb_cursor_put, mdb_cursor_del) ----------------------- */

/** Do not overwrite an existing key: MDB_KEYEXIST, and data set to the existing value. */
#define MDB_NOOVERWRITE	0x10
/** DUPSORT: do not add an existing key/value pair (MDB_KEYEXIST). mdb_cursor_del: delete
 * every value of the key. */
#define MDB_NODUPDATA	0x20
/** mdb_cursor_put: replace the item at the cursor. */
#define MDB_CURRENT	0x40
/** Reserve space for the value; data->mv_data is set to it, for the caller to fill. */
#define MDB_RESERVE	0x10000
/** The key sorts after every key: append without searching (MDB_KEYEXIST otherwise). */
#define MDB_APPEND	0x20000
/** DUPSORT: the value sorts after every value of the key. */
#define MDB_APPENDDUP	0x40000
/** DUPFIXED, mdb_cursor_put: store an array of values (data is an array of 2 MDB_val). */
#define MDB_MULTIPLE	0x80000

/* ---- Copy flags (mdb_env_copy2, mdb_env_copyfd2) --------------------------------- */

/** Compact while copying (ferrocore: accepted, makes a plain copy). */
#define MDB_CP_COMPACT	0x01

/* ---- Cursor operations (mdb_cursor_get) ------------------------------------------ */

/** What mdb_cursor_get does. The order is LMDB's: the values are the ABI. */
typedef enum MDB_cursor_op {
	MDB_FIRST,		/**< first item */
	MDB_FIRST_DUP,		/**< DUPSORT: first value of the current key */
	MDB_GET_BOTH,		/**< DUPSORT: position at key and value */
	MDB_GET_BOTH_RANGE,	/**< DUPSORT: position at key, first value >= data */
	MDB_GET_CURRENT,	/**< the item at the cursor */
	MDB_GET_MULTIPLE,	/**< DUPFIXED: up to a page of values of the current key */
	MDB_LAST,		/**< last item */
	MDB_LAST_DUP,		/**< DUPSORT: last value of the current key */
	MDB_NEXT,		/**< next item */
	MDB_NEXT_DUP,		/**< DUPSORT: next value of the current key */
	MDB_NEXT_MULTIPLE,	/**< DUPFIXED: the next page of values of the current key */
	MDB_NEXT_NODUP,		/**< first value of the next key */
	MDB_PREV,		/**< previous item */
	MDB_PREV_DUP,		/**< DUPSORT: previous value of the current key */
	MDB_PREV_NODUP,		/**< last value of the previous key */
	MDB_SET,		/**< position at key */
	MDB_SET_KEY,		/**< position at key, and return it */
	MDB_SET_RANGE,		/**< position at the first key >= key */
	MDB_PREV_MULTIPLE	/**< DUPFIXED: the previous page of values of the current key */
} MDB_cursor_op;

/* ---- Return codes ------------------------------------------------------------------ */

/** Success. */
#define MDB_SUCCESS	 0
/** The key/value pair already exists. */
#define MDB_KEYEXIST	(-30799)
/** No matching key/value pair. */
#define MDB_NOTFOUND	(-30798)
/** A page was not found: the file is damaged. */
#define MDB_PAGE_NOTFOUND	(-30797)
/** A page has the wrong type or content: the file is damaged. */
#define MDB_CORRUPTED	(-30796)
/** A fatal error: the environment must be closed and reopened. */
#define MDB_PANIC		(-30795)
/** The file's version is not supported. */
#define MDB_VERSION_MISMATCH	(-30794)
/** Not an LMDB data file. */
#define MDB_INVALID	(-30793)
/** The map size is reached. */
#define MDB_MAP_FULL	(-30792)
/** The maximum number of named databases is reached. */
#define MDB_DBS_FULL	(-30791)
/** Every reader slot is taken. */
#define MDB_READERS_FULL	(-30790)
/** Too many thread-local keys (LMDB only). */
#define MDB_TLS_FULL	(-30789)
/** The txn has too many dirty pages. */
#define MDB_TXN_FULL	(-30788)
/** The cursor stack is too deep. */
#define MDB_CURSOR_FULL	(-30787)
/** A page has no more space (internal). */
#define MDB_PAGE_FULL	(-30786)
/** The database grew beyond the map size. */
#define MDB_MAP_RESIZED	(-30785)
/** The operation does not fit the database's flags, or the flags changed. */
#define MDB_INCOMPATIBLE	(-30784)
/** Invalid reuse of a reader slot. */
#define MDB_BAD_RSLOT		(-30783)
/** The txn must abort, has a child, or is invalid. */
#define MDB_BAD_TXN			(-30782)
/** A key, value or name has an unsupported size. */
#define MDB_BAD_VALSIZE		(-30781)
/** The database handle was closed or changed. */
#define MDB_BAD_DBI		(-30780)
/** The last LMDB-defined code. */
#define MDB_LAST_ERRCODE	MDB_BAD_DBI

/* ---- Statistics -------------------------------------------------------------------- */

/** Statistics of a database. */
typedef struct MDB_stat {
	unsigned int	ms_psize;		/**< page size */
	unsigned int	ms_depth;		/**< depth of the tree */
	size_t		ms_branch_pages;	/**< branch pages */
	size_t		ms_leaf_pages;		/**< leaf pages */
	size_t		ms_overflow_pages;	/**< overflow pages */
	size_t		ms_entries;		/**< data items */
} MDB_stat;

/** Information about an environment. */
typedef struct MDB_envinfo {
	void	*me_mapaddr;			/**< address of a fixed map, else NULL */
	size_t	me_mapsize;			/**< size of the map */
	size_t	me_last_pgno;			/**< last page used */
	size_t	me_last_txnid;			/**< last committed txn id */
	unsigned int me_maxreaders;		/**< reader slots */
	unsigned int me_numreaders;		/**< reader slots in use */
} MDB_envinfo;

/* ---- Functions ----------------------------------------------------------------------- */

/** The version string; the numbers (0.9.32) go to the non-NULL arguments. */
char *mdb_version(int *major, int *minor, int *patch);
/** The text of an error code: LMDB's texts for its codes, strerror() for errno values. */
char *mdb_strerror(int err);

/** Creates an environment handle. */
int  mdb_env_create(MDB_env **env);
/** Opens the environment at path (a directory, or the data file with MDB_NOSUBDIR). */
int  mdb_env_open(MDB_env *env, const char *path, unsigned int flags, mdb_mode_t mode);
/** Copies the environment into the directory path. */
int  mdb_env_copy(MDB_env *env, const char *path);
/** Copies the environment to an open file descriptor. */
int  mdb_env_copyfd(MDB_env *env, mdb_filehandle_t fd);
/** Copies the environment into the directory path, with copy flags. */
int  mdb_env_copy2(MDB_env *env, const char *path, unsigned int flags);
/** Copies the environment to an open file descriptor, with copy flags. */
int  mdb_env_copyfd2(MDB_env *env, mdb_filehandle_t fd, unsigned int flags);
/** Statistics of the main database. */
int  mdb_env_stat(MDB_env *env, MDB_stat *stat);
/** Information about the environment. */
int  mdb_env_info(MDB_env *env, MDB_envinfo *stat);
/** Flushes the data file (with force, even under MDB_NOSYNC). */
int  mdb_env_sync(MDB_env *env, int force);
/** Closes the environment and frees the handle. */
void mdb_env_close(MDB_env *env);
/** Sets (onoff != 0) or clears changeable flags. */
int  mdb_env_set_flags(MDB_env *env, unsigned int flags, int onoff);
/** The environment's flags. */
int  mdb_env_get_flags(MDB_env *env, unsigned int *flags);
/** The path given to mdb_env_open. */
int  mdb_env_get_path(MDB_env *env, const char **path);
/** The data file's descriptor. */
int  mdb_env_get_fd(MDB_env *env, mdb_filehandle_t *fd);
/** Sets the map size (before open, or with no txn alive). */
int  mdb_env_set_mapsize(MDB_env *env, size_t size);
/** Sets the number of reader slots (before open). */
int  mdb_env_set_maxreaders(MDB_env *env, unsigned int readers);
/** The number of reader slots. */
int  mdb_env_get_maxreaders(MDB_env *env, unsigned int *readers);
/** Sets the number of named databases (before open). */
int  mdb_env_set_maxdbs(MDB_env *env, MDB_dbi dbs);
/** The longest key accepted. */
int  mdb_env_get_maxkeysize(MDB_env *env);
/** Stores an application pointer. */
int  mdb_env_set_userctx(MDB_env *env, void *ctx);
/** The application pointer. */
void *mdb_env_get_userctx(MDB_env *env);

/** An assertion callback. */
typedef void MDB_assert_func(MDB_env *env, const char *msg);
/** Stores an assertion callback (ferrocore reports failures as codes; never called). */
int  mdb_env_set_assert(MDB_env *env, MDB_assert_func *func);

/** Begins a txn: read-only with MDB_RDONLY, nested under parent if given. */
int  mdb_txn_begin(MDB_env *env, MDB_txn *parent, unsigned int flags, MDB_txn **txn);
/** The txn's environment. */
MDB_env *mdb_txn_env(MDB_txn *txn);
/** The txn's id. */
size_t mdb_txn_id(MDB_txn *txn);
/** Commits and frees the txn. */
int  mdb_txn_commit(MDB_txn *txn);
/** Aborts and frees the txn. */
void mdb_txn_abort(MDB_txn *txn);
/** Releases a read txn's snapshot, keeping the handle. */
void mdb_txn_reset(MDB_txn *txn);
/** Takes a new snapshot for a reset read txn. */
int  mdb_txn_renew(MDB_txn *txn);

/** Same as mdb_dbi_open. */
#define mdb_open(txn,name,flags,dbi)	mdb_dbi_open(txn,name,flags,dbi)
/** Same as mdb_dbi_close. */
#define mdb_close(env,dbi)				mdb_dbi_close(env,dbi)

/** Opens (with MDB_CREATE: creates) a database; NULL name is the main database. */
int  mdb_dbi_open(MDB_txn *txn, const char *name, unsigned int flags, MDB_dbi *dbi);
/** Statistics of a database. */
int  mdb_stat(MDB_txn *txn, MDB_dbi dbi, MDB_stat *stat);
/** A database's flags. */
int  mdb_dbi_flags(MDB_txn *txn, MDB_dbi dbi, unsigned int *flags);
/** Closes a database handle. */
void mdb_dbi_close(MDB_env *env, MDB_dbi dbi);
/** Empties a database (del = 0) or deletes it and closes the handle (del = 1). */
int  mdb_drop(MDB_txn *txn, MDB_dbi dbi, int del);
/** Sets the key comparator of a database. */
int  mdb_set_compare(MDB_txn *txn, MDB_dbi dbi, MDB_cmp_func *cmp);
/** Sets the value comparator of a DUPSORT database. */
int  mdb_set_dupsort(MDB_txn *txn, MDB_dbi dbi, MDB_cmp_func *cmp);
/** Accepted; never used. */
int  mdb_set_relfunc(MDB_txn *txn, MDB_dbi dbi, MDB_rel_func *rel);
/** Accepted; never used. */
int  mdb_set_relctx(MDB_txn *txn, MDB_dbi dbi, void *ctx);

/** The value of key (for DUPSORT, its first value). */
int  mdb_get(MDB_txn *txn, MDB_dbi dbi, MDB_val *key, MDB_val *data);
/** Stores a key/value pair. */
int  mdb_put(MDB_txn *txn, MDB_dbi dbi, MDB_val *key, MDB_val *data, unsigned int flags);
/** Deletes a key (or, with data in a DUPSORT database, one of its values). */
int  mdb_del(MDB_txn *txn, MDB_dbi dbi, MDB_val *key, MDB_val *data);

/** Opens a cursor. */
int  mdb_cursor_open(MDB_txn *txn, MDB_dbi dbi, MDB_cursor **cursor);
/** Closes a cursor. */
void mdb_cursor_close(MDB_cursor *cursor);
/** Binds a read txn's cursor to a (renewed) read txn. */
int  mdb_cursor_renew(MDB_txn *txn, MDB_cursor *cursor);
/** The cursor's txn. */
MDB_txn *mdb_cursor_txn(MDB_cursor *cursor);
/** The cursor's database. */
MDB_dbi mdb_cursor_dbi(MDB_cursor *cursor);
/** Moves the cursor and returns the item. */
int  mdb_cursor_get(MDB_cursor *cursor, MDB_val *key, MDB_val *data, MDB_cursor_op op);
/** Stores through the cursor. */
int  mdb_cursor_put(MDB_cursor *cursor, MDB_val *key, MDB_val *data, unsigned int flags);
/** Deletes the item at the cursor. */
int  mdb_cursor_del(MDB_cursor *cursor, unsigned int flags);
/** The number of values of the cursor's key (DUPSORT). */
int  mdb_cursor_count(MDB_cursor *cursor, size_t *countp);

/** Compares two keys in a database's order. */
int  mdb_cmp(MDB_txn *txn, MDB_dbi dbi, const MDB_val *a, const MDB_val *b);
/** Compares two values in a DUPSORT database's value order. */
int  mdb_dcmp(MDB_txn *txn, MDB_dbi dbi, const MDB_val *a, const MDB_val *b);

/** Receives the lines of mdb_reader_list. */
typedef int (MDB_msg_func)(const char *msg, void *ctx);
/** Lists the reader table through func. */
int  mdb_reader_list(MDB_env *env, MDB_msg_func *func, void *ctx);
/** Clears the slots of dead readers; dead gets how many. */
int  mdb_reader_check(MDB_env *env, int *dead);

#ifdef __cplusplus
}
#endif

#endif /* _LMDB_H_ */
