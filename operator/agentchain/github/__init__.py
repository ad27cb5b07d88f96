"""The operator's GitHub side: the only code that talks to GitHub's API.

Like ``kube/`` for the API server and ``store/`` for Redis, this package is an I/O
boundary below the engine: ``apps.py`` holds the App identity (JWT, installation tokens
minted for one repository and declared permissions, revocation) and the few REST calls
write-back makes, through githubkit; ``errors.py`` turns every failure into one of a few
typed reasons the engine can act on (wait, retry, or report as bad key, not installed,
permission missing).  Nothing above this package sees an HTTP library's exception, and
``policy`` never imports it (import-linter).
"""
