//! Request bodies read as they arrive, within `--max-request-mb`: a declared length over the
//! limit is refused before any of the body is read, a chunked body as soon as it passes the
//! limit. `.npy` bodies are converted to rows chunk by chunk (the raw body is never held
//! whole); formats that need all their bytes (scene JSON, `.npz`, whose index is at the end)
//! are gathered first. The bytes of every body being read count against `--max-inflight-mb`
//! (all requests together) until the request is answered: past it, 503. Answers count too,
//! until the client has taken them ([`AnswerBody`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use futures_util::StreamExt;

use super::error::{ApiError, ApiResult};
use crate::io::npy::{self, Dtype, read_header};

/// The bytes of request bodies held at once, all requests together.
pub(crate) struct Inflight {
    held: AtomicUsize,
    limit: usize,
}

impl Inflight {
    pub fn new(limit: usize) -> Inflight {
        Inflight {
            held: AtomicUsize::new(0),
            limit,
        }
    }
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// 503 when `bytes` more than `held` would pass the limit.
    fn room_for(&self, held: usize, bytes: usize) -> ApiResult<()> {
        if held.saturating_add(bytes) > self.limit {
            return Err(ApiError::unavailable(format!(
                "the server holds {held} bytes of request bodies and answers, and {bytes} \
                 more would take it past --max-inflight-mb ({} bytes): retry later",
                self.limit
            )));
        }
        Ok(())
    }

    /// Hold `bytes` of an answer until the reservation drops; 503 when that takes the total
    /// past the limit, 400 when the answer alone is over it (a retry could never pass).
    pub fn hold(self: &Arc<Self>, bytes: usize) -> ApiResult<Reservation> {
        let mut reservation = Reservation::new(self);
        reservation.hold_answer(bytes)?;
        Ok(reservation)
    }

    /// 400 for an answer of `bytes` that the limit could never hold beside the `body` bytes
    /// of its request.
    fn check_answer(&self, body: usize, bytes: usize) -> ApiResult<()> {
        if body.saturating_add(bytes) > self.limit {
            let body = match body {
                0 => String::new(),
                n => format!(" beside the request's {n}"),
            };
            return Err(ApiError::bad(format!(
                "the answer takes {bytes} bytes{body}, more than --max-inflight-mb allows the \
                 server to hold at once ({} bytes): ask fewer rows or fields",
                self.limit
            )));
        }
        Ok(())
    }
}

/// One request's share of [`Inflight`], given back when dropped (with the request's answer).
pub(crate) struct Reservation {
    inflight: Arc<Inflight>,
    bytes: usize,
}

impl Reservation {
    pub fn new(inflight: &Arc<Inflight>) -> Reservation {
        Reservation {
            inflight: inflight.clone(),
            bytes: 0,
        }
    }

    /// Bytes held (at least those read).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Hold `bytes` more; 503 when that takes the total past the limit.
    fn grow(&mut self, bytes: usize) -> ApiResult<()> {
        let before = self.inflight.held.fetch_add(bytes, Ordering::Relaxed);
        self.bytes += bytes;
        self.inflight.room_for(before, bytes)
    }

    /// Hold an answer's `bytes` too, before its work starts: 400 when the limit could never
    /// hold them beside what is held already (the request's body), 503 when it cannot now.
    pub fn hold_answer(&mut self, bytes: usize) -> ApiResult<()> {
        self.inflight.check_answer(self.bytes, bytes)?;
        self.grow(bytes)
    }

