"""Glyph-atlas rendering: cells, clusters, scripts, layout, truncation, split shards and manifests."""

import numpy as np
import pytest
from faker import Faker

from pixelpipe.core import io
from pixelpipe.data.atlas import GlyphAtlas, clusters, draw_cluster, normalize, undrawable
from pixelpipe.data.sources import DEFAULT_LOCALES
from pixelpipe.data.fonts import available_fonts, load_face
from pixelpipe.data.render import Renderer, RenderSettings, render_split

ROCKET, CJK = "\U0001F680", "\u4e2d"
FONTS = ("DejaVuSans", "DejaVuSerif", "DejaVuSansMono")


def settings(**kw) -> RenderSettings:
    base = dict(fonts=FONTS, font_size=12, cell_height=16, cell_width=8, line_chars=12, lines=1, channels=1)
    return RenderSettings.from_section({**base, **kw})


def cell(renderer: Renderer, image: np.ndarray, k: int, line: int = 0) -> np.ndarray:
    s = renderer.settings
    return image[0, line * s.cell_height : (line + 1) * s.cell_height, k * s.cell_width : (k + 1) * s.cell_width]


def test_fonts_are_only_the_bundled_faces():
    assert set(FONTS) | {"Unifont"} <= set(available_fonts())
    for name in ("NoSuchFont", "../../../usr/share/fonts/x", "/etc/passwd"):
        with pytest.raises(ValueError, match="unknown font.*available:.*DejaVuSans"):
            load_face(name)


def test_a_faces_carried_coverage_is_its_cmap_while_the_file_is_the_same(monkeypatch):
    """A model file carries its TrueType faces' coverage (fonts.coverage): taken back (carry_coverage), a face
    knows the same code points without fontTools; a face whose installed file differs (size or SHA-256) is parsed;
    ranges that are not code point pairs are refused."""
    from pixelpipe.data import fonts

    parsed = {name: load_face(name).codepoints.array() for name in FONTS}
    carried = fonts.coverage([*FONTS, "Unifont"])
    assert set(carried) == set(FONTS)  # the bitmap font is shipped, not carried
    monkeypatch.setattr(fonts, "_CARRIED", {})
    fonts.carry_coverage({**carried, "DejaVuSerif": {**carried["DejaVuSerif"], "bytes": 1},
                          "DejaVuSansMono": {**carried["DejaVuSansMono"], "sha256": "0" * 64}})
    import fontTools.ttLib

    opened, original = [], fontTools.ttLib.TTFont
    monkeypatch.setattr(fontTools.ttLib, "TTFont", lambda path, **kw: opened.append(path.stem) or original(path, **kw))
    for name in FONTS:
        face = fonts.FontFace(name)
        np.testing.assert_array_equal(face.codepoints.array(), parsed[name])
    assert opened == ["DejaVuSerif", "DejaVuSansMono"]
    for bad in ([5, 3], [1, 2, 3], [0, 0x110000], [-1, 4]):  # reversed, unpaired, past Unicode
        with pytest.raises(ValueError, match="font coverage"):
            fonts.carry_coverage({"DejaVuSans": {**carried["DejaVuSans"], "ranges": bad}})


def test_atlas_cells_grow_in_one_array_and_keep_their_ids():
    """The atlas keeps its cells in one array with spare rows: drawing more glyphs than it has room for keeps
    every earlier cell and id; a cluster given again overwrites its own cell."""
    r = Renderer(settings())
    r.layout(["ab"])
    atlas = r.atlas
    first = atlas.cells.copy()
    many = "".join(map(chr, range(0x410, 0x450)))  # 64 Cyrillic letters: past the first spare rows
    r.layout([many[i : i + 12] for i in range(0, 64, 12)])  # a line holds 12
    assert len(atlas) == len(first) + 64 and (atlas.cells[: len(first)] == first).all()
    np.testing.assert_array_equal(atlas.cells_from(len(first), len(first) + 2),
                                  [draw_cluster(c, FONTS, 12, 16, 8) for c in many[:2]])
    assert atlas.add_cell("a", np.full((16, 8), 7, np.uint8)) == atlas.index["a"]
    assert (atlas.cells[atlas.index["a"]] == 7).all() and len(atlas) == len(first) + 64


