//! A new environment: its two metas are written when it is created and flushed by its
//! first write txn before that writes a page (by the first `Env::sync` under `NO_SYNC`),
//! at its commit after growing the file, so that the file system places them with the
//! data, as LMDB's. What a power cut can
//! leave of such a creation (zeros, and some of the metas' sectors) opens as a new
//! environment; a file with anything else in it does not.

mod common;

use std::path::Path;

use common::{try_open_env, Rng};
use ferrocore::fault::{CallKind, Cut, FaultInjector};
use ferrocore::{env_flags, Database, Env, EnvOptions, Error};

const PAGE: usize = 4096;

fn options(flags: u32, injector: Option<&FaultInjector>) -> EnvOptions {
    let mut opts = EnvOptions::new();
    opts.flags(flags).page_size(PAGE);
    if let Some(inj) = injector {
        let inj = inj.clone();
        opts.data_file(move |f| inj.wrap(f));
    }
    opts
}

fn open(dir: &Path, flags: u32, injector: Option<&FaultInjector>) -> ferrocore::Result<Env> {
    try_open_env(dir, &options(flags, injector))
}

/// A directory whose `data.mdb` holds `bytes`.
fn dir_with(bytes: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.mdb"), bytes).unwrap();
    dir
}

/// A new environment with `flags` in a new directory, its data file behind an injector
/// that records every call.
fn new_injected(flags: u32) -> (tempfile::TempDir, FaultInjector, Env) {
    let dir = tempfile::tempdir().unwrap();
    let inj = FaultInjector::new();
    let env = open(dir.path(), flags, Some(&inj)).unwrap();
    (dir, inj, env)
}

/// How many calls of `kind` `log` holds.
fn count(log: &[CallKind], kind: CallKind) -> usize {
    log.iter().filter(|&&k| k == kind).count()
}

/// Puts one key, reopens (read-only, which repairs nothing) and reads it back: the file
/// is a whole environment with both metas valid.
fn assert_usable(dir: &Path) {
    let env = open(dir, 0, None).unwrap();
    assert_eq!(env.info().unwrap().last_txnid, 0, "a new environment");
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"k", b"v", 0).unwrap();
    txn.commit().unwrap();
    drop(env);
    let env = open(dir, env_flags::READ_ONLY, None).unwrap();
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.get(Database::MAIN, b"k").unwrap(), Some(&b"v"[..]));
    assert!(env.check().is_ok());
}

/// The calls of `log` after the metas' write at creation: the first is a flush (after a
/// length change, if any) and comes before any other write.
fn assert_flushed_first(log: &[CallKind]) {
    assert_eq!(log[0], CallKind::Write, "the metas");
    let first_sync = log.iter().position(|&k| k == CallKind::Sync);
    let first_write = log[1..]
        .iter()
        .position(|&k| k == CallKind::Write)
        .map(|i| i + 1);
    assert!(
        first_sync.is_some() && first_sync < first_write,
        "the metas are flushed before the first page is written: {log:?}"
    );
}

#[test]
fn the_first_commit_flushes_the_new_metas_before_it_writes() {
    let (_dir, inj, env) = new_injected(0);
    assert_eq!(inj.call_log(), [CallKind::Write], "the metas, unflushed");
    let txn = env.begin_write().unwrap();
    txn.abort();
    assert_eq!(
        inj.call_log(),
        [CallKind::Write],
        "an aborted txn writes nothing"
    );
    let mut txn = env.begin_write().unwrap();
    for i in 0..2000u32 {
        txn.put(Database::MAIN, &i.to_be_bytes(), &[1u8; 100], 0)
            .unwrap();
    }
    txn.commit().unwrap();
    let log = inj.call_log();
    assert_flushed_first(&log);
    // Grown to the commit's pages before the flush: the file system allocates the metas'
    // blocks as a large file's, with the data's.
    assert_eq!(log[1], CallKind::SetLen, "{log:?}");
    let after_first = inj.calls();
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"a", b"1", 0).unwrap();
    txn.commit().unwrap();
    let syncs = count(&inj.call_log()[after_first..], CallKind::Sync);
    assert_eq!(
        syncs, 2,
        "a later commit flushes its data and its meta only"
    );
}

