"""The vendors' API contracts as fuzz suites: schemathesis against a live `openqna serve` (issue 24).

Each spec in ``tests/specs/`` (the Azure runtime and authoring APIs, OpenAI's files and vector stores; or
every spec in ``$FUZZ_SPECS``, e.g. the vendors' own files) and openqna's own tools OpenAPI, served live, is
run with the checks not_a_server_error, status_code_conformance, content_type_conformance and
response_schema_conformance.  A scratch project with QnAs and a production deployment, an OpenAI file, a
vector store and a file batch are made first and named in every path, so generated requests reach real
code rather than a 404.  ``tests/specs/allowlist.toml`` lists the specs' own gaps and the deviations kept
on purpose, each with its reason; anything else fails.

``make test`` runs a bounded pass (``FUZZ_SECONDS``, default 15 s of each spec); ``make fuzz`` runs
10 minutes of each.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
import yaml

from conftest import ServeProcess, wait_for_job

SPECS = Path(__file__).parent / "specs"
ALLOWLIST = SPECS / "allowlist.toml"
SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance", "response_schema_conformance")
AUTHORING = "/language/authoring/query-knowledgebases/projects"
V = {"api-version": "2023-04-01"}
SECONDS = int(os.environ.get("FUZZ_SECONDS", "15"))
SEED = os.environ.get("FUZZ_SEED", "24")  # `make test` repeats one run; `make fuzz` draws a new one ("random")
SPEC_DIR = Path(os.environ.get("FUZZ_SPECS") or SPECS)
TOOLS = "tools-openapi-served-live"


# The operations openqna serves, by path below a spec's base: the vendors' own files hold many more (OpenAI's
# openapi.yaml is the whole API), and those are left out rather than answered 404.
SERVED = re.compile(r"^/(files|vector_stores)(/|$)|query-knowledgebases|^/:query-text$|^/get_related_")


def spec_files() -> list[str]:
    """The spec files in the directory: OpenAPI 3 or Swagger 2 documents with paths (not the files they refer to)."""
    found = []
    for path in sorted(SPEC_DIR.iterdir()):
        if path.suffix in (".yaml", ".yml", ".json") and not path.name.startswith("."):
            text = path.read_text()
            if re.search(r"^\s*\"?(openapi|swagger)\"?\s*:", text, re.MULTILINE) and "paths" in text:
                found.append(path.name)
    return [*found, TOOLS]


# -- the server and its scratch data -----------------------------------------------------------------------
class Server(ServeProcess):
    def __init__(self, data: Path):
        super().__init__(data / "data", data / "server.log", args=("--no-sample",))

    def job(self, response: httpx.Response) -> str:
        """Waits for the job a 202 started; returns its id."""
        assert response.status_code == 202, response.text
        body = wait_for_job(response.headers["operation-location"], states=("succeeded", "failed"))
        assert body["status"] == "succeeded", body
        return body["jobId"]


QNAS = [
    {"id": 1, "answer": "Charge the battery for two to four hours.", "questions": ["How long does charging take?"],
     "metadata": {"category": "api"}, "source": "filename1.pdf",
     "dialog": {"isContextOnly": False, "prompts": [{"displayOrder": 0, "qnaId": 2, "displayText": "Turn it on"}]}},
    {"id": 2, "answer": "Press and release the power button.", "questions": ["How do I turn it on?"]},
    {"id": 3, "answer": "Use the USB port on the power supply.", "questions": ["Can I charge my phone?"],
     "metadata": {"editorial": "chitchat"}},
]


def seed(server: Server) -> dict[str, str]:
    """A project with QnAs, synonyms and a production deployment, and OpenAI files in a vector store; returns
    the ids that the generated requests name."""
    url, ids = server.url, {}
    for name in ("kb", "kb-delete"):
        assert httpx.patch(f"{url}{AUTHORING}/{name}", params=V, json={"language": "en"}).status_code == 201
    body = {"assets": {"qnas": QNAS, "synonyms": [{"alterations": ["usa", "united states"]}]}}
    ids["import"] = server.job(httpx.post(f"{url}{AUTHORING}/kb/:import", params=V, json=body))
    ids["qnas"] = server.job(httpx.patch(f"{url}{AUTHORING}/kb/qnas", params=V, json=[
        {"op": "add", "value": {"id": 4, "answer": "Hold the volume-up button.", "questions": ["How do I reset?"]}}]))
    ids["deploy"] = server.job(httpx.put(f"{url}{AUTHORING}/kb/deployments/production", params=V))
    ids["export"] = server.job(httpx.post(f"{url}{AUTHORING}/kb/:export", params=V))
    files = []
    for n in range(3):
        text = f"Returns are accepted within {30 + n} days. Refunds go to the card that paid.\n".encode()
        r = httpx.post(f"{url}/v1/files", data={"purpose": "assistants"}, files={"file": (f"policy{n}.txt", text)})
        assert r.status_code == 200, r.text
        files.append(r.json()["id"])
    stores = []
    for n in range(2):
        r = httpx.post(f"{url}/v1/vector_stores", json={"name": f"policies{n}", "file_ids": [files[n]]})
        assert r.status_code == 200, r.text
        stores.append(r.json()["id"])
    r = httpx.post(f"{url}/v1/vector_stores/{stores[0]}/file_batches", json={"file_ids": [files[2]]})
    assert r.status_code == 200, r.text
    ids.update(file=files[0], vector_store=stores[0], batch=r.json()["id"],
               delete_file=files[1], delete_vector_store=stores[1])
    deadline = time.monotonic() + 120
    while httpx.get(f"{url}/v1/vector_stores/{stores[0]}").json()["file_counts"]["in_progress"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    return ids


# -- the allow-list: the specs' own gaps and deliberate deviations ----------------------------------------
def allowlist() -> dict:
    with open(ALLOWLIST, "rb") as f:
        return tomllib.load(f)


def schemas(spec: dict) -> dict:
    """Named schemas of an OpenAPI 3 (components.schemas) or Swagger 2 (definitions) document."""
    return spec.get("components", {}).get("schemas") or spec.get("definitions") or {}


def patched(spec: dict, allow: dict) -> dict:
    """The spec with the allow-list's schema relaxations applied (a schema or field the spec lacks is skipped:
    the entries name the vendors' schemas, which the specs here and the vendors' own files share)."""
    spec["paths"] = {path: item for path, item in spec.get("paths", {}).items() if SERVED.search(path)}
    named = schemas(spec)
    for entry in allow.get("nullable", []):
        fields = named.get(entry["schema"], {}).get("properties", {})
        if entry["property"] in fields:
            fields[entry["property"]] = nullable(fields[entry["property"]], spec)
    for entry in allow.get("enum", []):
        field = named.get(entry["schema"], {}).get("properties", {}).get(entry["property"])
        if field is not None and "enum" in field:
            field["enum"] = [*field["enum"], *entry["add"]]
    for entry in allow.get("errors", []):
        if entry["schema"] not in named:
            continue
        for path, item in spec.get("paths", {}).items():
            if not re.search(entry["path"], path):
                continue
            for method, operation in item.items():
                if isinstance(operation, dict) and "responses" in operation:
                    operation["responses"].setdefault("default", error_response(entry["schema"], spec))
    return spec


def nullable(field: dict, spec: dict) -> dict:
    """The field's schema, null allowed, in the spec's own dialect (OpenAPI 3.0, 3.1 or Swagger 2)."""
    if "swagger" in spec:
        return {**field, "x-nullable": True}
    if str(spec.get("openapi", "")).startswith("3.0"):
        return {**field, "nullable": True} if "$ref" not in field else {"allOf": [field], "nullable": True}
    return {"anyOf": [field, {"type": "null"}]}


def error_response(schema: str, spec: dict) -> dict:
    if "swagger" in spec:
        return {"description": "Error", "schema": {"$ref": f"#/definitions/{schema}"}}
    return {"description": "Error",
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}}


def toml_value(value: object) -> str:
    return json.dumps(value)  # a JSON string or list of strings is a TOML value too


def operations(spec: dict) -> list[tuple[str, str, str]]:
    """(METHOD, path, operationId) of every operation in the spec."""
    return [(method.upper(), path, op.get("operationId", "")) for path, item in spec.get("paths", {}).items()
            for method, op in item.items() if isinstance(op, dict) and method in METHODS]


METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


def config(ids: dict[str, str], allow: dict, ops: list[tuple[str, str, str]], cache: Path) -> str:
    """schemathesis.toml: the scratch data's names in every path, the destructive calls pointed at spares,
    the seeded jobs' ids in their status calls, and the allow-list's checks turned off where it says (an entry
    for operations this spec lacks is left out)."""
    lines = [f"[cache]\ndirectory = {toml_value(str(cache))}", "",  # `st replay` finds failures there
             "[checks]", "enabled = false", *(f"{check}.enabled = true" for check in CHECKS), "",
             "[parameters]", 'projectName = "kb"', 'deploymentName = "production"', '"api-version" = "2023-04-01"',
             f"file_id = {toml_value(ids['file'])}", f"vector_store_id = {toml_value(ids['vector_store'])}",
             f"batch_id = {toml_value(ids['batch'])}", ""]
    if any(method == "DELETE" for method, _, _ in ops):
        lines += ["[[operations]]", 'include-method = "DELETE"',
                  f"parameters = {{ projectName = \"kb-delete\", file_id = {toml_value(ids['delete_file'])}, "
                  f"vector_store_id = {toml_value(ids['delete_vector_store'])} }}", ""]
    for operation, job in (("GetImportStatus", "import"), ("GetUpdateQnasStatus", "qnas"),
                           ("GetDeployStatus", "deploy"), ("GetExportStatus", "export")):
        if any(op_id == f"QuestionAnsweringProjects_{operation}" for _, _, op_id in ops):
            lines += ["[[operations]]", f'include-operation-id = "QuestionAnsweringProjects_{operation}"',
                      f"parameters = {{ jobId = {toml_value(ids[job])} }}", ""]
    for entry in allow.get("skip", []):
        if not any(re.search(entry["path"], path) and method == entry.get("method", method) for method, path, _ in ops):
            continue
        lines += ["[[operations]]", f"include-path-regex = {toml_value(entry['path'])}"]
        if "method" in entry:
            lines.append(f"include-method = {toml_value(entry['method'])}")
        lines += [f"checks.{check}.enabled = false" for check in entry["checks"]] + [""]
    return "\n".join(lines)


def base_url(server: str, spec: dict) -> str:
    """Where a spec's paths start on this server: its servers[0] path (OpenAPI 3) or the host template's path
    (Azure's Swagger 2 files: ``{Endpoint}/language``) or basePath."""
    if spec.get("servers"):
        return server + urlparse(spec["servers"][0]["url"]).path.rstrip("/")
    template = spec.get("x-ms-parameterized-host", {}).get("hostTemplate", "")
    return server + (template.split("}", 1)[1] if "}" in template else spec.get("basePath", "")).rstrip("/")


# -- the run ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def live(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    server = Server(root)
    try:
        yield server, seed(server), root
    finally:
        server.stop()


@pytest.mark.parametrize("name", spec_files())
def test_vendor_contract(live, name, request):
    server, ids, root = live
    allow = allowlist()
    if name == TOOLS:
        spec = httpx.get(f"{server.url}/tools/openapi.json", params={"version": "3.0"}).json()
        assert "/get_related_kb" in spec["paths"]
    else:
        spec = yaml.safe_load((SPEC_DIR / name).read_text())
    # beside the original, so that a vendor's file finds the files it refers to ($ref: common.json)
    location = (SPEC_DIR if name != TOOLS else root) / f".{Path(name).stem}.fuzz.json"
    location.write_text(json.dumps(patched(spec, allow)))
    request.addfinalizer(lambda: location.unlink(missing_ok=True))
    settings = root / "schemathesis.toml"
    settings.write_text(config(ids, allow, operations(spec), root / "schemathesis-cache"))
    command = [str(SCHEMATHESIS), "--no-color", "--config-file", str(settings), "run", str(location),
               "--url", base_url(server.url, spec), "--max-time", str(SECONDS),
               "--workers", "1", "--suppress-health-check", "all", "--request-timeout", "30",
               *(["--seed", SEED] if SEED != "random" else [])]
    logged = server.log.stat().st_size
    run = subprocess.run(command, capture_output=True, text=True, timeout=SECONDS * 3 + 120, cwd=root)
    report = root / f"{Path(name).stem}.schemathesis.txt"
    report.write_text(run.stdout + run.stderr)
    print(run.stdout[-3000:])
    assert run.returncode == 0, f"{report}:\n{run.stdout[-20000:]}{run.stderr[-3000:]}"
    with open(server.log, errors="replace") as log:
        log.seek(logged)
        during = log.read()
    assert "Traceback" not in during, during[max(0, during.index("Traceback") - 2000):][:8000]


def test_every_allowlist_entry_says_why_and_applies_to_a_spec_here():
    """A stale entry would let a regression through unseen: each must change one of tests/specs/."""
    allow = allowlist()
    specs = [yaml.safe_load(p.read_text()) for p in SPECS.glob("*.yaml")]
    entries = [(kind, entry) for kind in ("nullable", "enum", "errors", "skip") for entry in allow.get(kind, [])]
    assert len(entries) >= 5
    for kind, entry in entries:
        assert entry.get("why", "").strip(), entry
        if kind == "skip":
            applies = any(re.search(entry["path"], path) and method == entry.get("method", method)
                          for spec in specs for method, path, _ in operations(spec))
        else:
            applies = any(patched(copy.deepcopy(spec), {kind: [entry]}) != patched(copy.deepcopy(spec), {})
                          for spec in specs)
        assert applies, f"{kind} entry matches nothing in tests/specs/: {entry}"
