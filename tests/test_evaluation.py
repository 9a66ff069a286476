"""The held-out evaluation: sets from held-out sources only, phrases, perturbations, buckets, tables, goals."""

import numpy as np
import pytest

from pixelpipe.evaluate.accuracy import BUCKETS, accuracy_table, bucket_of, score
from pixelpipe.evaluate.report import goals, render_markdown
from pixelpipe.evaluate.sets import EvaluateSettings, heldout_sets, perturbed, phrases

FONTS = ("DejaVuSans", "DejaVuSerif", "DejaVuSansMono")


def settings(**kw) -> EvaluateSettings:
    base = dict(sources=["udhr", "gettext-ui"], perturbations=["typos", "no_diacritics"], per_language=5, batch_size=64)
    return EvaluateSettings.from_section({**base, **kw})


def test_phrases_are_word_aligned_pieces_of_15_to_40_characters():
    text = "Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit Vernunft und Gewissen begabt."
    pieces = phrases(text, np.random.default_rng(0))
    assert pieces and all(15 <= len(p) <= 40 for p in pieces)
    words = text.split()
    for p in pieces:  # every piece is a run of whole words of the text
        first = words.index(p.split()[0])
        assert " ".join(words[first : first + len(p.split())]) == p


def test_sets_come_from_held_out_sources_only():
    sets = heldout_sets(settings(), ["de", "ru", "he"], FONTS, seed=0)
    assert set(sets) == {"prose", "phrases", "ui"}
    assert set(sets["prose"]["source"]) == {"udhr"} and set(sets["ui"]["source"]) == {"gettext-ui"}
    assert sets["prose"]["label"].value_counts().max() <= 5 and set(sets["ui"]["label"]) == {"de", "ru", "he"}
    assert len(sets["phrases"]) <= len(sets["prose"])  # at most one phrase per sentence
    with pytest.raises(ValueError, match="training source"):
        heldout_sets(settings(sources=["firefox"]), ["de"], FONTS, seed=0)


def test_perturbations_are_deterministic_and_clean_is_untouched():
    texts, langs = ["Příliš žluťoučký kůň úpěl ďábelské ódy"] * 3, ["cs"] * 3
    assert perturbed(texts, langs, "clean", 0) == texts
    assert perturbed(texts, langs, "no_diacritics", 0)[0] == "Prilis zlutoucky kun upel dabelske ody"
    a = perturbed(texts, langs, "typos", 0)
    assert a == perturbed(texts, langs, "typos", 0) and a != perturbed(texts, langs, "typos", 1)


def test_scores_by_bucket_and_goal_lengths_and_tables():
    sets = {"ui": __import__("pandas").DataFrame({"text": ["a" * 10, "b" * 30, "c" * 50, "d" * 150],
                                                   "label": ["x", "y", "x", "y"], "source": "s"})}
    right = lambda texts: ["x" if t[0] in "ac" else "y" for t in texts]  # noqa: E731
    wrong_long = lambda texts: ["x" if len(t) < 40 and t[0] == "a" else "y" for t in texts]  # noqa: E731
    scores = score({"good": right, "bad": wrong_long}, sets, [], seed=0, log=lambda m: None, common=["y"])
    table = accuracy_table(scores.rows, perturbation="clean", set="ui")
    assert table.loc["all", "good"] == 100.0 and table.loc["all", "bad"] == 75.0
    assert table.loc["40-100", "bad"] == 0.0 and table.loc[">40", "good"] == 100.0
    assert [b[0] for b in BUCKETS] == ["<20", "20-40", "40-100", ">100"] and bucket_of(40) == "20-40"
    assert scores.examples["bad"] == [{"set": "ui", "text": "c" * 50, "label": "x"}] and scores.examples["good"] == []
    # the texts of the languages a reference knows ("y"), counted apart; per language, what each was read as
    common = accuracy_table(scores.rows, perturbation="clean", set="ui", scope="common")
    assert common.loc["all", "bad"] == 100.0 and "40-100" not in common.index
    assert scores.languages["bad"] == {"x": {"n": 2, "correct": 1, "read_as": {"y": 1}},
                                       "y": {"n": 2, "correct": 2, "read_as": {}}}


