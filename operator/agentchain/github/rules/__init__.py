"""The GitHub side's pure rules: which agents a delivery starts (``matching``), what the
operator may do on GitHub for a job (``githubscope``), the chain's comment and Check
Run (``progress``, ``markdown``) and comment commands' replies (``replies``). No I/O.
"""