def test_unifont_bitmaps_are_the_hex_files_lines():
    """The compact bitmap store gives each code point the bits of its own .hex line (8- and 16-pixel-wide glyphs),
    and its code point set answers `in`, `len`, iteration and a frozenset union as the TrueType faces' sets do."""
    import lzma

    from pixelpipe.data.fonts import BITMAP_FONTS, FONT_DIR

    face = load_face("Unifont")
    with lzma.open(FONT_DIR / f"{BITMAP_FONTS['Unifont']}.hex.xz", "rt", encoding="ascii") as handle:
        lines = dict(line.rstrip("\n").split(":", 1) for line in handle)
    for cp in (0x41, 0x5D0, 0x4E2D, 0xFFFD, max(int(k, 16) for k in lines)):
        digits = lines[f"{cp:04X}"]
        bits = np.unpackbits(np.frombuffer(bytes.fromhex(digits), np.uint8).reshape(16, -1), axis=1) * 255
        assert (face.glyph(cp) == bits).all() and face.glyph(cp).shape == (16, len(digits) // 4)
    assert len(face.codepoints) == len(lines) and 0x4E2D in face.codepoints and 0x10FFFF not in face.codepoints
    assert "A" not in face.codepoints  # code points are ints, as in a cmap's set
    assert frozenset().union(face.codepoints, {0x1F600}) == {int(k, 16) for k in lines} | {0x1F600}
    with pytest.raises(KeyError):
        face.glyph(0x10FFFF)


def test_shipped_unifont_arrays_are_a_fresh_parse_of_its_hex_file():
    """predict reads Unifont from the arrays tools/make_unifont_arrays.py wrote: the .hex file's own bytes."""
    from pixelpipe.data.fonts import BITMAP_FONTS, FONT_DIR, arrays_path, parse_hex

    cps, starts, bitmaps = parse_hex(FONT_DIR / f"{BITMAP_FONTS['Unifont']}.hex.xz")
    with np.load(arrays_path("Unifont")) as shipped:
        assert (shipped["cps"] == cps).all() and (shipped["starts"] == starts).all()
        assert (shipped["bitmaps"] == bitmaps).all() and len(cps) == 57_086


@pytest.mark.parametrize("categories", [("Mn", "Me", "Cf"), ("Cf",)])
def test_shipped_unicode_ranges_are_this_pythons(categories):
    """The ranges shipped in data/unicode_tables.py (tools/make_unicode_tables.py) are what a scan of this
    Python's unicodedata finds, and the layout uses them only under their Unicode version."""
    import unicodedata

    from pixelpipe.data import unicode_tables
    from pixelpipe.data.atlas import _category_ranges, scan_categories

    scanned = scan_categories(categories)
    assert _category_ranges(categories) == scanned
    if unicodedata.unidata_version != unicode_tables.UNIDATA_VERSION:
        pytest.skip(f"tables shipped for Unicode {unicode_tables.UNIDATA_VERSION}, this Python has "
                    f"{unicodedata.unidata_version}: the layout scans")
    assert unicode_tables.RANGES[categories] == scanned


def test_cells_are_drawn_once_deterministically_and_wide_glyphs_squeezed():
    a = draw_cluster("W", FONTS, 12, 16, 8)
    assert a.shape == (16, 8) and a.dtype == np.uint8 and a.max() > 0
    assert (draw_cluster("W", FONTS, 12, 16, 8) == a).all()
    assert a[:, 0].max() > 0 and a[:, -1].max() > 0  # "W" is 12 px wide at 12 px: squeezed to the full cell
    assert draw_cluster(" ", FONTS, 12, 16, 8).max() == 0
    atlas = GlyphAtlas(FONTS, 12, 16, 8)
    i = atlas.lookup("W")
    assert atlas.lookup("W") == i and len(atlas) == 2 and atlas.drawn == {"W"}  # blank cell + "W"


def test_normalization_and_clusters():
    assert normalize("  a \t b\n\nc ") == "a b c"
    assert normalize("e\u0301") == "\u00e9"  # NFC: one precomposed letter
    assert normalize("e\u0302\u0323") == "\u1ec7"  # Vietnamese, two marks: still one letter
    assert clusters("\u0628\u064e\u0627") == ["\u0628\u064e", "\u0627"]  # Arabic fatha joins its letter
    assert clusters("\u0645\u06cc\u200c\u062a") == ["\u0645", "\u06cc\u200c", "\u062a"]  # Persian ZWNJ joins
    assert clusters("abc") == ["a", "b", "c"]
    # layout-only invisibles (direction marks, soft hyphen, zero-width space, variation selectors) are removed
    assert normalize("a\u200eb\u00adc\u200bd\ufe0f \u2066e\u2069") == "abcd e"
    assert normalize("\u0645\u06cc\u200c\u062a") == "\u0645\u06cc\u200c\u062a"  # ZWNJ is spelling: kept


def test_marks_are_drawn_on_their_letter():
    plain, marked = draw_cluster("\u0628", FONTS, 12, 16, 8), draw_cluster("\u0628\u064e", FONTS, 12, 16, 8)
    assert (plain != marked).any() and marked.sum() > plain.sum()
    # the joiners that change spelling are drawn as visible marks: ZWNJ, ZWJ and neither give three cells
    yeh = [draw_cluster("\u06cc" + j, FONTS, 12, 16, 8) for j in ("", "\u200c", "\u200d")]
    assert len({c.tobytes() for c in yeh}) == 3
    assert (draw_cluster(" \u200c", FONTS, 12, 16, 8) != 0).any()  # a lone ZWNJ after a space is not a space


def test_glyphs_fit_their_cell():
    """Ink taller than the cell is scaled into it, never clipped; 16-pixel-wide bitmap glyphs (CJK, Indic) are
    squeezed into an 8-pixel cell; Unifont's 8x16 glyphs are copied as they are."""
    from pixelpipe.data.fonts import load_face

    tall = draw_cluster("\u1eaa", FONTS, 12, 16, 8)  # LATIN CAPITAL A WITH BREVE AND TILDE: 17+ rows at 12 px
    assert tall[0].max() > 0 and tall[-3:].max() == 0  # top row inked (scaled to fit), descender rows blank
    unifont = ("Unifont",)
    han = draw_cluster(CJK, unifont, 12, 16, 8)
    assert han.shape == (16, 8) and han.max() == 255 and (han > 0).sum() > 20
    a = draw_cluster("a", unifont, 12, 16, 8)
    glyph = load_face("Unifont").glyph(ord("a"))
    cols = np.flatnonzero(glyph.max(axis=0))
    assert (a[:, cols[0]:cols[-1] + 1] == glyph[:, cols[0]:cols[-1] + 1]).all()
    assert (draw_cluster("\u0430", unifont, 12, 16, 8) == a).all()  # Cyrillic a: a look-alike across scripts
    assert (draw_cluster("e\u0301", unifont, 12, 16, 8) != draw_cluster("e", unifont, 12, 16, 8)).any()


def test_atlas_sets_apart_clusters_of_one_script_that_draw_alike():
    """Arabic-Indic and Persian digits look the same in every font: the atlas gives the second a tag, so each keeps
    its own cell; across scripts nothing is tagged."""
    from pixelpipe.data.atlas import TAG_VALUE, check_distinct

    charset = [" ", "a", "\u0430", "\u0661", "\u06f1"]
    assert (draw_cluster("\u0661", FONTS, 12, 16, 8) == draw_cluster("\u06f1", FONTS, 12, 16, 8)).all()
    atlas = GlyphAtlas.from_clusters(charset, FONTS, 12, 16, 8)
    assert atlas.tagged == [("\u0661", "\u06f1")] and (atlas.cells[4][0] == TAG_VALUE).any()
    assert (atlas.cells[1] == atlas.cells[2]).all()
    check_distinct(charset, atlas.cells)
    with pytest.raises(ValueError, match="draw the same cell"):
        check_distinct(charset, np.stack([draw_cluster(c, FONTS, 12, 16, 8) for c in charset]))
    back = GlyphAtlas.from_dict(atlas.to_dict(), FONTS, 12)
    assert (back.cells == atlas.cells).all()


def test_undrawable_characters_are_named():
    assert undrawable("hello world", FONTS) == ""
    assert undrawable(f"x{CJK}y{ROCKET}", FONTS) == "".join(sorted(ROCKET + CJK))
    with pytest.raises(ValueError, match="no font"):
        draw_cluster(CJK, FONTS, 12, 16, 8)


@pytest.mark.parametrize("locale", DEFAULT_LOCALES)
def test_every_default_language_is_drawable(locale):
    fake = Faker(locale)
    fake.seed_instance(0)
    for _ in range(10):
        text = fake.sentence()
        assert undrawable(text, FONTS) == "", (locale, text)


def test_atlas_round_trip_and_tamper_check():
    r = Renderer(settings())
    r.layout(["Hello, мир! שלום"])
    d = r.atlas.to_dict()
    back = GlyphAtlas.from_dict(d, FONTS, 12)
    assert back.index.keys() == r.atlas.index.keys() and not back.drawn
    for k, i in r.atlas.index.items():
        assert (back.cells[back.index[k]] == r.atlas.cells[i]).all()
    bad = {**d, "clusters": list(d["clusters"])}
    bad["clusters"][1] = "Z"
    with pytest.raises(ValueError, match="checksum"):
        GlyphAtlas.from_dict(bad, FONTS, 12)
    with pytest.raises(ValueError, match="format"):
        GlyphAtlas.from_dict({**d, "format": "x"}, FONTS, 12)


@pytest.mark.parametrize("channels", [1, 3])
def test_layout_one_cell_per_character_in_reading_order(channels):
    r = Renderer(settings(channels=channels))
    text = "Hi שלום"  # Hebrew stays in logical order: its first letter is the leftmost of its cells
    images, full = r.render([text])
    assert images.shape == (1, channels, 16, 96) and images.dtype == np.uint8 and full.tolist() == [7]
    for k, ch in enumerate(text):
        assert (cell(r, images[0], k) == r.atlas.cells[r.atlas.index[ch]]).all()
    assert images[0, :, :, 7 * 8 :].max() == 0  # blank after the text
    if channels == 3:
        assert (images[0, 0] == images[0, 1]).all() and (images[0, 1] == images[0, 2]).all()


def test_several_lines_wrap_cell_by_cell_and_long_texts_are_truncated_and_counted():
    r = Renderer(settings(line_chars=4, lines=2))
    images, full = r.render(["abcdefghij"])
    assert images.shape == (1, 1, 32, 32) and full.tolist() == [10]
    assert (cell(r, images[0], 0, line=1) == r.atlas.cells[r.atlas.index["e"]]).all()
    assert (cell(r, images[0], 3, line=1) == r.atlas.cells[r.atlas.index["h"]]).all()  # "i", "j" cut


def test_same_text_same_image_whatever_the_batch():
    r1, r2 = Renderer(settings()), Renderer(settings())
    a = r1.render(["a  b", "zebra"])[0]
    b = r2.render(["zebra", "a b"])[0]
    assert (a[0] == b[1]).all() and (a[1] == b[0]).all()


def write_corpus(path, texts, labels=None):
    """A split's corpus file as the corpus rule writes it (text, label) and the charset of its texts."""
    import pandas as pd

    from pixelpipe.data.charset import build_charset, text_clusters

    labels = list(range(len(texts))) if labels is None else labels
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"text": texts, "label": labels}).to_parquet(path)
    return path, build_charset(text_clusters(texts), FONTS, inventory=False)


