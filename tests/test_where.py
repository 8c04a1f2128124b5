"""where_str: legitimate filters agree between ``evaluate`` and SQLite, hostile ones are refused with a
useful message, and fuzzing finds neither a crash nor a filter that SQLite and Python disagree on."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openqna.filters.evaluate import WhereError, evaluate, like_regex
from openqna.filters.masks import WhereColumns, encode_columns, where_mask
from openqna.filters.nodes import (
    And,
    Column,
    Compare,
    HasAny,
    IdIn,
    InList,
    KindIn,
    MetaEq,
    Not,
    Ref,
    SourceIn,
    like_parts,
    schema_of,
)
from openqna.filters.sql import add_sqlite_functions, compile_postgres, compile_sqlite
from openqna.filters.syntax import MAX_DEPTH, MAX_LENGTH
from openqna.filters.where_str import parse_where
from openqna.records import InvalidArgument

NOW = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)
SCHEMA = schema_of(
    Column("title", "String"),
    Column("author", "String"),
    Column("price", "Float64"),
    Column("stock", "Int64"),
    Column("active", "Bool"),
    Column("published", "DateTime"),
    Column("tags", "Array(String)"),
)

# DateTimes as datetimes and as the ISO text a store holds (offsets and fractions included on purpose).
ROWS: dict[int, dict] = {
    1: {"title": "Intro to SQL", "author": "Alice", "price": 9.99, "stock": 10, "active": True,
        "published": datetime(2024, 5, 30, 8, tzinfo=UTC), "tags": ["db", "sql"]},
    2: {"title": "Advanced sqlite", "author": "bob", "price": 25.0, "stock": 0, "active": False,
        "published": datetime(2023, 1, 15, tzinfo=UTC), "tags": ["db", "sqlite"]},
    3: {"title": "50% off: LIKE_wildcards", "author": None, "price": 4.5, "stock": 3, "active": True,
        "published": "2024-05-31 23:59:59", "tags": ["sale"]},
    4: {"title": "Back\\slash path C:\\temp", "author": "Ålice", "price": None, "stock": 7, "active": None,
        "published": "2022-12-31T23:30:00-02:00", "tags": []},
    5: {"title": "Glob *star* and ?mark [x]", "author": "Élodie", "price": 100.0, "stock": None, "active": True,
        "published": None},
    6: {"title": "ÉCOLE été", "author": "carol", "price": 0.0, "stock": -5, "active": False,
        "published": "2024-06-01T11:59:59.900", "tags": ["fr", "sale", "db"]},
    7: {"title": "", "author": "dave", "price": 12.5, "stock": 12, "active": True,
        "published": "2024-01-01T00:00:00Z", "tags": ["sql"]},
    8: {"title": "it's a quote", "author": "O'Brien", "price": 19.0, "stock": 100, "active": False,
        "published": datetime(2024, 5, 25, 12, tzinfo=UTC), "tags": ["db", "sql", "sale"]},
    9: {"title": None, "author": None, "price": None, "stock": None, "active": None, "published": None, "tags": None},
    10: {"title": "Line\nbreak title", "author": "eve", "price": 3.0, "stock": 2, "active": True,
         "published": datetime(2024, 5, 25, 12, 0, 1, tzinfo=UTC), "tags": ["x"]},
}  # fmt: skip


def _json_value(v):
    return v.isoformat() if isinstance(v, datetime) else v


@pytest.fixture(scope="module", params=["json", "columns"])
def db(request):
    """The same rows stored two ways: one JSON metadata column, or one SQL column per schema column."""
    conn = sqlite3.connect(":memory:")
    add_sqlite_functions(conn)
    if request.param == "json":
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, metadata TEXT)")
        for rid, row in ROWS.items():
            present = {k: _json_value(v) for k, v in row.items() if not (rid == 9 and v is None)}
            conn.execute("INSERT INTO items VALUES (?, ?)", (rid, json.dumps(present)))
        column_sql = lambda c: f"json_extract(metadata, '$.{c.name}')"
    else:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, title TEXT, author TEXT, price REAL, "
                     "stock INTEGER, active INTEGER, published TEXT, tags TEXT)")  # fmt: skip
        for rid, row in ROWS.items():
            tags = json.dumps(row["tags"]) if row.get("tags") is not None else None
            values = [_json_value(row.get(k)) for k in ("title", "author", "price", "stock", "active", "published")]
            conn.execute("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (rid, *values, tags))
        column_sql = lambda c: f'"{c.name}"'
    yield conn, column_sql
    conn.close()


def python_ids(f) -> set[int]:
    return {rid for rid, row in ROWS.items() if evaluate(f, row)}


def sqlite_ids(db, f) -> set[int]:
    conn, column_sql = db
    sql, params = compile_sqlite(f, column_sql)
    assert sql.count("?") == len(params)
    return {rid for (rid,) in conn.execute(f"SELECT id FROM items WHERE {sql}", params)}


def test_sqlite_has_json1():
    conn = sqlite3.connect(":memory:")
    row = conn.execute("""SELECT json_array_length('["a","b"]'), count(*) FROM json_each('["a"]')""").fetchone()
    assert row == (2, 1)


LEGIT: list[tuple[str, set[int]]] = [
    ("price > 10", {2, 5, 7, 8}),
    ("price >= 9.99 AND stock < 20", {1, 2, 7}),
    ("title = 'it''s a quote'", {8}),
    (r"author = 'O\'Brien'", {8}),
    (r"title LIKE '50\\% off%'", {3}),
    (r"title LIKE '%LIKE\\_wild%'", {3}),
    ("title ILIKE '%sql%'", {1, 2}),
    ("title LIKE '%SQL%'", {1}),
    ("title NOT LIKE '%a%'", {1, 6, 7}),
    ("title LIKE 'Glob *star* and ?mark [x]'", {5}),
    (r"title LIKE '%\\\\%'", {4}),
    ("title LIKE 'Line_break%'", {10}),
    (r"title LIKE '%\nbreak%'", {10}),
    ("lower(title) = 'intro to sql'", {1}),
    ("upper(author) = 'ÅLICE'", {4}),
    ("title ILIKE 'ÉCOLE%'", {6}),
    ("title ILIKE 'école%'", {6}),  # Unicode folding, as ClickHouse's ILIKE
    ("lower(title) LIKE 'école%'", set()),  # ASCII-only folding, as ClickHouse's lower()
    ("length(title) > 15", {3, 4, 5, 10}),
    ("length(tags) >= 2", {1, 2, 6, 8}),
    ("empty(tags)", {4, 5, 9}),
    ("notEmpty(tags)", {1, 2, 3, 6, 7, 8, 10}),
    ("empty(title)", {7}),
    ("has(tags, 'db')", {1, 2, 6, 8}),
    ("NOT has(tags, 'db')", {3, 4, 5, 7, 9, 10}),
    ("hasAny(tags, ['sale', 'x'])", {3, 6, 8, 10}),
    ("hasAll(tags, ['db', 'sql'])", {1, 8}),
    ("active", {1, 3, 5, 7, 10}),
    ("NOT active", {2, 6, 8}),
    ("active != true", {2, 6, 8}),
    ("active = false OR active IS NULL", {2, 4, 6, 8, 9}),
    ("stock IN (0, 7, 100)", {2, 4, 8}),
    ("stock NOT IN (0, 7)", {1, 3, 6, 7, 8, 10}),
    ("stock > '5'", {1, 4, 7, 8}),
    ("stock >= -5 AND stock <= -(5)", {6}),
    ("stock > 2.6", {1, 3, 4, 7, 8}),  # a fraction next to an Int64 column is compared, never rounded
    ("stock BETWEEN 2.5 AND 7.5", {3, 4}),
    ("stock = 10.0", {1}),
    ("price BETWEEN 3 AND 10", {1, 3, 10}),
    ("price NOT BETWEEN 3 AND 10", {2, 5, 6, 7, 8}),
    ("published > parseDateTime32BestEffort('2024-01-01')", {1, 3, 6, 8, 10}),
    ("published > parseDateTime32BestEffort('2024/01/01')", {1, 3, 6, 8, 10}),  # as ClickHouse reads it; was refused
    ("published > now() - INTERVAL 7 DAY", {1, 3, 6, 10}),
    ("published >= now() - INTERVAL 1 WEEK", {1, 3, 6, 8, 10}),
    ("published > today() - INTERVAL 1 MONTH AND published < now()", {1, 3, 6, 8, 10}),
    ("toDate(published) = toDate('2023-01-01')", {4}),
    ("toDate(published) >= today() - 2", {1, 3, 6}),
    ("published BETWEEN '2023-01-01' AND '2023-12-31 23:59:59'", {2, 4}),
    ("published < '2023-01-01T03:00:00+01:00'", {4}),
    ("published = '2024-06-01 11:59:59'", {6}),
    ("published >= parseDateTimeBestEffort('Jan 15, 2023') AND published < toDateTime('2023-01-16')", {2}),
    ("author IS NULL", {3, 9}),
    ("author IS NOT NULL AND NOT (price > 10)", {1, 6, 10}),
    ("(has(tags, 'sql') OR has(tags, 'sale')) AND title LIKE 'I%'", {1}),
    ("NOT (stock > 5 OR price < 5)", {2}),
    ("Price > 50", {5}),
    ('"title" = \'\'', {7}),
    ("`stock` = 12", {7}),
    ("title IN ('', 'it''s a quote') AND stock <> 12", {8}),
    (r"title = 'a\' OR 1=1 --'", set()),  # the escape trick stays inside the string: bound as data
    ("title = 'x'' OR ''1''=''1'", set()),
]


@pytest.mark.parametrize(("text", "expected"), LEGIT, ids=[t for t, _ in LEGIT])
def test_legit_filter_same_rows_in_python_and_sqlite(db, text, expected):
    f = parse_where(text, SCHEMA, now=NOW)
    assert python_ids(f) == expected
    assert sqlite_ids(db, f) == expected


@pytest.mark.parametrize(("text", "expected"), LEGIT, ids=[t for t, _ in LEGIT])
def test_legit_filter_compiles_for_postgres_with_placeholders_only(text, expected):
    sql, params = compile_postgres(parse_where(text, SCHEMA, now=NOW), lambda c: f'"{c.name}"')
    assert sql.count("%s") == len(params) and "%" not in sql.replace("%s", "") and "?" not in sql


# ILIKE folds case as ClickHouse's (MyScale's) ILIKE does, each answer read off chdb 26.9: `title ILIKE pattern`
# selects the row of its text, or not (a where_str copied from a MyScale GPT missed "CAFÉ Straße").
FOLDS: list[tuple[str, str, bool]] = [
    ("CAFÉ Straße", "café%", True), ("café", "CAFÉ", True), ("Le CAFÉ", "%café%", True),
    ("Ärger", "är%", True), ("ärger", "ÄR%", True), ("GROẞE", "große", True), ("ЖУРНАЛ", "журнал", True),
    ("ΜΙΚΡΟ", "μικρο", True), ("ΟΔΥΣΣΕΥΣ", "οδυσσευς", False),  # Σ folds to σ, not to the final ς
    ("ǅemal", "ǅEMAL", True), ("ǆemal", "ǅemal", False),  # a titlecase letter folds to nothing else
    ("\ufb01le", "fi%", False), ("Straße", "STRASSE", False),  # no full folding: ﬁ is not fi, ß is not SS
    ("İstanbul", "i%", False), ("ıspanak", "I%", False), ("Istanbul", "i%", True),  # İ and ı fold with no ASCII letter
]
FOLD_ROWS: dict[int, dict] = {rid: {"title": text} for rid, (text, _, _) in enumerate(FOLDS, 1)}


def fold_ids(pattern: str, rows: dict[int, dict] = FOLD_ROWS) -> set[int]:
    """The rows ``title ILIKE pattern`` selects, by ``evaluate`` and by the index's masks (raw and encoded columns)."""
    f = parse_where(f"title ILIKE '{pattern}'", SCHEMA, now=NOW)
    ids, table = list(rows), [rows[rid] for rid in rows]
    masks = [where_mask(f, WhereColumns(table)), where_mask(f, WhereColumns(None, n=len(table),
                                                                          columns=lambda: encode_columns(table)))]
    python = {rid for rid in ids if evaluate(f, rows[rid])}
    assert all({rid for rid, hit in zip(ids, mask) if hit} == python for mask in masks)
    return python


