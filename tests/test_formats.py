"""Import/export formats: round trips over the real QnA Maker files, grouping, and every error case."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path

import openpyxl
import pytest

from openqna.formats import (
    export_bytes,
    limits,
    qna_table,
    read_csv,
    read_file,
    read_json,
    read_tsv,
    read_xlsx,
    write_json,
    write_synonyms_tsv,
    write_tsv,
    write_xlsx,
)
from openqna.records import Dialog, FormatError, InvalidArgument, KnowledgeBaseContent, ProjectSettings, Prompt, QnA

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
KBS = DATA / "qna-sample-docs" / "knowledge-bases"
SOURCES = DATA / "qna-sample-docs" / "data-source-formats"
CHITCHAT = DATA / "ms-qna-chitchat"

ROUND_TRIP_FILES = [
    *(KBS / name for name in (
        "SampleActiveLearning.tsv", "SampleQnAs.tsv", "SampleQnAs.xlsx", "SampleV2QnAs.tsv", "SampleV2QnAs.xlsx",
        "basic-kb.tsv", "SampleSynonyms.tsv", "SampleSynonyms.xlsx", "SampleV2Synonyms.tsv", "SampleV2Synonyms.xlsx",
        "SampleKBReplica.zip", "SampleKBReplicaWithTsvs.zip", "SampleV2KBReplica.zip", "SampleV2KBReplicaWithTsvs.zip",
    )),
    *(SOURCES / name for name in (
        "Multiturn-Surface-Pro.xlsx", "QnA-Maker-Sample-FAQ.xlsx", "Structured-multi-turn-format.xlsx",
    )),
    *(CHITCHAT / f"qna_chitchat_the_{p}.tsv" for p in ("professional", "friend", "comic")),
    *(CHITCHAT / "legacy-2018-05" / f"Queries_Responses_{p}_QnAMaker.tsv"
      for p in ("Professional", "Friendly", "Humorous")),
]

HEADER = "Question\tAnswer\tSource\tMetadata\tSuggestedQuestions\tIsContextOnly\tPrompts\tQnaId"


def _via(fmt: str, content: KnowledgeBaseContent) -> KnowledgeBaseContent:
    """Export in ``fmt`` and import the bytes again, as a user downloading and re-uploading would."""
    body, filename, _ = export_bytes(content, fmt)
    again = read_file(filename, body)
    if fmt in ("tsv", "csv"):  # a TSV or CSV holds one asset kind; the synonyms travel in their own file
        body, filename, _ = export_bytes(content, fmt, asset_kind="synonyms")
        again.synonyms = read_file(filename, body).synonyms
    return again


@pytest.mark.parametrize("path", ROUND_TRIP_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("fmt", ["tsv", "excel", "json", "csv"])
def test_round_trip_is_lossless(path: Path, fmt: str) -> None:
    content = read_file(path)
    assert content.qnas or content.synonyms
    again = _via(fmt, content)
    assert again.qnas == content.qnas
    assert again.synonyms == content.synonyms


@pytest.mark.parametrize("name", ["SampleQnAs.tsv", "SampleV2QnAs.tsv", "SampleActiveLearning.tsv"])
def test_tsv_export_reproduces_qna_maker_file_exactly(name: str) -> None:
    original = (KBS / name).read_bytes()
    text = write_tsv(read_file(KBS / name))
    assert text == original.decode("utf-8-sig")


def test_chitchat_rows_group_by_answer() -> None:
    content = read_file(CHITCHAT / "qna_chitchat_the_professional.tsv")
    assert len(content.qnas) == 96
    assert sum(len(q.questions) for q in content.qnas) == 653
    first = content.qnas[0]
    assert first.questions[:3] == ["What's your age?", "Are you young?", "When were you born?"]
    assert first.answer == "Age doesn't really apply to me."  # trailing space trimmed
    assert first.metadata == {"editorial": "chitchat"}
    assert first.source == "qna_chitchat_the_professional"
    assert all(q.id is None for q in content.qnas)
    assert len({q.answer for q in content.qnas}) == 96


def test_legacy_three_column_file_keeps_metadata_apart() -> None:
    content = read_file(CHITCHAT / "legacy-2018-05" / "Queries_Responses_Professional_QnAMaker.tsv")
    # 85 distinct answers, but the same answer under different scenarios stays separate.
    assert len({q.answer for q in content.qnas}) == 85
    assert len(content.qnas) == 101
    thanks = [q for q in content.qnas if q.answer == "Thank you."]
    assert sorted(q.metadata["scenario"] for q in thanks) == [
        "compliment_humor", "compliment_response", "greetings_special", "relationship_loveyou",
    ]
    assert all(q.source == "Editorial" for q in content.qnas)
    bye = next(q for q in content.qnas if q.answer == "Bye for now.")
    assert bye.questions[:2] == ["Talk to you later", "Bye"]


def test_rows_sharing_qnaid_become_one_qna_with_prompts_and_suggestions() -> None:
    content = read_file(KBS / "SampleActiveLearning.tsv")
    assert [q.id for q in content.qnas][:4] == [91, 92, 93, 94]
    assert len(content.qnas) == 21  # 22 rows
    pen = content.qnas[0]
    assert pen.dialog.prompts[0] == Prompt(display_order=0, qna_id=92, display_text="Write and draw")
    assert len(pen.dialog.prompts) == 5
    draw = content.qnas[1]
    assert draw.questions == ["Write and draw", "draw with your pen"]
    heads = [c["ClusterHead"] for c in draw.suggested_questions]
    assert heads == ["can i draw with surface pen", "how to write with surface pen"]
    assert draw.suggested_questions[0]["AlternateQuestionList"][0]["UserSuggestedCount"] == 2
    assert draw.dialog.is_context_only is False


def test_structured_multiturn_xlsx_with_camel_case_prompts_and_typed_cells() -> None:
    content = read_file(SOURCES / "Structured-multi-turn-format.xlsx")
    top = content.qnas[0]
    assert top.id == 1 and top.answer == "Top Answer"
    assert top.dialog.prompts == [Prompt(0, 2, "Level 2 Question A"), Prompt(0, 3, "Level 2 - Question B")]
    # Rows 2..5 repeat their question as answer yet are distinct QnAs: their QnaIds differ.
    assert [q.id for q in content.qnas] == [1, 2, 3, 4, 5]


def test_two_column_faq_workbook() -> None:
    content = read_file(SOURCES / "QnA-Maker-Sample-FAQ.xlsx")
    assert len(content.qnas) == 9
    assert content.qnas[0].questions == ["Who is the target audience for the QnA Maker tool?"]
    assert content.qnas[0].answer.startswith("<p>QnA Maker is primarily")
    assert content.qnas[0].source == "Editorial"


def test_kb_replica_zips_match_the_standalone_files() -> None:
    qnas = read_file(KBS / "SampleQnAs.tsv").qnas
    synonyms = [["sdk", "software development kit"], ["channel", "teams", "skype", "whatsapp"]]
    for name in ("SampleKBReplica.zip", "SampleKBReplicaWithTsvs.zip"):
        content = read_file(KBS / name)
        assert content.qnas == qnas
        assert content.synonyms == synonyms
    # The V2 workbook writes the first word unquoted: sdk,"software development kit".
    assert read_file(KBS / "SampleV2KBReplica.zip").synonyms == synonyms


def test_newline_escapes_become_newlines_and_go_back() -> None:
    content = read_file(KBS / "SampleV2QnAs.tsv")
    answer = next(q.answer for q in content.qnas if q.id == 5)
    assert "connected to Skype" in answer
    assert "\n\nIf you already have a great bot" in answer
    assert "\\n" not in answer
    written = write_tsv(content)
    assert "experiences.\\n\\nIf you already have" in written
    assert read_xlsx(write_xlsx(content)).qnas == content.qnas
    workbook = openpyxl.load_workbook(io.BytesIO(write_xlsx(content)))
    cell = workbook["QnAs"]["B6"]
    assert "experiences.\n\nIf you already" in cell.value and cell.alignment.wrap_text  # real, shown line breaks


# Text whose backslashes QnA Maker's files cannot tell from newlines: a Windows path, code, a backslash ending a line.
BACKSLASHED = [r"Path is C:\new\table\file.txt", r"Literal \n sequence", "Ends with C:\\\nthen a new line",
               r"Two \\n, a share \\server\share and a last \\", "Code:\n  print('a\\nb')\r\n  done\rmac"]


@pytest.mark.parametrize("fmt", ["tsv", "excel", "csv", "json"])
def test_backslashes_and_line_breaks_survive_export_and_import(fmt: str) -> None:
    """``C:\\new`` came back from a TSV or workbook as ``C:`` + newline + ``ew``: the export wrote newlines as
    ``\\n`` and left a backslash before an n as it was."""
    content = KnowledgeBaseContent(qnas=[
        QnA(questions=[f"Where is {text}?", "And?"], answer=text, id=i, source=f"src\\n{i}",
            metadata={"path": f"d\\n{i}"}).normalised()
        for i, text in enumerate(BACKSLASHED, start=1)])
    got = _via(fmt, content).qnas
    # A TSV has no escape for a carriage return (readers split rows on it) and a CSV reads CRLF in a cell as LF.
    lossy = {"tsv": lambda t: t.replace("\r\n", "\n").replace("\r", "\n"),
             "csv": lambda t: t.replace("\r\n", "\n")}.get(fmt, lambda t: t)
    assert [(q.answer, q.questions, q.source, q.metadata) for q in got] == [
        (lossy(q.answer), [lossy(x) for x in q.questions], q.source, q.metadata) for q in content.qnas]


def test_qna_maker_newline_escapes_still_read_as_before() -> None:
    """QnA Maker writes a newline as backslash-n and escapes no backslash; its files read as they always did, except
    where two or more backslashes come right before an n (which it wrote ambiguously)."""
    text = (f"{HEADER}\n"
            "Where are logs?\tSee C:\\logs\\app.\\nThen \\\\server\\share.\\n\\nDone\tEditorial\t\t[]\tFalse\t[]\t1\n")
    assert read_tsv(text).qnas[0].answer == "See C:\\logs\\app.\nThen \\\\server\\share.\n\nDone"
    workbook = openpyxl.Workbook()
    workbook.active.append(["Question", "Answer"])
    workbook.active.append(["Where?", "Line one\\nLine two\nLine three"])
    out = io.BytesIO()
    workbook.save(out)
    assert read_xlsx(out.getvalue()).qnas[0].answer == "Line one\nLine two\nLine three"
    assert qna_table.unescape("a\\\\nb \\\\\\nc") == "a\\nb \\\nc"  # pairs are backslashes, an odd one a newline


def test_crlf_bom_and_utf16() -> None:
    text = "Question\tAnswer\tMetadata\r\nHi\tHello\\nthere\tKind:Greeting\r\nHey\tHello\\nthere\tkind:greeting\r\n"
    expected = [QnA(questions=["Hi", "Hey"], answer="Hello\nthere", metadata={"kind": "greeting"})]
    assert read_tsv(text.encode("utf-8")).qnas == expected
    assert read_tsv(b"\xef\xbb\xbf" + text.encode("utf-8")).qnas == expected
    assert read_tsv(text.encode("utf-16")).qnas == expected  # Excel's "Unicode Text"
    assert read_tsv("\ufeff" + text).qnas == expected


def test_header_names_any_case_and_order_and_blank_lines() -> None:
    text = "qnaid\tANSWER\tquestion\n\n7\tA\tQ1\n7\tA\tQ2\n\t\t\n"
    assert read_tsv(text).qnas == [QnA(questions=["Q1", "Q2"], answer="A", id=7)]


def test_tabs_in_text_become_spaces_in_tsv_only() -> None:
    content = KnowledgeBaseContent(qnas=[QnA(questions=["a\tb"], answer="x\ty", id=1)])
    assert read_tsv(write_tsv(content)).qnas[0].answer == "x y"
    assert read_xlsx(write_xlsx(content)).qnas == content.qnas


def test_xlsx_keeps_formula_like_text_as_text() -> None:
    content = KnowledgeBaseContent(qnas=[QnA(questions=["=1+1"], answer="=SUM(A1:A3)", id=4)])
    assert read_xlsx(write_xlsx(content)).qnas == content.qnas


def test_export_writes_ids_only_when_present() -> None:
    content = KnowledgeBaseContent(qnas=[QnA(questions=["q"], answer="a"), QnA(questions=["r"], answer="b", id=9)])
    document = write_json(content)
    assert "Id" not in document["Assets"]["Qnas"][0]
    assert document["Assets"]["Qnas"][1]["Id"] == 9
    assert "Metadata" not in document
    rows = write_tsv(content).splitlines()
    assert rows[1].endswith("\t") and rows[2].endswith("\t9")


def test_qna_without_questions_survives_every_format() -> None:
    content = KnowledgeBaseContent(qnas=[QnA(questions=[], answer="orphan", id=2)])
    for fmt in ("tsv", "excel", "json"):
        assert _via(fmt, content).qnas == content.qnas


def test_export_bytes_names_and_media_types() -> None:
    content = read_file(KBS / "SampleKBReplicaWithTsvs.zip")
    body, name, media = export_bytes(content, "tsv")
    assert (name, media) == ("QnAs.tsv", "text/tab-separated-values; charset=utf-8")
    assert body.startswith(b"\xef\xbb\xbf" + HEADER.encode())
    body, name, _ = export_bytes(content, "tsv", asset_kind="synonyms")
    assert name == "Synonyms.tsv"
    original = (KBS / "SampleSynonyms.tsv").read_text("utf-8-sig")
    assert body.decode("utf-8-sig") == write_synonyms_tsv(content) == original
    body, name, media = export_bytes(content, "json", project_metadata={"ProjectName": "p", "Language": "en"})
    document = json.loads(body)
    assert (name, media) == ("KnowledgeBase.json", "application/json")
    assert document["Metadata"]["ProjectName"] == "p"
    assert document["Assets"]["Synonyms"][0] == {"Alterations": ["sdk", "software development kit"]}
    body, name, _ = export_bytes(content, "excel", asset_kind="synonyms")
    again = read_file(name, body)
    assert again.qnas == [] and again.synonyms == content.synonyms


# --- Azure JSON ------------------------------------------------------------------------------


def test_azure_json_export_shape() -> None:
    content = read_file(KBS / "SampleActiveLearning.tsv")
    record = write_json(content)["Assets"]["Qnas"][1]
    assert record["Id"] == 92
    assert record["Questions"] == ["Write and draw", "draw with your pen"]
    prompt = {"DisplayOrder": 0, "QnaId": 93, "DisplayText": "Start inking with your pen"}
    assert record["Dialog"]["Prompts"][0] == prompt
    assert record["ActiveLearningSuggestions"][0] == {
        "ClusterHead": "can i draw with surface pen",
        "SuggestedQuestions": [
            {"Question": "can i draw with surface pen", "UserSuggestedCount": 2, "AutoSuggestedCount": 10}
        ],
    }


def test_azure_json_keys_are_case_insensitive() -> None:
    document = {
        "METADATA": {"ProjectName": "x"},
        "aSSETS": {
            "QNAS": [
                {
                    "iD": "3",
                    "ANSWER": " The answer ",
                    "source": "faq.docx",
                    "qUESTIONS": ["How? ", "Why"],
                    "MetaData": [{"KEY": "Category", "vAlUe": "API"}],
                    "DIALOG": {
                        "isCONTEXTonly": "true",
                        "PROMPTS": [{"displayorder": 1, "QNAID": 4, "DisplayTEXT": "More"}],
                    },
                    "activelearningSUGGESTIONS": [
                        {
                            "CLUSTERHEAD": "how",
                            "suggestedQUESTIONS": [
                                {"QUESTION": "how", "usersuggestedcount": 1, "AUTOSUGGESTEDCOUNT": 3}
                            ],
                        }
                    ],
                    "LastUpdatedDateTime": "2021-05-01T17:21:14Z",
                }
            ],
            "SYNONYMS": [{"ALTERATIONS": ["wa", "washington"]}],
        },
    }
    content = read_json(json.dumps(document).encode())
    assert content.qnas == [
        QnA(
            questions=["How?", "Why"],
            answer="The answer",
            id=3,
            source="faq.docx",
            metadata={"category": "api"},
            dialog=Dialog(is_context_only=True, prompts=[Prompt(1, 4, "More")]),
            suggested_questions=[
                {
                    "ClusterHead": "how",
                    "TotalAutoSuggestedCount": 3,
                    "TotalUserSuggestedCount": 1,
                    "AlternateQuestionList": [{"Question": "how", "AutoSuggestedCount": 3, "UserSuggestedCount": 1}],
                }
            ],
        )
    ]
    assert content.synonyms == [["wa", "washington"]]


def test_camel_case_import_body_equals_pascal_case_export() -> None:
    body = {
        "assets": {
            "synonyms": [{"alterations": ["wa", "washington", "washington state"]}],
            "qnas": [
                {"id": 1, "answer": "ans1", "source": "source1", "questions": ["question 1.1", "question 1.2"],
                 "metadata": {"k1": "v1", "k2": "v2"},
                 "dialog": {"isContextOnly": False,
                            "prompts": [{"displayOrder": 1, "qnaId": 2, "displayText": "prompt 1.1"}]}},
                {"id": 2, "answer": "ans2", "source": "source2", "questions": ["question 2.1", "question 2.2"]},
            ],
        }
    }
    content = read_json(body)
    assert [q.id for q in content.qnas] == [1, 2]
    assert content.qnas[0].metadata == {"k1": "v1", "k2": "v2"}
    assert content.qnas[0].dialog.prompts == [Prompt(1, 2, "prompt 1.1")]
    assert content.qnas[1].dialog == Dialog()
    assert read_json(write_json(content)) == content


def test_json_id_zero_or_missing_means_unassigned() -> None:
    content = read_json({"assets": {"qnas": [{"id": 0, "answer": "a", "questions": ["q"]}, {"answer": "b"}]}})
    assert [q.id for q in content.qnas] == [None, None]


def test_json_without_assets_holds_its_settings_alone() -> None:
    assert read_json(b'{"Metadata": {"ProjectName": "IssacNewton"}}') == KnowledgeBaseContent(settings=ProjectSettings())
    assert read_json({"metadata": {"language": "en"}}, "import body") == KnowledgeBaseContent(
        settings=ProjectSettings(language="en"))


def test_json_of_another_shape_is_refused_not_imported_as_nothing(tmp_path: Path) -> None:
    err = _tsv_error(tmp_path, '{"qnas": [{"questions": ["hi"], "answer": "hello"}]}', name="other.json")
    assert "has no 'Assets'" in err.message and "'qnas'" in err.message


def test_json_array_of_qnas() -> None:
    listed = b'[{"questions": ["hi", "hello"], "answer": "Hello!", "metadata": {"kind": "greeting"}, "id": 4}]'
    assert read_file("qnas.json", listed).qnas == [QnA(questions=["hi", "hello"], answer="Hello!",
                                                       metadata={"kind": "greeting"}, id=4)]
    with pytest.raises(FormatError) as caught:
        read_file("qnas.json", b'[{"questions": ["hi"], "answer": "Hello!"}, {"questions": ["bye"]}]')
    assert "qnas.json: [1].Answer: is required" in caught.value.message


# --- malformed input -------------------------------------------------------------------------


def _tsv_error(tmp_path: Path, text: str | bytes, name: str = "bad.tsv") -> FormatError:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    with pytest.raises(FormatError) as caught:
        read_file(path)
    assert caught.value.file == name
    return caught.value


def _row(question: str = "Q", answer: str = "A", source: str = "", metadata: str = "", suggestions: str = "[]",
         context: str = "False", prompts: str = "[]", qna_id: str = "1") -> str:
    return "\t".join([question, answer, source, metadata, suggestions, context, prompts, qna_id])


def _with_bad_row(row: str) -> str:
    return f"{HEADER}\n{_row()}\n{row}\n"  # the bad row is line 3


def test_error_bad_prompts_json(tmp_path: Path) -> None:
    err = _tsv_error(tmp_path, _with_bad_row(_row(prompts='[{"DisplayOrder":0,', qna_id="2")))
    assert (err.line, err.column) == (3, 7)
    assert "Prompts" in err.message and "invalid JSON" in err.message


def test_error_prompt_without_qna_id(tmp_path: Path) -> None:
    err = _tsv_error(tmp_path, _with_bad_row(_row(prompts='[{"DisplayOrder":0,"DisplayText":"x"}]', qna_id="2")))
    assert (err.line, err.column) == (3, 7)
    assert "Prompts[0].QnaId" in err.message


def test_error_inline_prompt_qna_unsupported(tmp_path: Path) -> None:
    prompts = '[{"DisplayOrder":0,"QnaId":5,"Qna":{"answer":"x"},"DisplayText":"x"}]'
    err = _tsv_error(tmp_path, _with_bad_row(_row(prompts=prompts, qna_id="2")))
    assert (err.line, err.column) == (3, 7)
    assert "inline" in err.message


def test_error_too_many_prompts(tmp_path: Path) -> None:
    many = range(limits.MAX_PROMPTS + 1)
    prompts = json.dumps([{"DisplayOrder": i, "QnaId": 100 + i, "DisplayText": f"p{i}"} for i in many])
    err = _tsv_error(tmp_path, _with_bad_row(_row(prompts=prompts, qna_id="2")))
    assert (err.line, err.column) == (3, 7)
    assert "21 prompts" in err.message


def test_error_prompt_display_text_too_long(tmp_path: Path) -> None:
    prompts = json.dumps([{"DisplayOrder": 0, "QnaId": 5, "DisplayText": "x" * (limits.MAX_PROMPT_TEXT_CHARS + 1)}])
    err = _tsv_error(tmp_path, _with_bad_row(_row(prompts=prompts, qna_id="2")))
    assert (err.line, err.column) == (3, 7)
    assert "DisplayText" in err.message


def test_error_too_few_fields(tmp_path: Path) -> None:
    err = _tsv_error(tmp_path, _with_bad_row("Q2\tA2\tsrc"))
    assert (err.line, err.column) == (3, 4)
    assert "expected 8 fields" in err.message and "found 3" in err.message


def test_error_too_many_fields(tmp_path: Path) -> None:
    err = _tsv_error(tmp_path, _with_bad_row(_row(qna_id="2") + "\textra"))
    assert (err.line, err.column) == (3, 9)


def test_error_empty_answer(tmp_path: Path) -> None:
    err = _tsv_error(tmp_path, _with_bad_row(_row(answer="  ", qna_id="2")))
    assert (err.line, err.column) == (3, 2)
    assert err.message.startswith("bad.tsv, line 3, column 2: Answer:")


def test_error_metadata_pair_without_colon(tmp_path: Path) -> None:
    err = _tsv_error(tmp_path, _with_bad_row(_row(metadata="category:api|chitchat", qna_id="2")))
    assert (err.line, err.column) == (3, 4)
    assert "'chitchat' is not a key:value pair" in err.message


@pytest.mark.parametrize(
    "metadata, words",
    [
        ("my key:value", "letters (a-z, A-Z), digits"),
        ("ключ:значение", "ASCII letters"),  # letters, but not the ones a key may hold: said so
        ("key:", "empty value"),
        ("key:a:b", "must not contain"),
        ("Key:a|key:b", "appears twice"),
        ("k" * 101 + ":v", "limit is 100"),
        ("k:" + "v" * 501, "limit is 500"),
    ],
)
def test_error_invalid_metadata(tmp_path: Path, metadata: str, words: str) -> None:
    err = _tsv_error(tmp_path, _with_bad_row(_row(metadata=metadata, qna_id="2")))
    assert (err.line, err.column) == (3, 4)
    assert words in err.message


def test_error_bad_is_context_only(tmp_path: Path) -> None:
    err = _tsv_error(tmp_path, _with_bad_row(_row(context="maybe", qna_id="2")))
    assert (err.line, err.column) == (3, 6)
    assert "IsContextOnly" in err.message


@pytest.mark.parametrize("qna_id", ["abc", "-4", "2.5"])
def test_error_bad_qna_id(tmp_path: Path, qna_id: str) -> None:
    err = _tsv_error(tmp_path, _with_bad_row(_row(qna_id=qna_id)))
    assert (err.line, err.column) == (3, 8)
    assert "positive integer" in err.message


def test_error_bad_suggested_questions(tmp_path: Path) -> None:
    err = _tsv_error(tmp_path, _with_bad_row(_row(suggestions='[{"ClusterHead":"x"}]', qna_id="2")))
    assert (err.line, err.column) == (3, 5)
    assert "AlternateQuestionList" in err.message


def test_error_rows_with_same_qnaid_disagree(tmp_path: Path) -> None:
    err = _tsv_error(tmp_path, _with_bad_row(_row(question="Q2", answer="Other", qna_id="1")))
    assert (err.line, err.column) == (3, 2)
    assert "line 2" in err.message


def test_error_question_and_answer_too_long(tmp_path: Path) -> None:
    err = _tsv_error(tmp_path, _with_bad_row(_row(question="q" * (limits.MAX_QUESTION_CHARS + 1), qna_id="2")))
    assert (err.line, err.column) == (3, 1)
    err = _tsv_error(tmp_path, _with_bad_row(_row(answer="a" * (limits.MAX_ANSWER_CHARS + 1), qna_id="2")))
    assert (err.line, err.column) == (3, 2)
    assert "25,000" in err.message


def test_error_not_utf8(tmp_path: Path) -> None:
    data = f"{HEADER}\n{_row()}\n".encode() + "Qué pasa\tNada".encode("cp1252") + b"\n"
    err = _tsv_error(tmp_path, data)
    assert (err.line, err.column) == (3, 3)
    assert "UTF-8" in err.message


def test_error_unknown_and_missing_columns(tmp_path: Path) -> None:
    err = _tsv_error(tmp_path, "Question\tAnswer\tMetdata\nq\ta\tx:y\n")
    assert (err.line, err.column) == (1, 3)
    assert "'Metdata'" in err.message
    err = _tsv_error(tmp_path, "Question\tSource\nq\ts\n")
    assert (err.line, err.column) == (1, None)
    assert "'Answer'" in err.message
    err = _tsv_error(tmp_path, "Question\tAnswer\tanswer\nq\ta\ta\n")
    assert (err.line, err.column) == (1, 3)


def test_scenario_response_files_become_chitchat_qnas(tmp_path: Path) -> None:
    content = read_file(SOURCES / "Scenario_Responses_Friendly.tsv")
    lines = (SOURCES / "Scenario_Responses_Friendly.tsv").read_text(encoding="utf-8-sig").strip().splitlines()
    assert len(content.qnas) == len(lines) - 1
    first = content.qnas[0]
    scenario, response = lines[1].split("\t")
    assert first.questions == [scenario.replace("_", " ")] and first.answer == response.strip()
    assert first.metadata == {"editorial": "chitchat", "scenario": scenario.lower()}
    err = _tsv_error(tmp_path, "Scenario\tResponse\nBot_Age\tAgeless\nBot_Name\n")
    assert err.line == 3 and "scenario and a response" in err.message


def test_error_bad_synonym_row(tmp_path: Path) -> None:
    err = _tsv_error(tmp_path, 'Synonyms\n"a","b"\n"a",,"c"\n')
    assert (err.line, err.column) == (3, 1)
    assert "empty word" in err.message


def test_error_unsupported_extension(tmp_path: Path) -> None:
    err = _tsv_error(tmp_path, "Question,Answer\n", name="kb.ods")
    assert "unsupported file type '.ods'" in err.message
    assert ".csv" in err.message  # the list of what import reads


def test_error_file_too_large() -> None:
    with pytest.raises(FormatError, match="limit for .xlsx"):
        read_file("big.xlsx", b"\0" * (limits.MAX_XLSX_FILE_BYTES + 1))


def test_error_zip_without_kb_files() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("Settings.tsv", "Key\tValue\n")
    with pytest.raises(FormatError, match="neither KnowledgeBaseReplica.xlsx nor QnAs.tsv"):
        read_file("replica.zip", buffer.getvalue())


def test_error_inside_zip_names_the_member() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("QnAs.tsv", "Question\tAnswer\nq\t\n")
    with pytest.raises(FormatError) as caught:
        read_file("replica.zip", buffer.getvalue())
    assert caught.value.file == "replica.zip/QnAs.tsv"
    assert (caught.value.line, caught.value.column) == (2, 2)


# XLSX errors name the sheet row and column letter.


def _workbook(rows: list[list[object]], title: str = "QnAs") -> bytes:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = title
    for row in rows:
        sheet.append(row)
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def _xlsx_error(data: bytes) -> FormatError:
    with pytest.raises(FormatError) as caught:
        read_file("bad.xlsx", data)
    return caught.value


def test_xlsx_error_empty_answer() -> None:
    err = _xlsx_error(_workbook([["Question", "Answer"], ["q1", "a1"], ["q2", "a2"], ["q3", "a3"], ["q4", None]]))
    assert (err.line, err.column) == (5, 2)
    assert "sheet 'QnAs', row 5, column B: Answer:" in err.message


def test_xlsx_error_bad_prompts_and_qna_id() -> None:
    err = _xlsx_error(_workbook([["Question", "Answer", "Prompts", "QnaId"], ["q", "a", "[oops", 1]]))
    assert (err.line, err.column) == (2, 3)
    assert "column C: Prompts: invalid JSON" in err.message
    err = _xlsx_error(_workbook([["Question", "Answer", "QnaId"], ["q", "a", "one"]]))
    assert (err.line, err.column) == (2, 3)


def test_xlsx_error_value_outside_header() -> None:
    err = _xlsx_error(_workbook([["Question", "Answer"], ["q", "a", None, "stray"]]))
    assert (err.line, err.column) == (2, 4)
    assert "column D" in err.message


def test_xlsx_error_formula() -> None:
    err = _xlsx_error(_workbook([["Question", "Answer"], ["q", "=A2"]]))
    assert (err.line, err.column) == (2, 2)
    assert "formulas" in err.message


def test_xlsx_error_no_qna_header_points_at_first_sheet() -> None:
    err = _xlsx_error(_workbook([["Scenario", "Response"], ["Bot_Age", "Ageless"]], title="Sheet1"))
    assert (err.line, err.column) == (1, 1)
    assert "'Scenario'" in err.message


def test_xlsx_error_not_a_workbook() -> None:
    assert "not a readable .xlsx" in _xlsx_error(b"PK\x03\x04 not really").message


def test_xlsx_error_names_a_password_or_the_legacy_format() -> None:
    """Excel saves a workbook with a password (and an .xls) as an OLE file, not as a damaged ZIP."""
    message = _xlsx_error(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504)).message
    assert "password-protected or in the legacy .xls format" in message and "damaged" not in message


def test_xlsx_finds_qna_sheet_after_other_sheets() -> None:
    workbook = openpyxl.Workbook()
    workbook.active.append(["Key", "Value"])
    workbook.create_sheet("Data").append(["Answer", "Question"])
    workbook["Data"].append(["a", "q"])
    out = io.BytesIO()
    workbook.save(out)
    assert read_xlsx(out.getvalue()).qnas == [QnA(questions=["q"], answer="a")]


# JSON errors: json's line/column for syntax, a path for schema.


def _json_error(text: str) -> FormatError:
    with pytest.raises(FormatError) as caught:
        read_file("bad.json", text.encode())
    return caught.value


def test_json_syntax_error_line_and_column() -> None:
    err = _json_error('{\n  "Assets": {\n    "Qnas": [,]\n  }\n}')
    assert (err.line, err.column) == (3, 14)


def test_json_schema_errors_name_the_path() -> None:
    good = {"Id": 1, "Answer": "a", "Questions": ["q"]}
    cases = [
        ({"Id": 2, "Questions": ["q"]}, "Assets.Qnas[1].Answer: is required"),
        ({"Id": 2, "Answer": "   ", "Questions": ["q"]}, "Assets.Qnas[1].Answer: is empty"),
        ({"Id": 2, "Answer": "a", "Questions": ["q", "x" * 1001]}, "Assets.Qnas[1].Questions[1]:"),
        ({"Id": 1, "Answer": "a", "Questions": ["q"]}, "Assets.Qnas[1].Id: 1 is also the Id of Assets.Qnas[0]"),
        ({"Id": 2, "Answer": "a", "Metadata": {"bad key": "v"}}, "Assets.Qnas[1].Metadata.bad key:"),
        ({"Id": 2, "Answer": "a", "Dialog": {"Prompts": [{"QnaId": "x", "DisplayText": "t"}]}},
         "Assets.Qnas[1].Dialog.Prompts[0].QnaId:"),
        ({"Id": 2, "Answer": "a", "Dialog": {"IsContextOnly": "sometimes"}}, "Assets.Qnas[1].Dialog.IsContextOnly:"),
        ({"Id": -2, "Answer": "a"}, "Assets.Qnas[1].Id:"),
        ("not an object", "Assets.Qnas[1]: must be an object"),
    ]
    for qna, expected in cases:
        err = _json_error(json.dumps({"Assets": {"Qnas": [good, qna]}}))
        assert expected in err.message, (expected, err.message)
        assert err.line is None
    err = _json_error(json.dumps({"Assets": {"Synonyms": [{"Alterations": [f"w{i}" for i in range(21)]}]}}))
    assert "Assets.Synonyms[0].Alterations: has 21 words" in err.message
    assert "(root): must be an object" in _json_error('"Assets"').message
    assert "empty array" in _json_error("[]").message


# --- CSV ---------------------------------------------------------------------------------------------------------


def _as_csv(path: Path, separator: str = ",") -> bytes:
    """A QnA Maker TSV saved as a spreadsheet saves it as CSV: quoted cells, real newlines instead of ``\\n``."""
    lines = [line.removesuffix("\r") for line in qna_table.decode_text(path.read_bytes(), path.name).split("\n")]
    header = lines[0].split("\t")
    text_columns = {i for i, name in enumerate(header) if name.strip().lower() in ("question", "answer", "source",
                                                                                    "metadata")}
    out = io.StringIO()
    writer = csv.writer(out, delimiter=separator, lineterminator="\r\n")
    writer.writerow(header)
    for line in lines[1:]:
        if line.strip("\t "):
            writer.writerow([qna_table.unescape(cell) if i in text_columns else cell
                             for i, cell in enumerate(line.split("\t"))])
    return out.getvalue().encode("utf-8")


@pytest.mark.parametrize("separator", [",", ";"])
@pytest.mark.parametrize("path", [KBS / "SampleV2QnAs.tsv", KBS / "SampleActiveLearning.tsv",
                                  CHITCHAT / "qna_chitchat_the_professional.tsv"], ids=lambda p: p.name)
def test_csv_holds_what_the_tsv_holds(path: Path, separator: str) -> None:
    expected = read_file(path)
    assert any(q.dialog.prompts or "\n" in q.answer or "," in q.answer for q in expected.qnas)  # cells to quote
    got = read_file(path.with_suffix(".csv").name, _as_csv(path, separator))
    assert got.qnas == expected.qnas


def test_csv_quotes_commas_newlines_and_quotes() -> None:
    text = ('question,ANSWER,Metadata\r\n'
            '"How do I reset, or change, my password?","Open Settings, then:\r\n1. click ""Reset""\r\n2. confirm",'
            'area:account\r\n'
            '"Forgot my password","Open Settings, then:\r\n1. click ""Reset""\r\n2. confirm",area:account\r\n'
            '\r\n,,\r\n'
            r'Where are logs?,"In C:\new\logs, by default",' '\r\n')
    assert read_csv(b"\xef\xbb\xbf" + text.encode("utf-8")).qnas == [
        QnA(questions=["How do I reset, or change, my password?", "Forgot my password"],
            answer='Open Settings, then:\n1. click "Reset"\n2. confirm', metadata={"area": "account"}),
        QnA(questions=["Where are logs?"], answer=r"In C:\new\logs, by default"),  # a CSV escapes nothing
    ]
    assert read_csv(text.encode("utf-16")).qnas == read_csv(text.encode("utf-8")).qnas


def test_csv_separators_widths_ids_and_prompts() -> None:
    # Excel where the comma is the decimal mark: semicolons, and rows as wide as the widest row
    semicolons = "Question;Answer;QnaId;Prompts;;\nWhat is the fee?;It is 1,50 EUR.;1;;;\nAnd for students?;Free.;2;;\n"
    assert read_csv(semicolons).qnas == [QnA(questions=["What is the fee?"], answer="It is 1,50 EUR.", id=1),
                                          QnA(questions=["And for students?"], answer="Free.", id=2)]
    tabs = "Question\tAnswer\nhi\thello\n"
    assert read_csv(tabs).qnas == [QnA(questions=["hi"], answer="hello")]
    prompts = ('Question,Answer,QnaId,Prompts\n'
               'Fees?,See below.,1,"[{""DisplayOrder"":0,""QnaId"":2,""DisplayText"":""Students""}]"\n'
               'Students?,Free.,2,\n')
    first = read_csv(prompts).qnas[0]
    assert first.dialog.prompts == [Prompt(display_order=0, qna_id=2, display_text="Students")]


def test_csv_synonyms() -> None:
    text = 'Synonyms\n"sdk, software development kit"\nkb,knowledge base,faq\n'
    assert read_csv(text).synonyms == [["sdk", "software development kit"], ["kb", "knowledge base", "faq"]]


def test_csv_errors_name_the_line_a_row_starts_on(tmp_path: Path) -> None:
    err = _tsv_error(tmp_path, 'Question,Answer\nhi,"hello\nthere"\nbye,,\n', name="kb.csv")
    assert (err.line, err.column) == (4, 2) and "Answer" in err.message  # the row after the two-line one
    err = _tsv_error(tmp_path, "Question,Answer\nhi,hello,surprise\n", name="kb.csv")
    assert (err.line, err.column) == (2, 3) and "outside the header" in err.message
    err = _tsv_error(tmp_path, 'Question,Answer\nhi,hello\nbye,"see you\n', name="kb.csv")
    assert err.line == 3 and "CSV" in err.message  # a quote never closed
    err = _tsv_error(tmp_path, "Frage,Antwort\nHallo,Guten Tag\n", name="kb.csv")
    assert err.line == 1 and "unknown column 'Frage'" in err.message
    err = _tsv_error(tmp_path, "Question,Answer\nCaf\xe9?,Oui\n".encode("cp1252"), name="kb.csv")
    assert (err.line, err.column) == (2, 4) and "UTF-8" in err.message
    err = _tsv_error(tmp_path, "", name="kb.csv")
    assert "empty" in err.message
    with pytest.raises(FormatError, match="limit for .csv"):
        read_file("big.csv", b"Question,Answer\n" + b"a,b\n" * (limits.MAX_TEXT_FILE_BYTES // 4))


def test_csv_export_keeps_what_a_tsv_cannot() -> None:
    content = KnowledgeBaseContent(qnas=[QnA(questions=["Where, exactly?"], answer='In "C:\\new"\nand\ttabbed',
                                             metadata={"area": "files"})])
    body, filename, media = export_bytes(content, "csv")
    assert (filename, media) == ("QnAs.csv", "text/csv; charset=utf-8") and body.startswith(b"\xef\xbb\xbf")
    assert read_file(filename, body).qnas == content.qnas
    assert read_file("QnAs.tsv", export_bytes(content, "tsv")[0]).qnas != content.qnas  # \\n and tab do not survive


FORMULA_LIKE = ["=SUM(A1:A3)", "+1", "-x", "@a", "'=already quoted", "A normal answer."]


def test_csv_export_keeps_formulas_from_running_and_reads_them_back() -> None:
    """A CSV export, for review in a spreadsheet, wrote =SUM(A1:A3) as it is, so the spreadsheet ran it as a formula
    (OWASP's CSV injection); OWASP's leading apostrophe is written before such cells and read off again."""
    content = KnowledgeBaseContent(
        qnas=[QnA([f"question {i}", text], text, id=i + 1, source=text) for i, text in enumerate(FORMULA_LIKE)],
        synonyms=[["=cmd", "+x", "plain"]])
    body, filename, _ = export_bytes(content, "csv")
    rows = list(csv.reader(io.StringIO(body.decode("utf-8-sig"))))
    assert [row[1] for row in rows[1::2]] == ["'=SUM(A1:A3)", "'+1", "'-x", "'@a", "''=already quoted",
                                              "A normal answer."]
    assert [row[0] for row in rows[2::2]] == [row[1] for row in rows[1::2]]  # questions and sources too
    assert [row[2] for row in rows[1::2]] == [row[1] for row in rows[1::2]]
    assert read_file(filename, body).qnas == content.qnas
    synonyms, name, _ = export_bytes(content, "csv", "synonyms")
    assert synonyms.decode("utf-8-sig").splitlines()[1] == "'=cmd,'+x,plain"
    assert read_file(name, synonyms).synonyms == content.synonyms
    # a tab or a carriage return first is a formula's start to a spreadsheet too; an apostrophe alone is not
    raw = KnowledgeBaseContent(qnas=[QnA(["\t=1+1"], "\r=2", id=1), QnA(["'quoted"], "it's", id=2)])
    assert [row[:2] for row in csv.reader(io.StringIO(export_bytes(raw, "csv")[0].decode("utf-8-sig")))][1:] == [
        ["'\t=1+1", "'\r=2"], ["'quoted", "it's"]]
    # QnA Maker's TSV is written as it is, and a workbook holds text cells, never formulas
    tsv = export_bytes(content, "tsv")[0].decode("utf-8-sig")
    assert "\n=SUM(A1:A3)\t=SUM(A1:A3)\t=SUM(A1:A3)\t" in tsv and "'=SUM" not in tsv
    sheet = openpyxl.load_workbook(io.BytesIO(write_xlsx(content))).worksheets[0]
    cells = [cell for row in sheet.iter_rows(min_row=2) for cell in row[:3]]
    assert {c.value for c in cells} >= {"=SUM(A1:A3)", "+1", "-x", "@a"} and {c.data_type for c in cells} == {"s"}


def test_json_keeps_what_a_record_is() -> None:
    """Passages were written as plain QnAs, so an imported export answered with them as QnAs."""
    content = KnowledgeBaseContent(qnas=[QnA(["Care"], "Wipe it with a dry cloth.", id=1, kind="passage"),
                                         QnA(["How do I clean it?"], "With a dry cloth.", id=2)])
    written = write_json(content)["Assets"]["Qnas"]
    assert written[0]["Kind"] == "passage" and "Kind" not in written[1]
    assert [q.kind for q in _via("json", content).qnas] == ["passage", "qna"]
    body = {"assets": {"qnas": [{"id": 1, "answer": "a", "questions": ["q"], "kind": "Passage"},
                                {"id": 2, "answer": "b", "questions": ["r"], "kind": "qna"}]}}
    assert [q.kind for q in read_json(body).qnas] == ["passage", "qna"]
    for kind in ("row", 3):
        with pytest.raises(FormatError, match=r"Assets.Qnas\[0\].Kind"):
            read_json({"assets": {"qnas": [{"answer": "a", "questions": ["q"], "kind": kind}]}})


@pytest.mark.parametrize("fmt", ["tsv", "excel", "csv"])
def test_tables_keep_what_a_record_is(fmt: str) -> None:
    """A table export turned a document's passages into QnAs, so a restore answered with them as QnAs."""
    content = KnowledgeBaseContent(qnas=[QnA(["Care"], "Wipe it with a dry cloth.", id=1, kind="passage"),
                                         QnA([], "Charge it for two hours.", id=2, kind="passage"),
                                         QnA(["How do I clean it?"], "With a dry cloth.", id=3)])
    body, filename, _ = export_bytes(content, fmt)
    again = read_file(filename, body)
    assert [(q.id, q.kind, q.questions) for q in again.qnas] == [(1, "passage", ["Care"]), (2, "passage", []),
                                                                 (3, "qna", ["How do I clean it?"])]
    only_qnas = KnowledgeBaseContent(qnas=content.qnas[2:])  # QnA Maker's eight columns, as before
    body, filename, _ = export_bytes(only_qnas, fmt)
    assert read_file(filename, body).qnas == only_qnas.qnas
    if fmt != "excel":
        assert "Kind" not in body.decode("utf-8-sig").splitlines()[0]


def test_a_table_refuses_a_kind_it_does_not_know(tmp_path: Path) -> None:
    text = "Question\tAnswer\tKind\nhi\thello\tPassage\nbye\tsee you\t\nhow?\tlike so\trow\n"
    err = _tsv_error(tmp_path, text)
    assert (err.line, err.column) == (4, 3) and "'row' is not a record kind" in err.message
    assert [q.kind for q in read_file("kb.tsv", text.rsplit("how?", 1)[0].encode()).qnas] == ["passage", "qna"]


def test_replica_language_names_map_to_codes_and_others_are_noted() -> None:
    from openqna.formats.replica_settings import language_code, read_settings_tsv

    assert [language_code(n) for n in ("English", "japanese", "Chinese_Simplified", "Chinese Traditional",
                                       "Serbian_Latin", "ja", "Klingon")] == ["en", "ja", "zh-Hans", "zh-Hant",
                                                                              "sr-Latn", "ja", None]
    settings, notes = read_settings_tsv(b"\xef\xbb\xbfKey\tValue\nlanguage\tKlingon\nDefaultAnswerForKB\tNope\n"
                                        b"EnableActiveLearning\ttrue\n", "r.zip/Settings.tsv")
    assert settings == ProjectSettings(default_answer="Nope")
    assert notes == ["r.zip/Settings.tsv: Language 'Klingon' is not one of QnA Maker's languages (English, Japanese, "
                     "Chinese_Simplified, ...); the project's language is left as it is",
                     "r.zip/Settings.tsv: not imported: EnableActiveLearning (openqna has no such settings)"]


def test_json_metadata_settings_are_checked_as_patch_checks_them() -> None:
    content = read_json(b'{"Metadata": {"Language": "de", "Description": "", "MultilingualResource": true,'
                        b' "KbId": "k", "Settings": {"DefaultAnswer": "Keine Antwort"}}, "Assets": {"Qnas": []}}')
    assert content.settings == ProjectSettings(description="", language="de", default_answer="Keine Antwort",
                                               multilingual=True, kb_id="k")
    with pytest.raises(FormatError, match=r"Metadata.Language: 'Japanese' is not a language code"):
        read_json(b'{"Metadata": {"Language": "Japanese"}, "Assets": {}}', "x.json")
    with pytest.raises(FormatError, match=r"Metadata.Settings.DefaultAnswer: is 301 characters long"):
        read_json(json.dumps({"Metadata": {"Settings": {"DefaultAnswer": "x" * 301}}, "Assets": {}}), "x.json")


def test_an_excel_export_refuses_a_cell_excel_cannot_hold() -> None:
    """openpyxl cuts a text longer than an Excel cell's 32,767 characters without a word: a QnA of 60 long metadata
    pairs came back from an export and import with 55 of them and one value cut.  The export is refused and says
    why; JSON keeps it whole."""
    metadata = {f"k{i:03d}" + "x" * 96: "v" * 500 for i in range(60)}
    content = KnowledgeBaseContent([QnA(["m"], "m", 77, metadata=metadata)])
    with pytest.raises(InvalidArgument, match=r"Metadata column\) would be 36,\d{3} characters long.*JSON or TSV"):
        export_bytes(content, "excel")
    assert read_file("kb.json", export_bytes(content, "json")[0]).qnas[0].metadata == metadata


def test_a_json_file_nested_too_deeply_is_a_format_error() -> None:
    """'[' * 100000: the upload's job failed with RecursionError, an internal error and a traceback in the log."""
    with pytest.raises(FormatError, match="nested too deeply"):
        read_file("d.json", ("[" * 100_000 + "]" * 100_000).encode())
