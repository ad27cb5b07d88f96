"""Flow control's pure rules: approvals and comment commands, budgets, concurrency
groups, retry delays and stop requests. Values in, values out: no I/O.
"""