@pytest.mark.parametrize(("text", "pattern", "selected"), FOLDS)
def test_ilike_folds_case_as_clickhouse_in_memory_and_sqlite(text, pattern, selected):
    rid = next(rid for rid, row in FOLD_ROWS.items() if row["title"] == text)
    expected = fold_ids(pattern)
    assert (rid in expected) is selected
    conn = sqlite3.connect(":memory:")
    add_sqlite_functions(conn)
    conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, title TEXT)")
    conn.executemany("INSERT INTO items VALUES (?, ?)", [(rid, row["title"]) for rid, row in FOLD_ROWS.items()])
    assert sqlite_ids((conn, lambda c: c.name), parse_where(f"title ILIKE '{pattern}'", SCHEMA, now=NOW)) == expected


def test_values_are_bound_never_spliced():
    f = parse_where(r"title = 'a\' OR 1=1 --' OR has(tags, 'x''); DROP TABLE items; --')", SCHEMA)
    for compile_ in (compile_sqlite, compile_postgres):
        sql, params = compile_(f, lambda c: c.name)
        assert "1=1" not in sql and "DROP" not in sql
        assert "a' OR 1=1 --" in params[0] or ["a' OR 1=1 --"] in params


def test_ir_is_typed():
    f = parse_where("stock IN ('1', 2) AND has(tags, 'db') AND lower(title) = 'x'", SCHEMA)
    assert f == And((
        InList(Ref(SCHEMA["stock"]), (1, 2)),
        HasAny(SCHEMA["tags"], ("db",)),
        Compare(Ref(SCHEMA["title"], "lower"), "=", "x"),
    ))  # fmt: skip


