//! The routes (`api`) and their handlers: targets put and deleted, queries, contacts, SDF grids,
//! segment and paired jobs, health, metrics and the OpenAPI description.

use super::*;

/// The routes and their description, from the same annotated handlers.
pub(super) fn api() -> (Router<Arc<AppState>>, utoipa::openapi::OpenApi) {
    use utoipa::OpenApi;
    use utoipa_axum::{router::OpenApiRouter, routes};
    OpenApiRouter::with_openapi(api::ApiDoc::openapi())
        .routes(routes!(health))
        .routes(routes!(health_live))
        .routes(routes!(health_ready))
        .routes(routes!(metrics_text))
        .routes(routes!(openapi_json))
        .routes(routes!(list_targets))
        .routes(routes!(put_scene, delete_scene))
        .routes(routes!(put_mesh, delete_mesh))
        .routes(routes!(scene_query))
        .routes(routes!(scene_contacts))
        .routes(routes!(scene_bodies))
        .routes(routes!(mesh_query))
        .routes(routes!(mesh_bodies))
        .routes(routes!(mesh_sdf))
        .routes(routes!(segments))
        .routes(routes!(paired))
        .split_for_parts()
}

/// `/v1/health/ready`'s answer: 200 when the device works, the preloaded targets are
/// resident and the server is not draining; else 503 saying which.
pub(super) fn readiness_response(state: &AppState) -> Response {
    let status = match (state.draining.load(Ordering::SeqCst), state.readiness()) {
        (true, _) => "draining",
        (false, Readiness::Ready) => "ok",
        (false, Readiness::Loading) => "loading targets",
        (false, Readiness::Reopening) => "reopening the device",
        (false, Readiness::DeviceFailed) => "device lost",
    };
    let health = api::Health {
        status: status.into(),
        adapter: state.engine().describe(),
    };
    let code = if status == "ok" {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json(code, &health)
}

#[utoipa::path(get, path = "/v1/health", tag = "service",
    responses((status = 200, description = "Ready (as /v1/health/ready)", body = api::Health),
        (status = 503, description = "Not ready: loading targets, reopening the device, \
            device lost, or draining", body = api::Health)))]
pub(super) async fn health(State(state): State<Arc<AppState>>) -> Response {
    readiness_response(&state)
}

#[utoipa::path(get, path = "/v1/health/ready", tag = "service",
    responses((status = 200, description = "The device works, the preloaded targets are \
            resident, not draining", body = api::Health),
        (status = 503, description = "Not ready: loading targets, reopening the device, \
            device lost, or draining", body = api::Health)))]
pub(super) async fn health_ready(State(state): State<Arc<AppState>>) -> Response {
    readiness_response(&state)
}

#[utoipa::path(get, path = "/v1/health/live", tag = "service",
    responses((status = 200, description = "The process answers", body = api::Health)))]
pub(super) async fn health_live(State(state): State<Arc<AppState>>) -> Response {
    let health = api::Health {
        status: "ok".into(),
        adapter: state.engine().describe(),
    };
    json(StatusCode::OK, &health)
}

#[utoipa::path(get, path = "/metrics", tag = "service",
    responses(
        (status = 200, description = "Prometheus text: requests by route and status, rows, \
            batch sizes, queue depth, latency", body = String, content_type = "text/plain"),
        api::ReadErrors))]
pub(super) async fn metrics_text(State(state): State<Arc<AppState>>) -> Response {
    let resident: u64 = read(&state.targets)
        .values()
        .map(|r| r.resident_bytes())
        .sum();
    let targets = read(&state.targets).len() as u64;
    let connections = &state.connections;
    let gauges = [
        ("closest_resident_bytes", resident),
        ("closest_resident_targets", targets),
        ("closest_inflight_body_bytes", state.inflight.held() as u64),
        (
            "closest_open_connections",
            connections.open.load(Ordering::Relaxed) as u64,
        ),
        (
            "closest_refused_connections_total",
            connections.refused.load(Ordering::Relaxed),
        ),
        (
            "closest_busy_workers",
            (state.config.workers - state.shared.pool.available_permits()) as u64,
        ),
    ];
    let waiting = state.shared.waiting.load(Ordering::Relaxed);
    let text = state.metrics.render(waiting, &gauges);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

#[utoipa::path(get, path = "/openapi.json", tag = "service",
    responses(
        (status = 200, description = "This description (OpenAPI 3)", body = Object),
        api::ReadErrors))]
