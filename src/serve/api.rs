//! The service's JSON bodies and error statuses as types: the handlers answer with them and
//! `/openapi.json` is generated from them and from the handlers' `#[utoipa::path]`
//! annotations, so the description cannot drift from what the routes do.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::openapi::{self, RefOr};
use utoipa::{IntoParams, IntoResponses, ToSchema};

/// Every error: `{"error": MESSAGE}`, the CLI's message for bad input.
#[derive(Serialize, ToSchema)]
pub(crate) struct ErrorBody {
    pub error: String,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct Health {
    /// Always `ok` while the server answers.
    pub status: String,
    /// The adapter the server's engine runs on.
    pub adapter: String,
}

/// A target made resident.
#[derive(Serialize, ToSchema)]
pub(crate) struct SceneInstalled {
    pub name: String,
    pub shapes: usize,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct MeshInstalled {
    pub name: String,
    pub triangles: usize,
}

/// One resident target (`GET /v1/targets`).
#[derive(Serialize, ToSchema)]
pub(crate) struct TargetInfo {
    pub name: String,
    /// `scene` or `mesh`.
    pub kind: String,
    /// A scene's shape count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shapes: Option<usize>,
    /// A mesh's triangle count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub triangles: Option<usize>,
    /// Device memory it holds against `--max-resident-mb` (for a mesh, its winding-number
    /// clusters, built with its hierarchy, and its pseudonormal table's share, reserved on
    /// upload; and its body targets once a body query has uploaded them).
    pub device_bytes: u64,
}

/// A scene file (SPEC §1): `{"shapes": [{"type": "sphere", "center": [0, 0, 0], "radius": 1},
/// ...]}`.
/// Described only: `io::parse_scene` reads the body, with the CLI's messages.
#[derive(ToSchema)]
pub(crate) struct SceneBody {
    #[schema(value_type = Vec<Object>)]
    #[allow(dead_code)]
    shapes: Vec<serde_json::Value>,
}

/// Bytes: an `.npy` or `.npz` (numpy.save, numpy.savez) or a mesh file.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
pub(crate) struct Binary(#[allow(dead_code)] Vec<u8>);

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct SceneQueryParams {
    /// `solid` (default) or `surface`.
    #[param(example = "solid")]
    pub mode: Option<String>,
    /// Comma-separated output arrays (point, distance, normal, shape); default all.
    #[param(example = "distance,shape")]
    pub fields: Option<String>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct MeshQueryParams {
    /// `none` (default), `pseudonormal`, `winding` or `auto` (pseudonormal where the mesh is
    /// closed, oriented and does not intersect itself, else winding).
    #[param(example = "pseudonormal")]
    pub sign: Option<String>,
    /// Comma-separated output arrays (point, distance, normal, shape); default all.
    #[param(example = "distance")]
    pub fields: Option<String>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct FieldsParams {
    /// Comma-separated output arrays; default all.
    pub fields: Option<String>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct MeshFormat {
    /// `obj`, `stl`, `ply` or `off`.
    #[param(example = "obj")]
    pub format: Option<String>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct SdfParams {
    /// Samples an axis, corners inclusive: `N` or `NX,NY,NZ`.
    #[param(example = "16")]
    pub res: Option<String>,
    /// Margin around the mesh's bounds as a fraction of their largest extent (default 0.1).
    pub pad: Option<f64>,
    /// `x0,y0,z0,x1,y1,z1` instead of pad.
    pub bounds: Option<String>,
    /// `auto` (default: pseudonormal where the mesh is closed, oriented and does not intersect
    /// itself, else winding), `pseudonormal`, `winding` or `none`.
    pub sign: Option<String>,
}

/// The error statuses a kind of route answers, each with [`ErrorBody`].
macro_rules! error_statuses {
    ($($name:ident: $($status:literal)+;)+) => {$(
        pub(crate) struct $name;
        impl IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<openapi::response::Response>> {
                error_responses(&[$($status),+])
            }
        }
    )+};
}

error_statuses! {
    ReadErrors: 401 408;
    DeleteErrors: 401 404 408;
    PutErrors: 400 401 408 413 415 500 507;
    TargetQueryErrors: 400 401 404 408 413 415 500 503;
    SdfErrors: 400 401 404 408 500;
    BodyQueryErrors: 400 401 408 413 415 500;
}

fn error_responses(statuses: &[u16]) -> BTreeMap<String, RefOr<openapi::response::Response>> {
    statuses
        .iter()
        .map(|&status| {
            let reason = axum::http::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("error");
            let content = openapi::content::ContentBuilder::new()
                .schema(Some(openapi::Ref::from_schema_name("ErrorBody")))
                .build();
            let mut response = openapi::response::ResponseBuilder::new()
                .description(format!("{reason}: {{\"error\": MESSAGE}}"))
                .content("application/json", content);
            if status == 503 {
                response = response.header(
                    "Retry-After",
                    openapi::header::HeaderBuilder::new()
                        .description(Some("Seconds to wait before retrying"))
                        .build(),
                );
            }
            (status.to_string(), RefOr::T(response.build()))
        })
        .collect()
}

/// The description's frame; the paths come from the router (`utoipa_axum`).
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "closest serve",
        description = "Closest points, distances and signed distances to resident scenes and \
                       meshes (SPEC §7). Points in as .npy, answers out as .npz, byte for byte \
                       what the closest CLI reads and writes."
    ),
    components(schemas(ErrorBody)),
    modifiers(&BearerToken)
)]
pub(crate) struct ApiDoc;

/// `Authorization: Bearer TOKEN` when the server has `--token-file`.
struct BearerToken;

impl utoipa::Modify for BearerToken {
    fn modify(&self, api: &mut openapi::OpenApi) {
        use openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = api.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}