def test_dates_fold_with_injected_now():
    f = parse_where("published > now() - INTERVAL 7 DAY AND toDate(published) <= today()", SCHEMA, now=NOW)
    assert f.children[0].value == NOW - timedelta(days=7)
    assert f.children[1].value == date(2024, 6, 1)
    month_end = parse_where("published > toDateTime('2024-03-31') - INTERVAL 1 MONTH", SCHEMA)
    assert month_end.value == datetime(2024, 2, 29, tzinfo=UTC)  # clamped to the month's end


def test_schema_names_are_identifiers_so_stores_can_splice_them():
    with pytest.raises(ValueError, match="identifier"):
        Column("price') OR 1=1 --", "Float64")
    with pytest.raises(ValueError, match="column type"):
        Column("price", "Decimal")


def test_evaluate_delegates_azure_nodes_to_record_fields():
    row = {"@metadata": {"lang": "en"}, "@source": "faq.tsv", "@kind": "qna", "@id": 7, "stock": 3,
           "metadata": "a column may be called metadata", "id": "and id"}
    stock = Compare(Ref(SCHEMA["stock"]), ">", 1)
    f = And((MetaEq("Lang", "EN"), SourceIn(("FAQ.tsv",)), KindIn(("qna",)), IdIn((7,)), stock))
    assert evaluate(f, row)
    assert not evaluate(Not(f), row)


