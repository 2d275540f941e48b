"""The payload of a GitHub ``pull_request`` event, as ``benchtrail configure`` reads it from
``GITHUB_EVENT_PATH``."""

def pr(body, labels=(), title="Title", **extra):
    return {"action": "opened", "pull_request": {"title": title, "body": body,
                                                 "labels": [{"name": n} for n in labels],
                                                 "head": {"sha": "a" * 40}}, **extra}
