"""The dashboard under ``/ui/``: pages and buttons (``pages``), login sessions
(``logins``), the jobs list (``uilisting``), a job's page (``jobdetail``), a chain's tree
(``chainview``) and live updates (``live``, ``following``). Static files in ``static/``.
"""
