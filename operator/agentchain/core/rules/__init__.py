"""The core's pure rules: deterministic names (``naming``), how one job ended
(``outcomes``), which pod or batch Job is the operator's (``ownedby``), what only the
operator may vouch for (``provenance``), the runner's exit codes (``runnerexits``) and
cycles in small graphs (``graphs``). No I/O.
"""
