"""The operator's GitHub side: the only code that talks to GitHub's API.

``apps`` holds the App identity (JWT, installation tokens minted for one repository and
declared permissions, revocation) and the REST calls write-back makes, through
githubkit; ``githuberrors`` turns every failure into one of a few typed reasons the
engine can act on. ``appruntime`` is the App side of one runtime; ``tokenminting`` the
job tokens; ``writeback`` and ``posting`` the chain's comment and Check Run;
``collaborators`` and ``commandreplies`` serve comment commands; ``githubrecords`` their
Redis records. Pure rules in ``rules``. Nothing above this package sees an HTTP
library's exception.
"""
