//! A scene file's text. A large one is mapped read-only rather than read, and its pages are
//! given back behind each pass over it, so that a job reading millions of bodies a chunk at a
//! time (`closest contacts --bodies`) holds a window of the file, not all of it.
//!
//! A mapped file must not change while the job runs: one truncated under it stops the process
//! with SIGBUS (as `grep`'s and ripgrep's maps do), and one rewritten may no longer be the text
//! that was checked. Files below [`MAPPED_FROM`] bytes, and every file off Unix, are read.

use std::ops::Deref;
use std::path::Path;

use crate::error::{Error, Result};

/// Files this large or larger are mapped: below it, reading costs little and maps would only
/// add system calls.
const MAPPED_FROM: u64 = 64 << 20;

/// How far a pass goes between giving pages back.
pub const RELEASE_EVERY: usize = 16 << 20;

pub struct SceneText {
    text: Text,
}

enum Text {
    Read(String),
    #[cfg(unix)]
    Mapped(Mapping),
}

impl SceneText {
    /// `path`'s text, refused with the file's name where it cannot be read or is not UTF-8.
    pub fn read(path: &Path) -> Result<SceneText> {
        SceneText::read_mapping_from(path, MAPPED_FROM)
    }

    fn read_mapping_from(path: &Path, mapped_from: u64) -> Result<SceneText> {
        let read_error = |source: std::io::Error| Error::Read {
            path: path.to_path_buf(),
            source,
        };
        #[cfg(unix)]
        {
            let file = std::fs::File::open(path).map_err(read_error)?;
            let size = file.metadata().map_err(read_error)?.len();
            if size >= mapped_from
                && let Some(mapping) = Mapping::of(&file, size)
            {
                mapping.check_utf8(RELEASE_EVERY).map_err(read_error)?;
                return Ok(SceneText {
                    text: Text::Mapped(mapping),
                });
            }
        }
        let text = std::fs::read_to_string(path).map_err(read_error)?;
        Ok(SceneText {
            text: Text::Read(text),
        })
    }

    /// Give back the pages wholly before `end` (a byte offset into `self`): a mapped file's
    /// are read again from the file if they are touched later. Read text keeps its memory.
    pub fn release_before(&self, end: usize) {
        #[cfg(unix)]
        if let Text::Mapped(mapping) = &self.text {
            mapping.release_before(end);
        }
        let _ = end;
    }

    /// Whether the text is a mapped file's (for tests: only those release pages).
    pub fn is_mapped(&self) -> bool {
        !matches!(self.text, Text::Read(_))
    }
}

impl Deref for SceneText {
    type Target = str;
    fn deref(&self) -> &str {
        match &self.text {
            Text::Read(text) => text,
            #[cfg(unix)]
            Text::Mapped(mapping) => {
                // SAFETY: `Mapping::check_utf8` checked every byte when the file was mapped.
                unsafe { std::str::from_utf8_unchecked(mapping.bytes()) }
            }
        }
    }
}

/// A whole file mapped read-only and private.
#[cfg(unix)]
struct Mapping {
    start: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is read-only; sharing or sending its address is sharing a `&[u8]`.
#[cfg(unix)]
unsafe impl Send for Mapping {}
#[cfg(unix)]
unsafe impl Sync for Mapping {}

#[cfg(unix)]
impl Mapping {
    /// `file`'s `size` bytes mapped, or None where the system will not (the caller reads).
    fn of(file: &std::fs::File, size: u64) -> Option<Mapping> {
        use std::os::fd::AsRawFd;
        let len = usize::try_from(size).ok().filter(|&len| len > 0)?;
        // SAFETY: a new private read-only mapping of an open file; nothing else is touched.
        let start = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if start == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: the range was just mapped; the advice is a hint.
        unsafe { libc::madvise(start, len, libc::MADV_SEQUENTIAL) };
        Some(Mapping {
            start: std::ptr::NonNull::new(start.cast())?,
            len,
        })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `len` bytes from `start` are mapped readable until `self` is dropped.
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.len) }
    }

    /// Check that the file is UTF-8 (as `read_to_string` does), a window at a time, giving
    /// each window's pages back after it.
    fn check_utf8(&self, window: usize) -> std::io::Result<()> {
        let bytes = self.bytes();
        let mut at = 0;
        while at < bytes.len() {
            // At least a character's 4 bytes, so that every window holds one whole.
            let end = (at + window.max(4)).min(bytes.len());
            match std::str::from_utf8(&bytes[at..end]) {
                Ok(_) => at = end,
                // A character cut by the window's end: the next window starts with it.
                Err(e) if e.error_len().is_none() && end < bytes.len() && e.valid_up_to() > 0 => {
                    at += e.valid_up_to()
                }
                Err(_) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "stream did not contain valid UTF-8",
                    ));
                }
            }
            self.release_before(at);
        }
        Ok(())
    }

    fn release_before(&self, end: usize) {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
        let len = end.min(self.len) / page * page;
        if len > 0 {
            // SAFETY: a private read-only file mapping's pages are dropped and, if touched
            // again, read back from the file: the bytes seen do not change.
            unsafe { libc::madvise(self.start.as_ptr().cast(), len, libc::MADV_DONTNEED) };
        }
    }
}

#[cfg(unix)]
impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the range was mapped by `Mapping::of` and nothing borrows it any more.
        unsafe { libc::munmap(self.start.as_ptr().cast(), self.len) };
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A mapped file reads as the file's text, the same after its pages are given back, and is
    /// refused where `read_to_string` refuses it, whatever character a window cuts.
    #[test]
    fn a_mapped_file_is_its_text_and_refused_where_reading_refuses_it() {
        let dir = std::env::temp_dir().join(format!("closest-scene-text-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("scene.json");
        let text = "{\"shapes\": [], \"note\": \"é→𝄞\"}\n".repeat(3);
        std::fs::write(&path, &text).unwrap();
        let mapped = SceneText::read_mapping_from(&path, 0).unwrap();
        assert!(mapped.is_mapped());
        assert_eq!(&*mapped, text);
        mapped.release_before(mapped.len());
        assert_eq!(&*mapped, text);
        assert!(!SceneText::read(&path).unwrap().is_mapped());
        let file = std::fs::File::open(&path).unwrap();
        let mapping = Mapping::of(&file, text.len() as u64).unwrap();
        for window in 1..text.len() + 2 {
            mapping.check_utf8(window).unwrap();
        }
        for cut in 0..text.len() {
            let mut bytes = text.clone().into_bytes();
            bytes[cut] = 0xff;
            std::fs::write(&path, &bytes).unwrap();
            let read = std::fs::read_to_string(&path).map(|_| ());
            let Err(Error::Read { source, .. }) = SceneText::read_mapping_from(&path, 0) else {
                panic!("byte {cut} made 0xff was read");
            };
            assert_eq!(source.to_string(), read.unwrap_err().to_string());
            let file = std::fs::File::open(&path).unwrap();
            let mapping = Mapping::of(&file, bytes.len() as u64).unwrap();
            for window in [1, 2, 3, 5, 7] {
                assert!(
                    mapping.check_utf8(window).is_err(),
                    "byte {cut}, window {window}"
                );
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