# ---------------------------------------------------------------------------------------------- hostile

HOSTILE: list[tuple[str, str]] = [
    # statements, queries, comments
    ("title = 'x'; DROP TABLE items", "';' is not allowed"),
    ("1=1; DROP TABLE items", "';' is not allowed"),
    ("title = 'x' UNION SELECT name FROM sqlite_master", "UNION is not allowed"),
    ("1=1 UNION ALL SELECT * FROM system.users", "UNION is not allowed"),
    ("stock IN (SELECT id FROM system.tables)", "subqueries"),
    ("(SELECT count() FROM system.one) > 0", "subqueries"),
    ("title = (SELECT name FROM system.users LIMIT 1)", "subqueries"),
    ("EXISTS (SELECT 1)", "subqueries"),
    ("title IN (SELECT title FROM remote('127.0.0.1', system.users))", "subqueries"),
    ("title = 'x' -- trailing comment", "comments"),
    ("title = 'x' /* hidden */ OR 1=1", "comments"),
    ("title = 'x' # hash comment", "comments"),
    ("-- only a comment", "empty filter"),
    ("title = 'x' SETTINGS readonly=0", "SETTINGS is not allowed"),
    ("title = 'x' FORMAT JSON", "FORMAT is not allowed"),
    ("title = 'x' INTO OUTFILE '/tmp/x'", "INTO is not allowed"),
    # table functions, system objects, unknown functions
    ("has(tags, file('/etc/passwd'))", "function not allowed: file()"),
    ("url('http://127.0.0.1:9/x', 'CSV') IS NOT NULL", "function not allowed: url()"),
    ("remote('10.0.0.1', system.users) = 1", "function not allowed: remote()"),
    ("s3('https://bucket/x') = 1", "function not allowed: s3()"),
    ("sleep(3) = 0", "function not allowed: sleep()"),
    ("sleep(3)", "function not allowed: sleep()"),
    ("arrayExists(x -> x = 'a', tags)", "function not allowed: arrayExists()"),
    ("arrayJoin(range(1000000000)) = 1", "function not allowed: arrayJoin()"),
    ("has(tags, 'a') AND dictGet('secrets', 'v', toUInt64(1)) = 'x'", "function not allowed: dictGet()"),
    ("toString(price) = '1'", "function not allowed: toString()"),
    ("match(title, '(a+)+$')", "function not allowed: match()"),
    ("if(active, 1, 0) = 1", "IF()"),
    ("CAST(price AS String) = '1'", "CAST"),
    ("price::String = '1'", "CAST"),
    ("secret = 'x'", "unknown column 'secret'"),
    ("_part = 'all_1_1_0'", "unknown column '_part'"),
    ("system.users.name = 'x'", "syntax error"),
    ("db.items.title = 'x'", "qualified names"),
    ("items.title = 'x'", "qualified names"),
    ("`system.users` = 'x'", "unknown column 'system.users'"),
    ('"password" = \'x\'', "double quotes and backticks name columns"),
    ('title = "x"', "unknown column 'x'"),
    ("title = ‘x’", "unknown column '‘x’'"),
    ("tіtle = 'x'", "unknown column 'tіtle'"),  # Cyrillic і
    ("title ＝ 'x'", "syntax error"),  # fullwidth equals sign
    # type confusion
    ("price = 'abc'", "needs a number"),
    ("tags = 'x'", "tags is Array(String)"),
    ("is_active > 'yes'", "unknown column 'is_active'"),
    ("active > 'yes'", "active is Bool"),
    ("active = 'yes'", "true or false"),
    ("published > 'yesterday'", "unrecognised date/time"),
    ("title = 5", "quoted string"),
    ("has(title, 'x')", "needs an Array(String) column"),
    ("has(tags, 1)", "quoted strings"),
    ("length(active) > 1", "does not apply to active"),
    ("empty(price)", "applies to String and Array(String)"),
    ("toDate(published) > now()", "is Date"),
    ("tags IS NULL", "never NULL"),
    ("title IS TRUE", "IS only takes NULL"),
    ("stock = 99999999999999999999", "Int64 range"),
    ("stock = 1e400", "out of range"),
    ("stock = 0x10", "HexString"),
    # arithmetic, columns against columns, constant conditions
    ("price + 1 > 5", "arithmetic on columns"),
    ("stock * 2 = 4", "arithmetic on columns"),
    ("price > stock", "not with another column"),
    ("title = `title`", "not with another column"),
    ("1=1", "constant conditions"),
    ("true", "constant conditions"),
    ("title = 'x' OR 1=1", "constant conditions"),
    (r"title = 'x\'' OR 1=1", "constant conditions"),
    ("1=1 OR", "OR needs a condition on both sides"),
    ("price = 1 = 1", "not allowed"),
    ("1 < price < 3", "not allowed"),
    # syntax outside the allow-list
    ("title = 'a' 'b'", "string concatenation"),
    ("title = $$raw$$", "RawString"),
    ("title = ?", "query parameters"),
    ("title = {p:String}", "query parameters"),
    ("price > @p", "query parameters"),
    ("title = $1", "unreadable"),
    ("stock IN items", "parenthesised list"),
    ("tags[1] = 'a'", "indexing"),
    ("stock GLOBAL IN (1, 2)", "IS GLOBAL"),
    ("price BETWEEN SYMMETRIC 5 AND 1", "SYMMETRIC"),
    ("title LIKE 'a!%' ESCAPE '!'", "ESCAPE"),
    (r"title LIKE 'abc\\'", "lone backslash"),
    ("title REGEXP '.*'", "REGEXP"),
    ("title GLOB '*'", "Glob"),
    ("title <=> 'x'", "<=>"),
    ("CASE WHEN active THEN 1 END = 1", "not allowed"),
    ("hasAny(tags, ('a', 'b'))", "tuples"),
    ("hasAny(tags, [])", "non-empty"),
    ("has(tags)", "takes 2 arguments"),
    ("has(['a', 'b'], title)", "title IN ('a', 'b')"),
    ("length(title, 'x') > 1", "exactly one column"),
    ("lower(lower(title)) = 'a'", "exactly one column"),
    ("now('Europe/Moscow') > published", "takes no arguments"),
    ("published > now() - INTERVAL 1 FORTNIGHT", "INTERVAL needs"),
    ("published > now() - INTERVAL 99999999999 DAY", "is at most 1000000000"),
    ("published > now() - INTERVAL 1000000001 SECOND", "is at most 1000000000"),  # "needs a whole number" was wrong
    ("published > now() - INTERVAL 100000 YEAR", "out of range"),
    ("stock IN (1, NULL)", "IS NULL"),
    ("title = NULL", "IS NULL"),
    ("stock IN (" + ", ".join(map(str, range(300))) + ")", "max 200"),
    # strings, bytes, sizes, nesting
    ("title = 'unterminated", "unreadable"),
    ("title = 'a\x00b'", "NUL characters"),
    (r"title = 'a\0b'", "NUL characters"),
    ("title = '\ud800'", "lone surrogate"),
    ("", "empty filter"),
    ("   \n\t", "empty filter"),
    ("NOT", "NOT needs a condition after it"),
    ("active AND", "AND needs a condition on both sides"),
    ("AND active", "AND needs a condition on both sides"),
    ("title =", "= needs a column on one side and a value on the other"),
    ("stock BETWEEN 1", "BETWEEN needs a low and a high bound"),
    ("title LIKE", "LIKE needs a column before it and a pattern"),
    ("(title = 'x'", "a closing parenthesis is missing"),
    ("title = 'x')", "syntax error"),
    ("title = 'x' title", "syntax error"),
    ("title = '" + "a" * 100_000 + "'", "characters long"),
    ("(" * 10_000 + "active" + ")" * 10_000, "characters long"),
    ("(" * 100 + "active" + ")" * 100, "nested too deeply"),
    ("NOT " * 30 + "active", "nested too deeply"),
    ("NOT (" * 20 + "active" + ")" * 20, "nested too deeply"),
    ("price > " + "- " * 30 + "1", "nested too deeply"),
    ("has(tags, " + "[" * 30 + "'a'" + "]" * 30 + ")", "nested too deeply"),
    (" OR ".join(["stock = 1"] * 200), "characters long"),
    (" OR ".join(["stock IN (" + ",".join(["1"] * 190) + ")"] * 5), "syntax nodes"),
]


