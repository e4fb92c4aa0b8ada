//! LZF streams (liblzf's format, which PCL's `binary_compressed` `.pcd` files hold) decoded
//! forward from a file in bounded memory: a reference reaches at most 8 KiB back, so a cursor
//! keeps a window of the last output bytes, and checkpoints taken as the stream is checked let
//! a read start near any place without decoding from the start again.

use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The farthest back a reference reaches: 13 bits of distance − 1.
pub(super) const FARTHEST: usize = 1 << 13;
/// The window of output bytes a cursor keeps: a reference's reach and an operation's output
/// (a literal of 32 bytes, a reference of 264) fit in it.
const WINDOW: usize = 1 << 14;
const WINDOW_MASK: u64 = WINDOW as u64 - 1;
/// Output bytes between checkpoints: a 4 GiB stream (the format's most) keeps 256 windows.
const CHECKPOINT_BYTES: u64 = 1 << 24;

/// The stream is not LZF: a literal or reference reads past the input's end, before the
/// output's start or past its declared end.
const BROKEN: &str = "its compressed data is not LZF (a run reads past its ends)";

/// An LZF stream of `packed` bytes from byte `start` of a file, declared to inflate to
/// `inflated` bytes, checked whole when opened.
pub(crate) struct LzfFile {
    path: PathBuf,
    start: u64,
    packed: u64,
    inflated: u64,
    checkpoints: Vec<Cursor>,
}

/// A place in the stream, between two operations, with the output window before it.
#[derive(Clone)]
struct Cursor {
    /// Input bytes read.
    read: u64,
    /// Output bytes made.
    made: u64,
    window: Box<[u8]>,
}

/// A cursor reading on from its place: its file positioned at `cursor.read`.
pub(crate) struct LzfReader {
    input: BufReader<std::fs::File>,
    cursor: Cursor,
}

impl LzfFile {
    /// Decode the whole stream once, in bounded memory, to check that it is LZF and inflates
    /// to exactly `inflated` bytes, keeping a checkpoint every `CHECKPOINT_BYTES` of output.
    pub fn open(path: &Path, start: u64, packed: u64, inflated: u64) -> Result<LzfFile, String> {
        let mut lzf = LzfFile {
            path: path.to_path_buf(),
            start,
            packed,
            inflated,
            checkpoints: Vec::new(),
        };
        let mut reader = lzf.reader_at(lzf.first())?;
        lzf.checkpoints.push(reader.cursor.clone());
        let mut next_checkpoint = CHECKPOINT_BYTES;
        while reader.cursor.read < packed {
            if reader.cursor.made >= next_checkpoint {
                lzf.checkpoints.push(reader.cursor.clone());
                next_checkpoint = reader.cursor.made + CHECKPOINT_BYTES;
            }
            lzf.step(&mut reader)?;
        }
        if reader.cursor.made != inflated {
            return Err(format!(
                "its compressed data inflates to {} bytes, not the {inflated} it declares",
                reader.cursor.made
            ));
        }
        Ok(lzf)
    }

    fn first(&self) -> Cursor {
        Cursor {
            read: 0,
            made: 0,
            window: vec![0; WINDOW].into_boxed_slice(),
        }
    }

    fn reader_at(&self, cursor: Cursor) -> Result<LzfReader, String> {
        let mut file = std::fs::File::open(&self.path).map_err(|e| e.to_string())?;
        file.seek(SeekFrom::Start(self.start + cursor.read))
            .map_err(|e| e.to_string())?;
        Ok(LzfReader {
            input: BufReader::with_capacity(1 << 16, file),
            cursor,
        })
    }

    /// Output bytes `from..from + out.len()` into `out`, read on by `reader` where it can
    /// (it is made, or moved to the checkpoint before `from`, where it cannot).
    pub fn read(
        &self,
        reader: &mut Option<LzfReader>,
        from: u64,
        out: &mut [u8],
    ) -> Result<(), String> {
        if out.is_empty() {
            return Ok(());
        }
        let end = from + out.len() as u64;
        if end > self.inflated {
            return Err(format!(
                "bytes to {end} asked of a stream of {} bytes",
                self.inflated
            ));
        }
        let checkpoint =
            &self.checkpoints[self.checkpoints.partition_point(|c| c.made <= from) - 1];
        // A reader behind `from` by more than its window holds, or farther behind than the
        // checkpoint before it, starts again from that checkpoint.
        let usable = reader.as_ref().is_some_and(|r| {
            let made = r.cursor.made;
            made >= checkpoint.made && from + (WINDOW - FARTHEST) as u64 >= made
        });
        if !usable {
            *reader = Some(self.reader_at(checkpoint.clone())?);
        }
        let reader = reader.as_mut().expect("set above");
        let mut copy = |reader: &LzfReader, made_from: u64| {
            for at in made_from.max(from)..reader.cursor.made.min(end) {
                out[(at - from) as usize] = reader.cursor.window[(at & WINDOW_MASK) as usize];
            }
        };
        copy(reader, from);
        while reader.cursor.made < end {
            let before = reader.cursor.made;
            self.step(reader)?;
            copy(reader, before);
        }
        Ok(())
    }

