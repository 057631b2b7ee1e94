//! `ferrocore dump` and `ferrocore load` against LMDB's `mdb_dump` and `mdb_load`: the same
//! text for the same environment, and round trips through either tool.

mod common;

use std::path::Path;

use common::*;
use ferrocore::env_flags;

/// `ferrocore dump`'s output for `args`.
fn dump(args: &[&str], path: &Path) -> Vec<u8> {
    stdout_of(ferrocore().arg("dump").args(args).arg(path))
}

/// Asserts `ours` is `theirs`, showing both as text if not.
fn assert_same_text(ours: &[u8], theirs: &[u8], what: &str) {
    assert!(
        ours == theirs,
        "{what}: ferrocore and mdb_dump differ\n--- ferrocore\n{}\n--- mdb_dump\n{}",
        String::from_utf8_lossy(ours),
        String::from_utf8_lossy(theirs)
    );
}

/// Compares `ferrocore dump` with `mdb_dump` for each set of options.
fn compare_dumps(tools: &LmdbTools, path: &Path, option_sets: &[&[&str]]) {
    for &args in option_sets {
        let theirs = tools.dump(args, path);
        let mut ours = dump(args, path);
        if args.contains(&"-p") && tools.bare_backslash() {
            // This mdb_dump predates ITS#9068 and writes a backslash bare; ferrocore writes
            // `\\` as LMDB does since. Everything else must match byte for byte.
            ours = with_bare_backslashes(&ours);
        }
        assert_same_text(&ours, &theirs, &format!("dump {args:?}"));
    }
}

#[test]
fn dump_matches_mdb_dump() {
    let Some(tools) = LmdbTools::find("dump_matches_mdb_dump") else {
        return;
    };
    let main_only = tempfile::tempdir().unwrap();
    make_main_only(main_only.path());
    // -a: the main DB's keys are no DBs; nothing to dump, and no error.
    compare_dumps(&tools, main_only.path(), &[&[], &["-p"], &["-a"]]);

    let named = tempfile::tempdir().unwrap();
    make_named(named.path(), 0);
    compare_dumps(
        &tools,
        named.path(),
        &[
            &[],
            &["-p"],
            &["-a"],
            &["-a", "-p"],
            &["-l"],
            &["-s", "dupsort"],
            &["-s", "dupfixed", "-p"],
            &["-s", "name with spaces"],
        ],
    );
    // Every flag line appears in what was compared.
    let all = String::from_utf8(dump(&["-a"], named.path())).unwrap();
    for line in [
        "duplicates=1",
        "dupsort=1",
        "dupfixed=1",
        "integerkey=1",
        "reversekey=1",
        "integerdup=1",
        "reversedup=1",
        "database=name with spaces",
    ] {
        assert!(
            all.lines().any(|l| l == line),
            "{line} missing from:\n{all}"
        );
    }
    // The plain key of the main DB is no DB: -a skips it, -l does not list it.
    assert!(!all.contains("database=not a db"));

    // A data file without a directory (-n).
    let file_dir = tempfile::tempdir().unwrap();
    let file = file_dir.path().join("env.mdb");
    make_named(&file, env_flags::NO_SUB_DIR);
    compare_dumps(&tools, &file, &[&["-n", "-a"], &["-n", "-p"]]);
}

