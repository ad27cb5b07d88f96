"""Workspaces' pure decisions: the checkout and publish rules behind the in-pod CLI
(``checkouts``), what a job mounts and how its pod is built (``jobmounts``), and what a
step changed as the next step sees it (``stepchanges``). No I/O.
"""