pub(super) async fn openapi_json(State(state): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        state.openapi.clone(),
    )
        .into_response()
}

pub(super) fn json(status: StatusCode, value: &impl serde::Serialize) -> Response {
    let text = serde_json::to_string(value).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], text).into_response()
}

#[utoipa::path(get, path = "/v1/targets", tag = "targets",
    responses(
        (status = 200, description = "The resident targets by name", body = Vec<api::TargetInfo>),
        api::ReadErrors))]
pub(super) async fn list_targets(State(state): State<Arc<AppState>>) -> Response {
    let targets = read(&state.targets);
    let mut list: Vec<api::TargetInfo> = targets
        .iter()
        .map(|((kind, name), r)| api::TargetInfo {
            name: name.clone(),
            kind: kind.name().into(),
            shapes: (*kind == Kind::Scene).then_some(r.size),
            triangles: (*kind == Kind::Mesh).then_some(r.size),
            device_bytes: r.resident_bytes(),
        })
        .collect();
    list.sort_by(|a, b| (&a.name, &a.kind).cmp(&(&b.name, &b.kind)));
    json(StatusCode::OK, &list)
}

/// A response with what the access log should say of it.
pub(super) fn logged(mut response: Response, access: Access) -> Response {
    response.extensions_mut().insert(access);
    response
}

/// An answer's columns as the `.npz` the CLI writes, logged with its target and times.
pub(super) async fn answer_response(
    answer: Answer,
    held: Reservation,
    target: &str,
    rows: usize,
    bytes_in: usize,
) -> ApiResult<Response> {
    let (queue_wait, device) = (answer.queue_wait, answer.device);
    Ok(logged(
        npz_response(answer.columns, held).await?,
        Access {
            target: Some(target.to_string()),
            rows: Some(rows),
            bytes_in: Some(bytes_in as u64),
            queue_wait: Some(queue_wait),
            device: Some(device),
        },
    ))
}

/// A target's name: 1 to 128 letters, digits, '-', '_' or '.', but not `.` or `..`, which URL
/// clients (curl, browsers, RFC 3986) resolve as path segments, so that no request could
/// reach the target again.
pub(super) fn check_name(name: &str) -> ApiResult<()> {
    if matches!(name, "." | "..") {
        return Err(ApiError::bad(format!(
            "target name `{name}`: a name of dots alone is a path segment to URL clients"
        )));
    }
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad(format!(
            "target name `{name}`: use 1 to 128 letters, digits, '-', '_' or '.'"
        )))
    }
}

#[utoipa::path(put, path = "/v1/scenes/{name}", tag = "targets",
    params(("name" = String, Path, description = "1 to 128 letters, digits, '-', '_' or '.'",
        example = "demo")),
    request_body(content = api::SceneBody, description = "A scene file (SPEC §1)"),
    responses(
        (status = 201, description = "Resident", body = api::SceneInstalled),
        (status = 200, description = "Resident, in place of the scene of that name",
            body = api::SceneInstalled),
        api::PutErrors))]
pub(super) async fn put_scene(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    check_name(&name)?;
    let (shapes, _held) = scene_body(&state, &headers, body).await?;
    let engine = state.engine();
    state
        .install((Kind::Scene, name), move |admit| {
            upload_scene(&engine, shapes, admit)
        })
        .await
}

#[utoipa::path(put, path = "/v1/meshes/{name}", tag = "targets",
    params(("name" = String, Path, description = "1 to 128 letters, digits, '-', '_' or '.'",
        example = "demo"), api::MeshFormat),
    request_body(content = api::Binary, content_type = "application/octet-stream",
        description = "The mesh file's bytes"),
    responses(
        (status = 201, description = "Resident", body = api::MeshInstalled),
        (status = 200, description = "Resident, in place of the mesh of that name",
            body = api::MeshInstalled),
        api::PutErrors))]
