"""The held-out evaluation: the teacher, the student, the n-gram baseline and the deployed models (through the
Predictor) on real text no training row comes from. Imports the layers above; the planner and the reports read it.

Rooms:
    sets         the held-out sets (EvaluateSettings, heldout_sets, phrases) and their perturbed texts (perturbed)
    scorers      every model the run builds as a callable, texts -> predicted labels
    reference    py3langid, the optional reference, as a scorer (torch-free)
    accuracy     score: counts per model, set, perturbation and length bucket; accuracy tables of them
    calibration  heldout_calibration: the deployed model's probabilities against its accuracy (ECE, reliability
                 bins, the can't-tell trade-off), per length bucket
    report       the goals, evaluation.json, evaluation.md and the plot
"""
