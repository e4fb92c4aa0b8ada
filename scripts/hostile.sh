#!/usr/bin/env bash
# The "hostile inputs" group alone (docs/ARCHITECTURE.md): ties and degenerate points of every
# kind without the twins (tests/edges.rs), every kind parry has against its projections
# (tests/parry_oracle.rs), hostile and faulty clients of the service, the fuzz
# corpora replayed, and the Python tests marked `hostile` (arrays of every kind, bad shapes,
# faulty Dask workers). CI runs them inside the whole suites (scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lavapipe.sh
cargo build --locked --profile test --workspace --lib
cargo test --locked --test edges --test parry_oracle --test serve_hostile --test fuzz_corpus
source scripts/python_env.sh --staged
CLOSEST_CLI=target/debug/closest "$PYTHON" -m pytest python/tests -q -p no:cacheprovider \
    --strict-markers -m hostile
