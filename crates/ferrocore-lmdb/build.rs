//! Gives the shared library LMDB's soname, so programs linked against `liblmdb.so.0` load it.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,liblmdb.so.0");
    println!("cargo:rerun-if-changed=build.rs");
}
