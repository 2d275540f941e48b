"""The stages of a benchmark run and the main job that calls them in order.

``export``: the checked export document (torch-free); ``measure``: export, compile, run, paired A/B and
the re-check of a comparison's suspects in paired A/B runs; ``report``: compare, comment, dashboard
(torch-free); ``job``: ``benchtrail pipeline``, export → compile → run → compare →
re-check → comment and dashboard → upload. The stages talk only
through the files of a run directory, so any of them can be rerun alone from downloaded artifacts.
Nothing is imported here, so that the torch-free stages stay torch-free.
"""
