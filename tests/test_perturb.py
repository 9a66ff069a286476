"""Text perturbations (pixelpipe.data.perturb): deterministic, realistic, drawable, and what they claim."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest

from pixelpipe.data import perturb as P
from pixelpipe.data.atlas import GlyphAtlas, clusters, undrawable
from pixelpipe.data.perturb_tables import LOOKALIKES, QUOTES

FONTS = ("DejaVuSans", "DejaVuSerif", "DejaVuSansMono")
MAX_PIXELS, INK_STEP = 8, 64  # the generator's criterion (tools/make_perturb_tables.py)
SAMPLES = {  # one plain sentence per default language, ASCII punctuation only
    "ar": "ذهبت إلى السوق صباحًا لشراء الخبز والحليب.",
    "az": "Azərbaycan dilində yazılmış kitabı oxumağa başladım.",
    "cs": "Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "da": "Den store blå sø ligger øst for byen, og æblerne er modne.",
    "de": "Die größte Straße der Stadt führt über den Fluss.",
    "el": "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας και μια όμορφη πόλη.",
    "en": "The weather was lovely, so we walked along the river.",
    "es": "El niño comió una manzana después de la lección de español.",
    "fa": "من هر روز صبح کتاب می\u200cخوانم و چای می\u200cنوشم.",
    "fr": "L'été dernier, nous sommes allés à la plage près de Nice.",
    "he": "הילדים הלכו לבית הספר בבוקר ושיחקו בחצר.",
    "hy": "Երեկ ես գնացի շուկա և գնեցի թարմ հաց.",
    "it": "Il treno per Firenze è partito in ritardo questa mattina.",
    "mk": "Вчера отидовме во градот и купивме свеж леб.",
    "nl": "De kinderen fietsen elke ochtend naar school in de regen.",
    "pl": "Zażółć gęślą jaźń, powiedział nauczyciel z uśmiechem.",
    "ru": "Вчера мы гуляли в парке и ели мороженое.",
    "uk": "Сьогодні ми їдемо до бабусі на її день народження.",
    "vi": "Hôm nay trời đẹp, chúng tôi đi dạo bên bờ sông.",
}


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def pixel_difference(atlas: GlyphAtlas, a: str, b: str) -> int:
    ia, ib = atlas.lookup(a), atlas.lookup(b)  # draw both before reading the stacked cells
    ca, cb = atlas.cells[ia].astype(int), atlas.cells[ib].astype(int)
    return int((np.abs(ca - cb) > INK_STEP).sum())


def script(ch: str) -> str:
    return unicodedata.name(ch).split()[0]


def test_registries_name_the_evaluated_and_the_augmenting_kinds():
    assert list(P.PERTURBATIONS) == ["lookalikes", "no_diacritics", "typos", "case", "typographic"]
    assert set(P.AUGMENTATIONS) == set(P.PERTURBATIONS) | {"punctuation_spacing", "digits_names"}
    for name, fn in P.AUGMENTATIONS.items():
        outs = {fn(SAMPLES["fr"], rng(s), "fr") for s in range(8)}
        assert outs - {SAMPLES["fr"]}, f"{name} never changed a French sentence"


@pytest.mark.parametrize("name", sorted(P.AUGMENTATIONS))
def test_every_kind_is_deterministic_for_a_seed_and_draws_only_drawable_text(name):
    fn = P.AUGMENTATIONS[name]
    for lang, text in SAMPLES.items():
        first = [fn(text, rng(seed), lang) for seed in range(5)]
        assert first == [fn(text, rng(seed), lang) for seed in range(5)], (name, lang)
        assert all(out.strip() for out in first)
        assert not undrawable("".join(first), FONTS), (name, lang, undrawable("".join(first), FONTS))


def test_every_table_output_is_drawable():
    produced = "".join(LOOKALIKES) + "".join(LOOKALIKES.values()) + "".join(P.KEYBOARD_VARIANTS.values())
    produced += "".join(P.BASE_FORMS.values()) + "".join("".join(q) for q in QUOTES.values())
    produced += "".join("".join(rows) for rows in P.KEY_ROWS)
    produced += "".join(P.WRAPPERS) + "".join(P.NAMES) + P.ARABIC_DIGITS + P.PERSIAN_DIGITS
    produced += "".join(digits + sep for digits, sep in P.NATIVE_DIGITS.values()) + "،؟؛։…–\u00a0\u202f"
    assert not undrawable(produced, FONTS)
    assert set(QUOTES) == set(SAMPLES)


def test_lookalike_pairs_are_other_scripts_and_draw_near_identical_cells():
    atlas = GlyphAtlas(FONTS, 12, 16, 8)  # the schema's default render settings
    diffs = {(a, b): pixel_difference(atlas, a, b) for a, alts in LOOKALIKES.items() for b in alts}
    assert all(script(a) != script(b) for a, b in diffs)
    assert max(diffs.values()) <= MAX_PIXELS, {k: d for k, d in diffs.items() if d > MAX_PIXELS}
    identical = sum(d == 0 for d in diffs.values())
    print(f"look-alike pairs: {len(diffs)}, pixel-identical: {identical}")
    assert identical >= 200 and len(diffs) >= 250  # measured: 206 of 282
    for a, b in [("a", "а"), ("o", "ο"), ("p", "р"), ("A", "Α"), ("H", "Н"), ("ə", "ә")]:
        assert b in LOOKALIKES[a] and diffs[a, b] == 0
    keyboard = {(a, b): pixel_difference(atlas, a, b) for a, b in P.KEYBOARD_VARIANTS.items()}
    print("Arabic/Persian keyboard pairs (px):", keyboard)
    assert keyboard["ي", "ی"] <= 1 and keyboard["ى", "ی"] == 0 and keyboard["٧", "۷"] == 0


def test_lookalikes_swap_every_eligible_letter_at_rate_one_and_keep_the_picture():
    atlas = GlyphAtlas(FONTS, 12, 16, 8)
    text = "Copy a price: 12 EUR. Привет, как дела? Αυτό είναι Ελληνικά."
    out = P.lookalikes(text, rng())
    assert len(out) == len(text)
    changed = [(a, b) for a, b in zip(text, out) if a != b]
    assert [a for a, _ in changed] == [c for c in text if c in LOOKALIKES]
    assert all(script(a) != script(b) for a, b in changed)
    assert sum(pixel_difference(atlas, a, b) for a, b in changed) <= 2 * len(changed)
    half = [P.lookalikes(text, rng(s), rate=0.5) for s in range(20)]
    share = np.mean([sum(a != b for a, b in zip(text, h)) for h in half]) / len(changed)
    assert 0.4 < share < 0.6
    assert P.lookalikes(text, rng(), rate=0.0) == text
    assert P.lookalikes("كتاب يكتب", rng()) == "کتاب یکتب"  # an Arabic word typed on a Persian keyboard


@pytest.mark.parametrize(("lang", "expected"), [
    ("cs", "Prilis zlutoucky kun upel dabelske ody."),
    ("pl", "Zazolc gesla jazn, powiedzial nauczyciel z usmiechem."),
    ("vi", "Hom nay troi dep, chung toi di dao ben bo song."),
    ("de", "Die grosste Strasse der Stadt fuhrt uber den Fluss."),
    ("fr", "L'ete dernier, nous sommes alles a la plage pres de Nice."),
    ("da", "Den store bla so ligger ost for byen, og aeblerne er modne."),
    ("az", "Azerbaycan dilinde yazilmis kitabi oxumaga basladim."),
    ("el", "Η Αθηνα ειναι η πρωτευουσα της Ελλαδας και μια ομορφη πολη."),
    ("ar", "ذهبت إلى السوق صباحا لشراء الخبز والحليب."),  # tanween dropped, the hamza of إلى kept
    ("uk", "Сьогодні ми їдемо до бабусі на її день народження."),  # ї is a key of its own
    ("en", "The weather was lovely, so we walked along the river."),
])  # fmt: skip
def test_drop_diacritics_types_as_a_plain_keyboard_does(lang, expected):
    assert P.drop_diacritics(SAMPLES[lang]) == expected


def test_drop_diacritics_on_decomposed_text_marks_and_keyboard_letters():
    assert P.drop_diacritics(unicodedata.normalize("NFD", "Tiếng Việt")) == "Tieng Viet"
    assert P.drop_diacritics("שָׁלוֹם") == "שלום"  # niqqud
    assert P.drop_diacritics("Ёлка, йогурт") == "Елка, йогурт"
    assert P.drop_diacritics("Łódź, Đà Nẵng, Œuvre, ŒUF, Ø") == "Lodz, Da Nang, OEuvre, OEUF, O"


def osa_distance(a: list[str], b: list[str]) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) between two cluster sequences."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def test_typos_change_about_rate_of_the_letters():
    gen, letters, edits = rng(), 0, 0
    for _ in range(40):  # ~32,000 letters over all 19 scripts and languages
        for text in SAMPLES.values():
            out = P.typos(text, gen, rate=0.05)
            letters += sum(c.isalpha() for c in text)
            edits += osa_distance(clusters(text), clusters(out))
    assert 0.04 < edits / letters < 0.06, edits / letters
    assert P.typos(SAMPLES["en"], rng(), rate=0.0) == SAMPLES["en"]


def test_typos_keep_marks_with_letters_leave_blank_texts_and_never_empty_a_text():
    assert P.typos("   ", rng(), rate=1.0) == "   "
    assert all(P.typos("a", rng(s), rate=1.0) for s in range(20))
    vowelled = "שָׁלוֹם עוֹלָם"
    for s in range(20):
        out = P.typos(vowelled, rng(s), rate=0.5)
        assert all(not unicodedata.combining(u[0]) for u in clusters(out))
    neighbours = {P.typos("g", rng(s), rate=1.0) for s in range(60)}
    # QWERTY keys around g, a doubled g, or g itself (deleting the only letter would empty the text)
    assert neighbours == set("ftyhbv") | {"gg", "g"}


def test_change_case_modes():
    text = "hello World. it's l'homme"
    assert P.change_case(text, rng(), "upper") == "HELLO WORLD. IT'S L'HOMME"
    assert P.change_case(text, rng(), "lower") == "hello world. it's l'homme"
    assert P.change_case(text, rng(), "title") == "Hello World. It's L'homme"
    assert P.change_case(text, rng(), "sentence") == "Hello world. It's l'homme"
    assert P.change_case(text, rng(), "swap") == "HELLO wORLD. IT'S L'HOMME"
    assert P.change_case("istanbul ılıq", rng(), "upper", lang="az") == "İSTANBUL ILIQ"
    assert P.change_case("İSTANBUL ILIQ", rng(), "lower", lang="az") == "istanbul ılıq"
    assert P.change_case("Η Αθήνα", rng(), "upper", lang="el") == "Η ΑΘΗΝΑ"
    assert {P.change_case(text, rng(s)) for s in range(40)} == {P.change_case(text, rng(), m) for m in P.CASE_MODES}
    with pytest.raises(ValueError, match="unknown case mode"):
        P.change_case(text, rng(), "shout")


def test_typographic_quotes_per_language():
    text = 'He said "it\'s fine"... then - "no," she said? \'Sure\'.'
    assert P.typographic(text, "en") == "He said “it’s fine”… then – “no,” she said? ‘Sure’."
    assert P.typographic(text, "de") == "He said „it’s fine“… then – „no,“ she said? ‚Sure‘."
    assert P.typographic(text, "fr") == ("He said «\u00a0it’s fine\u00a0»… then – «\u00a0no,\u00a0» she "
                                         "said\u202f? ‘Sure’.")
    assert P.typographic('"سلام, دنیا?"', "fa") == "«سلام، دنیا؟»"
    assert P.typographic("Բարեւ. Ինչպես ես.", "hy") == "Բարեւ։ Ինչպես ես։"


def test_punctuation_spacing_variants():
    text = "Hello, world. How are you?"
    outs = {P.punctuation_spacing(text, rng(s)) for s in range(60)}
    assert text not in outs
    assert "Hello , world. How are you?" in outs and "Hello,world. How are you?" in outs
    assert "Hello, world. How are you??" in outs and "(Hello, world. How are you?)" in outs
    assert {P.punctuation_spacing("Done.", rng(s)) for s in range(40)} >= {"Done", "Done .", '"Done."'}
    assert P.punctuation_spacing("  ", rng()) == "  "


def test_insert_digits_names_at_a_word_boundary():
    words = SAMPLES["de"].split(" ")
    tokens = set()
    for s in range(40):
        out = P.insert_digits_names(SAMPLES["de"], rng(s), "de").split(" ")
        n = len(out) - len(words)  # "1 250" is one token of two words
        token = next(" ".join(out[i:i + n]) for i in range(len(words) + 1) if out[:i] + out[i + n:] == words)
        tokens.add(token)
    assert tokens & set(P.NAMES) and any(t[0].isdigit() for t in tokens)
    arabic = {P.insert_digits_names(SAMPLES["ar"], rng(s), "ar") for s in range(60)}
    assert any(set(P.ARABIC_DIGITS) & set(t) for t in arabic)
