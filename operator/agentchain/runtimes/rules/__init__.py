"""Runtimes' pure rules: an AiAgent's ``spec.runtime`` made into its job's container
(``runtimecontainers``) and each CLI's argv, settings and output (``clis``). No I/O.
"""
