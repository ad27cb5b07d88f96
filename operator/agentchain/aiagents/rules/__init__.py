"""What an AiAgent is, as pure rules: trigger resolution (``resolution``), which
repositories it serves (``repositories``) and which authors it admits
(``senderpolicy``). No I/O.
"""
