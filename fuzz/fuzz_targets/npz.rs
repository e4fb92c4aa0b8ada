//! `cargo +nightly fuzz run npz`: the npz reader, stored or deflated arrays (see
//! `closest::io::fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    closest::io::fuzz::Loader::Npz.feed(data);
});
