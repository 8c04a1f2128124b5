"""The settings of QnA Maker's KB replica: ``Settings.tsv``, or the workbook's ``Settings`` sheet.

Both are two columns under a ``Key``/``Value`` header; QnA Maker writes (``SampleV2KBReplicaWithTsvs.zip``)::

    Key                         Value
    EnableActiveLearning        true
    DefaultAnswerforMultiturn   Choose any option
    EnableMultiTurnExtraction   True
    Language                    English
    DefaultAnswerForKB          No good match found in KB

Keys are matched in any case (QnA Maker itself mixes ``ForKB`` and ``forMultiturn``).  Two are project settings
here: ``DefaultAnswerForKB``, the default answer, and ``Language``, one of the names on QnA Maker's language list
(``English``, ``Chinese_Simplified``), kept as the code Azure's projects and openqna use (``en``, ``zh-Hans``).  The
others have no counterpart (active learning is always on; multi-turn extraction and its default answer belong to
QnA Maker's document extraction), and a language not on the list is not guessed: each is named in a note, which
the import prints, so nothing in the file is dropped unsaid.
"""

from __future__ import annotations

from collections.abc import Iterable

from openqna.formats.limits import LANGUAGE_CODE, MAX_DEFAULT_ANSWER_CHARS
from openqna.formats.qna_table import decode_text
from openqna.records import FormatError, ProjectSettings

# QnA Maker's languages ("Language support for a QnA Maker resource"), by the names its files use, and their codes
QNA_MAKER_LANGUAGES = {
    "arabic": "ar", "armenian": "hy", "bangla": "bn", "basque": "eu", "bulgarian": "bg", "catalan": "ca",
    "chinese_simplified": "zh-Hans", "chinese_traditional": "zh-Hant", "croatian": "hr", "czech": "cs",
    "danish": "da", "dutch": "nl", "english": "en", "estonian": "et", "finnish": "fi", "french": "fr",
    "galician": "gl", "german": "de", "greek": "el", "gujarati": "gu", "hebrew": "he", "hindi": "hi",
    "hungarian": "hu", "icelandic": "is", "indonesian": "id", "irish": "ga", "italian": "it", "japanese": "ja",
    "kannada": "kn", "korean": "ko", "latvian": "lv", "lithuanian": "lt", "malayalam": "ml", "malay": "ms",
    "norwegian": "nb", "polish": "pl", "portuguese": "pt", "punjabi": "pa", "romanian": "ro", "russian": "ru",
    "serbian_cyrillic": "sr-Cyrl", "serbian_latin": "sr-Latn", "slovak": "sk", "slovenian": "sl", "spanish": "es",
    "swedish": "sv", "tamil": "ta", "telugu": "te", "thai": "th", "turkish": "tr", "ukrainian": "uk", "urdu": "ur",
    "vietnamese": "vi",
}
DEFAULT_ANSWER_KEY = "defaultanswerforkb"
LANGUAGE_KEY = "language"


def language_code(name: str) -> str | None:
    """The code of a QnA Maker language name (``Japanese``, ``Chinese Simplified``, ``chinese_simplified``), or of a
    code written in its place (``ja``); None for anything else."""
    text = name.strip()
    code = QNA_MAKER_LANGUAGES.get("_".join(text.replace("-", " ").replace("_", " ").split()).lower())
    if code is None and LANGUAGE_CODE.fullmatch(text) and len(text.split("-")[0]) <= 3:
        return text
    return code


def read_settings_tsv(data: bytes, name: str) -> tuple[ProjectSettings, list[str]]:
    """``Settings.tsv``: the settings it gives, and notes on the rows that are not kept."""
    lines = decode_text(data, name).splitlines()
    rows = [(number, line.split("\t")) for number, line in enumerate(lines, 1) if line.strip()]
    return read_settings(((number, cells[0], cells[1] if len(cells) > 1 else "") for number, cells in rows), name)


def read_settings(rows: Iterable[tuple[int, str, str]], name: str) -> tuple[ProjectSettings, list[str]]:
    """Settings from ``(line, key, value)`` rows (a ``Key``/``Value`` header row among them is skipped)."""
    settings = ProjectSettings()
    notes: list[str] = []
    ignored: list[str] = []
    for line, key, value in rows:
        key, value = key.strip(), value.strip()
        folded = key.lower()
        if folded == "key" and value.lower() == "value" or not key:
            continue
        if folded == DEFAULT_ANSWER_KEY:
            if len(value) > MAX_DEFAULT_ANSWER_CHARS:
                raise FormatError(f"{key} is {len(value):,} characters long; the limit for a default answer is "
                                  f"{MAX_DEFAULT_ANSWER_CHARS}", file=name, line=line)
            settings.default_answer = value or None
        elif folded == LANGUAGE_KEY:
            settings.language = language_code(value)
            if settings.language is None and value:
                notes.append(f"{name}: Language {value!r} is not one of QnA Maker's languages (English, Japanese, "
                             "Chinese_Simplified, ...); the project's language is left as it is")
        else:
            ignored.append(key)
    if ignored:
        notes.append(f"{name}: not imported: {', '.join(ignored)} (openqna has no such settings)")
    return settings, notes
