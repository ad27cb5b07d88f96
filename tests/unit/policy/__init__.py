"""Unit tests of agentchain.policy: pure decisions, no cluster and no Redis."""
