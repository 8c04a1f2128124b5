"""The analyzer: one function that every store's BM25 depends on."""

from openqna.index.analyze import analyze, exact_key, expand_with_synonyms


def test_latin_words_are_stemmed_stopped_and_shingled():
    assert analyze("The batteries are charging") == ["batteri", "charg", "batteri charg"]
    assert analyze("Charged battery", bigrams=False) == ["charg", "batteri"]


def test_punctuation_and_hyphens_split_words_alike():
    assert analyze("COVID-19 vaccine?") == analyze("covid 19 vaccine")


def test_full_width_and_case_fold():
    assert analyze("ＳＵＲＦＡＣＥ Straße") == analyze("surface STRASSE")


def test_chinese_gets_bigrams_and_ideographs():
    terms = analyze("首都北京")
    assert {"首都", "都北", "北京", "首", "京"} <= set(terms)


def test_japanese_hiragana_unigrams_are_dropped_but_bigrams_kept():
    terms = analyze("東京の天気")
    assert "の" not in terms and {"東京", "天気", "京の", "の天"} <= set(terms)


def test_single_cjk_character_query_is_a_term():
    assert analyze("猫") == ["猫"]
    assert "猫" in analyze("黒猫がいる")


def test_cjk_breaks_latin_phrases():
    assert "surfac pro" not in analyze("Surface 電源 Pro")


def test_exact_key_ignores_case_and_punctuation():
    assert exact_key("  How do I, reset my PASSWORD?! ") == "how do i reset my password"


def test_synonym_expansion_is_symmetric_and_phrase_aware():
    groups = [["fix problems", "troubleshoot", "diagnostic"], ["wifi", "wireless"]]
    assert expand_with_synonyms("how to troubleshoot", groups) == "how to troubleshoot fix problems diagnostic"
    assert "troubleshoot" in expand_with_synonyms("I need to fix problems", groups)
    # matching is on analysed terms: stop words and inflection do not hide a synonym
    assert expand_with_synonyms("fix the problem", groups) == "fix the problem troubleshoot diagnostic"
    assert expand_with_synonyms("no match here", groups) == "no match here"


def test_synonyms_match_inside_chinese_and_japanese_text_written_without_spaces():
    """A CJK synonym matched only a whole question or a space-separated run: "マイナカードの申請" never read as
    "マイナンバーカード", since the analysed terms of a CJK run (its characters, then its bigrams) never lined up."""
    groups = [["マイナンバーカード", "マイナカード"], ["社保卡", "社会保障卡"], ["车", "汽车"], ["surface pen", "stylus"]]
    assert expand_with_synonyms("マイナカードの申請", groups) == "マイナカードの申請 マイナンバーカード"
    assert expand_with_synonyms("社会保障卡丢了怎么办", groups) == "社会保障卡丢了怎么办 社保卡"
    assert expand_with_synonyms("マイナンバーカードの申請", groups) == "マイナンバーカードの申請 マイナカード"  # both ways
    # a phrase crossing a script boundary matches at the CJK run's edge
    assert expand_with_synonyms("Surface ペンの充電", [["surface ペン", "stylus"]]) == "Surface ペンの充電 stylus"
    # one CJK character is a word only on its own: 车 is not read inside 火车 (a train)
    assert expand_with_synonyms("火车票多少钱", groups) == "火车票多少钱"
    assert expand_with_synonyms("车", groups) == "车 汽车"
    # Latin words still match whole, never inside another word
    assert expand_with_synonyms("surface pens", groups) == "surface pens stylus"
    assert expand_with_synonyms("resurface pen", groups) == "resurface pen"
