//! The README's examples, compiled by `cargo test` (which builds examples) so they stay
//! true; run with `cargo run -p ferrocore --example readme`.

use ferrocore::{db_flags, put_flags, Database, Env, EnvOptions};

fn basics(dir: &std::path::Path) -> ferrocore::Result<()> {
    // SAFETY: nothing else modifies this environment's files while it is open
    // (reads hand out slices of a shared memory map).
    let env = unsafe { Env::open(dir)? };

    let mut txn = env.begin_write()?;
    txn.put(Database::MAIN, b"hello", b"world", 0)?;
    txn.commit()?;

    let txn = env.begin_read()?;
    assert_eq!(txn.get(Database::MAIN, b"hello")?, Some(&b"world"[..]));
    let mut cursor = txn.cursor(Database::MAIN)?;
    while let Some((key, value)) = cursor.next()? {
        println!("{key:?} = {value:?}");
    }
    Ok(())
}

fn named(dir: &std::path::Path) -> ferrocore::Result<()> {
    // SAFETY: as above.
    let env = unsafe { EnvOptions::new().max_dbs(8).open(dir)? };
    let mut txn = env.begin_write()?;
    let tags = txn.open_db(Some("tags"), db_flags::CREATE | db_flags::DUP_SORT as u32)?;
    txn.put(tags, b"rust", b"fast", 0)?;
    txn.put(tags, b"rust", b"safe", 0)?; // a second value under the same key
    {
        let mut child = txn.begin_nested()?; // aborted on drop unless committed
        child.put(tags, b"c", b"old", put_flags::NO_DUP_DATA)?;
        child.commit()?;
    }
    txn.commit()?;
    let txn = env.begin_read()?;
    let mut cursor = txn.cursor(tags)?;
    let mut item = cursor.set(b"rust")?;
    let mut values = Vec::new();
    while let Some((_, value)) = item {
        println!("{value:?}"); // "fast", then "safe"
        values.push(value.to_vec());
        item = cursor.next_dup()?;
    }
    assert_eq!(values, [b"fast".to_vec(), b"safe".to_vec()]);
    Ok(())
}

fn main() -> ferrocore::Result<()> {
    let dir = tempfile::tempdir()?;
    basics(dir.path())?;
    let dir = tempfile::tempdir()?;
    named(dir.path())
}
