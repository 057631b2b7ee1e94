//! DUPFIXED databases (LEAF2 sub-pages and LEAF2 leaves of sub-DBs) written by the real
//! LMDB read correctly in ferrocore, and those ferrocore writes read correctly in LMDB,
//! including with MDB_GET_MULTIPLE / MDB_NEXT_MULTIPLE.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::ptr;

use ferrocore::{db_flags, Database, EnvOptions, Error};

mod common;
use common::lmdb::{copy_out, empty_val, ffi, val};
use common::open_env;

fn ok(rc: i32, what: &str) {
    assert_eq!(rc, 0, "LMDB {what}: {rc}");
}

/// The `i`-th test value: `size` (4 or 8) bytes, little-endian, scattered by a multiplier.
fn dup_value(i: u32, size: usize) -> Vec<u8> {
    let x = i.wrapping_mul(2_654_435_761);
    if size == 4 {
        x.to_le_bytes().to_vec()
    } else {
        (x as u64).to_le_bytes().to_vec()
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
                let v = dup_value(i, size);
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
    let env = open_env(dir, EnvOptions::new().max_dbs(4));
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
    // A value of another size than the key's values is refused, changing nothing: the
    // txn goes on (LMDB's refusals before a change leave it usable), and commits.
    let mut w = env.begin_write().unwrap();
    let db = w.open_db(Some(name), 0).unwrap();
    assert!(matches!(
        w.put(db, b"some", &[0u8; 3], 0),
        Err(Error::BadValSize { .. })
    ));
    let size = model[&b"some"[..]].iter().next().unwrap().len();
    let extra = dup_value(1_000_000, size);
    assert!(!model[&b"some"[..]].contains(&extra));
    w.put(db, b"some", &extra, 0).unwrap();
    w.commit().unwrap();
    let r = env.begin_read().unwrap();
    let mut c = r.cursor(db).unwrap();
    c.set(b"some").unwrap().unwrap();
    assert_eq!(c.count().unwrap(), model[&b"some"[..]].len() as u64 + 1);
    let _ = Database::MAIN;
}

/// ferrocore writes a DUPFIXED DB; LMDB reads it back with NEXT_DUP and the MULTIPLE ops.
fn ferrocore_write_lmdb_read(flags: u16, size: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    {
        let env = open_env(dir.path(), EnvOptions::new().max_dbs(4));
        let mut txn = env.begin_write().unwrap();
        let db = txn
            .open_db(
                Some("f"),
                db_flags::CREATE | (db_flags::DUP_SORT | flags) as u32,
            )
            .unwrap();
        for (k, count) in [(&b"one"[..], 1u32), (b"some", 12), (b"many", 3000)] {
            let mut packed = Vec::new();
            for i in 0..count {
                let v = dup_value(i, size);
                packed.extend_from_slice(&v);
                model.entry(k.to_vec()).or_default().insert(v);
            }
            let mut c = txn.cursor_mut(db).unwrap();
            assert_eq!(
                c.put_multiple(k, &packed, size, ferrocore::put_flags::MULTIPLE)
                    .unwrap(),
                count as usize
            );
        }
        // Delete some values so sub-DB pages merge.
        for i in (0..3000u32).step_by(3) {
            let v = dup_value(i, size);
            assert!(txn.delete_value(db, b"many", Some(&v)).unwrap());
            model.get_mut(&b"many"[..]).unwrap().remove(&v);
        }
        txn.commit().unwrap();
        env.check().unwrap();
    }
    let integer = flags & db_flags::INTEGER_DUP != 0;
    let order = |v: &[u8]| -> Vec<u8> {
        if integer {
            v.iter().rev().copied().collect()
        } else {
            v.to_vec()
        }
    };
    // SAFETY: plain LMDB C API use; MDB_vals point at live memory or at LMDB's map.
    unsafe {
        let mut env = ptr::null_mut();
        ok(ffi::mdb_env_create(&mut env), "env_create");
        ok(ffi::mdb_env_set_maxdbs(env, 4), "set_maxdbs");
        let path = CString::new(dir.path().to_str().unwrap()).unwrap();
        ok(
            ffi::mdb_env_open(env, path.as_ptr(), ffi::MDB_RDONLY, 0o644),
            "env_open",
        );
        let mut txn = ptr::null_mut();
        ok(
            ffi::mdb_txn_begin(env, ptr::null_mut(), ffi::MDB_RDONLY, &mut txn),
            "txn_begin",
        );
        let mut dbi = 0;
        let name = CString::new("f").unwrap();
        ok(
            ffi::mdb_dbi_open(txn, name.as_ptr(), 0, &mut dbi),
            "dbi_open",
        );
        let mut cur = ptr::null_mut();
        ok(ffi::mdb_cursor_open(txn, dbi, &mut cur), "cursor_open");
        for (k, set) in &model {
            let mut want: Vec<&Vec<u8>> = set.iter().collect();
            want.sort_by_key(|v| order(v));
            let mut kv = val(k);
            let mut vv = empty_val();
            ok(
                ffi::mdb_cursor_get(cur, &mut kv, &mut vv, ffi::MDB_SET_KEY),
                "SET_KEY",
            );
            let mut count = 0;
            ok(ffi::mdb_cursor_count(cur, &mut count), "count");
            assert_eq!(count, set.len());
            let mut got = vec![copy_out(&vv)];
            while ffi::mdb_cursor_get(cur, &mut kv, &mut vv, ffi::MDB_NEXT_DUP) == 0 {
                got.push(copy_out(&vv));
            }
            assert!(
                got.iter().zip(&want).all(|(g, w)| g == *w) && got.len() == want.len(),
                "LMDB walks {k:?}"
            );
            if set.len() > 1 {
                // GET_MULTIPLE from the first value, then NEXT_MULTIPLE: every value, packed.
                ok(
                    ffi::mdb_cursor_get(cur, &mut kv, &mut vv, ffi::MDB_SET_KEY),
                    "SET_KEY",
                );
                let mut packed = Vec::new();
                let mut rc = ffi::mdb_cursor_get(cur, &mut kv, &mut vv, ffi::MDB_GET_MULTIPLE);
                while rc == 0 {
                    packed.extend_from_slice(&copy_out(&vv));
                    rc = ffi::mdb_cursor_get(cur, &mut kv, &mut vv, ffi::MDB_NEXT_MULTIPLE);
                }
                let flat: Vec<u8> = want.iter().flat_map(|v| v.iter().copied()).collect();
                assert!(packed == flat, "LMDB GET_MULTIPLE on {k:?}");
            }
        }
        ffi::mdb_cursor_close(cur);
        ffi::mdb_txn_abort(txn);
        ffi::mdb_env_close(env);
    }
}

#[test]
fn ferrocore_dupfixed_reads_in_lmdb() {
    ferrocore_write_lmdb_read(db_flags::DUP_FIXED, 8);
}

#[test]
fn ferrocore_integerdup_dupfixed_reads_in_lmdb() {
    ferrocore_write_lmdb_read(db_flags::DUP_FIXED | db_flags::INTEGER_DUP, 4);
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