def _split(tmp_path, name, texts, n_shards=3, shard_size=4, **kw):
    d = tmp_path / name
    corpus, charset = write_corpus(d / "corpus.parquet", texts)
    paths = [d / f"shard-{i:05d}.npy" for i in range(n_shards)]
    manifest = render_split(corpus, charset, settings(**kw), paths, d / "manifest.json", shard_size=shard_size,
                            progress=False)
    return paths, manifest


def test_render_split_shards_and_manifest(tmp_path):
    texts = [f"sample {i} with words" for i in range(7)]  # 4 + 3 + 0 rows of 19 characters, 12 fit
    p, m = _split(tmp_path, "a", texts)
    assert [s["count"] for s in m["shards"]] == [4, 3, 0]
    rows = [np.load(x) for x in p]
    assert rows[2].shape == (0,) and rows[0].dtype.names == ("glyphs", "label", "length")
    assert rows[0]["glyphs"].dtype == np.uint16 and rows[0]["glyphs"].shape == (4, 12)
    assert m["format"] == "pixelpipe.cache/3" and m["count"] == 7 and m["render"] == settings().to_dict()
    assert rows[1]["label"].tolist() == [4, 5, 6] and rows[0]["length"].tolist() == [12] * 4
    assert m["truncated"] == 7 and m["longest_clusters"] == 19 and m["shortest_clusters"] == 12
    assert [s["sha256"] for s in m["shards"]] == [io.sha256_file(x) for x in p]
    assert io.read_json(tmp_path / "a" / "manifest.json") == m
    atlas = GlyphAtlas.from_dict(m["atlas"], FONTS, 12)
    assert set(atlas.index) == set("".join(texts)) | {" "}
    assert sum(m["glyph_counts"]) == 7 * 12 and m["glyph_counts"][atlas.index["w"]] == 7
    r = Renderer(settings(), atlas)
    assert (r.images(rows[1]["glyphs"][2:3].astype(np.int64)) == r.render([texts[6]])[0]).all()  # bit-exact
    _, m2 = _split(tmp_path, "b", texts, line_chars=24)
    assert m2["truncated"] == 0 and np.load(tmp_path / "b" / "shard-00000.npy")["length"].tolist() == [19] * 4
    logs = []
    corpus, charset = write_corpus(tmp_path / "c" / "corpus.parquet", texts)
    render_split(corpus, charset, settings(), p, tmp_path / "c.json", shard_size=4, progress=False, log=logs.append)
    assert any("7 of 7 texts (100.0 %)" in line and "render.line_chars" in line for line in logs)