pub(super) async fn put_mesh(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<api::MeshFormat>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    check_name(&name)?;
    let format = params.format.unwrap_or_default().to_ascii_lowercase();
    if !matches!(
        format.as_str(),
        "obj" | "stl" | "ply" | "off" | "glb" | "gltf"
    ) {
        return Err(ApiError::bad(format!(
            "format: `{format}`: give ?format=obj, stl, ply, off, glb or gltf"
        )));
    }
    let file = body_to_file(&state.private, state.body(&headers, body)?, &format).await?;
    let engine = state.engine();
    state
        .install((Kind::Mesh, name), move |admit| {
            upload_mesh(&engine, mesh_from_file(file)?, admit)
        })
        .await
}

/// A mesh body written to a private file as it arrives (the mesh readers take files);
/// removed when the handle drops, whatever happens to the request.
pub(super) async fn body_to_file(
    private: &PrivateDir,
    mut body: BodyReader,
    format: &str,
) -> ApiResult<PrivateFile> {
    use tokio::io::AsyncWriteExt;
    let (file, mut out) = private.create(format).await?;
    let cannot_write =
        |e: std::io::Error| ApiError::internal(format!("cannot store the body: {e}"));
    while let Some(bytes) = body.chunk().await? {
        out.write_all(&bytes).await.map_err(cannot_write)?;
    }
    out.flush().await.map_err(cannot_write)?;
    Ok(file)
}

/// The mesh in `file`, its errors naming it `body`.
pub(super) fn mesh_from_file(file: PrivateFile) -> crate::Result<crate::mesh::Mesh> {
    let mesh = crate::io::load_uploaded_mesh(file.path());
    let shown = file.path().display().to_string();
    mesh.map_err(|e| match e {
        Error::BadFile { problem, .. } => Error::BadFile {
            file: "body".into(),
            problem: problem.replace(&shown, "body"),
        },
        other => Error::Usage(other.to_string().replace(&shown, "body")),
    })
}

#[utoipa::path(delete, path = "/v1/scenes/{name}", tag = "targets",
    params(("name" = String, Path, example = "demo")),
    responses((status = 204, description = "Gone; queries running on it finish on it"),
        api::DeleteErrors))]
pub(super) async fn delete_scene(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    state.remove(Kind::Scene, &name)
}

#[utoipa::path(delete, path = "/v1/meshes/{name}", tag = "targets",
    params(("name" = String, Path, example = "demo")),
    responses((status = 204, description = "Gone; queries running on it finish on it"),
        api::DeleteErrors))]
pub(super) async fn delete_mesh(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    state.remove(Kind::Mesh, &name)
}

pub(super) fn parse_fields(family: Family, fields: Option<&str>) -> ApiResult<Fields> {
    match fields {
        None => Ok(Fields::all(family)),
        Some(list) => Ok(Fields::parse(family, list)?),
    }
}

pub(super) fn parse_mode(mode: Option<&str>) -> ApiResult<Mode> {
    Ok(mode.map_or(Ok(Mode::Solid), Mode::parse)?)
}

#[utoipa::path(post, path = "/v1/scenes/{name}/query", tag = "queries",
    params(("name" = String, Path, example = "demo"), api::SceneQueryParams),
    request_body(content = api::Binary, content_type = "application/octet-stream",
        description = ".npy (N, 3) float32 or float64 query points"),
    responses(
        (status = 200, description = ".npz as `closest query --out X.npz`",
            body = api::Binary, content_type = "application/octet-stream"),
        api::TargetQueryErrors))]
pub(super) async fn scene_query(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<api::SceneQueryParams>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let mode = parse_mode(params.mode.as_deref())?;
    let fields = parse_fields(Family::Hits, params.fields.as_deref())?;
    let op = Op::SceneQuery(mode);
    query_target(&state, (Kind::Scene, name), &headers, body, op, fields).await
}

