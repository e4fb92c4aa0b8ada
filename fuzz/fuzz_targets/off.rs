//! `cargo +nightly fuzz run off`: the OFF reader (see `closest::io::fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    closest::io::fuzz::Loader::Off.feed(data);
});