def test_atlas_clusters_follow_what_is_added():
    """`clusters` is the glyph-id order, built once while nothing is added (predict asks twice a chunk) and again
    after a cluster is drawn; `to_dict` hands out a list of its own."""
    s = settings()
    atlas = GlyphAtlas.from_dict(GlyphAtlas(s.fonts, s.font_size, s.cell_height, s.cell_width,
                                            cells={"a": np.zeros((s.cell_height, s.cell_width), np.uint8)}).to_dict(),
                                 s.fonts, s.font_size)
    first = atlas.clusters
    assert first == [" ", "a"] and atlas.clusters is first
    assert atlas.lookup("b") == 2 and atlas.clusters == [" ", "a", "b"] and atlas.lookup("a") == 1
    names = atlas.to_dict()["clusters"]
    names.append("z")
    assert atlas.clusters == [" ", "a", "b"]


def test_glyph_ids_are_the_charset_positions_in_every_split(tmp_path):
    """Each split's atlas is drawn from the run's charset: a glyph id means one character everywhere."""
    charset = write_corpus(tmp_path / "all.parquet", ["abc xyz", "zz top"])[1]
    for name, texts in (("one", ["abc"]), ("two", ["zz top"])):
        corpus, _ = write_corpus(tmp_path / name / "corpus.parquet", texts)
        render_split(corpus, charset, settings(), [tmp_path / name / "s.npy"], tmp_path / name / "m.json",
                     shard_size=4, progress=False)
        atlas = GlyphAtlas.from_dict(io.read_json(tmp_path / name / "m.json")["atlas"], FONTS, 12)
        assert atlas.clusters == charset
        glyphs = np.load(tmp_path / name / "s.npy")["glyphs"][0]
        assert [charset[g] for g in glyphs[: len(texts[0])]] == list(texts[0])


