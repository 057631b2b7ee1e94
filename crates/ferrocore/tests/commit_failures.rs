//! A failure at each step of a commit, for each kind of injected error, and the state the
//! environment is left in, against the table in `ferrocore::commit` and the README:
//!
//! - writing the data pages or growing the file fails the txn only: the last commit stands
//!   and the next write txn works;
//! - a failed flush, or a failed meta write, fails the txn and poisons the environment:
//!   write txns get `Panic` until it is reopened, read txns keep working;
//! - in every case the failed txn's changes are nowhere: not to readers, not after a
//!   reopen, not after a power cut.

use ferrocore::fault::{CallKind, Cut, Fault, FaultInjector};
use ferrocore::{env_flags, CommitStep, Database, Env, EnvOptions, Error};

mod common;
use common::open_env;

fn open(dir: &std::path::Path, flags: u32, injector: Option<&FaultInjector>) -> Env {
    let mut opts = EnvOptions::new();
    opts.flags(flags);
    if let Some(inj) = injector {
        let inj = inj.clone();
        opts.data_file(move |f| inj.wrap(f));
    }
    open_env(dir, &opts)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// The committed base: 300 keys in a few commits, then deletes (so the free list has
/// pages to reuse). Returns the contents before the last of these commits.
fn commit_base(env: &Env) -> Vec<(Vec<u8>, Vec<u8>)> {
    for round in 0..3u32 {
        let mut txn = env.begin_write().unwrap();
        for i in round * 100..(round + 1) * 100 {
            txn.put(Database::MAIN, &key(i), &[round as u8; 60], 0)
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let previous = contents(env);
    let mut txn = env.begin_write().unwrap();
    for i in (0..300).step_by(3) {
        txn.delete(Database::MAIN, &key(i)).unwrap();
    }
    txn.commit().unwrap();
    previous
}

/// The txn whose commit fails: overwrites, new keys, and a large value put and deleted
/// again; the file grows. It runs as the first commit after the environment is opened
/// again, so that the commit grows the file by its own step (it reads the file's length
/// first); a commit that knows the length and writes the new last page lets that write
/// grow the file, and has no such step (`write_data_grows_the_file` below).
fn failing_change(env: &Env) -> ferrocore::Result<()> {
    let mut txn = env.begin_write()?;
    for i in 0..400u32 {
        txn.put(Database::MAIN, &key(i), b"changed", 0)?;
    }
    txn.put(Database::MAIN, b"zz-large", &vec![9u8; 40 * 4096], 0)?;
    txn.delete(Database::MAIN, b"zz-large")?;
    txn.commit()
}

/// Everything in the main DB.
fn contents(env: &Env) -> Vec<(Vec<u8>, Vec<u8>)> {
    let txn = env.begin_read().unwrap();
    let mut cursor = txn.cursor(Database::MAIN).unwrap();
    let mut out = Vec::new();
    while let Some((k, v)) = cursor.next().unwrap() {
        out.push((k.to_vec(), v.to_vec()));
    }
    out
}

/// The call numbers of each commit step of `failing_change`, from a dry run.
fn step_calls(flags: u32) -> Vec<(CommitStep, usize)> {
    let dir = tempfile::tempdir().unwrap();
    let inj = FaultInjector::new();
    let env = open(dir.path(), flags, Some(&inj));
    let _ = commit_base(&env);
    drop(env);
    let env = open(dir.path(), flags, Some(&inj));
    let before = inj.calls();
    failing_change(&env).unwrap();
    let log = inj.call_log();
    let commit = &log[before..];
    let first = |kind| commit.iter().position(|&k| k == kind).map(|i| before + i);
    let last = |kind| commit.iter().rposition(|&k| k == kind).map(|i| before + i);
    let syncs = commit.iter().filter(|&&k| k == CallKind::Sync).count();
    let mut steps = vec![
        (CommitStep::WriteData, first(CallKind::Write).unwrap()),
        (CommitStep::WriteMeta, last(CallKind::Write).unwrap()),
    ];
    steps.extend(first(CallKind::SetLen).map(|c| (CommitStep::GrowFile, c)));
    if flags & env_flags::NO_SYNC == 0 {
        steps.push((CommitStep::FlushData, first(CallKind::Sync).unwrap()));
    }
    if syncs == 2 {
        steps.push((CommitStep::FlushMeta, last(CallKind::Sync).unwrap()));
    }
    // Every step makes its call when the mode has it.
    let mut want = CommitStep::ALL.to_vec();
    if flags & env_flags::WRITE_MAP != 0 {
        // The txn grew the file as it allocated (pages written through the map must lie
        // within it): the commit has nothing left to grow.
        want.retain(|&s| s != CommitStep::GrowFile);
    }
    if flags & (env_flags::NO_SYNC | env_flags::NO_META_SYNC) != 0 {
        want.retain(|&s| s != CommitStep::FlushMeta);
    }
    if flags & env_flags::NO_SYNC != 0 {
        want.retain(|&s| s != CommitStep::FlushData);
    }
    let mut have: Vec<CommitStep> = steps.iter().map(|&(s, _)| s).collect();
    have.sort_by_key(|s| CommitStep::ALL.iter().position(|a| a == s));
    assert_eq!(have, want, "the commit made the calls {commit:?}");
    steps
}

fn faults_for(step: CommitStep) -> &'static [Fault] {
    match step {
        CommitStep::WriteData | CommitStep::WriteMeta => {
            &[Fault::NoSpace, Fault::Io, Fault::ShortWrite]
        }
        _ => &[Fault::NoSpace, Fault::Io],
    }
}

fn expected_errno(fault: Fault) -> i32 {
    match fault {
        Fault::NoSpace | Fault::ShortWrite => libc::ENOSPC,
        Fault::Io => libc::EIO,
    }
}

fn fail_each_step(flags: u32) {
    let steps = step_calls(flags);
    let mut tried = 0;
    for &(step, call) in &steps {
        for &fault in faults_for(step) {
            let context = format!("flags {flags:#x}, {step:?} failing with {fault:?}");
            let dir = tempfile::tempdir().unwrap();
            let inj = FaultInjector::new();
            let env = open(dir.path(), flags, Some(&inj));
            let previous = commit_base(&env);
            let base = contents(&env);
            drop(env);
            let env = open(dir.path(), flags, Some(&inj));
            inj.fail_call(call, fault);
            match failing_change(&env) {
                Err(Error::Commit { step: s, source }) => {
                    assert_eq!(s, step, "{context}");
                    assert_eq!(
                        source.raw_os_error(),
                        Some(expected_errno(fault)),
                        "{context}"
                    );
                }
                other => panic!("{context}: commit gave {other:?}"),
            }
            assert!(
                inj.calls() > call,
                "{context}: the planned call was never made"
            );
            // Readers see the last commit, poisoned or not.
            assert!(contents(&env) == base, "{context}: readers see other data");
            env.check()
                .unwrap_or_else(|e| panic!("{context}: check: {e}"));
            // A power cut now, keeping all or none of what was not flushed: the last commit
            // in full sync mode. With NO_META_SYNC the last commit's meta may not be on the
            // disk (a failed flush loses it for good), so the commit before may be back.
            // With NO_SYNC, keeping all of it gives the last commit.
            for cut in [Cut::KeepAll, Cut::KeepNone] {
                let image = inj.power_cut(cut);
                let cut_dir = tempfile::tempdir().unwrap();
                std::fs::write(cut_dir.path().join("data.mdb"), image).unwrap();
                if flags & env_flags::NO_SYNC != 0 && cut == Cut::KeepNone {
                    continue; // no promise (see power_loss.rs)
                }
                let after_cut = open(cut_dir.path(), 0, None);
                after_cut
                    .check()
                    .unwrap_or_else(|e| panic!("{context}: check after a cut {cut:?}: {e}"));
                let found = contents(&after_cut);
                let meta_may_be_lost = flags & env_flags::NO_META_SYNC != 0
                    && (cut == Cut::KeepNone || step.failure_poisons());
                assert!(
                    found == base || (meta_may_be_lost && found == previous),
                    "{context}: other data after a cut {cut:?}"
                );
            }
            if step.failure_poisons() {
                assert!(
                    matches!(env.begin_write(), Err(Error::Panic(_))),
                    "{context}: a poisoned environment took a write txn"
                );
            } else {
                let mut txn = env.begin_write().unwrap();
                txn.put(Database::MAIN, b"after", b"the failure", 0)
                    .unwrap();
                txn.commit().unwrap();
                txn = env.begin_write().unwrap();
                txn.delete(Database::MAIN, b"after").unwrap();
                txn.commit().unwrap();
                assert!(
                    contents(&env) == base,
                    "{context}: other data after a later commit"
                );
            }
            // Reopened, the environment holds the last commit and takes writes again.
            drop(env);
            let env = open(dir.path(), flags, None);
            assert!(
                contents(&env) == base,
                "{context}: other data after reopening"
            );
            env.check().unwrap();
            let mut txn = env.begin_write().unwrap();
            txn.put(Database::MAIN, b"after", b"reopen", 0).unwrap();
            txn.commit().unwrap();
            tried += 1;
        }
    }
    let want: usize = steps.iter().map(|&(s, _)| faults_for(s).len()).sum();
    assert!(
        tried == want && want >= 6,
        "{tried} failures tried over {steps:?}"
    );
}

#[test]
fn a_failure_at_each_commit_step_leaves_the_documented_state() {
    fail_each_step(0);
}

#[test]
fn the_same_with_no_meta_sync() {
    fail_each_step(env_flags::NO_META_SYNC);
}

#[test]
fn the_same_with_no_sync() {
    fail_each_step(env_flags::NO_SYNC);
}

/// The error says which step failed and what the environment does next.
#[test]
fn commit_errors_name_the_step_and_the_consequence() {
    let e = Error::Commit {
        step: CommitStep::FlushData,
        source: std::io::Error::from_raw_os_error(libc::EIO),
    };
    let text = e.to_string();
    assert!(text.contains("flushing the data pages"), "{text}");
    assert!(
        text.contains("refuses writes until it is reopened"),
        "{text}"
    );
    assert_eq!(e.lmdb_code(), libc::EIO);
    let e = Error::Commit {
        step: CommitStep::WriteData,
        source: std::io::Error::from_raw_os_error(libc::ENOSPC),
    };
    assert!(e.to_string().contains("the last commit stands"));
    assert_eq!(e.lmdb_code(), libc::ENOSPC);
}

#[test]
fn the_same_with_write_map() {
    fail_each_step(env_flags::WRITE_MAP);
}

#[test]
fn the_same_with_write_map_and_no_meta_sync() {
    fail_each_step(env_flags::WRITE_MAP | env_flags::NO_META_SYNC);
}

/// Under WRITE_MAP the file grows while the txn allocates: a full disk then fails the put
/// (the txn must be aborted), and the environment goes on.
#[test]
fn write_map_growth_failing_fails_the_operation_only() {
    let dir = tempfile::tempdir().unwrap();
    let inj = FaultInjector::new();
    let env = open(dir.path(), env_flags::WRITE_MAP, Some(&inj));
    let previous = commit_base(&env);
    let base = contents(&env);
    assert!(previous != base);
    let mut txn = env.begin_write().unwrap();
    // Fail the next call, whatever it is: the txn's first growth of the file.
    inj.fail_call(inj.calls(), Fault::NoSpace);
    let mut failed = None;
    for i in 0..20_000u32 {
        if let Err(e) = txn.put(Database::MAIN, &key(1000 + i), &[7u8; 200], 0) {
            failed = Some(e);
            break;
        }
    }
    match failed {
        Some(Error::Io(e)) => assert_eq!(e.raw_os_error(), Some(libc::ENOSPC)),
        other => panic!("the growth did not fail the put: {other:?}"),
    }
    assert_eq!(inj.call_log().last(), Some(&CallKind::SetLen));
    assert!(matches!(txn.commit(), Err(Error::BadTxn)));
    assert!(contents(&env) == base);
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"after", b"ok", 0).unwrap();
    txn.commit().unwrap();
    env.check().unwrap();
}

/// A commit that knows the file's length and writes the new last page grows the file by
/// that write, with no `set_len`, as LMDB's writes past the end do; the file then covers
/// every page the meta counts. If that write fails, the txn fails, the last commit stands,
/// and the next commit works.
#[test]
fn write_data_grows_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let inj = FaultInjector::new();
    let env = open(dir.path(), 0, Some(&inj));
    let _ = commit_base(&env);
    let file_len = || {
        std::fs::metadata(dir.path().join("data.mdb"))
            .unwrap()
            .len()
    };
    let grow = |from: u32| -> ferrocore::Result<()> {
        let mut txn = env.begin_write()?;
        for i in from..from + 2000 {
            txn.put(Database::MAIN, &key(i), &[7; 60], 0)?;
        }
        txn.commit()
    };
    let (calls, len) = (inj.calls(), file_len());
    grow(10_000).unwrap();
    let commit = &inj.call_log()[calls..];
    assert!(!commit.contains(&CallKind::SetLen), "{commit:?}");
    let last_pgno = env.info().unwrap().last_pgno;
    assert!(file_len() > len && file_len() >= (last_pgno + 1) * 4096);
    // The growing write fails: the txn only.
    let base = contents(&env);
    inj.fail_call(inj.calls(), Fault::NoSpace);
    match grow(20_000) {
        Err(Error::Commit {
            step: CommitStep::WriteData,
            ..
        }) => {}
        other => panic!("the growing write's failure gave {other:?}"),
    }
    assert!(contents(&env) == base);
    env.check().unwrap();
    grow(30_000).unwrap();
    env.check().unwrap();
    let image = inj.power_cut(Cut::KeepNone);
    let cut_dir = tempfile::tempdir().unwrap();
    std::fs::write(cut_dir.path().join("data.mdb"), image).unwrap();
    let after_cut = open(cut_dir.path(), 0, None);
    after_cut.check().unwrap();
    assert_eq!(contents(&after_cut).len(), base.len() + 2000);
}