#[test]
fn dump_writes_to_a_file_and_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    make_named(dir.path(), 0);
    let out_file = dir.path().join("out.txt");
    let stdout = dump(&["-a", "-f", out_file.to_str().unwrap()], dir.path());
    assert!(stdout.is_empty());
    assert_eq!(std::fs::read(&out_file).unwrap(), dump(&["-a"], dir.path()));

    // Errors: one line on stderr, a non-zero exit.
    let missing = dir.path().join("missing");
    let not_env = tempfile::tempdir().unwrap();
    let garbage = not_env.path().join("garbage.mdb");
    std::fs::write(&garbage, vec![0x42u8; 16384]).unwrap();
    let empty = tempfile::tempdir().unwrap();
    // SAFETY: the test owns the directory.
    drop(unsafe { ferrocore::Env::open(empty.path()).unwrap() });
    let cases: Vec<(Vec<&str>, &Path, &str)> = vec![
        (vec![], &missing, "no such environment"),
        (vec![], not_env.path(), "not an environment"),
        (vec!["-n"], &garbage, "not an LMDB file"),
        (
            vec!["-s", "nope"],
            dir.path(),
            "database nope: MDB_NOTFOUND",
        ),
        (
            vec!["-a"],
            empty.path(),
            "does not contain multiple databases",
        ),
    ];
    for (args, path, message) in cases {
        let out = ferrocore()
            .arg("dump")
            .args(&args)
            .arg(path)
            .output()
            .unwrap();
        let err = stderr_text(&out);
        assert!(!out.status.success(), "dump {args:?} {path:?} succeeded");
        assert!(err.contains(message), "dump {args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
    // Reading a file that is not an environment leaves no lock file beside it.
    assert!(!not_env.path().join("garbage.mdb-lock").exists());
}

/// Loads `text` with `ferrocore load args` into `path`, which must succeed.
fn load(args: &[&str], path: &Path, text: &[u8]) {
    let out = run_with_input(ferrocore().arg("load").args(args).arg(path), text);
    assert!(out.status.success(), "load {args:?}: {}", stderr_text(&out));
}

#[test]
fn dump_load_dump_is_identity() {
    let main_only = tempfile::tempdir().unwrap();
    make_main_only(main_only.path());
    let named = tempfile::tempdir().unwrap();
    make_named(named.path(), 0);
    for (source, args) in [
        (main_only.path(), &[][..]),
        (main_only.path(), &["-p"][..]),
        (named.path(), &["-a"][..]),
        (named.path(), &["-a", "-p"][..]),
    ] {
        let text = dump(args, source);
        let target = tempfile::tempdir().unwrap();
        load(&[], target.path(), &text);
        assert_same_text(
            &dump(args, target.path()),
            &text,
            &format!("reload {args:?}"),
        );
        // Loading the same again with -N changes nothing and is not an error.
        load(&["-N"], target.path(), &text);
        assert_same_text(&dump(args, target.path()), &text, &format!("-N {args:?}"));
    }
}

#[test]
fn mdb_dump_output_loads_and_ferrocore_output_loads_in_mdb_load() {
    let Some(tools) =
        LmdbTools::find("mdb_dump_output_loads_and_ferrocore_output_loads_in_mdb_load")
    else {
        return;
    };
    let named = tempfile::tempdir().unwrap();
    make_named(named.path(), 0);
    let mut formats = vec![&["-a"][..]];
    if !tools.bare_backslash() {
        // An older mdb_dump -p is ambiguous where a backslash precedes two hex digits.
        formats.push(&["-a", "-p"][..]);
    }
    for args in formats {
        // mdb_dump -> ferrocore load -> mdb_dump.
        let theirs = tools.dump(args, named.path());
        let target = tempfile::tempdir().unwrap();
        load(&[], target.path(), &theirs);
        assert_same_text(
            &tools.dump(args, target.path()),
            &theirs,
            &format!("{args:?}"),
        );
    }
    // ferrocore dump -> mdb_load -> mdb_dump (hex: mdb_load 0.9.24 misreads `\\` after an
    // escape on the same line).
    let ours = dump(&["-a"], named.path());
    let target = tempfile::tempdir().unwrap();
    let out = run_with_input(
        std::process::Command::new("mdb_load").arg(target.path()),
        &ours,
    );
    assert!(out.status.success(), "mdb_load: {}", stderr_text(&out));
    assert_same_text(
        &tools.dump(&["-a"], target.path()),
        &ours,
        "mdb_load of ours",
    );
}

#[test]
fn load_reads_plain_text_into_a_named_db() {
    let dir = tempfile::tempdir().unwrap();
    load(
        &["-T", "-s", "t"],
        dir.path(),
        b"k 1\nv\\\\1\nk\\002\n\nk3\nv\\ff\n",
    );
    let text = String::from_utf8(dump(&["-s", "t"], dir.path())).unwrap();
    let data: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "HEADER=END")
        .skip(1)
        .collect();
    assert_eq!(
        data,
        [" 6b0032", " ", " 6b2031", " 765c31", " 6b33", " 76ff", "DATA=END"],
        "{text}"
    );
    // -s names the DB of a section whose header names none.
    let main = dump(&[], dir.path());
    let other = tempfile::tempdir().unwrap();
    load(&["-s", "elsewhere"], other.path(), &main);
    let listed = dump(&["-l"], other.path());
    assert_eq!(listed, b"elsewhere\n");
}

