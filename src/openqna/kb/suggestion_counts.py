"""One count per suggested question, whether users sent it as feedback or a file brought it.

A QnA's active-learning suggestions have two homes: the users' questions sent as feedback (the store's feedback rows,
with who sent them and when) and the clusters an import or an edit brought (``QnA.suggested_questions``, QnA Maker's
SuggestedQuestions shape).  What the API lists, the console shows and an export writes is the two merged: a feedback
question that is also a stored suggestion adds its count to that suggestion's ``UserSuggestedCount`` rather than
making a second cluster of the same question (``feedback_counted_in``).  What comes back (an export imported again, a QnA
read and sent back by PATCH) holds the feedback in its counts, so the feedback is taken out of it before it is stored
(``feedback_taken_out``): a round trip changes nothing, and a suggestion is never counted twice.
"""

from __future__ import annotations

from typing import Any


def _fields(item: dict[str, Any]) -> dict[str, str]:
    return {k.lower(): k for k in item}


def _adjusted(clusters: list[dict], counts: dict[str, int], sign: int) -> tuple[list[dict], set[str]]:
    """``clusters`` with ``sign`` times ``counts`` (casefolded question -> count) added to the ``UserSuggestedCount``
    of the alternates that ask the same question (any case; counts stay at least 0); alternates left with no count
    at all are dropped, so are clusters left empty, and the totals a cluster carries are summed again.  Returns them
    and the questions of ``counts`` that matched an alternate."""
    out, matched = [], set()
    for cluster in clusters:
        fields = _fields(cluster)
        key = fields.get("alternatequestionlist")
        if key is None:
            out.append(cluster)
            continue
        alternates = []
        for alternate in cluster.get(key) or []:
            names = _fields(alternate)
            question = str(alternate.get(names.get("question", ""), "")).casefold()
            if question not in counts or question in matched:  # counted once, at its first place
                alternates.append(alternate)
                continue
            matched.add(question)
            user_key = names.get("usersuggestedcount", "UserSuggestedCount")
            user = max(0, int(alternate.get(user_key) or 0) + sign * counts[question])
            auto = int(alternate.get(names.get("autosuggestedcount", ""), 0) or 0)
            if user or auto:
                alternates.append({**alternate, user_key: user})
        if not alternates:
            continue
        kept = {**cluster, key: alternates}
        for total, count in (("totalautosuggestedcount", "autosuggestedcount"),
                             ("totalusersuggestedcount", "usersuggestedcount")):
            if total in fields:
                kept[fields[total]] = sum(int(a.get(_fields(a).get(count, ""), 0) or 0) for a in alternates)
        out.append(kept)
    return out, matched


def feedback_counted_in(clusters: list[dict], feedback: list[tuple[str, int]]) -> tuple[list[dict], list[tuple[str, int]]]:
    """``clusters`` with the ``feedback`` (question, count) that matches one of their questions counted in; and the
    feedback that matched none, which makes clusters of its own."""
    counts: dict[str, int] = {}
    for question, count in feedback:
        counts[question.casefold()] = counts.get(question.casefold(), 0) + count
    merged, matched = _adjusted(clusters, counts, +1)
    return merged, [(q, n) for q, n in feedback if q.casefold() not in matched]


def feedback_taken_out(clusters: list[dict], feedback: list[tuple[str, int]]) -> list[dict]:
    """``feedback_counted_in``'s inverse, for clusters that come back with the feedback counted in (an export imported
    again, a QnA read and sent back): the feedback taken out, a suggestion that only it made dropped."""
    counts: dict[str, int] = {}
    for question, count in feedback:
        counts[question.casefold()] = counts.get(question.casefold(), 0) + count
    return _adjusted(clusters, counts, -1)[0]
