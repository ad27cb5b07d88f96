"""Prompts' pure rules: assembly, the ``<chain-context>`` block and its linear-time
recogniser (``chaincontext``, ``textfold``), delegation (seed 000), whose word a store
entry is (``storetrust``) and the team anchor (seed 004). No I/O.
"""
