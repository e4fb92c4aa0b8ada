//! `cargo +nightly fuzz run scene`: the scene reader (see `closest::io::fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    closest::io::fuzz::Loader::Scene.feed(data);
});
