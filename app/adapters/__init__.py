"""Adapters: the outside world (Kubernetes, Prometheus, the identity provider), each
behind a protocol that a domain package owns."""
