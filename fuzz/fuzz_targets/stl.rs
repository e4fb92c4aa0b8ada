//! `cargo +nightly fuzz run stl`: the stl reader (see `closest::io::fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    closest::io::fuzz::Loader::Stl.feed(data);
});
