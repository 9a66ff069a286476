# Snakemake adapter: write the memory/time reports and plots from every stage's metrics.
from pathlib import Path

from pixelpipe.core.io import read_json
from pixelpipe.report.html import write_markdown_page
from pixelpipe.report.reports import write_reports
from pixelpipe.workflow_job import stage

sm = snakemake  # noqa: F821 (injected by Snakemake)
with stage(sm) as (log, _):
    out = write_reports(sm.input.metrics, sm.input.benchmarks, Path(sm.input.teacher_csv).parents[1],
                        read_json(sm.input.plan), Path(sm.output.summary).parent, tolerance=sm.params.report["tolerance_pct"],
                        time_factors_file=getattr(sm.output, "machine_time_factors", None))
    # the HTML report's pages: these reports and the deploy and evaluation stages' own
    for md, page in ((sm.output.summary, sm.output.summary_html), (sm.output.memory_md, sm.output.memory_html),
                     (sm.output.time_md, sm.output.time_html), (sm.input.deploy_md, sm.output.deploy_html),
                     (sm.input.evaluation_md, sm.output.evaluation_html)):
        write_markdown_page(md, page)
    log(f"report: {len(out['rows'])} stages compared; see {sm.output.summary}")
