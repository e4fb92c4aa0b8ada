//! `cargo +nightly fuzz run pcd`: the point cloud reader, ascii, binary and LZF-compressed
//! (see `closest::io::fuzz`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    closest::io::fuzz::Loader::Pcd.feed(data);
});
