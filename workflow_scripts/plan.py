# Snakemake adapter: predict every stage's memory, disk and time once, for the reports.
from pixelpipe.core.io import write_json
from pixelpipe.plan.workflow import plan_workflow
from pixelpipe.scripts import stage

sm = snakemake  # noqa: F821 (injected by Snakemake)
with stage(sm) as (log, _):
    plan = plan_workflow(sm.params.config, cores=sm.resources.run_cores or None)
    write_json(sm.output[0], plan)
    log(f"planned {len(plan['stages'])} jobs; disk peak {plan['disk_peak_bytes']:,} bytes; run {plan['run']['wall_s']} s "
        f"on {plan['run']['machine']} (factors for: {', '.join(plan['run']['calibrated_rules']) or 'none'})")
