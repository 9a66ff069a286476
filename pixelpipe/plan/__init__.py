"""The resource planner: what every stage will need, from the config and corpus size alone
(`python -m pixelpipe.plan`). Imports the layers above; importing the package itself loads nothing.

Before anything runs, it predicts per stage the peak host RAM, the bytes written to disk, the peak GPU
memory of training (when the device is CUDA) and the wall time where a throughput figure is known.
StageMeter stores the prediction beside the measurement, the report compares them, the disk preflight
in rules/common.smk refuses a run whose disk peak does not fit, and the batch-size finder can ask
`memory.predict_train_memory` before trying a batch.

Rooms, in import order:
    shapes     the encoder's parameter shapes, from the model code on the meta device
    sizes      bytes of every artifact format (npy/npz/safetensors/ONNX exact, JSON/CSV stand-ins, ONNX graph fitted)
    memory     host RAM and GPU memory models and their fitted constants
    walltime   wall time from model FLOPs and a sustained throughput figure
    timefactors  this machine's factors on that time model, fitted from its runs (time_factors.file)
    schedule   the run's schedule: which jobs share the cores, each job's time with that sharing
    corpusfacts  the corpus rule's output read as it streams, without building the corpus (Faker sampled)
    lengths    tokens per trimmed batch: the expected longest text of a batch, and the longest of a split
    inputs     PlanSettings: the config as typed settings, built once at the entry (plan_workflow; plan_machine
               reads the hardware section alone), nothing below it reads the config; PlanInputs: the settings,
               corpus facts, charset, atlas, lengths, geometry and encoders every prediction reads
    stages     one predict_<stage>() per stage over PlanInputs
    workflow   plan_workflow: every job in DAG order and the disk per artifact group at its peak
    preflight  check_disk (a config) / check_plan_disk (a plan) / DiskSpaceError: the run refused before its first job
               when the disk peak does not fit
    cli        format_plan and main (`python -m pixelpipe.plan`)
"""
