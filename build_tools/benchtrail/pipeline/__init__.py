"""The stages of a benchmark run and the main job that calls them in order: ``checked_export`` (the
checked export document, torch-free), ``measure_stages`` (export, compile, run, count, paired A/B,
re-check), ``report_stages`` (compare, comment, dashboard, distributions; torch-free) and ``job``
(``benchtrail pipeline``). The stages talk only through a run directory's files, so any can be rerun alone
from downloaded artifacts. Nothing is imported here, to keep torch-free stages so.
"""
