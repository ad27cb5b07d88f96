"""What agents remember across jobs, in Redis: the shared context store (``contexts``, laid
out by ``entries``; SPEC §4, seed 000) and anchors (``anchors``; SPEC §6, seed 004).
Platform code beside ``store``: it imports ``store``'s keys and errors, nothing above.
"""
