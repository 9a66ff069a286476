import pytest

from pixelpipe.config.resolve import ConfigError, load_config, resolve_config


def test_defaults_fill_every_section():
    cfg = resolve_config({})
    assert cfg["hardware"]["profile"] == "cpu"
    assert cfg["student"]["checkpoint"]["keep_last"] == 3
    assert cfg["engine"]["precision"] == "auto"


def test_repo_config_and_tiny_config_are_valid():
    assert load_config("config.yaml")["corpus"]["path"] is None
    assert load_config("tests/configs/tiny.yaml")["render"]["shard_size"] == 128


@pytest.mark.parametrize("bad,key", [
    ({"teacher": {"train": {"lr": -1}}}, "teacher.train.lr"),
    ({"render": {"channels": 2}}, "render.channels"),
    ({"engine": {"compile": "fast"}}, "engine.compile"),
    ({"teacher": {"modle": {}}}, "modle"),
    ({"corpus": {"splits": {"train": 0.5, "val": 0.1, "test": 0.1}}}, "corpus.splits"),
    ({"render": {"height": 30}}, "height"),
    ({"render": {"fonts": ["../../etc/passwd"]}}, "render.fonts.0"),
    ({"render": {"font_size": 20}}, "render.font_size"),
    ({"teacher": {"model": {"mixer_kernel": 4}}}, "teacher.model.mixer_kernel"),
    ({"student": {"model": {"num_capsules": 7}}}, "num_capsules"),
])
def test_bad_config_names_the_key(bad, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        resolve_config(bad)


def test_user_keys_win_over_the_profile():
    cfg = resolve_config({"hardware": {"profile": "h100"}, "teacher": {"model": {"dim": 384}}})
    assert cfg["teacher"]["model"]["dim"] == 384
    assert cfg["teacher"]["model"]["depth"] == 2  # from the profile
    assert cfg["render"]["lines"] == 4


def test_profile_applies_through_the_repo_config():
    """config.yaml must not pin model sizes, or a GPU profile could never apply."""
    cfg = load_config("config.yaml", {"hardware": {"profile": "h100"}})
    assert cfg["teacher"]["model"]["dim"] == 768 and cfg["teacher"]["model"]["L_cycles"] == 3
    assert cfg["render"]["lines"] == 4 and cfg["render"]["line_chars"] == 104 and cfg["corpus"]["num_samples"] == 200000
    cpu = load_config("config.yaml")
    assert cpu["teacher"]["model"]["dim"] < 768 and cpu["render"]["lines"] == 1 and cpu["render"]["line_chars"] == 96


def test_runtime_switches_round_trip_through_integer_resources():
    """What a rule declares as resources comes back to its script with the schema's types; an output-affecting
    switch is refused as a resource (it would never rerun the job)."""
    from types import SimpleNamespace

    from pixelpipe.config.resolve import engine_section, output_affecting, runtime_resources, runtime_switches

    engine = resolve_config({"engine": {"progress": False, "num_workers": 3, "ddp_processes": 2}})["engine"]
    resources = runtime_resources(engine)
    assert all(type(v) is int for v in resources.values()) and resources["engine_progress"] == 0
    back = engine_section(output_affecting(engine), SimpleNamespace(**resources))
    assert back == engine and all(type(back[k]) is type(engine[k]) for k in engine)
    assert runtime_switches(SimpleNamespace(**resources), ("threads",)) == {"threads": 0}
    with pytest.raises(ValueError, match="tf32"):
        runtime_resources(engine, ("threads", "tf32"))
