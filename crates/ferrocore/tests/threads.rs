//! Readers on several threads never see a torn view while a writer thread commits.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use ferrocore::{Database, Env, EnvOptions};

mod common;
use common::{open_env, Rng, TempEnv};

const ACCOUNTS: u64 = 64;
const TOTAL: u64 = ACCOUNTS * 1_000;

fn account(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn balance(txn: &ferrocore::ReadTxn<'_>, i: u64) -> u64 {
    let v = txn.get(Database::MAIN, &account(i)).unwrap().unwrap();
    u64::from_le_bytes(v.try_into().unwrap())
}

/// Transfers between accounts keep the sum constant; every snapshot a reader takes, on any
/// thread, must add up (and its cursor scan must agree with its point reads).
#[test]
fn readers_on_many_threads_never_see_a_torn_view() {
    let env = Arc::new(TempEnv::new(&EnvOptions::new()));
    let mut txn = env.begin_write().unwrap();
    for i in 0..ACCOUNTS {
        txn.put(Database::MAIN, &account(i), &1_000u64.to_le_bytes(), 0)
            .unwrap();
    }
    txn.commit().unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let snapshots = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (env, stop, snapshots) = (env.clone(), stop.clone(), snapshots.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let txn = env.begin_read().unwrap();
                    let by_get: u64 = (0..ACCOUNTS).map(|i| balance(&txn, i)).sum();
                    assert_eq!(by_get, TOTAL, "torn view in snapshot {}", txn.id());
                    let mut cursor = txn.cursor(Database::MAIN).unwrap();
                    let mut by_scan = 0;
                    let mut item = cursor.first().unwrap();
                    while let Some((_, v)) = item {
                        by_scan += u64::from_le_bytes(v.try_into().unwrap());
                        item = cursor.next().unwrap();
                    }
                    assert_eq!(by_scan, TOTAL, "scan disagrees in snapshot {}", txn.id());
                    snapshots.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();

    // The writer: 500 transfers, each its own txn.
    let mut rng = Rng(0x7EAD_0001);
    for _ in 0..500 {
        let (from, to) = (rng.below(ACCOUNTS as usize), rng.below(ACCOUNTS as usize));
        let (from, to) = (from as u64, to as u64);
        let mut txn = env.begin_write().unwrap();
        let get = |txn: &ferrocore::WriteTxn<'_>, i| {
            u64::from_le_bytes(
                txn.get(Database::MAIN, &account(i))
                    .unwrap()
                    .unwrap()
                    .try_into()
                    .unwrap(),
            )
        };
        let amount = get(&txn, from).min(rng.below(100) as u64);
        let (a, b) = (get(&txn, from) - amount, get(&txn, to) + amount);
        txn.put(Database::MAIN, &account(from), &a.to_le_bytes(), 0)
            .unwrap();
        let b = if from == to { a + amount } else { b };
        txn.put(Database::MAIN, &account(to), &b.to_le_bytes(), 0)
            .unwrap();
        txn.commit().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("a reader saw a torn view");
    }
    assert!(snapshots.load(Ordering::Relaxed) > 0);
    let txn = env.begin_read().unwrap();
    assert_eq!((0..ACCOUNTS).map(|i| balance(&txn, i)).sum::<u64>(), TOTAL);
}

/// Read txns are not tied to a thread (LMDB's NOTLS behaviour, always on): a read txn and
/// its cursors can move to another thread; the environment is shared by reference.
#[test]
fn read_txns_move_between_threads() {
    fn assert_send<T: Send>() {}
    fn assert_sync<T: Sync>() {}
    assert_send::<ferrocore::ReadTxn<'static>>();
    assert_send::<ferrocore::Cursor<'static>>();
    assert_sync::<Env>();
    assert_send::<Env>();

    let env = TempEnv::new(&EnvOptions::new());
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"k", b"v", 0).unwrap();
    txn.commit().unwrap();
    let reader = env.begin_read().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            assert_eq!(reader.get(Database::MAIN, b"k").unwrap(), Some(&b"v"[..]));
            drop(reader); // ends on another thread than it began
        });
    });
    assert_eq!(env.readers().len(), 0);
}

/// `keep_reader_slots` (LMDB's reader slots without `MDB_NOTLS`, which the C ABI turns on):
/// a read txn that ends leaves its slot claimed with no snapshot, and the thread's next
/// read txn takes it again; txns on several threads at once each have a slot; a second
/// `Env` of the file in the process sees the kept slot and keeps its own; a full table
/// lends a kept slot to a thread that keeps none; closing the environment gives its kept
/// slots back, and none of another `Env` of the file.
#[test]
fn kept_reader_slots_pass_from_txn_to_txn_and_go_back_at_close() {
    let mut opts = EnvOptions::new();
    opts.keep_reader_slots(true).max_readers(3);
    let env = TempEnv::new(&opts);
    let mut txn = env.begin_write().unwrap();
    txn.put(Database::MAIN, b"k", b"v", 0).unwrap();
    txn.commit().unwrap();
    assert!(env.readers().is_empty());
    for _ in 0..100 {
        let reader = env.begin_read().unwrap();
        assert_eq!(reader.get(Database::MAIN, b"k").unwrap(), Some(&b"v"[..]));
        let readers = env.readers();
        assert_eq!(readers.len(), 1, "one slot, taken again each time");
        assert_eq!(readers[0].2, Some(1));
    }
    assert_eq!(env.readers().len(), 1, "kept");
    assert_eq!(env.readers()[0].2, None, "holding no snapshot");
    // A kept slot pins nothing: commits reuse the pages of the snapshots read before.
    for round in 0..50u64 {
        let mut txn = env.begin_write().unwrap();
        txn.put(Database::MAIN, b"k", &round.to_le_bytes(), 0)
            .unwrap();
        txn.commit().unwrap();
    }
    env.check().unwrap();

    // Two txns at once on one thread: the second claims a slot of its own.
    let a = env.begin_read().unwrap();
    let b = env.begin_read().unwrap();
    assert_eq!(env.readers().len(), 2);
    drop(a);
    drop(b); // the thread keeps one already: freed
    assert_eq!(env.readers().len(), 1);

    // A second environment of the file in this process, which keeps none.
    let second = open_env(env.dir(), &EnvOptions::new());
    assert_eq!(second.readers().len(), 1, "the first's kept slot is listed");
    let other = second.begin_read().unwrap();
    assert_eq!(second.readers().len(), 2);
    drop(other);
    assert_eq!(second.readers().len(), 1, "freed: the second keeps no slot");

    // The table full (3 slots): a thread that keeps none takes another thread's.
    std::thread::scope(|s| {
        s.spawn(|| drop(env.begin_read().unwrap())).join().unwrap();
    });
    assert_eq!(
        env.readers().len(),
        2,
        "kept by this thread and by the other"
    );
    let x = env.begin_read().unwrap(); // this thread's kept slot
    let y = env.begin_read().unwrap(); // the third and last
    assert_eq!(env.readers().len(), 3);
    let id = std::thread::scope(|s| {
        // No slot is free: the other thread's kept one is lent.
        s.spawn(|| env.begin_read().map(|t| t.id())).join().unwrap()
    });
    assert_eq!(id.unwrap(), 51);
    assert_eq!(env.readers().len(), 3);
    drop((x, y));
    assert_eq!(
        env.readers().len(),
        2,
        "this thread keeps one, frees the other"
    );

    // Closing gives the kept slots back, and only those of the closed environment.
    let dir = env.close();
    assert!(second.readers().is_empty(), "{:?}", second.readers());
    drop(second);
    drop(dir);
}