/// A query of a resident target: its `.npy` rows read, checked and batched; its `.npz`.
pub(super) async fn query_target(
    state: &Arc<AppState>,
    (kind, name): (Kind, String),
    headers: &HeaderMap,
    body: Body,
    op: Op,
    fields: Fields,
) -> ApiResult<Response> {
    let resident = state.resident(kind, &name)?;
    let (rows, mut held) = state.body(headers, body)?.npy_rows(&[op.width()]).await?;
    if op == Op::Contacts {
        for row in 0..rows.len() / 4 {
            crate::contacts::check_radius(row, rows.value(4 * row + 3), "body")?;
        }
    }
    if kind == Kind::Scene {
        resident.check_answerable(rows.len())?;
    }
    let count = rows.len() / op.width();
    let bytes_in = held.bytes();
    held.hold_answer(answer_bytes(fields, count))?;
    let fault = state.fault(headers);
    let answer = state.submit(&resident, op, fields, rows, fault).await?;
    answer_response(answer, held, &name, count, bytes_in).await
}

#[utoipa::path(post, path = "/v1/scenes/{name}/contacts", tag = "queries",
    params(("name" = String, Path, example = "demo"), api::FieldsParams),
    request_body(content = api::Binary, content_type = "application/octet-stream",
        description = ".npy (N, 4) spheres as cx, cy, cz, r"),
    responses(
        (status = 200, description = ".npz as `closest contacts --out X.npz`",
            body = api::Binary, content_type = "application/octet-stream"),
        api::TargetQueryErrors))]
pub(super) async fn scene_contacts(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<api::FieldsParams>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let fields = parse_fields(Family::Contacts, params.fields.as_deref())?;
    query_target(
        &state,
        (Kind::Scene, name),
        &headers,
        body,
        Op::Contacts,
        fields,
    )
    .await
}

#[utoipa::path(post, path = "/v1/scenes/{name}/bodies", tag = "queries",
    params(("name" = String, Path, example = "demo"), api::FieldsParams),
    request_body(content = api::SceneBody,
        description = "A scene file (SPEC §1) of convex bodies: each body's nearest shape"),
    responses(
        (status = 200, description = ".npz as `closest contacts --bodies B --out X.npz`",
            body = api::Binary, content_type = "application/octet-stream"),
        api::TargetQueryErrors))]
pub(super) async fn scene_bodies(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<api::FieldsParams>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    body_contacts(&state, (Kind::Scene, name), &headers, body, params).await
}

#[utoipa::path(post, path = "/v1/meshes/{name}/bodies", tag = "queries",
    params(("name" = String, Path, example = "demo"), api::FieldsParams),
    request_body(content = api::SceneBody,
        description = "A scene file (SPEC §1) of convex bodies: each body's nearest triangle"),
    responses(
        (status = 200, description = ".npz as `closest contacts --mesh M --bodies B --out X.npz`",
            body = api::Binary, content_type = "application/octet-stream"),
        api::TargetQueryErrors))]
pub(super) async fn mesh_bodies(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<api::FieldsParams>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    body_contacts(&state, (Kind::Mesh, name), &headers, body, params).await
}

/// A request body holding a scene file (SPEC §1), parsed; 415 where it is not UTF-8.
async fn scene_body(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult<(Vec<crate::shape::Shape>, super::body::Reservation)> {
    let (body, held) = state.body(headers, body)?.whole().await?;
    let shapes = off_the_runtime(move || {
        let text = String::from_utf8(body).map_err(|_| {
            ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "the body must be scene JSON (UTF-8)",
            )
        })?;
        Ok(crate::io::parse_scene(&text, "body")?)
    })
    .await?;
    Ok((shapes, held))
}