#[test]
fn load_with_no_overwrite_keeps_existing_values() {
    let dir = tempfile::tempdir().unwrap();
    load(&["-T"], dir.path(), b"a\nold\n");
    load(&["-T", "-N"], dir.path(), b"a\nnew\nb\nnew\n");
    let text = String::from_utf8(dump(&["-p"], dir.path())).unwrap();
    assert!(text.contains("\n a\n old\n b\n new\nDATA=END\n"), "{text}");
    // Without -N the value is replaced.
    load(&["-T"], dir.path(), b"a\nnew\n");
    let text = String::from_utf8(dump(&["-p"], dir.path())).unwrap();
    assert!(text.contains("\n a\n new\n"), "{text}");
}

const GOOD_SECTION: &str = "VERSION=3\nformat=bytevalue\ndatabase=first\ntype=btree\n\
                            mapsize=1048576\nmaxreaders=126\ndb_pagesize=4096\nHEADER=END\n\
                            \x206b31\n 7631\nDATA=END\n";

#[test]
fn malformed_input_names_its_line_and_changes_nothing() {
    let header = "VERSION=3\nformat=bytevalue\ntype=btree\nHEADER=END\n";
    let print_header = "VERSION=3\nformat=print\ntype=btree\nHEADER=END\n";
    let dupfixed = "VERSION=3\nformat=bytevalue\ndatabase=df\ndupsort=1\ndupfixed=1\nHEADER=END\n";
    let cases: Vec<(String, &str)> = vec![
        (
            "VERSION=3\nformat=bytevalue\n".into(),
            "line 3: unexpected end of input, expected a header line or HEADER=END",
        ),
        (
            "VERSION=3\nnonsense\nHEADER=END\n".into(),
            "line 2: expected KEYWORD=VALUE",
        ),
        (
            "VERSION=3\nformat=base64\nHEADER=END\n".into(),
            "line 2: unsupported format",
        ),
        (
            "VERSION=4\nHEADER=END\n".into(),
            "line 1: unsupported VERSION 4",
        ),
        (
            "VERSION=3\ntype=hash\nHEADER=END\n".into(),
            "line 2: unsupported type",
        ),
        (
            "VERSION=3\nmapsize=big\nHEADER=END\n".into(),
            "line 2: expected a number after mapsize=",
        ),
        (
            "VERSION=3\ndupsort=yes\nHEADER=END\n".into(),
            "line 2: expected 0 or 1",
        ),
        (
            format!("{header} 6b31\n 763\nDATA=END\n"),
            "line 6: column 5: expected an even number of hex digits",
        ),
        (
            format!("{header} 6b31\n 76zz\nDATA=END\n"),
            "line 6: column 4: expected a hex digit",
        ),
        (
            format!("{header} 6b31\n 7631\n"),
            "line 7: unexpected end of input, expected a key line or DATA=END",
        ),
        (
            format!("{header} 6b31\n"),
            "line 6: unexpected end of input, expected the value of the key on line 5",
        ),
        (
            format!("{header} 6b31\nDATA=END\n"),
            "line 6: expected the value of the key on line 5",
        ),
        (
            format!("{header}6b31\n 7631\nDATA=END\n"),
            "line 5: expected a key line (a space, then the key) or DATA=END",
        ),
        (
            format!("{print_header} k\\zz\n v\nDATA=END\n"),
            "line 5: column 3: expected \\\\ or \\ and two hex digits",
        ),
        (
            format!("{header} \n 7631\nDATA=END\n"),
            "line 6: put refused: MDB_BAD_VALSIZE",
        ),
        (
            format!("{dupfixed} 6b\n 01020304\n 6b\n 0102\nDATA=END\n"),
            "line 10: put refused: MDB_BAD_VALSIZE",
        ),
        // A good section, then a bad one: the first is not committed either.
        (
            format!("{GOOD_SECTION}VERSION=3\nHEADER=END\n 00\n"),
            "line 15: unexpected end of input",
        ),
    ];
    for (input, message) in &cases {
        // An existing environment is left as it was.
        let dir = tempfile::tempdir().unwrap();
        make_named(dir.path(), 0);
        let before = dump(&["-a"], dir.path());
        let main_before = dump(&[], dir.path());
        let out = run_with_input(ferrocore().arg("load").arg(dir.path()), input.as_bytes());
        let err = stderr_text(&out);
        assert!(!out.status.success(), "accepted:\n{input}");
        assert!(
            err.contains(message),
            "input:\n{input}\nstderr: {err}\nexpected: {message}"
        );
        assert!(err.starts_with("ferrocore: line "), "{err}");
        assert_eq!(dump(&["-a"], dir.path()), before, "{input}");
        assert_eq!(dump(&[], dir.path()), main_before, "{input}");
        // A new environment is not left behind.
        let empty = tempfile::tempdir().unwrap();
        let out = run_with_input(ferrocore().arg("load").arg(empty.path()), input.as_bytes());
        assert!(!out.status.success());
        assert_eq!(
            std::fs::read_dir(empty.path()).unwrap().count(),
            0,
            "{input}"
        );
    }
    // Plain text (-T): a key without a value.
    let dir = tempfile::tempdir().unwrap();
    let out = run_with_input(
        ferrocore().args(["load", "-T"]).arg(dir.path()),
        b"k\nv\nk2\n",
    );
    assert!(stderr_text(&out)
        .contains("line 4: unexpected end of input, expected the value of the key on line 3"));
    assert!(!out.status.success());
    // A load into a directory that does not exist.
    let out = run_with_input(
        ferrocore().arg("load").arg(dir.path().join("missing")),
        GOOD_SECTION.as_bytes(),
    );
    assert!(!out.status.success());
    assert!(stderr_text(&out).contains("no such directory"));
}

/// Dumps written by Debian's `mdb_dump` 0.9.24 (kept in `tests/data/debian`, see its
/// README) load into ferrocore and dump back byte for byte, by ferrocore and by LMDB.
#[test]
fn dumps_made_by_lmdb_tools_load_and_dump_back_identically() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/debian");
    let tools = LmdbTools::find("dumps_made_by_lmdb_tools_load_and_dump_back_identically");
    for (file, args) in [
        ("debian-main.dump", &[][..]),
        ("debian-main-print.dump", &["-p"][..]),
        ("debian-named.dump", &["-a"][..]),
        ("debian-named-print.dump", &["-a", "-p"][..]),
    ] {
        let text = std::fs::read(data.join(file)).unwrap();
        let target = tempfile::tempdir().unwrap();
        load(
            &["-f", data.join(file).to_str().unwrap()],
            target.path(),
            b"",
        );
        assert_same_text(&dump(args, target.path()), &text, file);
        if let Some(tools) = &tools {
            assert_same_text(&tools.dump(args, target.path()), &text, file);
        }
    }
}
