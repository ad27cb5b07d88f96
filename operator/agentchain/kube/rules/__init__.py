"""The Kubernetes side's pure rules: leader election over a Lease, after client-go. No I/O."""
