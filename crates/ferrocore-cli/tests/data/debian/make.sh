#!/usr/bin/env bash
# Remakes the dumps in this directory with LMDB's own tools (Debian's lmdb-utils): the
# text below goes through mdb_load into two environments, which mdb_dump then prints.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
python3 - "$work" <<'PY'
import struct, sys
work = sys.argv[1]
def ok(b): return 0x5c not in b  # no backslash: see README.md
def section(out, name, flags, pairs):
    out.append("VERSION=3\nformat=bytevalue\n")
    if name: out.append(f"database={name}\n")
    out.append("type=btree\nmapsize=1048576\nmaxreaders=126\n")
    for f in flags: out.append(f"{f}=1\n")
    out.append("HEADER=END\n")
    for k, v in pairs:
        assert ok(k) and ok(v)
        out.append(" " + k.hex() + "\n " + v.hex() + "\n")
    out.append("DATA=END\n")
out = []
main = [(b"alpha", b"first value"), (b"beta\x00\x01binary", bytes(b for b in range(256) if b != 0x5c)),
        (b"tab\tkey", b"line\nbreak"), (b"long", b"x" * 5000)]
main += [(f"key{i:04d}".encode(), f"value {i} ".encode() * 3) for i in range(200)]
section(out, None, [], sorted(main))
open(f"{work}/main.txt", "w").write("".join(out))
out = []
dups = [(f"tag{i:02d}".encode(), f"member-{j:05d}".encode())
        for i in range(20) for j in range([1, 3, 60, 150][i % 4])]
section(out, "dupsort", ["dupsort"], sorted(dups))
fixed = [(f"f{i:03d}".encode(), struct.pack("<I", j * 13 + 1))
         for i in range(12) for j in range(i * 37 % 150 + 1)]
fixed = [kv for kv in fixed if ok(kv[1])]
section(out, "dupfixed", ["dupsort", "dupfixed", "integerdup"],
        sorted(fixed, key=lambda kv: (kv[0], struct.unpack("<I", kv[1])[0])))
ints = [(struct.pack("<I", i * i), f"square of {i}".encode()) for i in range(300)]
ints = [kv for kv in ints if ok(kv[0])]
section(out, "integerkey", ["integerkey"], sorted(ints, key=lambda kv: struct.unpack("<I", kv[0])[0]))
rev = [(f"{w}.example.org".encode(), w.encode()) for w in ["www", "mail", "ftp", "a", "zz", "dns1", "dns2", "ldap"]]
section(out, "reversekey", ["reversekey"], sorted(rev, key=lambda kv: kv[0][::-1]))
open(f"{work}/named.txt", "w").write("".join(out))
PY
mkdir "$work/main" "$work/named"
mdb_load -f "$work/main.txt" "$work/main"
mdb_load -f "$work/named.txt" "$work/named"
mdb_dump "$work/main" > "$here/debian-main.dump"
mdb_dump -p "$work/main" > "$here/debian-main-print.dump"
mdb_dump -a "$work/named" > "$here/debian-named.dump"
mdb_dump -a -p "$work/named" > "$here/debian-named-print.dump"
rm -rf "$work"
