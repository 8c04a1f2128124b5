"""The analyzer: one function that every store's BM25 depends on."""

from openqna.index.analyze import Synonyms, analyze, exact_key, expand_with_synonyms


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


def test_synonyms_among_a_thousand_groups_expand_as_they_do_alone():
    """A project's groups are read once (``Synonyms``) and a question looks up only the groups its words may open:
    among 1,000 groups, some sharing a first word or a CJK run's first characters with the groups asked about, every
    expansion is the one those groups give alone, in the groups' order."""
    asked = [["マイナンバーカード", "マイナカード"], ["社保卡", "社会保障卡"], ["车", "汽车"], ["surface pen", "stylus"],
             ["fix problems", "troubleshoot", "diagnostic"], ["surface ペン", "タッチペン"], ["wifi", "wireless"]]
    groups = [[f"surface dock {i}", f"マイナ保険証{i}", f"社保{i}号"] if i % 3 == 0 else
              [f"fix {i}", f"车站{i}", f"problems {i}x"] if i % 3 == 1 else [f"word{i}", f"同义词{i}"]
              for i in range(1000)]
    for at, group in zip(range(50, 1000, 140), asked):
        groups.insert(at, group)
    synonyms = Synonyms(groups)
    cases = {
        "マイナカードの申請": "マイナカードの申請 マイナンバーカード",
        "社会保障卡丢了怎么办": "社会保障卡丢了怎么办 社保卡",
        "火车票多少钱": "火车票多少钱",
        "车": "车 汽车",
        "surface pens": "surface pens stylus",
        "resurface pen": "resurface pen",
        "Surface ペンの充電": "Surface ペンの充電 タッチペン",
        "how to troubleshoot the wifi": "how to troubleshoot the wifi fix problems diagnostic wireless",
        "マイナ保険証7": "マイナ保険証7",  # no group holds マイナ保険証 with 7
        "surface dock 300 and word302": "surface dock 300 and word302 マイナ保険証300 社保300号 同义词302",
        "no match here": "no match here",
    }
    for text, expanded in cases.items():
        assert expand_with_synonyms(text, synonyms) == expand_with_synonyms(text, groups) == expanded, text