/// Bodies (a scene JSON body) against a resident target: checked whole before anything runs,
/// answered on the worker pool (they are few and large next to point rows: no batching).
async fn body_contacts(
    state: &Arc<AppState>,
    (kind, name): (Kind, String),
    headers: &HeaderMap,
    body: Body,
    params: api::FieldsParams,
) -> ApiResult<Response> {
    let fields = parse_fields(Family::Bodies, params.fields.as_deref())?;
    let resident = state.resident(kind, &name)?;
    let (bodies, mut held) = scene_body(state, headers, body).await?;
    crate::engine::check_bodies(&bodies, "body")?;
    if let Source::Scene(shapes) = &resident.source {
        if let Some((torus, body)) = crate::engine::torus_conflict(&bodies, shapes, false) {
            let problem = crate::engine::torus_refusal(torus, body, bodies[body].kind());
            return Err(ApiError::bad(format!("target `{name}`: {problem}")));
        }
        resident.check_answerable(bodies.len())?;
    }
    let engine = state.engine();
    let rows = bodies.len();
    let bytes_in = held.bytes();
    held.hold_answer(answer_bytes(fields, rows))?;
    let admitting = state.clone();
    let target_name = name.clone();
    let panics = state.fault(headers) == Some(Fault::Panic);
    let columns = blocking(move || {
        let targets = resident.body_targets(&engine, |bytes| {
            admitting.admit_body_targets(&resident, &target_name, bytes)
        })?;
        let job = crate::engine::BodyContacts {
            targets,
            bodies: &bodies,
            fields,
        };
        Columns::collect(fields, bodies.len(), |sink| {
            if panics {
                panic!("test hook: a panic in the engine call");
            }
            engine.body_contacts(job, sink)
        })
    })
    .await?;
    Ok(logged(
        npz_response(columns, held).await?,
        Access {
            target: Some(name),
            rows: Some(rows),
            bytes_in: Some(bytes_in as u64),
            ..Access::default()
        },
    ))
}

pub(super) fn parse_sign(sign: Option<&str>, default: SignChoice) -> ApiResult<SignChoice> {
    Ok(sign.map_or(Ok(default), SignChoice::parse)?)
}

#[utoipa::path(post, path = "/v1/meshes/{name}/query", tag = "queries",
    params(("name" = String, Path, example = "demo"), api::MeshQueryParams),
    request_body(content = api::Binary, content_type = "application/octet-stream",
        description = ".npy (N, 3) float32 or float64 query points"),
    responses(
        (status = 200, description = ".npz as `closest query --mesh M --out X.npz`",
            body = api::Binary, content_type = "application/octet-stream"),
        api::TargetQueryErrors))]
pub(super) async fn mesh_query(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<api::MeshQueryParams>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let sign = parse_sign(params.sign.as_deref(), SignChoice::Method(Sign::None))?;
    let fields = parse_fields(Family::Hits, params.fields.as_deref())?;
    let op = Op::MeshQuery(sign);
    query_target(&state, (Kind::Mesh, name), &headers, body, op, fields).await
}

pub(super) fn numbers(option: &str, text: &str) -> ApiResult<Vec<f64>> {
    text.split(',')
        .map(|t| t.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            ApiError::bad(format!(
                "{option}: expected comma-separated numbers, got `{text}`"
            ))
        })
}

#[utoipa::path(post, path = "/v1/meshes/{name}/sdf", tag = "queries",
    params(("name" = String, Path, example = "demo"), api::SdfParams),
    responses(
        (status = 200, description = ".npz as `closest sdf --out X.npz`: sdf (NX, NY, NZ), \
            origin, spacing", body = api::Binary, content_type = "application/octet-stream"),
        api::SdfErrors))]
