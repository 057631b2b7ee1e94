//! DUPFIXED databases written by the real LMDB (LEAF2 sub-pages and LEAF2 leaves of
//! sub-DBs) read correctly in ferrocore; writing them is refused with a clear error.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::ptr;

use ferrocore::{db_flags, Database, EnvOptions, Error};
use lmdb_master_sys as ffi;

fn ok(rc: i32, what: &str) {
    assert_eq!(rc, 0, "LMDB {what}: {rc}");
}

fn val(b: &[u8]) -> ffi::MDB_val {
    ffi::MDB_val {
        mv_size: b.len(),
        mv_data: b.as_ptr() as *mut _,
    }
}

type Model = BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>;

/// LMDB writes DB `name` with `flags`: keys with 1, 12 and 3000 values of `size` bytes.
fn lmdb_write(dir: &std::path::Path, name: &str, flags: u32, size: usize) -> Model {
    let mut model = Model::new();
    // SAFETY: plain LMDB C API use on handles created here; MDB_vals point at live memory.
    unsafe {
        let mut env = ptr::null_mut();
        ok(ffi::mdb_env_create(&mut env), "env_create");
        ok(ffi::mdb_env_set_maxdbs(env, 4), "set_maxdbs");
        ok(ffi::mdb_env_set_mapsize(env, 64 << 20), "set_mapsize");
        let path = CString::new(dir.to_str().unwrap()).unwrap();
        ok(ffi::mdb_env_open(env, path.as_ptr(), 0, 0o644), "env_open");
        let mut txn = ptr::null_mut();
        ok(
            ffi::mdb_txn_begin(env, ptr::null_mut(), 0, &mut txn),
            "txn_begin",
        );
        let mut dbi = 0;
        let cname = CString::new(name).unwrap();
        ok(
            ffi::mdb_dbi_open(txn, cname.as_ptr(), flags | ffi::MDB_CREATE, &mut dbi),
            "dbi_open",
        );
        for (k, count) in [(&b"one"[..], 1u32), (b"some", 12), (b"many", 3000)] {
            for i in 0..count {
                let x = i.wrapping_mul(2_654_435_761);
                let v: Vec<u8> = if size == 4 {
                    x.to_le_bytes().to_vec()
                } else {
                    (x as u64).to_le_bytes().to_vec()
                };
                let mut kv = val(k);
                let mut vv = val(&v);
                ok(ffi::mdb_put(txn, dbi, &mut kv, &mut vv, 0), "put");
                model.entry(k.to_vec()).or_default().insert(v);
            }
        }
        ok(ffi::mdb_txn_commit(txn), "commit");
        ffi::mdb_env_close(env);
    }
    model
}

fn check_ferrocore(dir: &std::path::Path, name: &str, model: &Model, integer: bool) {
    // SAFETY: the test owns the directory; LMDB has closed it.
    let env = unsafe { EnvOptions::new().max_dbs(4).open(dir).unwrap() };
    let txn = env.begin_read().unwrap();
    let db = txn.open_db(Some(name)).unwrap();
    let order = |v: &[u8]| -> Vec<u8> {
        if integer {
            v.iter().rev().copied().collect()
        } else {
            v.to_vec()
        }
    };
    for (k, set) in model {
        let mut want: Vec<&Vec<u8>> = set.iter().collect();
        want.sort_by_key(|v| order(v));
        let mut c = txn.cursor(db).unwrap();
        let mut got = vec![c.set(k).unwrap().unwrap().1.to_vec()];
        assert_eq!(c.count().unwrap(), set.len() as u64);
        while let Some((kk, v)) = c.next_dup().unwrap() {
            assert_eq!(kk, &k[..]);
            got.push(v.to_vec());
        }
        assert_eq!(got.len(), want.len());
        assert!(
            got.iter().zip(&want).all(|(g, w)| g == *w),
            "values of {k:?} in order"
        );
        let probe = want[want.len() / 2];
        assert_eq!(c.get_both(k, probe).unwrap().unwrap().1, &probe[..]);
        assert_eq!(txn.get(db, k).unwrap(), Some(&want[0][..]));
    }
    assert_eq!(
        txn.db_stat(db).unwrap().entries,
        model.values().map(|s| s.len() as u64).sum::<u64>()
    );
    txn.check().unwrap();
    drop(txn);
    let mut w = env.begin_write().unwrap();
    let db = w.open_db(Some(name), 0).unwrap();
    assert!(matches!(
        w.put(db, b"one", &[0u8; 4], 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        w.open_db(
            Some("new"),
            db_flags::CREATE | (db_flags::DUP_SORT | db_flags::DUP_FIXED) as u32
        ),
        Err(Error::InvalidArgument(_))
    ));
    let _ = Database::MAIN;
}

#[test]
fn lmdb_dupfixed_reads_in_ferrocore() {
    let dir = tempfile::tempdir().unwrap();
    let model = lmdb_write(dir.path(), "fixed", ffi::MDB_DUPSORT | ffi::MDB_DUPFIXED, 8);
    check_ferrocore(dir.path(), "fixed", &model, false);
}

#[test]
fn lmdb_integerdup_dupfixed_reads_in_ferrocore() {
    let dir = tempfile::tempdir().unwrap();
    let model = lmdb_write(
        dir.path(),
        "ints",
        ffi::MDB_DUPSORT | ffi::MDB_DUPFIXED | ffi::MDB_INTEGERDUP,
        4,
    );
    check_ferrocore(dir.path(), "ints", &model, true);
}
