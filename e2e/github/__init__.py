"""A local stand-in for GitHub's REST API and git hosting, for tests (see README.md)."""

from e2e.github.standin import AppKey, GitHubStandIn, ViolationsFound

__all__ = ["AppKey", "GitHubStandIn", "ViolationsFound"]
