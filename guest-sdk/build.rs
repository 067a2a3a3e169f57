//! Writes the `export!` macro with the WIT package text inside it.
//!
//! A plugin's exports must be generated in the plugin's own crate (only the world it
//! implements may be described there, or it would be asked for exports it lacks),
//! and `wit_bindgen::generate!` needs the WIT as a literal. So the macro carries the
//! text of `wit/plugin.wit`, copied here at build time rather than by hand.

use std::path::PathBuf;

fn main() {
    let wit = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"))
        .join("../wit/plugin.wit");
    println!("cargo:rerun-if-changed={}", wit.display());
    let text = std::fs::read_to_string(&wit)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", wit.display()));
    let template = include_str!("src/export_macro.rs.in");
    let out = template.replace("\"@WIT@\"", &format!("{text:?}"));
    let dest =
        PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it")).join("export_macro.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("cannot write {}: {e}", dest.display()));
}