pub(super) async fn mesh_sdf(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(params): Query<api::SdfParams>,
) -> ApiResult<Response> {
    let resident = state.resident(Kind::Mesh, &name)?;
    let text = params
        .res
        .as_deref()
        .ok_or_else(|| ApiError::bad("res: give the samples an axis, N or NX,NY,NZ"))?;
    let res =
        crate::sdf::parse_res(text).map_err(|problem| ApiError::bad(format!("res {problem}")))?;
    let samples = res.iter().map(|&n| n as u128).product::<u128>();
    let max_samples = state.config.max_grid_samples;
    if samples > max_samples as u128 {
        return Err(ApiError::bad(format!(
            "res: {res:?} asks for {samples} samples, more than --max-grid-samples \
             ({max_samples})"
        )));
    }
    let region = match (&params.bounds, params.pad) {
        (Some(_), Some(_)) => return Err(ApiError::bad("give pad or bounds, not both")),
        (Some(text), None) => {
            let b = numbers("bounds", text)?;
            let b: [f64; 6] = b
                .try_into()
                .map_err(|_| ApiError::bad("bounds: give x0,y0,z0,x1,y1,z1"))?;
            GridRegion::Bounds(b)
        }
        (None, pad) => GridRegion::Pad(pad.unwrap_or(0.1)),
    };
    let sign = parse_sign(params.sign.as_deref(), SignChoice::Auto)?;
    // The answer is held against --max-inflight-mb before any sample is computed: a grid
    // that could not be held is 503 (or 400) now, not after its work, and clients asking
    // at once cannot make the server hold more than the limit.
    let held = state.inflight.hold(
        (samples as usize)
            .saturating_mul(4)
            .saturating_add(NPZ_HEADROOM_BYTES),
    )?;
    let engine = state.engine();
    let target = resident.target.clone();
    // The answer's .npz is made there too, chunk by chunk as the samples arrive; the
    // reservation goes with it, so a client gone mid-grid frees it only with the grid.
    let (bytes, held) = blocking(move || {
        let Target::Mesh(mesh) = target.as_ref() else {
            return Err(Error::Usage("sdf grids are made of meshes".into()));
        };
        let grid = Grid::new(mesh.mesh(), res, region)?;
        let column = [ColumnSpec {
            shape: Some(grid.res.to_vec()),
            ..ColumnSpec::scalar("sdf")
        }];
        let mut npz = NpzInMemory::new(grid.len(), &column, &grid.constants());
        let job = crate::engine::SdfGrid {
            mesh,
            grid: &grid,
            sign: engine.resolve_sign(mesh, sign)?,
        };
        engine.sdf(job, &mut |_first, chunk: &[f32]| {
            npz.append(chunk.len(), &[Values::f32_column(chunk, 1)]);
            Ok(())
        })?;
        Ok((npz.finish(), held))
    })
    .await?;
    Ok(held_npz_response(bytes, held))
}

/// What an `.npz` of one grid column takes beyond its samples' bytes: its arrays' headers,
/// the grid's `origin` and `spacing`, and the ZIP directory (well under a kilobyte).
const NPZ_HEADROOM_BYTES: usize = 4096;

#[utoipa::path(post, path = "/v1/segments", tag = "queries",
    params(api::FieldsParams),
    request_body(content = api::Binary, content_type = "application/octet-stream",
        description = ".npz (numpy.savez, uncompressed) with arrays a and b, each (N, 2, 3)"),
    responses(
        (status = 200, description = ".npz as `closest segments --out X.npz`",
            body = api::Binary, content_type = "application/octet-stream"),
        api::BodyQueryErrors))]
pub(super) async fn segments(
    State(state): State<Arc<AppState>>,
    Query(params): Query<api::FieldsParams>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let fields = parse_fields(Family::Segments, params.fields.as_deref())?;
    let holds = "arrays a and b";
    let (mut archive, mut held) = archive_body(&state, &headers, body, holds).await?;
    let (a, b) = off_the_runtime(move || {
        let a = f64_values(archive_rows(&mut archive, "a", &[2, 3], holds)?);
        let b = f64_values(archive_rows(&mut archive, "b", &[2, 3], holds)?);
        Ok((a, b))
    })
    .await?;
    if a.len() != b.len() {
        return Err(ApiError::bad(format!(
            "a has {} segments but b has {}: segment i of a pairs with segment i of b",
            a.len() / 6,
            b.len() / 6
        )));
    }
    let segment = |r: &[f64]| {
        [
            crate::DVec3::new(r[0], r[1], r[2]),
            crate::DVec3::new(r[3], r[4], r[5]),
        ]
    };
    let a: Vec<_> = a.chunks_exact(6).map(segment).collect();
    let b: Vec<_> = b.chunks_exact(6).map(segment).collect();
    held.hold_answer(answer_bytes(fields, a.len()))?;
    let engine = state.engine();
    let columns = blocking(move || {
        let job = crate::engine::SegmentPairs {
            pairs: crate::engine::SegmentRows::Slices(&a, &b),
            fields,
        };
        Columns::collect(fields, a.len(), |sink| engine.segment_pairs(job, sink))
    })
    .await?;
    npz_response(columns, held).await
}