    /// Decode one operation: a literal run or a back reference.
    fn step(&self, reader: &mut LzfReader) -> Result<(), String> {
        let control = usize::from(self.byte(reader)?);
        let cursor = &reader.cursor;
        if control < 32 {
            // A literal run of control + 1 bytes.
            let run = control + 1;
            if cursor.made + run as u64 > self.inflated {
                return Err(BROKEN.into());
            }
            for _ in 0..run {
                let byte = self.byte(reader)?;
                let cursor = &mut reader.cursor;
                cursor.window[(cursor.made & WINDOW_MASK) as usize] = byte;
                cursor.made += 1;
            }
        } else {
            // A back reference: length − 2 in the top three bits (7: one more byte of it),
            // distance − 1 in the low five and the next byte.
            let mut run = control >> 5;
            if run == 7 {
                run += usize::from(self.byte(reader)?);
            }
            run += 2;
            let distance = ((control & 0x1f) << 8) + usize::from(self.byte(reader)?) + 1;
            let cursor = &mut reader.cursor;
            if distance as u64 > cursor.made || cursor.made + run as u64 > self.inflated {
                return Err(BROKEN.into());
            }
            // The run may overlap what it writes (a repeated pattern): byte by byte.
            for _ in 0..run {
                let byte = cursor.window[((cursor.made - distance as u64) & WINDOW_MASK) as usize];
                cursor.window[(cursor.made & WINDOW_MASK) as usize] = byte;
                cursor.made += 1;
            }
        }
        Ok(())
    }

    /// The stream's next input byte.
    fn byte(&self, reader: &mut LzfReader) -> Result<u8, String> {
        if reader.cursor.read >= self.packed {
            return Err(BROKEN.into());
        }
        let buffer = reader.input.fill_buf().map_err(|e| e.to_string())?;
        let Some(&byte) = buffer.first() else {
            return Err("it ended inside its compressed data: it changed while the job ran".into());
        };
        reader.input.consume(1);
        reader.cursor.read += 1;
        Ok(byte)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads of any place, in order, backwards and across checkpoints, give the bytes
    /// compressed; broken streams are refused when opened.
    #[test]
    fn streams_read_anywhere_as_compressed() {
        // Repeats near and 8 KiB back, and noise between them.
        let mut state = 12345u32;
        let mut data = Vec::new();
        while data.len() < 60_000 {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            match state >> 30 {
                0 => data.extend(std::iter::repeat_n((state >> 8) as u8, 300)),
                1 if data.len() > FARTHEST => {
                    let from = data.len() - FARTHEST;
                    data.extend_from_within(from..from + 100);
                }
                _ => data.extend((0..40).map(|k| (state >> (k % 24)) as u8)),
            }
        }
        let packed = crate::io::fuzz::lzf_compress(&data);
        assert!(packed.len() < data.len() * 2 / 3, "few references");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stream");
        let mut file = b"head".to_vec();
        file.extend(&packed);
        file.extend(b"tail");
        std::fs::write(&path, &file).unwrap();
        let open = |packed_len: usize, inflated: usize| {
            LzfFile::open(&path, 4, packed_len as u64, inflated as u64)
        };
        let mut lzf = open(packed.len(), data.len()).unwrap();
        // Small checkpoints, so that reads start from many.
        let mut reader = lzf.reader_at(lzf.first()).unwrap();
        lzf.checkpoints.clear();
        while reader.cursor.read < lzf.packed {
            if lzf
                .checkpoints
                .last()
                .is_none_or(|c| reader.cursor.made >= c.made + 5000)
            {
                lzf.checkpoints.push(reader.cursor.clone());
            }
            lzf.step(&mut reader).unwrap();
        }
        let mut cursor = None;
        let mut out = Vec::new();
        for (from, len) in [
            (0, 10),
            (10, 20_000),
            (20_010, 39_990),
            (59_000, 1000),
            (100, 1),
            (30_000, 9000),
            (38_000, 5000),
            (0, 60_000),
            (60_000, 0),
        ] {
            out.resize(len, 0);
            lzf.read(&mut cursor, from as u64, &mut out).unwrap();
            assert!(out == data[from..from + len], "{from} + {len}");
        }
        let too_far = lzf.read(&mut cursor, 59_999, &mut [0; 2]).unwrap_err();
        assert!(too_far.contains("asked of a stream of 60000"), "{too_far}");

        for (packed_len, inflated, needle) in [
            (
                packed.len(),
                data.len() + 1,
                "inflates to 60000 bytes, not the 60001",
            ),
            (packed.len(), data.len() - 1, "not LZF"),
            (packed.len() - 1, data.len(), "not LZF"),
            (packed.len() + 5, data.len(), "not LZF"),
        ] {
            let problem = open(packed_len, inflated).err().unwrap();
            assert!(
                problem.contains(needle),
                "{packed_len} {inflated}: {problem}"
            );
        }
        // An empty stream reads as empty.
        let empty = LzfFile::open(&path, 0, 0, 0).unwrap();
        empty.read(&mut None, 0, &mut []).unwrap();

        // A reference before the output's start.
        std::fs::write(&path, [&[31u8][..], &[0; 32], &[0x20, 0x40]].concat()).unwrap();
        let problem = LzfFile::open(&path, 0, 35, 40).err().unwrap();
        assert!(problem.contains("not LZF"), "{problem}");
    }
}