@pytest.mark.parametrize(("text", "fragment"), HOSTILE, ids=[f"{i}:{t[:40]!r}" for i, (t, _) in enumerate(HOSTILE)])
def test_hostile_input_is_refused_with_a_useful_message(text, fragment):
    with pytest.raises(WhereError) as caught:
        parse_where(text, SCHEMA, now=NOW)
    error = caught.value
    assert isinstance(error, InvalidArgument) and error.target == "where_str"
    assert fragment in error.reason
    assert "title String" in error.message and "tags Array(String)" in error.message and "hasAny(" in error.message
    assert "sqlglot" not in error.message and "<class" not in error.message  # the parser's internals stay inside


def test_caps_are_what_the_corpus_assumes():
    assert len(HOSTILE) >= 60
    assert MAX_LENGTH == 2000 and MAX_DEPTH == 24
    assert parse_where(" OR ".join(["stock = 1"] * 150), SCHEMA)  # long flat chains are fine
    assert parse_where("(" * 10 + "NOT active" + ")" * 10, SCHEMA)


# ---------------------------------------------------------------------------------------------- fuzzing

FRAGMENTS = [
    "title", "author", "price", "stock", "active", "published", "tags", "secret", "system.users",
    "=", "!=", "<>", "<", ">=", "AND", "OR", "NOT", "IN", "NOT IN", "BETWEEN", "LIKE", "ILIKE", "IS", "NULL",
    "(", ")", "[", "]", ",", ";", "--", "/*", "*/", "'", "''", "\\", "'a'", "'%a_'", "'\\%'", "1", "-2", "3.5",
    "true", "false", "has(", "hasAny(", "hasAll(", "length(", "lower(", "toDate(", "now()", "today()",
    "INTERVAL 1 DAY", "-", "+", "SELECT", "UNION", "FROM", "sleep(1)", "file(", "`title`", '"x"', "::String",
]  # fmt: skip
FUZZ = settings(max_examples=100, deadline=2000, database=None, suppress_health_check=[HealthCheck.too_slow])


