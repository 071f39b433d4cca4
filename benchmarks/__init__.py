"""agentlog's benchmarks: ``python -m benchmarks`` runs them all."""
