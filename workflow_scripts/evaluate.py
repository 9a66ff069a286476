# Snakemake adapter: score every model on the held-out real-text sets; write results/eval/.
from pathlib import Path

import torch

from pixelpipe.core.io import read_json
from pixelpipe.deploy.onnxmodel import verify_onnx
from pixelpipe.evaluate.accuracy import score
from pixelpipe.evaluate.calibration import heldout_calibration
from pixelpipe.evaluate.reference import common_languages, py3langid_scorer
from pixelpipe.evaluate.report import SHARED, write_outputs
from pixelpipe.evaluate.scorers import BaselineScorer, OnnxScorer, SharedLanguagesScorer, TorchScorer
from pixelpipe.evaluate.sets import EvaluateSettings, heldout_sets
from pixelpipe.workflow_job import stage

sm = snakemake  # noqa: F821 (injected by Snakemake)
settings = EvaluateSettings.from_section(sm.params.evaluate)
with stage(sm) as (log, meter):
    torch.set_num_threads(sm.threads)
    verify_onnx(sm.input.onnx, sm.input.export_metrics, "export_onnx")
    verify_onnx(sm.input.int8, sm.input.quantize_metrics, "quantize_onnx")
    labels = read_json(sm.input.labels)["labels"]
    scorers = {"teacher": TorchScorer(Path(sm.input.teacher[0]).parent, settings.batch_size),
               "student": TorchScorer(Path(sm.input.student[0]).parent, settings.batch_size),
               "onnx_fp32": OnnxScorer(sm.input.onnx), "onnx_int8": OnnxScorer(sm.input.int8),
               "ngram": BaselineScorer(sm.input.baseline, labels)}
    reference = py3langid_scorer(labels)
    if reference is not None:  # restricted to the languages it shares with the model, and with all of its own
        scorers["py3langid"], scorers["py3langid_all"] = reference, py3langid_scorer(labels, restricted=False)
    common = common_languages(reference.known, labels) if reference is not None else None
    if common is not None:  # the deployed model restricted to the same languages as py3langid
        scorers[SHARED] = SharedLanguagesScorer(scorers["onnx_fp32"], common)
    sets = heldout_sets(settings, labels, sm.params.fonts, sm.params.seed)
    scores = score(scorers, sets, settings.perturbations, sm.params.seed, log, common)
    calibration = heldout_calibration(scorers["onnx_fp32"].proba, labels, sets)
    write_outputs({"sources": settings.sources, "sets": {k: len(v) for k, v in sets.items()}, "rows": scores.rows,
                   "examples": scores.examples, "languages": scores.languages, "calibration": calibration,
                   "reference_languages": reference.known if reference is not None else [],
                   "missing": [] if reference is not None else ["py3langid (not installed)"]},
                  sm.output.json, sm.output.md, sm.output.png)
    log(Path(sm.output.md).read_text())
    meter.record(samples=sum(len(v) for v in sets.values()) * (1 + len(settings.perturbations)) * len(scorers))