def _check_agreement(text: str, db) -> None:
    """Either a WhereError, or a filter whose SQLite rows are exactly the rows ``evaluate`` accepts."""
    try:
        f = parse_where(text, SCHEMA, now=NOW)
    except WhereError:
        return
    assert sqlite_ids(db, f) == python_ids(f), text


@pytest.fixture(scope="module")
def json_db():
    conn = sqlite3.connect(":memory:")
    add_sqlite_functions(conn)
    conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, metadata TEXT)")
    for rid, row in ROWS.items():
        conn.execute("INSERT INTO items VALUES (?, ?)", (rid, json.dumps({k: _json_value(v) for k, v in row.items()})))
    yield conn, lambda c: f"json_extract(metadata, '$.{c.name}')"
    conn.close()


@FUZZ
@given(text=st.text(max_size=200))
def test_fuzz_random_text(json_db, text):
    _check_agreement(text, json_db)


@FUZZ
@given(text=st.lists(st.sampled_from(FRAGMENTS), max_size=20).map(" ".join))
def test_fuzz_token_soup(json_db, text):
    _check_agreement(text, json_db)


def _quote(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


_text = st.text(alphabet="aAé%_\\*?[]' xsqlSQL", max_size=6)
_pattern_piece = st.sampled_from(["a", "A", "é", "s", "%", "_", "\\%", "\\_", "\\\\", "*", "?", "[", "]", "'", " "])
_pattern = st.lists(_pattern_piece, max_size=5).map("".join)
_atoms = st.one_of(
    st.builds("title {} {}".format, st.sampled_from(["=", "!=", "<", ">="]), _text.map(_quote)),
    st.builds("{}({}) {} {}".format, st.sampled_from(["lower", "upper"]), st.sampled_from(["title", "author"]),
              st.sampled_from(["=", ">"]), _text.map(_quote)),
    st.builds("{} {}LIKE {}".format, st.sampled_from(["title", "author", "lower(title)"]),
              st.sampled_from(["", "NOT ", "I", "NOT I"]), _pattern.map(_quote)),
    st.builds("{} {} {}".format, st.sampled_from(["price", "stock", "length(title)", "length(tags)"]),
              st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), st.integers(-10, 110)),
    st.builds("price {}BETWEEN {} AND {}".format, st.sampled_from(["", "NOT "]), st.floats(-5, 50, allow_nan=False),
              st.floats(-5, 120, allow_nan=False)),
    st.builds("stock {}IN ({})".format, st.sampled_from(["", "NOT "]),
              st.lists(st.integers(-6, 12), min_size=1, max_size=4).map(lambda v: ", ".join(map(str, v)))),
    st.builds("{}({}, {})".format, st.sampled_from(["hasAny", "hasAll"]), st.just("tags"),
              st.lists(st.sampled_from(["db", "sql", "sale", "x", "fr", "none"]), min_size=1, max_size=3).map(
                  lambda v: "[" + ", ".join(map(_quote, v)) + "]")),
    st.builds("has(tags, {})".format, st.sampled_from(["'db'", "'sql'", "'x'", "'zzz'"])),
    st.builds("published {} now() - INTERVAL {} {}".format, st.sampled_from(["<", ">", ">="]), st.integers(0, 800),
              st.sampled_from(["HOUR", "DAY", "WEEK", "MONTH", "YEAR"])),
    st.builds("toDate(published) {} today() - {}".format, st.sampled_from(["=", "<", ">="]), st.integers(0, 600)),
    st.sampled_from(["active", "NOT active", "active = false", "author IS NULL", "title IS NOT NULL", "empty(tags)",
                     "notEmpty(title)", "published IS NULL", "stock IS NOT NULL"]),
)  # fmt: skip
_filters = st.recursive(
    _atoms,
    lambda inner: st.one_of(
        st.builds("({} AND {})".format, inner, inner),
        st.builds("({} OR {})".format, inner, inner),
        st.builds("NOT ({})".format, inner),
    ),
    max_leaves=6,
)


