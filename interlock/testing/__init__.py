"""Real HTTP fake upstreams on loopback, with fault injection, for tests, benchmarks and the demo."""
