//! `cargo +nightly fuzz run glb`: the glTF reader, `.glb` and `.gltf` (see `closest::io::fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    closest::io::fuzz::Loader::Gltf.feed(data);
});
