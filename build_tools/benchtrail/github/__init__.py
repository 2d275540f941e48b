"""GitHub API access for benchtrail, all through PyGithub (``post``: the PR comment).

Absolute imports keep ``import github`` inside this package pointing at PyGithub, not here.
"""
