# Snakemake adapter: predict every stage's memory, disk and time once, for the reports.
from pixelpipe.core.io import write_json
from pixelpipe.plan.timefactors import load_time_factors
from pixelpipe.plan.workflow import plan_machine, plan_workflow
from pixelpipe.workflow_job import stage

sm = snakemake  # noqa: F821 (injected by Snakemake)
with stage(sm) as (log, _):
    cfg = sm.params.config
    factors = load_time_factors(sm.params.time_factors, plan_machine(cfg))  # what this machine's earlier runs fitted
    plan = plan_workflow(cfg, cores=sm.resources.run_cores or None, time_factors=factors)
    write_json(sm.output[0], plan)
    log(f"planned {len(plan['stages'])} jobs; disk peak {plan['disk_peak_bytes']:,} bytes; run {plan['run']['wall_s']} s "
        f"on {plan['run']['machine']} (factors for: {', '.join(plan['run']['rules_with_factors']) or 'none'})")