def test_a_reference_in_its_own_codes_is_scored_by_its_label_key():
    """py3langid answers "zh" for both Chinese scripts and "no" for Bokmal: its key maps the true label."""
    from pixelpipe.evaluate.reference import reference_code

    sets = {"ui": __import__("pandas").DataFrame({"text": ["a", "b", "c"], "label": ["zh-Hant", "nb", "de"],
                                                   "source": "s"})}

    class Ref:
        label_key = staticmethod(reference_code)

        def __call__(self, texts):
            return ["zh", "no", "nl"]

    scores = score({"ref": Ref()}, sets, [], seed=0, log=lambda m: None)
    assert accuracy_table(scores.rows, perturbation="clean", set="ui").loc["all", "ref"] == 200 / 3
    assert scores.languages["ref"]["de"]["read_as"] == {"nl": 1}


def test_calibration_of_held_out_texts_bins_every_classified_text():
    import pandas as pd

    from pixelpipe.evaluate.calibration import heldout_calibration

    sets = {"ui": pd.DataFrame({"text": ["a", "b", "c", "d"], "label": ["x", "y", "x", "y"], "source": "s"})}
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [np.nan, np.nan]])
    cal = heldout_calibration(lambda texts: probs, ["x", "y"], sets)
    assert cal["texts"] == 3 and sum(b["n"] for b in cal["bins"]) == 3
    assert abs(cal["ece"] - (0.1 + 0.2 + 0.4) / 3) < 1e-9


def test_calibration_and_cant_tell_are_reported_per_length_bucket():
    import pandas as pd

    from pixelpipe.evaluate.calibration import heldout_calibration
    from pixelpipe.evaluate.report import _calibration_section, calibration_goals

    texts = ["kurz", "auch kurz", "a text of more than twenty characters", "and one of fifty characters, more or less, here."]
    sets = {"ui": pd.DataFrame({"text": texts, "label": ["de", "de", "en", "en"], "source": "s"})}
    probs = np.array([[0.6, 0.4], [0.97, 0.03], [0.01, 0.99], [0.02, 0.98]])  # labels de, en
    cal = heldout_calibration(lambda t: probs, ["de", "en"], sets)
    assert set(cal["buckets"]) == {"<20", "20-40", ">40", "all"} and cal["buckets"]["<20"]["texts"] == 2
    assert abs(cal["buckets"]["<20"]["ece"] - (0.4 + 0.03) / 2) < 1e-9  # one bin each: |1 - 0.6|, |1 - 0.97|
    at = {r["threshold"]: r for r in cal["buckets"]["<20"]["selective"]}
    assert at[0.0]["answered"] == 1.0 and at[0.95]["answered"] == 0.5 and at[0.95]["accuracy"] == 1.0
    assert [g["met"] for g in calibration_goals(cal)] == [False, True, False]  # ECE 21.5 %, 100 % right, 50 % answered
    md = "\n".join(_calibration_section({"calibration": cal}))
    assert "Can't tell" in md and "| <20 | 2 | 21.50 |" in md and "| **0.95** | 50.0 | 100.00 |" in md


def test_goals_compare_teacher_student_baseline_and_py3langid_per_bucket():
    def rows_for(model, correct, buckets=("<20", "20-40", "40-100", "15-40", ">40", "all")):
        return [{"model": model, "set": s, "perturbation": p, "bucket": b, "n": 1000, "correct": correct}
                for s in ("prose", "phrases", "ui") for p in ("clean", "lookalikes", "no_diacritics", "typos")
                for b in buckets]

    rows = (rows_for("onnx_fp32", 996) + rows_for("py3langid", 998) + rows_for("teacher", 997)
            + rows_for("student", 996) + rows_for("ngram", 990))
    got = {g["goal"]: g["met"] for g in goals(rows)}
    assert got["teacher >= student, all sets"] is True and got["teacher >= ngram, <20 chars"] is True
    assert got["onnx_fp32 >= ngram, 20-40 chars"] is True and got["onnx_fp32 >= py3langid, 40-100 chars"] is False
    assert got["onnx_int8 within 0.3 of student"] is None and got["onnx_fp32 within 0.3 of student"] is True
    assert "teacher >= student, >100 chars" not in got  # no text of that length: no goal
    md = render_markdown({"rows": rows, "sets": {"prose": 1, "phrases": 1, "ui": 1}, "sources": ["udhr"],
                          "goals": goals(rows), "calibration": {"ece": 0.0123, "texts": 5,
                                                                "bins": [{"low": 0.9, "high": 1.0, "n": 5,
                                                                          "confidence": 0.95, "accuracy": 0.94}]},
                          "languages": {"onnx_fp32": {"de": {"n": 4, "correct": 3, "read_as": {"nl": 1}}}}})
    assert "| onnx_fp32 >= py3langid, all sets | 99.60 | 99.80 | **no** |" in md
    assert "Expected calibration error 1.23 %" in md and "de -> nl 1" in md


