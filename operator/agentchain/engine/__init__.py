"""The engine applies pure decisions (``policy``) through I/O (``kube``, ``store``).

kopf handlers and the web layer call into it; it never decides anything that
``policy`` could decide without I/O.
"""
