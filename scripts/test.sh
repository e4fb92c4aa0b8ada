#!/usr/bin/env bash
# The test command (README, CI): installs lavapipe if no Vulkan driver exists, checks
# formatting and lints, then runs every test. GPU tests run on the default adapter and fail
# (never skip) when there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lavapipe.sh
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --locked
