//! `cargo +nightly fuzz run npy`: the npy reader (see `closest::io::fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    closest::io::fuzz::Loader::Npy.feed(data);
});