def test_breadth_against_the_reference_language_by_language():
    import pandas as pd

    from pixelpipe.evaluate.report import breadth

    table = pd.DataFrame({"onnx_fp32": [99.0, 90.0, 95.0, 80.0], "py3langid": [98.0, 92.0, 95.0, 0.0]},
                         index=["de", "bs", "fr", "sco"])
    b = breadth(table, known=["de", "bs", "fr"])
    assert b["ahead"] == [("de", 1.0)] and b["behind"] == [("bs", -2.0)] and b["level"] == [("fr", 0.0)]
    assert b["only"] == [("sco", 80.0)]  # py3langid does not know it: listed with the model's accuracy alone


def test_a_scorer_of_one_scope_reads_only_its_texts_and_is_counted_there():
    """The deployed model restricted to the reference's languages (`onnx_fp32_shared`) is asked only about the
    texts of those languages, and counted only over them."""
    sets = {"ui": __import__("pandas").DataFrame({"text": ["a" * 10, "b" * 30, "c" * 50], "label": ["x", "y", "y"],
                                                   "source": "s"})}
    asked = []

    class Shared:
        scope = "common"

        def __call__(self, texts):
            asked.extend(texts)
            return ["y", "x"]

    scores = score({"shared": Shared(), "all": lambda t: ["x", "y", "y"]}, sets, [], seed=0, log=lambda m: None,
                   common=["y"])
    assert asked == ["b" * 30, "c" * 50]
    assert {r["scope"] for r in scores.rows if r["model"] == "shared"} == {"common"}
    common = accuracy_table(scores.rows, perturbation="clean", set="ui", scope="common")
    assert common.loc["all", "shared"] == 50.0 and common.loc["20-40", "shared"] == 100.0
    assert "shared" not in accuracy_table(scores.rows, perturbation="clean", set="ui").columns
    assert scores.languages["shared"] == {"y": {"n": 2, "correct": 1, "read_as": {"x": 1}}}
    assert scores.examples["shared"] == [{"set": "ui", "text": "c" * 50, "label": "y"}]


def test_the_shared_languages_goal_and_breadth_compare_both_restricted():
    import pandas as pd

    from pixelpipe.evaluate.report import breadth

    rows = [{"model": m, "set": s, "perturbation": "clean", "bucket": b, "n": 1000, "correct": c, "scope": scope}
            for m, c, scopes in (("onnx_fp32", 990, ("all", "common")), ("onnx_fp32_shared", 995, ("common",)),
                                 ("py3langid", 993, ("all", "common")))
            for scope in scopes for s in ("prose", "phrases", "ui") for b in ("<20", "all")]
    got = {g["goal"]: g["met"] for g in goals(rows)}
    assert got["onnx_fp32 >= py3langid, all sets (languages it knows)"] is False
    assert got["onnx_fp32_shared >= py3langid (both restricted to the languages they share), all sets"] is True
    assert got["onnx_fp32_shared >= py3langid (both restricted to the languages they share), <20 chars"] is True
    table = pd.DataFrame({"onnx_fp32": [97.0, 80.0], "onnx_fp32_shared": [99.0, None], "py3langid": [98.0, 0.0]},
                         index=["de", "sco"])
    b = breadth(table, known=["de"])
    assert b["ahead"] == [("de", 1.0)] and b["only"] == [("sco", 80.0)]  # de: 99 (restricted) against 98