@FUZZ
@given(text=_filters)
def test_fuzz_generated_filters_parse_and_agree(json_db, text):
    f = parse_where(text, SCHEMA, now=NOW)
    assert sqlite_ids(json_db, f) == python_ids(f), text


# ------------------------------------------------------------------------------------ numpy evaluation

_ROW_IDS = list(ROWS)
_ROWS = [ROWS[i] for i in _ROW_IDS]
_COLUMNS = WhereColumns(_ROWS)
# as an index loaded from a snapshot evaluates: columns encoded as codes into distinct values
_ENCODED = WhereColumns(None, n=len(_ROWS), columns=lambda: encode_columns(_ROWS),
                        basic=lambda f: np.asarray([evaluate(f, row) for row in _ROWS], dtype=bool))


def numpy_ids(f, columns=_COLUMNS) -> set[int]:
    return {rid for rid, hit in zip(_ROW_IDS, where_mask(f, columns)) if hit}


@pytest.mark.parametrize(("text", "expected"), LEGIT)
def test_numpy_masks_select_the_reference_rows(text, expected):
    f = parse_where(text, SCHEMA, now=NOW)
    assert numpy_ids(f) == numpy_ids(f, _ENCODED) == python_ids(f) == expected


@FUZZ
@given(text=_filters)
def test_fuzz_numpy_masks_agree_with_the_reference(text):
    f = parse_where(text, SCHEMA, now=NOW)
    assert numpy_ids(f) == numpy_ids(f, _ENCODED) == python_ids(f), text