    /// Hold exactly `bytes` from now on (the answer made, its inputs and parts gone), without
    /// a check: the work it was held for is done.
    pub fn settle(&mut self, bytes: usize) {
        if bytes >= self.bytes {
            self.inflight
                .held
                .fetch_add(bytes - self.bytes, Ordering::Relaxed);
        } else {
            self.inflight
                .held
                .fetch_sub(self.bytes - bytes, Ordering::Relaxed);
        }
        self.bytes = bytes;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.inflight.held.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// An answer's bytes as a response body, held against `--max-inflight-mb` until the client
/// has taken them all or gone: otherwise clients that ask and never read could make the server
/// hold answers without bound. Handed to the connection a piece at a time, so the connection
/// never copies more than a piece of it into its own buffer while the reservation is held.
pub(crate) struct AnswerBody {
    bytes: Bytes,
    at: usize,
    _held: Reservation,
}

/// The most of an answer handed to the connection at once.
const ANSWER_PIECE_BYTES: usize = 256 * 1024;

impl AnswerBody {
    pub fn new(bytes: Vec<u8>, held: Reservation) -> AnswerBody {
        AnswerBody {
            bytes: Bytes::from(bytes),
            at: 0,
            _held: held,
        }
    }
}

impl hyper::body::Body for AnswerBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        let (at, len) = (self.at, self.bytes.len());
        if at >= len {
            return std::task::Poll::Ready(None);
        }
        let end = len.min(at + ANSWER_PIECE_BYTES);
        self.at = end;
        let piece = self.bytes.slice(at..end);
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact((self.bytes.len() - self.at) as u64)
    }
}

/// A body being read, with the bytes seen so far counted against the limits.
pub(crate) struct BodyReader {
    stream: axum::body::BodyDataStream,
    limit: usize,
    read: usize,
    reservation: Reservation,
    stall: Duration,
}

impl BodyReader {
    /// 413 at once when the declared `Content-Length` is over `limit`; 503 at once when it
    /// would take the bodies held past `--max-inflight-mb` now. The bytes are held as they
    /// arrive, not as declared: a client that declared a large body and stalled held its
    /// whole length, and one such connection refused every other body for
    /// `--request-timeout-s`. A body that sends nothing for `stall` is refused (408).
    pub(crate) fn new(
        headers: &HeaderMap,
        body: Body,
        limit: usize,
        inflight: &Arc<Inflight>,
        stall: Duration,
    ) -> ApiResult<BodyReader> {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(too_large(limit));
        }
        inflight.room_for(inflight.held(), declared.unwrap_or(0) as usize)?;
        Ok(BodyReader {
            stream: body.into_data_stream(),
            limit,
            read: 0,
            reservation: Reservation::new(inflight),
            stall,
        })
    }

    /// The next piece of the body, `None` at its end.
    pub(crate) async fn chunk(&mut self) -> ApiResult<Option<Bytes>> {
        let Ok(next) = tokio::time::timeout(self.stall, self.stream.next()).await else {
            return Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the body sent nothing for {} s (--idle-timeout-s)",
                    self.stall.as_secs_f64()
                ),
            ));
        };
        match next {
            None => Ok(None),
            Some(Err(e)) => Err(ApiError::bad(format!("the body could not be read: {e}"))),
            Some(Ok(bytes)) => {
                self.read = self.read.saturating_add(bytes.len());
                if self.read > self.limit {
                    return Err(too_large(self.limit));
                }
                // Beyond what was declared (a chunked body has declared nothing).
                if self.read > self.reservation.bytes {
                    self.reservation.grow(self.read - self.reservation.bytes)?;
                }
                Ok(Some(bytes))
            }
        }
    }

    /// The whole body, for formats that need all of it, and its share of the bodies held.
    pub(crate) async fn whole(mut self) -> ApiResult<(Vec<u8>, Reservation)> {
        let mut all = Vec::new();
        while let Some(bytes) = self.chunk().await? {
            all.extend_from_slice(&bytes);
        }
        Ok((all, self.reservation))
    }

    /// The rows of an `.npy` body of shape (N, *tail), float32 or float64 as sent, read as the
    /// body arrives: 415 when it is not an `.npy`, 400 when its shape, dtype or length is
    /// wrong.
    pub(crate) async fn npy_rows(mut self, tail: &[usize]) -> ApiResult<(RowValues, Reservation)> {
        let mut stream = NpyStream::new(tail, self.limit);
        while let Some(bytes) = self.chunk().await? {
            stream.feed(&bytes)?;
        }
        Ok((stream.finish()?, self.reservation))
    }
}

