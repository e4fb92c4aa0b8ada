#!/usr/bin/env bash
# The test command (README, CI): installs lavapipe if no Vulkan driver exists (and Mesa's GL
# driver for tests/gl.rs if no GL one does), checks
# formatting, builds the user guide (installing mdBook if missing), lints, runs every Rust
# test, then stages the Python package (its extension module comes from the same build) in a
# virtual environment and runs its tests (pytest). GPU tests run on the default adapter and
# fail (never skip) when there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lavapipe.sh
ensure_gl_driver
# Without XDG_RUNTIME_DIR, Mesa's loader prints "error: XDG_RUNTIME_DIR is invalid or not set"
# in every test process (the CLI and the Python package set their own; test binaries do
# not), which reads like a failure: give them a private directory for the run.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
    XDG_RUNTIME_DIR="$(mktemp -d)"
    export XDG_RUNTIME_DIR
    trap 'rm -rf "$XDG_RUNTIME_DIR"' EXIT
fi
# A clean CI build gains nothing from incremental compilation and pays for its bookkeeping.
if [ "${CI:-}" = true ]; then
    export CARGO_INCREMENTAL=0
fi
cargo fmt --all -- --check
# The user guide (docs/): mdBook builds it into target/book; tests/docs.rs checks its links.
if ! command -v mdbook >/dev/null 2>&1; then
    echo "closest: installing mdBook for the user guide (cargo install mdbook, once)" >&2
    cargo install mdbook --locked --version 0.5.4 --quiet
fi
mdbook build docs
# One build for the lints, the Rust tests and the Python extension module. Our crates are
# compiled by clippy-driver, as `cargo clippy --workspace --all-targets -- -D warnings` runs it
# (RUSTC_WORKSPACE_WRAPPER, lint flags in CLIPPY_ARGS), but with code generation, so the lints
# cost no second pass over the dependencies; the extension module, built in the same
# invocation, shares every compiled dependency (features unify the same way); and `cargo test`,
# under the same wrapper, finds it all built.
RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)" || {
    echo "closest: the tests lint with clippy: rustup component add clippy" >&2
    exit 3
}
export RUSTC_WORKSPACE_WRAPPER
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
cargo build --locked --profile test --workspace --lib --bins --tests --examples --bench '*'
cargo test --locked --workspace
source scripts/python_env.sh --staged
# torch is a test requirement: its tests must run here, not skip.
CLOSEST_TEST_TORCH=required CLOSEST_CLI=target/debug/closest "$PYTHON" -m pytest python/tests -q \
    -p no:cacheprovider --strict-markers