def test_render_split_errors(tmp_path):
    with pytest.raises(ValueError, match="more than 3 shards"):
        _split(tmp_path, "x", ["a"] * 13)
    corpus, _ = write_corpus(tmp_path / "y" / "corpus.parquet", ["abc", "abd"])
    with pytest.raises(ValueError, match="charset.json is stale"):
        render_split(corpus, [" ", "a", "b", "c"], settings(), [tmp_path / "y" / "s.npy"], tmp_path / "y" / "m.json",
                     shard_size=4, progress=False)


def test_batch_layout_is_each_texts_clusters_looked_up():
    """The one-pass layout of many texts splits clusters as `atlas.clusters` does text by text (a mark at a text's
    start is a cluster of its own, a mark never joins the previous text), counts every cluster, and never looks up
    (draws) a cluster past the capacity."""
    r = Renderer(settings(line_chars=6))  # the fonts of `settings` draw no CJK
    texts = ["\u0301abc", "", "nq\u0301q\u0301", "x", "q\u0301x\u0323\u0304 שָׁלוֹם", "\u0301", "abcdef" + CJK,
             "q\u0301" * 8, "abcdef" + CJK + "\u0301"]  # q + acute has no precomposed form: a cluster of two
    ids, full = r.layout(texts)
    for i, text in enumerate(texts):
        cl = clusters(normalize(text))
        assert full[i] == len(cl)
        assert ids[i, : min(6, len(cl))].tolist() == [r.atlas.index[c] for c in cl[:6]]
        assert not ids[i, len(cl):].any()
    with pytest.raises(ValueError, match="draws"):  # no font of these draws CJK: past the 6 cells it was never drawn
        r.layout(texts, capacity=8)


