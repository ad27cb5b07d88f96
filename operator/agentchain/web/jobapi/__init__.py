"""The job API: jobs (``reads``, ``submitting``, ``waiting``), the store and anchors
(``storeapi``), flow control (``stoproutes``), a job's GitHub token (``tokenroute``), a
reviewer's pull request review (``reviewroute``) and
the AgentJob bodies the web side creates (``bodies``).
"""
