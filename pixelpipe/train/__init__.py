"""Training and the frozen-teacher pass: the engine (Trainer), batch-size search, objectives (distillation),
the teacher/student stages, encoding, the n-gram baseline and the torchrun launcher. Imports the layers above.
"""
