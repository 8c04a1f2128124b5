"""The fitted calibrations are data (``ranking/calibrations.json``) that the fit scripts write (``--write``) and the
ranker loads: the file loads, names only real scripts and entries, and a rewrite keeps what the fit did not make."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from openqna.ranking import calibrations
from openqna.ranking.calibrations import Calibration, load, save, served
from openqna.ranking.regime import RegimeTerms

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "calibrations.json"
    shutil.copy(calibrations.DATA_FILE, path)
    return path


def entries(path: Path) -> dict:
    return json.loads(path.read_text())["fits"]


def test_every_entry_is_written_by_a_script_that_writes_it():
    fits = entries(calibrations.DATA_FILE)
    for name, entry in fits.items():
        script = next(part for part in entry["fitted_by"].split() if part.startswith("scripts/"))
        text = (ROOT / script).read_text()
        assert "--write" in text and "calibrations.save(" in text, f"{script} does not write {name}"
        # the script names the entry, finds it by what it serves, or writes it as a part of an entry it writes
        part_of = [other for other, e in fits.items() if name in e["values"].values()
                   and e["fitted_by"].split()[-1] == entry["fitted_by"].split()[-1]]
        assert f'"{name}"' in text or ("entry_for" in text and entry.get("use")) or part_of, \
            f"{script} never writes {name}"


def test_the_served_fits_are_the_shipped_ones():
    fits = load()
    for embedder, name in served("faq").items():
        assert calibrations.calibration_for(embedder) is getattr(calibrations, name, None) or \
            calibrations.calibration_for(embedder) == fits[name]
    for embedder, name in served("passage").items():
        assert calibrations.passage_calibration(embedder) == fits[name]
    # the bundled model's parts are shared objects, as the ranker compares them by identity
    assert calibrations.CALIBRATION.sparse is calibrations.SPARSE and calibrations.CALIBRATION.regime is calibrations.REGIME
    assert calibrations.MPNET_CALIBRATION.lexical is calibrations.LEXICAL
    assert isinstance(calibrations.REGIME, RegimeTerms)
    # an embedder nobody fitted is ranked by the bundled model's fits
    assert calibrations.calibration_for("some-other-model") is calibrations.CALIBRATION


def test_rewriting_every_entry_unchanged_leaves_the_file_as_it_was(data):
    before = {n: repr(f) for n, f in load(data).items()}
    original = entries(data)
    for name, fit in load(data).items():
        entry = original[name]
        save(name, fit, fitted_by=entry["fitted_by"], use=entry.get("use"), embedder=entry.get("embedder"), path=data)
    assert {n: repr(f) for n, f in load(data).items()} == before
    assert entries(data) == original  # references stay references (CALIBRATION's "LEXICAL", "SPARSE", ...)


def test_a_refit_replaces_its_numbers_and_keeps_the_parts_it_did_not_fit(data):
    fits = load(data)
    refit = Calibration(w_qsim=1.5, w_asim=0.25, scale=0.5, shift=1.0, typical=20.0,
                        passages=Calibration(w_asim=9.0, scale=0.5))  # as fit_ranker.py makes it: no lexical etc.
    save("CALIBRATION", refit, fitted_by="scripts/fit_ranker.py", use="faq", embedder="minilm-l6-v2/onnx-fp32",
         path=data)
    after = load(data)
    assert after["CALIBRATION"].w_qsim == 1.5 and after["CALIBRATION"].w_qmean == 0.0  # nothing kept from before
    assert after["CALIBRATION"].lexical == fits["LEXICAL"] and after["CALIBRATION"].regime == fits["REGIME"]
    # its passages are an entry of their own ("PASSAGES"): that entry is what was refitted
    assert entries(data)["CALIBRATION"]["values"]["passages"] == "PASSAGES"
    assert after["PASSAGES"] == Calibration(w_asim=9.0, scale=0.5)
    assert after["CALIBRATION"].passages is after["PASSAGES"]
    assert after["MPNET_CALIBRATION"] == fits["MPNET_CALIBRATION"]  # other entries untouched


def test_a_new_embedders_fit_is_served_under_a_new_entry(data):
    name = calibrations.entry_for("faq", "tiny-model/onnx", path=data)
    assert name not in entries(data)
    fit = dataclasses.replace(load(data)["CALIBRATION"], w_qsim=3.0)
    save(name, fit, fitted_by="scripts/fit_ranker.py", use="faq", embedder="tiny-model/onnx", path=data)
    assert served("faq", data)["tiny-model/onnx"] == name
    assert load(data)[name] == fit
    assert entries(data)[name]["values"]["lexical"] == "LEXICAL"  # equal to an entry: written as its name


@pytest.mark.parametrize(("change", "message"), [
    (lambda e: e["CALIBRATION"]["values"].update(w_qsimm=1.0), "CALIBRATION has no field w_qsimm"),
    (lambda e: e["CALIBRATION"]["values"].update(lexical="LEXICON"), "names 'LEXICON', which is not an entry"),
    (lambda e: e["CALIBRATION"]["values"].update(regime="SPARSE"), "CALIBRATION.regime names a Calibration"),
    (lambda e: e["LEXICAL"]["values"].update(passages="LEXICAL"), "LEXICAL refers to itself"),
])
def test_a_broken_file_says_what_is_wrong(data, change, message):
    document = json.loads(data.read_text())
    change(document["fits"])
    data.write_text(json.dumps(document))
    with pytest.raises(ValueError, match=re.escape(message)):
        load(data)


def test_a_write_that_would_not_load_leaves_the_file_alone(data, monkeypatch):
    before = data.read_text()
    real = calibrations.load
    calls = []

    def failing(path=calibrations.DATA_FILE):
        calls.append(path)
        if Path(path).suffix == ".new":
            raise ValueError("broken")
        return real(path)

    monkeypatch.setattr(calibrations, "load", failing)
    with pytest.raises(ValueError, match="broken"):
        save("QUERY_TEXT", Calibration(w_qsim=1.0), fitted_by="scripts/fit_query_text.py", path=data)
    assert data.read_text() == before and not list(data.parent.glob("*.new"))
