"""Knowledge bases as LLM tools: typed tables, get_related_{kb}, structured search, OpenAPI for GPT Actions."""

from __future__ import annotations

import gzip
import json
import random
import re
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest
from openapi_spec_validator import validate

from conftest import SHARED_DATA, LiveServer
from openqna.auth.keys import create_key
from openqna.formats import read_file
from openqna.kinds.tables import TableSchema, create_table, load_rows, parse_column, read_rows
from openqna.records import InvalidArgument, QnA
from test_cli import run

CATEGORIES = ["cs.CL", "cs.LG", "q-bio.NC", "q-bio.GN", "stat.ML"]
SNAPSHOTS = Path(__file__).parent / "snapshots"
ARXIV_COLUMNS = ["id:String", "title:String", "abstract:String", "pubdate:DateTime", "categories:Array(String)",
                 "authors:Array(String)"]


def arxiv_rows(n: int = 120) -> list[dict]:
    """An ArXiv-like table from SciFact abstracts, with seeded dates, categories and authors."""
    rng = random.Random(11)
    rows = []
    with gzip.open(SHARED_DATA / "beir-scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            if not doc["title"] or not doc["text"]:
                continue
            day = datetime(2019, 1, 1, tzinfo=timezone.utc).timestamp() + rng.randrange(6 * 365) * 86400
            rows.append({"id": doc["_id"], "title": doc["title"], "abstract": doc["text"][:1500],
                         "pubdate": datetime.fromtimestamp(day, timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
                         "categories": rng.sample(CATEGORIES, rng.randint(1, 2)),
                         "authors": [rng.choice(["A. Smith", "B. Chen", "C. Okafor", "D. Müller"])]})
            if len(rows) == n:
                break
    return rows


@pytest.fixture(scope="module")
def arxiv(tmp_path_factory, embedder):
    from openqna.kb.service import Service
    from openqna.store.sqlite import SQLiteStore

    service = Service(SQLiteStore(tmp_path_factory.mktemp("arxiv")), embedder)
    schema = TableSchema([parse_column(c) for c in ARXIV_COLUMNS], ["title", "abstract"], "title")
    create_table(service, "arxiv", schema, description="scientific abstracts with categories and dates")
    rows = arxiv_rows()
    data = "\n".join(json.dumps(r) for r in rows).encode()
    assert load_rows(service, "arxiv", "arxiv.jsonl", data)[:2] == (120, 240)
    service.rows = rows
    return service


def matches(row, when=datetime(2023, 1, 1, tzinfo=timezone.utc)):
    return "cs.CL" in row["categories"] and datetime.fromisoformat(row["pubdate"]).replace(tzinfo=timezone.utc) > when


def test_filter_is_applied_inside_retrieval(arxiv):
    where = "has(categories, 'cs.CL') AND pubdate > parseDateTime32BestEffort('2023-01-01')"
    expected = {r["id"] for r in arxiv.rows if matches(r)}
    assert len(expected) >= 8
    hits = arxiv.search("arxiv", "brain development imaging", where=where, limit=8)
    assert len(hits) == 8  # selective filter, still `limit` rows
    assert {h.record.fields["id"] for h in hits} <= expected
    everything = arxiv.search("arxiv", "brain development imaging", where=where, limit=50)
    assert {h.record.fields["id"] for h in everything} == expected
    assert [h.score for h in everything] == sorted((h.score for h in everything), reverse=True)


def test_reload_is_idempotent_and_bad_rows_load_nothing(arxiv):
    data = "\n".join(json.dumps(r) for r in arxiv.rows).encode()
    version = arxiv.store.version("arxiv")
    assert load_rows(arxiv, "arxiv", "arxiv.jsonl", data) == (120, 0, 0, 120, "arxiv.jsonl")
    assert arxiv.store.version("arxiv") == version
    bad = [dict(arxiv.rows[0], id="new"), dict(arxiv.rows[1], pubdate="not a date"),
           dict(arxiv.rows[2], categories="cs.CL"), dict(arxiv.rows[3], extra=1)]
    with pytest.raises(InvalidArgument) as err:
        load_rows(arxiv, "arxiv", "more.jsonl", "\n".join(json.dumps(r) for r in bad).encode())
    message = err.value.message
    assert "3 bad row(s)" in message and "row 2: column 'pubdate'" in message and "row 3: column 'categories'" in message
    assert "row 4: unknown column(s) extra" in message
    assert arxiv.store.version("arxiv") == version


def test_csv_and_parquet_load(tmp_path, arxiv):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = arxiv.rows[:5]
    table = pa.Table.from_pylist(rows)
    pq.write_table(table, tmp_path / "a.parquet")
    assert load_rows(arxiv, "arxiv", "a.parquet", (tmp_path / "a.parquet").read_bytes())[0] == 5
    csv_text = "id,title,abstract,pubdate,categories,authors\n" + "\n".join(
        f'{r["id"]},"{r["title"]}","x",{r["pubdate"]},{"|".join(r["categories"])},"[""A. B""]"' for r in rows[:2])
    assert load_rows(arxiv, "arxiv", "b.csv", csv_text.encode())[0] == 2
    [hit] = arxiv.search("arxiv", "anything", where="source = 'b.csv' AND id = '%s'" % rows[0]["id"], limit=5)
    assert hit.record.fields["authors"] == ["A. B"] and hit.record.fields["categories"] == rows[0]["categories"]


@pytest.fixture
def live_arxiv(arxiv, monkeypatch):
    monkeypatch.setenv("OPENQNA_PUBLIC_URL", "https://kb.example.org")
    with LiveServer(arxiv) as live:
        yield live


def get(live, path, **params):
    return httpx.get(live.url + path, params=params, timeout=30)


def test_get_related_speaks_myscale(live_arxiv):
    where = "has(categories, 'cs.CL') AND pubdate > parseDateTime32BestEffort('2023-01-01')"
    r = get(live_arxiv, "/get_related_arxiv", subject="white matter in newborns", where_str=where)
    body = r.json()
    assert r.status_code == 200 and set(body) == {"documents", "num_retrieved"}
    assert body["num_retrieved"] == 4  # MyScale's default limit
    lines = [json.loads(line) for line in body["documents"].split("\n")]
    assert len(lines) == 4 and all("cs.CL" in line["categories"] for line in lines)
    structured = get(live_arxiv, "/tools/arxiv/search", subject="white matter in newborns", where_str=where,
                     limit=3).json()
    assert [h["title"] for h in structured["hits"]] == [line["title"] for line in lines[:3]]
    assert all(0 <= h["score"] <= 1 and h["kind"] == "row" for h in structured["hits"])


def test_get_related_takes_mcp_s_name_for_the_filter(live_arxiv):
    """``where`` (the MCP tool's name) filters as ``where_str`` does, on both HTTP tools."""
    where = "has(categories, 'q-bio.NC')"
    for path in ("/get_related_arxiv", "/tools/arxiv/search"):
        named = get(live_arxiv, path, subject="brain imaging", where_str=where, limit=20).json()
        aliased = get(live_arxiv, path, subject="brain imaging", where=where, limit=20).json()
        unfiltered = get(live_arxiv, path, subject="brain imaging", limit=20).json()
        assert named == aliased != unfiltered
    hits = get(live_arxiv, "/tools/arxiv/search", subject="brain imaging", where=where, limit=20).json()["hits"]
    assert hits and all("q-bio.NC" in h["fields"]["categories"] for h in hits)


def test_get_related_keeps_a_column_named_score(service):
    """A table's own ``score`` column reaches the documents; the relevance moves to ``_score`` beside it."""
    schema = TableSchema([parse_column(c) for c in ("id:String", "text:String", "score:Float64")], ["text"], None)
    create_table(service, "reviews", schema)
    load_rows(service, "reviews", "r.jsonl", b'{"id": "1", "text": "Returns within 30 days.", "score": 4.5}')
    with LiveServer(service) as live:
        body = get(live, "/get_related_reviews", subject="returns", where_str="score > 4").json()
    [line] = [json.loads(line) for line in body["documents"].split("\n")]
    assert line["score"] == 4.5 and 0 < line["_score"] <= 1


def test_a_column_named_in_another_case_than_two_columns_is_ambiguous(service):
    """QA: ``NAME = 'x'`` on a table with ``Name`` and ``name`` said "unknown column"."""
    schema = TableSchema([parse_column(c) for c in ("Name:String", "name:String", "text:String")], ["text"], None)
    create_table(service, "people", schema)
    load_rows(service, "people", "p.jsonl", b'{"Name": "Ada", "name": "ada", "text": "A mathematician."}')
    with LiveServer(service) as live:
        ambiguous = get(live, "/get_related_people", subject="mathematician", where_str="NAME = 'Ada'")
        one = get(live, "/get_related_people", subject="mathematician", where_str="TEXT = 'A mathematician.'")
    assert ambiguous.status_code == 400 and ambiguous.json()["error"]["code"] == "invalid_where", ambiguous.text
    assert "ambiguous column 'NAME': Name or name" in ambiguous.json()["error"]["message"], ambiguous.text
    assert one.status_code == 200 and json.loads(one.json()["documents"])["Name"] == "Ada"  # one match still reads


def test_unknown_tool_paths_answer_the_tools_codes(service):
    """QA: a tool path that does not exist answered Azure's {"code": "NotFound"}, not the tools' "not_found"."""
    with LiveServer(service) as live:
        missing = [get(live, path, subject="x") for path in ("/tools/faq/nope", "/tools/", "/tools/faq")]
        wrong_method = httpx.post(live.url + "/tools/faq/search", params={"subject": "x"}, timeout=30)
    for r in missing:
        assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found"), r.text
        assert "/get_related_{kb}" in r.json()["error"]["message"]
    assert (wrong_method.status_code, wrong_method.json()["error"]["code"]) == (405, "method_not_allowed")


def test_get_related_names_the_relevance_alike_in_every_line(service):
    """A project where one QnA has the metadata key ``score``: every line puts the relevance under ``_score``."""
    service.import_content("faq", read_file("faq.tsv", b"Question\tAnswer\tSource\tMetadata\n"
                                                       b"How long is shipping?\tTen days.\tfaq\tscore:5\n"
                                                       b"Do you ship abroad?\tTo the EU only.\tfaq\t\n"))
    with LiveServer(service) as live:
        body = get(live, "/get_related_faq", subject="shipping").json()
    lines = [json.loads(line) for line in body["documents"].split("\n")]
    assert len(lines) == 2 and all(0 <= line["_score"] <= 1 for line in lines)
    assert [line.get("score") for line in lines if line["text"] == "Ten days."] == ["5"]


def test_get_related_stays_under_the_gpt_actions_response_limit(service):
    """GPT Actions refuse a response of 100,000 characters or more: twenty sections of 9,000 characters (with quotes,
    which the response escapes) come back clipped alike, each line still JSON, every hit kept; a small answer is
    left whole."""
    section = 'He said "charge it" first. ' * 333  # 8,991 characters, 666 quotes
    rows = "".join(f"How do I charge part {i}?\tPart {i}: {section}\tmanual\t\n" for i in range(20))
    service.import_content("manual", read_file("manual.tsv", f"Question\tAnswer\tSource\tMetadata\n{rows}".encode()))
    with LiveServer(service) as live:
        r = get(live, "/get_related_manual", subject="how do I charge it", limit=20)
        small = get(live, "/get_related_manual", subject="how do I charge it", limit=1).json()
    assert r.status_code == 200 and len(r.text) < 100_000
    body = r.json()
    lines = [json.loads(line) for line in body["documents"].split("\n")]
    assert body["num_retrieved"] == len(lines) == 20
    assert all(line["text"].endswith("…") and 3000 < len(line["text"]) < len(section) for line in lines)
    assert len({len(line["text"]) for line in lines}) == 1  # one length for every hit
    [whole] = [json.loads(line) for line in small["documents"].split("\n")]
    assert whole["text"].startswith("Part ") and whole["text"].endswith(section.strip())



def test_structured_search_stays_under_the_same_response_limit(service):
    """/tools/{kb}/search had no cap on its size (twenty 24,000-character answers made 480,000 characters): it keeps
    to get_related's 96,000, every hit kept and clipped alike, each still whole JSON; a small answer is left whole."""
    section = 'He said "charge it" first. ' * 888  # 23,976 characters with quotes the response escapes
    rows = "".join(f"How do I charge part {i}?\tPart {i}: {section}\tmanual\tpart:{i}\n" for i in range(20))
    service.import_content("manual", read_file("manual.tsv", f"Question\tAnswer\tSource\tMetadata\n{rows}".encode()))
    with LiveServer(service) as live:
        r = get(live, "/tools/manual/search", subject="how do I charge it", limit=20)
        small = get(live, "/tools/manual/search", subject="how do I charge it", limit=1).json()
    assert r.status_code == 200 and len(r.text) < 100_000, len(r.text)
    body = r.json()
    assert body["num_retrieved"] == len(body["hits"]) == 20
    assert all(h["text"].endswith("…") and 1000 < len(h["text"]) < len(section) for h in body["hits"])
    assert len({len(h["text"]) for h in body["hits"]}) == 1 and {h["metadata"]["part"] for h in body["hits"]} == \
        {str(i) for i in range(20)}
    [whole] = small["hits"]
    assert whole["text"].endswith(section.strip()) and small["num_retrieved"] == 1



def test_the_response_limit_counts_as_javascript_does(service, monkeypatch):
    """An emoji is two UTF-16 code units, as a client's JavaScript counts a string: twenty sections of 9,000
    characters of Chinese and emoji came back at 96,031 code points but 101,711 units, over the 100,000 GPT Actions
    take; both tool answers now stay under it in units."""
    monkeypatch.setenv("OPENQNA_MULTILINGUAL", "off")  # the limit is the same with or without the space (faster)
    section = "充电需要两个小时😀。" * 900  # 9,000 code points, 9,900 UTF-16 units
    rows = "".join(f"怎么充电 {i}?\t{i}: {section}\tmanual\t\n" for i in range(20))
    service.import_content("manual", read_file("manual.tsv", f"Question\tAnswer\tSource\tMetadata\n{rows}".encode()))
    with LiveServer(service) as live:
        answers = [get(live, "/get_related_manual", subject="怎么充电", limit=20),
                   get(live, "/tools/manual/search", subject="怎么充电", limit=20)]
    for r in answers:
        units = len(r.text.encode("utf-16-le")) // 2
        assert r.status_code == 200 and 90_000 < units < 100_000 and r.json()["num_retrieved"] == 20, units


def test_the_tools_search_the_deployment_they_name(service):
    """``deployment`` picks the state searched, as Azure's deploymentName does; the live state stays the default; an
    unknown deployment is a 404 that names it; a GPT's document can pin one."""
    service.create_project("faq")
    service.upsert("faq", [QnA(["How do I pay?"], "By card.")])
    service.deploy("faq", "production")
    service.upsert("faq", [QnA(["Where is the office?"], "In Paris.")])
    with LiveServer(service) as live:
        def texts(path: str, **params) -> list[str]:
            r = get(live, path, subject="where is the office", limit=5, **params)
            assert r.status_code == 200, r.text
            if "hits" in r.json():
                return sorted(h["text"] for h in r.json()["hits"])
            return sorted(json.loads(line)["text"] for line in r.json()["documents"].split("\n"))

        for path in ("/get_related_faq", "/tools/faq/search"):
            assert texts(path) == texts(path, deployment="test") == texts(path, deployment="Test") == [
                "By card.", "In Paris."]  # "test" in any case, as Azure's deploymentName
            assert texts(path, deployment="production") == ["By card."]
            missing = get(live, path, subject="office", deployment="staging")
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
            assert "'staging'" in missing.json()["error"]["message"], missing.text
            assert "Its deployments are 'production'" in missing.json()["error"]["message"], missing.text
            blank = get(live, path, subject="office", deployment=" ")
            assert blank.status_code == 400 and "'deployment'" in blank.json()["error"]["message"], blank.text
        pinned = get(live, "/tools/faq/openapi.json", deployment="production").json()
        validate(pinned)
        [parameter] = [p for p in pinned["paths"]["/get_related_faq"]["get"]["parameters"] if p["name"] == "deployment"]
        assert parameter["required"] is True and parameter["schema"]["enum"] == ["production"]
        assert "deployment" not in json.dumps(get(live, "/tools/openapi.json").json()["paths"])


# The hostile and malformed requests every tool knowledge base refuses (tests/test_connected.py sends them too).
REFUSALS = [
    ({"subject": "x", "where_str": "1=1; DROP TABLE records"}, "invalid_where", "allowed"),
    ({"subject": "x", "where_str": "id IN (SELECT id FROM api_keys)"}, "invalid_where", "subquer"),
    ({"subject": "x", "where_str": "sleep(3) = 0"}, "invalid_where", "sleep"),
    ({"subject": "x", "where_str": "price > 3"}, "invalid_where", "price"),
    ({"subject": "x", "where_str": "pubdate > 'yesterday'"}, "invalid_where", "pubdate"),
    ({"subject": "x", "where_str": "id = '1' AND"}, "invalid_where", "AND needs a condition on both sides"),
    ({"subject": "x", "limit": "0"}, "invalid_request", "limit"),
    ({"subject": "x", "limit": "21"}, "invalid_request", "limit"),
    ({"where_str": "id = '1'"}, "invalid_request", "subject"),
    # a filter under a name the tool does not read was dropped, and the answer came back unfiltered
    ({"subject": "x", "filter": "id = '1'"}, "invalid_request", "Unknown query parameter(s) 'filter'"),
    ({"subject": "x", "where_str": "id = '1'", "where": "id = '2'"}, "invalid_where", "'where_str'"),
    ({"subject": "x", "where_str": ["id = '1'", "id = '2'"]}, "invalid_request", "more than once"),
]


@pytest.mark.parametrize("params,code,fragment", REFUSALS)
def test_refusals_are_400s_that_explain(live_arxiv, params, code, fragment):
    r = get(live_arxiv, "/get_related_arxiv", **params)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == code and fragment.lower() in r.json()["error"]["message"].lower()


def test_unknown_kb_and_keys(live_arxiv):
    assert get(live_arxiv, "/get_related_nope", subject="x").status_code == 404
    _, secret = create_key(live_arxiv.service.store, role="query", projects=["other"])
    try:
        assert get(live_arxiv, "/get_related_arxiv", subject="x").status_code == 401
        r = httpx.get(live_arxiv.url + "/get_related_arxiv", params={"subject": "x"}, headers={"api-key": secret})
        assert r.status_code == 404
        r = httpx.get(live_arxiv.url + "/tools/openapi.json", headers={"Authorization": f"Bearer {secret}"})
        assert r.json()["paths"] == {}
    finally:
        for k in live_arxiv.service.store.list_keys():
            live_arxiv.service.store.delete_key(k.id)


def test_azure_projects_are_tools_too(service):
    from test_service import surface_kb

    service.import_content("surface", surface_kb())
    hits = service.search("surface", "charging", where="category = 'power' AND source = 'manual.pdf'", limit=5)
    assert {h.record.id for h in hits} == {1, 3, 4}  # context-only QnAs are searchable as tool rows
    with pytest.raises(InvalidArgument, match="category"):
        service.search("surface", "x", where="has(category, 'power')")


def test_a_where_str_restricts_the_rows_not_the_scale(service):
    """A search filtered by where_str scored the rows it kept as if they were the whole KB: the password question
    filtered to the display's rows got them at 0.11, and its right answer alone in its category fell from 1.00 to
    0.67.  The rows a where_str leaves out are rivals now, as an Azure metadata filter's are."""
    from test_service import surface_kb

    service.import_content("surface", surface_kb())
    question = "I forgot my password, how do I reset it?"
    [best, *_] = service.search("surface", question, limit=3)
    assert best.record.id == 5 and best.score >= 0.9
    for where in ("category = 'display'", "category = 'power'", "source = 'manual.pdf'"):
        hits = service.search("surface", question, where=where, limit=2)
        assert hits and max(h.score for h in hits) < 0.05, (where, hits)  # a page still, no sure answer
    for where in ("category = 'account'", "source = 'faq.tsv'"):
        [kept] = service.search("surface", question, where=where, limit=2)
        assert kept.record.id == 5 and kept.score >= best.score - 0.05


@pytest.mark.parametrize("version", ["3.1", "3.0"])
def test_openapi_documents_validate_and_match_snapshots(live_arxiv, version):
    for path, name in (("/tools/openapi.json", "all"), ("/tools/arxiv/openapi.json", "arxiv")):
        doc = get(live_arxiv, path, version=version).json()
        validate(doc)
        assert doc["openapi"].startswith(version) and doc["servers"] == [{"url": "https://kb.example.org"}]
        op = doc["paths"]["/get_related_arxiv"]["get"]
        assert len(op["description"]) <= 300
        assert all(len(p["description"]) <= 700 for p in op["parameters"])
        where = next(p for p in op["parameters"] if p["name"] == "where_str")["description"]
        assert "pubdate DateTime" in where and "categories Array(String)" in where
        snapshot = SNAPSHOTS / f"tools_openapi_{name}_{version}.json"
        if not snapshot.exists():
            snapshot.parent.mkdir(exist_ok=True)
            snapshot.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            pytest.fail(f"wrote a new snapshot {snapshot.name}; check it in and run again")
        assert doc == json.loads(snapshot.read_text(encoding="utf-8")), f"{snapshot.name} changed"


def test_openapi_names_any_kb_as_gpt_actions_need(service):
    """The CLI accepts names such as 'my kb' or 'a.b'; their operations still get function-name operationIds
    (GPT Actions make functions of them: ^[a-zA-Z0-9_-]{1,64}$, unique) and paths a client can call."""
    names = ["my kb", "my_kb", "a.b", "é", "x" * 100, "x" * 99 + "y"]
    for name in names:
        service.create_project(name)
    with LiveServer(service) as live:
        doc = get(live, "/tools/openapi.json", version="3.0").json()
        validate(doc)
        ids = [item["get"]["operationId"] for item in doc["paths"].values()]
        assert len(set(ids)) == len(names) and all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", i) for i in ids), ids
        for path in doc["paths"]:
            assert " " not in path
            r = httpx.get(live.url + path, params={"subject": "anything"}, timeout=30)
            assert r.status_code == 200, (path, r.text)


def test_a_name_no_route_can_reach_is_refused_at_creation(service, tmp_path):
    """'my kb/é' was accepted and listed in the OpenAPI document, though /get_related_my%20kb%2F%C3%A9 could only
    answer 404 (servers decode the path before routing). Every creation path refuses it now; a name made before
    the check is left out of the document."""
    from openqna.store import Project

    for name in ("my kb/é", "a\\b", "..", ".", " ", "tab\tname"):
        with pytest.raises(InvalidArgument, match="refused"):
            service.create_project(name)
        with pytest.raises(InvalidArgument, match="refused"):
            create_table(service, name, TableSchema([parse_column("t:String")], ["t"], None))
    made = run("table", "create", "my kb/é", "--column", "id:String", "--column", "t:String", "--text", "t",
               data=tmp_path / "d", check=False)
    assert made.returncode != 0 and "cannot hold '/'" in made.stderr, made.stderr
    (tmp_path / "faq.tsv").write_text("Question\tAnswer\tSource\tMetadata\nHi?\tHello.\tfaq\t\n", encoding="utf-8")
    imported = run("import", "faq/one", str(tmp_path / "faq.tsv"), data=tmp_path / "d", check=False)
    assert imported.returncode != 0 and "cannot hold '/'" in imported.stderr, imported.stderr
    service.store.create_project(Project("old/kb", ""))  # made before names were checked
    service.create_project("my kb.é")  # spaces, dots and letters outside ASCII route fine
    with LiveServer(service) as live:
        paths = get(live, "/tools/openapi.json").json()["paths"]
        assert list(paths) == ["/get_related_my%20kb.%C3%A9"]
        assert httpx.get(live.url + list(paths)[0], params={"subject": "hello"}, timeout=30).status_code == 200


def test_table_cli(tmp_path):
    rows = arxiv_rows(12)
    (tmp_path / "papers.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    args = ["table", "create", "papers", "--text", "title", "--text", "abstract", "--title", "title"]
    for c in ARXIV_COLUMNS:
        args += ["--column", c]
    run(*args, data=tmp_path / "d")
    out = run("table", "load", "papers", str(tmp_path / "papers.jsonl"), data=tmp_path / "d").stdout
    assert "papers: 12 rows from papers.jsonl (24 texts embedded, 0 stale rows deleted)" in out
    bad = run("table", "create", "t2", "--column", "x:Text", "--text", "x", data=tmp_path / "d", check=False)
    assert bad.returncode == 2 and "Array(String)" in bad.stderr


def test_a_jsonl_line_ends_at_a_newline_only():
    """U+2028, U+2029 and U+0085 are legal raw inside a JSON string (JavaScript and ensure_ascii=False write them so):
    the line holding one is one row, not two broken halves."""
    rows = [{"id": "1", "text": "Returns\u2028within 30 days.\u0085Ask us."}, {"id": "2", "text": "Shipping\u2029free."}]
    data = "\r\n".join(json.dumps(r, ensure_ascii=False) for r in rows).encode()
    assert list(read_rows("rows.jsonl", data)) == [(1, rows[0]), (2, rows[1])]


def test_a_column_named_like_a_keyword_is_described_as_a_filter_must_write_it(service):
    """A table with a column `select` was described with the example "select = 'value'", which the server itself
    refuses (a GPT cannot learn the quoting); a KB's metadata keys `and` and `null` alike.  The description writes
    such names in backticks, and what it shows is accepted."""
    create_table(service, "kw", TableSchema([parse_column("select:String"), parse_column("t:String")], ["t"], None))
    load_rows(service, "kw", "kw.jsonl", json.dumps({"select": "value", "t": "a row"}).encode())
    with LiveServer(service) as live:
        op = get(live, "/tools/kw/openapi.json", version="3.1").json()["paths"]["/get_related_kw"]["get"]
        where = next(p for p in op["parameters"] if p["name"] == "where_str")["description"]
        assert "`select` String" in where and where.endswith("Example: `select` = 'value'"), where
        shown = where.rsplit("Example: ", 1)[1]
        r = httpx.get(f"{live.url}/get_related_kw", params={"subject": "row", "where_str": shown}, timeout=30)
        assert r.status_code == 200 and r.json()["num_retrieved"] == 1, r.text


def test_the_where_str_example_is_one_the_server_takes_whatever_the_columns(service):
    """A table whose first column was an Int64 was described with the example "n = 'value'", which the server
    refuses ("n is Int64: it needs a number"), and a Bool one with "flag = 'value'"; GPTs copy examples.  The
    example is now written on a column of a type it suits, and the server takes it."""
    for name, columns in (("ints", ["n:Int64", "flag:Bool", "t:String"]), ("flags", ["flag:Bool", "t:String"]),
                          ("floats", ["price:Float64", "t:String"])):
        create_table(service, name, TableSchema([parse_column(c) for c in columns], ["t"], None))
        row = {"n": 11, "flag": True, "price": 12.5, "t": "a row"}
        load_rows(service, name, f"{name}.jsonl", json.dumps({c.split(":")[0]: row[c.split(":")[0]]
                                                              for c in columns}).encode())
    with LiveServer(service) as live:
        for name in ("ints", "flags", "floats"):
            op = get(live, f"/tools/{name}/openapi.json", version="3.1").json()["paths"][f"/get_related_{name}"]["get"]
            where = next(p for p in op["parameters"] if p["name"] == "where_str")["description"]
            assert where.endswith("Example: t = 'value'"), where  # a table's text columns are String
            shown = where.rsplit("Example: ", 1)[1]
            r = httpx.get(f"{live.url}/get_related_{name}", params={"subject": "row", "where_str": shown}, timeout=30)
            assert r.status_code == 200, r.text


def test_a_metadata_filter_matches_whatever_the_case_a_model_writes(service):
    """A QnA's metadata values are kept lower-cased, as Azure compares them; `color = 'Dark Blue'` (as the owner wrote
    the value, and as a GPT copies it) matched nothing, silently.  Comparisons with a metadata column fold the case;
    one through a function says what it means and is left as written."""
    service.create_project("shop")
    service.upsert("shop", [QnA(["What colour is the sofa?"], "It is blue.", metadata={"Color": "Dark Blue"}),
                            QnA(["What colour is the chair?"], "It is red.", metadata={"Color": "Red"})])
    for where in ("color = 'Dark Blue'", "Color IN ('DARK BLUE', 'green')", "color LIKE 'Dark%'",
                  "color BETWEEN 'Dark A' AND 'Dark C'", "NOT color = 'Red'", "lower(color) = 'dark blue'",
                  "upper(color) = 'DARK BLUE'"):
        hits = service.search("shop", "colour", where=where, limit=5)
        assert [h.record.answer for h in hits] == ["It is blue."], where
    assert service.search("shop", "colour", where="upper(color) = 'Dark Blue'", limit=5) == []


def test_a_subject_of_invisible_characters_is_empty_as_an_azure_question_is(service):
    """A subject of a zero-width space answered four entries at about 0.01 where Azure's runtime calls the same text
    blank (400): every surface now reads it as empty."""
    service.create_project("faq")
    service.upsert("faq", [QnA(["Where is the office?"], "On the third floor.")])
    with LiveServer(service) as live:
        for subject in ("\u200b", " \u200b\ufeff ", "\u200e"):
            for path in ("/get_related_faq", "/tools/faq/search"):
                r = get(live, path, subject=subject)
                assert r.status_code == 400 and "'subject' must not be empty" in r.json()["error"]["message"], r.text
        assert get(live, "/get_related_faq", subject="office").status_code == 200


def test_a_wide_tables_description_keeps_its_syntax_and_says_how_many_columns_it_leaves_out():
    """A 40-column table's where_str description was its column list cut at 700 characters: no syntax, no example,
    and nothing said columns were missing."""
    from openqna.api.tools.openapi import PARAMETER_CHARS, where_description
    from openqna.filters.nodes import Column
    from openqna.kb.service import KnowledgeBaseInfo

    narrow = [Column("name", "String"), Column("price", "Int64")]
    assert "over the columns: name String, price Int64. Use =" in where_description(
        KnowledgeBaseInfo("t", "", "table", 1, narrow))
    wide = where_description(KnowledgeBaseInfo("t", "", "table", 1, [Column(f"column_{i}", "String") for i in range(40)]))
    assert len(wide) <= PARAMETER_CHARS and wide.endswith("Example: column_0 = 'value'"), wide
    shown = re.findall(r"column_\d+ String", wide)
    assert f"(and {40 - len(shown)} more columns)" in wide and len(shown) >= 15
