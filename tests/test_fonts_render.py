import numpy as np
import pytest
from faker import Faker

from pixelpipe import io
from pixelpipe.fonts import DEFAULT_FONTS, FontSet
from pixelpipe.render import RenderSettings, TextRenderer, render_split

ROCKET, CJK = "\U0001F680", "\u4e2d"


@pytest.fixture(scope="module")
def renderer():
    return TextRenderer(RenderSettings())


def test_fontset_coverage_and_unknown_font():
    fs = FontSet()
    assert fs.faces_for("Hello") == list(range(len(DEFAULT_FONTS)))
    assert fs.missing_chars("a b\n c") == ""
    assert fs.missing_chars(f"x{CJK}y{ROCKET}") == "".join(sorted(ROCKET + CJK))
    assert fs.faces[0].missing(f"a{CJK}") == {CJK}
    # every char is drawable by some face, but no single face draws both: still undrawable
    assert FontSet(["DejaVuSans", "DejaVuSansMono"]).missing_chars("\u2312\u05d0") == "\u2312"
    with pytest.raises(ValueError, match="NoSuchFont.*available:.*DejaVuSans"):
        FontSet(["NoSuchFont"])


def test_settings_round_trip():
    s = RenderSettings.from_config({"height": 24, "width": 96, "fonts": ["DejaVuSans"], "shard_size": 5}, seed=7)
    assert s.fonts == ("DejaVuSans",) and s.seed == 7
    assert RenderSettings(**s.to_dict()) == s
    with pytest.raises(ValueError, match="channels"):
        RenderSettings(channels=2)


@pytest.mark.parametrize("channels", [1, 3])
def test_shape_dtype(channels):
    img = TextRenderer(RenderSettings(channels=channels)).render("Hello world", 0)
    assert img.shape == (channels, 32, 128) and img.dtype == np.uint8
    if channels == 3:
        assert (img[0] == img[1]).all() and (img[1] == img[2]).all()


def test_ink_and_determinism(renderer):
    a = renderer.render("Hello world", 3)
    assert a.max() == 255 and (a == 0).mean() > 0.5  # white ink on black
    assert renderer.render("Hello world", 3).tobytes() == a.tobytes()
    assert TextRenderer(RenderSettings()).render("Hello world", 3).tobytes() == a.tobytes()
    assert renderer.render("Goodbye moon", 3).tobytes() != a.tobytes()
    assert renderer.render("    \n  ", 0).max() == 0


def test_overflow_and_wrapping(renderer):
    img, info = renderer.render_with_info("word " * 60, 1)
    assert info["overflow"] and info["size"] == 10 and img.max() == 255
    _, info = renderer.render_with_info("a" * 200, 1)  # one huge word is broken, not dropped
    assert info["overflow"] and len(info["lines"]) >= 1
    _, info = renderer.render_with_info("Hi", 1)
    assert not info["overflow"] and info["lines"] == ["Hi"]


def test_undrawable_raises(renderer):
    assert renderer.missing_chars(f"hi {ROCKET}") == ROCKET
    with pytest.raises(ValueError, match=CJK):
        renderer.render(f"hi {CJK}", 0)


@pytest.mark.parametrize("locale", ["ar_AA", "he_IL", "hy_AM", "el_GR", "ru_RU", "vi_VN", "fa_IR"])
def test_faker_scripts_drawable(renderer, locale):
    fake = Faker(locale)
    fake.seed_instance(0)
    for k in range(20):
        text = fake.sentence()
        assert renderer.missing_chars(text) == "", (locale, text)
        assert renderer.render(text, k).max() > 0


def _split(tmp_path, name, texts, workers, n_shards=3, shard_size=4):
    d = tmp_path / name
    paths = [d / f"shard-{i:05d}.npy" for i in range(n_shards)]
    manifest = render_split(texts, list(range(len(texts))), [f"r{i}" for i in range(len(texts))], RenderSettings(),
                            paths, d / "manifest.json", shard_size=shard_size, workers=workers, progress=False)
    return paths, manifest


def test_render_split_parallel_equals_serial(tmp_path):
    texts = [f"sample number {i} with words" for i in range(7)]  # 4 + 3 + 0 rows
    p1, m1 = _split(tmp_path, "serial", texts, workers=1)
    p2, m2 = _split(tmp_path, "parallel", texts, workers=2)
    for a, b in zip(p1, p2):
        assert a.read_bytes() == b.read_bytes()
    assert [s["count"] for s in m1["shards"]] == [4, 3, 0]
    assert [s["sha256"] for s in m1["shards"]] == [s["sha256"] for s in m2["shards"]]
    assert np.load(p1[2]).shape == (0, 1, 32, 128)
    assert m1["format"] == "pixelpipe.cache/1" and m1["count"] == 7 and m1["render"] == RenderSettings().to_dict()
    assert m1["shards"][1]["labels"] == [4, 5, 6] and m1["shards"][1]["ids"] == ["r4", "r5", "r6"]
    assert io.read_json(tmp_path / "serial" / "manifest.json") == m1
    r = TextRenderer(RenderSettings())
    assert (np.load(p1[1])[2] == r.render(texts[6], 6)).all()  # key = row index within the split


def test_render_split_errors(tmp_path):
    with pytest.raises(ValueError, match="do not fit"):
        _split(tmp_path, "x", ["a"] * 13, workers=1)
    with pytest.raises(ValueError, match=f"row 5: .*{CJK}"):
        _split(tmp_path, "y", ["a"] * 5 + [CJK] + ["b"] * 3, workers=2)
