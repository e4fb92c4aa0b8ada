"""Prints a pyproject.toml's dependencies and one optional extra's, a line each, for pip.

Usage: python scripts/python_requirements.py PYPROJECT EXTRA
(scripts/python_env.sh --staged: the test requirements without building the package).
"""

import sys

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

path, extra = sys.argv[1], sys.argv[2]
with open(path, "rb") as f:
    project = tomllib.load(f)["project"]
extras = project.get("optional-dependencies", {})
if extra not in extras:
    sys.exit(f"{path}: no optional dependency group '{extra}' (has: {', '.join(extras)})")
for requirement in project.get("dependencies", []) + extras[extra]:
    print(requirement)
