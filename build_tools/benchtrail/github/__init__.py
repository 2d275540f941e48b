"""GitHub API access, all through PyGithub; absolute imports keep ``import github`` pointing at PyGithub."""