/// An `.npy` read piece by piece as it arrives: its header gathered first (within the limit
/// the pieces are counted against), then its values converted as they come.
pub(crate) struct NpyStream<'a> {
    tail: &'a [usize],
    limit: usize,
    pending: Vec<u8>,
    rows: Option<NpyRows>,
}

impl<'a> NpyStream<'a> {
    pub fn new(tail: &'a [usize], limit: usize) -> NpyStream<'a> {
        NpyStream {
            tail,
            limit,
            pending: Vec::new(),
            rows: None,
        }
    }

    pub fn feed(&mut self, bytes: &[u8]) -> ApiResult<()> {
        if let Some(rows) = &mut self.rows {
            rows.feed(bytes);
            return Ok(());
        }
        self.pending.extend_from_slice(bytes);
        if let Some(end) = npy_header_end(&self.pending).filter(|&end| self.pending.len() >= end) {
            let mut rows = NpyRows::start(&self.pending[..end], self.tail, self.limit)?;
            rows.feed(&self.pending[end..]);
            self.pending = Vec::new();
            self.rows = Some(rows);
        }
        Ok(())
    }

    /// The values, 400 when their count is not what the header says.
    pub fn finish(self) -> ApiResult<RowValues> {
        match self.rows {
            Some(rows) => rows.finish(),
            // Too short for a header: `read_header` names the problem.
            None => NpyRows::start(&self.pending, self.tail, self.limit)?.finish(),
        }
    }
}

/// The rows of an `.npy` held in memory (an array of an `.npz`), as [`BodyReader::npy_rows`].
pub(crate) fn npy_rows_in_memory(bytes: &[u8], tail: &[usize]) -> ApiResult<RowValues> {
    let end = npy_header_end(bytes)
        .unwrap_or(bytes.len())
        .min(bytes.len());
    // An array can hold no more than the bytes there are: past them it is malformed (400).
    let mut rows = NpyRows::start(&bytes[..end], tail, bytes.len()).map_err(|mut e| {
        if e.status == StatusCode::PAYLOAD_TOO_LARGE {
            e.status = StatusCode::BAD_REQUEST;
            e.message = format!(
                "body: its header declares more data than the {} bytes it holds",
                bytes.len()
            );
        }
        e
    })?;
    rows.feed(&bytes[end..]);
    rows.finish()
}

/// The service's body parsers as the `body` fuzz target (`fuzz/fuzz_targets/body.rs`) and its
/// stable replay (`tests/fuzz_corpus.rs`) drive them: the first byte picks the parser, the
/// rest is the body. An `.npy` stream is fed in pieces of a size the second byte picks (so
/// that values and the header are cut anywhere), an `.npz` archive's arrays as the segments
/// and paired routes read them, a scene as the PUT reads it. Any body may be refused; a
/// panic, a hang or an allocation out of proportion to it is a defect. Returns whether the
/// body was taken.
#[doc(hidden)]
pub fn fuzz_body(data: &[u8]) -> bool {
    const LIMIT: usize = 1 << 20;
    let Some((&parser, body)) = data.split_first() else {
        return false;
    };
    match parser % 3 {
        0 => {
            let Some((&piece, body)) = body.split_first() else {
                return false;
            };
            let mut stream = NpyStream::new(&[3], LIMIT);
            let fed = body
                .chunks(usize::from(piece) + 1)
                .try_for_each(|bytes| stream.feed(bytes));
            fed.and_then(|()| stream.finish()).is_ok()
        }
        1 => {
            let Ok(mut archive) = zip::ZipArchive::new(std::io::Cursor::new(body)) else {
                return false;
            };
            let mut taken = false;
            for (name, tail) in [
                ("a.npy", &[2, 3][..]),
                ("b.npy", &[2, 3]),
                ("points.npy", &[3]),
            ] {
                let Ok(mut entry) = archive.by_name(name) else {
                    continue;
                };
                let mut bytes = Vec::new();
                // Bounded by the body's own bytes, whatever the entry declares.
                let mut bounded = std::io::Read::take(&mut entry, LIMIT as u64);
                if std::io::Read::read_to_end(&mut bounded, &mut bytes).is_ok() {
                    taken |= npy_rows_in_memory(&bytes, tail).is_ok();
                }
            }
            taken
        }
        _ => {
            std::str::from_utf8(body).is_ok_and(|text| crate::io::parse_scene(text, "body").is_ok())
        }
    }
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the body is larger than --max-request-mb allows ({limit} bytes)"),
    )
}

