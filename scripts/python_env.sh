#!/usr/bin/env bash
# The Python package in a virtual environment: target/py-venv, with the package built from
# python/ (maturin, release) and the test requirements. Sourced by scripts/test.sh; sets
# $PYTHON. Needs python3 ≥ 3.9 with venv and pip; installs Debian's python3-venv when missing.
set -euo pipefail

venv=target/py-venv
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
"$PYTHON" -m pip install -q "./python[test]"
export PYTHON
