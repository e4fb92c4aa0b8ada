#!/usr/bin/env bash
# The Python package in a virtual environment; sets $PYTHON. Two ways, one per use:
#
#   source scripts/python_env.sh           target/py-venv: `pip install ./python[test]`, the
#                                          package as users get it (maturin, release build); the
#                                          benchmark scripts use this one.
#   source scripts/python_env.sh --staged  target/py-test: the test requirements from
#                                          python/pyproject.toml, and the package staged from
#                                          python/closest plus the extension module the test
#                                          build already made (target/debug/lib_closest.so, from
#                                          `cargo build --profile test --workspace`). The test
#                                          command uses this: a second, release build of wgpu and
#                                          the rest would cost CI ~3 minutes.
#
# Needs python3 ≥ 3.9 with venv and pip; installs Debian's python3-venv when missing.
set -euo pipefail

staged=false
venv=target/py-venv
if [ "${1:-}" = --staged ]; then
    staged=true
    venv=target/py-test
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "closest: python3 (≥ 3.9) is needed for the Python package: apt-get install -y python3 python3-venv" >&2
    exit 3
fi
if [ ! -x "$venv/bin/python" ]; then
    if ! python3 -m venv "$venv" >/dev/null 2>&1; then
        rm -rf "$venv"
        echo "closest: python3 cannot create a virtual environment; installing python3-venv" >&2
        if [ "$(id -u)" = 0 ]; then
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
        elif command -v sudo >/dev/null 2>&1; then
            sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
        else
            echo "closest: run 'apt-get install -y python3-venv' as root" >&2
            exit 3
        fi
        python3 -m venv "$venv"
    fi
fi
PYTHON="$venv/bin/python"
"$PYTHON" -m pip install -q --upgrade pip
if [ "$staged" = false ]; then
    "$PYTHON" -m pip install -q "./python[test]"
    export PYTHON
    return 0 2>/dev/null || exit 0
fi

extension=target/debug/lib_closest.so
if [ ! -f "$extension" ]; then
    echo "closest: $extension is missing: run 'cargo build --profile test --workspace' first" >&2
    exit 3
fi
# The package's metadata as maturin makes it (cargo metadata only, no compiling): a broken
# pyproject.toml or Cargo.toml fails here although nothing is built by pip.
"$PYTHON" -m pip install -q --dry-run --no-deps ./python
"$PYTHON" -c 'import tomllib' 2>/dev/null || "$PYTHON" -m pip install -q tomli
mapfile -t requirements < <("$PYTHON" scripts/python_requirements.py python/pyproject.toml test)
"$PYTHON" -m pip install -q "${requirements[@]}"
stage=target/py-stage
rm -rf "$stage"
mkdir -p "$stage/closest"
cp python/closest/*.py python/closest/*.pyi python/closest/py.typed "$stage/closest/"
cp "$extension" "$stage/closest/_closest.abi3.so"
"$PYTHON" -m pip uninstall -q -y closest 2>/dev/null || true
site="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$PWD/$stage" >"$site/closest_staged.pth"
export PYTHON