#[utoipa::path(post, path = "/v1/paired", tag = "queries",
    params(api::SceneQueryParams),
    request_body(content = api::Binary, content_type = "application/octet-stream",
        description = "A zip (the .npz container) holding `shapes.json`, a scene file (SPEC §1), \
            and `points.npy`, (N, 3) float32 or float64 with one point per shape: point i \
            against shape i only"),
    responses(
        (status = 200, description = ".npz as `closest query --paired --out X.npz`",
            body = api::Binary, content_type = "application/octet-stream"),
        api::BodyQueryErrors))]
pub(super) async fn paired(
    State(state): State<Arc<AppState>>,
    Query(params): Query<api::SceneQueryParams>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let mode = parse_mode(params.mode.as_deref())?;
    let fields = parse_fields(Family::Hits, params.fields.as_deref())?;
    let holds = "shapes.json and points.npy";
    let (mut archive, mut held) = archive_body(&state, &headers, body, holds).await?;
    let (shapes, values) = off_the_runtime(move || {
        let text = archive_member(&mut archive, "shapes.json", holds)?;
        let text = String::from_utf8(text)
            .map_err(|_| ApiError::bad("body: shapes.json: the scene JSON must be UTF-8"))?;
        let shapes = crate::io::parse_scene(&text, "shapes.json")?;
        Ok((shapes, archive_rows(&mut archive, "points", &[3], holds)?))
    })
    .await?;
    held.hold_answer(answer_bytes(fields, shapes.len()))?;
    let engine = state.engine();
    let columns = blocking(move || {
        let job = crate::engine::PairedQuery {
            shapes: &shapes,
            points: match &values {
                RowValues::F32(v) => crate::Points::F32(bytemuck::cast_slice(v)),
                RowValues::F64(v) => crate::Points::F64(bytemuck::cast_slice(v)),
            },
            mode,
            fields,
        };
        Columns::collect(fields, shapes.len(), |sink| engine.query_paired(job, sink))
    })
    .await?;
    npz_response(columns, held).await
}

/// Columns as the `.npz` the CLI writes, made on the blocking pool (a large answer's copy
/// and checksum would hold a runtime thread).
/// `held` holds the request's body and answer until here; then the answer's bytes alone
/// until its client has taken them (`AnswerBody`).
pub(super) async fn npz_response(columns: Columns, held: Reservation) -> ApiResult<Response> {
    let bytes = off_the_runtime(move || Ok(columns_npz(&columns))).await?;
    Ok(held_npz_response(bytes, held))
}

/// The bytes of an answer's columns (its `.npz` adds a few hundred), held before its work.
fn answer_bytes(fields: Fields, rows: usize) -> usize {
    rows.saturating_mul(fields.row_words() * 4)
}

fn columns_npz(columns: &Columns) -> Vec<u8> {
    let specs: Vec<ColumnSpec> = columns
        .columns
        .iter()
        .map(|(f, _)| field_column(f))
        .collect();
    let rows = columns
        .columns
        .first()
        .map_or(0, |(f, v)| v.len() / f.width);
    let values: Vec<Values<'_>> = columns
        .columns
        .iter()
        .map(|(f, v)| Values::column(v, f.width))
        .collect();
    npz_in_memory(rows, &specs, &[], &values)
}

/// An `.npz` answer for which `held` was held against --max-inflight-mb before its work:
/// from now on it holds the answer's bytes alone, until its client has taken them.
fn held_npz_response(bytes: Vec<u8>, mut held: Reservation) -> Response {
    held.settle(bytes.len());
    let body = Body::new(AnswerBody::new(bytes, held));
    ([(header::CONTENT_TYPE, "application/octet-stream")], body).into_response()
}

/// Values as f64, for the host's own use (segment pairs are built in f64).
fn f64_values(values: RowValues) -> Vec<f64> {
    match values {
        RowValues::F32(v) => v.into_iter().map(f64::from).collect(),
        RowValues::F64(v) => v,
    }
}