#[test]
fn under_write_map_the_first_write_txn_flushes_the_new_metas_when_it_begins() {
    let (_dir, inj, env) = new_injected(env_flags::WRITE_MAP);
    let txn = env.begin_write().unwrap();
    assert_eq!(inj.call_log(), [CallKind::Write, CallKind::Sync]);
    txn.abort();
}

#[test]
fn a_bulk_load_flushes_the_new_metas_before_it_writes_pages_early() {
    let (_dir, inj, env) = new_injected(0);
    let mut txn = env.begin_write().unwrap();
    let mut loader = txn
        .bulk_loader(Database::MAIN, ferrocore::BulkOptions::default())
        .unwrap();
    for i in 0..20_000u32 {
        loader.push(&i.to_be_bytes(), &[2u8; 100]).unwrap();
    }
    loader.finish().unwrap();
    assert!(
        count(&inj.call_log(), CallKind::Write) > 1,
        "pages were written before the commit"
    );
    txn.commit().unwrap();
    let log = inj.call_log();
    assert_flushed_first(&log);
    // Grown over the first early write before the flush, as a commit grows the file.
    assert_eq!(log[1], CallKind::SetLen, "{log:?}");
    let syncs = count(&log, CallKind::Sync);
    assert_eq!(
        syncs, 3,
        "the metas, then the commit's data and meta: {log:?}"
    );
}

#[test]
fn under_no_sync_the_new_metas_wait_for_the_first_sync() {
    let (_dir, inj, env) = new_injected(env_flags::NO_SYNC);
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"a", b"1", 0).unwrap();
    txn.commit().unwrap();
    assert!(!inj.call_log().contains(&CallKind::Sync));
    env.sync().unwrap();
    assert_eq!(inj.call_log().last(), Some(&CallKind::Sync));
}

/// Every power cut of a creation, before the first write txn flushed it, opens as a new
/// environment, whatever subset of the metas' sectors it kept.
#[test]
fn every_power_cut_of_a_creation_opens_as_a_new_environment() {
    let (_dir, inj, _env) = new_injected(0);
    let mut rng = Rng(5);
    let mut seen = std::collections::HashSet::new();
    for cut in [Cut::KeepNone, Cut::KeepAll]
        .into_iter()
        .chain((0..200).map(|_| Cut::Random(rng.next())))
    {
        let image = inj.power_cut(cut);
        if !seen.insert(image.clone()) {
            continue;
        }
        let copy = dir_with(&image);
        assert_usable(copy.path());
    }
    // Nothing kept, all kept, zeros only, and metas kept one without the other.
    assert!(seen.len() >= 4, "{} distinct images", seen.len());
}

#[test]
fn a_file_of_zeros_is_a_new_environment_but_not_read_only() {
    let zeros = dir_with(&[0u8; 3 * PAGE]);
    assert!(matches!(
        open(zeros.path(), env_flags::READ_ONLY, None),
        Err(Error::Invalid(_))
    ));
    assert_usable(zeros.path());
}

/// A data page, or a meta of a later txn, is what a commit leaves: such a file is damaged,
/// not new, and stays as it is.
#[test]
fn a_file_with_more_than_new_metas_is_not_taken_for_a_new_one() {
    let mut page_of_data = vec![0u8; 3 * PAGE];
    page_of_data[2 * PAGE + 100] = 1;
    let dir = dir_with(&page_of_data);
    assert!(matches!(open(dir.path(), 0, None), Err(Error::Invalid(_))));
    assert_eq!(
        std::fs::read(dir.path().join("data.mdb")).unwrap(),
        page_of_data,
        "the file is left as it was"
    );

    // An environment with one commit whose meta 0 was lost: meta 1 is txn 1's, valid.
    let env_dir = tempfile::tempdir().unwrap();
    let env = open(env_dir.path(), 0, None).unwrap();
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"k", b"v", 0).unwrap();
    txn.commit().unwrap();
    drop(env);
    let path = env_dir.path().join("data.mdb");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[..512].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    let env = open(env_dir.path(), 0, None).unwrap();
    assert_eq!(env.info().unwrap().last_txnid, 1);
    let txn = env.begin_read().unwrap();
    assert_eq!(txn.get(Database::MAIN, b"k").unwrap(), Some(&b"v"[..]));
}
