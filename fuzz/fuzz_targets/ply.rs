//! `cargo +nightly fuzz run ply`: the ply reader (see `closest::io::fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    closest::io::fuzz::Loader::Ply.feed(data);
});
