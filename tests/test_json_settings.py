"""The JSON settings (issue 40): any value is read or refused with one line naming the variable, never a traceback."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from openqna import settings
from openqna.auth.bearer import IssuerConfigError, parse_issuers

JSON = st.recursive(st.none() | st.booleans() | st.integers(-10, 10**6) | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)
FIELDS = ("issuer", "audience", "role_claim", "role_map", "algorithms", "jwks_uri", "required_scope", "leeway_seconds",
          "jwks_refresh_cooldown")
VALID = {"issuer": "http://127.0.0.1:8765", "audience": "api://qna", "role_map": {"a": "query"}}


@hypothesis_settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(FIELDS), value=JSON)
def test_any_value_of_an_issuer_field_is_read_or_named(field, value):
    """``{"audience": 5}`` once made `openqna serve` print ``TypeError: 'int' object is not iterable``."""
    raw = json.dumps([{**VALID, field: value}])
    try:
        parse_issuers(raw)
    except IssuerConfigError as err:
        assert "\n" not in str(err) and "OPENQNA_TOKEN_ISSUERS[0]" in str(err)


@hypothesis_settings(max_examples=200, deadline=None)
@given(value=JSON)
def test_any_issuer_list_is_read_or_named(value):
    try:
        parse_issuers(json.dumps(value))
    except IssuerConfigError as err:
        assert "\n" not in str(err) and "OPENQNA_TOKEN_ISSUERS" in str(err)


@pytest.mark.parametrize("setting", [settings.llm_model_map, settings.model_context])
@hypothesis_settings(max_examples=200, deadline=None)
@given(value=JSON)
def test_any_value_of_a_json_map_is_read_or_refused(setting, value):
    try:
        parsed = setting.parse(json.dumps(value))
    except ValueError as err:
        assert str(err).startswith("a JSON object")
        return
    assert isinstance(parsed, dict)
    if setting is settings.model_context:
        assert all(isinstance(v, int) and v >= 1 for v in parsed.values())
    else:
        assert all(isinstance(v, str) for v in parsed.values())


def test_a_refused_map_names_its_variable(monkeypatch):
    monkeypatch.setenv("OPENQNA_MODEL_CONTEXT", '{"*": "big"}')
    with pytest.raises(ValueError, match=r"^OPENQNA_MODEL_CONTEXT must be a JSON object of whole numbers"):
        settings.model_context()


def test_the_issue_s_example_is_one_line():
    with pytest.raises(IssuerConfigError, match=r"OPENQNA_TOKEN_ISSUERS\[0\]\.audience must be a string"):
        parse_issuers('[{"issuer":"http://127.0.0.1:8765","audience":5,"role_map":{"a":"query"}}]')