/// Where the header of the `.npy` starting with `bytes` ends, once enough is there to tell.
fn npy_header_end(bytes: &[u8]) -> Option<usize> {
    let field = |at: usize, width: usize| -> Option<usize> {
        let b = bytes.get(at..at + width)?;
        Some(b.iter().rev().fold(0usize, |n, &x| (n << 8) | x as usize))
    };
    match *bytes.get(6)? {
        1 => Some(10 + field(8, 2)?),
        // Versions read_header refuses end at once.
        2 | 3 => Some(12 + field(8, 4)?.min(1 << 21)),
        _ => Some(bytes.len()),
    }
}

/// An `.npy` body's values as it sent them, float32 or float64: they go to the engine as they
/// are (`Points::F32`/`F64`), never converted on the way in.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RowValues {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl RowValues {
    pub fn len(&self) -> usize {
        match self {
            RowValues::F32(v) => v.len(),
            RowValues::F64(v) => v.len(),
        }
    }

    pub fn value(&self, i: usize) -> f64 {
        match self {
            RowValues::F32(v) => v[i] as f64,
            RowValues::F64(v) => v[i],
        }
    }

    /// Several requests' values, one after another: float32 if all are, else float64
    /// (float32 widens exactly).
    pub fn concat<'a>(parts: impl Iterator<Item = &'a RowValues> + Clone, len: usize) -> RowValues {
        if parts.clone().all(|p| matches!(p, RowValues::F32(_))) {
            let mut out = Vec::with_capacity(len);
            for part in parts {
                if let RowValues::F32(v) = part {
                    out.extend_from_slice(v);
                }
            }
            RowValues::F32(out)
        } else {
            let mut out = Vec::with_capacity(len);
            for part in parts {
                match part {
                    RowValues::F32(v) => out.extend(v.iter().map(|&x| x as f64)),
                    RowValues::F64(v) => out.extend_from_slice(v),
                }
            }
            RowValues::F64(out)
        }
    }
}

/// An `.npy` body's values as they arrive; a value split between two pieces waits in `carry`.
struct NpyRows {
    dtype: Dtype,
    big_endian: bool,
    /// The trailing dimensions of a Fortran-ordered array.
    fortran_dims: Option<Vec<usize>>,
    /// Values the header promises.
    expected: usize,
    values: RowValues,
    carry: Vec<u8>,
    /// Data bytes beyond the promised values.
    extra: usize,
}