def test_a_fitted_layout_is_as_wide_as_its_longest_text_in_whole_lines():
    """`fit`: a chunk laid out at a long text's capacity holds only the columns its longest text fills (whole lines
    of a layout of several, the model's input), the same ids as the full-width layout; a chunk of short texts
    stays narrow."""
    texts = ["abc", "abcdefghij" * 3, ""]
    for lines, want in ((1, 30), (2, 36)):  # lines of 12 cells: 30 characters fill 3 lines
        r = Renderer(settings(lines=lines, line_chars=12))
        ids, full = r.layout(texts, capacity=96, fit=True)
        wide, _ = r.layout(texts, capacity=96)
        assert ids.shape == (3, want) and full.tolist() == [3, 30, 0]
        np.testing.assert_array_equal(ids, wide[:, :want])
        assert r.layout(texts[:1], capacity=96, fit=True)[0].shape == (1, 3 if lines == 1 else 12)
        assert r.layout([""], capacity=96, fit=True)[0].shape == (1, 1 if lines == 1 else 12)


def test_fast_path_agrees_with_clusters_on_every_joining_character():
    """Soft hyphen, Arabic letter mark, Thaana and Myanmar marks join their base like any Mn/Me/Cf."""
    from pixelpipe.data.atlas import clusters, is_plain

    for mark in ("\u00ad", "\u061c", "\u07a6", "\u102d", "\U000e0020"):
        text = "a" + mark
        assert not is_plain(text) and clusters(text) == [text]
    assert is_plain("Guten Tag, שלום, привет") and clusters("ab") == ["a", "b"]


def test_iter_chunks_holds_one_row_group_not_the_file(tmp_path):
    """Streaming a split must not accumulate the file: pyarrow's pre-buffering kept every row group read so far
    (render's peak grew from 101 MB at 17,100 rows to 248 MB at 1.71 M); memory stays at about one row group."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pixelpipe.data.render import iter_chunks

    path = tmp_path / "split.parquet"
    rng = np.random.default_rng(0)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz "))
    with pq.ParquetWriter(path, pa.schema([("text", pa.string()), ("label", pa.string())])) as w:
        for _ in range(40):  # 40 row groups of 2,000 distinct texts: ~0.8 MB each, 32 MB in all
            texts = letters[rng.integers(0, len(letters), (2000, 400))].view("U400")[:, 0].tolist()
            w.write_table(pa.table({"text": texts, "label": ["en"] * 2000}))
    peak, rows = 0, 0
    for chunk in iter_chunks(path, ["text", "label"], 500):
        rows += len(chunk["text"])
        peak = max(peak, pa.total_allocated_bytes())
    assert rows == 80_000
    assert peak < 8 * 2**20, peak  # pre-buffered: ~32 MB
