import numpy as np
import pytest
import torch

from pixelpipe.data.augment import images_from_glyphs
from pixelpipe.model.encoder import EncoderConfig, TRMVisionEncoder, checksum_bits, flops_per_sample, token_mask
from tests._engine_utils import encoder_config, toy_atlas

CFG = encoder_config(H_cycles=2, L_cycles=2, num_capsules=3, num_classes=5, line_chars=6)


def model_for(cfg: EncoderConfig, seed: int = 0) -> TRMVisionEncoder:
    torch.manual_seed(seed)
    model = TRMVisionEncoder(cfg, toy_atlas()).eval()
    with torch.no_grad():  # away from the initialization, so every path is exercised with real numbers
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def texts(cfg: EncoderConfig, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Glyph rows of the toy atlas: random ink glyphs up to each length, blank (0) after it."""
    g = torch.Generator().manual_seed(5)
    glyphs = torch.randint(1, 8, (len(lengths), cfg.cells), generator=g)
    lengths_t = torch.tensor(lengths)
    return glyphs * (torch.arange(cfg.cells)[None] < lengths_t[:, None]), lengths_t


def test_output_shapes():
    model = model_for(CFG)
    out = model(*texts(CFG, [6, 3, 1, 5]))
    assert out["logits"].shape == (4, 5)
    assert out["sketches"].shape == (4, 3, 16)
    assert out["children"].shape == (4, 3, 4, 16)
    assert out["checksum_logits"].shape == (4, 3, 32)
    assert checksum_bits(out["checksum_logits"]).dtype == torch.bool


TABLES = dict(ngram_orders=3, ngram_bits=9, ngram_dim=6)


@pytest.mark.parametrize("tables", [False, True], ids=["", "tables"])
@pytest.mark.parametrize("core", ["recursive", "none"])
@pytest.mark.parametrize("stem,lines", [("pair", 1), ("cell", 1), ("pair", 2), ("cell", 2)])
def test_glyph_path_is_the_pixel_path(core, stem, lines, tables):
    """The stem is linear in the pixels: applied to the atlas and gathered, it computes what the convolution
    over the assembled image computes (uint8 or float images, lengths given or read from the ink); the n-gram
    tables hash the same keys from the image's cells as from the atlas's."""
    cfg = encoder_config(core=core, stem=stem, lines=lines, line_chars=3 if lines == 2 else 6, num_classes=5,
                         **(TABLES if tables else {}))
    model = model_for(cfg)
    glyphs, lengths = texts(cfg, [6, 4, 1])
    images = (images_from_glyphs(glyphs, model.atlas, cfg.lines) * 255).round().to(torch.uint8)
    with torch.no_grad():
        ref = model(glyphs, lengths)["logits"]
        torch.testing.assert_close(model(images, lengths)["logits"], ref, atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(model(images.float() / 255)["logits"], ref, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("tables", [False, True], ids=["", "tables"])
@pytest.mark.parametrize("core", ["recursive", "none"])
def test_padding_never_changes_the_output(core, tables):
    """Convolution, attention, pooling and the n-gram tables see zeros past a text's end: a text alone, trimmed
    to its length, gives what it gives in a padded batch (what lets batches be trimmed and predict bucket by
    length)."""
    cfg = encoder_config(core=core, line_chars=6, num_classes=5, **(TABLES if tables else {}))
    model = model_for(cfg)
    glyphs, lengths = texts(cfg, [6, 2, 4])
    with torch.no_grad():
        batch = model(glyphs, lengths)["logits"]
        alone = torch.cat([model(glyphs[i : i + 1, : int(n)], lengths[i : i + 1])["logits"]
                           for i, n in enumerate(lengths)])
        garbage = glyphs + 3 * (torch.arange(6)[None] >= lengths[:, None])  # ink past each end: still ignored
        torch.testing.assert_close(model(garbage, lengths)["logits"], batch)
    torch.testing.assert_close(alone, batch, atol=1e-5, rtol=1e-5)


def test_token_mask_with_a_lead_per_line():
    """2 lines of 3 cells, one lead token per line: a text of 4 cells holds both leads, 3 + 1 cells."""
    mask = token_mask(torch.tensor([4, 2]), lines=2, width=3, lead=1)
    assert mask.int().tolist() == [[1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0]]


def test_grad_free_cycles_keep_forward_and_cut_graph():
    model = model_for(CFG).train()
    glyphs, lengths = texts(CFG, [6, 3])
    ref = model(glyphs, lengths)["logits"]
    model.grad_free_cycles = True
    out = model(glyphs, lengths)["logits"]
    torch.testing.assert_close(ref, out)
    out.sum().backward()
    assert model.core.blocks[0].qkv.weight.grad is not None  # the last cycle still trains the core


def test_checksums_are_stable_for_similar_sketches():
    model = model_for(CFG)
    s = torch.randn(1, 3, 16)
    a = checksum_bits(s @ model.checksum_planes)
    b = checksum_bits((s + 1e-4 * torch.randn_like(s)) @ model.checksum_planes)
    assert (a == b).float().mean() > 0.95


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="stem"):
        TRMVisionEncoder(encoder_config(stem="patch"))
    with pytest.raises(ValueError, match="heads"):
        TRMVisionEncoder(encoder_config(dim=10, heads=3))
    with pytest.raises(ValueError, match="mixer_kernel"):
        TRMVisionEncoder(encoder_config(mixer_kernel=2))
    with pytest.raises(ValueError, match="core"):
        TRMVisionEncoder(encoder_config(core="mlp"))
    with pytest.raises(ValueError, match="mixer_kernel > 0"):
        TRMVisionEncoder(encoder_config(core="none", mixer_kernel=0))


@pytest.mark.parametrize("stem,lines", [("pair", 1), ("cell", 1), ("pair", 2)])
def test_one_token_per_cell_and_pairs_see_the_next_cell(stem, lines):
    """Tokens line up with characters: token k depends on cell k (and, with the pair stem, on cell k+1) only;
    the pair stem's lead token of a line reads the line's first cell."""
    cfg = encoder_config(stem=stem, lines=lines, line_chars=4, mixer_kernel=0)
    model = TRMVisionEncoder(cfg).eval()
    x = torch.zeros(1, 1, cfg.image_height, cfg.image_width)
    base = model.stem.tokens_from_images(x)
    lead = cfg.lead
    assert base.shape == (1, cfg.num_tokens, cfg.dim) == (1, (4 + lead) * lines, 16)
    x[..., 0:16, 8:16] = 1.0  # ink in cell 1 of line 0
    moved = (model.stem.tokens_from_images(x) - base).abs().sum(-1)[0] > 0
    expected = [False, True, False, False] if stem == "cell" else [False, True, True, False, False]
    assert moved.tolist()[: 4 + lead] == expected and not moved[4 + lead :].any()


def test_the_lead_token_reads_the_first_cell():
    cfg = encoder_config(line_chars=4, mixer_kernel=0)
    model = TRMVisionEncoder(cfg).eval()
    x = torch.zeros(1, 1, 16, 32)
    base = model.stem.tokens_from_images(x)
    x[..., 0:16, 0:8] = 1.0
    moved = (model.stem.tokens_from_images(x) - base).abs().sum(-1)[0] > 0
    assert moved.tolist() == [True, True, False, False, False]


def test_core_none_reads_only_the_ngram_features():
    cfg = encoder_config(core="none", num_classes=5)
    model = model_for(cfg)
    assert model.core is None and model.mixer.norm is None and cfg.head_features == 2 * cfg.mixer_hidden
    glyphs, lengths = texts(cfg, [4, 2])
    with torch.no_grad():
        ref = model(glyphs, lengths)["logits"]
        model.capsules.queries.add_(1.0)  # the capsules feed distillation only
        torch.testing.assert_close(model(glyphs, lengths)["logits"], ref)


def test_positions_are_a_switch():
    assert TRMVisionEncoder(encoder_config(positions=True)).pos_embed.shape == (1, 5, 16)
    assert TRMVisionEncoder(encoder_config(positions=False)).pos_embed is None


def test_flops_grow_with_recursion_and_length():
    more = EncoderConfig(**{**CFG.to_dict(), "H_cycles": 4})
    assert flops_per_sample(more) > flops_per_sample(CFG)
    assert flops_per_sample(CFG, tokens=3) < flops_per_sample(CFG)
    none = EncoderConfig(**{**CFG.to_dict(), "core": "none"})
    assert flops_per_sample(none) < flops_per_sample(CFG)


def test_table_buckets_are_the_numpy_reference():
    """Every n-gram of order 1..N of each text (padded with one blank each side) lands in the bucket the torch-free
    reference (what predict and the ONNX graph compute) gives it, no more and no fewer."""
    from pixelpipe.data.glyphkeys import cell_keys, text_buckets
    from pixelpipe.model.ngrams import ngram_buckets

    cfg = encoder_config(line_chars=6, num_classes=5, ngram_orders=4, ngram_bits=7, ngram_dim=4)
    model = model_for(cfg)
    glyphs, lengths = texts(cfg, [6, 3, 1])
    keys = cell_keys(toy_atlas().numpy(), 4)
    ids, valid = ngram_buckets(model.ngrams.keys[glyphs], lengths, model.ngrams.salts, 7)
    for b, n in enumerate(lengths.tolist()):
        ref = text_buckets(keys[glyphs[b, :n].numpy()], 4, 7)
        for order in range(4):
            assert ids[b, :, order][valid[b, :, order]].tolist() == ref[order].tolist()
            assert len(ref[order]) == max(0, n + 3 - (order + 1))


def test_word_buckets_are_the_numpy_reference_and_one_per_word():
    """With `ngram_words` each run of ink cells adds one more bucket after the n-grams': the reference's, in
    reading order (one slot a pair of cells: a word never ends at two neighbours), a word's bucket the same
    wherever it stands, and a different one for its glyphs in another order."""
    from pixelpipe.data.glyphkeys import cell_keys, text_buckets

    cfg = encoder_config(line_chars=9, num_classes=5, ngram_orders=3, ngram_bits=12, ngram_dim=4, ngram_words=True)
    ngrams = model_for(cfg).ngrams
    rows = [[1, 2, 0, 3, 4, 5, 0, 1, 2], [2, 1, 0, 0, 6, 0, 0, 0, 0], [0, 7, 7, 0, 0, 0, 0, 0, 0]]
    glyphs, lengths = torch.tensor(rows), torch.tensor([9, 5, 3])
    keys = cell_keys(toy_atlas().numpy(), 3)
    for cut in (9, 8):  # an odd and an even number of padded cells
        ids, valid = ngrams.buckets(ngrams.keys[glyphs[:, :cut]], lengths.clamp(max=cut))
        assert ids.shape == valid.shape == (3, 3 * (cut + 2) + (cut + 3) // 2)
        words = [ids[b, 3 * (cut + 2):][valid[b, 3 * (cut + 2):]].tolist() for b in range(3)]
        for b, n in enumerate(lengths.clamp(max=cut).tolist()):
            ref = text_buckets(keys[glyphs[b, :n].numpy()], 3, 12, words=True)
            assert len(ref) == 4 and words[b] == ref[3].tolist()
            flat = ids[b, : 3 * (cut + 2)].reshape(cut + 2, 3)
            for order in range(3):
                assert flat[:, order][valid[b, : 3 * (cut + 2)].reshape(cut + 2, 3)[:, order]].tolist() == \
                    ref[order].tolist()
    assert [len(w) for w in words] == [3, 2, 1] and len(ref[3]) == 1  # the last cut: "12 345 1", "21  6", " 77"
    assert words[0][0] != words[1][0]  # "12" and "21"
    whole = ngrams.buckets(ngrams.keys[glyphs], lengths)
    assert whole[0][0, 3 * 11:][whole[1][0, 3 * 11:]].tolist()[::2] == [words[0][0]] * 2  # "12" at start and end
    plain = model_for(encoder_config(line_chars=9, num_classes=5, ngram_orders=3, ngram_bits=12, ngram_dim=4))
    assert plain.ngrams.buckets(plain.ngrams.keys[glyphs], lengths)[0].shape == (3, 3 * 11)
    with pytest.raises(ValueError, match="ngram_words"):
        encoder_config(ngram_orders=1, ngram_bits=8, ngram_dim=4, ngram_words=True).validate()
    ngrams.train()  # training: the words' rows are in each text's bag and get the sparse gradient
    ngrams.pooled(ngrams.keys[glyphs], lengths).sum().backward()
    touched = set(ngrams.table.weight.grad.coalesce().indices()[0].tolist())
    word_rows = set(whole[0][:, 3 * 11:][whole[1][:, 3 * 11:]].tolist())  # "12", "345", "21", "6", "77"
    assert set(whole[0][whole[1]].tolist()) == touched and len(word_rows) == 5 and word_rows <= touched


def test_look_alike_letters_share_their_table_rows():
    """Keys are hashed from pixels: Latin "a" and Cyrillic "а" draw the same cell, so every n-gram holding one
    or the other is the same row; a different letter is another key."""
    from pixelpipe.data.atlas import draw_cluster
    from pixelpipe.data.glyphkeys import cell_keys

    fonts = ("DejaVuSans",)
    cells = np.stack([draw_cluster(c, fonts, 12, 16, 8) for c in ("a", "\u0430", "o", " ")])
    keys = cell_keys(cells, 4)
    assert (keys[0] == keys[1]).all() and (keys[0] != keys[2]).all()
    assert (keys[3] == 0).all()  # the blank: what PAD and the padding read


def test_tables_train_with_sparse_rows():
    """On CPU the table's gradient holds only the rows the batch's n-grams touch."""
    cfg = encoder_config(line_chars=6, num_classes=5, **TABLES)
    model = model_for(cfg).train()
    model(*texts(cfg, [6, 2]))["logits"].sum().backward()
    grad = model.ngrams.table.weight.grad
    assert grad.is_sparse and 0 < len(grad.coalesce().indices()[0].unique()) <= 2 * (6 + 2 + 1) * 3


def test_tables_gather_each_row_once_with_the_plain_bags_gradient():
    """Training gathers each distinct row once: same output and same summed row gradients as one embedding bag
    over every n-gram, with the rows already distinct and in order (the optimizer then skips coalescing)."""
    import torch.nn.functional as F

    from pixelpipe.model.ngrams import ngram_buckets
    from pixelpipe.train.optim import _distinct_rows

    cfg = encoder_config(line_chars=6, num_classes=5, **TABLES)
    ngrams = model_for(cfg).train().ngrams
    keys = torch.randint(0, 7, (3, 6, ngrams.orders)) * 1000003
    lengths = torch.tensor([6, 2, 4])
    got = ngrams.pooled(keys, lengths)
    (got * torch.arange(got.shape[1])).sum().backward()
    rows, values = _distinct_rows(ngrams.table.weight.grad)
    assert (rows[1:] > rows[:-1]).all()
    ids, valid = ngram_buckets(keys, lengths, ngrams.salts, ngrams.bucket_bits)
    counts = valid.flatten(1).sum(1)
    weight = ngrams.table.weight.detach().clone().requires_grad_()
    ref = F.embedding_bag(ids.flatten(1)[valid.flatten(1)], weight, torch.cumsum(counts, 0) - counts, mode="mean")
    (ref * torch.arange(ref.shape[1])).sum().backward()
    torch.testing.assert_close(got, ref)
    touched = weight.grad.abs().sum(1).nonzero().flatten()
    assert rows.tolist() == touched.tolist()
    torch.testing.assert_close(values, weight.grad[rows])


def test_ngram_dropout_leaves_n_grams_out_in_training_only(monkeypatch):
    """With ngram_dropout a training step's mean row is of a random part of the text's n-grams (about 1 - p of
    them, a fresh draw each call); evaluation reads them all, as with the dropout off."""
    from pixelpipe.model.ngrams import ngram_buckets

    plain = model_for(encoder_config(line_chars=6, num_classes=5, **TABLES)).ngrams
    dropped = model_for(encoder_config(line_chars=6, num_classes=5, ngram_dropout=0.5, **TABLES)).ngrams
    dropped.load_state_dict(plain.state_dict())
    keys = torch.randint(0, 7, (64, 6, plain.orders)) * 1000003
    lengths = torch.randint(1, 7, (64,))
    with torch.no_grad():
        torch.testing.assert_close(dropped.eval().pooled(keys, lengths), plain.eval().pooled(keys, lengths))
        torch.testing.assert_close(plain.train().pooled(keys, lengths), plain.eval().pooled(keys, lengths))
        torch.manual_seed(0)
        first = dropped.train().pooled(keys, lengths)
        assert not torch.allclose(first, plain.pooled(keys, lengths))
        assert not torch.allclose(first, dropped.pooled(keys, lengths))  # a fresh draw
    _, valid = ngram_buckets(keys, lengths, plain.salts, plain.bucket_bits)
    seen = []
    bag = torch.nn.functional.embedding_bag

    def counting(flat, *args, **kwargs):
        seen.append(flat.numel())
        return bag(flat, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "embedding_bag", counting)
    with torch.no_grad():
        dropped.pooled(keys, lengths)
    assert 0.4 < seen[0] / valid.sum().item() < 0.6