def test_numpy_mask_of_a_repeated_filter_is_a_fresh_array():
    """Masks of repeated filters are kept per index; a caller may still change the one it gets (Service.rank does)."""
    f = parse_where("price > 5 AND title != ''", SCHEMA, now=NOW)
    first = where_mask(f, _COLUMNS)
    first[:] = ~first
    assert numpy_ids(f) == python_ids(f)
    assert where_mask(f, _COLUMNS) is not where_mask(f, _COLUMNS)


# ------------------------------------------------------------------------------------ LIKE in linear time
def _like_by_table(pattern: str, text: str) -> bool:
    """LIKE by dynamic programming over (pattern part, text position): slow, plain, obviously right."""
    parts = like_parts(pattern)
    ok = [[False] * (len(text) + 1) for _ in range(len(parts) + 1)]
    ok[0][0] = True
    for i, (wildcard, ch) in enumerate(parts, 1):
        any_run = wildcard and ch == "%"
        ok[i][0] = any_run and ok[i - 1][0]
        for j in range(1, len(text) + 1):
            if any_run:
                ok[i][j] = ok[i - 1][j] or ok[i][j - 1]
            else:
                ok[i][j] = ok[i - 1][j - 1] and (wildcard or ch == text[j - 1])
    return ok[-1][-1]


@settings(max_examples=400, deadline=None)
@given(pattern=st.text("ab%_\\", max_size=8).filter(lambda p: not p.endswith("\\") or p.endswith("\\\\")),
       text=st.text("ab%_\\", max_size=8))
def test_like_matches_what_the_table_says(pattern, text):
    try:
        like_parts(pattern)
    except ValueError:
        return
    assert (like_regex(pattern, False).fullmatch(text) is not None) == _like_by_table(pattern, text)


def test_like_with_many_wildcards_takes_linear_time():
    """'%a%a%a%a%ab' over 200 a's backtracked for 36 s in the regex engine, holding the GIL: one where_str stalled
    the whole server. Each % but the last now takes the earliest place the next literals fit, once."""
    rows = [{"title": "a" * 5000}, {"title": "a" * 4999 + "b"}]
    f = parse_where("title LIKE '" + "%a" * 40 + "b' OR title ILIKE '%A%_%A%'", SCHEMA, now=NOW)
    started = time.perf_counter()
    assert [evaluate(f, row) for row in rows] == [True, True]
    assert list(where_mask(f, WhereColumns(rows))) == [True, True]
    f = parse_where("title LIKE '" + "%a" * 40 + "b'", SCHEMA, now=NOW)
    assert list(where_mask(f, WhereColumns(rows))) == [False, True]
    assert time.perf_counter() - started < 2


def test_a_refusal_lists_a_keyword_named_column_as_a_filter_must_write_it():
    """A table with columns `select` and `null` was described in a refusal's "Allowed: columns select Int64, null
    String", and `select = 5` is itself refused ("SELECT is not allowed"): the list writes them in backticks, as the
    tool descriptions do, and what it shows is accepted."""
    schema = {"select": Column("select", "Int64"), "null": Column("null", "String"), "title": Column("title", "String")}
    with pytest.raises(WhereError) as caught:
        parse_where("select = 5", schema)
    assert "columns `select` Int64, `null` String, title String;" in caught.value.message
    assert parse_where("`select` = 5 AND `null` = 'x'", schema) is not None
