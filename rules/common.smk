# Config validation and the small helpers the rules are wired with. Parsing imports no torch and runs no
# planner (`snakemake -n` and `--lint` stay fast and touch no device); the planner runs in the `plan` rule
# and, for the disk preflight, once in the main process when a run starts (onstart).
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from pixelpipe.config.resolve import ConfigError, output_affecting, resolve_config, runtime_resources
from pixelpipe.data.corpus import builtin_shortfall, planned_split_sizes, shard_count
from pixelpipe.data.corpusfile import SPLITS, CorpusError
from pixelpipe.config.stages import benchmark_files, metrics_files
from pixelpipe.data.encoded import dataset_fields
from pixelpipe.report.summary import accuracy_summary

try:
    _resolved = resolve_config(config)
except ConfigError as err:
    raise WorkflowError(f"pixelpipe: {err}") from None
config.clear()
config.update(_resolved)
validate(config, "../pixelpipe/config/schema.yaml")

try:  # a corpus file that cannot train (missing, unreadable, a column or labels missing, ...) fails here, in one line
    SPLIT_SIZES = planned_split_sizes(config["corpus"])
except CorpusError as err:
    raise WorkflowError(f"pixelpipe: {err}") from None
if workflow.is_main_process and (shortfall := builtin_shortfall(config["corpus"], SPLIT_SIZES)):  # once, not per job
    print(f"pixelpipe: warning: {shortfall}", file=sys.stderr)
N_SHARDS = {split: shard_count(n, config["render"]["shard_size"]) for split, n in SPLIT_SIZES.items()}
ENCODED_SPLITS = config["encode"]["splits"]
DATASET_FILES = [f"{field}.npy" for field in dataset_fields(config["encode"]["views"])]

STUDENT_FILES = multiext("results/student/", "model.safetensors", "config.json", "metrics.csv")
TEACHER_FILES = multiext("results/teacher/", "model.safetensors", "config.json", "metrics.csv")


wildcard_constraints:
    split="|".join(SPLITS),
    i=r"\d{5}",


def cache_shards(split):
    return [f"results/cache/{split}/shard-{i:05d}.npy" for i in range(N_SHARDS[split])]


def get_cache_shards(wildcards):
    return cache_shards(wildcards.split)


def get_encoded_shards(wildcards):
    return [f"results/encoded/{wildcards.split}/shard-{i:05d}.npz" for i in range(N_SHARDS[wildcards.split])]


def cache_inputs(splits=SPLITS):
    files = []
    for split in splits:
        files += cache_shards(split) + [f"results/cache/{split}/manifest.json"]
    return files


def all_metrics_files():
    """Every job's StageMeter JSON: what the report compares against the plan."""
    return metrics_files(N_SHARDS, ENCODED_SPLITS)


def all_benchmark_files():
    """Every job's Snakemake benchmark row: the report's `snakemake s` column."""
    return benchmark_files(N_SHARDS, ENCODED_SPLITS)


def machine_time_factors():
    """This machine's time factors file (time_factors.file; pixelpipe/plan/timefactors.py) as the report rule's
    output: update(), because the report merges its run's factors into what earlier runs (and results
    directories) left there, so Snakemake must not delete it before the job (it backs it up and restores it when
    the job fails). None when the key is null: nothing is written."""
    path = config["time_factors"]["file"]
    return {"machine_time_factors": update(path)} if path else {}


def engine_params():
    """The engine switches that can change a training job's output: params, so changing one reruns it."""
    return output_affecting(config["engine"])


def engine_runtime(*keys):
    """The runtime-only engine switches (all, or `keys`) as integer resources: declared, never a rerun."""
    return runtime_resources(config["engine"], keys or None)


def training_threads():
    """A training job's cores: 4, or one per DDP process where there are more (torchrun splits them)."""
    return max(4, config["engine"]["ddp_processes"])


def run_cores(wildcards):
    """This run's --cores, for the plan's schedule. A resource, evaluated only when the plan job is built, never a
    param read at parse time: commands given no --cores (--unlock, --report, --summary) still parse, and another
    --cores never reruns the plan. 0 = not given (the planner's default)."""
    try:
        return workflow.cores
    except WorkflowError:
        return 0


def training_gpus(wildcards):
    """GPUs a one-node training job asks for: one per DDP process on the GPU profiles (the plugin submits --gpus=N,
    a count for the whole job; several nodes ask per node instead: training_nodes)."""
    one_node = config["engine"]["nodes"] == 1
    return config["engine"]["ddp_processes"] if config["hardware"]["profile"] != "cpu" and one_node else 0


def training_nodes():
    """A training job's shape for snakemake-executor-plugin-slurm: `--nodes=1`, or engine.nodes nodes of one task each
    that the job starts itself with srun (`mpi`: the plugin's jobstep then runs the job in the batch step, not in a
    one-task srun; `tasks`, since `--ntasks=1` would shrink the job to one node), GPUs per node as GRES."""
    nodes = config["engine"]["nodes"]
    if nodes == 1:
        return {"nodes": 1}
    shape = {"nodes": nodes, "tasks": nodes, "mpi": "srun", "tasks_per_gpu": 0}  # 0: no --ntasks-per-gpu
    if config["hardware"]["profile"] != "cpu":
        shape["gres"] = f"gpu:{config['engine']['ddp_processes']}"
    return shape


def render_params():
    return {k: v for k, v in config["render"].items() if k != "shard_size"}


def corpus_file():
    """The user's corpus file (an input: editing it reruns what depends on it), or nothing for the built-in one."""
    return [config["corpus"]["path"]] if config["corpus"]["path"] else []


def disk_preflight():
    """Refuse to start when the planner's disk peak does not fit ($PIXELPIPE_FREE_BYTES overrides the free space)."""
    if not config["report"]["disk_preflight"]:
        return
    from pixelpipe.plan.preflight import DiskSpaceError, check_disk

    try:
        check_disk(config, "results")
    except DiskSpaceError as err:
        raise WorkflowError(f"pixelpipe: {err}") from None


def print_accuracy_summary():
    text = accuracy_summary("results")
    if text:
        print(text, file=sys.stderr)
