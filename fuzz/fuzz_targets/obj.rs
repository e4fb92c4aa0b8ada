//! `cargo +nightly fuzz run obj`: the obj reader (see `closest::io::fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    closest::io::fuzz::Loader::Obj.feed(data);
});
