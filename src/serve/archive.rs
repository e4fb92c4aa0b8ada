//! `.npz`-style request bodies (a zip whose index is at its end): members and their rows.

use super::*;

/// An `.npz`-style archive body (its index is at its end: the body is needed whole), and its
/// share of `--max-inflight-mb`, to be held until the request is answered.
pub(super) async fn archive_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
    holds: &str,
) -> ApiResult<(zip::ZipArchive<std::io::Cursor<Vec<u8>>>, Reservation)> {
    let (body, held) = state.body(headers, body)?.whole().await?;
    let archive = zip::ZipArchive::new(std::io::Cursor::new(body)).map_err(|e| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("the body must be an .npz (numpy.savez, uncompressed) with {holds}: {e}"),
        )
    })?;
    Ok((archive, held))
}

/// The bytes of `member` of `archive`; 400 naming it when it is missing.
pub(super) fn archive_member(
    archive: &mut zip::ZipArchive<std::io::Cursor<Vec<u8>>>,
    member: &str,
    holds: &str,
) -> ApiResult<Vec<u8>> {
    let mut entry = archive.by_name(member).map_err(|_| {
        ApiError::bad(format!(
            "body: the .npz has no `{member}` (it needs {holds})"
        ))
    })?;
    // A compressed member could inflate far past the body's bytes (and the request limits).
    if entry.compression() != zip::CompressionMethod::Stored {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "body: `{member}` is compressed ({}): send an uncompressed .npz \
                 (numpy.savez, not numpy.savez_compressed)",
                entry.compression()
            ),
        ));
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut entry, &mut bytes)
        .map_err(|e| ApiError::bad(format!("body: `{member}`: {e}")))?;
    Ok(bytes)
}

/// The rows of array `name` of an archive, shape (N, *tail).
pub(super) fn archive_rows(
    archive: &mut zip::ZipArchive<std::io::Cursor<Vec<u8>>>,
    name: &str,
    tail: &[usize],
    holds: &str,
) -> ApiResult<RowValues> {
    let bytes = archive_member(archive, &format!("{name}.npy"), holds)?;
    body::npy_rows_in_memory(&bytes, tail)
        .map_err(|e| ApiError::new(e.status, format!("array `{name}`: {}", e.message)))
}
