//! `cargo +nightly fuzz run body`: the service's request-body parsers (`.npy` streamed in
//! pieces, `.npz` archives, scene JSON; see `closest::serve::fuzz_body`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    closest::serve::fuzz_body(data);
});