impl NpyRows {
    fn start(header_bytes: &[u8], tail: &[usize], limit: usize) -> ApiResult<NpyRows> {
        let header = read_header(&mut &header_bytes[..]).map_err(|problem| {
            ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("body: {problem}; send an .npy array (numpy.save)"),
            )
        })?;
        let (dtype, big_endian) = match Dtype::from_any_order(&header.descr) {
            // Held rows are f32 or f64 as sent, counted by the body's bytes: widened half
            // floats would hold twice what --max-inflight-mb counted.
            Ok((Dtype::F16, _)) => Err(format!(
                "dtype `{}` is not taken by the service (send float32 or float64)",
                header.descr
            )),
            other => other,
        }
        .map_err(|p| ApiError::bad(format!("body: {p}")))?;
        if header.shape.len() != tail.len() + 1 || header.shape[1..] != *tail {
            let want: Vec<String> = tail.iter().map(|d| d.to_string()).collect();
            return Err(ApiError::bad(format!(
                "body: expected an array of shape (N, {}), got {:?}",
                want.join(", "),
                header.shape
            )));
        }
        // Every declared size in checked arithmetic: a header may declare anything.
        let expected = header
            .shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .filter(|n| n.checked_mul(dtype.size()).is_some())
            .ok_or_else(|| {
                ApiError::bad(format!(
                    "body: shape {:?} of {}-byte values declares more bytes than can exist",
                    header.shape,
                    dtype.size()
                ))
            })?;
        if expected * dtype.size() > limit {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "body: shape {:?} of {}-byte values is larger than --max-request-mb allows \
                     ({limit} bytes)",
                    header.shape,
                    dtype.size()
                ),
            ));
        }
        Ok(NpyRows {
            dtype,
            big_endian,
            // The values are held whole as they arrive: a Fortran-ordered array is put in C
            // order once they are all there.
            fortran_dims: header.fortran_order.then(|| tail.to_vec()),
            expected,
            // A header may claim more than the body holds: reserve no more than fits the limit.
            values: match dtype {
                // Half floats were refused above.
                Dtype::F16 | Dtype::F32 => {
                    RowValues::F32(Vec::with_capacity(expected.min(limit / 4)))
                }
                Dtype::F64 => RowValues::F64(Vec::with_capacity(expected.min(limit / 8))),
            },
            carry: Vec::new(),
            extra: 0,
        })
    }

    fn feed(&mut self, mut bytes: &[u8]) {
        let size = self.dtype.size();
        if !self.carry.is_empty() {
            let take = (size - self.carry.len()).min(bytes.len());
            self.carry.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.carry.len() < size {
                return;
            }
            let value = std::mem::take(&mut self.carry);
            self.push(&value);
        }
        let whole = bytes.len() / size * size;
        for value in bytes[..whole].chunks_exact(size) {
            self.push(value);
        }
        self.carry.extend_from_slice(&bytes[whole..]);
    }

    fn push(&mut self, value: &[u8]) {
        if self.values.len() == self.expected {
            self.extra += value.len();
            return;
        }
        match (&mut self.values, self.big_endian) {
            (RowValues::F32(v), false) => v.push(f32::from_le_bytes(value.try_into().unwrap())),
            (RowValues::F32(v), true) => v.push(f32::from_be_bytes(value.try_into().unwrap())),
            (RowValues::F64(v), false) => v.push(f64::from_le_bytes(value.try_into().unwrap())),
            (RowValues::F64(v), true) => v.push(f64::from_be_bytes(value.try_into().unwrap())),
        }
    }

    fn finish(self) -> ApiResult<RowValues> {
        let size = self.dtype.size();
        // `expected * size` was checked against the limit in `start`; every read byte was
        // counted against it too, so none of these sums overflows.
        let held = self.values.len() * size + self.extra + self.carry.len();
        if held != self.expected * size {
            return Err(ApiError::bad(format!(
                "body: the array holds {held} bytes of data, its header says {}",
                self.expected * size
            )));
        }
        Ok(match (self.values, &self.fortran_dims) {
            (RowValues::F32(v), Some(dims)) => RowValues::F32(npy::fortran_to_c(&v, dims)),
            (RowValues::F64(v), Some(dims)) => RowValues::F64(npy::fortran_to_c(&v, dims)),
            (values, None) => values,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(shape: &str, data: &[u8], descr: &str) -> Vec<u8> {
        let mut header =
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    /// Every split of the body into two pieces gives the rows of the whole.
    #[test]
    fn rows_do_not_depend_on_how_the_body_is_cut() {
        let values: Vec<f64> = (0..6).map(|i| i as f64 * 1.25 - 2.0).collect();
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let body = npy("(2, 3)", &data, "<f8");
        let end = npy_header_end(&body).unwrap();
        for cut in end..=body.len() {
            let mut rows = NpyRows::start(&body[..end], &[3], 1 << 20).unwrap();
            rows.feed(&body[end..cut]);
            rows.feed(&body[cut..]);
            assert_eq!(
                rows.finish().unwrap(),
                RowValues::F64(values.clone()),
                "cut at {cut}"
            );
        }
    }

    /// The header of the attack: 768614336404564651 × 3 values of 8 bytes, whose
    /// byte count wraps to 8 in u64; with 8 bytes of data it was taken as one value.
    #[test]
    fn a_declared_size_that_overflows_is_refused() {
        for (shape, descr) in [
            ("(768614336404564651, 3)", "<f8"),
            ("(1537228672809129302, 3)", "<f4"),
            ("(6148914691236517206, 3)", "<f8"),
            ("(18446744073709551615, 3)", "<f4"),
            ("(100000000, 3)", "<f4"),
        ] {
            let body = npy(shape, &[0u8; 8], descr);
            let end = npy_header_end(&body).unwrap();
            let error = match NpyRows::start(&body[..end], &[3], 1 << 20) {
                Err(e) => e,
                Ok(_) => panic!("{shape} {descr} was taken"),
            };
            // Past the byte count's range: malformed; within it but past the limit: too large.
            let (status, needle) = if shape.starts_with("(100000000") {
                (StatusCode::PAYLOAD_TOO_LARGE, "--max-request-mb")
            } else {
                (StatusCode::BAD_REQUEST, "more bytes than can exist")
            };
            assert_eq!(error.status, status, "{shape}");
            assert!(error.message.contains(needle), "{}", error.message);
            // In an archive's array too, never taken.
            assert!(npy_rows_in_memory(&body, &[3]).is_err(), "{shape}");
        }
    }

    /// A float32 body stays float32 (it goes to the device as sent); requests batched
    /// together stay float32 unless one is float64, which float32 widens to exactly.
    #[test]
    fn values_keep_the_dtype_they_were_sent_in() {
        let values = [1.5f32, -2.25, 1e-7, 3.0e38, f32::NAN, 0.1];
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let body = npy("(2, 3)", &data, "<f4");
        let rows = npy_rows_in_memory(&body, &[3]).unwrap();
        let RowValues::F32(read) = &rows else {
            panic!("a float32 body became {rows:?}")
        };
        assert_eq!(
            read.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        let wide = RowValues::F64(vec![0.5, 1.0 / 3.0, 2.0]);
        assert!(matches!(
            RowValues::concat([&rows, &rows].into_iter(), 12),
            RowValues::F32(v) if v.len() == 12
        ));
        let RowValues::F64(mixed) = RowValues::concat([&rows, &wide].into_iter(), 9) else {
            panic!("a mixed batch is float64")
        };
        for (k, &v) in values.iter().enumerate() {
            assert_eq!(mixed[k] as f32 == v, !v.is_nan(), "row value {k}");
        }
        assert_eq!(mixed[7], 1.0 / 3.0);
    }

    #[test]
    fn a_short_or_long_body_is_refused() {
        let data = [0u8; 4 * 6];
        for (shape, held) in [("(3, 3)", 24), ("(1, 3)", 24)] {
            let body = npy(shape, &data, "<f4");
            let end = npy_header_end(&body).unwrap();
            let mut rows = NpyRows::start(&body[..end], &[3], 1 << 20).unwrap();
            rows.feed(&body[end..]);
            let error = rows.finish().unwrap_err();
            assert!(
                error.message.contains(&format!("holds {held} bytes")),
                "{}",
                error.message
            );
        }
    }
}
