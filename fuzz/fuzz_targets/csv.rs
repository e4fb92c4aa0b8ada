//! `cargo +nightly fuzz run csv`: the csv reader (see `closest::io::fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    closest::io::fuzz::Loader::Csv.feed(data);
});
