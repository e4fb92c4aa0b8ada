"""schemathesis against a running server's /openapi.json: bounded in examples and time, it
must find no 5xx and no response that breaks the description (statuses, content types,
JSON bodies). Targets named as the description's examples ("demo") are resident, so
generated requests reach the query paths too."""

import json
import pathlib
import shutil
import subprocess
import sys
import urllib.request

import closest

from conftest import MESHES, SHAPES, serving

CHECKS = ",".join([
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
])


def test_openapi_describes_every_route(cli):
    with serving(cli) as url:
        with urllib.request.urlopen(url + "/openapi.json", timeout=60) as response:
            api = json.load(response)
    routes = {(method.upper(), path) for path, item in api["paths"].items() for method in item}
    assert routes == {
        ("GET", "/v1/health"), ("GET", "/v1/health/live"), ("GET", "/v1/health/ready"),
        ("GET", "/metrics"), ("GET", "/openapi.json"),
        ("GET", "/v1/targets"),
        ("PUT", "/v1/scenes/{name}"), ("DELETE", "/v1/scenes/{name}"),
        ("PUT", "/v1/meshes/{name}"), ("DELETE", "/v1/meshes/{name}"),
        ("POST", "/v1/scenes/{name}/query"), ("POST", "/v1/scenes/{name}/contacts"),
        ("POST", "/v1/scenes/{name}/bodies"), ("POST", "/v1/meshes/{name}/bodies"),
        ("POST", "/v1/meshes/{name}/query"), ("POST", "/v1/meshes/{name}/sdf"),
        ("POST", "/v1/segments"), ("POST", "/v1/paired"),
    }
    assert api["openapi"].startswith("3.")


def test_schemathesis_finds_no_server_error_and_no_schema_break(cli, tmp_path):
    schemathesis = shutil.which("schemathesis", path=str(pathlib.Path(sys.executable).parent))
    assert schemathesis, "schemathesis is a test requirement: pip install './python[test]'"
    # Small limits keep every generated request cheap.
    with serving(cli, "--max-grid-samples", 4096, "--max-request-mb", 2) as url:
        client = closest.Client(url)
        client.scene("demo", SHAPES)
        client.mesh("demo", MESHES / "fandisk.obj")
        done = subprocess.run(
            [schemathesis, "run", f"{url}/openapi.json", "--checks", CHECKS,
             "--max-examples", "12", "--seed", "7", "--workers", "1",
             "--request-timeout", "60", "--generation-database", "none", "--no-color"],
            capture_output=True, text=True, timeout=420, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
