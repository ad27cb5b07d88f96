"""Workspaces: one git checkout per chain, shared by its jobs, published once.

On the operator's side: which workspace a job mounts and its volume and clone
credential (``attaching``), the chain's sealed records (``workspacerecords``), and the
branch and pull request when the chain completes (``publishing``). In the pod:
``inpod``, the ``agentchain workspace`` CLI. Pure decisions in ``rules``.
"""
